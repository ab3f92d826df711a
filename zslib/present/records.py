"""The recorded-runs page (``book/recorded_runs.ipynb``): every committed run, its metrics, the runs that keep their
trained weights and the analysis records, each as a :class:`~zslib.present.base.Section` generated from the files
under ``results/recorded/`` (or the installed copy of them) at the time the page is built.
"""
from __future__ import annotations

import pandas as pd

from zslib.analysis.records import analysis_summary, recorded_analysis_records
from zslib.analysis.tables import searchable
from zslib.engine.store import recorded_runs, recorded_runs_table
from zslib.engine.kept_weights import has_kept_weights, weights_path
from zslib.present.base import Section

__all__ = ["runs_section", "run_metrics_section", "kept_weights_section", "analysis_records_section"]

#: The columns of the analysis records' table, in the order the page explains them.
ANALYSIS_COLUMNS = ("file", "analysis", "run", "seed", "config hash", "run commit", "commit", "date", "model_from",
                    "reproduced_max_metric_diff")


def runs_section(runs: list | None = None) -> Section:
    """How many runs are recorded (methods, datasets) and all of them in one searchable table."""
    runs = recorded_runs() if runs is None else runs
    if not runs:
        return Section(caption="No run is recorded yet: `python -m zslib record --profile full` copies finished runs "
                               "into `results/recorded/`.")
    table = recorded_runs_table(runs)
    return Section(caption=f"**{len(runs)} runs** are recorded, {table.method.nunique()} methods on "
                           f"{table.dataset.nunique()} dataset(s). The table lists every one: type in the search box "
                           "(e.g. `zsml`, `s3`, a commit), click a column to sort, and page through the rows.",
                   table=searchable(table, caption="Every recorded run: config, unseen-class metrics (%) and "
                                                   "provenance"))


def run_metrics_section(runs: list | None = None) -> Section:
    """Every metric of every split of the first recorded run, as stored (fractions, not percent)."""
    runs = recorded_runs() if runs is None else runs
    if not runs:
        return Section(notes=["No metrics to show: no run is recorded yet."])
    first = runs[0]
    name = first.path.name if first.path is not None else "the first recorded run"
    return Section(caption=f"`{name}`: every metric of every split.", table=pd.DataFrame(first.metrics).round(4))


def kept_weights_section(runs: list | None = None) -> Section:
    """The recorded runs that keep their trained parameters (:mod:`zslib.engine.kept_weights`), with the file's size."""
    runs = recorded_runs() if runs is None else runs
    kept = [r for r in runs if has_kept_weights(r)]
    if not kept:
        return Section(notes=["No recorded run keeps its trained weights in this copy (`results/recorded/weights/` "
                              "is empty): a page that would draw a method's own model on the photographs trains it "
                              "again or says why it cannot."])
    rows = [{"run": r.path.name, "method": r.config.method, "loss": r.config.loss, "seed": r.config.seed,
             "weights file": weights_path(r).name, "MB": round(weights_path(r).stat().st_size / 2**20, 2)}
            for r in kept]
    total = sum(row["MB"] for row in rows)
    return Section(caption=f"**{len(kept)} of {len(runs)} recorded runs keep their trained weights** "
                           f"({total:.1f} MB in all), the runs the chapters draw on the photographs:",
                   table=pd.DataFrame(rows))


def analysis_records_section() -> Section:
    """Every analysis record (:mod:`zslib.analysis.records`) in one searchable table, or a note that there are
    none and how to make them."""
    records = recorded_analysis_records()
    if not records:
        return Section(caption="No analysis is recorded yet: `results/recorded/analyses/` holds no record. A chapter "
                               "run with `ZS_PROFILE=real` makes the ones it shows; `python -m zslib record "
                               "--profile real` copies them there.")
    summary = pd.DataFrame([analysis_summary(a) for a in records])
    return Section(caption=f"**{len(records)} analysis records**, of {summary['config hash'].nunique()} recorded "
                           "runs:",
                   table=searchable(summary[list(ANALYSIS_COLUMNS)], caption="Every analysis record"))
