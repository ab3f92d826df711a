"""Analyses of a trained model, stored beside its run: numbers that need the weights, which a record does not keep.

A run's result (:mod:`zslib.engine.store`) keeps metrics, not weights, and recorded runs are committed without
their checkpoints; an estimate that needs the trained network -- e.g. JRD's Table 3, the H-divergence
and the ideal joint error of :mod:`zslib.methods.jrd.theory` on the model's seen and unseen representations -- cannot
be computed from the record later. An *analysis record* fills that gap without touching the run or its
config: one small JSON file per (run, analysis), found by the run's :func:`~zslib.engine.config.config_hash`,

``<results>/analyses/<run name>-<config hash>-<analysis>.json``  (recorded: ``<results>/recorded/analyses/``)

with the run's config and hash, the analysis's settings, its values and its own provenance (commit, device,
date, code fingerprint) plus where the model came from. A new :class:`~zslib.engine.config.Config` field would
have changed the hash of every recorded run; a separate record changes none.

:func:`analyze` makes one: it takes the run's stored result (training it first with ``train=True``), gets
the trained model from the run's checkpoint or, when there is none (a recorded run), by training the run
again in a scratch folder and checking that the retrained metrics agree with the stored ones (within
``tolerance``; the largest difference is kept in the provenance), then calls the analysis function of
:data:`ANALYSES` on the model and the run's data. :func:`recorded_analyses` is what chapters call (as
:func:`zslib.engine.grid.recorded_grid` for runs); :func:`record_analyses` copies the records of a profile into
``recorded/analyses/`` (``python -m zslib record`` calls it).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from zslib.engine.config import Config, config_hash
from zslib.engine.grid import grid_jobs
from zslib.engine.store import (ResultFileError, check_key, hash_in_name, load_result, recorded_dir, provenance,
                                result_path, results_dir, file_slug,
                                short_commit, utc_minute, write_json)
from zslib.analysis.reproduce import check_reproduced
from zslib.engine.profile import device as default_device
from zslib.engine.registry import PAPERS
from zslib.engine.runner import build_data, load_model, run

__all__ = ["Analysis", "ANALYSES", "register_analysis", "get_analysis", "AnalysisRecord", "analyze", "analysis_path",
           "load_analysis", "recorded_analyses", "record_analyses", "recorded_analysis_records", "analysis_summary",
           "MissingAnalysesError"]


@dataclass(frozen=True)
class Analysis:
    """A named analysis: ``function(model, data, config, **params) -> {name: number}`` with fixed ``params``
    (recorded in every record, so that a record says how its numbers were made)."""

    name: str
    function: Callable[..., Mapping[str, float]]
    params: dict = field(default_factory=dict)

    def __call__(self, model, data, config) -> dict[str, float | list]:
        return {str(k): _value(v, k) for k, v in self.function(model, data, config, **self.params).items()}


def _value(v, name: str = "value"):
    """A number, or an array of numbers (e.g. attention maps) as nested lists; finite, else ``ValueError``."""
    a = np.asarray(v.detach().cpu() if torch.is_tensor(v) else v, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"analysis value {name!r} is not finite")
    return float(a) if a.ndim == 0 else a.tolist()


#: The analyses :func:`analyze` knows, by name. Each paper's folder registers its own in its ``analyses.py``
#: (:func:`register_analysis`); :func:`get_analysis` imports those modules the first time a name is asked for.
ANALYSES: dict[str, Analysis] = {}


def register_analysis(analysis: Analysis) -> Analysis:
    """Add ``analysis`` to :data:`ANALYSES` (called by a paper's ``analyses.py`` when it is imported)."""
    if analysis.name in ANALYSES and ANALYSES[analysis.name].function is not analysis.function:
        raise ValueError(f"an analysis named {analysis.name!r} is registered already")
    ANALYSES[analysis.name] = analysis
    return analysis


def _discover() -> None:
    """Import the analyses of every paper that records some (:attr:`zslib.engine.paper.Paper.analyses`; they register
    themselves)."""
    for paper in PAPERS.values():
        if paper.analyses is not None:
            paper.analyses()


def get_analysis(analysis: str) -> Analysis:
    """The registered analysis ``analysis``; an unknown name lists the known ones."""
    if analysis not in ANALYSES:
        _discover()
    if analysis not in ANALYSES:
        raise ValueError(f"unknown analysis {analysis!r}; choose one of {sorted(ANALYSES)}")
    return ANALYSES[analysis]


# ----------------------------------------------------------------------------------------------------
# The record


@dataclass
class AnalysisRecord:
    """The values of one analysis of one run, with the run's config, the analysis's settings and provenance."""

    analysis: str
    config: Config
    params: dict
    values: dict[str, float | list]  # a number, or an array of numbers as nested lists (np.asarray reads it)
    provenance: dict
    path: Path | None = None

    def __getitem__(self, name: str) -> float:
        if name not in self.values:
            raise KeyError(f"analysis {self.analysis!r} of {self.config.name!r} has no value {name!r}; it has "
                           f"{sorted(self.values)}")
        return self.values[name]

    def to_dict(self) -> dict:
        return {"format": "zslib-analysis", "analysis": self.analysis, "config": self.config.as_dict(),
                "config_hash": config_hash(self.config), "params": self.params, "values": self.values,
                "provenance": self.provenance}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the record atomically (:func:`zslib.engine.store.write_json`)."""
        self.path = write_json(path, self.to_dict())
        return self.path


def load_analysis(path: str | os.PathLike) -> AnalysisRecord:
    """Read and check an analysis record; a damaged or foreign file, or one whose config no longer has the
    hash it was stored under, raises :class:`~zslib.engine.store.ResultFileError` naming the file."""
    path = Path(path)
    todo = "delete it (the analysis is made again), or restore it from version control if it was recorded"
    try:
        d = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultFileError(f"{path} is not valid JSON ({e}); {todo}") from e
    if not isinstance(d, Mapping) or d.get("format") != "zslib-analysis":
        raise ResultFileError(f"{path} is not a zslib analysis record (no 'format': 'zslib-analysis'); {todo}")
    try:
        config = Config.from_dict(d["config"])
    except (KeyError, TypeError, ValueError) as e:
        raise ResultFileError(f"{path}: its config is missing or not valid for this zslib ({e}); {todo}") from e
    analysis = d.get("analysis")
    if not isinstance(analysis, str) or not analysis:
        raise ResultFileError(f"{path}: 'analysis' must name the analysis; {todo}")
    h = check_key(path, config, d.get("config_hash"), todo, suffix=f"-{analysis}")
    named = re.search(r"-[0-9a-f]{12}-(.+)\.json$", path.name)
    if named and named.group(1) != analysis:
        raise ResultFileError(f"{path}: it records analysis {analysis!r}, but its name says another; {todo}")
    run_file = (d.get("provenance") or {}).get("run_file") if isinstance(d.get("provenance"), Mapping) else None
    if isinstance(run_file, str) and hash_in_name(run_file) not in (None, h):
        raise ResultFileError(f"{path}: its config hashes to {h}, but it was made from the run {run_file}, another "
                              f"run; {todo}")
    values = d.get("values")
    try:
        if not isinstance(values, Mapping) or any(isinstance(v, (bool, str)) for v in values.values()):
            raise ValueError
        values = {str(k): _value(v, k) for k, v in values.items()}
    except (ValueError, TypeError):
        raise ResultFileError(f"{path}: 'values' must be an object of finite numbers or arrays of them; {todo}") from None
    return AnalysisRecord(analysis, config, dict(d.get("params") or {}), values,
                          dict(d.get("provenance") or {}), path)


def analysis_path(config: Config, analysis: str, directory: str | os.PathLike | None = None) -> Path:
    """Where the record of ``analysis`` for ``config`` is: in ``<directory>/analyses/``, else among the
    recorded ones (``<directory>/recorded/analyses/``), else where :func:`analyze` will write it."""
    directory = results_dir(directory)
    h = config_hash(config)
    pattern = f"*-{h}-{analysis}.json"
    found = sorted((directory / "analyses").glob(pattern)) or sorted((recorded_dir(directory) / "analyses").glob(pattern))
    return found[0] if found else directory / "analyses" / f"{file_slug(config.name)}-{h}-{analysis}.json"


# ----------------------------------------------------------------------------------------------------
# Making one


def analyze(config: Config, analysis: str = "bound_terms", results_dir: str | os.PathLike | None = None, *,
            train: bool = False, device=None, tolerance: float = 0.01, force: bool = False) -> AnalysisRecord:
    """The record of ``analysis`` for the run of ``config``: loaded when stored, else made and stored.

    The run must be stored (in ``results_dir`` or its ``recorded/`` folder); with ``train`` a missing run is
    trained first (:func:`zslib.engine.runner.run`). The model comes from the run's checkpoint when it has one, else
    the run is trained again in a scratch folder with the thread count of its provenance, and the retrained run
    must reproduce the stored one within ``tolerance`` (:func:`zslib.analysis.reproduce.check_reproduced`; else
    ``RuntimeError``: an analysis of another model would be mislabelled).
    """
    spec = get_analysis(analysis)
    directory = _results(results_dir)
    target = analysis_path(config, analysis, directory)
    if target.exists() and not force:
        return _served(load_analysis(target), config, analysis)
    started = time.perf_counter()
    run_file = result_path(config, directory)
    if not run_file.exists():
        if not train:
            raise MissingAnalysesError([config], analysis, directory, runs_missing=True)
        run(config, results_dir=directory, progress=False, device=device)
        run_file = result_path(config, directory)
    stored = load_result(run_file)
    if device is None:
        device = default_device()
    device = torch.device(device)
    ckpt = stored.checkpoint
    extra: dict = {}
    with tempfile.TemporaryDirectory(prefix="zslib-analysis-") as scratch:
        if ckpt is not None and ckpt.is_file():
            model, source = load_model(stored, device), stored
            extra["model_from"] = "checkpoint"
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(int(stored.provenance.get("torch_threads", 1)))
            try:
                again = run(config, results_dir=scratch, force=True, progress=False, device=device)
            finally:
                torch.set_num_threads(threads)
            worst = check_reproduced(stored, again, tolerance, device)  # else its model is not this run's
            model, source = load_model(again, device), again
            extra.update(model_from="retrained", reproduced_max_metric_diff=worst)
        with torch.no_grad():
            values = spec(model.eval(), build_data(config), config)
    values["run R@1"] = source.metric("R@1")  # of the model analyzed: ties the record to the run's own numbers
    values.setdefault("R@1", values["run R@1"])  # an analysis that measures its own Recall@1 keeps it
    prov = provenance(config, device, run_file=stored.path.name, run_commit=stored.provenance.get("git_commit"),
                      wall_seconds=round(time.perf_counter() - started, 3), **extra)
    record = AnalysisRecord(analysis, config, dict(spec.params), values, prov)
    record.save(directory / "analyses" / target.name)
    return record


def _served(record: AnalysisRecord, config: Config, analysis: str) -> AnalysisRecord:
    """``record`` if it is the record of ``analysis`` for the run of ``config``, else :class:`ResultFileError`."""
    if record.analysis != analysis or config_hash(record.config) != config_hash(config):
        raise ResultFileError(f"{record.path}: it is the {record.analysis} analysis of run {record.config.name} "
                              f"({config_hash(record.config)}), not the {analysis} analysis of {config.name} "
                              f"({config_hash(config)}); delete it (the analysis is made again)")
    return record


def _results(directory) -> Path:
    return results_dir(directory)


# ----------------------------------------------------------------------------------------------------
# Chapters and recording


class MissingAnalysesError(LookupError):
    """Analysis records (or the runs they need) a chapter wanted to show are not stored."""

    def __init__(self, configs, analysis, directory, runs_missing: bool = False):
        self.configs = list(configs)
        names = ", ".join(sorted({c.name for c in self.configs})[:6])
        profile = sorted({c.profile for c in self.configs})[0]
        what = "run(s)" if runs_missing else f"{analysis} analysis record(s)"
        super().__init__(f"{len(self.configs)} {what} of the {profile} profile are not stored in {directory} or its "
                         f"recorded/ folder (e.g. {names}); run this notebook with ZS_PROFILE={profile} to make them")


def recorded_analyses(grid: Mapping, analysis: str, what: str, seeds: Iterable[int] | None = None, *,
                      train: bool = False, results_dir: str | os.PathLike | None = None,
                      **analyze_kwargs) -> dict | None:
    """``{key: [AnalysisRecord per seed]}`` for a grid ``{key: Config}``, as :func:`zslib.engine.grid.recorded_grid`
    for runs: with ``train`` the missing records (and runs) are made with :func:`analyze`; without it only
    stored records are read, and if any is missing this prints which (naming the section by ``what``) and
    returns ``None``, so that the rest of the chapter goes on."""
    get_analysis(analysis)
    directory = _results(results_dir)
    jobs = grid_jobs(grid, seeds, "recorded_analyses()")
    if not train:
        missing = [c for _, c in jobs if not analysis_path(c, analysis, directory).exists()]
        if missing:
            print(f"The {analysis} analyses of {what} are not all recorded in this copy of the book:\n"
                  f"{MissingAnalysesError(missing, analysis, directory)}")
            return None
    out: dict = {key: [] for key in grid}
    for key, config in jobs:
        out[key].append(analyze(config, analysis, directory, train=train, **analyze_kwargs))
    return out


def record_analyses(profile: str, directory: str | os.PathLike | None = None, dry_run: bool = False) -> list[Path]:
    """Copy the analysis records of ``profile`` from ``<directory>/analyses`` into ``<directory>/recorded/analyses``
    (committed to the repository) unless recorded already; returns the recorded paths."""
    root = _results(directory)
    recorded = root / "recorded" / "analyses"
    have = {p.name for p in recorded.glob("*.json")}
    out = []
    # every record is checked (its config against its hash, its name and its run) before anything is copied
    todo = [(path, load_analysis(path)) for path in sorted((root / "analyses").glob("*.json"))]
    for path, record in todo:
        if record.config.profile != profile or path.name in have:
            continue
        out.append(recorded / path.name)
        if not dry_run:
            prov = dict(record.provenance, recorded_from=path.name)
            AnalysisRecord(record.analysis, record.config, record.params, record.values, prov).save(recorded / path.name)
    return out


def recorded_analysis_records(directory: str | os.PathLike | None = None) -> list[AnalysisRecord]:
    """The analysis records committed under ``<results>/recorded/analyses/`` (only those), in file-name order;
    each is checked by :func:`load_analysis` (a damaged one raises :class:`~zslib.engine.store.ResultFileError`)."""
    return [load_analysis(p) for p in sorted((recorded_dir(_results(directory)) / "analyses").glob("*.json"))]


def analysis_summary(record: AnalysisRecord) -> dict:
    """What made an analysis record, one value per field (``None`` where the file does not say): its file; the
    analysis; the run it analyzed (name, profile, seed, config hash, the run's result file and the commit that
    trained it); the commit (12 hex digits), device and date (UTC, to the minute) of the analysis itself; where
    the model came from (``checkpoint``, or ``retrained`` from the recorded config) and, when retrained, the
    largest difference between a retrained and a recorded metric."""
    c, p = record.config, record.provenance
    diff = p.get("reproduced_max_metric_diff")
    return {"file": record.path.name if record.path is not None else None, "analysis": record.analysis,
            "run": c.name, "profile": c.profile, "seed": c.seed, "config hash": config_hash(c),
            "run file": p.get("run_file"), "run commit": short_commit(p.get("run_commit")),
            "commit": short_commit(p.get("git_commit")), "device": p.get("device"), "date": utc_minute(p.get("timestamp")),
            "model_from": p.get("model_from"),
            "reproduced_max_metric_diff": float(diff) if isinstance(diff, (int, float)) else None}
