"""Batches for the trainer: sampler indices become tensors, one batch per step, resumable exactly.

Random augmentation for step ``t`` is drawn from generators seeded by ``(seed, t)``, so a batch depends
neither on how many data-loading workers there are nor on whether the run was interrupted. In-memory
data (``dataset.tensors()``, e.g. SynthParts) is indexed directly, without a loader.

When ``world_size`` processes train together (:mod:`zslib.engine.train.distributed`), every process draws the same
global batch from its sampler and loads only its share (:func:`zslib.engine.data.split_batch`). Process 0 draws
its augmentation as a single process does; process ``r > 0`` seeds its generators by ``(seed, t, r)``, so
its random crops differ from those the single process draws for the same images (the same distribution,
not the same numbers; data without random augmentation gives exactly the same batch).
"""
from __future__ import annotations

import os
import random

import numpy as np
import torch

from zslib.engine.data.sampler import ClassBalancedSampler, split_batch
from zslib.engine.data.splits import labels_of
from zslib.engine.train.checkpoint import preserved_rng, to_safe

__all__ = ["BatchStream", "labels_of", "default_sampler", "in_memory", "loader_workers", "step_seed"]


def loader_workers(requested: int) -> int:
    """How many data-loading processes to start for ``requested``: at most one per CPU core this process
    may use, the cores being shared among the training processes of the machine (``$LOCAL_WORLD_SIZE``, set
    by ``torchrun``). More workers than cores only compete with each other (a Colab GPU session has 2
    cores: 2 workers). The number never changes a batch, only how fast it is ready."""
    requested = int(requested)
    if requested <= 0:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    sharing = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(1, min(requested, cores // sharing))


def in_memory(dataset):
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


def step_seed(seed: int, step: int, rank: int = 0) -> int:
    """The seed of the random augmentation of training step ``step`` (process ``rank`` of a distributed run draws
    its own): the loader seeds Python's, NumPy's and torch's generators with it before reading the step's images,
    and :class:`zslib.engine.data.device_images.DeviceImages` draws the same crops from it."""
    s = (seed * 1_000_003 + step) % 2**63
    if rank:
        s = (s * 1_000_033 + rank) % 2**63
    return s


class _StepBatches(torch.utils.data.Dataset):
    """Maps ``(step, indices)`` to a stacked batch; random augmentation seeded by ``(seed, step)``."""

    def __init__(self, dataset, seed: int, rank: int = 0):
        self.dataset, self.seed, self.rank = dataset, seed, rank

    def __len__(self):  # only needed by DataLoader's bookkeeping
        return 2**62

    def __getitem__(self, item):
        step, indices = item
        with preserved_rng(cuda=False):  # CPU transforms only draw from the CPU generators
            s = step_seed(self.seed, step, self.rank)  # another process of a distributed run: its own stream
            random.seed(s)
            np.random.seed(s % 2**32)
            torch.default_generator.manual_seed(s)
            samples = [self.dataset[int(i)] for i in indices]
        images = torch.stack([torch.as_tensor(x) for x, _ in samples])
        labels = torch.as_tensor([int(y) for _, y in samples], dtype=torch.long)
        return images, labels


class BatchStream:
    """Pulls index lists from a batch sampler and turns them into tensors, one per training step.

    Resume works for any deterministic sampler with ``state_dict``/``load_state_dict``: for each pass
    over the sampler we note its state just before the pass and the training step of the pass's first
    batch. A checkpoint after ``t`` steps stores the pass that holds step ``t`` and how many of its batches
    were trained on; resuming reloads that state and skips those batches (index lists only: cheap).
    Batches that a loader fetched ahead but the loop never trained on are therefore not lost.

    ``part=(rank, world_size)``: yield only the share of process ``rank`` of every batch
    (:func:`zslib.engine.data.split_batch`); the sampler, and therefore the checkpointed state, stays global.
    """

    def __init__(self, dataset, sampler, *, seed: int, num_workers: int = 0, pin_memory: bool = False,
                 state: dict | None = None, part: tuple[int, int] = (0, 1)):
        self.dataset, self.sampler = dataset, sampler
        self.tensors = in_memory(dataset)
        self.seed, self.num_workers, self.pin_memory = seed, loader_workers(num_workers), pin_memory
        self.rank, self.world_size = (int(part[0]), int(part[1]))
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
            self.passes.append((first, to_safe(self.sampler.state_dict())))
            got = 0
            for indices in self.sampler:
                got += 1
                if skip:
                    skip -= 1
                    continue
                indices = [int(i) for i in indices]
                if self.world_size > 1:
                    indices = split_batch(indices, self.rank, self.world_size)
                yield step, indices
                step += 1
            if got == 0:
                raise RuntimeError("the batch sampler yielded no batch; are there at least "
                                   "`batch_classes` classes with images in the training set?")
            first = step

    def start(self, step0: int):
        source = self._indices(step0)
        step_batch = getattr(self.dataset, "step_batch", None)
        if callable(step_batch):  # the dataset makes whole batches itself (zslib.engine.data.device_images)
            self._iter = (step_batch(step, idx, self.seed, self.rank) for step, idx in source)
        elif self.tensors is not None:  # in-memory data (SynthParts): plain indexing, no workers
            images, labels = self.tensors
            self._iter = ((images[idx], torch.as_tensor(labels[idx], dtype=torch.long)) for _, idx in source)
        elif self.num_workers == 0:
            fetch = _StepBatches(self.dataset, self.seed, self.rank)
            self._iter = (fetch[item] for item in source)
        else:
            loader = torch.utils.data.DataLoader(
                _StepBatches(self.dataset, self.seed, self.rank), batch_size=None, sampler=source,
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


def default_sampler(labels, batch_classes, batch_per_class, seed):
    """The P x K class-balanced sampler of :mod:`zslib.engine.data` (CML Sec. V-A, DeML Sec. 4: 64 x 2)."""
    if batch_classes is None or batch_per_class is None:
        raise ValueError("give batch_classes and batch_per_class (P classes x K images per batch), "
                         "or a batch_sampler")
    return ClassBalancedSampler(labels, batch_classes, batch_per_class, seed=seed)
