"""Collapsed runs: a run that finished but learned nothing, told apart from a normal row of a table.

The trainer stops a run whose loss or parameters become non-finite or explode (:mod:`zslib.engine.train.loop`).
A run can also end "complete" and still be broken: at a learning rate of 100 or 1000 on the quick profile the
Adam steps throw the weights about, the batch-norm running variance grows to 1e5-1e8 while every weight
stays below the trainer's limit, and the embeddings collapse (an all-triplet loss then sits at its margin,
since anchor, positive and negative land on the same point). On the quick profile lr 2e-3 gives unseen Recall@1
0.21, seen 0.48, largest buffer 0.96; lr 100 gives 0.032 / 0.020 with a running variance of 5.6e5; lr 1000 gives
0.019 / 0.023 with 2.7e6. Chance is 0.02 there.

:func:`collapse_reason` names the first of four signs, or returns ``None`` for a healthy run:

* a batch-norm running mean or variance above :data:`EXPLODED_BUFFER`, or any floating buffer non-finite;
* the training loss pinned: over the last quarter of the steps (at least :data:`PINNED_STEPS`) it stayed at one
  value (within :data:`PINNED_TOLERANCE` of it, float rounding), other than 0 (a loss at exactly 0 is a fitted
  batch, not a collapse). A triplet loss whose embeddings collapsed sits at its margin: at weight decay 1e6 on the
  quick profile (seed 11, 300 steps) it moved between 0.099997 and 0.100004 over the last quarter;
* every Recall@K of a split equal, at the chance Recall@1 of that split: the embeddings fell onto so few points
  that the ranking is ties, and the first K neighbours never find more than the first one did (in the run above,
  unseen Recall@1, @2, @4 and @8 were all 0.0200, chance 0.0196). Any working metric finds more with more
  neighbours, so flat Recall@K at chance is a collapse whatever the length of the run;
* Recall@1 on the *training* classes at chance (:func:`chance_recall`, times :data:`CHANCE_FACTOR`) at the end of a
  run of at least :data:`PINNED_STEPS` steps that was above it at step 0, or that trained at least
  :data:`JUDGED_STEPS` steps: a network that trained
  that long and cannot retrieve the classes it was trained on collapsed, whatever the unseen classes say. (A run
  of a few steps can sit near chance without having collapsed: its untrained network was there already.)

:func:`zslib.engine.runner.run` stores such a run with ``"status": "diverged"`` and the reason
(:attr:`zslib.engine.store.Result.diverged`); :mod:`zslib.engine.stats` and :mod:`zslib.engine.grid` show it.
"""
from __future__ import annotations

import math

import numpy as np
from torch import nn

__all__ = ["EXPLODED_BUFFER", "PINNED_STEPS", "PINNED_TOLERANCE", "CHANCE_FACTOR", "JUDGED_STEPS", "chance_recall",
           "collapse_reason"]

#: A buffer larger than this in absolute value exploded: in healthy quick-profile runs the largest batch-norm
#: statistic is about 1 (0.96 at the default recipe), in the collapsed runs above 1e5. The same limit as the
#: trainer's limit on weights (:data:`zslib.engine.train.loop.EXPLODED`).
EXPLODED_BUFFER = 1e4
#: At least this many logged steps must be flat before a loss counts as pinned.
PINNED_STEPS = 8
#: A loss whose last quarter stays within this share of its largest value is pinned: healthy runs move by several
#: percent from batch to batch; a collapsed triplet loss moved by 7e-5 of its margin (float rounding).
PINNED_TOLERANCE = 1e-4
#: Seen-class Recall@1 at most this many times chance is "at chance".
CHANCE_FACTOR = 1.25
#: A run of at least this many steps that ends at chance on its training classes collapsed, even when its
#: untrained network was at chance already (the quick profile's untrained SmallCNN starts at 0.02-0.03, chance 0.02).
JUDGED_STEPS = 100


def chance_recall(labels) -> float:
    """Recall@1 of a retrieval that ranks the other samples at random: the mean over queries of the share of
    the other samples that have the query's class, ``sum_c n_c (n_c - 1) / (n (n - 1))``."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    n = int(counts.sum())
    if n < 2:
        raise ValueError("chance recall needs at least two samples")
    return float((counts * (counts - 1)).sum() / (n * (n - 1)))


def _exploded_buffer(model: nn.Module) -> str | None:
    """A non-finite floating buffer anywhere, or a normalization layer's running statistic above the limit (other
    buffers, e.g. a method's step counter or memory bank, may legitimately be large)."""
    norm_stats = {f"{m_name}.{b}".lstrip(".") for m_name, m in model.named_modules()
                  if isinstance(m, nn.modules.batchnorm._NormBase) for b in ("running_mean", "running_var")}
    for name, buf in model.named_buffers():
        if not buf.is_floating_point() or buf.numel() == 0:
            continue
        largest = float(buf.detach().abs().max())
        if not math.isfinite(largest) or (name in norm_stats and largest > EXPLODED_BUFFER):
            return (f"buffer {name} reached {largest:.3g} (batch-norm statistics exploded; limit "
                    f"{EXPLODED_BUFFER:g})")
    return None


def _pinned_loss(losses) -> str | None:
    values = [float(row["total"]) for row in losses if isinstance(row, dict) and "total" in row]
    tail = values[len(values) - len(values) // 4:] if values else []
    if len(tail) < PINNED_STEPS:
        return None
    low, high = min(tail), max(tail)
    if abs(high) > 1e-8 and high - low <= PINNED_TOLERANCE * abs(high):
        return f"the loss stayed at {high:.6g} for the last {len(tail)} steps (pinned: the embeddings collapsed)"
    return None


def _start_recall(evals) -> float | None:
    for row in evals or ():
        if isinstance(row, dict) and row.get("step") == 0 and isinstance(row.get("seen"), dict):
            value = row["seen"].get("R@1")
            return float(value) if isinstance(value, (int, float)) else None
    return None


def _flat_at_chance(metrics: dict, split_labels: dict) -> str | None:
    for split, labels in split_labels.items():
        recalls = {k: float(v) for k, v in (metrics.get(split) or {}).items() if k.startswith("R@")}
        if len(recalls) < 2 or labels is None or len(labels) < 2 or "R@1" not in recalls:
            continue
        chance = chance_recall(labels)
        if max(recalls.values()) - min(recalls.values()) <= 1e-12 and recalls["R@1"] <= CHANCE_FACTOR * chance:
            return (f"every Recall@K on the {split} classes is {recalls['R@1']:.4f}, chance Recall@1 ({chance:.4f}): "
                    "the embeddings collapsed onto ties")
    return None


def _steps(history) -> int:
    return max((int(row.get("step", 0)) for row in history.losses or () if isinstance(row, dict)), default=0)


def collapse_reason(model: nn.Module, history, metrics: dict, seen_labels=None, split_labels=None) -> str | None:
    """Why a finished run collapsed, in one sentence, or ``None``: exploded buffers of ``model``, a pinned loss in
    ``history.losses`` (rows with ``"total"``), every Recall@K of a split in ``metrics`` equal and at chance for its
    labels (``split_labels``: ``{split: labels}``; ``"seen"`` is ``seen_labels``), or ``metrics["seen"]["R@1"]`` at
    chance for ``seen_labels`` while the step-0 row of ``history.evals`` was above it, or after at least
    :data:`JUDGED_STEPS` steps."""
    reason = _exploded_buffer(model) or _pinned_loss(history.losses)
    if reason:
        return reason
    labels = {"seen": seen_labels, **(split_labels or {})}
    reason = _flat_at_chance(metrics, labels)
    if reason:
        return reason
    seen, start = (metrics.get("seen") or {}).get("R@1"), _start_recall(history.evals)
    if seen is not None and seen_labels is not None and len(seen_labels) > 1:
        chance = chance_recall(seen_labels)
        if (seen <= CHANCE_FACTOR * chance and start is not None and start > CHANCE_FACTOR * chance
                and _steps(history) >= PINNED_STEPS):  # two steps of a smoke rehearsal cannot collapse a network
            return (f"Recall@1 on the training classes fell from {start:.4f} at step 0 to {seen:.4f}, at chance "
                    f"({chance:.4f})")
        if seen <= CHANCE_FACTOR * chance and _steps(history) >= JUDGED_STEPS:
            return (f"Recall@1 on the training classes is {seen:.4f} after {_steps(history)} steps, at chance "
                    f"({chance:.4f})")
    return None
