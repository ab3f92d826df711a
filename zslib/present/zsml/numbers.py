"""The numbers every ZSML page reads from its runs (Xu et al., IJCAI 2019): one metric per seed, differences paired
by seed with their 95% intervals and verdicts, table cells, and the words for a verdict.

Differences are paired by seed: two runs of the same seed see the same data order and initialization, and ZSML's
Euclidean row is the Euclidean distance of its own input features on the very same sampled images (the ``input``
metrics every ZSML result carries).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from zslib.engine.stats import format_interval, interval, summarize, verdict

__all__ = ["PAPER", "printed", "METRICS", "METRICS_ORDER", "by_seed", "seed_difference", "as_pair", "cells", "frame",
           "differences", "says", "dataset_name", "seed_list"]

#: The paper's key among the book's references.
PAPER = "xu2019zsml"

#: The metrics of a ZSML run's tables: clustering (ACC, NMI, purity) and Recall@1.
METRICS = ("ACC", "NMI", "Purity", "R@1")

#: The same metrics in the order of the real-profile table.
METRICS_ORDER = ("R@1", "NMI", "ACC", "Purity")

_DATASETS = {"synthparts": "SynthParts", "flowers102": "Flowers-102", "cub200": "CUB-200-2011", "cars196": "Cars196"}


def printed(*tables: str) -> tuple:
    """The ``paper`` pairs of a :class:`~zslib.present.base.Section` for the paper's printed ``tables``."""
    return tuple((PAPER, t) for t in tables)


def by_seed(runs: Sequence, metric: str, split: str = "unseen") -> dict[int, float]:
    """One metric of each run (or analysis record), keyed by the run's seed."""
    return {r.config.seed: r.metric(metric, split) if hasattr(r, "metric") else r[metric] for r in runs}


def seed_difference(a: Mapping, b: Mapping):
    """The per-seed differences ``b - a`` of two ``{seed: value}`` maps with the same seeds: their 95% interval and
    its verdict (:mod:`zslib.engine.stats`). Unlike :func:`zslib.engine.stats.paired` the two sides may be two
    metrics of the same runs: ZSML and the Euclidean distance of its input features on the same images."""
    if set(a) != set(b):
        raise ValueError(f"different seeds: {sorted(a)} and {sorted(b)}")
    d = interval([b[s] - a[s] for s in sorted(a)])
    return d, verdict(d)


def as_pair(p):
    """``(interval, verdict)`` of a :class:`zslib.engine.stats.Paired` or of such a tuple."""
    return (p.diff, p.verdict) if hasattr(p, "verdict") else p


def cells(runs, metrics=METRICS, prefix: str = "", split: str = "unseen", unit: str = " %") -> dict[str, str]:
    """Table cells ``mean [95% CI]`` in percent of ``prefix + metric`` over the runs (seeds)."""
    return {f"{m}{unit}": format_interval(summarize(runs, prefix + m, split)) for m in metrics}


def frame(rows: list[dict], index: str) -> pd.DataFrame:
    """The rows as a table indexed by ``index``, empty cells blank."""
    return pd.DataFrame(rows).set_index(index).fillna("")


def differences(title: str, items: Mapping) -> str:
    """A Markdown list of paired differences under ``title``: ``{label: [(what, (interval, verdict)), ...]}``."""
    lines = [title, ""]
    for label, parts in items.items():
        lines.append(f"- {label}: " + "; ".join(f"{what + ' ' if what else ''}{format_interval(d, signed=True)} ({v})"
                                               for what, (d, v) in parts))
    return "\n".join(lines)


def says(v: str, what: str) -> str:
    """A verdict as the verb phrase of a sentence: ``raised``/``lowered`` ``what``, or left it unchanged."""
    return {"up": f"raised {what}", "down": f"lowered {what}"}.get(v, f"left {what} unchanged within the noise")


def dataset_name(name: str) -> str:
    """A dataset's name as the page writes it."""
    return _DATASETS.get(name, name)


def seed_list(seeds) -> str:
    """Seeds as a comma-separated list."""
    return ", ".join(map(str, seeds))
