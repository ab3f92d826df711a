"""Experiments: a :class:`Config` goes in, a :class:`Result` (metrics + curves + provenance) comes out.

:func:`run` builds the data (``zslib.data``), the model (``zslib.models``) and the loss (``zslib.losses``)
that a config names, trains with :func:`zslib.train.train`, evaluates the unseen (test) classes with
:func:`zslib.evaluate.evaluate`, and stores everything as one JSON file whose name carries a hash of the
config. A run whose JSON already exists is *loaded, not repeated*: the book builds fast, and results
recorded on a GPU under the full profile can be dropped into ``results/`` and shown later.

Each result records its provenance: zslib and torch versions, the git commit (when run from a checkout),
the config and profile, the device, the seed, the wall time and a timestamp.

:func:`summarize` gives the mean and a Student-t 95% confidence interval over seeds (:func:`run_seeds`).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import __version__
from .profile import PROFILES, Profile, get_profile, repository_root, resolve_folder
from .train import (History, LabeledSubset, _progress_bar, default_eval, embed, load_checkpoint, metric_objective,
                    set_seed, split_classes, train)

__all__ = [
    "Config",
    "Result",
    "run",
    "run_seeds",
    "run_many",
    "run_grid",
    "default_workers",
    "summarize",
    "results_dir",
    "config_hash",
    "load_result",
    "load_results",
    "evaluate_checkpoint",
    "load_model",
    "build_data",
]

# Config fields taken from the profile of the same name.
_FROM_PROFILE = ("dataset", "image_size", "resize_size", "backbone", "backbone_params", "pretrained",
                 "embedding_dim", "batch_classes", "batch_per_class", "iterations", "eval_every", "lr",
                 "new_layer_mult", "weight_decay", "num_workers", "amp", "synth_images_per_class")


@dataclass(frozen=True)
class Config:
    """Everything that determines a training run (and therefore its result file).

    Build it from a profile with :meth:`from_profile` and change it with :meth:`replace`. ``method``
    names the objective (``"baseline"`` = the plain loss; a method chapter passes its own
    ``objective_factory`` to :func:`run` and sets ``method`` to its name, e.g. ``"cml"``, so its results
    are stored apart). ``regularizers`` holds the weights of its extra terms, e.g. ``{"ec": 0.1, "dc": 0.01}``.
    ``validation_fraction`` > 0 holds out that share of the *training classes* as a class-disjoint
    validation set (Musgrave et al. 2020) on which hyperparameters should be chosen.
    ``name`` is a label only: it is not part of :func:`config_hash`.
    """

    profile: str = "quick"
    dataset: str = "synthparts"
    backbone: str = "smallcnn"
    backbone_params: dict = field(default_factory=dict)
    pretrained: bool = False
    weights_path: str | None = None
    embedding_dim: int = 64
    normalize: bool = True
    dropout: float = 0.0
    freeze_bn: bool = False
    image_size: int = 64
    resize_size: int = 72
    loss: str = "triplet"
    loss_params: dict = field(default_factory=dict)
    method: str = "baseline"
    regularizers: dict = field(default_factory=dict)
    iterations: int = 300
    batch_classes: int = 16
    batch_per_class: int = 4
    lr: float = 1e-3
    weight_decay: float = 5e-4
    new_layer_mult: float = 10.0
    objective_lr: float | None = None
    schedule: str | dict | None = None
    eval_every: int = 100
    validation_fraction: float = 0.0
    seed: int = 0
    amp: bool = False
    num_workers: int = 0
    synth_images_per_class: int = 40
    eval_batch_size: int = 256
    name: str = ""

    def __post_init__(self):
        for key in ("backbone_params", "loss_params", "regularizers"):
            value = getattr(self, key)
            if not isinstance(value, Mapping):
                raise TypeError(f"Config.{key} must be a dict, got {type(value).__name__}")
            # a JSON round trip: tuples become lists, so a config equals itself after save and load
            object.__setattr__(self, key, json.loads(json.dumps(dict(value), default=_json_default)))
        if self.profile not in PROFILES:
            raise ValueError(f"Config.profile {self.profile!r} is not a profile; use one of {sorted(PROFILES)}")
        for key in ("iterations", "batch_classes", "batch_per_class", "embedding_dim", "image_size"):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"Config.{key} must be a positive integer, got {getattr(self, key)!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Config.dropout must be in [0, 1), got {self.dropout!r}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if not self.name:
            object.__setattr__(self, "name", f"{self.method}-{self.loss}-{self.dataset}-s{self.seed}")

    @classmethod
    def from_profile(cls, profile: str | Profile | None = None, **overrides) -> "Config":
        """A config with the sizes of ``profile`` (default: the active one), then ``overrides``."""
        if profile is None:
            profile = get_profile()
        elif isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"unknown profile {profile!r}; use one of {sorted(PROFILES)}")
            profile = PROFILES[profile]
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise TypeError(f"Config has no field(s) {unknown}; the fields are {sorted(fields)}")
        values = {k: getattr(profile, k) for k in _FROM_PROFILE}
        values["profile"] = profile.name
        values["seed"] = profile.seeds[0] if profile.seeds else 0
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes) -> "Config":
        """A copy with some fields changed. The automatic name follows seed / loss / method changes."""
        if "name" not in changes and self.name == Config(**{**self.as_dict(), "name": ""}).name:
            changes["name"] = ""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "Config":
        """Rebuild a config from :meth:`as_dict` output; unknown keys (from other versions) are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    def to_profile(self) -> Profile:
        """The profile the data builders see: the named profile with this config's sizes."""
        return PROFILES[self.profile].replace(**{k: getattr(self, k) for k in _FROM_PROFILE},
                                             seeds=(self.seed,))

    @property
    def hash(self) -> str:
        return config_hash(self)


def config_hash(config: Config) -> str:
    """12 hex digits of the SHA-256 of the config's canonical JSON (``name`` excluded)."""
    d = config.as_dict()
    d.pop("name")
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------------------------------
# Where results live


def results_dir(path: str | os.PathLike | None = None) -> Path:
    """The results folder: ``path`` if given, else ``$ZS_RESULTS``, else ``results/`` of the source
    checkout zslib runs from, else ``./results``. Checkpoints go to its ``checkpoints/`` sub-folder."""
    return resolve_folder(path, "ZS_RESULTS", "results", Path.cwd() / "results")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


def _git_commit() -> str | None:
    """The commit of the checkout zslib runs from, or ``None`` (not a checkout, no git, any failure)."""
    root = repository_root()
    if root is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except Exception:
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        try:
            return f"cuda ({torch.cuda.get_device_name(device)})"
        except Exception:
            return "cuda"
    return f"{device.type} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


# ----------------------------------------------------------------------------------------------------
# Results


@dataclass
class Result:
    """A finished run: its config, final metrics per split, the training history and its provenance.

    ``metrics`` maps a split to its metrics: ``"unseen"`` (the test classes, the full
    :func:`zslib.evaluate.evaluate` row), ``"seen"`` (Recall@K on the training classes at the end) and
    ``"val"`` when a validation split was held out.
    """

    config: Config
    metrics: dict[str, dict[str, float]]
    history: History
    provenance: dict
    path: Path | None = None

    def metric(self, name: str = "R@1", split: str = "unseen") -> float:
        if split not in self.metrics:
            raise KeyError(f"this result has no split {split!r}; it has {sorted(self.metrics)}")
        if name not in self.metrics[split]:
            raise KeyError(f"split {split!r} has no metric {name!r}; it has {sorted(self.metrics[split])}")
        return float(self.metrics[split][name])

    @property
    def checkpoint(self) -> Path | None:
        ck = self.provenance.get("checkpoint")
        if ck is None or self.path is None:
            return None
        return (self.path.parent / ck).resolve()

    def to_dict(self) -> dict:
        return {"format": "zslib-result", "config": self.config.as_dict(), "config_hash": config_hash(self.config),
                "metrics": self.metrics, "history": self.history.to_dict(), "provenance": self.provenance}

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, default=_json_default))
        os.replace(tmp, path)
        self.path = path
        return path

    def __repr__(self):
        m = self.metrics.get("unseen", {})
        head = ", ".join(f"{k}={v:.4f}" for k, v in list(m.items())[:4])
        return f"Result({self.config.name!r}, unseen: {head})"


def _json_default(obj):
    if isinstance(obj, (np.generic,)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if torch.is_tensor(obj):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def load_result(path: str | os.PathLike) -> Result:
    """Read a result JSON written by :func:`run`."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no result file at {path}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e}); delete it to recompute the run") from e
    if d.get("format") != "zslib-result":
        raise ValueError(f"{path} is not a zslib result file")
    return Result(Config.from_dict(d["config"]), d["metrics"], History.from_dict(d["history"]),
                  d["provenance"], path)


def load_results(directory: str | os.PathLike | None = None, **match) -> list[Result]:
    """Every stored result in ``directory`` and its ``recorded/`` sub-folder whose config matches ``match``
    (e.g. ``loss="triplet"``). ``recorded/`` holds results committed to the repository on purpose, such
    as full-profile runs made on a GPU, with their provenance; everything else in ``results/`` is local."""
    out = []
    root = results_dir(directory)
    for p in sorted(root.glob("*.json")) + sorted(root.glob("recorded/*.json")):
        try:
            r = load_result(p)
        except (ValueError, KeyError):
            continue
        if all(getattr(r.config, k) == v for k, v in match.items()):
            out.append(r)
    return out


def _result_path(config: Config, directory: Path) -> Path:
    h = config_hash(config)
    found = sorted(directory.glob(f"*-{h}.json"))
    return found[0] if found else directory / f"{_slug(config.name)}-{h}.json"


# ----------------------------------------------------------------------------------------------------
# Building a run


def build_data(config: Config) -> dict:
    """The datasets of a run, normalized for its backbone: ``train`` (augmented), ``seen`` (training
    classes, test transform), ``unseen`` (test classes; for In-Shop a ``(query, gallery)`` pair) and
    ``val`` when ``validation_fraction`` > 0."""
    from zslib.data import build_dataset
    from zslib.models import normalization

    profile = config.to_profile()
    mean, std = normalization(config.backbone)

    def build(split, train):
        return build_dataset(profile, split, train=train, mean=mean, std=std)

    train_set = build("train", True)
    # SynthParts renders its random poses into the images and adds no augmentation: reuse the set
    seen_set = train_set if config.dataset == "synthparts" else build("train", False)
    if config.dataset == "inshop":
        unseen = (build("query", False), build("gallery", False))
    else:
        unseen = build("test", False)
    out = {"train": train_set, "seen": seen_set, "unseen": unseen}
    if config.validation_fraction > 0:
        tr, va = split_classes(train_set.labels, config.validation_fraction, seed=config.seed)
        out["train"], out["seen"] = LabeledSubset(train_set, tr), LabeledSubset(seen_set, tr)
        out["val"] = LabeledSubset(seen_set, va)
    return out


def build_model(config: Config) -> nn.Module:
    from zslib.models import build_model as _build

    return _build(config.backbone, config.embedding_dim, pretrained=config.pretrained,
                  weights_path=config.weights_path, normalize=config.normalize, freeze_bn=config.freeze_bn,
                  dropout=config.dropout, **config.backbone_params)


class _ContiguousLabels(nn.Module):
    """Hands the objective labels 0..C-1 (class-indexed losses such as Proxy-NCA need them)."""

    def __init__(self, objective, classes: np.ndarray):
        super().__init__()
        self.objective = objective
        lookup = torch.full((int(classes.max()) + 1,), -1, dtype=torch.long)
        lookup[torch.from_numpy(classes)] = torch.arange(len(classes))
        self.register_buffer("lookup", lookup, persistent=False)

    def forward(self, model, images, labels):
        return self.objective(model, images, self.lookup[labels])


def _final_metrics(config, model, data, history, device) -> dict:
    """Evaluate the trained model once: the full :func:`zslib.evaluate.evaluate` row on the unseen (and
    validation) classes, Recall@K on the seen classes. The Recall@K values also close the history's
    curves (the trainer leaves the last evaluation to this function, so nothing is embedded twice)."""
    from zslib.evaluate import evaluate

    def emb(ds):
        return embed(model, ds, batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)

    metrics, last_row = {}, {"step": config.iterations}
    for split in ("seen", "val", "unseen"):
        if split not in data:
            continue
        score = default_eval if split == "seen" else partial(evaluate, dataset=config.dataset)
        if isinstance(data[split], tuple):  # In-Shop: queries against the gallery
            (q, ql), (g, gl) = emb(data[split][0]), emb(data[split][1])
            row = score(g, gl, query_embeddings=q, query_labels=ql)
        else:
            row = score(*emb(data[split]))
        metrics[split] = {str(k): float(v) for k, v in row.items()}
        last_row[split] = {k: v for k, v in metrics[split].items() if k.startswith("R@")}
    history.evals.append(last_row)
    return metrics


def run(config: Config, results_dir: str | os.PathLike | None = None, force: bool = False,
        objective_factory: Callable | None = None, *, progress="auto", device=None,
        checkpoint_every: int | None = None, max_steps: int | None = None) -> Result:
    """Train and evaluate ``config``, or load its stored result.

    ``objective_factory(config, model, loss_fn) -> objective`` builds the training objective (see
    :func:`zslib.train.train`); without it the objective is the plain loss. A stored result with the
    same :func:`config_hash` is returned as is unless ``force``. An interrupted run resumes from its
    checkpoint in ``<results>/checkpoints/``. ``max_steps`` trains only that far (no result is written:
    call again to continue).
    """
    from zslib.losses import get_loss

    if not isinstance(config, Config):
        raise TypeError(f"run() needs a zslib.experiment.Config, got {type(config).__name__}")
    directory = _resolve(results_dir)
    path = _result_path(config, directory)
    if path.exists() and not force:
        return load_result(path)
    if config.regularizers and objective_factory is None:
        raise ValueError(f"config.regularizers={config.regularizers} needs an objective_factory that adds those "
                         "terms (the method chapters provide one); without it they would be silently ignored")
    if device is None:
        from zslib.profile import device as default_device
        device = default_device()
    device = torch.device(device)
    ckpt = directory / "checkpoints" / f"{path.stem}.pt"
    if force and ckpt.exists():
        ckpt.unlink()

    started = time.perf_counter()
    data = build_data(config)
    classes = np.unique(np.asarray(data["train"].labels))
    set_seed(config.seed)  # model initialization and proxies are drawn from the seed
    model = build_model(config)
    loss_fn = get_loss(config.loss, num_classes=len(classes), embedding_dim=config.embedding_dim,
                       **config.loss_params)
    objective = (objective_factory(config, model, loss_fn) if objective_factory is not None
                 else metric_objective(loss_fn, name=config.loss))
    if not np.array_equal(classes, np.arange(len(classes))):
        objective = _ContiguousLabels(objective, classes)
    eval_sets = {k: data[k] for k in ("seen", "val", "unseen") if k in data}
    history = train(
        model, objective, data["train"], iterations=config.iterations, batch_classes=config.batch_classes,
        batch_per_class=config.batch_per_class, lr=config.lr, weight_decay=config.weight_decay,
        new_layer_mult=config.new_layer_mult, objective_lr=config.objective_lr, schedule=config.schedule,
        eval_sets=eval_sets, eval_every=config.eval_every, eval_batch_size=config.eval_batch_size,
        eval_at_start=config.eval_every < config.iterations, eval_at_end=False,
        checkpoint_path=ckpt, checkpoint_every=checkpoint_every or config.eval_every,
        meta={"config": config.as_dict()}, max_steps=max_steps, seed=config.seed, device=device,
        amp=config.amp, num_workers=config.num_workers, progress=progress)
    done = bool(history.losses) and history.losses[-1]["step"] >= config.iterations
    if not done:
        return Result(config, {"seen": history.last("seen")}, history, {"complete": False}, None)
    metrics = _final_metrics(config, model, data, history, device)
    provenance = {
        "complete": True,
        "zslib_version": __version__,
        "git_commit": _git_commit(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "profile": config.profile,
        "device": _device_name(device),
        "torch_threads": torch.get_num_threads(),  # CPU float sums, hence bitwise results, depend on it
        "seed": config.seed,
        "train_seconds": round(history.elapsed, 3),
        "wall_seconds": round(time.perf_counter() - started, 3),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "checkpoint": os.path.relpath(ckpt, path.parent),
    }
    result = Result(config, metrics, history, provenance)
    result.save(path)
    return result


def _resolve(directory) -> Path:
    return results_dir(directory)


def run_seeds(config: Config, seeds: Iterable[int] | None = None, *, workers: int | None = 1,
              **run_kwargs) -> list[Result]:
    """:func:`run` once per seed (default: the seeds of the config's profile), through :func:`run_many`."""
    seeds = PROFILES[config.profile].seeds if seeds is None else tuple(seeds)
    return run_many([config.replace(seed=int(s)) for s in seeds], workers=workers, **run_kwargs)


def run_grid(grid: Mapping, seeds: Iterable[int] | None = None, **run_kwargs) -> dict:
    """Every configuration of ``grid`` (``{key: Config}``) once per seed, all in one :func:`run_many`
    (so the whole grid trains in parallel), returned as ``{key: [Result per seed]}`` in the grid's order.

    ``seeds`` defaults to the seeds of each config's profile. A chapter names its configurations by what
    it compares, e.g. ``run_grid({"baseline": c, "cml": c.replace(...)})``, and summarizes each list with
    :func:`summarize`.
    """
    jobs = []
    for key, config in grid.items():
        if not isinstance(config, Config):
            raise TypeError(f"run_grid() needs Config values, got {type(config).__name__} for {key!r}")
        for s in (PROFILES[config.profile].seeds if seeds is None else tuple(seeds)):
            jobs.append((key, config.replace(seed=int(s))))
    results = run_many([c for _, c in jobs], **run_kwargs)
    out: dict = {key: [] for key in grid}
    for (key, _), result in zip(jobs, results):
        out[key].append(result)
    return out


def default_workers(device=None) -> int:
    """How many runs :func:`run_many` trains at once by default: one per CPU core on the CPU (each run
    with one thread: the small networks of the quick profile gain little from a second thread, while a
    second process doubles the throughput), one on a GPU (runs would only compete for it).
    ``$ZS_WORKERS`` overrides it."""
    env = os.environ.get("ZS_WORKERS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"ZS_WORKERS={env!r} must be a positive integer (the number of runs trained at once)")
        return int(env)
    if device is None:
        from zslib.profile import device as default_device
        device = default_device()
    if torch.device(device).type != "cpu":
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


# The runs a forked worker pool trains: set in the parent just before the fork, so the workers inherit
# the configs and the objective factory (which may be a function defined in a notebook) without pickling.
_POOL_JOBS: list[tuple[Config, dict]] = []


def _pool_init(threads: int) -> None:
    torch.set_num_threads(threads)


def _warm_up(configs: Iterable[Config]) -> None:
    """Build each distinct dataset of ``configs`` and import the evaluation libraries in this process, just
    before the pool forks: every worker then inherits them (copy-on-write) instead of paying for them."""
    import scipy.optimize  # noqa: F401  (cluster accuracy)
    import sklearn.cluster  # noqa: F401  (k-means for NMI / F1)

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
    import multiprocessing as mp

    configs = list(configs)
    for c in configs:
        if not isinstance(c, Config):
            raise TypeError(f"run_many() needs zslib.experiment.Config objects, got {type(c).__name__}")
    if run_kwargs.get("max_steps") is not None:
        workers = 1  # a partial run returns an unsaved result: keep it in this process
    directory = _resolve(run_kwargs.pop("results_dir", None))
    run_kwargs["results_dir"] = directory
    pending = [i for i, c in enumerate(configs)
               if run_kwargs.get("force") or not _result_path(c, directory).exists()]
    # two equal configs in one grid train once
    unique: dict[str, int] = {}
    for i in pending:
        unique.setdefault(config_hash(configs[i]), i)
    todo = list(unique.values())
    from zslib.profile import device as default_device

    dev = torch.device(run_kwargs.get("device") or default_device())
    workers = default_workers(dev) if workers is None else int(workers)
    if dev.type != "cpu" or "fork" not in mp.get_all_start_methods():
        workers = 1  # runs on a GPU would only compete for it; without fork the pool cannot share the jobs
    workers = max(1, min(workers, len(todo)))

    done: dict[int, Result] = {}
    bar = _progress_bar(progress if len(todo) > 1 else False, len(todo), 0, desc="runs")
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
    for i, c in enumerate(configs):  # in the order given; a run trained here is returned as it came back
        same = unique.get(config_hash(c))
        out.append(done[same] if same in done else run(c, progress=False, **kwargs))
    return out


def summarize(results: Iterable, metric: str = "R@1", split: str = "unseen",
              confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval ``(mean, low, high)`` of a metric over runs (seeds).

    ``results`` holds :class:`Result` objects or plain numbers. With one run the interval is undefined
    and returned as ``(value, nan, nan)``.
    """
    values = np.array([r.metric(metric, split) if isinstance(r, Result) else float(r) for r in results], float)
    if values.size == 0:
        raise ValueError("summarize() needs at least one result")
    mean = float(values.mean())
    if values.size == 1:
        return mean, math.nan, math.nan
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, df=values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


# ----------------------------------------------------------------------------------------------------
# Evaluating a stored model


def load_model(result: Result, device=None) -> nn.Module:
    """The trained network of a finished run, rebuilt from its config and checkpoint, in eval mode."""
    if not isinstance(result, Result):
        raise TypeError(f"load_model needs a zslib.experiment.Result, got {type(result).__name__}")
    ckpt = result.checkpoint
    if ckpt is None or not ckpt.is_file():
        raise FileNotFoundError(
            f"the checkpoint of run {result.config.name!r} is missing ({ckpt}); results copied without "
            "their checkpoints/ folder cannot give back the model -- run it again with force=True")
    if device is None:
        from zslib.profile import device as default_device
        device = default_device()
    return _model_from_state(result.config, load_checkpoint(ckpt, map_location="cpu"), device)


def _model_from_state(config: Config, state: dict, device) -> nn.Module:
    """The network of ``config`` with the weights of a training checkpoint, on ``device``, in eval mode."""
    model = build_model(config)
    model.load_state_dict(state["model"])
    return model.to(device).eval()


def evaluate_checkpoint(checkpoint: str | os.PathLike, split: str = "test", device=None,
                        config: Config | None = None) -> dict[str, float]:
    """Rebuild the model of a training checkpoint and evaluate it on ``split`` (``"test"`` = unseen
    classes, ``"train"`` = seen classes) with :func:`zslib.evaluate.evaluate`."""
    from zslib.data import build_dataset
    from zslib.evaluate import evaluate
    from zslib.models import normalization

    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if device is None:
        from zslib.profile import device as default_device
        device = default_device()
    state = load_checkpoint(checkpoint, map_location=device)
    if config is None:
        meta = state.get("meta") or {}
        if "config" not in meta:
            raise ValueError(f"{checkpoint} does not record its config (it was not written by "
                             "zslib.experiment.run); pass config=")
        config = Config.from_dict(meta["config"])
    model = _model_from_state(config, state, device)
    mean, std = normalization(config.backbone)

    def emb(name):
        ds = build_dataset(config.to_profile(), name, train=False, mean=mean, std=std)
        return embed(model, ds, batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)

    if config.dataset == "inshop" and split == "test":
        (q, ql), (g, gl) = emb("query"), emb("gallery")
        row = evaluate(g, gl, dataset=config.dataset, query_embeddings=q, query_labels=ql)
    else:
        row = evaluate(*emb(split), dataset=config.dataset)
    return {str(k): float(v) for k, v in row.items()}
