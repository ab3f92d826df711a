"""Every paper's method under one protocol: the comparison that no single paper makes.

Each paper reports its method against its own baseline, on its own protocol. Here every method is trained and
scored the same way within a *regime* (a size of the book: ``quick`` on SynthParts, ``real`` on Flowers-102 with
the frozen EfficientNet-Lite0, and the adapted real regime when its runs exist), with the fields of
:data:`PROTOCOL_FIELDS` equal for every row:

* the split: the dataset's seen classes for training, a class-disjoint 30% of them
  (:data:`~zslib.engine.choice.VALIDATION_FRACTION`) held out to choose settings, the unseen classes for the test;
* the backbone, the embedding size, the batch (P classes x K images), the step budget and the learning rate of the
  regime's profile;
* the seeds: the profile's seeds for the test (five on the real profile), the first three for the choice.

For every method (an :class:`~zslib.analysis.entry.Entry`, declared by its paper's recipes and read from
:data:`~zslib.engine.registry.PAPERS` by :func:`all_entries`) the candidates of its main setting are trained on the
validation split beside **"off"**, the same recipe with the method switched off (the same loss alone, or the input
features compared without a learned relation for a method that learns one), and :func:`zslib.engine.choice.choose`
picks one: the best validation mean, only if clearly above "off". The chosen setting, and its baseline, are then
scored on the unseen classes. When "off" wins, the row still shows the test numbers of the method's best candidate,
labelled as an ablation, so that the reader sees what the method would have done. The words of every outcome sentence come from
:mod:`zslib.analysis.verdict`; broken seeds are marked from :mod:`zslib.engine.stability`.

:func:`compare` returns a :class:`Comparison` (one :class:`Row` per method) from stored or recorded runs (or trains
them, ``train=True``); :func:`comparison_table`, :func:`forest_plot` and :func:`findings` turn it into what the
chapter ``book/compare.ipynb`` shows; :func:`check_protocol` is what a test calls to make sure every row of a
comparison was produced by the same protocol.
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from zslib.analysis.verdict import (PAGE_BUDGET_REASON, POWER, POWER_METHOD, adaptation_sentence, change_words,
                                    holm, paired_p, power_of, power_size, power_words, row_sentence,
                                    seeds_words)
from zslib.analysis.entry import FINE_TUNED, Claim, Entry
from zslib.campaign.plan import RECIPES
from zslib.campaign.records import recorded_cpu_methods
from zslib.engine.choice import CONFIDENCE, OFF, VALIDATION_FRACTION, VALIDATION_SEEDS, Choice, choose
from zslib.engine.choice import Prefixed as _Prefixed
from zslib.engine.config import Config, config_hash
from zslib.engine.grid import MissingRunsError, choose_on_validation, run_grid
from zslib.engine.profile import ADAPTED_REAL, PROFILES
from zslib.engine.registry import PAPERS
from zslib.engine.runner import build_method, build_model
from zslib.engine.stability import broken, stability_label
from zslib.engine.stats import Interval, format_interval, interval, paired, summarize, verdict
from zslib.engine.train.optim import OptimSettings
from zslib.reported import context_frame

__all__ = ["PROTOCOL_FIELDS", "Entry", "all_entries", "Row", "Comparison", "regime_config",
           "validation_grid", "compare", "check_protocol", "comparison_table", "forest_plot", "findings",
           "REGIMES", "METRICS", "protocol_frame", "metric_agreement", "choice_sentences", "context_sentence",
           "mean_r1", "mean_metric", "adaptation_sentences", "method_table", "Claim", "adapted_order_sentence",
           "backbone_caption", "power_note", "seeds_note", "rule_status", "FINETUNED_CPU", "test_seeds",
           "trained_parameters", "correct", "multiplicity_note", "history_sentences", "RULE_COMMITS"]

#: The config fields that must be equal for every row of one regime.
PROTOCOL_FIELDS = ("profile", "dataset", "backbone", "pretrained", "embedding_dim", "image_size", "batch_classes",
                   "batch_per_class", "iterations", "lr", "feature_stages", "train_stages", "train_bn")

#: The fine-tuned regime at the CPU's size: the recorded runs of ``scripts/cpu_finetune.py --methods`` (the whole
#: network trained; each method's choice and test runs, :func:`zslib.campaign.records.recorded_cpu_methods`).
FINETUNED_CPU = "fine-tuned (CPU)"

#: The regimes of the chapter: name -> the profile they run on and a one-line description.
REGIMES = {
    "quick": ("quick", "SynthParts, a small CNN trained from scratch"),
    "real frozen": ("real", "Flowers-102, frozen ImageNet EfficientNet-Lite0, a head trained on its cached maps"),
    "real adapted": ("real", "Flowers-102, EfficientNet-Lite0 whose last MBConv block and 1x1 head conv train too"),
    FINETUNED_CPU: ("full", "Flowers-102, the whole EfficientNet-Lite0 (TensorFlow build) fine-tuned on small crops on "
                            "a CPU (recorded runs)"),
}

#: Config overrides of a regime on top of its profile (the adapted regime: :data:`zslib.engine.profile.ADAPTED_REAL`).
_REGIME_OVERRIDES = {"real adapted": ADAPTED_REAL}


def regime_config(regime: str) -> Config:
    """The base configuration of ``regime`` (the profile's sizes, seed 0); for the fine-tuned regime, the recorded
    baseline run's own config (its sizes are the CPU script's, not a profile's)."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; choose one of {list(REGIMES)}")
    if regime == FINETUNED_CPU:
        stage = recorded_cpu_methods()
        if not stage or not stage["methods"]:
            raise ValueError("the fine-tuned regime has no recorded runs: python scripts/cpu_finetune.py --methods all, "
                             "then python -m zslib record --profile full")
        return next(iter(stage["methods"].values()))["off"][0].config
    return Config.from_profile(REGIMES[regime][0], **_REGIME_OVERRIDES.get(regime, {}))


def test_seeds(regime: str) -> tuple[int, ...]:
    """The seeds ``regime``'s test rows are trained with: its profile's, or, for the fine-tuned regime, its script's
    (read from the recorded baseline runs)."""
    if regime == FINETUNED_CPU:
        return tuple(r.config.seed for r in next(iter(recorded_cpu_methods()["methods"].values()))["off"])
    return tuple(PROFILES[regime_config(regime).profile].seeds)


def all_entries() -> tuple[Entry, ...]:
    """Every paper's :class:`Entry` (:attr:`zslib.engine.paper.Paper.comparison`, built by its recipes), in the
    book's order, named as the book writes the method and by the paper's bibkey."""
    return tuple(replace(paper.comparison, name=paper.name, paper=paper.bibkey) for paper in PAPERS.values()
                 if paper.comparison is not None)


def __getattr__(name: str):  # PEP 562: ENTRIES is read from the registry when asked for
    if name == "ENTRIES":
        return all_entries()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def validation_grid(entry: Entry, base: Config, regime: str = "real frozen") -> dict:
    """``{label: config}`` of ``entry``'s candidates in ``regime`` on the validation split, "off" first (for ZSML,
    whose "off" is read from its own runs, no "off" config)."""
    val = base.replace(validation_fraction=VALIDATION_FRACTION)
    grid = {} if entry.off_metrics_prefix else {OFF: entry.build(val, None)}
    grid.update({label: entry.build(val, value) for label, value in entry.candidates_for(regime).items()})
    return grid


@dataclass
class Row:
    """One method's line of the comparison (all intervals in fractions; differences are paired by seed)."""

    method: str
    regime: str
    choice: Choice | None = None
    chosen: str = ""
    ablation: bool = False
    tested: str = ""
    runs: list = field(default_factory=list)
    baseline: list = field(default_factory=list)
    floor: object = None
    vs_baseline: dict = field(default_factory=dict)
    vs_floor: dict = field(default_factory=dict)
    seconds_per_step_ratio: float = float("nan")
    extra_parameters: int | None = None
    reported_gain: float | None = None
    reported_where: str = ""
    missing: str = ""
    label: str = ""  # the parts of the method the tested candidate runs
    val_runs: dict = field(default_factory=dict)  # the validation runs the choice read, "off" included
    val_diff: Interval | None = None  # the leader's paired validation difference from "off" (None: "off" led)
    val_power: float = float("nan")  # the true validation difference the rule would call clear 80% of the time
    val_seeds: int = 0
    val_power_of: str = ""  # what val_power's spread was pooled over
    val_identical: bool = False  # every candidate's validation runs equal off's on every seed
    test_power: float = float("nan")  # the same for the test runs' paired R@1 differences from the baseline
    stability: str = ""  # zslib.engine.stability.stability_label of the test runs
    base_stability: str = ""
    identical: bool = False  # every per-seed metric equal to the baseline's
    carried_over: str = ""  # in a regime that trains fewer candidates: where they came from
    unchanged: str = ""  # in the adapted regime: why the row repeats the frozen one (the method trains no stage)
    baseline_parameters: int | None = None  # the parameters the baseline trains (0: it trains nothing)
    claim_differs: tuple = ()  # how the paper's row differs from the variant tested (empty: the same variant)
    holm: dict = field(default_factory=dict)  # metric -> Holm-adjusted p over the page's tests (correct())
    family: int = 0  # how many tests that correction was over


@dataclass
class Comparison:
    regime: str
    rows: list
    floor: object = None


def _choose(entry: Entry, base: Config, regime: str, seeds, train: bool) -> tuple[Choice, dict]:
    """``entry``'s validation choice and its runs: the one rule through :func:`zslib.engine.grid.choose_on_validation`,
    except for a method whose "off" is read from its own runs (ZSML's input features on the same images)."""
    if not entry.off_metrics_prefix:
        candidates = {label: entry.build(base, value) for label, value in entry.candidates_for(regime).items()}
        return choose_on_validation(candidates, off=entry.build(base, None), seeds=seeds,
                                    validation_fraction=VALIDATION_FRACTION, train=train)
    val = run_grid(validation_grid(entry, base, regime), seeds=seeds, stored_only=not train)
    leader = max(val, key=lambda k: np.mean([r.metric("R@1", "val") for r in val[k]]))
    val = {OFF: [_Prefixed(r, entry.off_metrics_prefix) for r in val[leader]], **val}
    return choose(val), val


def _floor(base: Config, train: bool):
    try:
        return run_grid({"floor": base.replace(method="pretrained")}, seeds=(0,), stored_only=not train)["floor"][0]
    except MissingRunsError:
        return None


def _runs(grid: dict, seeds, train: bool) -> dict | None:
    try:
        return run_grid(grid, seeds=seeds, stored_only=not train)
    except MissingRunsError:
        return None


#: What of the network each regime trains, in the words of :attr:`zslib.analysis.entry.Claim.trained` (a paper's
#: row matches a regime's only where these are equal).
TRAINED = {"quick": "a small CNN trained from scratch", "real frozen": "a head on the frozen network",
           "real adapted": "the last MBConv block and 1x1 head conv adapted, the rest frozen",
           FINETUNED_CPU: FINE_TUNED}


def _claim(row: Row, claim, config: Config) -> None:
    """The paper's gain for the variant ``row`` tests (a :class:`~zslib.analysis.entry.Claim`), where it is printed
    and what separates the paper's row from the tested ``config`` (or, without a like-for-like row, ``None`` and
    the reason)."""
    if isinstance(claim, Claim):
        row.reported_gain, row.reported_where = claim.gain(), claim.where()
        row.claim_differs = claim.differences(config, TRAINED[row.regime])
    else:
        row.reported_gain, row.reported_where = None, str(claim)


def _power(row: Row, val: dict) -> None:
    """The power of ``row``'s choice and of its test comparison (:func:`zslib.analysis.verdict.power_of`, at
    :data:`~zslib.analysis.verdict.POWER`): on validation from the paired differences from "off" pooled over every
    candidate that trained differently from it (a candidate identical to "off" on every seed is passed over; when
    all are, the row says so instead of a figure), on the test from the paired R@1 differences from the baseline."""

    moved = []
    for k in (k for k in val if k != OFF):
        d = paired(val[OFF], val[k], "R@1", "val").differences
        row.val_seeds = len(d)
        if any(x != 0 for x in d):
            moved.append((k, d))
    row.val_diff = row.choice.leader_vs_off
    row.val_identical = not moved
    row.val_power = power_of([d for _, d in moved])
    n = len(moved)
    row.val_power_of = ("" if not moved else f"{moved[0][0]}, the one candidate that trained differently from off"
                        if n == 1 else f"the {n} candidates that trained differently from off")
    if row.runs and row.baseline:
        row.test_power = power_of([paired(row.baseline, row.runs, "R@1").differences])


def _seconds_per_step(runs) -> float:
    vals = [r.provenance.get("train_seconds", float("nan")) / max(1, r.config.iterations) for r in runs]
    vals = [v for v in vals if v == v]
    return float(np.median(vals)) if vals else float("nan")


def _one_session(runs, hours: float = 3.0) -> bool:
    """Whether ``runs`` were all made on one CPU within ``hours`` of each other (so that their training times, taken
    on a machine that others share, can be compared)."""
    try:
        times = [dt.datetime.fromisoformat(r.provenance["timestamp"]) for r in runs]
    except (KeyError, TypeError, ValueError):
        return False
    same_cpu = len({r.provenance.get("cpu") for r in runs}) == 1
    return same_cpu and (max(times) - min(times)).total_seconds() <= hours * 3600


#: The unseen-class metrics each row compares, paired by seed: Recall@1 (the choice rule's metric), MAP@R (the
#: whole first R neighbours of a query, Musgrave et al. 2020) and NMI. A metric some run of a row lacks (a run
#: recorded before it was measured) is left out of that row, never filled in.
METRICS = ("R@1", "MAP@R", "NMI")


def _differences(a: Sequence, b: Sequence, metrics=METRICS) -> dict:
    out = {}
    for m in metrics:
        try:
            out[m] = paired(a, b, m).diff
        except KeyError:
            continue
    return out


def _vs_floor(runs: Sequence, floor, metrics=METRICS) -> dict:
    out = {}
    for m in metrics:
        try:
            out[m] = interval([r.metric(m) - floor.metric(m) for r in runs])
        except KeyError:
            continue
    return out


def compare(regime: str, *, train: bool = False, entries: Sequence[Entry] | None = None) -> Comparison:
    """The comparison of ``entries`` in ``regime`` from stored runs (``train``: train the missing ones; the
    fine-tuned regime is read from its recorded runs only, which its script trains)."""
    if regime == FINETUNED_CPU:
        return _compare_finetuned()
    entries = all_entries() if entries is None else entries
    base = regime_config(regime)
    seeds = PROFILES[base.profile].seeds
    floor = _floor(base, train)
    rows = []
    for entry in entries:
        row = Row(entry.name, regime)
        rows.append(row)
        try:
            row.choice, val = _choose(entry, base, regime, entry.choice_seeds(regime), train)
        except MissingRunsError:
            row.missing = "validation runs"
            continue
        row.chosen = row.choice.chosen
        # what is tested: the chosen setting; when "off" was chosen, the method's best candidate as an ablation
        label = row.choice.chosen
        if label == OFF:
            label = max((k for k in val if k != OFF), key=lambda k: row.choice.means[k].mean)
        row.ablation, row.tested = row.choice.off_won, label
        row.label, row.val_runs = entry.parts(label), val
        _claim(row, entry.claims(label), entry.build(base, entry.candidates[label]))
        trained = entry.candidates_for(regime)
        if len(trained) < len(entry.candidates) and regime != "quick":
            row.carried_over = (f"{len(trained)} of the {len(entry.candidates)} candidates ({', '.join(trained)}), "
                                "carried over from the frozen regime's validation grid (read at its first three seeds)")
        test = _runs({"method": entry.build(base, entry.candidates[label])}, seeds, train)
        if test is None:
            row.missing = "test runs"
            continue
        row.runs = test["method"]
        if entry.off_metrics_prefix:
            row.baseline = [_Prefixed(r, entry.off_metrics_prefix) for r in row.runs]
        else:
            baseline = _runs({"baseline": entry.build(base, None)}, seeds, train)
            if baseline is None:
                row.missing = "baseline runs"
                continue
            row.baseline = baseline["baseline"]
            if _one_session(row.runs + row.baseline):  # timings of a shared machine compare only within a session
                row.seconds_per_step_ratio = _seconds_per_step(row.runs) / _seconds_per_step(row.baseline)
        row.vs_baseline = _differences(row.baseline, row.runs)
        if floor is not None:  # the untrained network's own run, for every method (ZSML's inputs are its baseline)
            row.vs_floor = _vs_floor(row.runs, floor)

        row.stability, row.base_stability = stability_label(row.runs), stability_label(row.baseline)
        row.identical = bool(row.vs_baseline) and all(
            d == 0 for m in row.vs_baseline for d in paired(row.baseline, row.runs, m).differences)
        _power(row, val)
        _parameters(row, entry.build(base, entry.candidates[label]),
                    None if entry.off_metrics_prefix else entry.build(base, None))
        row.unchanged = _unchanged(entry, entry.candidates[label], regime)
    return Comparison(regime, rows, floor)


def _compare_finetuned() -> Comparison:
    """The fine-tuned regime's rows, one per paper whose methods stage is recorded, built like the other regimes':
    the rule's choice on the validation runs (recomputed from them), the tested setting against its same-loss
    baseline and the untrained network, paired by seed, with the paper's claim and the parts the setting runs."""
    stage = recorded_cpu_methods()
    rows: list[Row] = []
    floor = stage["untrained"][0] if stage and stage["untrained"] else None
    for paper in PAPERS.values():
        if paper.campaign is None:
            continue
        row = Row(paper.name, FINETUNED_CPU)
        rows.append(row)
        got = (stage or {"methods": {}})["methods"].get(paper.method)
        if got is None:
            row.missing = "fine-tuned runs"
            continue
        plan = paper.campaign(RECIPES["flowers102"])
        row.choice, row.val_runs = got["choice"], got["validation"]
        row.chosen, row.ablation, row.tested = row.choice.chosen, got["ablation"], got["setting"]
        row.label = plan.parts(row.tested)
        row.runs = got["method"]
        prefix = paper.comparison.off_metrics_prefix if paper.comparison is not None else ""
        if prefix:  # as in the other regimes: "off" is the very embedding the method starts from, on the same queries
            row.baseline = [_Prefixed(r, prefix) for r in row.runs]
        else:
            row.baseline = got["off"]
            if _one_session(row.runs + row.baseline):
                row.seconds_per_step_ratio = _seconds_per_step(row.runs) / _seconds_per_step(row.baseline)
        _claim(row, plan.claims(row.tested), row.runs[0].config)
        row.vs_baseline = _differences(row.baseline, row.runs)
        if floor is not None:
            row.vs_floor = _vs_floor(row.runs, floor)
        row.stability, row.base_stability = stability_label(row.runs), stability_label(row.baseline)
        row.identical = bool(row.vs_baseline) and all(
            d == 0 for m in row.vs_baseline for d in paired(row.baseline, row.runs, m).differences)
        _power(row, row.val_runs)
        _parameters(row, row.runs[0].config, None if prefix else row.baseline[0].config)
    return Comparison(FINETUNED_CPU, rows, floor)


def trained_parameters(config: Config) -> dict | None:
    """``{name: size}`` of every parameter ``config``'s run trains, read from the built model and method: each tensor
    some phase's optimizer updates (:meth:`zslib.engine.method.Method.param_groups`: the model's trainable groups,
    the method's own modules). ``None`` where the model cannot be built here (its weights missing)."""
    try:
        torch.manual_seed(0)
        model = build_model(config)
        method = build_method(config, model, np.arange(8 if config.profile == "quick" else 51))
    except Exception:  # noqa: BLE001 -- a model that cannot be built here (weights missing) has no count
        return None
    names = {id(p): f"model.{n}" for n, p in model.named_parameters()}
    names.update({id(p): f"method.{n}" for n, p in method.named_parameters() if id(p) not in names})
    settings = OptimSettings(config.lr, config.weight_decay, config.new_layer_mult, config.objective_lr)
    out = {}
    for phase in method.phases:
        for group in method.param_groups(phase, model, settings):
            for p in group["params"]:
                out[names.get(id(p), f"tensor {id(p)}")] = int(p.numel())
    return out


def _parameters(row: Row, config: Config, baseline: Config | None) -> None:
    """``row``'s added parameters: what the tested ``config`` trains minus what its ``baseline`` trains (``None``:
    the baseline is the same run's input features, which train nothing)."""
    own = trained_parameters(config)
    base = {} if baseline is None else trained_parameters(baseline)
    row.baseline_parameters = None if base is None else sum(base.values())
    if own is not None and base is not None:
        row.extra_parameters = sum(own.values()) - row.baseline_parameters


def _unchanged(entry: Entry, value, regime: str) -> str:
    """For a regime that opens stages of the network: why it changes nothing for ``entry``'s setting ``value``
    (the method trains the same parameters as in the frozen regime), or ``""``."""
    if regime != "real adapted":
        return ""
    here = trained_parameters(entry.build(regime_config(regime), value))
    frozen = trained_parameters(entry.build(regime_config("real frozen"), value))
    if here is None or here != frozen:
        return ""
    return (f"this regime changes nothing for it: it trains the same {sum(here.values()):,} parameters as in the "
            "frozen regime (none of the opened stages), so its row repeats the frozen design")


def check_protocol(configs: Sequence[Config]) -> None:
    """Raise ``ValueError`` naming the field and the two values when the configs differ in a protocol field."""
    configs = list(configs)
    if not configs:
        raise ValueError("check_protocol() got no configs")
    first = configs[0]
    for c in configs[1:]:
        for f in PROTOCOL_FIELDS:
            a, b = _protocol_value(c, f), _protocol_value(first, f)
            if a != b:
                raise ValueError(f"{c.name}: {f} = {a!r}, but {first.name} has {b!r}")


def _protocol_value(config: Config, name: str):
    """A protocol field of ``config``; ``iterations`` counts the steps its embedding trains: a run that trains a pair
    network after its embedding (``method_params["metric_steps"]`` > 0, ZSML fine-tuned) counts those steps only."""
    if name == "iterations" and (config.method_params or {}).get("metric_steps"):
        return int(config.method_params["metric_steps"])
    return getattr(config, name)



def _marked(d: Interval | None, runs: Sequence, baseline: Sequence) -> str:
    """A paired difference in points, with the diverged seeds of either side named (never a silent row)."""
    text = "" if d is None else format_interval(d, signed=True)
    k = len([r for r in [*runs, *baseline] if getattr(r, "diverged", None)])
    if text and k:
        text += f" (diverged: {k} run{'s' if k != 1 else ''})"
    return text


def _power_cell(r: Row) -> str:
    """The power column: the true differences the validation seeds (the rule's) and the test seeds would call clear
    in 80% of repetitions (:func:`zslib.analysis.verdict.power_of`), or why there is none."""
    val = ("= off" if r.val_identical else "n/a" if r.val_power != r.val_power else power_size(r.val_power))
    equal = r.identical or (r.runs and r.baseline and not any(paired(r.baseline, r.runs).differences))
    test = ("= baseline" if equal else "n/a" if r.test_power != r.test_power else power_size(r.test_power))
    return f"{val} / {test}"


def _parameters_cell(r: Row) -> str:
    if r.extra_parameters is None:
        return ""
    base = "" if not r.baseline_parameters else f" (baseline trains {r.baseline_parameters:,})"
    if r.baseline_parameters == 0:
        base = " (its baseline trains none)"
    return f"{r.extra_parameters:,}{base}"


def _claim_cell(r: Row) -> str:
    """The paper's gain: "same variant" only where the weights, the dataset and what trained all match the tested
    run; else "nearest variant", with what differs."""
    if r.reported_gain is None:
        return r.reported_where
    if not r.claim_differs:
        return f"{r.reported_gain:+.1f} (same variant: {r.reported_where})"
    return f"{r.reported_gain:+.1f} (nearest variant: {r.reported_where}; the paper's row differs in " + \
        "; ".join(r.claim_differs) + ")"


def comparison_table(comparisons: Sequence[Comparison]):
    """One DataFrame, a line per (regime, method): chosen setting, test R@1, the paired change against the same-loss
    baseline (R@1, MAP@R and NMI) and against the untrained floor (R@1 and MAP@R), in points with 95% intervals,
    cost and the parameters the method trains beyond its baseline. A MAP@R cell of runs recorded without it says
    "not recorded". Diverged seeds are named in every cell that contains them; the "stability" column names collapsed
    and unstable seeds, or "not judged" where seeds had fewer than two evaluations (:mod:`zslib.engine.stability`);
    the power column gives the true differences the validation seeds (the rule's) and the test seeds would call clear
    in 80% of repetitions (:func:`zslib.analysis.verdict.power_of`), "= off" / "= baseline" where the runs equal it;
    the paper's gain is for the "same variant" only where weights, dataset and what trained match."""
    lines = []
    for comp in comparisons:
        for r in comp.rows:
            line = {"regime": comp.regime, "method": r.method}
            if r.missing or r.choice is None:
                line["chosen on validation"] = f"not recorded ({r.missing})" if r.missing else ""
                lines.append(line)
                continue
            line["chosen on validation"] = (f"off (tested: {r.label or r.tested}, an ablation)" if r.ablation
                                            else f"{r.chosen} ({r.label})" if r.label else str(r.chosen))
            if r.unchanged:
                line["chosen on validation"] += " - this regime trains nothing more for it: it repeats the frozen row"
            if r.runs:
                line["unseen R@1 %"] = format_interval(summarize(r.runs))
                line["vs baseline R@1 (pts)"] = _marked(r.vs_baseline.get("R@1"), r.runs, r.baseline)
                line["verdict"] = _verdict_cell(r)
                line["stability"] = r.stability + ("" if r.base_stability in ("", "stable", r.stability)
                                                   and not broken(r.base_stability)
                                                   else f" (baseline: {r.base_stability})")
                line[f"{100 * POWER:.0f}% power, validation / test (pts)"] = _power_cell(r)
                line["vs baseline MAP@R (pts)"] = (_marked(r.vs_baseline.get("MAP@R"), r.runs, r.baseline)
                                                   or "not recorded")
                line["vs baseline NMI (pts)"] = _marked(r.vs_baseline.get("NMI"), r.runs, r.baseline)
                line["vs untrained R@1 (pts)"] = _marked(r.vs_floor.get("R@1"), r.runs, ())
                line["vs untrained MAP@R (pts)"] = _marked(r.vs_floor.get("MAP@R"), r.runs, ()) or "not recorded"
                ratio = r.seconds_per_step_ratio
                line["time per step vs baseline"] = (f"{ratio:.1f}x" if ratio == ratio else "no baseline run"
                                                     if not r.baseline or isinstance(r.baseline[0], _Prefixed)
                                                     else "recorded apart")
                line["parameters added"] = _parameters_cell(r)
            line["paper's R@1 gain, same or nearest variant (pts)"] = _claim_cell(r)
            lines.append(line)
    return pd.DataFrame(lines).fillna("")


def _verdict_cell(r: Row) -> str:
    """The verdict column: the paired R@1 verdict, with "identical", "unstable" and "ablation" where they hold."""
    d = r.vs_baseline.get("R@1")
    if d is None:
        return ""
    if r.identical:
        word = "identical to baseline"
    elif broken(r.stability):
        word = "unstable"
    else:
        word = verdict(d)
        word = paired(r.baseline, r.runs).verdict if word in ("up", "down") else word
    return f"{word} (ablation)" if r.ablation else word


def backbone_caption(comparisons: Sequence[Comparison]) -> str:
    """One Markdown line naming the network each regime's rows were trained on, read from the runs' configs (the
    backbone key and whether it was pretrained, and which of its stages trained)."""
    parts = []
    for comp in comparisons:
        configs = {(r.config.backbone, r.config.pretrained, tuple(r.config.train_stages or ()))
                   for row in comp.rows for r in row.runs}
        if not configs:
            parts.append(f"{comp.regime}: no runs recorded")
            continue
        names = []
        for backbone, pretrained, stages in sorted(configs, key=str):
            name = f"`{backbone}`" + (" (pretrained" if pretrained else " (from scratch")
            name += f", trained stages {', '.join(stages)})" if stages else ")"
            names.append(name)
        parts.append(f"{comp.regime}: {', '.join(names)}")
    return "Networks, from the runs' configs: " + "; ".join(parts) + "."


def power_note(comparisons: Sequence[Comparison]) -> str:
    """Markdown: what "off kept" means at the power of the rule's seeds, regime by regime, from the rows' validation
    runs (:func:`zslib.analysis.verdict.power_of`, its method stated once), then :func:`seeds_note`."""

    out = []
    for comp in comparisons:
        for r in comp.rows:
            if r.choice is None or not r.ablation:
                continue
            out.append(f"- **{r.method}, {comp.regime}**: "
                       + power_words(r.val_diff, r.val_power, r.val_seeds, r.val_power_of,
                                     identical=r.val_identical) + ".")
    text = "\n".join(out) if out else "Every method's setting was chosen over off."
    text = f"The power stated is {POWER_METHOD}.\n\n{text}"
    seeds = seeds_note(comparisons)
    return f"{text}\n\n{seeds}" if seeds else text


def seeds_note(comparisons: Sequence[Comparison]) -> str:
    """Markdown: how many validation seeds each choice had and why (:func:`zslib.analysis.verdict.seeds_words`):
    raised where its runs train in under a minute, kept at :data:`~zslib.engine.choice.VALIDATION_SEEDS` where they
    cost more."""

    out = []
    for comp in comparisons:
        for r in comp.rows:
            if r.choice is None or not r.val_runs:
                continue
            seconds = [getattr(run, "run", run).provenance.get("train_seconds") for runs in r.val_runs.values()
                       for run in runs]
            seconds = [float(x) for x in seconds if x]
            median = float(np.median(seconds)) if seconds else float("nan")
            out.append(f"- **{r.method}, {comp.regime}**: "
                       + seeds_words(r.val_seeds, len(VALIDATION_SEEDS), median, r.val_power,
                                     kept_by=PAGE_BUDGET_REASON if comp.regime == "quick" else None) + ".")
    return ("**How many validation seeds.**\n\n" + "\n".join(out)) if out else ""


def _tests(comparisons: Sequence[Comparison]) -> list[tuple[Row, str, float]]:
    """Every paired test the comparison's table reads: ``(row, "vs baseline R@1", p)`` for each row with test
    runs, against its baseline on each metric of :data:`METRICS` and against the untrained network on R@1 and
    MAP@R (:func:`zslib.analysis.verdict.paired_p`; the untrained network is one run, so that test reads the runs'
    differences from it)."""
    out = []
    for comp in comparisons:
        for r in comp.rows:
            if not (r.runs and r.baseline):
                continue
            for m in METRICS:
                if m in r.vs_baseline:
                    out.append((r, f"vs baseline {m}", paired_p(paired(r.baseline, r.runs, m).differences)))
            if comp.floor is not None:
                for m in ("R@1", "MAP@R"):
                    if m in r.vs_floor:
                        out.append((r, f"vs untrained {m}", paired_p(
                            [x.metric(m) - comp.floor.metric(m) for x in r.runs])))
    return out


def correct(comparisons: Sequence[Comparison]) -> int:
    """Holm's correction over every test the page reads (:func:`_tests`, :func:`zslib.analysis.verdict.holm`): sets
    each row's ``holm`` (``{metric: adjusted p}`` of its tests against the baseline) and ``family`` (how many tests);
    returns that number."""
    tests = _tests(comparisons)
    adjusted = holm([p for _, _, p in tests])
    for comp in comparisons:
        for r in comp.rows:
            r.holm, r.family = {}, len(tests)
    for (r, what, _), q in zip(tests, adjusted):
        if what.startswith("vs baseline "):
            r.holm[what.removeprefix("vs baseline ")] = q
    return len(tests)


def multiplicity_note(comparisons: Sequence[Comparison]) -> str:
    """Markdown, once for the page: how many paired tests its table reads, that each 95% interval is uncorrected
    for the others, and which clear intervals against the baseline survive Holm's correction over all of them
    (the rows a rule chose named apart)."""
    tests = _tests(comparisons)
    if not tests:
        return ""
    adjusted = holm([p for _, _, p in tests])
    alpha = 1 - CONFIDENCE
    clear = [i for i, (_, _, p) in enumerate(tests) if p < alpha]
    kept = {i for i, q in enumerate(adjusted) if q < alpha}
    rows = len({id(r) for r, _, _ in tests})

    def name(i):
        r, what, _ = tests[i]
        return f"{r.method} ({r.regime}, {what}{'' if not r.ablation else ', an ablation'})"

    against = [i for i in clear if tests[i][1].startswith("vs baseline")]
    chosen = [name(i) + (" still clear after Holm" if i in kept else " not clear after Holm") for i in against
              if not tests[i][0].ablation]
    lost = [name(i) for i in against if i not in kept]
    text = (f"**How many tests this page reads.** The table reads {len(tests)} paired tests ({rows} rows, each against "
            f"its baseline on up to {len(METRICS)} metrics and against the untrained network on 2). Each interval is a "
            f"{100 * CONFIDENCE:.0f}% interval uncorrected for the others: {len(clear)} of them exclude 0. With Holm's "
            f"correction over all {len(tests)} (familywise {100 * (1 - CONFIDENCE):.0f}%), {len(kept)} still do.")
    if chosen:
        text += " Clear against the baseline in a row whose setting a rule chose: " + "; ".join(chosen) + "."
    if lost:
        text += " Clear uncorrected but not after Holm: " + "; ".join(lost) + "."
    return text


def method_table(method: str, regimes: Sequence[str] = ("real frozen", "real adapted"), *, train: bool = False):
    """One method's lines of :func:`comparison_table` in ``regimes`` (by default the frozen and the adapted real
    regime side by side): what a method chapter shows of the one-protocol comparison, each row against the
    method's same-loss baseline and against the untrained network."""
    mine = [e for e in all_entries() if e.name == method]
    if not mine:
        raise ValueError(f"unknown method {method!r}; choose one of {[e.name for e in all_entries()]}")
    table = comparison_table([compare(r, train=train, entries=mine) for r in regimes])
    return table.drop(columns=["method"]).set_index("regime")


def forest_plot(comparisons: Sequence[Comparison], metrics: Sequence[str] = ("R@1",)):
    """The paired change of each of ``metrics`` against the same-loss baseline, per method: one panel per regime
    (columns) and metric (rows), a dot for the mean over seeds and a bar for its 95% interval; hollow for a row
    whose setting "off" won (an ablation); a red cross labelled "unstable" for a row with diverged, collapsed or
    unstable seeds (:mod:`zslib.engine.stability`)."""
    metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    fig, axes = plt.subplots(len(metrics), len(comparisons), figsize=(4.2 * len(comparisons), 3.2 * len(metrics)),
                             sharey=True, squeeze=False)
    for ax, (metric, comp) in zip(axes.flat, [(m, c) for m in metrics for c in comparisons]):
        names = [r.method for r in comp.rows]
        for y, r in enumerate(comp.rows):
            d = r.vs_baseline.get(metric)
            if d is None:
                why = ("not recorded" if r.missing or r.runs else "off chosen, nothing to test")
                ax.text(0, y, why, va="center", ha="center", fontsize=8, color="0.4")
                continue
            lo, hi = (d.low, d.high) if not math.isnan(d.low) else (d.mean, d.mean)
            bad = broken(r.stability)  # diverged, collapsed or unstable seeds: never a plain dot
            color = "C3" if bad else "C0"
            ax.plot([100 * lo, 100 * hi], [y, y], color=color)
            ax.plot(100 * d.mean, y, "X" if bad else "o", color=color, mfc="white" if r.ablation else color)
            if bad:
                ax.annotate("unstable", (100 * hi, y), xytext=(4, 0), textcoords="offset points", va="center",
                            fontsize=7, color=color)
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_yticks(range(len(names)), names)
        ax.set_title(comp.regime)
        ax.set_xlabel(f"unseen {metric}: method - baseline (points)")
    axes[0, 0].invert_yaxis()  # once: the panels share their y axis, the first method on top
    fig.tight_layout()
    return fig


def findings(comparisons: Sequence[Comparison]) -> str:
    """"Which method, when": Markdown, a bullet per regime and method, each sentence written by
    :func:`zslib.analysis.verdict.row_sentence` ("clearly" only for a setting the rule chose; "ablation",
    "unstable", "identical" and the power of the choice where they hold)."""

    correct(comparisons)
    out = []
    for comp in comparisons:
        out.append(f"- **{comp.regime}**:")
        out += [f"    - {row_sentence(r)}" for r in comp.rows] or ["    - no rows"]
    return "\n".join(out)


def metric_agreement(comparisons: Sequence[Comparison], metric: str = "MAP@R", against: str = "R@1") -> str:
    """Markdown bullets, one per regime: for which methods ``metric``'s verdict against the same-loss baseline
    (up, down, no clear difference) is the same as ``against``'s, for which it is not (with both intervals), and
    which rows lack ``metric``."""
    bullets = []
    for comp in comparisons:
        same, other, lacking = [], [], []
        for r in comp.rows:
            a = r.vs_baseline.get(against)
            if a is None:
                continue
            m = r.vs_baseline.get(metric)
            named = f"{r.method} ({r.label})" if r.label else r.method  # the parts and weights tested
            if m is None:
                lacking.append(named)
            elif verdict(m) == verdict(a):
                same.append(named)
            else:
                chosen = not r.ablation
                other.append(f"{named}: {against} {_said(a, chosen)}, {metric} {_said(m, chosen)}")
        parts = []
        if same:
            parts.append(f"{metric} gives the same verdict as {against} for {', '.join(same)}")
        if other:
            parts.append(f"a different one for {'; '.join(other)}")
        if lacking:
            parts.append(f"{metric} is not recorded for {', '.join(lacking)}")
        bullets.append(f"- **{comp.regime}**: " + ("; ".join(parts) if parts else "no rows") + ".")
    return "\n".join(bullets)


def protocol_frame(regimes: Sequence[str] = tuple(REGIMES)):
    """The protocol of each regime as a table: every field of :data:`PROTOCOL_FIELDS`, the seeds, the validation
    share and what the regime is."""
    cols = {}
    for regime in regimes:
        c = regime_config(regime)
        seeds = test_seeds(regime)
        col = {"what": REGIMES[regime][1]}
        col.update({f: ", ".join(map(str, getattr(c, f))) if isinstance(getattr(c, f), (list, tuple))
                    else str(getattr(c, f)) for f in PROTOCOL_FIELDS})
        col["test seeds"] = ", ".join(map(str, seeds))
        more = [f"{e.name}: 0-{e.val_seeds[regime] - 1}" for e in all_entries() if regime in e.val_seeds]
        col["choice seeds"] = ", ".join(map(str, VALIDATION_SEEDS)) + (f" ({'; '.join(more)})" if more else "")
        col["validation classes"] = f"{int(100 * VALIDATION_FRACTION)}% of the seen classes"
        cols[regime] = col
    return pd.DataFrame(cols)


def choice_sentences(comparisons: Sequence[Comparison]) -> str:
    """Markdown: for every method and regime, what the validation rule compared and what it chose, in words."""
    out = []
    for comp in comparisons:
        for r in comp.rows:
            if r.choice is None:
                out.append(f"- **{r.method}, {comp.regime}**: no choice shown; its {r.missing or 'runs'} are not "
                           "recorded in this copy.")
                continue
            tail = f" Its test row ({r.label or r.tested}) is an ablation." if r.ablation else ""
            if r.carried_over:
                tail += f" The candidates here are {r.carried_over}."
            out.append(f"- **{r.method}, {comp.regime}**: {r.choice.sentence()}{tail}")
    return "\n".join(out)


def adaptation_sentences(comparisons: Sequence[Comparison], frozen: str = "real frozen",
                         adapted: str = "real adapted") -> str:
    """Markdown bullets: what letting the network's last stages train changed, method by method. For each method
    whose rows exist in both regimes: its baseline's and its own unseen Recall@1 in each regime (means over the
    same seeds) and the paired change against the baseline in each, so that a reader sees whether adapting the
    network helped the loss alone, the method, or neither. ``""`` when a regime is not among ``comparisons``."""
    by = {c.regime: c for c in comparisons}
    if frozen not in by or adapted not in by:
        return ""
    out = []
    f_floor, a_floor = by[frozen].floor, by[adapted].floor
    if f_floor is not None and a_floor is not None:
        out.append(f"- The untrained network scores {100 * f_floor.metric('R@1'):.1f}% in both regimes' evaluation "
                   f"({100 * a_floor.metric('R@1'):.1f}% read through the adapted code path, whose stages start "
                   "from the same ImageNet weights).")

    rows_f = {r.method: r for r in by[frozen].rows}
    for r in by[adapted].rows:
        f = rows_f.get(r.method)
        if f is None or not (r.runs and f.runs):
            out.append(f"- **{r.method}**: not recorded in both regimes in this copy.")
            continue
        out.append("- " + adaptation_sentence(f, r, mean_r1))
    return "\n".join(out)


#: When the choice rule (``zslib/engine/choice.py``) was committed, as data: ``(commit, UTC time, what it did)``,
#: read once from ``git log --follow zslib/engine/choice.py`` (the later commits of that file moved code and
#: constants without changing what the rule chooses).
RULE_COMMITS = (
    ("6bd056aad7578afa907e3db051309aa01d594a17", "2026-11-25T18:10:51+00:00",
     "the rule first committed: the best validation mean is chosen only if its paired 95% interval over off lies "
     "above 0"),
    ("652728b18cf9c6000b86c334920a8e6ae2290a6b", "2026-11-25T21:42:51+00:00",
     "a candidate with a diverged run is listed but never leads"),
)


def _stamp(text) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text).astimezone(dt.timezone.utc)
    except (TypeError, ValueError):
        return None


def _stamps(provenance) -> list:
    """The timestamps of a record and of the records it replaced (``record --replace``), newest first."""
    out = []
    while isinstance(provenance, dict):
        t = _stamp(provenance.get("timestamp"))
        if t is not None:
            out.append(t)
        provenance = provenance.get("replaced")
    return out


def _unique_runs(runs) -> list:
    seen, out = set(), []
    for r in runs:
        r = getattr(r, "run", r)
        key = getattr(r, "path", None) or id(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _span(ts) -> str:
    return (f"{min(ts):%Y-%m-%d %H:%M}" if min(ts) == max(ts) else
            f"{min(ts):%Y-%m-%d %H:%M} to {max(ts):%Y-%m-%d %H:%M}") + " UTC"


def _leaders(comparison: Comparison) -> list[str]:
    """For each choice made with more than the default seeds: its leader at the first
    :data:`~zslib.engine.choice.VALIDATION_SEEDS` seeds, where it differs from the leader at all of them."""
    out = []
    k = len(VALIDATION_SEEDS)
    for r in comparison.rows:
        if r.choice is None or r.val_seeds <= k:
            continue
        early = choose({key: runs[:k] for key, runs in r.val_runs.items()})
        if early.leader != r.choice.leader:
            out.append(f"{r.method} led with {early.leader} at the first {k} validation seeds and with "
                       f"{r.choice.leader} at all {r.val_seeds}")
    return out


def history_sentences(comparisons: Sequence[Comparison], rule=RULE_COMMITS) -> str:
    """Markdown: when the choice rule was fixed (:data:`RULE_COMMITS`) and, regime by regime, when the validation
    runs and the test runs shown were trained, read from their records' timestamps: how many test runs predate the
    rule or the last validation run, and, where a test run was trained again (``record --replace``), when its
    config was first trained; then each choice whose leader changed when seeds were added."""
    first, *later = rule
    fixed = _stamp(first[1])
    out = [f"- **The rule** (`zslib.engine.choice.choose`) was first committed on {fixed:%Y-%m-%d %H:%M} UTC "
           f"(commit {first[0][:12]}): {first[2].removeprefix('the rule first committed: ')}"
           + "".join(f"; on {_stamp(t):%Y-%m-%d %H:%M} UTC ({c[:12]}): {w}" for c, t, w in later) + "."]
    for comp in comparisons:
        val = [_stamps(r.provenance)[:1] for r in _unique_runs(x for row in comp.rows for runs in row.val_runs.values()
                                                               for x in runs)]
        shown = _unique_runs([*(x for row in comp.rows for x in [*row.runs, *row.baseline]),
                              *([comp.floor] if comp.floor is not None else [])])
        chains = [_stamps(r.provenance) for r in shown]
        val, test = [v[0] for v in val if v], [c[0] for c in chains if c]
        if not val or not test:
            out.append(f"- **{comp.regime}**: its runs carry no timestamps to order them by.")
            continue
        before_rule, before_val = sum(t < fixed for t in test), sum(t < max(val) for t in test)
        text = (f"- **{comp.regime}**: the validation runs were trained {_span(val)} ({sum(t < fixed for t in val)} "
                f"of {len(val)} before the rule); the {len(test)} test runs shown (methods, baselines and the untrained "
                f"network) {_span(test)}: {before_rule} of them before the rule, {before_val} before the last "
                "validation run")
        again = [c for c in chains if len(c) > 1]
        if again:
            earliest = [min(c) for c in again]
            changes = [abs(v) for r in shown for v in (r.provenance.get("replaced") or {}).get(
                "metric_changes", {}).values() if isinstance(v, (int, float)) and v == v]
            moved = (f"; their largest metric change from the records they replaced is {100 * max(changes):.2f} "
                     "points" if changes and max(changes) > 0 else
                     "; every metric equals the replaced record's" if changes else "")
            text += (f". {len(again)} of them replace records of the same configs first trained "
                     f"{_span(earliest)} ({sum(t < fixed for t in earliest)} before the rule): the numbers shown are "
                     f"the newer runs'{moved}")
        text += (": every test number shown was made after the rule and after the last validation run." if
                 not before_rule and not before_val else
                 ": the records cannot show that the rule and every choice came before these test numbers.")
        out.append(text)
        leaders = _leaders(comp)
        if leaders:
            out.append(f"    - Leaders that changed as seeds were added ({comp.regime}): " + "; ".join(leaders) + ".")
    return "\n".join(out)


def adapted_order_sentence(comparison: Comparison) -> str:
    """Markdown: when ``comparison``'s validation runs and test runs were first trained, read from their records'
    timestamps (a record trained again with ``record --replace`` counts from the record it replaced), and which came
    first (the choice is meant to be made before any test run is read)."""
    def times(runs):
        stamps = (_stamps(getattr(getattr(r, "run", r), "provenance", None)) for r in runs)
        return [min(t) for t in stamps if t]

    val = times(x for row in comparison.rows for runs in row.val_runs.values() for x in runs)
    test = times(x for row in comparison.rows for x in [*row.runs, *row.baseline])
    if not val or not test:
        return f"The {comparison.regime} runs carry no timestamps to order them by."

    early = sum(t < max(val) for t in test)
    if not early:
        order = "every validation run was trained before the first test run"
    else:
        order = (f"{early} of the {len(test)} test runs (the methods' and their baselines') were first trained before "
                 "the last validation run, so the records cannot show that every choice was made before any test "
                 "number was read")
    return (f"In the {comparison.regime} regime the validation runs were trained from {_span(val)}, the test runs "
            f"from {_span(test)}: {order}.")


def _said(d: Interval, chosen: bool = True) -> str:
    """A paired difference in words and points: "clearly above (+1.2 [+0.4, +2.0])" for a chosen setting, "above
    (...)" for an ablation (:func:`zslib.analysis.verdict.change_words`)."""

    return f"{change_words(verdict(d), chosen).removesuffix(' from')} ({format_interval(d, signed=True)})"


def context_sentence() -> str:
    """One Markdown sentence from :func:`zslib.reported.context_frame`: where training on the seen classes still
    beats the best frozen features, and by how much (reported numbers, not runs of this book)."""

    gap = context_frame().loc["trained minus best frozen (points)"].drop("kind").astype(float)
    pays = [f"{d} ({g:+.1f})" for d, g in gap.sort_values(ascending=False).items() if g > 5]
    close = [f"{d} ({g:+.1f})" for d, g in gap.items() if g <= 5]
    parts = []
    if pays:
        parts.append("the ViT-S/16 trained on the seen classes is more than five points above the best frozen "
                     "features on " + ", ".join(pays))
    if close:
        parts.append("it is within five points of the best frozen features, or below them, on " + ", ".join(close))
    return ("In the reported numbers, " + "; ".join(parts) + " (points of Recall@1, trained ViT-S/16 minus the best "
            "frozen row). Each is one reported number without an interval, so these gaps are descriptions, not "
            "verdicts.")


def mean_r1(runs, split: str = "unseen") -> float:
    """The mean Recall@1 of ``runs`` over their seeds (what a row's "unseen R@1" column shows, as a fraction)."""
    return mean_metric(runs, "R@1", split)


def mean_metric(runs, metric: str, split: str = "unseen") -> float:
    """The mean of ``metric`` over the seeds of ``runs`` (a fraction)."""
    return float(np.mean([r.metric(metric, split) for r in runs]))


def rule_status(method: str, config, regime: str = "real frozen") -> str:
    """What the book's choice rule made of ``config`` for ``method`` in the comparison's ``regime``
    (:func:`compare` from the stored runs): ``"chosen"`` when it is the setting the rule
    chose, ``"ablation"`` when the rule kept the method off (any setting of it trained anyway is an ablation),
    ``"not chosen"`` when the rule chose another setting (or its runs are not recorded)."""

    mine = [e for e in all_entries() if e.name == method]
    if not mine:
        raise ValueError(f"unknown method {method!r}; choose one of {[e.name for e in all_entries()]}")
    row = compare(regime, entries=mine).rows[0]
    if row.choice is None or not row.runs:
        return "not chosen"
    if row.ablation:  # the rule kept the method off: every setting of it trained anyway is an ablation
        return "ablation"
    same = config_hash(row.runs[0].config.replace(seed=config.seed)) == config_hash(config)
    return "chosen" if same else "not chosen"
