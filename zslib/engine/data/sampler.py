"""Class-balanced P x K batches, deterministic and exactly resumable.

The papers build every mini-batch from P classes with K images each (CML and DeML: 64 classes x 2
images, batch 128): pair- and triplet-based losses need positives inside the batch.

Determinism: batch ``b`` is a pure function of ``(seed, b)``. Classes are visited in passes: pass
``p`` is a random permutation of all classes (seeded by ``(seed, p)``) cut into ``C // P`` batches, so
within a pass no class repeats and every class gets the same number of turns (the ``C mod P``
left-over classes differ from pass to pass). The K images of a class are drawn without replacement
(seeded by ``(seed, b)``).

Small classes (fewer than K images, common on SOP): the batch takes all of the class's images once,
in random order, and fills the remaining slots by drawing from the same images with replacement, so
every batch still has P x K entries and repeated indices can occur only for such classes.

Resume: the sampler counts the batches it has handed out; :meth:`state_dict` / :meth:`load_state_dict`
save and restore that position, and the batches after a restore are exactly those an uninterrupted
run would have seen.

Several processes (:mod:`zslib.engine.train.distributed`): every process runs the same sampler with the same
seed, so all of them know the global batch, and :func:`split_batch` gives each its own contiguous share.
A batch lists its classes one after the other (K indices each), so with P a multiple of the number of
processes every share holds P / world_size whole classes. The shares never overlap and, concatenated in
rank order, give back the batch; the sampler's state is the global one, so a checkpoint written by a run
on N processes resumes on any number of them.
"""
from __future__ import annotations

import hashlib

import numpy as np
from torch.utils.data import Sampler

__all__ = ["ClassBalancedSampler", "split_batch"]


def split_batch(batch, rank: int, world_size: int) -> list:
    """The share of process ``rank`` (of ``world_size``) of a batch of indices: its ``rank``-th contiguous
    slice of ``len(batch) / world_size`` indices. The shares are disjoint and, in rank order, make up the
    batch. The batch size must be a multiple of ``world_size``."""
    rank, world_size, batch = int(rank), int(world_size), list(batch)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank {rank} of {world_size}")
    if len(batch) % world_size:
        raise ValueError(f"a batch of {len(batch)} images cannot be split evenly over {world_size} processes; "
                         f"choose batch_classes x batch_per_class as a multiple of {world_size} (for whole "
                         f"classes per process: batch_classes a multiple of {world_size})")
    share = len(batch) // world_size
    return batch[rank * share:(rank + 1) * share]


class ClassBalancedSampler(Sampler):
    """Yields lists of ``classes_per_batch * images_per_class`` dataset indices.

    Parameters
    ----------
    labels : 1-D integer array-like, one label per dataset index.
    classes_per_batch : P, distinct classes per batch (at most the number of classes).
    images_per_class : K, images per class in a batch.
    seed : everything is a function of the seed and the batch index.
    num_batches : batches per epoch (one ``for batch in sampler`` loop; the ``len`` a DataLoader
        reports). Default: ``len(labels) // (P * K)``, at least 1.

    Iterating yields the batches from the current position to the end of the current epoch, so after
    a :meth:`load_state_dict` in the middle of an epoch the loop finishes that epoch, and the next
    loop is the next epoch.

    Exact resume with a :class:`torch.utils.data.DataLoader`: with ``num_workers=0`` the loader asks
    for one batch at a time and :meth:`state_dict` is exact. With workers the loader fetches a few
    batches ahead, so pass the number of batches the training loop actually consumed:
    ``sampler.state_dict(position=start + steps_done)``.
    """

    def __init__(self, labels, classes_per_batch: int, images_per_class: int, seed: int = 0,
                 num_batches: int | None = None):
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.size == 0:
            raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {labels.dtype}")
        P, K = int(classes_per_batch), int(images_per_class)
        if P < 1 or K < 1:
            raise ValueError(f"classes_per_batch and images_per_class must be >= 1, got {P} and {K}")
        self.classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
        C = len(self.classes)
        if P > C:
            raise ValueError(f"classes_per_batch={P} but the labels have only {C} classes; "
                             f"use classes_per_batch <= {C}")
        order = np.argsort(inverse, kind="stable")
        self._members = np.split(order, np.cumsum(counts)[:-1])
        self.labels = labels
        self.classes_per_batch, self.images_per_class = P, K
        self.seed = int(seed)
        if num_batches is None:
            num_batches = max(1, len(labels) // (P * K))
        if int(num_batches) < 1:
            raise ValueError(f"num_batches must be >= 1, got {num_batches}")
        self.num_batches = int(num_batches)
        self.batches_per_pass = C // P
        self._position = 0
        self._pass_cache: tuple[int, np.ndarray] | None = None
        self._fingerprint = hashlib.sha1(np.ascontiguousarray(labels.astype(np.int64)).tobytes()).hexdigest()

    # -- the batches ----------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self.classes_per_batch * self.images_per_class

    def _pass_order(self, p: int) -> np.ndarray:
        if self._pass_cache is None or self._pass_cache[0] != p:
            rng = np.random.default_rng([self.seed, p, 0xC1A55])
            self._pass_cache = (p, rng.permutation(len(self.classes)))
        return self._pass_cache[1]

    def batch_classes(self, b: int) -> np.ndarray:
        """Positions (into :attr:`classes`) of the P classes of batch ``b``."""
        if b < 0:
            raise ValueError(f"batch index must be >= 0, got {b}")
        p, r = divmod(int(b), self.batches_per_pass)
        P = self.classes_per_batch
        return self._pass_order(p)[r * P:(r + 1) * P]

    def batch(self, b: int) -> list[int]:
        """The indices of batch ``b`` (any ``b >= 0``), class by class, K per class."""
        rng = np.random.default_rng([self.seed, int(b), 0x1A6E5])
        K = self.images_per_class
        out = []
        for k in self.batch_classes(b):
            m = self._members[k]
            if len(m) >= K:
                out.append(rng.choice(m, K, replace=False))
            else:
                out.append(np.concatenate([rng.permutation(m), rng.choice(m, K - len(m), replace=True)]))
        return np.concatenate(out).tolist()

    # -- iteration and state --------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Index of the next batch to hand out (batches handed out so far)."""
        return self._position

    @property
    def epoch(self) -> int:
        return self._position // self.num_batches

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self):
        end = (self._position // self.num_batches + 1) * self.num_batches
        while self._position < end:
            b = self._position
            self._position += 1  # advance first: a state saved after consuming batch b resumes at b+1
            yield self.batch(b)

    def state_dict(self, position: int | None = None) -> dict:
        """Everything needed to resume. ``position`` overrides the count of batches consumed."""
        pos = self._position if position is None else int(position)
        if pos < 0:
            raise ValueError(f"position must be >= 0, got {pos}")
        return {"position": pos, "seed": self.seed, "classes_per_batch": self.classes_per_batch,
                "images_per_class": self.images_per_class, "num_batches": self.num_batches,
                "labels_sha1": self._fingerprint}

    def load_state_dict(self, state: dict) -> None:
        """Restore the position; refuses a state saved for other labels, seed, P, K or epoch length."""
        mine = self.state_dict()
        for key in ("seed", "classes_per_batch", "images_per_class", "num_batches", "labels_sha1"):
            if key in state and state[key] != mine[key]:
                raise ValueError(f"cannot resume: the saved sampler has {key}={state[key]!r} but this one "
                                 f"has {mine[key]!r}; build the sampler with the same labels and settings")
        pos = int(state["position"])
        if pos < 0:
            raise ValueError(f"position must be >= 0, got {pos}")
        self._position = pos
