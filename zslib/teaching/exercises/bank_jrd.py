"""Checked exercises of the JRD chapter (book/jrd.ipynb): the joint representation similarity written
from its definition, the self-adaptive bandwidth by numbers, JRS alone descended on a 2-D toy (an experiment), and
the Table 3 analogue decided by the paired interval; and of its experiments page (book/jrd_experiments.ipynb): the
mixture kernel of Fig. 6, a paired interval by hand, and the smallest weight of the Figs. 4-5 sweep, decided by
its paired interval.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import torch

from zslib.engine.stats import interval
from zslib.methods.jrd import diversification as D
from zslib.teaching.exercises.bank_cml import decomposition, toy_two_classes
from zslib.teaching.exercises.kinds import (Case, ExperimentExercise, FunctionExercise, NumberExercise,
                                            PredictionExercise)

# ----------------------------------------------------------------------------------------------------
# Generated inputs: two representations of the same samples (a free one and unit rows) and labels


def _two_layer_cases():
    out = []
    for desc, (classes, per_class, dims, seed, grad) in {
        "3 classes x 2 samples; layers of 5 and 3 dimensions; gradient of the first layer": (3, 2, (5, 3), 61, 0),
        "4 classes x 3 samples, shuffled labels; gradient of the second layer": (4, 3, (4, 2), 62, 1),
        "2 classes x 4 samples, first layer 10 times larger; gradient of the first layer": (2, 4, (3, 4), 63, 0),
    }.items():
        g = torch.Generator().manual_seed(seed)
        labels = torch.arange(classes).repeat_interleave(per_class)
        labels = labels[torch.randperm(labels.numel(), generator=g)]
        m = labels.numel()
        pooled = torch.randn(m, dims[0], generator=g, dtype=torch.float64) * (10.0 if seed == 63 else 1.0)
        embedding = torch.nn.functional.normalize(torch.randn(m, dims[1], generator=g, dtype=torch.float64), dim=1)
        out.append(Case(desc, (pooled, embedding, labels), grad=grad))
    return out


# ----------------------------------------------------------------------------------------------------
# References written as the exercises state them


def _jrs_two_layers(pooled, embedding, labels):
    """JRD Eqs. 8 and 10-11 on two layers, each with the Gaussian mixture of scales (1/2, 1, 2)."""
    return D.jrs_regularizer([pooled, embedding], labels, [D.GAUSSIAN_SCALES, D.GAUSSIAN_SCALES])


def _two_samples_at_cosine_06():
    """JRS and the Gaussian-kernel energy confusion of a batch of two unit vectors of different classes
    at cosine 0.6, embedding layer only, default mixture and bandwidth."""
    x = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    labels = torch.tensor([0, 1])
    jrs = float(D.jrs_regularizer([x], labels))
    _, energy = D.kernel_energy_confusion([x], labels)
    return jrs, float(energy[0, 1])


def _jrs_descent(xi, xj, lr, steps):
    """``steps`` steps of plain gradient descent on JRS alone (JRD Eqs. 10-11, one layer, the default Gaussian
    mixture with its detached bandwidth) over the points of two classes, then
    :func:`zslib.teaching.exercises.bank_cml.decomposition` of the result."""
    x = torch.cat([xi, xj]).detach().clone().requires_grad_(True)
    labels = torch.cat([torch.zeros(len(xi), dtype=torch.long), torch.ones(len(xj), dtype=torch.long)])
    for _ in range(int(steps)):
        (grad,) = torch.autograd.grad(D.jrs_regularizer([x], labels), x)
        with torch.no_grad():
            x -= lr * grad
    x = x.detach()
    return decomposition(x[:len(xi)], x[len(xi):])


def _jrs_toy_cases():
    return [Case(desc, (*toy_two_classes(n_i, n_j, seed, gap), lr, steps), grad=None)
            for desc, (n_i, n_j, seed, gap, lr, steps) in {
                "10 and 10 points 3 apart, step size 1, 20 steps": (10, 10, 94, 3.0, 1.0, 20),
                "6 and 9 points 1 apart, step size 2, 10 steps": (6, 9, 95, 1.0, 2.0, 10),
                "8 and 8 points 5 apart, step size 5, 5 steps": (8, 8, 96, 5.0, 5.0, 5)}.items()]


def _mixture_cases():
    out = []
    for desc, (m, d, k, seed) in {
        "6 samples in 4 dimensions, one Gaussian (K = 1)": (6, 4, 1, 71),
        "8 samples in 3 dimensions, K = 2 (bandwidths tau/2 and tau)": (8, 3, 2, 72),
        "5 samples in 6 dimensions, K = 5 (tau/4 to 4 tau)": (5, 6, 5, 73),
    }.items():
        g = torch.Generator().manual_seed(seed)
        out.append(Case(desc, (torch.randn(m, d, generator=g, dtype=torch.float64), k), grad=0))
    return out


def _mixture_kernel(x, k):
    """The kernel matrix of a mixture of ``k`` Gaussians at the released code's bandwidths (JRD Fig. 6)."""
    return D.gaussian_kernel(x, D.mixture_scales(k))


def _paired_cases():
    """Two arms' per-seed values with their seeds, the second arm's seeds in another order."""
    out = []
    for desc, (seeds_a, a, seeds_b, b) in {
        "5 seeds, the second arm listed from the last seed": ((0, 1, 2, 3, 4), (88.56, 88.12, 89.01, 88.40, 88.77),
                                                             (4, 3, 2, 1, 0), (88.70, 88.28, 88.93, 88.05, 88.41)),
        "3 seeds, not numbered from 0": ((3, 7, 9), (0.40, 0.43, 0.38), (9, 3, 7), (0.41, 0.44, 0.47)),
        "2 seeds": ((0, 1), (1.0, 2.0), (1, 0), (2.5, 1.2)),
    }.items():
        out.append(Case(desc, (torch.tensor(seeds_a), torch.tensor(a, dtype=torch.float64), torch.tensor(seeds_b),
                               torch.tensor(b, dtype=torch.float64)), grad=None))
    return out


def _paired_interval(seeds_a, a, seeds_b, b):
    """``[mean, low, high]`` of the differences b - a matched by seed, with the 95% Student-t interval."""
    va, vb = dict(zip(seeds_a.tolist(), a.tolist())), dict(zip(seeds_b.tolist(), b.tolist()))
    return torch.tensor(interval([vb[s] - va[s] for s in sorted(va)])[:3], dtype=torch.float64)




EXERCISES = [
    FunctionExercise("jrd.jrs", "the JRS regularizer of two layers (JRD Eqs. 8, 10-11)",
                     "For each layer, tau is the mean squared distance over the M(M-1) pairs of *different* samples, "
                     "computed without gradient (detach it, or use torch.no_grad()); the layer kernel is "
                     "(1/3) * sum over s in (0.5, 1, 2) of exp(-||x_i - x_j||^2 / (s * tau)). Multiply the two layer "
                     "kernels elementwise and average the product over every pair (i, j) with labels[i] != labels[j].",
                     reference=_jrs_two_layers, cases=_two_layer_cases,
                     forbidden=(D.jrs_regularizer, D.kernel_mean_embeddings, D.joint_kernel)),
    NumberExercise("jrd.two_samples", "JRS and the Gaussian energy confusion of two samples at cosine 0.6",
                   "With M = 2 there is one distance d^2 and the bandwidth is tau = d^2 itself, so each Gaussian "
                   "reads exp(-1/s): the value does not depend on the cosine. The energy confusion in the RKHS is "
                   "m_I + m_J - 2 JRS with m_I = k(x, x) = 1.",
                   expected=_two_samples_at_cosine_06, tol=1e-3),
    ExperimentExercise("jrd.jrs_descent", "JRS alone on a 2-D toy: the gap and the spreads after a few steps",
                       "Stack both classes into one tensor with requires_grad and labels 0 and 1; for each step take "
                       "the gradient of D.jrs_regularizer([x], labels) and x <- x - lr * grad (inside "
                       "torch.no_grad()). Return torch.stack([||mu_I - mu_J||^2, tr Sigma_I, tr Sigma_J]) of the "
                       "result, tr Sigma the mean squared distance of a class's points to its mean.",
                       reference=_jrs_descent, cases=_jrs_toy_cases),
    PredictionExercise("jrd.lambda_vs_jmmd", "is JRD's lambda lower than JMMD's on this run, higher, or no clearly "
                       "different?",
                       "Read the 95% interval of the paired difference JRD minus JMMD in lambda, seed by seed (the "
                       "verdict printed under the Table 3 analogue): 'lower' only if it lies below 0, 'higher' only "
                       "if above, otherwise 'no clear effect'.",
                       options=("higher", "lower", "no clear effect")),
    # -- jrd_experiments
    FunctionExercise("jrd_experiments.mixture_kernel", "the kernel of a mixture of K Gaussians (JRD Fig. 6)",
                     "tau is the mean squared distance over the M(M-1) pairs of different samples, without gradient; "
                     "the multipliers are 2 ** (i - K // 2) for i = 0, ..., K - 1, and the kernel is the mean over "
                     "them of exp(-||x_i - x_j||^2 / (multiplier * tau)), an (M, M) matrix with ones on the diagonal.",
                     reference=_mixture_kernel, cases=_mixture_cases,
                     forbidden=(D.gaussian_kernel, D.joint_kernel)),
    FunctionExercise("jrd_experiments.paired_interval", "a paired difference and its 95% interval, matched by seed",
                     "Pair the two arms by seed (seeds_a[i] is the seed of a[i]), never by position; take b - a seed "
                     "by seed, then the mean and mean -/+ t * sd / sqrt(n), with sd the standard deviation (ddof = 1) "
                     "and t the 0.975 quantile of Student's t with n - 1 degrees of freedom (scipy.stats.t.ppf). "
                     "Return torch.tensor([mean, low, high]).",
                     reference=_paired_interval, cases=_paired_cases),
    PredictionExercise("jrd_experiments.smallest_weight",
                       "does JIntra at the sweep's smallest weight change unseen Recall@1 against AM-Softmax?",
                       "Read the 95% interval of the paired difference JIntra at the smallest alpha minus AM-Softmax, "
                       "seed by seed (real.sweep_pairs): 'up' only if it lies above 0, 'down' only if below, "
                       "otherwise 'no clear effect'."),
]
