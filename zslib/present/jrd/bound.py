"""JRD Table 3 as numbers (Chu et al., ICML 2020, Sec. 3 and Table 3): the per-seed rows of lambda and d_H, their
table beside the paper's, the paired differences between arms and the evidence on how lambda is scaled.

The estimates themselves are :func:`zslib.methods.jrd.analyses.bound_terms`; this module arranges them. The sections
that show them are in :mod:`zslib.present.jrd.quick` (the quick profile) and :mod:`zslib.present.jrd.bound_tables`
(the recorded real-profile runs).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from zslib.engine.stats import format_interval, interval, verdict
from zslib.experiment import build_data, load_model
from zslib.methods.jrd.analyses import bound_terms
from zslib.methods.jrd.recipes import BOUND_OTHERS, JRD, QUICK_THEORY
from zslib.present.jrd.cells import PAPER3_ROW, QUANTITIES, frame, paper_cell, paper_table

__all__ = ["bound_row", "bound_rows", "quick_bound", "bound_table", "paired_values", "jrd_against", "against_text",
           "lambda_scale"]


def bound_row(seed: int, terms, r1: float) -> dict:
    """One seed's row of a Table 3 analogue from the output of :func:`zslib.methods.jrd.analyses.bound_terms`
    (a dict, or a recorded :class:`zslib.analysis.records.AnalysisRecord` of it) and the run's unseen Recall@1."""
    return dict(seed=seed, d_H=terms["d_H"], lam=terms["lambda"], lam_sum=terms["lambda_sum"],
                seen_err=terms["seen_error"], unseen_err=terms["unseen_error"], r1=r1)


def bound_rows(runs: Mapping, records: Mapping) -> dict:
    """``{arm: [row per seed]}`` of a Table 3 analogue from recorded runs and their ``bound_terms`` records
    (the same seeds, in the same order)."""
    out = {}
    for name, rs in records.items():
        assert [r.config.seed for r in runs[name]] == [a.config.seed for a in rs], name
        out[name] = [bound_row(a.config.seed, a, r.metric("R@1")) for r, a in zip(runs[name], rs)]
    return out


def quick_bound(runs: Mapping, names: Sequence[str] = QUICK_THEORY) -> dict:
    """The Table 3 analogue of the quick profile (JRD Sec. 3, Table 3): for each trained model of ``runs[name]``,
    :func:`zslib.methods.jrd.analyses.bound_terms` with its recorded settings (1-NN, five folds, two repeats, seed
    0) on the embeddings of the seen and the unseen images; ``{name: [row per seed]}``."""
    data = build_data(runs[JRD][0].config)  # all arms share the data of a seed: the dataset does not depend on it
    return {name: [bound_row(res.config.seed, bound_terms(load_model(res), data, res.config), res.metric("R@1"))
                   for res in runs[name]] for name in names}


def bound_table(bound: Mapping, digits: int = 3):
    """The Table 3 analogue of per-seed estimates ``{method: [row per seed]}`` (Recall@1, lambda as the mean of the
    two errors, d_H and their sum, each a 95% interval over seeds), the paper's CUB numbers beside JMMD and JRD."""
    paper3 = paper_table("3")
    rows = []
    for name, per_seed in bound.items():
        b = pd.DataFrame(per_seed)
        row = {"method": name, "R@1": format_interval(interval(b.r1), 1.0, digits),
               "lambda (mean of errors)": format_interval(interval(b.lam), 1.0, digits),
               "d_H": format_interval(interval(b.d_H), 1.0, digits),
               "lambda + d_H": format_interval(interval(b.lam + b.d_H), 1.0, digits)}
        if name in PAPER3_ROW:
            row.update({f"paper {c}": paper_cell(paper3, PAPER3_ROW[name], c) for c in ("Recall@1", "lambda", "d_H")})
        rows.append(row)
    return frame(rows, "method", "-")


def paired_values(bound: Mapping, a: str, b: str, key: str):
    """``(interval, verdict)`` of the per-seed differences b - a of one estimated quantity (``lam``, ``d_H``,
    ``r1``, ...) of a Table 3 analogue ``{arm: [row per seed]}``, matched by seed."""
    da, db = {r["seed"]: r[key] for r in bound[a]}, {r["seed"]: r[key] for r in bound[b]}
    assert sorted(da) == sorted(db), f"{a} and {b} have different seeds: {sorted(da)} and {sorted(db)}"
    diff = interval([db[s] - da[s] for s in sorted(da)])
    return diff, verdict(diff)


def jrd_against(bound: Mapping) -> dict:
    """``{(other arm, "lam" / "d_H"): (interval of JRD - other, verdict)}``, paired by seed."""
    return {(other, key): paired_values(bound, other, JRD, key) for other in BOUND_OTHERS for key, _ in QUANTITIES}


def against_text(verdicts: Mapping, digits: int) -> str:
    """JRD minus each other arm in lambda and d_H (:func:`jrd_against`), in words."""
    return "; ".join(f"{label} vs {other} {format_interval(verdicts[other, key][0], 1.0, digits, signed=True)} "
                     f"({verdicts[other, key][1]})"
                     for other in BOUND_OTHERS for key, label in QUANTITIES)


def lambda_scale(bound: Mapping) -> dict:
    """The evidence on how lambda is scaled (Ben-David's sum of two errors, or their mean as the paper's Table 3
    seems to report it): over the models of ``bound``, the unseen error of the joint 1-NN classifier minus
    (1 - unseen Recall@1), the seen error, lambda as a mean and as a sum; and the seen error each reading implies
    from the paper's own Table 3 (sum: lambda - (1 - R@1); mean: 2 lambda - (1 - R@1))."""
    paper3 = paper_table("3")
    allb = pd.DataFrame([r for rows in bound.values() for r in rows])
    gap = allb.unseen_err - (1 - allb.r1)
    implied = {name: (paper3.loc[row, "lambda"], 1 - paper3.loc[row, "Recall@1"]) for name, row in PAPER3_ROW.items()}
    return {"models": len(allb), "gap": gap, "premise_holds": bool(gap.abs().max() < 0.1),
            "seen_err": float(allb.seen_err.mean()), "lam": float(allb.lam.mean()),
            "lam_sum": float(allb.lam_sum.mean()),
            "sum_reading": {k: round(lam - u, 3) for k, (lam, u) in implied.items()},
            "mean_reading": {k: round(2 * lam - u, 3) for k, (lam, u) in implied.items()}}
