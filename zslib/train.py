"""The trainer: one readable loop that every chapter uses.

What it does, in the order of :func:`train`:

1. **Batches.** A class-balanced batch sampler draws P classes x K images per step
   (:class:`zslib.data.ClassBalancedSampler`; the papers use 64 x 2, e.g. CML Sec. V-A and DeML Sec. 4).
   Random augmentation for step ``t`` is drawn from a generator seeded by ``(seed, t)``, so a batch does
   not depend on how many data-loading workers there are, nor on whether the run was interrupted.
2. **Objective.** ``objective(model, images, labels)`` returns a dict of *named, already weighted* loss
   terms, e.g. ``{"triplet": l_tri, "ec": lambda1 * l_ec}``. The trainer sums them, logs every term,
   and stops with an error naming the term as soon as one becomes NaN or infinite. Method chapters add
   their regularizers as extra terms; :func:`metric_objective` builds the plain ``{loss: L(f(x), y)}``.
3. **Optimizer.** Adam with parameter groups: the backbone at ``lr``, the new layers (the embedding
   head) at ``new_layer_mult * lr`` -- all five papers train the new layers 10x faster -- and parameters
   held by the objective (proxies, classifier weights) in a group of their own. Weight decay is Adam's
   L2 penalty added to the gradient (Caffe's and ``torch.optim.Adam``'s convention, as in CML and DeML:
   Adam, lr 1e-5, weight decay 2e-4).
4. **Schedule.** ``"constant"`` (CML, DeML, Adapt-Adv) or a step decay
   ``{"name": "step", "every": N, "gamma": 0.1}`` (JRD divides the learning rate by 10 every 20 epochs);
   ``{"name": "cosine"}`` is offered as a modern alternative. The schedule advances once per iteration.
5. **Mixed precision** on CUDA only (``torch.autocast`` in float16 + ``GradScaler``); off on the CPU.
6. **Evaluation** of retrieval on named sets (typically ``{"seen": train classes, "unseen": test
   classes}``) every ``eval_every`` iterations: the curves of CML Fig. 3 and DeML Fig. 5. Evaluation runs
   under saved-and-restored random states, so evaluating more or less often never changes training.
7. **Checkpoints with exact resume**: model, objective, optimizer, scheduler, grad scaler, sampler
   position, every random state (Python, NumPy, torch CPU and CUDA), the step and the history, written
   atomically (temporary file, then ``os.replace``) so a disconnect never leaves a corrupt file. A run
   killed and resumed ends with bitwise the same parameters on the CPU as a run never stopped (with the
   same number of torch threads: CPU kernels sum in a thread-dependent order).

Also here: :func:`embed` (embeddings of a dataset in eval mode), :func:`split_classes` (a class-disjoint
validation split, the protocol of Musgrave et al. 2020, "A metric learning reality check": hyperparameters
are chosen on validation classes, never on the test classes) and :class:`History`.
"""
from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = [
    "History",
    "train",
    "metric_objective",
    "MetricObjective",
    "embed",
    "split_classes",
    "LabeledSubset",
    "make_scheduler",
    "set_seed",
    "default_eval",
    "load_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_VERSION = 1


# ----------------------------------------------------------------------------------------------------
# History: what a run leaves behind (JSON-friendly)


@dataclass
class History:
    """Loss terms per step and evaluation metrics per evaluation step.

    ``losses`` is a list of rows ``{"step": t, "total": ..., "<term>": ...}`` (one every ``log_every``
    steps); ``evals`` a list of rows ``{"step": t, "<set>": {"R@1": ..., ...}, ...}``. ``elapsed`` is
    the training wall time in seconds; it is not compared by ``==`` (two identical runs differ in it).
    """

    losses: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    elapsed: float = field(default=0.0, compare=False)

    def loss_curve(self, term: str = "total") -> tuple[list[int], list[float]]:
        """Steps and values of one loss term (``"total"`` is the sum of the terms)."""
        rows = [r for r in self.losses if term in r]
        if not rows and self.losses:
            terms = sorted(k for k in self.losses[0] if k != "step")
            raise KeyError(f"no loss term {term!r} in this history; it has {terms}")
        return [r["step"] for r in rows], [r[term] for r in rows]

    def metric_curve(self, split: str, metric: str = "R@1") -> tuple[list[int], list[float]]:
        """Steps and values of one metric on one evaluation set, e.g. ``("unseen", "R@1")``."""
        rows = [r for r in self.evals if split in r]
        if not rows and self.evals:
            sets = sorted(k for k in self.evals[0] if k != "step")
            raise KeyError(f"no evaluation set {split!r} in this history; it has {sets}")
        missing = [r["step"] for r in rows if metric not in r[split]]
        if missing:
            raise KeyError(f"metric {metric!r} was not computed on {split!r}; it has {sorted(rows[0][split])}")
        return [r["step"] for r in rows], [r[split][metric] for r in rows]

    @property
    def splits(self) -> list[str]:
        """Names of the evaluation sets."""
        return sorted({k for r in self.evals for k in r if k != "step"})

    def last(self, split: str) -> dict[str, float]:
        """Metrics of the last evaluation of ``split`` (an empty dict when it was never evaluated)."""
        for r in reversed(self.evals):
            if split in r:
                return dict(r[split])
        return {}

    def to_dict(self) -> dict:
        return {"losses": self.losses, "evals": self.evals, "elapsed": self.elapsed}

    @classmethod
    def from_dict(cls, d: Mapping) -> "History":
        return cls(losses=list(d.get("losses", [])), evals=list(d.get("evals", [])),
                   elapsed=float(d.get("elapsed", 0.0)))


# ----------------------------------------------------------------------------------------------------
# Objectives


class MetricObjective(nn.Module):
    """The plain metric-learning objective ``{name: loss_fn(model(images), labels)}``.

    A module so that a loss holding parameters (Proxy-NCA proxies, AM-Softmax class weights) is saved
    in checkpoints and optimized; the trainer gives those parameters their own group.
    """

    def __init__(self, loss_fn: Callable, name: str | None = None):
        super().__init__()
        if not callable(loss_fn):
            raise TypeError(f"metric_objective needs a callable loss(embeddings, labels), got {type(loss_fn).__name__}")
        self.loss_fn = loss_fn  # registered as a submodule when it is a Module
        self.name = name or getattr(loss_fn, "name", None) or _callable_name(loss_fn)

    def forward(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {self.name: self.loss_fn(model(images), labels)}


def _callable_name(fn) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return name.lower().removesuffix("loss").strip("_") or "loss"


def metric_objective(loss_fn: Callable, name: str | None = None) -> MetricObjective:
    """Wrap ``loss_fn(embeddings, labels) -> scalar`` as a trainer objective with one named term."""
    return MetricObjective(loss_fn, name)


def _sum_terms(terms, step: int) -> tuple[torch.Tensor, dict[str, float]]:
    """Sum the named loss terms; stop with an error naming the first term that is not finite."""
    if not isinstance(terms, Mapping) or not terms:
        raise TypeError(
            "the objective must return a non-empty dict of named loss terms, e.g. {'triplet': loss}; "
            f"got {type(terms).__name__}. Wrap a plain loss with zslib.train.metric_objective(loss_fn)."
        )
    total, logged = None, {}
    for name, value in terms.items():
        if not torch.is_tensor(value) or value.numel() != 1:
            raise TypeError(f"loss term {name!r} must be a scalar tensor, got "
                            f"{type(value).__name__}{tuple(value.shape) if torch.is_tensor(value) else ''}")
        v = float(value.detach().float())
        if not math.isfinite(v):
            kind = "nan" if math.isnan(v) else "inf"
            raise FloatingPointError(
                f"loss term {name!r} became {kind} at step {step}; lower its weight or the learning rate"
            )
        logged[name] = v
        total = value.float() if total is None else total + value.float()
    logged["total"] = float(sum(logged.values()))
    return total, logged


# ----------------------------------------------------------------------------------------------------
# Random state


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _rng_state(cuda: bool = True) -> dict:
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]),
        "torch": torch.get_rng_state(),
    }
    if cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _preserved_rng:
    """Context manager: whatever runs inside leaves the global random states as it found it
    (Python, NumPy, torch CPU, and CUDA unless ``cuda=False``)."""

    def __init__(self, cuda: bool = True):
        self.cuda = cuda

    def __enter__(self):
        self.state = _rng_state(self.cuda)

    def __exit__(self, *exc):
        _set_rng_state(self.state)
        return False


# ----------------------------------------------------------------------------------------------------
# Batches: sampler indices -> tensors, resumable


def _in_memory(dataset):
    """All of ``dataset`` as ``(images, labels)`` tensors when it offers ``tensors()`` and that equals
    ``dataset[i]`` image by image: no transform, or only a ``Normalize`` (a per-channel affine map,
    applied to the whole tensor at once). Otherwise ``None`` (use ``dataset[i]``)."""
    if not callable(getattr(dataset, "tensors", None)):
        return None
    transform = getattr(dataset, "transform", None)
    if transform is None:
        return dataset.tensors()
    if type(transform).__name__ == "Normalize":
        images, labels = dataset.tensors()
        return transform(images), labels
    return None


class _StepBatches(torch.utils.data.Dataset):
    """Maps ``(step, indices)`` to a stacked batch; random augmentation seeded by ``(seed, step)``."""

    def __init__(self, dataset, seed: int):
        self.dataset, self.seed = dataset, seed

    def __len__(self):  # only needed by DataLoader's bookkeeping
        return 2**62

    def __getitem__(self, item):
        step, indices = item
        with _preserved_rng(cuda=False):  # CPU transforms only draw from the CPU generators
            s = (self.seed * 1_000_003 + step) % 2**63
            random.seed(s)
            np.random.seed(s % 2**32)
            torch.default_generator.manual_seed(s)
            samples = [self.dataset[int(i)] for i in indices]
        images = torch.stack([torch.as_tensor(x) for x, _ in samples])
        labels = torch.as_tensor([int(y) for _, y in samples], dtype=torch.long)
        return images, labels


class _BatchStream:
    """Pulls index lists from a batch sampler and turns them into tensors, one per training step.

    Resume works for any deterministic sampler with ``state_dict``/``load_state_dict``: for each pass
    over the sampler we note its state just before the pass and the training step of the pass's first
    batch. A checkpoint after ``t`` steps stores the pass that holds step ``t`` and how many of its batches
    were trained on; resuming reloads that state and skips those batches (index lists only: cheap).
    Batches that a loader fetched ahead but the loop never trained on are therefore not lost.
    """

    def __init__(self, dataset, sampler, *, seed: int, num_workers: int = 0, pin_memory: bool = False,
                 state: dict | None = None):
        self.dataset, self.sampler = dataset, sampler
        self.tensors = _in_memory(dataset)
        self.seed, self.num_workers, self.pin_memory = seed, num_workers, pin_memory
        self.resume_state = state
        self.passes: list[tuple[int, dict]] = []  # (first step of the pass, sampler state before it)
        self._iter = None

    def state_dict(self, step: int) -> dict:
        """Where to continue after ``step`` training steps."""
        while len(self.passes) > 1 and self.passes[1][0] <= step:
            self.passes.pop(0)
        first, state = self.passes[0]
        return {"pass_state": state, "used": step - first}

    def _indices(self, step0: int):
        """Yield (step, indices) forever, starting at training step ``step0``."""
        skip = 0
        if self.resume_state is not None:
            self.sampler.load_state_dict(self.resume_state["pass_state"])
            skip = int(self.resume_state["used"])
        step, first = step0, step0 - skip
        while True:
            self.passes.append((first, _to_safe(self.sampler.state_dict())))
            got = 0
            for indices in self.sampler:
                got += 1
                if skip:
                    skip -= 1
                    continue
                yield step, [int(i) for i in indices]
                step += 1
            if got == 0:
                raise RuntimeError("the batch sampler yielded no batch; are there at least "
                                   "`batch_classes` classes with images in the training set?")
            first = step

    def start(self, step0: int):
        source = self._indices(step0)
        if self.tensors is not None:  # in-memory data (SynthParts): plain indexing, no workers
            images, labels = self.tensors
            self._iter = ((images[idx], torch.as_tensor(labels[idx], dtype=torch.long)) for _, idx in source)
        elif self.num_workers == 0:
            fetch = _StepBatches(self.dataset, self.seed)
            self._iter = (fetch[item] for item in source)
        else:
            loader = torch.utils.data.DataLoader(
                _StepBatches(self.dataset, self.seed), batch_size=None, sampler=source,
                num_workers=self.num_workers, pin_memory=self.pin_memory,
                generator=torch.Generator().manual_seed(self.seed))  # never draws from the global RNG
            self._iter = iter(loader)

    def close(self):
        """Stop data-loading workers now rather than at interpreter exit."""
        shutdown = getattr(self._iter, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self._iter = None

    def next(self):
        return next(self._iter)


def _default_sampler(labels, batch_classes, batch_per_class, seed):
    if batch_classes is None or batch_per_class is None:
        raise ValueError("give batch_classes and batch_per_class (P classes x K images per batch), "
                         "or a batch_sampler")
    from zslib.data import ClassBalancedSampler  # lazy: the trainer itself needs no dataset code

    return ClassBalancedSampler(labels, batch_classes, batch_per_class, seed=seed)


def _labels_of(dataset) -> np.ndarray:
    labels = getattr(dataset, "labels", None)
    if labels is None and hasattr(dataset, "tensors"):
        labels = dataset.tensors()[1]
    if labels is None:
        raise TypeError(f"{type(dataset).__name__} has no `.labels`; the class-balanced sampler needs the "
                        "label of every image (or pass your own batch_sampler)")
    return np.asarray(labels.cpu() if torch.is_tensor(labels) else labels, dtype=np.int64)


# ----------------------------------------------------------------------------------------------------
# Optimizer and schedule


def _param_groups(model, objective, lr, weight_decay, new_layer_mult, objective_lr, param_groups, extra_params):
    if param_groups is not None:
        groups = [dict(g) for g in param_groups]
    elif lr is None:
        raise ValueError("give lr (the backbone learning rate) or explicit param_groups")
    elif hasattr(model, "param_groups"):
        groups = [dict(g) for g in model.param_groups(lr, new_layer_mult=new_layer_mult, weight_decay=weight_decay)]
    else:
        groups = [{"params": list(model.parameters()), "lr": lr, "weight_decay": weight_decay}]
    for g in groups:
        g["params"] = list(g["params"])
    seen = {id(p) for g in groups for p in g["params"]}
    side_lr = objective_lr if objective_lr is not None else (lr or groups[0]["lr"]) * new_layer_mult

    def fresh(params):
        out = []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    if isinstance(objective, nn.Module):
        own = fresh(objective.parameters())
        if own:
            groups.append({"params": own, "lr": side_lr, "weight_decay": 0.0, "name": "objective"})
    for item in extra_params:
        if isinstance(item, Mapping):
            g = dict(item)
            g["params"] = fresh(g["params"] if not isinstance(g["params"], torch.Tensor) else [g["params"]])
            g.setdefault("lr", side_lr)
        else:
            params = item.parameters() if isinstance(item, nn.Module) else ([item] if torch.is_tensor(item) else item)
            g = {"params": fresh(params), "lr": side_lr, "weight_decay": 0.0}
        if g["params"]:
            groups.append(g)
    groups = [g for g in groups if g["params"]]
    if not groups:
        raise ValueError("nothing to train: the model and the objective have no parameters that require grad")
    return groups


def _optimized(optimizer) -> list[torch.Tensor]:
    return [p for g in optimizer.param_groups for p in g["params"]]


def make_scheduler(optimizer, schedule, iterations: int):
    """The learning-rate schedule, stepped once per iteration; ``None`` for a constant rate.

    ``schedule`` is ``None``/``"constant"``; ``{"name": "step", "every": N, "gamma": 0.1}`` (multiply
    every group's rate by gamma every N iterations; JRD's "divide by 10 every 20 epochs");
    ``{"name": "cosine"}`` (cosine decay to 0 over the run); or a callable ``optimizer ->
    torch.optim.lr_scheduler.LRScheduler``.
    """
    if schedule is None or schedule == "constant":
        return None
    if callable(schedule):
        return schedule(optimizer)
    if isinstance(schedule, str):
        schedule = {"name": schedule}
    if not isinstance(schedule, Mapping) or "name" not in schedule:
        raise ValueError(f"unknown schedule {schedule!r}; use 'constant', {{'name': 'step', 'every': N, "
                         "'gamma': 0.1}, {'name': 'cosine'} or a callable")
    kind = schedule["name"]
    if kind == "constant":
        return None
    if kind == "step":
        if "every" not in schedule:
            raise ValueError("a step schedule needs 'every' (iterations between decays), e.g. "
                             "{'name': 'step', 'every': 2000, 'gamma': 0.1}")
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=int(schedule["every"]),
                                               gamma=float(schedule.get("gamma", 0.1)))
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=iterations,
                                                          eta_min=float(schedule.get("min_lr", 0.0)))
    raise ValueError(f"unknown schedule name {kind!r}; use 'constant', 'step' or 'cosine'")


# ----------------------------------------------------------------------------------------------------
# Checkpoints


def _to_safe(obj):
    """Recursively replace NumPy arrays and scalars so ``torch.load(weights_only=True)`` can read it."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj)).clone(), "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _to_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_safe(v) for v in obj)
    return obj


def _from_safe(obj):
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__", "dtype"}:
            return obj["__ndarray__"].numpy().astype(obj["dtype"])
        return {k: _from_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_safe(v) for v in obj)
    return obj


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` atomically: a temporary file in the same folder, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_checkpoint(path: str | os.PathLike, map_location=None) -> dict:
    """Read a checkpoint written by :func:`train` (safely: ``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise RuntimeError(f"could not read checkpoint {path} ({type(e).__name__}: {e}); it is damaged or not "
                           "a zslib checkpoint -- delete it to start the run afresh") from e
    if not isinstance(state, dict) or state.get("format") != "zslib-checkpoint":
        raise RuntimeError(f"{path} is not a zslib training checkpoint")
    return state


# ----------------------------------------------------------------------------------------------------
# Embeddings and evaluation


def memory_format(model: nn.Module) -> torch.memory_format:
    """``torch.channels_last`` when the model's 2-D convolutions store their weights that way (see
    :func:`train`), else ``torch.contiguous_format``: the layout its image batches should have."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            last = m.weight.is_contiguous(memory_format=torch.channels_last)
            if last != m.weight.is_contiguous():  # a 1x1 kernel on one channel is both: undecided
                return torch.channels_last if last else torch.contiguous_format
    return torch.contiguous_format


def _to_input(x: torch.Tensor, device, fmt: torch.memory_format) -> torch.Tensor:
    if x.dim() == 4 and fmt is torch.channels_last:
        return x.to(device, non_blocking=True, memory_format=fmt)
    return x.to(device, non_blocking=True)


@torch.no_grad()
def embed(model: nn.Module, dataset, batch_size: int = 256, device=None, num_workers: int = 0,
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings of every image of ``dataset``, in order, with the model in eval mode.

    Returns ``(embeddings, labels)``: a float32 CPU tensor ``(n, d)`` and an int64 CPU tensor ``(n,)``.
    The model's train/eval mode is restored afterwards.
    """
    if device is None:
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
    device = torch.device(device)
    was_training = model.training
    model.eval()
    fmt = memory_format(model)
    try:
        outs, labs = [], []
        in_memory = _in_memory(dataset)
        if in_memory is not None:
            images, labels = in_memory
            for i in range(0, len(images), batch_size):
                outs.append(model(_to_input(images[i:i + batch_size], device, fmt)).float().cpu())
            labs = [torch.as_tensor(np.asarray(labels), dtype=torch.long)]
        else:
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                                 num_workers=num_workers, pin_memory=device.type == "cuda")
            for images, labels in loader:
                outs.append(model(_to_input(images, device, fmt)).float().cpu())
                labs.append(torch.as_tensor(labels, dtype=torch.long))
        if not outs:
            raise ValueError(f"cannot embed an empty dataset ({type(dataset).__name__} has no images)")
        return torch.cat(outs), torch.cat(labs)
    finally:
        model.train(was_training)


def default_eval(embeddings: torch.Tensor, labels: torch.Tensor, query_embeddings=None,
                 query_labels=None) -> dict[str, float]:
    """Recall@1, 2, 4, 8 (cosine) -- the curves of CML Fig. 3 and DeML Fig. 5. Leave-one-out over
    ``embeddings``, or ``query_embeddings`` against the gallery ``embeddings`` (In-Shop)."""
    from zslib.evaluate import recall_at_k

    n = len(labels) if query_embeddings is not None else len(labels) - 1
    ks = tuple(k for k in (1, 2, 4, 8) if k <= n) or (1,)
    rec = recall_at_k(embeddings, labels, ks=ks, query_embeddings=query_embeddings, query_labels=query_labels)
    return {f"R@{k}": float(v) for k, v in rec.items()}


# ----------------------------------------------------------------------------------------------------
# Class-disjoint validation split


def split_classes(labels, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split image indices by class: ``round(fraction * C)`` classes go to validation, the rest to training.

    The protocol of Musgrave et al. (2020), "A metric learning reality check": in zero-shot retrieval the
    validation classes must be disjoint from the training ones (as the test classes are), and
    hyperparameters are chosen on them -- never on the test classes. Deterministic in ``seed``.
    Returns sorted ``(train_indices, val_indices)``.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be strictly between 0 and 1 (share of classes for validation), got {fraction}")
    classes = np.unique(labels)
    n_val = int(round(fraction * len(classes)))
    if n_val < 1 or n_val >= len(classes):
        raise ValueError(f"fraction {fraction} of {len(classes)} classes gives {n_val} validation classes; "
                         "both sides need at least one class")
    rng = np.random.default_rng(seed)
    val_classes = rng.permutation(classes)[:n_val]
    is_val = np.isin(labels, val_classes)
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


class LabeledSubset(torch.utils.data.Dataset):
    """A subset of a dataset that keeps ``.labels`` (and ``.tensors()`` when the parent has it)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.labels = _labels_of(dataset)[self.indices]
        self.transform = getattr(dataset, "transform", None)
        if hasattr(dataset, "tensors"):
            self.tensors = self._tensors

    def _tensors(self):
        images, labels = self.dataset.tensors()
        idx = torch.from_numpy(self.indices)
        return images[idx], labels[idx] if torch.is_tensor(labels) else np.asarray(labels)[self.indices]

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.dataset[int(self.indices[i])]


# ----------------------------------------------------------------------------------------------------
# The loop


def _progress_bar(mode, total, initial, desc: str = "train"):
    if mode == "auto":  # the environment may choose, e.g. ZS_PROGRESS=text while building the book
        env = os.environ.get("ZS_PROGRESS", "auto").strip().lower() or "auto"
        mode = False if env in ("none", "false", "0", "off") else env
    if mode is False or mode is None:
        return None
    if mode == "auto" or mode is True:
        from tqdm.auto import tqdm
        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)
    if mode == "text":
        from tqdm.std import tqdm
        # at most about ten lines per bar: a built book or a log shows every refresh as a line of its own
        return tqdm(total=total, initial=initial, desc=desc, mininterval=5.0, miniters=max(1, total // 10),
                    maxinterval=float("inf"), ncols=100)
    raise ValueError(f"progress must be 'auto' (widget in notebooks), 'text' (plain text) or False, got {mode!r}")


def train(
    model: nn.Module,
    objective: Callable,
    train_set,
    *,
    iterations: int,
    batch_classes: int | None = None,
    batch_per_class: int | None = None,
    batch_sampler=None,
    lr: float | None = None,
    param_groups: Iterable[dict] | None = None,
    weight_decay: float = 0.0,
    new_layer_mult: float = 10.0,
    objective_lr: float | None = None,
    extra_params: Iterable = (),
    schedule=None,
    grad_clip: float | None = None,
    eval_sets: Mapping[str, object] | None = None,
    eval_every: int | None = None,
    eval_at_start: bool = True,
    eval_at_end: bool = True,
    channels_last: bool | None = None,
    eval_fn: Callable | None = None,
    eval_batch_size: int = 256,
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = True,
    meta: dict | None = None,
    max_steps: int | None = None,
    callbacks: Iterable[Callable] = (),
    log_every: int = 1,
    seed: int = 0,
    device=None,
    amp: bool | None = None,
    num_workers: int = 0,
    progress="auto",
) -> History:
    """Train ``model`` on ``train_set`` for ``iterations`` steps and return the :class:`History`.

    Parameters, by purpose:

    * data: ``train_set`` (``ds[i] -> (image, label)`` with ``.labels``, or ``.tensors()`` for in-memory
      data); P x K batches from ``batch_classes`` x ``batch_per_class`` via ``zslib.data.ClassBalancedSampler``,
      or any ``batch_sampler`` (iterable of index lists with ``state_dict``/``load_state_dict``).
    * objective: ``objective(model, images, labels) -> {name: weighted scalar loss}``.
    * optimizer: Adam; ``lr`` for the backbone and ``new_layer_mult * lr`` for new layers via
      ``model.param_groups`` (or explicit ``param_groups``); parameters of the objective and ``extra_params``
      (modules, tensors or param-group dicts) at ``objective_lr`` (default ``new_layer_mult * lr``; the
      values of every optimized tensor are checkpointed, buffers only when they sit in the model or the
      objective module);
      ``schedule`` as in :func:`make_scheduler`; optional ``grad_clip`` (max gradient norm).
    * evaluation: ``eval_sets`` such as ``{"seen": ..., "unseen": ...}`` evaluated every ``eval_every`` steps
      (and at step 0 when ``eval_at_start``) and at the end (unless ``eval_at_end`` is false: the caller
      then evaluates the final model itself), with ``eval_fn(embeddings, labels) -> dict``
      (default: :func:`default_eval`, Recall@1/2/4/8). A set given as a tuple ``(queries, gallery)`` is
      evaluated as ``eval_fn(gallery_emb, gallery_labels, query_embeddings=..., query_labels=...)``.
    * checkpoints: ``checkpoint_path`` written every ``checkpoint_every`` steps and at the end (or at
      ``max_steps``); with ``resume`` an existing checkpoint is continued exactly. ``meta`` is stored in it.
    * ``max_steps``: stop (after checkpointing) once this many steps are done, keeping the schedule of
      ``iterations`` -- the way to train a long run in pieces. ``callbacks``: ``cb(step, history)`` after
      each step (a callback may raise to stop the run).
    * ``channels_last`` (default: when the model has 2-D convolutions): keep weights and image batches in
      NHWC order, which oneDNN on the CPU and tensor cores on CUDA run 1.5-2x faster than NCHW.
    * ``seed``; ``device`` (default ``zslib.device()``); ``amp`` (default: on for CUDA; never on the CPU);
      ``num_workers`` data-loading processes; ``progress``: ``"auto"`` (a widget in notebooks; the
      environment variable ``ZS_PROGRESS`` = ``auto``/``text``/``none`` overrides it), ``"text"`` (plain
      text, for built books and logs) or ``False``.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    if eval_sets and not eval_every:
        eval_every = iterations  # evaluate at the end only
    if log_every < 1:
        raise ValueError(f"log_every must be at least 1, got {log_every}")
    if device is None:
        from zslib.profile import device as default_device
        device = default_device()
    device = torch.device(device)
    amp = (device.type == "cuda") if amp is None else (bool(amp) and device.type == "cuda")
    eval_fn = eval_fn or default_eval
    eval_sets = dict(eval_sets or {})
    run_key = {"iterations": int(iterations), "seed": int(seed), "batch_classes": batch_classes,
               "batch_per_class": batch_per_class}

    # --- state: fresh, or continued from a checkpoint ---------------------------------------------
    state = None
    if checkpoint_path is not None and resume and Path(checkpoint_path).exists():
        state = load_checkpoint(checkpoint_path, map_location=device)
        if state["run"] != run_key:
            raise ValueError(f"checkpoint {checkpoint_path} belongs to another run ({state['run']}, this one is "
                             f"{run_key}); delete it or pass resume=False")
    if state is None:
        set_seed(seed)
    model.to(device)
    if channels_last is None:  # convolutions run 1.5-2x faster on the CPU (oneDNN) and on tensor cores
        channels_last = any(isinstance(m, nn.Conv2d) for m in model.modules())
    if channels_last:
        model.to(memory_format=torch.channels_last)
    fmt = memory_format(model)
    if isinstance(objective, nn.Module):
        objective.to(device)
    groups = _param_groups(model, objective, lr, weight_decay, new_layer_mult, objective_lr, param_groups, extra_params)
    optimizer = torch.optim.Adam(groups)
    scheduler = make_scheduler(optimizer, schedule, iterations)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    sampler = batch_sampler if batch_sampler is not None else _default_sampler(
        _labels_of(train_set), batch_classes, batch_per_class, seed)
    history, step = History(), 0
    if state is not None:
        model.load_state_dict(state["model"])
        if isinstance(objective, nn.Module):
            objective.load_state_dict(state["objective"])
        optimizer.load_state_dict(state["optimizer"])
        with torch.no_grad():  # values of every optimized tensor, including extra_params outside any module
            for p, saved in zip(_optimized(optimizer), state["params"], strict=True):
                p.copy_(saved)
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        history, step = History.from_dict(state["history"]), int(state["step"])
        _set_rng_state(state["rng"])
    stream = _BatchStream(train_set, sampler, seed=seed, num_workers=num_workers,
                          pin_memory=device.type == "cuda", state=_from_safe(state["stream"]) if state else None)

    def checkpoint():
        if checkpoint_path is None:
            return
        save_checkpoint(checkpoint_path, {
            "format": "zslib-checkpoint", "version": CHECKPOINT_VERSION, "run": run_key, "step": step,
            "model": model.state_dict(),
            "objective": objective.state_dict() if isinstance(objective, nn.Module) else None,
            "optimizer": optimizer.state_dict(), "params": [p.detach() for p in _optimized(optimizer)],
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict(), "stream": _to_safe(stream.state_dict(step)), "rng": _rng_state(),
            "history": history.to_dict(), "meta": _to_safe(meta or {}),
        })

    def evaluate_all():
        row = {"step": step}
        with _preserved_rng():
            for name, ds in eval_sets.items():
                if isinstance(ds, tuple):  # (queries, gallery), e.g. In-Shop
                    q, ql = embed(model, ds[0], batch_size=eval_batch_size, device=device, num_workers=num_workers)
                    g, gl = embed(model, ds[1], batch_size=eval_batch_size, device=device, num_workers=num_workers)
                    metrics = eval_fn(g, gl, query_embeddings=q, query_labels=ql)
                else:
                    emb, lab = embed(model, ds, batch_size=eval_batch_size, device=device, num_workers=num_workers)
                    metrics = eval_fn(emb, lab)
                row[name] = {str(k): float(v) for k, v in metrics.items()}
        history.evals.append(row)
        return row

    if step >= iterations:  # a finished run: nothing to do
        return history
    model.train()
    if eval_sets and eval_at_start and step == 0 and not history.evals:
        evaluate_all()
    stop_at = iterations if max_steps is None else min(iterations, max_steps)
    bar = _progress_bar(progress, iterations, step)
    stream.start(step)
    started, elapsed0 = time.perf_counter(), history.elapsed
    try:
        while step < stop_at:
            images, labels = stream.next()
            images = _to_input(images, device, fmt)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=amp):
                terms = objective(model, images, labels)
            loss, logged = _sum_terms(terms, step + 1)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if grad_clip is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(_optimized(optimizer), grad_clip)
            scaler.step(optimizer)
            scaler.update()
            if scheduler is not None:
                scheduler.step()
            step += 1

            if step % log_every == 0 or step == iterations:
                history.losses.append({"step": step, **logged})
            at_end = step == iterations
            if eval_sets and ((step % eval_every == 0 and not at_end) or (at_end and eval_at_end)):
                row = evaluate_all()
                if bar is not None:
                    bar.write(f"step {step}: " + "  ".join(
                        f"{name} R@1 {m['R@1']:.3f}" for name, m in row.items() if name != "step" and "R@1" in m))
            history.elapsed = elapsed0 + time.perf_counter() - started
            if (checkpoint_every and step % checkpoint_every == 0) or step == stop_at:
                checkpoint()
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k: f"{v:.4g}" for k, v in logged.items()}, refresh=False)
            for cb in callbacks:
                cb(step, history)
    finally:
        stream.close()
        if bar is not None:
            bar.close()
    return history
