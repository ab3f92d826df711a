"""The JRD chapter's quick-profile sections (Chu et al., ICML 2020, ``chu2020jrd``): the Table 2 analogue, JRD
against its variants, the Table 3 analogue and how lambda is scaled, each a :class:`~zslib.present.base.Section`
made from the runs the chapter trained (:func:`zslib.methods.jrd.recipes.quick_grid`)."""
from __future__ import annotations

from collections.abc import Mapping

from zslib.engine.stats import format_interval, paired, summarize
from zslib.methods.jrd.recipes import AM_SOFTMAX, JRD
from zslib.present.base import Section
from zslib.present.jrd.bound import against_text, bound_table, jrd_against, lambda_scale
from zslib.present.jrd.cells import PAPER2_ROW, frame, paper_cell, paper_table

__all__ = ["quick_table", "quick_table_section", "quick_vs_jrd", "quick_variants_section", "quick_bound_section",
           "bound_verdicts_section", "lambda_scale_section"]


def quick_table(runs: Mapping):
    """The Table 2 analogue of the quick profile: unseen Recall@1 and NMI, seen Recall@1 (95% intervals over
    seeds), each arm paired by seed with AM-Softmax alone, and the paper's CUB Recall@1 where it has the row."""
    paper2 = paper_table("2")
    rows = []
    for name, rs in runs.items():
        row = {"method": name, "unseen R@1 % [95% CI]": format_interval(summarize(rs)),
               "unseen NMI %": format_interval(summarize(rs, "NMI")),
               "seen R@1 %": format_interval(summarize(rs, split="seen"))}
        if name != AM_SOFTMAX:
            p = paired(runs[AM_SOFTMAX], rs)
            row.update({"vs AM-Softmax (pts)": format_interval(p.diff, signed=True), "verdict": p.verdict})
        row["paper CUB R@1 % (Table 2)"] = paper_cell(paper2, PAPER2_ROW.get(name), "CUB R@1")
        rows.append(row)
    return frame(rows, "method")


def quick_table_section(runs: Mapping) -> Section:
    """The quick profile's Table 2 analogue (:func:`quick_table`) under its caption."""
    return Section(caption=f"{len(runs[JRD])} seeds per row, 95% intervals; the paper's column: "
                           f"{paper_table('2').attrs['citation']}.", table=quick_table(runs))


def quick_vs_jrd(runs: Mapping) -> dict:
    """``{arm: paired(arm, JRD)}`` of unseen Recall@1 for MRD, JRD-C and JMMD: JRD minus each arm, by seed."""
    return {name: paired(runs[name], runs[JRD]) for name in ("MRD", "JRD-C", "JMMD")}


def quick_variants_section(runs: Mapping) -> Section:
    """JRD minus each of its variants and JMMD on the quick profile, unseen Recall@1 paired by seed."""
    return Section(caption="JRD minus each arm, unseen Recall@1 in points, paired by seed: "
                           + "; ".join(f"**{name}** {format_interval(p.diff, digits=1, signed=True)} ({p.verdict})"
                                       for name, p in quick_vs_jrd(runs).items()) + ".")


def quick_bound_section(bound: Mapping, seconds: float) -> Section:
    """The quick profile's Table 3 analogue (:func:`zslib.present.jrd.bound.bound_table` of the per-seed rows
    ``bound`` that :func:`zslib.present.jrd.bound.quick_bound` estimated in ``seconds``)."""
    return Section(caption=f"Estimated in {seconds:.1f} s, {len(bound[JRD])} seeds per row; the paper's columns: "
                           f"{paper_table('3').attrs['citation']}.", table=bound_table(bound))


def bound_verdicts_section(bound: Mapping, digits: int = 3) -> Section:
    """JRD minus JMMD and minus AM-Softmax in lambda and d_H, paired by seed
    (:func:`zslib.present.jrd.bound.jrd_against`)."""
    return Section(caption=f"JRD minus the other arm, paired by seed: {against_text(jrd_against(bound), digits)}.")


def lambda_scale_section(bound: Mapping) -> Section:
    """:func:`zslib.present.jrd.bound.lambda_scale` as sentences."""
    s = lambda_scale(bound)
    gap = s["gap"]

    def readings(d):
        return " and ".join(f"{v:+.3f} ({k})" for k, v in d.items())

    return Section(caption=(
        f"- Over the {s['models']} models, the unseen error of the joint 1-NN classifier minus (1 - unseen Recall@1): "
        f"mean {gap.mean():+.3f}, range [{gap.min():+.3f}, {gap.max():+.3f}].\n"
        f"- The joint classifier's seen error: mean {s['seen_err']:.3f}; lambda as a mean of the two errors "
        f"{s['lam']:.3f}, as their sum {s['lam_sum']:.3f}.\n"
        f"- The paper's Table 3, sum reading: implied seen errors {readings(s['sum_reading'])}"
        + (", impossible for an error" if all(v < 0 for v in s["sum_reading"].values()) else "")
        + f". Mean reading: {readings(s['mean_reading'])}."))
