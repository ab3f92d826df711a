"""Many runs: a grid of configurations over seeds, trained in parallel worker processes.

:func:`run_grid` is what chapters call: ``{key: Config}`` in, ``{key: [Result per seed]}`` out, every run
of the grid trained in one :func:`run_many`. On the CPU the missing runs are trained by a pool of forked
worker processes, one per core, each with one torch thread (the small networks of the quick profile gain
little from a second thread, while a second process doubles the throughput); on a GPU one after another.
``ZS_WORKERS`` overrides the number of workers. Stored results are loaded, not repeated, and an
interrupted grid resumes where it stopped (every run writes its own result and checkpoint). Under
``torchrun`` the runs are trained one after another, each by all the processes together
(:mod:`zslib.engine.train.distributed`).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import warnings
from collections.abc import Iterable, Mapping

import torch

from zslib.engine.choice import OFF, Choice, choose
from zslib.engine.config import Config, config_hash
from zslib.engine.profile import PROFILES, device as default_device
from zslib.engine.progress import progress_bar
from zslib.engine.runner import build_data, run
from zslib.engine.store import Result, check_writable, result_path, results_dir, stale_code_warning
from zslib.engine.threads import limit_process
from zslib.engine.train import distributed

__all__ = ["run_many", "run_grid", "grid_jobs", "recorded_grid", "run_seeds", "default_workers", "MissingRunsError",
           "diverged"]


class MissingRunsError(LookupError):
    """Runs a chapter wanted to show from the store (``run_grid(..., stored_only=True)``) are not there."""

    def __init__(self, configs, directory):
        self.configs = list(configs)
        names = ", ".join(sorted({c.name for c in self.configs})[:6])
        profiles = sorted({c.profile for c in self.configs})
        super().__init__(
            f"{len(self.configs)} run(s) of the {'/'.join(profiles)} profile are not stored in {directory} or its "
            f"recorded/ folder (e.g. {names}); run this notebook with ZS_PROFILE={profiles[0]} to train them")


def run_seeds(config: Config, seeds: Iterable[int] | None = None, *, workers: int | None = 1,
              **run_kwargs) -> list[Result]:
    """:func:`run` once per seed (default: the seeds of the config's profile), through :func:`run_many`."""
    seeds = PROFILES[config.profile].seeds if seeds is None else tuple(seeds)
    return run_many([config.replace(seed=int(s)) for s in seeds], workers=workers, **run_kwargs)


def grid_jobs(grid: Mapping, seeds: Iterable[int] | None, caller: str) -> list[tuple]:
    """``[(key, config with its seed)]`` of a grid ``{key: Config}``, once per seed (default: each config's
    profile seeds), in the grid's order; ``caller`` names the function in the error for a non-Config value."""
    jobs = []
    for key, config in grid.items():
        if not isinstance(config, Config):
            raise TypeError(f"{caller} needs Config values, got {type(config).__name__} for {key!r}")
        for s in (PROFILES[config.profile].seeds if seeds is None else tuple(seeds)):
            jobs.append((key, config.replace(seed=int(s))))
    return jobs


def run_grid(grid: Mapping, seeds: Iterable[int] | None = None, *, stored_only: bool = False, **run_kwargs) -> dict:
    """Every configuration of ``grid`` (``{key: Config}``) once per seed, all in one :func:`run_many`
    (so the whole grid trains in parallel), returned as ``{key: [Result per seed]}`` in the grid's order.

    ``seeds`` defaults to the seeds of each config's profile. A chapter names its configurations by what
    it compares, e.g. ``run_grid({"baseline": c, "cml": c.replace(...)})``, and summarizes each list with
    :func:`summarize`. With ``stored_only`` nothing is trained: every run must already be stored (in
    ``results/`` or among the recorded runs of ``results/recorded/``), else :class:`MissingRunsError` lists
    the missing ones -- how a chapter shows the recorded runs of a profile it is not running.
    """
    jobs = grid_jobs(grid, seeds, "run_grid()")
    if stored_only:
        directory = results_dir(run_kwargs.get("results_dir"))
        missing = [c for _, c in jobs if not result_path(c, directory).exists()]
        if missing:
            raise MissingRunsError(missing, directory)
    results = run_many([c for _, c in jobs], **run_kwargs)
    out: dict = {key: [] for key in grid}
    for (key, _), result in zip(jobs, results):
        out[key].append(result)
    broken = diverged(out)
    if broken:
        listed = "; ".join(f"{key}: {len(reasons)} of {len(out[key])} seeds" for key, reasons in broken.items())
        warnings.warn(f"diverged runs (stored as such, shown as 'diverged' by zslib.engine.stats): {listed}; "
                      f"e.g. {next(iter(broken.values()))[0]}", stacklevel=2)
    return out


def diverged(results: Mapping) -> dict:
    """``{key: [reason per diverged seed]}`` of a grid's results (``{key: [Result]}``, as :func:`run_grid` returns),
    only the keys with at least one diverged run: what a chapter marks in its table
    (:func:`zslib.engine.stats.diverged_label`)."""
    out = {}
    for key, runs in results.items():
        reasons = [r.diverged for r in runs if getattr(r, "diverged", None)]
        if reasons:
            out[key] = reasons
    return out


def choose_on_validation(candidates: Mapping, off: Config | None = None, *, seeds: Iterable[int] | None = None,
                         validation_fraction: float = 0.3, metric: str = "R@1", train: bool = True,
                         **run_kwargs) -> tuple[Choice, dict]:
    """A method's validation grid with "off" among the candidates, judged by the one rule of
    :func:`zslib.engine.choice.choose`: returns ``(choice, runs)`` with ``runs`` = ``{key: [Result per seed]}``.

    ``candidates``: ``{key: Config}`` (the settings to compare); ``off``: the switched-off config (default: the
    first candidate with ``method="baseline"``, its loss alone; pass ``method="pretrained"`` for "no training").
    A ``candidates`` key :data:`~zslib.engine.choice.OFF` is used as "off" instead. Every config is trained
    (``train``; else only read, :func:`run_grid` with ``stored_only``) with ``validation_fraction`` of the seen
    classes held out, on ``seeds``; "off" is listed first, so it wins ties."""
    grid = dict(candidates)
    if not grid:
        raise ValueError("choose_on_validation() needs at least one candidate setting besides 'off'")
    if OFF in grid and off is not None:
        raise ValueError(f"give 'off' either as the {OFF!r} candidate or as off=, not both")
    off = grid.pop(OFF, off)
    if off is None:
        off = next(iter(grid.values())).replace(method="baseline")
    grid = {OFF: off, **grid}
    for key, config in grid.items():
        if not isinstance(config, Config):
            raise TypeError(f"choose_on_validation() needs Config values, got {type(config).__name__} for {key!r}")
    grid = {key: config.replace(validation_fraction=validation_fraction) for key, config in grid.items()}
    runs = run_grid(grid, seeds, stored_only=not train, **run_kwargs)
    return choose(runs, off=OFF, metric=metric, split="val"), runs


def recorded_grid(grid: Mapping, what: str, seeds: Iterable[int] | None = None, *, train: bool = False,
                  **run_kwargs) -> dict | None:
    """:func:`run_grid` for a chapter's section of recorded runs: with ``train`` the missing runs are trained;
    without it only stored runs are read, and if any is missing this prints which (naming the section by
    ``what``) and returns ``None`` instead of raising, so the rest of the chapter goes on."""
    try:
        return run_grid(grid, seeds, stored_only=not train, **run_kwargs)
    except MissingRunsError as missing:
        print(f"The real-profile runs of {what} are not all recorded in this copy of the book:\n{missing}")
        return None


def default_workers(device=None) -> int:
    """How many runs :func:`run_many` trains at once by default: one per CPU core on the CPU (each run
    with one thread: the small networks of the quick profile gain little from a second thread, while a
    second process doubles the throughput), one on a GPU (runs would only compete for it) and under
    ``torchrun`` (all its processes train each run together). ``$ZS_WORKERS`` overrides it."""
    if distributed.launched():
        return 1
    env = os.environ.get("ZS_WORKERS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"ZS_WORKERS={env!r} must be a positive integer (the number of runs trained at once)")
        return int(env)
    if device is None:
        device = default_device()
    if torch.device(device).type != "cpu":
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


# The runs a forked worker pool trains: set in the parent just before the fork, so the workers inherit
# the configs without pickling (or importing anything a notebook defined).
_POOL_JOBS: list[tuple[Config, dict]] = []


def _pool_init(threads: int) -> None:
    # every thread pool of the worker (BLAS, OpenMP of scikit-learn and faiss), not only PyTorch's: two workers
    # that each start one thread per core would share the cores by spinning (zslib.engine.threads)
    limit_process(threads)
    torch.set_num_threads(threads)


def _warm_up(configs: Iterable[Config]) -> None:
    """Build each distinct dataset of ``configs`` and import the evaluation libraries in this process, just
    before the pool forks: every worker then inherits them (copy-on-write) instead of paying for them. SciPy's and
    scikit-learn's parts come with :mod:`zslib.engine.evaluate` (imported with the runner); faiss is optional."""
    try:
        import faiss  # noqa: F401  (nearest neighbours for Recall@K on the CPU; optional: the notebook and full extras)
    except ImportError:
        pass

    seen = set()
    for c in configs:
        key = json.dumps(c.to_profile().as_dict(), sort_keys=True, default=str) + c.backbone
        if key not in seen:
            seen.add(key)
            build_data(c)


def _pool_run(index: int) -> None:
    config, kwargs = _POOL_JOBS[index]
    run(config, **kwargs)  # stored on disk; the parent reads it back


def run_many(configs: Iterable[Config], *, workers: int | None = None, progress="auto",
             **run_kwargs) -> list[Result]:
    """:func:`run` every config, ``workers`` at a time, and return the results in the order given.

    Stored results are loaded, not repeated. On the CPU the missing runs are trained by a pool of
    ``workers`` forked processes (default :func:`default_workers`), each with one thread per core it has;
    every run writes its result and checkpoint as :func:`run` does, so an interrupted grid resumes where
    it stopped. With ``workers=1``, on a GPU, or where ``fork`` is not available the runs are trained one
    after another in this process. ``progress`` shows a bar over the runs (each run's own bar is off when
    several train at once). The thread count is part of each result's provenance (``torch_threads``):
    CPU sums, hence the last digits of a result, depend on it.
    """
    configs = list(configs)
    for c in configs:
        if not isinstance(c, Config):
            raise TypeError(f"run_many() needs zslib.engine.config.Config objects, got {type(c).__name__}")
    if run_kwargs.get("max_steps") is not None:
        workers = 1  # a partial run returns an unsaved result: keep it in this process
    directory = results_dir(run_kwargs.pop("results_dir", None))
    run_kwargs["results_dir"] = directory
    pending = [i for i, c in enumerate(configs)
               if run_kwargs.get("force") or not result_path(c, directory).exists()]
    if distributed.launched():  # every process trains the same runs, in the same order: process 0's list
        run_kwargs["device"] = distributed.setup(run_kwargs.get("device"))
        pending = distributed.broadcast_object(pending)
    # two equal configs in one grid train once
    unique: dict[str, int] = {}
    for i in pending:
        unique.setdefault(config_hash(configs[i]), i)
    todo = list(unique.values())
    if todo:
        check_writable(directory)
    dev = torch.device(run_kwargs.get("device") or default_device())
    workers = default_workers(dev) if workers is None else int(workers)
    if dev.type != "cpu" or "fork" not in mp.get_all_start_methods() or distributed.launched():
        workers = 1  # runs on a GPU would only compete for it; without fork the pool cannot share the jobs
    workers = max(1, min(workers, len(todo)))

    done: dict[int, Result] = {}
    main = distributed.world()[0] == 0
    bar = progress_bar(progress if len(todo) > 1 and main else False, len(todo), 0, desc="runs")
    try:
        if workers == 1:
            each = progress if len(todo) == 1 else False  # one run: its own bar; a grid: the bar over runs
            for i in todo:
                done[i] = run(configs[i], progress=each, **run_kwargs)
                if bar is not None:
                    bar.update(1)
        else:
            global _POOL_JOBS
            kwargs = {**run_kwargs, "progress": False}
            _POOL_JOBS = [(configs[i], kwargs) for i in todo]
            threads = max(1, torch.get_num_threads() // workers)
            _warm_up(configs[i] for i in todo)
            try:
                with mp.get_context("fork").Pool(workers, initializer=_pool_init, initargs=(threads,)) as pool:
                    for _ in pool.imap_unordered(_pool_run, range(len(todo))):
                        if bar is not None:
                            bar.update(1)
            finally:
                _POOL_JOBS = []
    finally:
        if bar is not None:
            bar.close()
    kwargs = {k: v for k, v in run_kwargs.items() if k not in ("force", "max_steps")}
    out = []
    with warnings.catch_warnings():  # one warning for the whole grid, below, not one per stored run
        warnings.simplefilter("ignore", UserWarning)
        for i, c in enumerate(configs):  # in the order given; a run trained here is returned as it came back
            same = unique.get(config_hash(c))
            out.append(done[same] if same in done else run(c, progress=False, **kwargs))
    stale = stale_code_warning([r for r in out if r.path is not None and r.path.parent == directory])
    if stale:
        warnings.warn(stale, stacklevel=2)
    return out
