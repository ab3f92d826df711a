"""CML's exercises (Chen and Deng, Confusion-based metric learning): the chapters cml, cml_experiments and
cml_ablations number them "Exercise <chapter>.<n>" in this order; each one's reference is the zslib function the
chapter teaches, with its generated inputs and its hint.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math

from scipy import stats as sstats
import torch

from zslib.engine import stats
from zslib.methods.cml import confusion as regularizers
from zslib.teaching.exercises.kinds import (Case, ExperimentExercise, FunctionExercise, NumberExercise,
                                            PredictionExercise)


def _two_class_cases():
    g = torch.Generator().manual_seed(7)
    sizes = [("2 and 3 samples, 4 dimensions", 2, 3, 4), ("4 and 1 samples, 2 dimensions", 4, 1, 2),
             ("5 and 5 samples, 6 dimensions", 5, 5, 6)]
    return [Case(desc, (torch.randn(a, d, generator=g, dtype=torch.float64),
                        torch.randn(b, d, generator=g, dtype=torch.float64) + 1.0), grad=0)
            for desc, a, b, d in sizes]


def _feature_cases():
    g = torch.Generator().manual_seed(11)
    return [Case("8 samples, 3 dimensions", (torch.randn(8, 3, generator=g, dtype=torch.float64),)),
            Case("5 samples, 6 dimensions, mean far from 0", (torch.randn(5, 6, generator=g, dtype=torch.float64) + 3,)),
            Case("2 samples, 1 dimension", (torch.tensor([[1.0], [3.0]], dtype=torch.float64),))]


def _ec_two_classes(xi, xj):
    x = torch.cat([xi, xj])
    labels = torch.cat([torch.zeros(len(xi), dtype=torch.long), torch.ones(len(xj), dtype=torch.long)])
    return regularizers.pairwise_energy_confusion(x, labels)[1][0, 1]


def _interval_bounds(values):
    iv = stats.interval(values.tolist())
    return torch.tensor([iv.low, iv.high], dtype=torch.float64)


def _interval_cases():
    return [Case("5 values", (torch.tensor([61.2, 60.4, 62.0, 61.5, 60.9], dtype=torch.float64),), grad=None),
            Case("3 values", (torch.tensor([0.40, 0.43, 0.38], dtype=torch.float64),), grad=None),
            Case("2 values", (torch.tensor([1.0, 2.0], dtype=torch.float64),), grad=None)]


def toy_two_classes(n_i: int, n_j: int, seed: int, gap: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 2-D Gaussian classes of ``n_i`` and ``n_j`` points (unit spread), the second's mean ``gap`` to the right
    (float64, seeded): the toy of the chapters' experiment exercises."""
    g = torch.Generator().manual_seed(seed)
    xi = torch.randn(n_i, 2, generator=g, dtype=torch.float64)
    xj = torch.randn(n_j, 2, generator=g, dtype=torch.float64) + torch.tensor([gap, 0.0], dtype=torch.float64)
    return xi, xj


def decomposition(xi: torch.Tensor, xj: torch.Tensor) -> torch.Tensor:
    """``[||mu_I - mu_J||^2, tr Sigma_I, tr Sigma_J]`` of two classes (covariances with 1/N): the three parts of
    CML's energy confusion (Eq. 3 = their sum)."""
    mi, mj = xi.mean(0), xj.mean(0)
    return torch.stack([(mi - mj).pow(2).sum(), (xi - mi).pow(2).sum(1).mean(), (xj - mj).pow(2).sum(1).mean()])


def _ec_descent(xi, xj, lr, steps):
    """``steps`` steps of plain gradient descent on the energy confusion of two classes alone (both move), then
    :func:`decomposition` of the result."""
    xi, xj = xi.detach().clone().requires_grad_(True), xj.detach().clone().requires_grad_(True)
    for _ in range(int(steps)):
        gi, gj = torch.autograd.grad(_ec_two_classes(xi, xj), (xi, xj))
        with torch.no_grad():
            xi -= lr * gi
            xj -= lr * gj
    return decomposition(xi.detach(), xj.detach())


def _toy_cases():
    """Three 2-D toys with a step size and a number of steps (no gradient compared: an experiment's outcome)."""
    return [Case(desc, (*toy_two_classes(n_i, n_j, seed), lr, steps), grad=None)
            for desc, (n_i, n_j, seed, lr, steps) in {
                "10 and 10 points, step size 0.5, 5 steps": (10, 10, 91, 0.5, 5),
                "6 and 12 points, step size 0.3, 8 steps": (6, 12, 92, 0.3, 8),
                "8 and 8 points, step size 1.0, 3 steps": (8, 8, 93, 1.0, 3)}.items()]


def _ec_rates(n_i: int = 10, n_j: int = 10, lr: float = 0.5) -> tuple[float, float]:
    """The factors by which one EC step multiplies ``||mu_I - mu_J||^2`` and ``tr Sigma_I`` (from the gradient
    (2 / N_I)(x_i - mu_J) of Eq. 3)."""
    return (1 - 2 * lr * (1 / n_i + 1 / n_j)) ** 2, (1 - 2 * lr / n_i) ** 2


def _t975(df: int) -> float:
    return float(sstats.t.ppf(0.975, df))


EXERCISES = [
    # -- cml
    FunctionExercise("cml.energy_confusion", "energy confusion of two classes (CML Eq. 3)",
                     "With p_ij = 1/(N_I N_J), Eq. 3 is the mean of ||x_i - x_j||^2 over every pair with x_i in the "
                     "first class and x_j in the second: all N_I x N_J pairs, squared distances, no square root.",
                     reference=_ec_two_classes, cases=_two_class_cases,
                     forbidden=(regularizers.pairwise_energy_confusion, regularizers.energy_confusion)),
    FunctionExercise("cml.diversity_confusion", "diversity confusion (CML Eq. 10)",
                     "Eq. 10 replaces the trace of the covariance by E||x||^2: the mean over the batch of each "
                     "row's squared norm (no centring).",
                     reference=regularizers.diversity_confusion, cases=_feature_cases),
    NumberExercise("cml.hoeffding", "Lemma 5's deviation bound for b = 64, delta = 0.05, zeta = 1",
                   "Lemma 5: zeta * sqrt(log(4 / delta) / (2 b)).",
                   expected=lambda: regularizers.hoeffding_bound(64, 0.05), tol=1e-4),
    NumberExercise("cml.ec_rates", "what one gradient step on EC alone does to the gap and to the spread",
                   "The gradient of Eq. 3 with respect to x_i of class I is (2 / N_I)(x_i - mu_J). A step moves the "
                   "mean mu_I by -2 lr / N_I (mu_I - mu_J) and multiplies each x_i - mu_I by 1 - 2 lr / N_I; square "
                   "the factors, since the gap and tr Sigma are squared lengths.",
                   expected=_ec_rates, tol=1e-3),
    ExperimentExercise("cml.ec_descent", "EC alone on a 2-D toy: the gap and the spreads after a few steps",
                       "Clone both classes with requires_grad, then for each step: ec = the mean of ||x_i - x_j||^2 "
                       "over all pairs, gi, gj = torch.autograd.grad(ec, (x_i, x_j)), and x <- x - lr * g for both "
                       "(inside torch.no_grad()). Return torch.stack([||mu_I - mu_J||^2, tr Sigma_I, tr Sigma_J]), "
                       "tr Sigma the mean squared distance of a class's points to its mean (1/N, not 1/(N - 1)).",
                       reference=_ec_descent, cases=_toy_cases),
    PredictionExercise("cml.confusion_effect", "did the confusion terms change unseen Recall@1 on this run?",
                       "Read the 95% interval of the paired difference CML minus baseline over the seeds: 'raised' "
                       "only if it lies above 0, 'lowered' only if below, otherwise 'no clear effect'.",
                       options=("raised", "lowered", "no clear effect")),
    # -- cml_experiments
    FunctionExercise("cml_experiments.diversity", "diversity (CML Definition 1)",
                     "The sum of the covariance's eigenvalues is its trace: the mean squared distance of the rows "
                     "to their mean (normalized by 1/n).",
                     reference=regularizers.diversity, cases=_feature_cases),
    NumberExercise("cml_experiments.dc_and_diversity", "DC and diversity of the two points 1 and 3 (one dimension)",
                   "DC is the mean of x^2; diversity the mean of (x - mean)^2; they differ by the squared mean.",
                   expected=lambda: (5.0, 1.0), tol=1e-6),
    PredictionExercise("cml_experiments.unseen_diversity",
                       "does CML-d raise or lower the unseen diversity, or can the seeds not tell?",
                       "Read the 95% interval of the paired difference CML-d minus baseline in unseen diversity, seed "
                       "by seed: 'up' only if it lies above 0, 'down' only if below, otherwise 'no clear effect'."),
    # -- cml_ablations
    FunctionExercise("cml_ablations.interval", "a 95% Student-t interval of the mean",
                     "mean -/+ t * s / sqrt(n) with s the sample standard deviation (ddof = 1) and t the 0.975 "
                     "quantile of Student's t with n - 1 degrees of freedom (scipy.stats.t.ppf). Return "
                     "torch.tensor([low, high]).",
                     reference=_interval_bounds, cases=_interval_cases, forbidden=(stats.interval,)),
    NumberExercise("cml_ablations.detectable_effect", "half-width of a 95% interval of a difference of 5 vs 5 runs",
                   "Two groups of 5 runs with standard deviation 0.35 each: the difference of the means has "
                   "standard error 0.35 * sqrt(2 / 5); multiply by t at 0.975 with 8 degrees of freedom.",
                   expected=lambda: _t975(8) * 0.35 * math.sqrt(2 / 5),
                   tol=0.01),
    PredictionExercise("cml_ablations.dropout_effect",
                       "did dropout 0.4 change the baseline's unseen Recall@1?",
                       "Read the 95% interval of the paired difference dropout 0.4 minus no dropout, seed by seed: "
                       "'raised' only if it lies above 0, 'lowered' only if below, otherwise 'no clear effect'.",
                       options=("raised", "lowered", "no clear effect")),
]
