"""Class-disjoint splits of a labelled dataset, and the subset view they produce.

In zero-shot retrieval the classes of the test set never occur in training; a validation set that is to
stand in for the test set must be class-disjoint from the training classes too. Musgrave et al. (2020,
"A metric learning reality check") choose hyperparameters on such validation classes, never on the
test classes; :func:`split_classes` makes that split and :class:`LabeledSubset` views one side of it.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["split_classes", "LabeledSubset", "labels_of", "check_zero_shot_split"]


def labels_of(dataset) -> np.ndarray:
    """The class id of every item of ``dataset`` (its ``.labels``, or the labels of ``.tensors()``)."""
    labels = getattr(dataset, "labels", None)
    if labels is None and hasattr(dataset, "tensors"):
        labels = dataset.tensors()[1]
    if labels is None:
        raise TypeError(f"{type(dataset).__name__} has no `.labels`; the class-balanced sampler needs the "
                        "label of every image (or pass your own batch_sampler)")
    return np.asarray(labels.cpu() if torch.is_tensor(labels) else labels, dtype=np.int64)


def check_zero_shot_split(dataset, split: str) -> None:
    """Refuse, before anything is built from it, a split of a real dataset whose labels leave it without a class
    (e.g. a label file whose ids all fall among the seen classes leaves no unseen class to test on)."""
    labels = labels_of(dataset)
    which = "seen (training)" if split in ("train", "seen") else "unseen (test)"
    where = getattr(dataset, "label_files", None) or [getattr(dataset, "root", "the dataset")]
    files = " and ".join(str(f) for f in where)
    if labels.size == 0:
        raise ValueError(f"{getattr(dataset, 'title', type(dataset).__name__)} has no image in its {which} split: "
                         f"the labels ({files}) give no class there, so there is nothing to "
                         f"{'train on' if which.startswith('seen') else 'test on'}; use the official label file")


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
    """A subset of a dataset that keeps ``.labels`` (and ``.tensors()``, ``.step_batch()`` when the parent has them)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.labels = labels_of(dataset)[self.indices]
        self.transform = getattr(dataset, "transform", None)
        if hasattr(dataset, "tensors"):
            self.tensors = self._tensors
        if hasattr(dataset, "step_batch"):  # a dataset that makes whole batches (zslib.engine.data.device_images)
            self.step_batch = self._step_batch

    def _step_batch(self, step: int, indices, seed: int, rank: int = 0):
        return self.dataset.step_batch(step, self.indices[np.asarray(indices, dtype=np.int64)], seed, rank)

    def _tensors(self):
        images, labels = self.dataset.tensors()
        idx = torch.from_numpy(self.indices)
        return images[idx], labels[idx] if torch.is_tensor(labels) else np.asarray(labels)[self.indices]

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        return self.dataset[int(self.indices[i])]
