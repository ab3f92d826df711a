"""A training step that does not fit in memory, said in one line with what to change.

The pair and triplet terms of a metric loss grow with the square and the cube of the batch: an all-triplet loss
on a batch of ``P x K`` images holds a ``B x B x B`` mask (``B = P K``), 262 GB at 16 classes x 400 images. Torch
then reports only the allocator's failure ("DefaultCPUAllocator: can't allocate memory: you tried to allocate
262144000000 bytes", or "CUDA out of memory"); :func:`batch_memory_hint` turns it into a :class:`BatchMemoryError`
that names the batch and the options that shrink it.
"""
from __future__ import annotations

import contextlib
import re

__all__ = ["BatchMemoryError", "batch_memory_hint", "is_allocation_failure"]


class BatchMemoryError(MemoryError, RuntimeError):
    """A training step that does not fit in memory (a ``RuntimeError`` too, as torch's own report of it is)."""

_ALLOCATION = re.compile(r"can't allocate memory|out of memory|not enough memory", re.IGNORECASE)


def is_allocation_failure(err: BaseException) -> bool:
    """Whether ``err`` is torch's (or Python's) report of a failed memory allocation."""
    return isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and bool(_ALLOCATION.search(str(err))))


@contextlib.contextmanager
def batch_memory_hint(config):
    """Run the block; an allocation failure inside it becomes one line naming ``config``'s batch and what to do."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        if not is_allocation_failure(err):
            raise
        asked = re.search(r"allocate (\d+) bytes", str(err))
        size = f" (one tensor of {int(asked.group(1)) / 1e9:,.0f} GB)" if asked else ""
        p, k = config.batch_classes, config.batch_per_class
        raise BatchMemoryError(f"run {config.name}: a training step on a batch of {p} classes x {k} images = {p * k} "
                          f"images does not fit in memory{size}; the loss's pair and triplet terms grow with the "
                          f"square and cube of the batch: lower --batch-per-class (K = {k}) or --batch-classes "
                          f"(P = {p})") from None
