"""The one rule by which every chapter chooses a setting on validation classes, with "off" always a candidate.

A chapter that tunes a method (a weight lambda, a number of steps, a variant) trains each candidate setting on
the seen classes minus a class-disjoint validation split (``Config.validation_fraction``), for the same seeds,
and scores it on the validation classes. It must also train **"off"**: the same recipe with the method switched
off (lambda = 0, the adversary off, the baseline loss alone, or no training at all for a head's length). The
rule, fixed before any test number is read:

1. the candidate with the highest mean validation score over the seeds is the *leader* (ties go to the
   candidate listed first, so list the cheaper or simpler one first);
2. the leader is chosen only if it beats "off" **clearly**: the 95% interval of its per-seed paired
   differences from "off" lies above zero (:func:`zslib.engine.stats.paired`). Otherwise "off" is chosen.

A candidate with a run stored as diverged (:mod:`zslib.engine.collapse`) cannot lead: it is listed, with its
mean, but the leader is the best candidate whose every seed trained normally. When "off" itself diverged, nothing
can be compared with it and the rule refuses, naming the runs.

So a method that does not help on validation classes is reported as not chosen, and a chapter that trains it
anyway labels those runs an ablation. :func:`choose` applies the rule to stored runs; :class:`Choice` records
what was compared, so a chapter can state it in a sentence (:meth:`Choice.sentence`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zslib.engine.stats import Interval, diverged_runs, format_interval, interval, paired

__all__ = ["Choice", "choose", "OFF", "Prefixed", "VALIDATION_FRACTION", "VALIDATION_SEEDS", "TEST_SEEDS",
           "CONFIDENCE"]

#: The conventional key of the switched-off candidate.
OFF = "off"

# The protocol every choice and comparison of the book follows, declared here once and imported everywhere else.

#: The share of the seen classes held out (class-disjoint) as validation classes when a setting is chosen.
VALIDATION_FRACTION = 0.3

#: The seeds a choice is made with (the first three of the real profile's), unless a comparison asks for more.
VALIDATION_SEEDS = (0, 1, 2)

#: The seeds of a test row: the real profile's five.
TEST_SEEDS = (0, 1, 2, 3, 4)

#: The confidence of every interval the rule reads and of the detectable difference a set of seeds can call clear
#: (:func:`zslib.analysis.verdict.detectable`: the half-width of that interval).
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Choice:
    """The outcome of :func:`choose`: the chosen key, the leader by mean, every candidate's mean interval and the
    leader's paired difference from "off" (``None`` when "off" itself leads)."""

    chosen: object
    leader: object
    off: object
    means: dict
    leader_vs_off: Interval | None
    metric: str
    split: str
    diverged: tuple = ()  # candidates with a run stored as diverged: listed, never the leader

    @property
    def off_won(self) -> bool:
        return self.chosen == self.off

    def sentence(self, label=str, scale: float = 100.0) -> str:
        """One sentence that says what was chosen and why, from the numbers (``label`` names a key)."""
        m = self.means[self.leader]
        lead = f"{label(self.leader)} had the best mean validation {self.metric} ({m.mean * scale:.2f})"
        if self.diverged:
            lead += f" among the candidates that trained normally ({', '.join(map(label, self.diverged))} diverged)"
        if self.leader == self.off:
            return f"{lead}, so the method stays off: no setting beat switching it off."
        d = self.leader_vs_off
        diff = f"{format_interval(d, scale, 2, signed=True)} points over {label(self.off)}"
        if self.off_won:
            margin = d.high - d.mean  # the smallest mean difference these seeds' spread could call clear
            power = ("" if margin != margin else f" (with these {d.n} seeds a difference under about "
                     f"{margin * scale:.2f} points cannot be told from {label(self.off)})")
            return f"{lead}, {diff}: its interval holds 0, so the rule keeps {label(self.off)}{power}."
        return f"{lead}, {diff}, clearly above it, so {label(self.leader)} is chosen."


class Prefixed:
    """A stored run read through a metric prefix, as a candidate of :func:`choose`: ZSML's "off" is the same run's
    input features compared on the same images (the ``input`` metrics every ZSML result carries).

    Whether the view diverged is judged on its own numbers, not on the run's: a relation scorer that collapsed
    says nothing of the embedding it scored, whose metrics the view reads. The view counts as diverged when one of
    its metrics is not finite, or when its Recall@K are all equal on a split (ties: the sign of a collapsed
    embedding in :mod:`zslib.engine.collapse`)."""

    def __init__(self, run, prefix: str):
        self.run, self.prefix, self.config = run, prefix, run.config
        self.diverged = _collapsed_view(run.metrics, prefix)

    def metric(self, name: str = "R@1", split: str = "unseen") -> float:
        return self.run.metric(self.prefix + name, split)


def _collapsed_view(metrics: Mapping, prefix: str) -> str | None:
    """Why the metrics named ``prefix + name`` in ``metrics`` (split -> name -> value) show a collapse, or None."""
    for split, values in metrics.items():
        own = {name[len(prefix):]: float(v) for name, v in values.items()
               if name.startswith(prefix) and isinstance(v, (int, float))}
        broken = [name for name, v in own.items() if not math.isfinite(v)]
        if broken:
            return f"{prefix}{broken[0]} on the {split} classes is {own[broken[0]]}"
        recalls = [v for name, v in own.items() if name.startswith("R@")]
        if len(recalls) > 1 and len(set(recalls)) == 1:
            return f"every {prefix}Recall@K on the {split} classes is {recalls[0]:.4f}: the embeddings collapsed onto ties"
    return None


def choose(candidates: Mapping[object, Sequence], off: object = OFF, metric: str = "R@1", split: str = "val",
           confidence: float = 0.95) -> Choice:
    """Apply the rule of this module to ``candidates``: key -> the runs of that setting (one per seed, each with
    ``config.seed`` and ``metric(name, split)``, as :class:`zslib.engine.store.Result`). ``off`` must be a key.

    Every candidate must hold the same seeds as "off" (the comparison is paired); a candidate with other seeds
    is refused with the seeds named, as is a missing "off" and an "off" with a diverged run. A candidate with a
    diverged run is never the leader (:attr:`Choice.diverged` names it).
    """
    if off not in candidates:
        raise ValueError(f"choose() needs the switched-off candidate {off!r} among the candidates "
                         f"({list(candidates)}): 'off' is always a candidate")
    if len(candidates) < 2:
        raise ValueError("choose() needs at least one candidate besides 'off'")

    def seeds(runs):
        return sorted(int(r.config.seed) for r in runs)

    off_seeds = seeds(candidates[off])
    for key, runs in candidates.items():
        if seeds(runs) != off_seeds:
            raise ValueError(f"candidate {key!r} has seeds {seeds(runs)}, 'off' has {off_seeds}: train every "
                             "candidate on the same seeds")
    broken = {key: [getattr(r.config, "name", f"seed {r.config.seed}") for r in diverged_runs(runs)]
              for key, runs in candidates.items()}
    broken = {key: names for key, names in broken.items() if names}
    if off in broken:
        raise ValueError(f"'off' has diverged run(s) {broken[off]}: nothing can be compared with it; fix or retrain "
                         "the switched-off recipe before choosing")
    means = {key: interval([r.metric(metric, split) for r in runs], confidence) for key, runs in candidates.items()}
    healthy = [k for k in candidates if k not in broken]
    leader = max(healthy, key=lambda k: means[k].mean)  # max() keeps the first of equal keys
    if leader == off:
        return Choice(off, off, off, means, None, metric, split, tuple(broken))
    diff = paired(candidates[off], candidates[leader], metric, split, confidence)
    chosen = leader if diff.verdict == "up" else off
    return Choice(chosen, leader, off, means, diff.diff, metric, split, tuple(broken))
