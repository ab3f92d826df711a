"""The ZSML chapter's report plumbing (Xu et al., IJCAI 2019): tables, figures and findings made from recorded runs.

The chapter (``book/zsml.ipynb``) and its experiments page (``book/zsml_experiments.ipynb``) call these in a line
or two; the paper's math stays in the modules beside this one (``relation``, ``cross_update``, ``pairwise``,
``method``). Every number is computed here from stored runs and every outcome is written as Markdown:

* :func:`quick_comparison` -- the quick profile's rows (SynthParts) and their paired verdicts;
* :func:`fig5` -- the paper's Fig. 5 (predicted similarity against the continuous label) from a checkpoint;
* :func:`real_comparison` -- ZSML on frozen pretrained Flowers-102 features against the Euclidean distance of
  the same features on the same images, beside the untrained features and the trained head;
* :func:`real_experiments` -- the experiments page: alpha and the share of positive pairs put to the book's
  choice rule on validation classes with ZSML switched off as a candidate (:func:`share_rule_note`), the
  Table 7-8 analogues, NCA, the Table 6 and 9 analogues, every pair of the unseen images, and the
  inter-dataset transfer of Tables 4-5;
* :func:`chapter_findings` and :func:`experiment_findings` -- the "What we found" sentences;
  :func:`key_findings` -- the box the chapter opens with.

Differences are paired by seed: two runs of the same seed see the same data order and initialization, and
ZSML's Euclidean row is the Euclidean distance of its own input features on the very same sampled images.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from zslib.methods.zsml.recipes import (ABL_SEEDS, ALPHAS, EVERY, FLOOR, HEAD, KS, POS_FRACTIONS, REAL_SEEDS,
                                      REAL_ZSML, VAL_SEEDS, VALIDATION_FRACTION, ZSML, every_image_config,
                                      real_configs, real_zsml)

__all__ = ["METRICS", "MR", "LR", "HEAD", "REAL_ZSML", "REAL_SEEDS", "Section", "by_seed", "seed_difference",
           "paper_tables", "QuickComparison", "quick_comparison", "fig5", "RealComparison",
           "real_comparison", "photo_figures", "Experiments", "real_experiments", "full_profile_runs",
           "quick_findings", "real_findings", "experiment_findings", "chapter_findings", "real_configs",
           "key_findings", "share_rule_note"]

PAPER = "xu2019zsml"
METRICS = ("ACC", "NMI", "Purity", "R@1")
METRICS_ORDER = ("R@1", "NMI", "ACC", "Purity")
MR, LR = "Triplet + ZSML (MR)", "Triplet + LR + Reloss"
ARM_COLUMNS = ("R@1", "R@2", "R@4", "R@8", "NMI")
MEMORY_BUDGET_MIB = 2048


# ----- shared pieces ------------------------------------------------------------------------------------

@dataclass
class Section:
    """One table of the chapter with the Markdown above it (``caption``) and below it (``notes``), then the
    paper's tables that go with it (``paper``: table numbers of ``xu2019zsml``). Shown when it is the last
    expression of a cell."""

    caption: str = ""
    table: object = None
    notes: list = field(default_factory=list)
    paper: tuple = ()

    def _ipython_display_(self):
        from IPython.display import Markdown, display

        if self.caption:
            display(Markdown(self.caption))
        if self.table is not None:
            display(self.table)
        if self.notes:
            display(Markdown("\n\n".join(self.notes)))
        if self.paper:
            paper_tables(*self.paper)


def paper_tables(*tables: str) -> None:
    """The paper's printed tables (Xu et al. 2019, :func:`zslib.reported.reported_frame`), each under its citation."""
    from IPython.display import Markdown, display

    from zslib.reported import reported_frame

    for t in tables:
        frame = reported_frame(t, paper=PAPER)
        display(Markdown(f"*{frame.attrs['citation']}*"))
        display(frame)


def by_seed(runs: Sequence, metric: str, split: str = "unseen") -> dict[int, float]:
    """One metric of each run (or analysis record), keyed by the run's seed."""
    return {r.config.seed: r.metric(metric, split) if hasattr(r, "metric") else r[metric] for r in runs}


def seed_difference(a: Mapping, b: Mapping):
    """The per-seed differences ``b - a`` of two ``{seed: value}`` maps with the same seeds: their 95% interval and
    its verdict (:mod:`zslib.engine.stats`). Unlike :func:`zslib.engine.stats.paired` the two sides may be two
    metrics of the same runs: ZSML and the Euclidean distance of its input features on the same images."""
    from zslib.engine.stats import interval, verdict

    if set(a) != set(b):
        raise ValueError(f"different seeds: {sorted(a)} and {sorted(b)}")
    d = interval([b[s] - a[s] for s in sorted(a)])
    return d, verdict(d)


def _as_pair(p):
    """``(interval, verdict)`` of a :class:`zslib.engine.stats.Paired` or of such a tuple."""
    return (p.diff, p.verdict) if hasattr(p, "verdict") else p


def _cells(runs, metrics=METRICS, prefix: str = "", split: str = "unseen", unit: str = " %") -> dict[str, str]:
    """Table cells ``mean [95% CI]`` in percent of ``prefix + metric`` over the runs (seeds)."""
    from zslib.engine.stats import format_interval, summarize

    return {f"{m}{unit}": format_interval(summarize(runs, prefix + m, split)) for m in metrics}


def _frame(rows: list[dict], index: str):
    import pandas as pd

    return pd.DataFrame(rows).set_index(index).fillna("")


def _diffs(title: str, items: Mapping) -> str:
    """A Markdown list of paired differences under ``title``: ``{label: [(what, (interval, verdict)), ...]}``."""
    from zslib.engine.stats import format_interval

    lines = [title, ""]
    for label, parts in items.items():
        lines.append(f"- {label}: " + "; ".join(f"{what + ' ' if what else ''}{format_interval(d, signed=True)} ({v})"
                                               for what, (d, v) in parts))
    return "\n".join(lines)


def _say(v: str, what: str) -> str:
    return {"up": f"raised {what}", "down": f"lowered {what}"}.get(v, f"left {what} unchanged within the noise")


_DATASETS = {"synthparts": "SynthParts", "flowers102": "Flowers-102", "cub200": "CUB-200-2011", "cars196": "Cars196"}


def _dataset(name: str) -> str:
    return _DATASETS.get(name, name)


def _seeds(seeds) -> str:
    return ", ".join(map(str, seeds))


# ----- the quick profile --------------------------------------------------------------------------------

@dataclass
class QuickComparison:
    """The quick profile's rows: ``runs`` (name -> runs), ``euclid`` (metric -> {seed: Euclidean value on ZSML's
    sample}), ``verdicts`` ((row, reference, metric) -> verdict) and the two tables."""

    runs: dict
    euclid: dict
    verdicts: dict
    table: Section
    verdict_table: Section


def quick_comparison(runs: Mapping) -> QuickComparison:
    """The quick profile's table (Sec. 5.1's protocol on the unseen SynthParts classes): the Euclidean distance of
    the frozen triplet embedding on ZSML's sampled images, ZSML (MR) on top of it and the linear relation of
    Table 9 (LR + Reloss), as means with 95% intervals; then the per-seed differences of ZSML and LR against the
    Euclidean distance, and of LR against ZSML, each with its verdict."""
    from zslib.engine.stats import format_interval, interval

    euclid = {m: by_seed(runs[MR], f"input {m}") for m in METRICS}
    rows = [{"method": "Triplet (Euclidean)", **{m: format_interval(interval(euclid[m].values())) for m in METRICS}}]
    rows += [{"method": name, **_cells(rs, unit="")} for name, rs in runs.items()]
    vrows, verdicts = [], {}
    for name, rs in runs.items():
        for m in ("ACC", "NMI", "R@1"):
            d, v = seed_difference(euclid[m], by_seed(rs, m))
            verdicts[name, "Euclidean", m] = v
            row = {"method": name, "metric": m, "vs Euclidean (pts)": format_interval(d, signed=True), "verdict": v}
            if name != MR:
                d2, v2 = seed_difference(by_seed(runs[MR], m), by_seed(rs, m))
                verdicts[name, MR, m] = v2
                row.update({"vs ZSML (MR) (pts)": format_interval(d2, signed=True), "verdict vs MR": v2})
            vrows.append(row)
    import pandas as pd

    first = runs[MR][0].config
    caption = (f"*Unseen {_dataset(first.dataset)} classes, {len(runs[MR])} seeds, {first.method_params['eval_per_class']} "
               "images per class; % [95% CI].*")
    return QuickComparison(dict(runs), euclid, verdicts, Section(caption, _frame(rows, "method")),
                           Section("", pd.DataFrame(vrows).set_index(["method", "metric"]).fillna("")))


# ----- Fig. 5 -------------------------------------------------------------------------------------------

def fig5(runs: Sequence) -> dict | None:
    """The paper's Fig. 5 for the seed-0 run of ``runs``: predicted similarity against the continuous label of 400
    training pairs, one colour per kind of pair, with the correlation of ``s`` and ``y`` in each kind and how far
    the labels moved from their Eq. 3 start. Returns those numbers (``moved``, ``corr``, ``positive``,
    ``negative``, ``zsml_steps``), or ``None`` when the checkpoint is not here."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from zslib.analysis.photos import show
    from zslib.methods.zsml.analyses import fig5_pairs

    run = next(r for r in runs if r.config.seed == 0)
    pairs = fig5_pairs(run)
    if pairs is None:
        display(Markdown("*The checkpoint of the seed-0 run is not here (results copied without checkpoints), so "
                         "there is no Fig. 5.*"))
        return None
    pos = pairs["positive"]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(pairs["y"][~pos], pairs["s"][~pos], s=6, label="negative pairs")
    ax.scatter(pairs["y"][pos], pairs["s"][pos], s=6, label="positive pairs")
    ax.plot([0, 1], [0, 1], "k:", lw=1)
    ax.set(xlabel="continuous label y", ylabel="predicted similarity s",
           title=f"ZSML, seed 0, {len(pos)} training pairs")
    ax.legend()
    moved = (pairs["y"] - pairs["y0"]).abs().max().item()
    corr = {k: float(np.corrcoef(pairs["y"][sel], pairs["s"][sel])[0, 1]) for k, sel in (("pos", pos), ("neg", ~pos))}
    p = run.config.method_params
    out = {"moved": moved, "corr": corr, "positive": int(pos.sum()), "negative": int((~pos).sum()),
           "zsml_steps": run.config.iterations - (p.get("metric_steps", 0) if p.get("features") == "embedding" else 0)}
    show(fig, f"{out['positive']} positive and {out['negative']} negative pairs; correlation of s with y: "
              f"{corr['pos']:.2f} for the positives, {corr['neg']:.2f} for the negatives; the largest change of a "
              f"label from its Eq. 3 start: {moved:.2g}.")
    return out


# ----- real photographs: Flowers-102 with frozen pretrained features ------------------------------------

def _real():
    from zslib.engine.config import Config

    return Config.from_profile("real")


@dataclass
class RealComparison:
    """The recorded real-profile rows: ``runs`` (``"ZSML"`` on the 4-per-class sample, ``"ZSML every image"`` and
    :data:`HEAD` -> runs of :data:`REAL_SEEDS`), ``floor`` (the one run of the untrained features), ``euclid``
    (metric -> {seed: raw-feature Euclidean value on the sample}), ``verdicts`` (metric -> (interval, verdict) of
    ZSML minus the cosine of its input features, every unseen image ranked), ``sample_verdicts`` (the same on the
    sample, against the raw Euclidean distance) and the two displays."""

    runs: dict
    floor: object
    euclid: dict
    verdicts: dict
    sample_verdicts: dict
    table: Section
    differences: Section

    @property
    def zsml(self):
        """The runs scored on the 4-per-class sample (the ones the experiments page compares with)."""
        return self.runs["ZSML"]

    @property
    def every(self):
        """The runs that rank every unseen image."""
        return self.runs[EVERY]


def real_comparison(train: bool = False) -> RealComparison | None:
    """The real-profile table (Flowers-102, frozen ImageNet EfficientNet-Lite0 features, classes 52-102 unseen): the
    untrained features and the trained head on every unseen image; ZSML and the cosine of its input features ranking
    every unseen image for 10 query photographs per class; and, as the earlier and easier protocol, ZSML and the raw
    Euclidean distance on a 4-per-class sample scored only against itself (5 seeds, 95% intervals), with the
    commits and training times of the ZSML runs from their provenance; then ZSML minus its comparator per metric,
    paired by seed, in both protocols. With ``train`` missing runs are trained; else ``None`` (after a note) when
    any is missing."""
    from zslib.engine.grid import recorded_grid

    c = real_configs()
    runs = recorded_grid({ZSML: c[ZSML], EVERY: every_image_config(), HEAD: c[HEAD]}, "the ZSML comparison",
                         REAL_SEEDS, train=train)
    floor_runs = recorded_grid({FLOOR: c[FLOOR]}, "the pretrained features", (0,), train=train)
    if runs is None or floor_runs is None:
        return None
    zr, ev, head, floor = runs["ZSML"], runs[EVERY], runs[HEAD], floor_runs["pretrained"][0]
    euclid = {m: by_seed(zr, f"input {m}") for m in METRICS}
    q = ev[0].config.method_params["eval_per_class"]
    n = zr[0].config.method_params["eval_per_class"]
    rows = [{"row": "pretrained features (every unseen image)", "R@1 %": f"{100 * floor.metric('R@1'):.1f}",
             "NMI %": f"{100 * floor.metric('NMI'):.1f}"},
            {"row": "trained head, binomial deviance (every unseen image)", **_cells(head, ("R@1", "NMI"))},
            {"row": f"cosine of ZSML's input features (every unseen image; {q} queries per class)",
             **_cells(ev, METRICS_ORDER, "input ")},
            {"row": f"ZSML (every unseen image; {q} queries per class)", **_cells(ev, METRICS_ORDER)},
            {"row": f"Euclidean, raw features ({n} per class, sample only)", **_cells(zr, METRICS_ORDER, "input ")},
            {"row": f"ZSML ({n} per class, sample only)", **_cells(zr, METRICS_ORDER)}]
    commits: dict = {}
    for r in ev:
        commits.setdefault(str(r.provenance.get("git_commit"))[:12], []).append(r.config.seed)
    times = ", ".join(f"seed {r.config.seed} {r.provenance.get('train_seconds', float('nan')):.0f} s" for r in ev)
    caption = (f"*Unseen classes of Flowers-102, seeds {_seeds(REAL_SEEDS)}; % [95% CI]. In the rows marked every "
               f"unseen image, Recall@1 ranks all unseen photographs for each query (for ZSML "
               f"and its comparator, {q} query photographs per class, drawn by the seed); the clustering columns of "
               f"the ZSML rows cluster the sampled photographs. The ZSML runs that rank every image were made on "
               f"{ev[0].provenance.get('device')} with zslib {ev[0].provenance.get('zslib_version')}, "
               + "; ".join(f"commit {c} (seeds {_seeds(s)})" for c, s in commits.items())
               + f"; their training wall time: {times}.*")
    verdicts = {m: seed_difference(by_seed(ev, f"input {m}"), by_seed(ev, m)) for m in METRICS}
    sample_verdicts = {m: seed_difference(euclid[m], by_seed(zr, m)) for m in METRICS}
    differences = Section(
        _diffs(f"ZSML minus the cosine of the same input features, every unseen image ranked ({len(ev)} seeds; "
               f"points, 95% CI; clustering on the {q}-per-class sample):",
               {m: [("", dv)] for m, dv in verdicts.items()})
        + "\n\n" + _diffs(f"For comparison, the earlier protocol: ZSML minus the raw Euclidean distance on the "
                           f"{n}-per-class sample scored only against itself:",
                           {m: [("", dv)] for m, dv in sample_verdicts.items()}))
    return RealComparison(dict(runs), floor, euclid, verdicts, sample_verdicts, Section(caption, _frame(rows, "row")),
                          differences)


def photo_figures(real: RealComparison | None):
    """The retrieval grid on Flowers-102 photographs for the ZSML chapter's real section: the untrained
    pretrained features (cosine), the trained baseline head (cosine) and ZSML, whose neighbours are the images
    its relation network S scores highest against the query (Eq. 4's learned metric over the run's rows;
    :func:`zslib.methods.zsml.pairwise.score_topk`), seed 0 of each, trained again from the recorded configs;
    then a t-SNE of the trained head's embedding of twelve unseen classes."""
    from IPython.display import Markdown, display

    from zslib.analysis.photos import retrieval_section

    if real is None:
        display(Markdown("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*"))
        return None
    results = {"untrained features": real.floor, "baseline head": real.runs[HEAD][0], "ZSML": real.zsml[0]}
    note = ("ZSML ranks by its relation network's score of each (query, image) pair, not by a distance, over all "
            "unseen photographs. The run drawn here is the one scored on the 4-per-class sample (the same training "
            "as the every-image rows of the table), so that retraining it to check its metrics stays quick.")
    # ZSML's recorded metrics score a sample of 4 images per unseen class (204 queries, 0.5 points each); trained
    # again on another CPU the last bits differ and a few sampled queries change their answer (measured: R@4 off by
    # 2.0 points, 4 queries), so its check allows 3 points; every other run is held to 1 point.
    retrieval_section(results, scorers={"ZSML": lambda model: model.pair}, tsne_of="baseline head", note=note,
                      tolerance={"ZSML": 0.03})


def full_profile_runs():
    """The recorded full-profile ZSML runs (the paper's sizes on a GPU) with their provenance, as Markdown."""
    from IPython.display import Markdown

    from zslib.engine.store import load_results

    runs = load_results(profile="full", method="zsml")
    if not runs:
        return Markdown("*No full-profile ZSML run has been recorded in `results/recorded/`: run this chapter with "
                        "`ZS_PROFILE=full` on a GPU to make one.*")
    return Markdown("\n".join(
        f"- `{r.config.name}`: unseen ACC {100 * r.metric('ACC'):.1f}%, NMI {100 * r.metric('NMI'):.1f}%, R@1 "
        f"{100 * r.metric('R@1'):.1f}%; recorded {r.provenance.get('timestamp')} on {r.provenance.get('device')}, "
        f"commit {r.provenance.get('git_commit')}" for r in runs))


# ----- the experiments page -----------------------------------------------------------------------------

@dataclass
class Experiments:
    """The experiments page's recorded runs and what the chapter computes from them, one group per section (each
    ``Section`` is ``None`` when its runs are not recorded here or a section it builds on is missing)."""

    real: RealComparison | None
    # alpha chosen on validation classes
    alpha_choice: Section | None = None
    val_runs: dict | None = None
    val_mean: dict = field(default_factory=dict)
    chosen_alpha: float | None = None  # the alpha with the best mean validation Recall@1
    alpha_rule: object = None  # the rule's Choice over the alphas with ZSML off a candidate (zslib.engine.choice)
    val_vs: dict = field(default_factory=dict)
    # ZSML at the chosen alpha on the test classes
    chosen_alpha_test: Section | None = None
    chosen_runs: list | None = None
    chosen_vs: dict = field(default_factory=dict)
    # the share of positive pairs chosen on validation classes
    share_choice: Section | None = None
    share_fit: float | None = None
    share_seen: float | None = None
    share_exact: bool = True
    pos_alpha: float = 0.3
    share_runs: dict | None = None
    best_pf: float | None = None  # the share with the highest mean validation Recall@1 among the shares
    share_rule: object = None  # the rule's Choice over the shares with ZSML off a candidate (zslib.engine.choice)
    pf_val_vs: dict = field(default_factory=dict)
    # ZSML at the best share on the test classes
    chosen_share_test: Section | None = None
    pf_ref: list | None = None
    zf: list | None = None
    pf_vs: dict = field(default_factory=dict)
    gap: float | None = None
    # Table 8 and Table 7 analogues
    alpha_ablation: Section | None = None
    alpha_runs: dict | None = None
    ablation_vs: dict = field(default_factory=dict)
    test_order: list | None = None
    val_order: list | None = None
    k_ablation: Section | None = None
    k_runs: dict | None = None
    k_vs: dict = field(default_factory=dict)
    # NCA, the Table 9 and 6 analogues, every pair, the transfer
    nca: Section | None = None
    nca_runs: list | None = None
    nca_vs: dict = field(default_factory=dict)
    arms: Section | None = None
    arm_runs: dict | None = None
    arm_vs: dict = field(default_factory=dict)
    every_pair: Section | None = None
    every: object = None
    transfer: Section | None = None
    xfer: dict | None = None
    xfer_vs: dict = field(default_factory=dict)

    @property
    def share_is_ablation(self) -> bool:
        """Whether the rule kept ZSML off over the shares: then the best share's rows are an ablation."""
        return self.share_rule is not None and self.share_rule.off_won


def _share_name(f) -> str:
    """A share of positive pairs as the chapter names it (``None``: the uniform pairs)."""
    return "unset (uniform)" if f is None else f"{f:g}"


def _share_label(f) -> str:
    """A share as the candidate of the rule's sentence (``None``: the uniform pairs)."""
    return "the unset (uniform) share" if f is None else f"positive_fraction = {f:g}"


def _best_share_words(ex: Experiments) -> str:
    """The best share by mean, and the word that says what its rows are: chosen, or an ablation."""
    return f"positive_fraction {_share_name(ex.best_pf)} ({'ablation' if ex.share_is_ablation else 'chosen'})"


def real_experiments(real: RealComparison | None, train: bool = False) -> Experiments:
    """Every recorded run of the experiments page and the numbers drawn from them, section by section, in the
    order in which each builds on the last: alpha chosen on validation classes (and trained on the test classes
    if it is not the paper's 0.3), the share of positive pairs chosen the same way, the Table 8 and 7 analogues,
    NCA, the Table 9 and 6 analogues at the best validation settings, every pair of the unseen images, and the
    transfer between Flowers-102 and SynthParts. With ``train`` missing runs and analyses are made."""
    ex = Experiments(real)
    _alpha_choice(ex, train)
    _chosen_alpha_test(ex, train)
    _share_choice(ex, train)
    _chosen_share_test(ex, train)
    _alpha_ablation(ex, train)
    _k_ablation(ex, train)
    _nca(ex, train)
    _arms(ex, train)
    _every_pair(ex, train)
    _transfer(ex, train)
    return ex


def _rows_on_sample(real: RealComparison, *labelled) -> list[dict]:
    """Table rows on ZSML's sampled images: the Euclidean distance first, then ``(label, runs)`` pairs."""
    return ([{"row": "Euclidean (ZSML's sample)", **_cells(real.zsml, prefix="input ")}]
            + [{"row": label, **_cells(rs)} for label, rs in labelled])


def _alpha_choice(ex: Experiments, train: bool) -> None:
    """alpha in ALPHAS chosen by the highest mean Recall@1 on held-out seen classes (split ``val``), against the
    paper's 0.3, paired by seed; also how often a run draws each pair of P."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import format_interval, paired, summarize
    from zslib.methods.zsml.method import ZSML

    real = _real()
    val = real.replace(validation_fraction=VALIDATION_FRACTION)
    ex.val_runs = recorded_grid({a: real_zsml(val, alpha=a) for a in ALPHAS}, "the choice of alpha", VAL_SEEDS,
                                train=train)
    zp = ZSML.validate(REAL_ZSML)  # the run's ZSML settings, defaults included
    draws = real.iterations * zp["batch_pairs"]
    drawn = (f"A run draws {real.iterations} x {zp['batch_pairs']} = {draws:,} pairs from the {zp['pairs']:,} of P: "
             f"each pair {draws / zp['pairs']:.2f} times on average.")
    if ex.val_runs is None:
        ex.alpha_choice = Section(notes=[drawn])
        return
    ex.val_mean = {a: summarize(rs, "R@1", "val")[0] for a, rs in ex.val_runs.items()}
    ex.chosen_alpha = max(ex.val_mean, key=ex.val_mean.get)
    ex.alpha_rule = _off_rule(ex.val_runs)
    rows = []
    for a, rs in ex.val_runs.items():
        row = {"alpha": a, "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
               "val ACC %": format_interval(summarize(rs, "ACC", "val")),
               "Euclidean val R@1 %": format_interval(summarize(rs, "input R@1", "val"))}
        if a != 0.3:
            ex.val_vs[a] = paired(ex.val_runs[0.3], rs, "R@1", "val")
            row.update({"R@1 minus alpha 0.3 (pts)": format_interval(ex.val_vs[a].diff, signed=True),
                        "verdict": ex.val_vs[a].verdict})
        rows.append(row)
    ex.alpha_choice = Section(
        f"*Validation classes of Flowers-102 ({100 * VALIDATION_FRACTION:.0f}% of the seen classes), {len(VAL_SEEDS)} "
        "seeds; % [95% CI].*", _frame(rows, "alpha"),
        [f"The highest mean validation Recall@1 among the alphas is **alpha = {ex.chosen_alpha:g}**.",
         _rule_note(ex.val_runs), drawn])


def _off_rule(val_runs: Mapping):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over a validation grid of ZSML with ZSML
    switched off as a candidate, listed first: "off" is the Euclidean distance of the same runs' input features on
    the same validation images and seeds (the ``input`` metrics every ZSML result carries, read through
    :class:`zslib.engine.choice.Prefixed`, as in the comparison chapter), taken from the leading setting's runs."""
    from zslib.engine.choice import OFF, Prefixed, choose

    leader = max(val_runs, key=lambda k: np.mean([r.metric("R@1", "val") for r in val_runs[k]]))
    return choose({OFF: [Prefixed(r, "input ") for r in val_runs[leader]], **val_runs})


def _rule_words(rule, label) -> str:
    """The rule's sentence (:meth:`zslib.engine.choice.Choice.sentence`), "off" named as ZSML switched off."""
    from zslib.engine.choice import OFF

    return rule.sentence(lambda k: "the Euclidean distance of the input features (ZSML off)" if k == OFF else label(k))


def _rule_note(val_runs: Mapping) -> str:
    """The rule over the alphas with ZSML switched off as a candidate (:func:`_off_rule`), as a sentence."""
    rule = _off_rule(val_runs)
    return (f"With ZSML switched off as a candidate, the book's choice rule reads: "
            f"{_rule_words(rule, lambda a: f'alpha = {a:g}')}"
            + (" So on validation classes ZSML is not chosen, and its rows show what it does as an ablation."
               if rule.off_won else ""))


def share_rule_note(ex: Experiments) -> str:
    """What the book's choice rule chose for the share of positive pairs, as Markdown: the rule over the unset share
    and each ``positive_fraction`` at ``ex.pos_alpha`` with ZSML switched off as a candidate (:func:`_off_rule`, on
    the same validation classes and seeds). When it keeps ZSML off, the best share by mean is named as an ablation.
    Empty when the share's validation runs are not here."""
    rule = ex.share_rule
    if rule is None:
        return ""
    text = ("With ZSML switched off as a candidate, the book's choice rule over the shares of positive pairs reads: "
            + _rule_words(rule, _share_label))
    if rule.off_won:
        return text + (f" So on validation classes no share is chosen: ZSML stays off, and {_share_label(ex.best_pf)}, "
                       "the best share by mean, is shown only as an ablation.")
    return text + f" So **{_share_label(rule.chosen)}** is the chosen share."


def _chosen_alpha_test(ex: Experiments, train: bool) -> None:
    """ZSML at the chosen alpha on the test classes, against alpha 0.3 and the Euclidean distance (5 seeds)."""
    from zslib.engine.grid import recorded_grid

    if ex.chosen_alpha == 0.3:
        ex.chosen_alpha_test = Section(notes=["The validation split chose the paper's alpha = 0.3: the rows of the "
                                              "main chapter are the chosen configuration."])
    if ex.chosen_alpha is None or ex.chosen_alpha == 0.3 or ex.real is None:
        return
    a = ex.chosen_alpha
    runs = recorded_grid({a: real_zsml(alpha=a)}, "ZSML at the chosen alpha", REAL_SEEDS, train=train)
    if runs is None:
        return
    zr, zc = ex.real.zsml, runs[a]
    ex.chosen_runs = zc
    ex.chosen_vs = {m: (seed_difference(by_seed(zr, m), by_seed(zc, m)), seed_difference(ex.real.euclid[m], by_seed(zc, m)))
                    for m in METRICS}
    ex.chosen_alpha_test = Section(
        f"*Unseen Flowers-102 classes, {len(zc)} seeds, the same sampled images in every row; % [95% CI].*",
        _frame(_rows_on_sample(ex.real, ("ZSML, alpha 0.3 (paper)", zr), (f"ZSML, alpha {a:g} ({_alpha_status(ex)})", zc)),
               "row"),
        [_diffs(f"ZSML at alpha {a:g} minus (points, 95% CI):",
                {m: [("ZSML at alpha 0.3", d1), ("the Euclidean distance", d2)] for m, (d1, d2) in ex.chosen_vs.items()})])


def _alpha_status(ex: Experiments) -> str:
    """How the best-mean alpha's rows are labelled: chosen, or an ablation when the rule keeps ZSML off."""
    return "ablation: best mean, the rule keeps ZSML off" if ex.alpha_rule is not None and ex.alpha_rule.off_won \
        else "chosen"


def _share_choice(ex: Experiments, train: bool) -> None:
    """The share of same-class pairs among uniform pairs (from the Flowers-102 labels, else 1/C), then
    ``positive_fraction`` in POS_FRACTIONS at the alpha with the best validation mean, each against the unset share,
    paired by seed; the best share by mean (the unset share wins ties) and the book's choice rule over the shares
    with ZSML switched off as a candidate (:func:`share_rule_note`)."""
    from zslib.engine.data import DataError
    from zslib.engine.data.datasets import Flowers102
    from zslib.engine.data.splits import split_classes
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import format_interval, paired, summarize
    from zslib.methods.zsml import cross_update as cu

    val = _real().replace(validation_fraction=VALIDATION_FRACTION)
    ex.pos_alpha = 0.3 if ex.chosen_alpha is None else ex.chosen_alpha
    try:  # the exact share needs only the label file of Flowers-102
        seen_labels = Flowers102(split="train").labels
    except DataError:
        seen_labels = None
    if seen_labels is not None:
        ex.share_fit = float(np.mean([cu.uniform_positive_share(
            seen_labels[split_classes(seen_labels, val.validation_fraction, seed=s)[0]]) for s in VAL_SEEDS]))
        ex.share_seen, ex.share_exact = cu.uniform_positive_share(seen_labels), True
        how = "from the Flowers-102 labels"
    else:  # C classes of equal size: about 1 / C
        n_seen = Flowers102.official["train"][1]
        ex.share_fit = 1 / (n_seen - round(val.validation_fraction * n_seen))
        ex.share_seen, ex.share_exact = 1 / n_seen, False
        how = "as 1/C for classes of equal size (the Flowers-102 labels are not here)"
    share = (f"The share of same-class pairs among uniform pairs, {how}: {100 * ex.share_fit:.1f}% on the training "
             f"classes of the validation split (mean of seeds {_seeds(VAL_SEEDS)}), {100 * ex.share_seen:.1f}% on all "
             "seen classes.")
    ex.share_runs = recorded_grid({f: real_zsml(val, alpha=ex.pos_alpha, positive_fraction=f) for f in POS_FRACTIONS},
                                  "the choice of the share of positive pairs", VAL_SEEDS, train=train)
    if ex.share_runs is None:
        ex.share_choice = Section(share)
        return
    pf_mean = {f: summarize(rs, "R@1", "val")[0] for f, rs in ex.share_runs.items()}
    ex.best_pf = max(pf_mean, key=pf_mean.get)  # the first maximum: the unset share wins ties
    ex.share_rule = _off_rule(ex.share_runs)
    off_runs = ex.share_runs[ex.best_pf]  # the input features are the same in every share's runs of a seed
    rows = [{"positive_fraction": "off (Euclidean, ZSML off)",
             "val R@1 %": format_interval(summarize(off_runs, "input R@1", "val")),
             "val ACC %": format_interval(summarize(off_runs, "input ACC", "val"))}]
    for f, rs in ex.share_runs.items():
        row = {"positive_fraction": _share_name(f), "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
               "val ACC %": format_interval(summarize(rs, "ACC", "val"))}
        if f is not None:
            ex.pf_val_vs[f] = paired(ex.share_runs[None], rs, "R@1", "val")
            row.update({"R@1 minus unset (pts)": format_interval(ex.pf_val_vs[f].diff, signed=True),
                        "verdict": ex.pf_val_vs[f].verdict})
        rows.append(row)
    ex.share_choice = Section(
        f"{share}\n\n*Validation classes of Flowers-102, alpha {ex.pos_alpha:g}, {len(VAL_SEEDS)} seeds; % [95% CI].*",
        _frame(rows, "positive_fraction"),
        [f"Among the shares, the highest mean validation Recall@1 is at positive_fraction = {_share_name(ex.best_pf)}.",
         share_rule_note(ex)])


def _chosen_share_test(ex: Experiments, train: bool) -> None:
    """ZSML at the best share of positive pairs on the test classes (chosen, or an ablation when the rule kept ZSML
    off), against the unset share at the same alpha and the Euclidean distance (5 seeds), and the Recall@1 gap of the
    unset share to the Euclidean distance."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import paired, summarize

    if ex.share_runs is not None and ex.best_pf is None:
        ex.chosen_share_test = Section(notes=["The uniform pairs (share unset) led the shares on the validation split: "
                                              "the test rows above are ZSML at that share."])
    if ex.real is not None:
        ex.pf_ref = ex.real.zsml if ex.pos_alpha == 0.3 else ex.chosen_runs
    if ex.share_runs is None or ex.best_pf is None or ex.pf_ref is None:
        return
    f, a = ex.best_pf, ex.pos_alpha
    runs = recorded_grid({f: real_zsml(alpha=a, positive_fraction=f)}, "ZSML at the best share of positive pairs",
                         REAL_SEEDS, train=train)
    if runs is None:
        return
    ex.zf = zf = runs[f]
    ex.pf_vs = {m: (paired(ex.pf_ref, zf, m), seed_difference(ex.real.euclid[m], by_seed(zf, m))) for m in METRICS}
    ex.gap = float(np.mean(list(ex.real.euclid["R@1"].values())) - summarize(ex.pf_ref, "R@1")[0])
    ablation = (" ZSML at this share is an ablation: on validation classes the choice rule kept ZSML off."
                if ex.share_is_ablation else "")
    ex.chosen_share_test = Section(
        f"*Unseen Flowers-102 classes, {len(zf)} seeds, the same sampled images in every row; % [95% CI].*{ablation}",
        _frame(_rows_on_sample(ex.real, (f"ZSML, alpha {a:g}, share unset", ex.pf_ref),
                               (f"ZSML, alpha {a:g}, {_best_share_words(ex)}", zf)), "row"),
        [_diffs(f"ZSML with positive_fraction {f:g} minus (points, 95% CI):",
                {m: [("the unset share", _as_pair(p1)), ("the Euclidean distance", d2)]
                 for m, (p1, d2) in ex.pf_vs.items()}),
         f"The Recall@1 gap of ZSML with the unset share to the Euclidean distance is {100 * ex.gap:.1f} points; the "
         f"share {f:g} changes ZSML's mean Recall@1 by {100 * ex.pf_vs['R@1'][0].diff[0]:+.1f} points."])


def _ablation(grid_runs: Mapping, reference, label: str, metrics=("R@1", "ACC")):
    """Rows of a descriptive ablation and each value's paired difference from ``reference`` (``{value: {metric:
    Paired}}``)."""
    from zslib.engine.stats import format_interval, paired

    rows, vs = [], {}
    for value, rs in grid_runs.items():
        row = {label: f"{value:g}", **_cells(rs)}
        if value != reference:
            vs[value] = {m: paired(grid_runs[reference], rs, m) for m in metrics}
            row.update({f"{m} minus {label} {reference:g} (pts)": format_interval(p.diff, signed=True) + f" ({p.verdict})"
                        for m, p in vs[value].items()})
        rows.append(row)
    return rows, vs


def _alpha_ablation(ex: Experiments, train: bool) -> None:
    """Table 8 analogue: each alpha of the validation grid trained on all seen classes (seeds 0-2) and scored on
    the test classes, against alpha 0.3; and the order of the alphas on the test and on the validation classes."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import summarize

    ex.alpha_runs = recorded_grid({a: real_zsml(alpha=a) for a in ALPHAS}, "the alpha ablation", ABL_SEEDS,
                                  train=train)
    if ex.alpha_runs is None:
        return
    rows, ex.ablation_vs = _ablation(ex.alpha_runs, 0.3, "alpha")
    rows.insert(0, {"alpha": "Euclidean", **_cells(ex.alpha_runs[0.3], prefix="input ")})
    ex.test_order = sorted(ALPHAS, key=lambda a: -summarize(ex.alpha_runs[a], "R@1")[0])
    ex.val_order = sorted(ALPHAS, key=lambda a: -ex.val_mean[a]) if ex.val_runs is not None else None
    order = "alpha by mean unseen Recall@1, best first: " + ", ".join(f"{a:g}" for a in ex.test_order)
    if ex.val_order is not None:
        order += "; by mean validation Recall@1: " + ", ".join(f"{a:g}" for a in ex.val_order)
    ex.alpha_ablation = Section(f"*Unseen Flowers-102 classes, seeds {_seeds(ABL_SEEDS)}; % [95% CI].*",
                                _frame(rows, "alpha"), [order[0].upper() + order[1:] + "."], ("8",))


def _k_ablation(ex: Experiments, train: bool) -> None:
    """Table 7 analogue: the number of relation kernels k at alpha 0.3 (seeds 0-2) on the test classes, against
    the paper's k = 96."""
    from zslib.engine.grid import recorded_grid

    ex.k_runs = recorded_grid({k: real_zsml(k=k) for k in KS}, "the k ablation", ABL_SEEDS, train=train)
    if ex.k_runs is None:
        return
    rows, ex.k_vs = _ablation(ex.k_runs, 96, "k")
    ex.k_ablation = Section(f"*Unseen Flowers-102 classes, alpha 0.3, seeds {_seeds(ABL_SEEDS)}; % [95% CI].*",
                            _frame(rows, "k"), paper=("7",))


def _nca(ex: Experiments, train: bool) -> None:
    """NCA (scikit-learn's Mahalanobis learner) on the same features and sampled images: NCA minus Euclidean and
    ZSML minus NCA, paired by seed."""
    from zslib.engine.grid import recorded_grid

    nca_c = _real().replace(method="nca", method_params={"eval_per_class": REAL_ZSML["eval_per_class"]})
    runs = recorded_grid({"NCA": nca_c}, "the NCA row", REAL_SEEDS, train=train)
    if runs is None or ex.real is None:
        return
    nr, zr = runs["NCA"], ex.real.zsml
    ex.nca_runs = nr
    ex.nca_vs = {m: (seed_difference(ex.real.euclid[m], by_seed(nr, m)), seed_difference(by_seed(nr, m), by_seed(zr, m)))
                 for m in METRICS}
    rows = _rows_on_sample(ex.real, ("NCA (Mahalanobis)", nr), ("ZSML, alpha 0.3", zr))
    rows[0]["row"] = "Euclidean"
    ex.nca = Section(f"*Unseen Flowers-102 classes, {len(nr)} seeds, the same sampled images in every row; "
                     "% [95% CI].*", _frame(rows, "row"),
                     [_diffs("Paired differences (points, 95% CI):",
                             {m: [("NCA minus Euclidean", d1), ("ZSML minus NCA", d2)] for m, (d1, d2) in ex.nca_vs.items()})])


def _arm_settings(ex: Experiments) -> dict:
    """The settings of the later sections: the alpha and the share with the best mean validation Recall@1 (an
    ablation when the choice rule kept ZSML off, :attr:`Experiments.share_is_ablation`)."""
    return dict(alpha=ex.pos_alpha, positive_fraction=ex.best_pf)


def _arms(ex: Experiments, train: bool) -> None:
    """Tables 9 and 6 analogues at the best validation settings (:func:`_arm_settings`): LR + Reloss for 200 and
    1,000 steps, the paper's S (1,000, 1,000) and Lifted + ZSML, each against that configuration (Lifted + ZSML
    against its own frozen lifted embedding's Euclidean distance), paired by seed; the seen classes' Recall@1 shows
    what a run fitted."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import paired, summarize, format_interval

    if ex.zf is None:
        return
    real, base = _real(), _arm_settings(ex)
    grid = {"LR + Reloss, 200 steps": real_zsml(relation="linear", **base),
            "LR + Reloss, 1,000 steps": real_zsml(real.replace(iterations=1000), relation="linear", **base),
            "ZSML (MR), S (1,000, 1,000)": real_zsml(hidden=[1000, 1000], **base),
            "Lifted + ZSML": real_zsml(real.replace(loss="lifted_structure", iterations=400), features="embedding",
                                        metric_steps=200, **base)}
    ex.arm_runs = runs = recorded_grid(grid, "the LR, Lifted + ZSML and S-size rows", REAL_SEEDS, train=train)
    if runs is None:
        return
    zf, lifted = ex.zf, runs["Lifted + ZSML"]

    def row(name, rs, prefix=""):
        out = {"row": name, **_cells(rs, ARM_COLUMNS, prefix)}
        if not prefix:
            out["seen R@1 %"] = format_interval(summarize(rs, "R@1", "seen"))
        return out

    rows = [row("Euclidean (pretrained features)", zf, "input "),
            row("ZSML (MR), S (256, 256): " + ("ablation (best share)" if ex.share_is_ablation
                                                else "the chosen configuration"), zf)]
    rows += [row(name, runs[name]) for name in grid if name != "Lifted + ZSML"]
    rows += [row("Lifted (Euclidean on the frozen lifted embedding)", lifted, "input "), row("Lifted + ZSML", lifted)]
    for name in grid:
        if name != "Lifted + ZSML":
            ex.arm_vs[name] = {m: _as_pair(paired(zf, runs[name], m)) for m in ("R@1", "NMI")}
    ex.arm_vs["Lifted + ZSML"] = {m: seed_difference(by_seed(lifted, f"input {m}"), by_seed(lifted, m))
                                  for m in ("R@1", "NMI")}
    ex.arms = Section(
        f"*Unseen Flowers-102 classes, {len(zf)} seeds, the same sampled images in every row (seen R@1: the seen "
        f"classes' test images); alpha {ex.pos_alpha:g}, {_best_share_words(ex)}; % [95% CI].*",
        _frame(rows, "row"),
        [_diffs("Paired differences (points, 95% CI):",
                {f"{name} minus {'Lifted' if name == 'Lifted + ZSML' else 'ZSML (MR), S (256, 256)'}": list(vs.items())
                 for name, vs in ex.arm_vs.items()})], ("9", "6"))


def _every_pair(ex: Experiments, train: bool) -> None:
    """The ``every_pair`` analysis of the best validation settings at seed 0: every ordered pair of the unseen
    images scored, its time and peak memory, and its metrics beside those of the run's own sample."""
    from zslib.methods.zsml.analyses import recorded_every_pair

    if ex.zf is None:
        return
    ev = ex.every = recorded_every_pair(real_zsml(**_arm_settings(ex)), 0, train=train)
    if ev is None:
        return
    pv, sample = ev.provenance, ex.zf[0]
    text = (f"{int(ev['n_images']):,} unseen images, {int(ev['pairs']):,} ordered pairs scored in {ev['seconds'] / 60:.0f} "
            f"min ({1e6 * ev['seconds'] / ev['pairs']:.0f} µs per pair) on {pv.get('device')}, torch threads "
            f"{pv.get('torch_threads')}; the score matrix takes {ev['matrix_mib']:.0f} MiB; the peak resident memory of "
            f"the process while scoring was {ev['peak_rss_mib'] / 1024:.2f} GiB"
            + (" (the kernel's peak counter was reset before scoring)" if ev["peak_since_reset"] else
               " (the peak of the whole process: the counter could not be reset)")
            + f", {'within' if ev['peak_rss_mib'] <= MEMORY_BUDGET_MIB else 'above'} a budget of "
            f"{MEMORY_BUDGET_MIB // 1024} GB. Model {pv.get('model_from')} (largest metric difference to the record "
            f"{pv.get('reproduced_max_metric_diff', 0):.4f}), commit {str(pv.get('git_commit'))[:12]}, "
            f"{pv.get('timestamp')}.")
    rows = [{"metric": m, "ZSML, every image %": f"{100 * ev[m]:.1f}",
             "Euclidean, every image %": f"{100 * ev['input ' + m]:.1f}",
             "ZSML, the run's sample %": f"{100 * sample.metric(m):.1f}",
             "Euclidean, the run's sample %": f"{100 * sample.metric('input ' + m):.1f}"}
            for m in ("R@1", "R@2", "R@4", "R@8", "ACC", "NMI", "Purity")]
    ex.every_pair = Section(text, _frame(rows, "metric"), [
        f"On every unseen image, ZSML minus Euclidean: Recall@1 {100 * (ev['R@1'] - ev['input R@1']):+.1f} points, "
        f"NMI {100 * (ev['NMI'] - ev['input NMI']):+.1f} points (one seed, one model: no interval)."])


def _transfer(ex: Experiments, train: bool) -> None:
    """Tables 4-5 analogue: ZSML at the best validation settings trained on Flowers-102 or SynthParts (pretrained
    features of both) and tested on the other's unseen classes, against ZSML trained on the target itself and the
    Euclidean distance, paired by seed."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import format_interval, interval
    from zslib.methods.zsml.analyses import recorded_transfer

    if ex.zf is None:
        return
    base = _arm_settings(ex)
    on_synth = _real().replace(dataset="synthparts")
    synth_runs = recorded_grid({"SynthParts": real_zsml(on_synth, **base)}, "ZSML on SynthParts (pretrained features)",
                               REAL_SEEDS, train=train)
    records = recorded_transfer(real_zsml(**base), real_zsml(on_synth, **base), REAL_SEEDS, train=train)
    if synth_runs is None or records is None:
        return
    zf, zs, (to_synth, to_flowers) = ex.zf, synth_runs["SynthParts"], records
    xfer = ex.xfer = {  # (trained on, tested on) -> {metric: {seed: value}}
        ("Euclidean", "Flowers-102"): {m: by_seed(zf, f"input {m}") for m in METRICS},
        ("Euclidean", "SynthParts"): {m: by_seed(zs, f"input {m}") for m in METRICS},
        ("Flowers-102", "Flowers-102"): {m: by_seed(zf, m) for m in METRICS},
        ("SynthParts", "SynthParts"): {m: by_seed(zs, m) for m in METRICS},
        ("Flowers-102", "SynthParts"): {m: by_seed(to_synth, m) for m in METRICS},
        ("SynthParts", "Flowers-102"): {m: by_seed(to_flowers, m) for m in METRICS}}
    rows = []
    for source in ("Euclidean", "Flowers-102", "SynthParts"):
        row = {"trained on": source if source == "Euclidean" else f"ZSML trained on {source}"}
        for target in ("Flowers-102", "SynthParts"):
            for m in ("R@1", "NMI", "ACC"):
                row[f"-> {target} {m} %"] = format_interval(interval(xfer[source, target][m].values()))
        rows.append(row)
    notes = []
    for source, target in (("SynthParts", "Flowers-102"), ("Flowers-102", "SynthParts")):
        ex.xfer_vs[target] = {m: (seed_difference(xfer[target, target][m], xfer[source, target][m]),
                                  seed_difference(xfer["Euclidean", target][m], xfer[source, target][m]))
                              for m in ("R@1", "NMI")}
        notes.append(_diffs(f"{source} -> {target} minus (points, 95% CI):",
                            {m: [(f"trained on {target} itself", d1), ("the Euclidean distance", d2)]
                             for m, (d1, d2) in ex.xfer_vs[target].items()}))
    ex.transfer = Section(f"*Unseen classes of each target, {len(zf)} seeds, the same sampled images in each column; "
                          "% [95% CI].*", _frame(rows, "trained on"), notes, ("4", "5"))


# ----- findings -----------------------------------------------------------------------------------------

def quick_findings(quick: QuickComparison, fig5_numbers: dict | None = None) -> list[str]:
    """The quick profile's sentences: ZSML and the linear relation against the Euclidean distance (their paired
    verdicts), the paper's Table 3 gap, and how far the labels moved in Fig. 5."""
    from zslib.engine.stats import summarize
    from zslib.reported import reported_frame

    runs, verdicts = quick.runs, quick.verdicts
    mr = {m: summarize(runs[MR], m)[0] for m in METRICS}
    paper3 = reported_frame("3", paper=PAPER)
    out = [f"Quick profile ({_dataset(runs[MR][0].config.dataset)}, {len(runs[MR])} seeds): ZSML on a frozen triplet embedding "
           f"reached unseen ACC {100 * mr['ACC']:.1f}%, NMI {100 * mr['NMI']:.1f}%, R@1 {100 * mr['R@1']:.1f}%; against "
           f"the Euclidean distance of the same embedding it {_say(verdicts[MR, 'Euclidean', 'ACC'], 'clustering accuracy')}, "
           f"{_say(verdicts[MR, 'Euclidean', 'NMI'], 'NMI')} and {_say(verdicts[MR, 'Euclidean', 'R@1'], 'Recall@1')}.",
           f"The linear relation against the kernels: {_say(verdicts[LR, MR, 'ACC'], 'ACC')}, "
           f"{_say(verdicts[LR, MR, 'R@1'], 'Recall@1')}; against Euclidean it "
           f"{_say(verdicts[LR, 'Euclidean', 'ACC'], 'ACC')}.",
           f"The paper (Table 3) reports ZSML "
           f"{paper3.loc['Ours', 'Caltech->Caltech ACC'] - paper3.loc['Euclidean', 'Caltech->Caltech ACC']:+.1f} "
           "ACC points over Euclidean on Caltech -> Caltech."]
    if fig5_numbers is not None:
        moved = fig5_numbers["moved"]
        out.append(f"Fig. 5 analogue: the labels moved at most {moved:.2g} from their Eq. 3 start in "
                   f"{fig5_numbers['zsml_steps']} ZSML steps"
                   + (", so at this length the cross-update is in effect a regression onto Eq. 3's labels."
                      if moved < 0.01 else ": the label phase changed them visibly."))
    return out


def real_findings(real: RealComparison | None) -> list[str]:
    """The real profile's sentences: ZSML against the cosine of the same features, every unseen image ranked (and
    clustering on the sample), then what the earlier 4-per-class sample said, and whether it agrees."""
    from zslib.engine.stats import format_interval

    if real is None:
        return []
    d, v = real.verdicts["R@1"]
    dn, vn = real.verdicts["ACC"]
    ds, vs = real.sample_verdicts["R@1"]
    agree = ("agrees" if vs == v else "disagrees: a small sample scored only against itself is an easier, different "
             "retrieval task, and the raw features' Euclidean distance ranks worse than their cosine")
    return [f"Real Flowers-102 features ({len(real.every)} seeds): ZSML {_say(v, 'Recall@1')} "
            f"({format_interval(d, signed=True)} pts) against the cosine of the same pretrained features, with every "
            f"unseen image ranked, and {_say(vn, 'clustering accuracy')} ({format_interval(dn, signed=True)} pts) on "
            "the sampled images.",
            f"On the earlier protocol (4 images per class, each ranked only against the sample, against the raw "
            f"Euclidean distance) the same training reads {format_interval(ds, signed=True)} points of Recall@1; it "
            f"{agree}."]


def _share_sentence(ex: Experiments) -> str:
    from zslib.engine.stats import format_interval

    words = "; ".join(f"positive_fraction {f:g} {format_interval(p.diff, signed=True)} R@1 pts ({p.verdict})"
                      for f, p in ex.pf_val_vs.items())
    text = (f"Positive pairs in P: {'' if ex.share_exact else 'about '}{100 * ex.share_fit:.1f}% of the uniform pairs "
            f"of the validation runs are same-class pairs. On validation classes ({len(VAL_SEEDS)} seeds, alpha "
            f"{ex.pos_alpha:g}), against that unset share: {words}; "
            + ("none of these differences is clear of the seed noise, but "
               if all(p.verdict == "no clear effect" for p in ex.pf_val_vs.values()) else "")
            + f"the highest mean among the shares is at {_share_name(ex.best_pf)}. {share_rule_note(ex)}")
    if ex.best_pf is None:
        return text + (" So the validation split gives no reason to change the share, and no sign that the scarcity "
                       "of positive pairs is what keeps ZSML below the Euclidean distance.")
    if not ex.pf_vs:
        return text
    p1, (d2, v2) = ex.pf_vs["R@1"]
    gap = ex.gap
    text += (f" On the test classes ({len(ex.zf)} seeds) that share{' (an ablation)' if ex.share_is_ablation else ''} "
             f"{_say(p1.verdict, 'Recall@1')} "
             f"({format_interval(p1.diff, signed=True)} pts) against the unset share")
    if p1.verdict == "up" and gap > 0:
        text += (f", a mean gain of {100 * p1.diff[0] / gap:.0f}% of the {100 * gap:.1f}-point Recall@1 gap that ZSML "
                 "with the unset share leaves to the Euclidean distance"
                 + (": the scarcity of positive pairs explains part of the gap, not all of it" if v2 == "down"
                    else ": within the noise, the scarcity of positive pairs accounts for the whole gap"))
    elif p1.verdict == "down":
        text += f": it widens the {100 * gap:.1f}-point Recall@1 gap to the Euclidean distance instead of closing it"
    else:
        text += (f", so these runs give no evidence that the share of positive pairs explains any of the "
                 f"{100 * gap:.1f}-point Recall@1 gap to the Euclidean distance")
    return text + (f"; against the Euclidean distance, ZSML with this share {_say(v2, 'Recall@1')} "
                   f"({format_interval(d2, signed=True)} pts).")


def experiment_findings(ex: Experiments) -> list[str]:
    """The experiments page's sentences, each generated from its section's numbers: the choices of alpha and of
    the share of positive pairs and what they did on the test classes, the Table 8 and 7 analogues, NCA, the
    Table 9 and 6 analogues, every pair of the unseen images and the transfer."""
    from zslib.engine.stats import format_interval, summarize
    from zslib.reported import reported_frame

    out = []
    if ex.val_vs:
        out.append(f"On validation classes of Flowers-102 ({len(VAL_SEEDS)} seeds), against the paper's alpha = 0.3: "
                   + "; ".join(f"alpha {a:g} {format_interval(p.diff, signed=True)} R@1 pts ({p.verdict})"
                               for a, p in ex.val_vs.items())
                   + f". The highest mean is at alpha = {ex.chosen_alpha:g}"
                   + (" (an ablation: with ZSML off a candidate, the rule keeps it off)"
                      if ex.alpha_rule is not None and ex.alpha_rule.off_won else "")
                   + (", the largest value Eq. 3 allows (the positive range [1 - alpha, 1] must not fall below the "
                      "negative one), so the grid cannot go further that way." if ex.chosen_alpha == 0.5 else "."))
    if ex.chosen_vs:
        (d1, v1), (d2, v2) = ex.chosen_vs["R@1"]
        (a1, w1), (a2, w2) = ex.chosen_vs["ACC"]
        out.append(f"On the test classes ({len(ex.chosen_runs)} seeds), ZSML at the best-mean alpha = {ex.chosen_alpha:g} "
                   f"({_alpha_status(ex)}) "
                   f"{_say(v1, 'Recall@1')} ({format_interval(d1, signed=True)} pts) and {_say(w1, 'clustering accuracy')} "
                   f"({format_interval(a1, signed=True)} pts) against the paper's alpha = 0.3; against the Euclidean "
                   f"distance it {_say(v2, 'Recall@1')} ({format_interval(d2, signed=True)} pts) and "
                   f"{_say(w2, 'clustering accuracy')} ({format_interval(a2, signed=True)} pts).")
    if ex.pf_val_vs:
        out.append(_share_sentence(ex))
    if ex.ablation_vs:
        order = f"the test classes rank alpha {', '.join(f'{a:g}' for a in ex.test_order)} by mean Recall@1"
        if ex.val_order is None:
            order += " (no validation runs here to compare with)."
        elif ex.val_order == ex.test_order:
            order += ", the validation split's order."
        else:
            order += f", not the validation split's order ({', '.join(f'{a:g}' for a in ex.val_order)})."
        words = "; ".join(f"alpha {a:g} minus 0.3 {format_interval(p['R@1'].diff, signed=True)} R@1 pts "
                          f"({p['R@1'].verdict})" for a, p in ex.ablation_vs.items())
        best8 = reported_frame("8", paper=PAPER).idxmax()
        out.append(f"Table 8 analogue ({len(ABL_SEEDS)} seeds, descriptive): {order} On the test classes, {words}. The "
                   f"paper's Table 8 has its best value at alpha = 0.3 in {(best8 == 'alpha = 0.3').sum()} of its "
                   f"{len(best8)} columns.")
    if ex.k_vs:
        best_k = max(KS, key=lambda k: summarize(ex.k_runs[k], "R@1")[0])
        best7 = reported_frame("7", paper=PAPER).idxmax()
        out.append(f"Table 7 analogue ({len(ABL_SEEDS)} seeds, descriptive): the highest mean unseen Recall@1 is at "
                   f"k = {best_k} (the paper's Table 7 has its best value at k = 96 in {(best7 == 'k = 96').sum()} of "
                   f"its {len(best7)} columns); against k = 96, "
                   + "; ".join(f"k = {k} {format_interval(p['R@1'].diff, signed=True)} R@1 pts ({p['R@1'].verdict})"
                               for k, p in ex.k_vs.items()) + ".")
    if ex.nca_vs:
        (e1, u1), (z1, y1) = ex.nca_vs["R@1"]
        (e2, u2), (z2, y2) = ex.nca_vs["ACC"]
        out.append(f"NCA on the same features ({len(ex.nca_runs)} seeds) {_say(u1, 'Recall@1')} "
                   f"({format_interval(e1, signed=True)} pts) and {_say(u2, 'clustering accuracy')} "
                   f"({format_interval(e2, signed=True)} pts) against the Euclidean distance; against NCA, ZSML "
                   f"{_say(y1, 'Recall@1')} ({format_interval(z1, signed=True)} pts) and {_say(y2, 'clustering accuracy')} "
                   f"({format_interval(z2, signed=True)} pts).")
    if ex.arm_vs:
        out += _arm_sentences(ex)
    if ex.every is not None:
        ev = ex.every
        threads = int(ev.provenance.get("torch_threads") or 1)
        out.append(f"Scoring every ordered pair of the {int(ev['n_images']):,} unseen images took {ev['seconds'] / 60:.0f} "
                   f"min on {'one CPU thread' if threads == 1 else f'{threads} CPU threads'} with a peak of "
                   f"{ev['peak_rss_mib'] / 1024:.2f} GiB of memory; there ZSML's Recall@1 is {100 * ev['R@1']:.1f}% "
                   f"against {100 * ev['input R@1']:.1f}% for the Euclidean distance (one model).")
    if ex.xfer is not None:
        parts = []
        for source, target in (("SynthParts", "Flowers-102"), ("Flowers-102", "SynthParts")):
            (d1, v1), (d2, v2) = ex.xfer_vs[target]["R@1"]
            parts.append(f"trained on {source} and tested on {target}, ZSML {_say(v1, 'Recall@1')} "
                         f"({format_interval(d1, signed=True)} pts) against ZSML trained on {target} itself and "
                         f"{_say(v2, 'Recall@1')} ({format_interval(d2, signed=True)} pts) against the Euclidean distance")
        out.append(f"Inter-dataset transfer ({len(ex.zf)} seeds, pretrained features of both datasets): "
                   + "; ".join(parts) + ".")
    return out


def _arm_sentences(ex: Experiments) -> list[str]:
    from zslib.engine.stats import format_interval, summarize
    from zslib.reported import reported_frame

    runs, vs = ex.arm_runs, ex.arm_vs
    (lr_d, lr_v), (long_d, long_v) = vs["LR + Reloss, 200 steps"]["R@1"], vs["LR + Reloss, 1,000 steps"]["R@1"]
    long_runs = runs["LR + Reloss, 1,000 steps"]
    s_d, s_v = vs["ZSML (MR), S (1,000, 1,000)"]["R@1"]
    ld, lv = vs["Lifted + ZSML"]["R@1"]
    p6 = reported_frame("6", paper=PAPER)
    return [f"Table 9 analogue ({len(ex.zf)} seeds): the linear relation {_say(lr_v, 'Recall@1')} "
            f"({format_interval(lr_d, signed=True)} pts) against the relation kernels, reaching "
            f"{format_interval(summarize(runs['LR + Reloss, 200 steps'], 'R@1'))}% unseen Recall@1 after 200 steps; "
            f"trained for 1,000 steps it reaches {format_interval(summarize(long_runs, 'R@1', 'seen'))}% on the seen "
            f"classes' test images but {format_interval(summarize(long_runs, 'R@1'))}% on the unseen classes "
            f"({format_interval(long_d, signed=True)} pts against the kernels, {long_v}). "
            "The paper's Table 9 reports LR + Reloss above LMNN and GMML"
            + ("; on these features the similarity learned from difference vectors does not carry over to "
               "new ones." if lr_v == "down" and long_v == "down" else "."),
            f"The paper's S (1,000, 1,000) instead of (256, 256) {_say(s_v, 'Recall@1')} "
            f"({format_interval(s_d, signed=True)} pts).",
            f"Table 6 analogue ({len(runs['Lifted + ZSML'])} seeds): ZSML after a frozen lifted-structure embedding "
            f"{_say(lv, 'Recall@1')} ({format_interval(ld, signed=True)} pts) against that embedding's Euclidean "
            f"distance on the same images; the paper reports {p6.loc['Lifted+Ours', 'R@1'] - p6.loc['Lifted', 'R@1']:+.1f} "
            "R@1 points on CUB-200-2011."]


def chapter_findings(quick: QuickComparison, fig5_numbers: dict | None, real: RealComparison | None,
                     ex: Experiments | None):
    """The chapter's "What we found" list: the quick profile, the real profile and the experiments page, every
    sentence generated from the numbers (:func:`zslib.analysis.findings.found_list`)."""
    from zslib.analysis.findings import found_list

    return found_list(quick_findings(quick, fig5_numbers) + real_findings(real)
                      + (experiment_findings(ex) if ex is not None else []))


def key_findings():
    """The "Key findings" box the ZSML chapter opens with, generated from the recorded real-profile runs."""
    from zslib.analysis.findings import findings_box, not_recorded_box, recorded
    from zslib.engine.stats import format_interval, summarize

    c = real_configs()
    floor, runs = recorded({"f": c[FLOOR]}, (0,)), recorded({"z": every_image_config(), "h": c[HEAD]})
    if floor is None or runs is None:
        return not_recorded_box()
    from zslib.analysis.compare import rule_status
    from zslib.analysis.verdict import status_note, verb_words

    z = runs["z"]
    d, v = seed_difference(by_seed(z, "input R@1"), by_seed(z, "R@1"))
    status = rule_status("ZSML", z[0].config)
    return findings_box([
        f"On Flowers-102 photographs of unseen classes, ZSML's learned pair metric{status_note(status)} "
        f"{verb_words(v, status == 'chosen')} Recall@1 against the cosine of the same features, every unseen image "
        "ranked: "
        f"{format_interval(d, signed=True)} points over {len(z)} seeds paired.",
        f"The untrained features reach {100 * floor['f'][0].metric('R@1'):.1f} % unseen Recall@1 and a trained "
        f"embedding head (binomial deviance) {format_interval(summarize(runs['h']))} % (all unseen images, on this "
        "book's 160-px copy of the photographs).",
        "ZSML's relation network scores pairs, not distances: its neighbours in the figure below are the images "
        "it scores highest against each query."])
