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

A run stored as diverged (:attr:`zslib.engine.store.Result.diverged`, :mod:`zslib.engine.collapse`) is never a
silent row: :func:`summarize` counts such runs, :func:`format_interval` of that summary then reads
``"1.9 [1.5, 2.3] (diverged: 3 of 3 seeds)"``, :func:`paired` gives the verdict ``"n/a (diverged)"`` and
:func:`diverged_label` is the text of a table's status column (``""`` when every run is healthy).

Runs are any objects with ``metric(name, split) -> float`` and ``config.seed`` (a
:class:`zslib.engine.store.Result`), or plain numbers where no pairing is needed.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["Interval", "Paired", "Summary", "interval", "summarize", "paired", "verdict", "format_interval",
           "values_of", "diverged_runs", "diverged_label"]


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
    from scipy import stats  # `import zslib` imports this module (through the profiles): it stays light

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


class Summary(tuple):
    """``(mean, low, high)`` of :func:`summarize`, which also knows how many of its ``n`` runs ``diverged``."""

    def __new__(cls, mean: float, low: float, high: float, n: int = 0, diverged: int = 0):
        self = super().__new__(cls, (mean, low, high))
        self.n, self.diverged = int(n), int(diverged)
        return self

    def __format__(self, spec: str) -> str:
        return format_interval(self, digits=int(spec) if spec.isdigit() else 3, scale=1.0)

    def __str__(self) -> str:
        return format_interval(self, digits=3, scale=1.0)


def diverged_runs(runs: Iterable) -> list:
    """The runs of ``runs`` stored as diverged (those whose ``diverged`` attribute gives a reason)."""
    return [r for r in runs if getattr(r, "diverged", None)]


def diverged_label(runs: Iterable) -> str:
    """A table's status cell for the seeds of one configuration: ``"diverged: k of n seeds"``, or ``""``."""
    runs = list(runs)
    k = len(diverged_runs(runs))
    return f"diverged: {k} of {len(runs)} seed{'s' if len(runs) != 1 else ''}" if k else ""


def summarize(runs: Iterable, metric: str = "R@1", split: str = "unseen", confidence: float = 0.95,
              ) -> Summary:
    """``(mean, low, high)`` of one metric over runs (seeds): :func:`interval` of :func:`values_of`. The
    :class:`Summary` also counts the diverged runs, which :func:`format_interval` then names."""
    runs = list(runs)
    m, lo, hi, n = interval(values_of(runs, metric, split), confidence)
    return Summary(m, lo, hi, n, len(diverged_runs(runs)))


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
    broken = len(diverged_runs(a)) + len(diverged_runs(b))
    return Paired(diff, f"n/a (diverged: {broken} run{'s' if broken != 1 else ''})" if broken else verdict(diff),
                  seeds, diffs)


def format_interval(value, scale: float = 100.0, digits: int = 1, signed: bool = False) -> str:
    """``"m [low, high]"`` of an :class:`Interval`, a ``(mean, low, high)`` triple or a :class:`Paired` comparison
    (its difference), times ``scale`` (default: fractions as percentage points); ``signed`` prints ``+``/``-`` (for
    differences); an interval of one value prints ``"m [n/a]"``. The book's one interval formatter."""
    if isinstance(value, Paired):
        value = value.diff
    m, lo, hi = (float(v) * scale for v in tuple(value)[:3])
    spec = f"{'+' if signed else ''}.{digits}f"
    note = ""
    if getattr(value, "diverged", 0):  # a Summary of runs some of which diverged: never a plain row
        note = f" (diverged: {value.diverged} of {value.n} seed{'s' if value.n != 1 else ''})"
    if math.isnan(lo):
        return f"{m:{spec}} [n/a]{note}"
    return f"{m:{spec}} [{lo:{spec}}, {hi:{spec}}]{note}"
