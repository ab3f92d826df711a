"""A training step that does not fit in memory, said in one line with what to change.

The pair and triplet terms of a metric loss grow with the square and the cube of the batch: an all-triplet loss
on a batch of ``P x K`` images holds a ``B x B x B`` mask (``B = P K``), 262 GB at 16 classes x 400 images. Torch
then reports only the allocator's failure ("DefaultCPUAllocator: can't allocate memory: you tried to allocate
262144000000 bytes", or "CUDA out of memory"); :func:`batch_memory_hint` turns it into a :class:`BatchMemoryError`
that names the batch and the options that shrink it.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable

__all__ = ["BatchMemoryError", "batch_memory_hint", "is_allocation_failure", "advising"]


class BatchMemoryError(MemoryError, RuntimeError):
    """A training step that does not fit in memory (a ``RuntimeError`` too, as torch's own report of it is)."""

_ALLOCATION = re.compile(r"can't allocate memory|out of memory|not enough memory", re.IGNORECASE)


def is_allocation_failure(err: BaseException) -> bool:
    """Whether ``err`` is torch's (or Python's) report of a failed memory allocation."""
    return isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and bool(_ALLOCATION.search(str(err))))


def _train_options(p: int, k: int) -> str:
    """What to lower, in the options of ``python -m zslib train`` (the Config fields of the same names)."""
    return f"lower --batch-per-class (K = {k}) or --batch-classes (P = {p})"


#: What the hint tells the reader to change, given the batch's P and K: the options of the command that is running
#: (:func:`advising`); by default ``train``'s, which are the Config fields of the same names.
_ADVICE: contextvars.ContextVar[Callable[[int, int], str]] = contextvars.ContextVar("zslib_batch_advice",
                                                                                    default=_train_options)


@contextlib.contextmanager
def advising(advice: Callable[[int, int], str]):
    """Inside the block, an allocation failure's hint ends with ``advice(P, K)``: what to change in the options of
    the command that runs the block (e.g. ``python -m zslib finetune``, which has no ``--batch-per-class``)."""
    token = _ADVICE.set(advice)
    try:
        yield
    finally:
        _ADVICE.reset(token)


@contextlib.contextmanager
def batch_memory_hint(config):
    """Run the block; an allocation failure inside it becomes one line naming ``config``'s batch and what to do
    (:func:`advising`)."""
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
                          f"square and cube of the batch: {_ADVICE.get()(p, k)}") from None
