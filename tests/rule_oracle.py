"""An independent oracle of the book's choice rule (zslib.engine.choice.choose) for the chapters' tests.

Written with numpy and scipy only, from the rule's statement: the candidate with the highest mean validation score
leads ("off" among them); it is chosen only if the Student-t 95% interval of its per-seed differences from "off"
lies above zero; otherwise "off" is chosen.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def expected_choice(values: dict, off) -> object:
    """The key the rule must choose, from ``{key: per-seed scores in one seed order}``, ``off`` one of the keys."""
    leader = max(values, key=lambda k: float(np.mean(values[k])))
    if leader == off:
        return off
    d = np.asarray(values[leader], float) - np.asarray(values[off], float)
    low = d.mean() - stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return leader if low > 0 else off
