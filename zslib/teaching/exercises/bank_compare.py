"""Checked exercises of the one-protocol comparison (book/compare.ipynb): the choice rule written by hand (with its
tie rule), what choosing on the test classes does to a reported gain, Adapt-Adv's measured gain against its paper's
(decided by the interval the page shows), what three and five seeds can detect, and Recall@1 against MAP@R on one
query by hand.

Generated inputs are float64, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from scipy import stats as sstats
import torch

from zslib.engine.choice import choose
from zslib.teaching.exercises.kinds import (Case, FunctionExercise, NumberExercise, PredictionExercise,
                                            ReasoningExercise)


class _Run:
    """One seed's validation score as :func:`zslib.engine.choice.choose` reads a stored run."""

    def __init__(self, seed: int, value: float):
        self.config, self.value, self.diverged = SimpleNamespace(seed=seed), float(value), None

    def metric(self, name: str = "R@1", split: str = "val") -> float:
        return self.value


def _chosen(off, candidates):
    """The rule of :mod:`zslib.engine.choice` on per-seed scores: ``off`` ``(seeds,)``, ``candidates`` ``(k, seeds)``
    in the order they are listed; 0 when "off" is chosen, else 1 + the chosen candidate's row."""
    runs = {"off": [_Run(s, v) for s, v in enumerate(off.tolist())]}
    for k, row in enumerate(candidates.tolist()):
        runs[k + 1] = [_Run(s, v) for s, v in enumerate(row)]
    chosen = choose(runs, off="off").chosen
    return torch.tensor(0.0 if chosen == "off" else float(chosen), dtype=torch.float64)


def _rule_cases():
    t = lambda rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731
    return [Case("3 seeds, 2 candidates: the leader is clearly above off", (t([50, 51, 52]),
                                                                            t([[55, 57, 56], [53, 54, 52]])), grad=None),
            Case("3 seeds, 2 candidates: the leader's mean is higher, but its interval holds 0",
                 (t([50, 51, 52]), t([[62, 50, 57], [51, 52, 50]])), grad=None),
            Case("3 seeds, 2 candidates with the same mean: the first listed is not clearly above off, the second is",
                 (t([50, 51, 52]), t([[62, 50, 56], [55, 57, 56]])), grad=None),
            Case("4 seeds, 3 candidates: the second is clearly above off", (t([60, 61, 62, 60]),
                                                                           t([[55, 56, 57, 55], [63, 64, 64, 62],
                                                                              [50, 52, 51, 50]])), grad=None),
            Case("4 seeds, 2 candidates: off has the best mean", (t([60, 61, 62, 60]),
                                                                  t([[55, 56, 57, 55], [59, 60, 58, 59]])), grad=None)]


def _t975(df: int) -> float:
    return float(sstats.t.ppf(0.975, df))


def _detectable():
    """The half-width of the 95% interval of a mean of paired differences with sd 1.2 points: 5 and 3 seeds."""
    return _t975(4) * 1.2 / math.sqrt(5), _t975(2) * 1.2 / math.sqrt(3)


def _r1_and_map_at_r(hits) -> tuple[float, float]:
    """Recall@1 and MAP@R of one query whose first R neighbours are ``hits`` (1: a relative), R = len(hits)."""
    found, total = 0, 0.0
    for rank, hit in enumerate(hits, 1):
        found += hit
        total += found / rank if hit else 0.0
    return float(hits[0]), total / len(hits)


def _two_queries():
    return (*_r1_and_map_at_r([1, 0, 1, 0]), *_r1_and_map_at_r([0, 1, 1, 1]))


EXERCISES = [
    FunctionExercise("compare.choice_rule", "the choice rule, with its tie rule, written by hand",
                     "The leader is the candidate with the highest mean over the seeds, 'off' included; among equal "
                     "means the one listed first leads ('off' first of all). The leader is chosen only if the 95% "
                     "Student-t interval of its per-seed differences from 'off' lies above 0 (mean - t * sd / "
                     "sqrt(n) > 0, sd with ddof = 1, t = scipy.stats.t.ppf(0.975, n - 1)); otherwise return 0.",
                     reference=_chosen, cases=_rule_cases, forbidden=(choose,)),
    ReasoningExercise("compare.selection_bias", "a setting chosen on the unseen classes, then reported on them",
                      "Ten settings that all do the same still give ten different unseen scores, because of noise. "
                      "Which of them does 'the best one' tend to be, and does its noise average out when the same "
                      "scores are reported?",
                      options=("up", "down", "not biased"), answer="up"),
    PredictionExercise("compare.adapt_adv_vs_paper", "Adapt-Adv's measured gain against the gain its paper reports",
                       "Put the paper's gain beside the 95% interval of the measured paired gain ('vs baseline' of "
                       "the Adapt-Adv row): 'larger' only if the whole interval lies above the paper's figure, "
                       "'smaller' only if it lies below, 'within' if the interval holds it.",
                       options=("larger", "smaller", "within"), against="claimed"),
    NumberExercise("compare.detectable", "the smallest paired gain 5 and 3 seeds can call clear (sd 1.2 points)",
                   "The interval of a mean of n paired differences is mean -/+ t * sd / sqrt(n), t the 0.975 quantile "
                   "of Student's t with n - 1 degrees of freedom (2.78 for 5 seeds, 4.30 for 3): a mean gain is "
                   "clear when it exceeds that half-width.",
                   expected=_detectable, tol=0.01),
    NumberExercise("compare.map_at_r_by_hand", "Recall@1 and MAP@R of two queries with R = 4 relatives",
                   "Recall@1 reads only the first neighbour. MAP@R sums, over the ranks i <= R that hold a relative, "
                   "the precision up to rank i (relatives among the first i, divided by i), and divides by R.",
                   expected=_two_queries, tol=1e-3),
]
