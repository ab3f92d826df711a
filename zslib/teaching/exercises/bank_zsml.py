"""Checked exercises of the ZSML chapter (book/zsml.ipynb): the relation function R written from Eq. 1,
the label step of the cross-update by numbers, the sign of a label step outside its range, the cross-update run on
free predictions (an experiment), and ZSML against the Euclidean distance decided by the paired interval; and of
its experiments page (book/zsml_experiments.ipynb): the share of same-class pairs among uniform pairs, the cost of
scoring every pair, and what the alpha chosen on validation classes did on the test classes (decided by the paired
interval).

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math

import torch

from zslib.methods.zsml import cross_update as cu
from zslib.methods.zsml.relation import RelationKernels
from zslib.teaching.exercises.kinds import (Case, ExperimentExercise, FunctionExercise, NumberExercise,
                                            PredictionExercise, ReasoningExercise)

# ----------------------------------------------------------------------------------------------------
# Generated inputs: pairs of vectors, kernel weights (k, height, 2), biases (k,) and a stride


def _relation_cases():
    out = []
    for desc, (pairs, dim, k, height, stride, seed) in {
        "3 pairs of 6-d vectors, 2 kernels of height 2, stride 2": (3, 6, 2, 2, 2, 71),
        "4 pairs of 12-d vectors, 3 kernels of height 4, stride 3 (dimensions 10 and 11 unread)": (4, 12, 3, 4, 3, 72),
        "2 pairs of 20-d vectors, 4 kernels of height 8, stride 10 (the paper's kernel)": (2, 20, 4, 8, 10, 73),
    }.items():
        g = torch.Generator().manual_seed(seed)
        xi = torch.randn(pairs, dim, generator=g, dtype=torch.float64)
        xj = torch.randn(pairs, dim, generator=g, dtype=torch.float64)
        weight = torch.randn(k, height, 2, generator=g, dtype=torch.float64)
        bias = 0.3 * torch.randn(k, generator=g, dtype=torch.float64)
        out.append(Case(desc, (xi, xj, weight, bias, stride), grad=0))
    return out


def _label_cases():
    out = []
    for desc, sizes in {
        "4 classes of 3 samples": [3, 3, 3, 3],
        "3 classes of 1, 2 and 5 samples (a singleton has no classmate)": [1, 2, 5],
        "51 classes of 10 to 60 samples, shuffled": None,
    }.items():
        if sizes is None:
            sizes = torch.randint(10, 61, (51,), generator=torch.Generator().manual_seed(74)).tolist()
        labels = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
        labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(75))]
        out.append(Case(desc, (labels,), grad=None))
    return out


# ----------------------------------------------------------------------------------------------------
# References written as the exercises state them


def _relation(xi, xj, weight, bias, stride):
    """ZSML Eq. 1 through zslib's RelationKernels, with the given kernels (weight[c, u, column])."""
    k, height, _ = weight.shape
    rel = RelationKernels(xi.shape[1], k=k, height=height, stride=stride).double()
    with torch.no_grad():
        rel.conv.weight.copy_(weight.detach().reshape(k, 1, height, 2))
        rel.conv.bias.copy_(bias.detach())
    return rel(xi, xj)


def _eta_and_visits(n=128, lr=0.002, lam=0.1):
    """eta measured on zslib's label step (one pair inside its range), and the visits that halve y - s."""
    y, s = torch.full((n,), 0.8, dtype=torch.float64), torch.full((n,), 0.9, dtype=torch.float64)
    stepped = cu.label_step(y, s, torch.ones(n, dtype=torch.bool), lr=lr, lam=lam)
    eta = float((stepped[0] - y[0]) / (s[0] - y[0]))
    return eta, float(math.ceil(math.log(0.5) / math.log(1.0 - eta)))


def _cross_update(s, y, positive, lr, lam, steps):
    """ZSML Algorithm 1 on free predictions: each iteration takes the network step on ``s`` (Eq. 7, labels fixed,
    step size ``lr``) and the label step on ``y`` (Eq. 8, :func:`cu.label_step`), both from the same ``s`` and
    ``y``; returns ``torch.stack([s, y])`` after ``steps`` iterations."""
    s, y, positive = s.detach().clone(), y.detach().clone(), positive.bool()
    for _ in range(int(steps)):
        free = s.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(cu.similarity_loss(free, y, positive), free)
        y = cu.label_step(y, s, positive, lr=lr, lam=lam)
        s = s - lr * grad
    return torch.stack([s, y])


def _cross_update_cases():
    """Pairs with predictions ``s`` anywhere in [-0.2, 1.2] and labels from Eq. 3 at random distances."""
    out = []
    for desc, (n, lr, lam, steps, seed) in {
        "6 pairs (3 positive), step size 1, lam 0.1, 40 iterations": (6, 1.0, 0.1, 40, 76),
        "8 pairs (4 positive), step size 0.5, lam 2, 60 iterations": (8, 0.5, 2.0, 60, 77),
        "4 pairs (2 positive), step size 2, lam 0.1, 5 iterations": (4, 2.0, 0.1, 5, 78),
    }.items():
        g = torch.Generator().manual_seed(seed)
        positive = torch.arange(n) < n // 2
        s = 1.4 * torch.rand(n, generator=g, dtype=torch.float64) - 0.2
        y = cu.continuous_labels(torch.rand(n, generator=g, dtype=torch.float64), positive)
        out.append(Case(desc, (s, y, positive, lr, lam, steps), grad=None))
    return out


N_UNSEEN = 4696  # the images of Flowers-102 classes 52-102


EXERCISES = [
    FunctionExercise("zsml.relation", "the relation function R (ZSML Eq. 1)",
                     "Position p reads rows p*stride .. p*stride + height - 1 of both vectors (x.unfold(1, height, "
                     "stride) gives them); r_c[p] = ReLU(sum_u weight[c, u, 0] x_i[p*stride + u] + weight[c, u, 1] "
                     "x_j[p*stride + u] + bias[c]). Return shape (pairs, k * L), kernel-major: all L positions of "
                     "kernel 0 first.",
                     reference=_relation, cases=_relation_cases,
                     forbidden=(RelationKernels, RelationKernels.forward, RelationKernels.stacked)),
    NumberExercise("zsml.label_step", "eta of one label step, and the visits that halve the gap y - s",
                   "Inside the range, dL_y/dy = (2/N)(y - s), so y <- y - lr lam (2/N)(y - s) = (1 - eta) y + eta s "
                   "with eta = 2 lr lam / N. After v visits the gap is (1 - eta)^v times the first one: find the "
                   "smallest v with (1 - eta)^v <= 1/2 (about ln 2 / eta).",
                   expected=_eta_and_visits, tol=0.01, relative=True),
    ReasoningExercise("zsml.label_sign", "a negative pair's label above its range, with the prediction equal to it",
                      "Eq. 8 for one pair is (y - s)^2 + [y - alpha]_+^2 + [-y]_+^2. At y = s the first term has no "
                      "slope; the derivative of the hinge at y = alpha + 0.05 is 2 * 0.05. A gradient step subtracts "
                      "the derivative.",
                      options=("up", "down", "unchanged"), answer="down"),
    ExperimentExercise("zsml.cross_update", "the cross-update on free predictions: where s and y meet",
                       "For each iteration, from the same s and y: the gradient g of similarity_loss(s, y, positive) "
                       "with respect to s (a copy with requires_grad), then y <- label_step(y, s, positive, lr=lr, "
                       "lam=lam) and s <- s - lr * g. Return torch.stack([s, y]) after the iterations.",
                       reference=_cross_update, cases=_cross_update_cases),
    PredictionExercise("zsml.versus_euclidean", "did ZSML change unseen ACC against the Euclidean distance?",
                       "Read the 95% interval of the differences ZSML minus Euclidean, seed by seed (the same "
                       "embedding and the same sampled images): 'raised' only if it lies above 0, 'lowered' only if "
                       "below, otherwise 'no clear effect'.",
                       options=("raised", "lowered", "no clear effect")),
    # -- zsml_experiments
    FunctionExercise("zsml_experiments.uniform_share", "the share of same-class pairs among uniform pairs",
                     "A uniform ordered pair of two different samples: n (n - 1) pairs in all, of which n_c (n_c - 1) "
                     "lie in class c. Count the class sizes (torch.unique(labels, return_counts=True)) and return "
                     "sum_c n_c (n_c - 1) / (n (n - 1)).",
                     reference=cu.uniform_positive_share, cases=_label_cases),
    NumberExercise("zsml_experiments.every_pair_cost",
                   "the ordered pairs of the 4,696 unseen images, and their float32 score matrix in MiB",
                   "Every ordered pair, an image against itself included, is one entry of the n x n matrix: n^2 "
                   "pairs, 4 bytes each, 2^20 bytes to a MiB.",
                   expected=lambda: (float(N_UNSEEN ** 2), 4 * N_UNSEEN ** 2 / 2 ** 20), tol=0.01, relative=True),
    PredictionExercise("zsml_experiments.chosen_alpha", "did the alpha chosen on validation classes change unseen "
                       "Recall@1 against the paper's 0.3?",
                       "Read the 95% interval of the paired differences chosen alpha minus alpha 0.3, seed by seed "
                       "(same seeds, same sampled images): 'raised' only if it lies above 0, 'lowered' only if "
                       "below, otherwise 'no clear effect'.",
                       options=("raised", "lowered", "no clear effect")),
]
