"""How the JRD chapters write a number, a row and a missing section (Chu et al., ICML 2020, ``chu2020jrd``).

The small pieces every table and sentence of :mod:`zslib.present.jrd` shares: a signed interval, a table from rows,
the paper's own tables and cells (Tables 2-4) with the rows that stand for ours, the verdict groups, the
provenance of recorded runs and analysis records, and the section shown where runs are not recorded.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from zslib.present.base import Section
from zslib.reported import reported_frame, reported_table

__all__ = ["PAPER", "PAPER2_ROW", "PAPER3_ROW", "PAPER4_ROW", "QUANTITIES", "VERDICTS", "frame",
           "groups", "paper_table", "paper_cell", "paper4", "paper4_entry", "provenance", "describe_analyses",
           "missing_section"]

#: The bibliography key of the paper.
PAPER = "chu2020jrd"
#: The two estimated terms of Table 3: ``(key of a row of estimates, label)``.
QUANTITIES = (("lam", "lambda"), ("d_H", "d_H"))
#: The three paired verdicts, in the order the sentences group them.
VERDICTS = ("up", "down", "no clear effect")
#: Our arms -> the rows of the paper's Tables 2, 3 and 4 that stand for them.
PAPER2_ROW = {"JRD": "JRD", "MRD": "MRD", "JRD-C": "JRD-C", "JRD-pooling": "JRD-Pooling"}
PAPER3_ROW = {"JMMD": "JMMD (alpha 0.1)", "JRD": "JRD (alpha 1)"}
PAPER4_ROW = {"gaussian_mixture": "Gaussian (alpha 1)", "gaussian": "Gaussian (alpha 1)",
              "laplace": "Laplace (alpha 1)", "polynomial2": "Polynomial p=2 (alpha 1e-3)",
              "polynomial5": "Polynomial p=5 (alpha 1e-3)", "exponential": "Exponential (alpha 1e-3)"}


def frame(rows: Sequence[dict], index, fill: str = ""):
    """A table of ``rows`` (one dict each) indexed by ``index``, with ``fill`` where a row has no entry."""
    return pd.DataFrame(rows).set_index(index).fillna(fill)


def groups(verdicts: Mapping) -> dict[str, str]:
    """``{verdict word: "name, name" or "none"}`` of ``{name: verdict}`` for the three verdict words."""
    return {w: ", ".join(str(n) for n, v in verdicts.items() if v == w) or "none" for w in VERDICTS}


def paper_table(table: str, with_std: bool = True):
    """The paper's printed table ``table`` as a frame (:func:`zslib.reported.reported_frame`)."""
    return reported_frame(table, paper=PAPER, with_std=with_std)


def paper_cell(table, row: str | None, column: str) -> str:
    """A reported number with its 95% half-width, ``"50.7 (+-1.1)"``; ``"-"`` for a row the paper does not have."""
    return f"{table.loc[row, column]} (+-{table.loc[row, column + ' ci95']})" if row else "-"


def paper4():
    """The paper's Table 4 (CUB Recall@1 per kernel) and the alpha it used for each row."""
    return paper_table("4", with_std=False), reported_table("4", PAPER)["alphas"]


def paper4_entry(kernel: str, recall: bool = True) -> str:
    """The paper's Table 4 row for one of our kernels: ``"68.1 at alpha 1"`` (or only the alpha); ``"-"`` if none."""
    table, alphas = paper4()
    row = PAPER4_ROW.get(kernel)
    if row is None:
        return "-"
    return f"{table.loc[row, 'R@1']} at alpha {alphas[row]:g}" if recall else f"{alphas[row]:g}"


def provenance(runs: Sequence) -> str:
    """Where a set of recorded runs was made: devices and commits."""
    devices = ", ".join(sorted({str(r.provenance.get("device")) for r in runs}))
    commits = ", ".join(sorted({str(r.provenance.get("git_commit"))[:12] for r in runs}))
    return f"on {devices}, commit(s) {commits}"


def describe_analyses(records: Mapping) -> str:
    """Where the analysis records ``{arm: [record per seed]}`` come from, in one sentence."""
    pv = [a.provenance for rs in records.values() for a in rs]
    retrained = [p for p in pv if p.get("model_from") == "retrained"]
    worst = max((p["reproduced_max_metric_diff"] for p in retrained), default=0.0)
    return (f"{len(pv)} analysis records, made {min(p['timestamp'] for p in pv)} to {max(p['timestamp'] for p in pv)} "
            f"on {', '.join(sorted({str(p.get('device')) for p in pv}))}, commit(s) "
            f"{', '.join(sorted({str(p.get('git_commit'))[:12] for p in pv}))}; {len(retrained)} models trained again "
            f"from their recorded config (largest difference from a recorded metric: {worst:.1e}), "
            f"{len(pv) - len(retrained)} read from the checkpoint of a run trained when its record was made.")


def missing_section(study, what: str, *names: str) -> Section:
    """The section shown in place of one whose real-profile runs are not all recorded: what is missing, and the
    study's note on which of the grids ``names`` (default: all) to train (:meth:`zslib.present.base.Study.
    missing_note`)."""
    note = study.missing_note(*names)
    return Section(caption=f"*The real-profile runs of {what} are not all recorded in this copy of the book, so this "
                           "section has nothing to show.*", notes=[note] if note else [])
