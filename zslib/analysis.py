"""Analyses of a trained model, stored beside its run: numbers that need the weights, which a record does not keep.

A run's result (:mod:`zslib.store`) keeps metrics, not weights, and recorded runs are committed without
their checkpoints; an estimate that needs the trained network -- e.g. JRD's Table 3, the H-divergence
and the ideal joint error of :mod:`zslib.theory` on the model's seen and unseen representations -- cannot
be computed from the record later. An *analysis record* fills that gap without touching the run or its
config: one small JSON file per (run, analysis), found by the run's :func:`~zslib.config.config_hash`,

``<results>/analyses/<run name>-<config hash>-<analysis>.json``  (recorded: ``<results>/recorded/analyses/``)

with the run's config and hash, the analysis's settings, its values and its own provenance (commit, device,
date, code fingerprint) plus where the model came from. A new :class:`~zslib.config.Config` field would
have changed the hash of every recorded run; a separate record changes none.

:func:`analyze` makes one: it takes the run's stored result (training it first with ``train=True``), gets
the trained model from the run's checkpoint or, when there is none (a recorded run), by training the run
again in a scratch folder and checking that the retrained metrics agree with the stored ones (within
``tolerance``; the largest difference is kept in the provenance), then calls the analysis function of
:data:`ANALYSES` on the model and the run's data. :func:`recorded_analyses` is what chapters call (as
:func:`zslib.grid.recorded_grid` for runs); :func:`record_analyses` copies the records of a profile into
``recorded/analyses/`` (``python -m zslib record`` calls it).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .config import Config, config_hash
from .grid import grid_jobs
from .memory import peak_rss_mib, reset_peak_rss
from .methods.adapt_adv import cached_map_gradcam
from .methods.deml import learner_attention
from .store import (ResultFileError, load_result, provenance, result_path, results_dir, file_slug, short_commit,
                    utc_minute, write_json)

__all__ = ["Analysis", "ANALYSES", "AnalysisRecord", "analyze", "analysis_path", "load_analysis",
           "recorded_analyses", "record_analyses", "recorded_analysis_records", "analysis_summary", "bound_terms",
           "every_pair", "transfer", "MissingAnalysesError"]


# ----------------------------------------------------------------------------------------------------
# The analyses


def bound_terms(model, data: dict, config: Config, *, k: int = 1, folds: int = 5, repeats: int = 2,
                seed: int = 0) -> dict[str, float]:
    """The two data terms of Ben-David's bound as JRD Table 3 reports them, for one trained model.

    Embeds the seen images (training classes, test transform) and the unseen images with ``model`` and
    estimates :func:`zslib.theory.h_divergence` (``d_H``, with its band ``d_H_low`` / ``d_H_high``) and
    :func:`zslib.theory.ideal_joint_error` (``lambda``, the mean of the seen and unseen errors, with its band,
    ``lambda_sum`` the sum, ``seen_error`` and ``unseen_error``), both with a ``k``-NN classifier on
    ``folds`` folds and ``repeats`` repeats. Unseen class ids are offset past the seen ones when the two
    sets share ids. Not defined for In-Shop (separate query and gallery sets).
    """
    from .theory import h_divergence, ideal_joint_error
    from .train import embed

    if isinstance(data["unseen"], tuple):
        raise NotImplementedError("bound_terms needs one set of unseen images; In-Shop's query/gallery split is not supported")

    def emb(ds):
        x, y = embed(model, ds, batch_size=config.eval_batch_size, device=next(model.parameters()).device,
                     num_workers=config.num_workers)
        return np.asarray(x.cpu() if torch.is_tensor(x) else x), np.asarray(y.cpu() if torch.is_tensor(y) else y)

    s_emb, s_lab = emb(data["seen"])
    u_emb, u_lab = emb(data["unseen"])
    if np.intersect1d(s_lab, u_lab).size:
        u_lab = u_lab + int(s_lab.max()) + 1
    d = h_divergence(s_emb, u_emb, k=k, folds=folds, repeats=repeats, seed=seed)
    lam = ideal_joint_error(s_emb, s_lab, u_emb, u_lab, k=k, folds=folds, repeats=repeats, seed=seed)
    return {"lambda": lam.value, "lambda_low": lam.ci_low, "lambda_high": lam.ci_high, "lambda_sum": lam.sum_of_errors,
            "seen_error": float(lam.seen_errors.mean()), "unseen_error": float(lam.unseen_errors.mean()),
            "d_H": d.value, "d_H_low": d.ci_low, "d_H_high": d.ci_high,
            "n_seen": float(len(s_lab)), "n_unseen": float(len(u_lab))}


def every_pair(model, data: dict, config: Config, *, split: str = "unseen", max_pairs: int = 512,
               progress="text") -> dict[str, float]:
    """A pair scorer (ZSML, ``model.pair``) evaluated on *every* ordered pair of a split, not on the class-stratified
    sample of its run (``eval_per_class``): the book's protocol (:func:`zslib.pairwise.matrix_metrics`: Recall@K,
    spectral clustering's ACC / NMI / purity) on the full ``(n, n)`` score matrix, with the Euclidean distance of the
    same features beside it (``input ...``). Also measured: ``seconds`` spent scoring, ``pairs``, ``n_images``,
    ``matrix_mib`` (the float32 matrix) and ``peak_rss_mib``, the process's peak resident memory while the pairs
    were scored (``peak_since_reset`` is 1 when the kernel counter could be reset before scoring, else the peak of
    the whole process, training included)."""
    from .pairwise import euclidean_scorer, matrix_metrics, score_matrix
    from .train import embed

    pair = getattr(model, "pair", None)
    if pair is None or not callable(pair):
        raise TypeError(f"every_pair needs a model with a pair scorer .pair (ZSML's ZSMLNet); "
                        f"{config.method!r} embeds images, use the run's own metrics instead")
    if isinstance(data[split], tuple):
        raise NotImplementedError("every_pair scores one set against itself; In-Shop's query/gallery split is not supported")
    device = next(model.parameters()).device
    x, y = embed(model, data[split], batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)
    x, y = torch.as_tensor(x), np.asarray(y.cpu() if torch.is_tensor(y) else y)
    p = config.method_params
    reset = reset_peak_rss()
    started = time.perf_counter()
    s = score_matrix(pair.eval(), x, max_pairs=max_pairs, device=device, progress=progress)
    seconds = time.perf_counter() - started
    peak = peak_rss_mib()
    if p.get("symmetric"):
        s = 0.5 * (s + s.T)
    seed = config.seed
    row = matrix_metrics(s.numpy(), y, neighbors=p.get("neighbors", 10), seed=seed)
    del s
    base = matrix_metrics(score_matrix(euclidean_scorer, x.cpu(), max_pairs=1 << 16).numpy(), y,
                          neighbors=p.get("neighbors", 10), seed=seed)
    n = len(y)
    return {**row, **{f"input {k}": v for k, v in base.items()}, "n_images": n, "pairs": n * n, "seconds": seconds,
            "matrix_mib": 4 * n * n / 2 ** 20, "peak_rss_mib": peak, "peak_since_reset": float(reset)}


def transfer(model, data: dict, config: Config, *, dataset: str, split: str = "unseen") -> dict[str, float]:
    """Inter-dataset transfer (ZSML, Xu et al. IJCAI 2019, Sec. 5.2 and Tables 4-5: a metric learned on one dataset,
    tested on another): the trained model evaluated on ``split`` of ``dataset`` the way its run evaluates its own
    unseen classes -- a pair scorer (ZSML) with its method's pair evaluator and the run's seed, an embedding with
    :func:`zslib.evaluate.evaluate`. The model's input must mean the same on both datasets: on a cached-feature
    profile (``real``) both are read through the same frozen pretrained backbone, so the pooled features agree."""
    from .evaluate import evaluate
    from .methods import get_method
    from .runner import build_data
    from .train import embed

    if dataset == config.dataset:
        raise ValueError(f"transfer to {dataset!r}: the run was trained on that dataset; its own metrics are the "
                         "intra-dataset result")
    target = build_data(config.replace(dataset=dataset, validation_fraction=0.0))
    if split not in target or isinstance(target[split], tuple):
        raise ValueError(f"transfer needs one set of images as split {split!r} of {dataset!r}; it has "
                         f"{sorted(k for k, v in target.items() if not isinstance(v, tuple))}")
    device = next(model.parameters()).device
    x, y = embed(model, target[split], batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)
    scorer = get_method(config.method)(config, model, 1).pair_evaluator(model)
    if scorer is not None:
        return scorer(x, y, seed=config.seed)
    return evaluate(x, y, dataset=dataset)


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


#: The analyses :func:`analyze` knows, by name.
ANALYSES: dict[str, Analysis] = {
    "bound_terms": Analysis("bound_terms", bound_terms, {"k": 1, "folds": 5, "repeats": 2, "seed": 0}),
    # the same estimates with a 5-NN vote instead of the nearest neighbour, all else equal: JRD does not give its
    # classifiers' k, so a verdict on lambda or d_H should not hang on k = 1 (book/jrd.ipynb, Table 3 analogue)
    "bound_terms_5nn": Analysis("bound_terms_5nn", bound_terms, {"k": 5, "folds": 5, "repeats": 2, "seed": 0}),
    "every_pair": Analysis("every_pair", every_pair, {"split": "unseen", "max_pairs": 512}),
    "to_synthparts": Analysis("to_synthparts", transfer, {"dataset": "synthparts", "split": "unseen"}),
    "to_flowers102": Analysis("to_flowers102", transfer, {"dataset": "flowers102", "split": "unseen"}),
    "learner_attention": Analysis("learner_attention", learner_attention,
                                  {"split": "unseen", "show": 6, "top": 64, "digits": 4}),
    "cached_map_gradcam": Analysis("cached_map_gradcam", cached_map_gradcam, {"classes": 6, "stage": None, "fraction": 0.5}),
}


def _get(analysis: str) -> Analysis:
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
        """Write the record atomically (:func:`zslib.store.write_json`)."""
        self.path = write_json(path, self.to_dict())
        return self.path


def load_analysis(path: str | os.PathLike) -> AnalysisRecord:
    """Read and check an analysis record; a damaged or foreign file, or one whose config no longer has the
    hash it was stored under, raises :class:`~zslib.store.ResultFileError` naming the file."""
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
    if config_hash(config) != d.get("config_hash"):
        raise ResultFileError(f"{path}: its config now hashes to {config_hash(config)}, not to the recorded "
                              f"{d.get('config_hash')}; {todo}")
    values = d.get("values")
    try:
        if not isinstance(values, Mapping) or any(isinstance(v, (bool, str)) for v in values.values()):
            raise ValueError
        values = {str(k): _value(v, k) for k, v in values.items()}
    except (ValueError, TypeError):
        raise ResultFileError(f"{path}: 'values' must be an object of finite numbers or arrays of them; {todo}") from None
    return AnalysisRecord(str(d.get("analysis")), config, dict(d.get("params") or {}), values,
                          dict(d.get("provenance") or {}), path)


def analysis_path(config: Config, analysis: str, directory: str | os.PathLike | None = None) -> Path:
    """Where the record of ``analysis`` for ``config`` is: in ``<directory>/analyses/``, else among the
    recorded ones (``<directory>/recorded/analyses/``), else where :func:`analyze` will write it."""
    directory = results_dir(directory)
    h = config_hash(config)
    pattern = f"*-{h}-{analysis}.json"
    found = sorted((directory / "analyses").glob(pattern)) or sorted((directory / "recorded" / "analyses").glob(pattern))
    return found[0] if found else directory / "analyses" / f"{file_slug(config.name)}-{h}-{analysis}.json"


# ----------------------------------------------------------------------------------------------------
# Making one


def analyze(config: Config, analysis: str = "bound_terms", results_dir: str | os.PathLike | None = None, *,
            train: bool = False, device=None, tolerance: float = 0.01, force: bool = False) -> AnalysisRecord:
    """The record of ``analysis`` for the run of ``config``: loaded when stored, else made and stored.

    The run must be stored (in ``results_dir`` or its ``recorded/`` folder); with ``train`` a missing run is
    trained first (:func:`zslib.runner.run`). The model comes from the run's checkpoint when it has one, else
    the run is trained again in a scratch folder with the thread count of its provenance, and the retrained run
    must reproduce the stored one within ``tolerance`` (:func:`zslib.reproduce.check_reproduced`; else
    ``RuntimeError``: an analysis of another model would be mislabelled).
    """
    from .reproduce import check_reproduced
    from .runner import build_data, load_model, run

    spec = _get(analysis)
    directory = _results(results_dir)
    target = analysis_path(config, analysis, directory)
    if target.exists() and not force:
        return load_analysis(target)
    started = time.perf_counter()
    run_file = result_path(config, directory)
    if not run_file.exists():
        if not train:
            raise MissingAnalysesError([config], analysis, directory, runs_missing=True)
        run(config, results_dir=directory, progress=False, device=device)
        run_file = result_path(config, directory)
    stored = load_result(run_file)
    if device is None:
        from .profile import device as default_device
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
    """``{key: [AnalysisRecord per seed]}`` for a grid ``{key: Config}``, as :func:`zslib.grid.recorded_grid`
    for runs: with ``train`` the missing records (and runs) are made with :func:`analyze`; without it only
    stored records are read, and if any is missing this prints which (naming the section by ``what``) and
    returns ``None``, so that the rest of the chapter goes on."""
    _get(analysis)
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
    for path in sorted((root / "analyses").glob("*.json")):
        record = load_analysis(path)
        if record.config.profile != profile or path.name in have:
            continue
        out.append(recorded / path.name)
        if not dry_run:
            prov = dict(record.provenance, recorded_from=path.name)
            AnalysisRecord(record.analysis, record.config, record.params, record.values, prov).save(recorded / path.name)
    return out


def recorded_analysis_records(directory: str | os.PathLike | None = None) -> list[AnalysisRecord]:
    """The analysis records committed under ``<results>/recorded/analyses/`` (only those), in file-name order;
    each is checked by :func:`load_analysis` (a damaged one raises :class:`~zslib.store.ResultFileError`)."""
    return [load_analysis(p) for p in sorted((_results(directory) / "recorded" / "analyses").glob("*.json"))]


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
