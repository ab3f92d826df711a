"""The ZSML chapter's quick-profile section (Xu et al., IJCAI 2019, Sec. 5.1's protocol on SynthParts): the table of
ZSML and the linear relation against the Euclidean distance of the same frozen embedding, their paired verdicts,
the paper's printed tables, and the paper's Fig. 5 drawn from a checkpoint.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from zslib.engine.stats import format_interval, interval
from zslib.methods.zsml.analyses import fig5_pairs
from zslib.methods.zsml.recipes import MR
from zslib.present.base import Section
from zslib.present.zsml.numbers import METRICS, by_seed, cells, dataset_name, frame, printed, seed_difference

__all__ = ["QuickComparison", "quick_comparison", "paper_section", "Fig5", "fig5"]

def paper_section(*tables: str) -> Section:
    """The paper's printed tables (Xu et al. 2019, :func:`zslib.reported.reported_frame`), each under its citation."""
    return Section(paper=printed(*tables))


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
    euclid = {m: by_seed(runs[MR], f"input {m}") for m in METRICS}
    rows = [{"method": "Triplet (Euclidean)", **{m: format_interval(interval(euclid[m].values())) for m in METRICS}}]
    rows += [{"method": name, **cells(rs, unit="")} for name, rs in runs.items()]
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
    first = runs[MR][0].config
    caption = (f"*Unseen {dataset_name(first.dataset)} classes, {len(runs[MR])} seeds, "
               f"{first.method_params['eval_per_class']} images per class; % [95% CI].*")
    return QuickComparison(dict(runs), euclid, verdicts, Section(caption, frame(rows, "method")),
                           Section("", pd.DataFrame(vrows).set_index(["method", "metric"]).fillna("")))


@dataclass
class Fig5:
    """The paper's Fig. 5 for one run: ``section`` (the figure, or a note when the checkpoint is not here) and
    ``numbers`` (``moved``, ``corr``, ``positive``, ``negative``, ``zsml_steps``; ``None`` without a checkpoint)."""

    section: Section
    numbers: dict | None


def fig5(runs: Sequence) -> Fig5:
    """The paper's Fig. 5 for the seed-0 run of ``runs``: predicted similarity against the continuous label of 400
    training pairs, one colour per kind of pair, with the correlation of ``s`` and ``y`` in each kind and how far
    the labels moved from their Eq. 3 start."""
    run = next(r for r in runs if r.config.seed == 0)
    pairs = fig5_pairs(run)
    if pairs is None:
        return Fig5(Section("*The checkpoint of the seed-0 run is not here (results copied without checkpoints), so "
                            "there is no Fig. 5.*"), None)
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
    caption = (f"{out['positive']} positive and {out['negative']} negative pairs; correlation of s with y: "
               f"{corr['pos']:.2f} for the positives, {corr['neg']:.2f} for the negatives; the largest change of a "
               f"label from its Eq. 3 start: {moved:.2g}.")
    return Fig5(Section(figure=fig, notes=[caption]), out)
