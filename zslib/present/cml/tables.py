"""The CML chapter's tables (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): the quick grid beside the
paper's Table IV and its paired verdicts, the validation sweep of the real profile, the real-photograph table, and
the checks of Lemmas 1-5. Each ``*_section`` returns a :class:`~zslib.present.base.Section` whose text is written
from the numbers (:mod:`zslib.present.cml.sentences`).
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from zslib.engine.stats import format_interval, paired, summarize
from zslib.methods.cml.recipes import VARIANT_TERMS
from zslib.present.base import Section
from zslib.present.cml.sentences import (grid_note, hoeffding_text, lemma_bounds_text, mixture_text,
                                        provenance_caption, quick_verdict, weights_caption)
from zslib.present.cml.study import CmlStudy
from zslib.reported import reported_frame

__all__ = ["PAPER_NAMES", "grid_section", "quick_table", "quick_section", "verdict_table", "verdict_section",
           "sweep_table", "sweep_section", "real_table", "real_section", "lemma_bounds_section", "mixture_section",
           "hoeffding_section"]

#: The paper's row names of each (loss, variant) in Table IV: the baselines by loss, the CML rows by variant.
PAPER_NAMES = {"baseline": {"triplet": "Triplet", "npair": "N-Pair", "binomial": "Binomial"},
               "cml-e": "CML-e ({})", "cml-d": "CML-d ({})", "cml": "CML ({})"}
_SHORT = {"triplet": "Tri", "npair": "N-Pair", "binomial": "Binomial"}


def grid_section(runs: Mapping, seconds: float) -> Section:
    """The line under the quick grid (:func:`zslib.present.cml.sentences.grid_note`)."""
    return Section(notes=[grid_note(runs, seconds)])


def quick_table(runs: Mapping) -> pd.DataFrame:
    """Every ``(loss, variant)`` of ``runs``: unseen Recall@1 and NMI, seen Recall@1 (95% intervals over seeds),
    beside the paper's CUB Recall@1 of the same row (Table IV) and its gain over the paper's baseline."""
    paper = reported_frame("IV")  # CUB, the dataset of the full profile
    rows = []
    for (l, v), rs in runs.items():
        pname = PAPER_NAMES["baseline"][l] if v == "baseline" else PAPER_NAMES[v].format(_SHORT[l])
        rows.append({"loss": l, "variant": v, "unseen R@1 % [95% CI]": format_interval(summarize(rs)),
                     "unseen NMI %": format_interval(summarize(rs, "NMI")),
                     "seen R@1 % [95% CI]": format_interval(summarize(rs, split="seen")),
                     "paper CUB R@1 %": paper.loc[pname, "R@1"],
                     "paper gain over baseline": paper.loc[pname, "R@1"]
                     - paper.loc[PAPER_NAMES["baseline"][l], "R@1"]})
    return pd.DataFrame(rows).set_index(["loss", "variant"])


def quick_section(runs: Mapping) -> Section:
    """:func:`quick_table` under the count of seeds and the paper's citation."""
    paper = reported_frame("IV")
    return Section(caption=f"Seeds per row: {len(next(iter(runs.values())))}; the paper's numbers: "
                           f"{paper.attrs['citation']}.", table=quick_table(runs))


def verdict_table(runs: Mapping) -> pd.DataFrame:
    """Each CML variant of ``runs`` against its loss's baseline, paired by seed: the difference in unseen and seen
    Recall@1 (points, 95% interval) and its verdict (``"unseen effect"``, ``"seen effect"``)."""
    rows = []
    for (l, v), rs in runs.items():
        if v == "baseline":
            continue
        row = {"loss": l, "variant": v}
        for split in ("unseen", "seen"):
            p = paired(runs[l, "baseline"], rs, "R@1", split)
            row[f"d {split} R@1 (pts)"] = format_interval(p.diff, signed=True)
            row[f"{split} effect"] = p.verdict
        rows.append(row)
    return pd.DataFrame(rows).set_index(["loss", "variant"])


def verdict_section(runs: Mapping, fit_floor: float = 0.1) -> Section:
    """:func:`verdict_table`, then the counts and the verdict on the paper's claim written from it
    (:func:`zslib.present.cml.sentences.quick_verdict`)."""
    table = verdict_table(runs)
    return Section(table=table, notes=[quick_verdict(table, runs, fit_floor)])


def sweep_table(sweep: Mapping) -> pd.DataFrame:
    """The validation sweep as a table: each weight (λ1 or λ2 of CML's Eq. 11) with its validation Recall@1 and its
    paired difference from the loss alone (same seeds), with the verdict."""
    rows = []
    for (loss, term, weight), rs in sweep.items():
        p = paired(sweep[loss, "none", 0.0], rs, "R@1", "val") if term != "none" else None
        rows.append({"loss": loss, "term": term, "weight": weight,
                     "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
                     "vs no confusion (pts)": format_interval(p.diff, signed=True) if p else "",
                     "verdict": p.verdict if p else ""})
    return pd.DataFrame(rows).set_index(["loss", "term", "weight"])


def sweep_section(study: CmlStudy) -> Section:
    """The real profile's validation sweep (:func:`sweep_table`) under the weights it leads to and what the book's
    choice rule made of them (:func:`zslib.present.cml.sentences.weights_caption`)."""
    sweep = study.sweep()
    if sweep is None:
        return Section(caption=study.missing_note("the validation sweep"))
    return Section(caption=weights_caption(sweep, study.chosen(), study.sweep_seconds, study.train),
                   table=sweep_table(sweep))


def real_table(runs: Mapping, floor, kept: set = frozenset()) -> pd.DataFrame:
    """The real-photograph table: the untrained features (``floor``, one run), then every ``(loss, variant)`` of
    ``runs`` with unseen and seen Recall@1 over seeds, the gain over the untrained features, and each CML variant's
    paired difference from its baseline with the verdicts on the unseen and the seen classes. ``kept``: the
    ``(loss, term)`` pairs the choice rule kept off (:func:`zslib.methods.cml.recipes.ablations`); a variant that
    uses such a term is marked "(ablation)" in its verdicts."""
    raw = floor.metric("R@1")
    rows = [{"loss": "-", "variant": "pretrained features, no training", "unseen R@1 %": f"{100 * raw:.1f}",
             "seen R@1 %": f"{100 * floor.metric('R@1', 'seen'):.1f}", "vs baseline (pts)": "", "unseen": "",
             "seen": "", "vs pretrained (pts)": ""}]
    for (loss, variant), rs in runs.items():
        row = {"loss": loss, "variant": variant, "unseen R@1 %": format_interval(summarize(rs)),
               "seen R@1 %": format_interval(summarize(rs, split="seen")),
               "vs pretrained (pts)": f"{100 * (summarize(rs)[0] - raw):+.1f}",
               "vs baseline (pts)": "", "unseen": "", "seen": ""}
        if variant != "baseline":
            pu, ps = paired(runs[loss, "baseline"], rs), paired(runs[loss, "baseline"], rs, split="seen")
            tag = " (ablation)" if any((loss, t) in kept for t in VARIANT_TERMS.get(variant, ())) else ""
            row.update({"vs baseline (pts)": format_interval(pu.diff, signed=True), "unseen": pu.verdict + tag,
                        "seen": ps.verdict + tag})
        rows.append(row)
    return pd.DataFrame(rows).set_index(["loss", "variant"])


def real_section(study: CmlStudy) -> Section:
    """The real-photograph table (:func:`real_table`) of the study's test rows and floor, under where they were
    made (:func:`zslib.present.cml.sentences.provenance_caption`)."""
    runs, floor = study.runs(), study.floor()
    if runs is None or floor is None:
        return Section(caption=study.missing_note())
    return Section(caption=provenance_caption(runs, floor), table=real_table(runs, floor, study.kept()))


def lemma_bounds_section(frame) -> Section:
    """Lemmas 1 and 2 checked on random class pairs (:func:`zslib.present.cml.sentences.lemma_bounds_text`)."""
    return Section(notes=[lemma_bounds_text(frame)])


def mixture_section(frame) -> Section:
    """The mixtures of Lemmas 3-4 as a table, and what they show (:func:`zslib.present.cml.sentences.mixture_text`)."""
    return Section(table=frame, notes=[mixture_text(frame)])


def hoeffding_section(table, delta: float) -> Section:
    """Lemma 5 by sampling: the bound per batch size, and what it shows
    (:func:`zslib.present.cml.sentences.hoeffding_text`)."""
    return Section(table=table.set_index("b"), notes=[hoeffding_text(table, delta)])
