"""Unstable and collapsed runs, read from a run's own evaluation history.

A run can end "complete", pass every check of :mod:`zslib.engine.collapse`, and still not be a run a table should
average silently: its Recall@1 rose and then fell while it trained. Two signs are read here from the history's
evaluation rows (``history.evals``: ``{"step": s, "<split>": {"R@1": ...}}``, the last row being the final
evaluation):

* **collapsed**: Recall@1 on the *training* classes (``seen``) ended at or below :data:`COLLAPSE_FRACTION` of its
  highest value during training. A network that once retrieved its own training classes and then lost most of that
  has collapsed, even when it did not reach chance (the quick profile's Adapt-Adv seeds fell from 0.28 and 0.47 to
  0.08 and 0.07, about three times chance);
* **unstable**: Recall@1 on the held-out split it is scored on (``unseen`` for a test run, ``val`` for a validation
  run) ended more than :data:`UNSTABLE_DROP` below its best evaluation *after* that best step (a frozen-regime
  Adapt-Adv seed went from 91.2% at step 150 to 68.8% at step 200).

A method that scores pairs instead of embeddings (:meth:`zslib.engine.method.Method.pair_evaluator`) has its final row
measured by that evaluator and the rows during training by the embeddings: the two do not compare, so for such a run
only the rows during training are read for the signs (they can still show a broken embedding), and its score itself
has one evaluation. A run with fewer than two evaluations of what it is scored on (:func:`evaluations`) shows no
sign of either kind because none could show: it is **not judged**, never called stable. The checks read only
recorded numbers, so they apply to every stored run (:class:`zslib.engine.store.Result`) as well as to a finished
training's history. :func:`stability_label` is the text of a table's stability column; :func:`broken` tells a label
that names diverged, collapsed or unstable seeds from "stable" and "not judged".
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from zslib.engine.method import Method
from zslib.engine.registry import get_method

__all__ = ["COLLAPSE_FRACTION", "UNSTABLE_DROP", "Stability", "seen_collapse", "held_out_fall", "run_stability",
           "stability_label", "unstable_runs", "evaluations", "broken", "NOT_JUDGED"]

#: Seen-class Recall@1 at or below this share of its peak during training is a collapse.
COLLAPSE_FRACTION = 1 / 3
#: A held-out Recall@1 that ends more than this (a fraction: 3 points) below its best evaluation is unstable.
UNSTABLE_DROP = 0.03
#: How a stability label begins when some seeds had too few evaluations to be judged (:func:`stability_label`).
NOT_JUDGED = "not judged"
#: The words of a label that name broken seeds.
_BROKEN = ("diverged", "collapsed", "unstable")


def _series(evals, split: str) -> list[tuple[int, float]]:
    out = []
    for row in evals or ():
        if not isinstance(row, dict) or not isinstance(row.get(split), dict):
            continue
        value = row[split].get("R@1")
        if isinstance(value, (int, float)):
            out.append((int(row.get("step", len(out))), float(value)))
    return out


def seen_collapse(evals, fraction: float = COLLAPSE_FRACTION) -> str | None:
    """Why the seen-class Recall@1 of ``evals`` counts as collapsed (it ended at or below ``fraction`` of its peak),
    or ``None``."""
    series = _series(evals, "seen")
    if len(series) < 2:
        return None
    peak_step, peak = max(series, key=lambda sv: sv[1])
    last_step, last = series[-1]
    if peak > 0 and last <= fraction * peak and last_step > peak_step:
        return (f"Recall@1 on the training classes fell from {peak:.4f} at step {peak_step} to {last:.4f} at step "
                f"{last_step} ({last / peak:.0%} of its peak)")
    return None


def held_out_fall(evals, split: str = "unseen", drop: float = UNSTABLE_DROP) -> str | None:
    """Why the ``split`` Recall@1 of ``evals`` counts as unstable (it ended more than ``drop`` below its best
    evaluation, after that best step), or ``None``."""
    series = _series(evals, split)
    if len(series) < 2:
        return None
    best_step, best = max(series, key=lambda sv: sv[1])  # the first of equal values
    last_step, last = series[-1]
    if last_step > best_step and best - last > drop:
        return (f"{split} Recall@1 fell from {100 * best:.1f}% at step {best_step} to {100 * last:.1f}% at step "
                f"{last_step} ({100 * (last - best):+.1f} points)")
    return None


@dataclass(frozen=True)
class Stability:
    """What :func:`run_stability` found for one run: the reasons, ``None`` where the sign is absent."""

    collapsed: str | None = None
    unstable: str | None = None
    diverged: str | None = None  # the run was stored as diverged (zslib.engine.collapse)

    @property
    def ok(self) -> bool:
        return not (self.collapsed or self.unstable or self.diverged)


def _scored_apart(config) -> bool:
    """Whether ``config``'s method scores its final evaluation with its own pair evaluator."""
    try:
        cls = get_method(config.method)
    except (KeyError, ValueError, AttributeError):
        return False
    return getattr(cls, "pair_evaluator", None) is not Method.pair_evaluator


def _held_out_split(run) -> str:
    config = getattr(run, "config", None)
    return "val" if getattr(config, "validation_fraction", 0) else "unseen"


def run_stability(run, split: str | None = None) -> Stability:
    """The signs of :func:`seen_collapse` and :func:`held_out_fall` for a stored ``run`` (its ``history.evals``),
    on ``split`` (default: ``val`` for a validation run, else ``unseen``). A run read through a metric prefix (an
    object with ``.run``, :class:`zslib.engine.choice.Prefixed`) is judged by the evaluations of the run it reads
    and by its own ``diverged``, which looks at the metrics it reads."""
    view, run = run, getattr(run, "run", run)
    evals = list(getattr(getattr(run, "history", None), "evals", None) or ())
    config = getattr(run, "config", None)
    if evals and config is not None and _scored_apart(config):
        evals = evals[:-1]  # the final row comes from the pair evaluator, the others from the embeddings
    return Stability(seen_collapse(evals), held_out_fall(evals, split or _held_out_split(run)),
                     getattr(view, "diverged", None) or None)


def evaluations(run) -> int:
    """How many evaluations of what ``run`` is scored on its history holds: every evaluation row for a method that
    embeds images; for a method scored by its own pair evaluator only the final row (the rows during training
    measure the embedding it reads, not its scores)."""
    run = getattr(run, "run", run)
    evals = list(getattr(getattr(run, "history", None), "evals", None) or ())
    config = getattr(run, "config", None)
    if evals and config is not None and _scored_apart(config):
        return 1
    return len(evals)


def broken(label: str) -> bool:
    """Whether a :func:`stability_label` names diverged, collapsed or unstable seeds (not "stable", not "not
    judged", not empty)."""
    return any(part.strip().startswith(_BROKEN) for part in (label or "").split(";"))


def unstable_runs(runs: Iterable, split: str | None = None) -> dict[str, list]:
    """``{"diverged" | "collapsed" | "unstable": [runs]}`` of ``runs``, each run under the first sign it shows
    (stored as diverged, then collapsed, then unstable); signs no run shows are left out."""
    out: dict[str, list] = {}
    for r in runs:
        s = run_stability(r, split)
        key = "diverged" if s.diverged else "collapsed" if s.collapsed else "unstable" if s.unstable else None
        if key:
            out.setdefault(key, []).append(r)
    return out


def stability_label(runs: Iterable, split: str | None = None) -> str:
    """A table's stability cell: ``"collapsed: 2 of 3 seeds; unstable: 1 of 3 seeds"`` where seeds broke;
    ``"not judged: 5 of 5 seeds evaluated once"`` where no seed broke but some had fewer than two evaluations
    (:func:`evaluations`), so that nothing could have shown; ``"stable"`` only where every seed was judged."""
    runs = list(runs)
    n = len(runs)
    found = unstable_runs(runs, split)
    parts = [f"{k}: {len(found[k])} of {n} seed{'s' if n != 1 else ''}" for k in _BROKEN if k in found]
    if parts:
        return "; ".join(parts)
    counts = [evaluations(r) for r in runs]
    unjudged = sum(c < 2 for c in counts)
    if not unjudged:
        return "stable"
    how = "evaluated once" if all(c == 1 for c in counts if c < 2) else "with fewer than two evaluations"
    return f"{NOT_JUDGED}: {unjudged} of {n} seed{'s' if n != 1 else ''} {how}"
