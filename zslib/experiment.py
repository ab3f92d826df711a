"""Experiments, the front door the chapters use: configure a run, train it (or load it), compare runs.

Everything here lives in a module named after its concept; this module gathers the names a chapter needs:

* :class:`Config`, :func:`config_hash` -- what a run is (:mod:`zslib.engine.config`);
* :func:`run`, :func:`build_data`, :func:`build_model`, :func:`load_model`, :func:`evaluate_checkpoint` --
  one run (:mod:`zslib.engine.runner`);
* :func:`choose_on_validation` -- a method's validation grid with "off" among the candidates, and the choice rule;
* :func:`run_grid`, :func:`recorded_grid`, :func:`run_many`, :func:`run_seeds`, :func:`default_workers` -- many runs in parallel
  (:mod:`zslib.engine.grid`);
* :func:`analyze`, :func:`recorded_analyses` -- analyses that need a run's trained model (e.g. JRD Table 3's
  lambda and d_H), stored beside the run (:mod:`zslib.analysis.records`);
* :class:`Result`, :func:`load_result`, :func:`load_results`, :func:`results_dir` -- stored results with
  their provenance (:mod:`zslib.engine.store`);
* :func:`summarize`, :func:`paired`, :func:`format_interval` -- intervals and paired verdicts
  (:mod:`zslib.engine.stats`);
* :func:`finetuned_runs`, :func:`regime`, :func:`regime_label` -- the runs fine-tuned end to end (``python -m zslib
  finetune``, usually on a GPU), a third regime beside the frozen and the adapted one, labelled with their hardware
  (:mod:`zslib.campaign.records`).
* :func:`diverged_label` -- a table's status cell ("diverged: k of n seeds") (:mod:`zslib.engine.stats`).
"""
from __future__ import annotations

from zslib.analysis.records import analyze, recorded_analyses
from zslib.campaign.records import finetuned_runs, regime, regime_label
from zslib.engine.config import Config, config_hash
from zslib.engine.grid import (MissingRunsError, choose_on_validation, default_workers, recorded_grid, run_grid,
                               run_many, run_seeds)
from zslib.engine.runner import build_data, build_model, evaluate_checkpoint, load_model, run
from zslib.engine.stats import diverged_label, format_interval, paired, summarize
from zslib.engine.store import Result, ResultFileError, load_result, load_results, results_dir

__all__ = ["Config", "config_hash", "run", "build_data", "build_model", "load_model", "evaluate_checkpoint",
           "run_grid", "recorded_grid", "choose_on_validation", "run_many", "run_seeds", "default_workers",
           "MissingRunsError", "Result", "ResultFileError", "load_result",
           "load_results", "results_dir", "summarize", "paired", "format_interval", "diverged_label", "analyze",
           "recorded_analyses", "finetuned_runs", "regime", "regime_label"]
