"""The JRD experiments page's Table 3 sections on Flowers-102 (Chu et al., ICML 2020, Sec. 3 and Table 3): lambda
and d_H of AM-Softmax, JMMD and JRD from their recorded analysis records, under a 1-NN and a 5-NN estimator, and the
same two estimates for every variant and kernel, each arm paired by seed with JRD. Each function takes the chapter's
:class:`~zslib.present.jrd.study.JRDStudy` and returns a :class:`~zslib.present.base.Section` (or
:class:`~zslib.present.base.Sections`)."""
from __future__ import annotations
from zslib.engine.stats import format_interval

import pandas as pd

from zslib.methods.jrd.recipes import BOUND_OTHERS, BOUND_SEEDS, JRD, KERNEL_SEEDS
from zslib.present.base import Section, Sections
from zslib.present.jrd.bound import against_text, bound_table
from zslib.present.jrd.cells import QUANTITIES, describe_analyses, frame, missing_section, paper_table

__all__ = ["real_bound_section", "real_bound_5nn_section", "bound_variants_kernels_section", "moved_5nn_section"]


def real_bound_section(study) -> Section:
    """The Table 3 analogue on Flowers-102 (1-NN, five folds, two repeats): lambda and d_H of AM-Softmax, JMMD at
    0.1 and JRD at 1 from their recorded ``bound_terms`` records, JRD paired with the other two, and the gap between
    the unseen part of lambda and 1 - Recall@1."""
    if study.bound is None:
        return missing_section(study, "the Table 3 analogue (or its analysis records)", "the Table 3 analogue",
                               "the Table 3 analogue (records)")
    r1 = "; ".join(f"unseen Recall@1 vs {other} {format_interval(study.theory[other, 'r1'].diff, digits=2, signed=True)} points "
                   f"({study.theory[other, 'r1'].verdict})" for other in BOUND_OTHERS)
    allr = pd.DataFrame([r for rows in study.bound.values() for r in rows])
    gap = allr.unseen_err - (1 - allr.r1)
    return Section(
        caption=f"{describe_analyses(study.bound_records)} {len(BOUND_SEEDS)} seeds per row, four digits (the "
                f"differences are that small); the paper's columns: {paper_table('3').attrs['citation']} (CUB, "
                "fine-tuned BN-Inception).",
        table=bound_table(study.bound, digits=4),
        notes=[f"JRD minus the other arm, paired by seed: {against_text(study.theory, 4)}; {r1}.\n\n"
               f"The unseen error of the joint 1-NN classifier minus (1 - unseen Recall@1), over {len(allr)} models: "
               f"mean {gap.mean():+.3f}, range [{gap.min():+.3f}, {gap.max():+.3f}]; the seen error: mean "
               f"{allr.seen_err.mean():.3f}."])


def real_bound_5nn_section(study) -> Sections | Section:
    """The same Table 3 analogue with a 5-NN vote (``bound_terms_5nn``, all else equal), and the 1-NN and 5-NN
    verdicts of JRD minus each other arm side by side."""
    if study.bound_5nn is None:
        return missing_section(study, "the 5-NN Table 3 analogue (or its analysis records)",
                               "the Table 3 analogue (5-NN)")
    rows = []
    for other in BOUND_OTHERS:
        for key, label in QUANTITIES:
            (d1, w1), (d5, w5) = study.theory[other, key], study.theory_5nn[other, key]
            rows.append({"JRD minus": other, "quantity": label, "1-NN": format_interval(d1, 1.0, 4, signed=True),
                         "1-NN verdict": w1, "5-NN": format_interval(d5, 1.0, 4, signed=True), "5-NN verdict": w5,
                         "same verdict": "yes" if w1 == w5 else "no"})
    return Sections([
        Section(caption=f"{describe_analyses(study.bound_records_5nn)} Estimator settings: "
                        f"{study.bound_records_5nn[JRD][0].params} here, {study.bound_records[JRD][0].params} in the "
                        f"1-NN table; {len(BOUND_SEEDS)} seeds per row.", table=bound_table(study.bound_5nn, digits=4)),
        Section(caption="JRD minus the other arm, paired by seed, under the two estimator settings:",
                table=frame(rows, ["JRD minus", "quantity"]))])


def bound_variants_kernels_section(study) -> Sections | Section:
    """Table 3 (1-NN) for every variant of the Table 2 analogue and every kernel of the Table 4 analogue, each
    arm's lambda and d_H paired by seed with JRD's."""
    if not study.more_bound:
        return missing_section(study, "the variants' and kernels' analysis records", "the variants (Table 3)",
                               "the kernels (Table 3)")
    out = []
    for table_name, rows in study.more_bound.items():
        table = bound_table(rows, digits=4)
        for name in rows:
            if (table_name, name) not in study.bound_vs_jrd:
                continue
            for key, label in QUANTITIES:
                diff, word = study.bound_vs_jrd[table_name, name][key]
                table.loc[name, f"{label} vs JRD"] = format_interval(diff, 1.0, 4, signed=True)
                table.loc[name, f"{label} verdict"] = word
        out.append(Section(caption=f"Table 3 analogue for the {table_name}: {len(rows[JRD])} seeds per row, "
                                   "differences arm minus JRD, paired by seed; the paper's columns: "
                                   f"{paper_table('3').attrs['citation']}. "
                                   f"{describe_analyses(study.more_bound_records[table_name])}",
                           table=table.fillna("-")))
    return Sections(out)


def moved_5nn_section(study) -> Section:
    """The variants and kernels whose lambda or d_H moved clearly against JRD with 1-NN, re-estimated with 5-NN:
    the two verdicts side by side."""
    if not study.moved_5nn:
        return missing_section(study, "the 5-NN records of the arms that moved", "the variants that moved (5-NN)",
                               "the kernels that moved (5-NN)")
    rows = [{"table": t, "arm": name, "quantity": label, "1-NN": format_interval(one[0], 1.0, 4, signed=True),
             "1-NN verdict": one[1],
             "5-NN": format_interval(five[0], 1.0, 4, signed=True), "5-NN verdict": five[1],
             "same verdict": "yes" if one[1] == five[1] else "no"}
            for (t, name), q in study.moved_5nn.items() for key, label in QUANTITIES for one, five in [q[key]]]
    return Section(caption=f"Arm minus JRD, paired by seed ({len(BOUND_SEEDS)} seeds for the variants, "
                           f"{len(KERNEL_SEEDS)} for the kernels), under the two estimator settings.",
                   table=frame(rows, ["table", "arm", "quantity"]))
