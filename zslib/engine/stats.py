"""Statistics for comparing runs: means with Student-t intervals, paired differences, verdict words.

Every comparison in the book has the same shape: a few seeds per configuration, the same seeds for
every configuration (so a seed gives both arms the same data order and initialization), and a question
"did B change the metric compared with A?". This module answers it one way everywhere:

* :func:`interval` -- the mean and a Student-t confidence interval of a few numbers;
* :func:`summarize` -- the same for one metric of a list of runs (``(mean, low, high)``);
* :func:`paired` -- the per-seed differences B - A (runs matched by seed, never by position) and
  their interval, with a verdict: ``"up"``, ``"down"`` or ``"no clear effect"`` (the interval
  contains 0), or ``"n/a (1 seed)"``;
* :func:`format_interval` -- ``"18.9 [12.2, 25.6]"``, the one way chapters print an interval.

Runs are any objects with ``metric(name, split) -> float`` and ``config.seed`` (a
:class:`zslib.engine.store.Result`), or plain numbers where no pairing is needed.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["Interval", "Paired", "interval", "summarize", "paired", "verdict", "format_interval", "values_of"]


class Interval(NamedTuple):
    """A mean and its confidence interval over ``n`` values (``low``/``high`` are NaN when n = 1)."""

    mean: float
    low: float
    high: float
    n: int

    def __format__(self, spec: str) -> str:
        return format_interval(self, digits=int(spec) if spec.isdigit() else 3, scale=1.0)

    def __str__(self) -> str:
        return format_interval(self, digits=3, scale=1.0)


class Paired(NamedTuple):
    """The per-seed differences ``b - a`` of one metric, their interval and the verdict word."""

    diff: Interval
    verdict: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]


def interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    """Mean and Student-t ``confidence`` interval of ``values`` (at least one; NaN bounds for one)."""
    v = np.asarray([float(x) for x in values], dtype=float)
    if v.size == 0:
        raise ValueError("an interval needs at least one value")
    if not np.isfinite(v).all():
        raise ValueError(f"cannot average non-finite values: {v.tolist()}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    mean = float(v.mean())
    if v.size == 1:
        return Interval(mean, math.nan, math.nan, 1)
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, df=v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, int(v.size))


def values_of(runs: Iterable, metric: str = "R@1", split: str = "unseen") -> list[float]:
    """One metric of each run (runs with ``.metric(name, split)``, or plain numbers as they are)."""
    out = []
    for r in runs:
        out.append(float(r.metric(metric, split)) if hasattr(r, "metric") else _number(r))
    return out


def _number(x) -> float:
    if isinstance(x, (bool, str)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected runs (with .metric()) or numbers, got {x!r} ({type(x).__name__})")
    return float(x)


def summarize(runs: Iterable, metric: str = "R@1", split: str = "unseen", confidence: float = 0.95,
              ) -> tuple[float, float, float]:
    """``(mean, low, high)`` of one metric over runs (seeds): :func:`interval` of :func:`values_of`."""
    m, lo, hi, _ = interval(values_of(runs, metric, split), confidence)
    return m, lo, hi


def verdict(diff: Interval) -> str:
    """``"up"`` / ``"down"`` when the interval of a difference excludes 0, else ``"no clear effect"``."""
    if diff.n < 2 or math.isnan(diff.low):
        return "n/a (1 seed)"
    if diff.low > 0:
        return "up"
    if diff.high < 0:
        return "down"
    return "no clear effect"


def _by_seed(runs: Sequence, which: str) -> dict[int, object]:
    out = {}
    for r in runs:
        seed = getattr(getattr(r, "config", None), "seed", None)
        if seed is None:
            raise TypeError(f"paired() needs runs that record their seed (run.config.seed); got {type(r).__name__} "
                            f"in {which}")
        if seed in out:
            raise ValueError(f"seed {seed} occurs twice in {which}; a paired comparison needs one run per seed")
        out[int(seed)] = r
    return out


def paired(a: Sequence, b: Sequence, metric: str = "R@1", split: str = "unseen", confidence: float = 0.95,
           ) -> Paired:
    """The per-seed differences ``b - a`` of ``metric`` on ``split``, matched by seed.

    Both lists must hold the same seeds (each once): pairing by position would silently compare
    different seeds if one list were reordered or incomplete.
    """
    a_by, b_by = _by_seed(a, "the first list"), _by_seed(b, "the second list")
    if set(a_by) != set(b_by):
        raise ValueError(f"paired() needs the same seeds on both sides; got {sorted(a_by)} and {sorted(b_by)}")
    seeds = tuple(sorted(a_by))
    diffs = tuple(b_by[s].metric(metric, split) - a_by[s].metric(metric, split) for s in seeds)
    diff = interval(diffs, confidence)
    return Paired(diff, verdict(diff), seeds, diffs)


def format_interval(value, scale: float = 100.0, digits: int = 1, signed: bool = False) -> str:
    """``"m [low, high]"`` of an :class:`Interval` or a ``(mean, low, high)`` triple, times ``scale``
    (default: fractions as percentage points); ``signed`` prints ``+``/``-`` (for differences)."""
    m, lo, hi = (float(v) * scale for v in tuple(value)[:3])
    spec = f"{'+' if signed else ''}.{digits}f"
    if math.isnan(lo):
        return f"{m:{spec}} [n/a]"
    return f"{m:{spec}} [{lo:{spec}}, {hi:{spec}}]"
