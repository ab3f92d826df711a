"""The Adapt-Adv chapter's checked exercises. ``book/adapt_adv.ipynb``: additive attention pooling (Eqs. 11,
13, 14) written by hand, Eq. 22 inverted by hand, the class-adversarial game played on a toy (an experiment), and
whether +GDFL and +Adv can be told apart on this run (decided by the paired interval).
``book/adapt_adv_experiments.ipynb``: the per-epoch schedule of lambda (Eq. 22) replayed by hand, the epoch in which
lambda turns positive (it lags the loss by an epoch), and whether Adapt-Adv stopped at its chosen length differs from
+GDFL (decided by the paired interval).

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.func import functional_call

from zslib.methods.adapt_adv.class_adversary import adaptive_lambda, replay_lambda
from zslib.methods.adapt_adv.spatial_attention import SpatialAttention
from zslib.teaching.exercises.kinds import (Case, ExperimentExercise, FunctionExercise, NumberExercise,
                                            PredictionExercise)


def _additive_attention(fmap, u, w1, w):
    """The zslib module's additive form with the given parameters: ``W1`` ``(l, c)``, ``w`` ``(l,)``."""
    att = SpatialAttention(fmap.shape[1], u.shape[1], form="additive").double()
    return functional_call(att, {"project.weight": w1, "score.weight": w[None, :]}, (fmap, u))


def _attention_cases():
    """A map ``(B, c, H, V)``, the query ``u`` ``(B, l)``, ``W1`` ``(l, c)`` and ``w`` ``(l,)``; the gradient is
    compared with respect to the map in some cases and to ``W1`` in another."""
    out = []
    for desc, (b, c, h, v, l, seed, grad) in {
        "2 images, 3 channels, 2 x 2 map, query of 5; gradient on the map": (2, 3, 2, 2, 5, 71, 0),
        "1 image, 4 channels, 3 x 2 map, query of 3; gradient on W1": (1, 4, 3, 2, 3, 72, 2),
        "3 images, 2 channels, 1 x 4 map, query of 6; gradient on the map": (3, 2, 1, 4, 6, 73, 0),
    }.items():
        g = torch.Generator().manual_seed(seed)
        fmap = torch.randn(b, c, h, v, generator=g, dtype=torch.float64)
        u = torch.randn(b, l, generator=g, dtype=torch.float64)
        w1 = torch.randn(l, c, generator=g, dtype=torch.float64)
        w = 2.0 * torch.randn(l, generator=g, dtype=torch.float64)
        out.append(Case(desc, (fmap, u, w1, w), grad=grad))
    return out


def _game(z, labels, a, v, lr, steps, l_thresh, lambda0):
    """Adapt-Adv's class-adversarial game (Algorithm 1, steps 2.4 and 2.6; Eqs. 18, 19 and 22) on a toy: features
    ``f = z a^T``, a linear classifier ``v``; each step sets lambda from the current loss, takes the extractor's
    step on ``-lambda L_c`` (classifier frozen), then the classifier's step on ``L_c`` of the new features. Returns
    ``L_c`` before each step (lambda set every step here, not every epoch)."""
    a, v, out = a.detach().clone(), v.detach().clone(), []
    for _ in range(int(steps)):
        extractor = a.clone().requires_grad_(True)
        loss = F.cross_entropy(z @ extractor.T @ v.T, labels)
        lam = adaptive_lambda(float(loss.detach()), l_thresh, lambda0)
        (grad,) = torch.autograd.grad(-lam * loss, extractor)
        a = a - lr * grad
        classifier = v.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(F.cross_entropy(z @ a.T @ classifier.T, labels), classifier)
        v = v - lr * grad
        out.append(float(loss.detach()))
    return torch.tensor(out, dtype=torch.float64)


def game_toy(classes: int, per_class: int, dim: int, seed: int):
    """Points of ``classes`` Gaussian classes (means 2 apart on average), their labels, the identity extractor and
    a small random classifier: ``(z, labels, a, v)``."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(classes).repeat_interleave(per_class)
    centres = 2.0 * torch.randn(classes, dim, generator=g, dtype=torch.float64)
    z = torch.randn(len(labels), dim, generator=g, dtype=torch.float64) + centres[labels]
    return z, labels, torch.eye(dim, dtype=torch.float64), 0.1 * torch.randn(classes, dim, generator=g,
                                                                               dtype=torch.float64)


def _game_cases():
    return [Case("3 classes x 10 points in 2-D, step size 0.5, 30 steps, l_thresh 0.6, lambda0 1",
                 (*game_toy(3, 10, 2, 1), 0.5, 30, 0.6, 1.0), grad=None),
            Case("4 classes x 5 points in 3-D, step size 0.3, 20 steps, l_thresh 1.0, lambda0 0.5",
                 (*game_toy(4, 5, 3, 2), 0.3, 20, 1.0, 0.5), grad=None),
            Case("2 classes x 8 points in 2-D, step size 1, 10 steps, lambda0 0 (no adversary)",
                 (*game_toy(2, 8, 2, 3), 1.0, 10, 0.6, 0.0), grad=None)]


def _lambda_schedule(losses, epoch_steps, num_classes, lambda0, l_thresh):
    """The lambda of every step as zslib replays a run's schedule (:func:`replay_lambda`), a float64 tensor."""
    return torch.tensor(replay_lambda(losses.tolist(), epoch_steps, num_classes, lambda0, l_thresh), dtype=torch.float64)


def _falling_losses(steps: int, classes: int, seed: int):
    """A classifier's loss at every step: from just above chance level ln C down to near 0, with noise (float64)."""
    g = torch.Generator().manual_seed(seed)
    noise = 0.3 * torch.rand(steps, generator=g, dtype=torch.float64)
    return torch.linspace(math.log(classes) + 0.2, 0.05, steps, dtype=torch.float64) + noise


def _schedule_cases():
    """Three made-up runs: ``(losses, epoch_steps, num_classes, lambda0, l_thresh)``, no gradient compared."""
    return [Case("100 steps, epochs of 20, 50 classes, lambda0 0.5, l_thresh 1.5",
                 (_falling_losses(100, 50, 81), 20, 50, 0.5, 1.5), grad=None),
            Case("45 steps, epochs of 10 (the last one partial), 10 classes, lambda0 1, l_thresh 1.5",
                 (_falling_losses(45, 10, 82), 10, 10, 1.0, 1.5), grad=None),
            Case("30 steps, epochs of 7, 4 classes (chance level below l_thresh 2), lambda0 0.1",
                 (_falling_losses(30, 4, 83), 7, 4, 0.1, 2.0), grad=None)]


#: the mean classification loss of each epoch of a made-up run of 50 classes (the lag exercise)
EPOCH_LOSSES = (3.2, 1.9, 1.4, 0.9, 0.7)


def _first_positive_epoch(losses=EPOCH_LOSSES, num_classes: int = 50, l_thresh: float = 1.5) -> float:
    """The first epoch (from 1) whose lambda is positive: epoch 1 reads ln(num_classes), epoch e the mean loss of
    epoch e - 1 (:class:`zslib.methods.adapt_adv.class_adversary.EpochLambda`)."""
    levels = [math.log(num_classes), *losses]
    return float(next(e for e, level in enumerate(levels, 1) if adaptive_lambda(level, l_thresh) > 0))


EXERCISES = [
    FunctionExercise("adapt_adv.additive_attention", "additive attention pooling (Adapt-Adv Eqs. 11, 13, 14)",
                     "Flatten the map to pixels q_j (B, c, H V); the score of pixel j is w . tanh(W1 q_j + u) "
                     "(no biases); a softmax over the H V positions gives the weights; the output is the "
                     "weighted sum of the pixels, (B, c). Use reshape or flatten, not view.",
                     reference=_additive_attention, cases=_attention_cases, forbidden=(SpatialAttention,)),
    NumberExercise("adapt_adv.lambda_half", "the classification loss at which lambda = 0.5 (lambda0 = 1, l_thresh = 1.5)",
                   "Set -tanh(L_c - 1.5) = 0.5 and solve for L_c with artanh (math.atanh); lambda is positive, "
                   "so the loss is below the threshold.",
                   expected=lambda: 1.5 - math.atanh(0.5 / 1.0), tol=1e-3),
    ExperimentExercise("adapt_adv.game", "the class-adversarial game on a toy: where the classification loss goes",
                       "Each step: loss = cross_entropy(z @ a.T @ v.T, labels) with a requiring grad; lam = "
                       "-tanh(loss - l_thresh) * lambda0 as a plain float; a <- a - lr * grad of (-lam * loss); then "
                       "the classifier's step v <- v - lr * grad of the cross-entropy of the new features z @ a.T. "
                       "Record the loss before each step and return the float64 tensor of them.",
                       reference=_game, cases=_game_cases),
    PredictionExercise("adapt_adv.larger_gain", "+GDFL against +Adv: which addition alone reaches the higher unseen "
                       "Recall@1, or can this run not tell?",
                       "Read the 95% interval of the paired difference +GDFL minus +Adv, seed by seed: 'gdfl' only if "
                       "it lies above 0, 'adv' only if below, otherwise 'no clear effect' (the paper's conclusion II "
                       "says GDFL).",
                       options=("gdfl", "adv", "no clear effect")),
    FunctionExercise("adapt_adv_experiments.lambda_schedule", "lambda at every step, replayed from the losses (Eq. 22)",
                     "Walk through the steps an epoch at a time: every step of an epoch gets -tanh(level - l_thresh) "
                     "* lambda0, where level is ln(num_classes) for the first epoch and the mean loss of the "
                     "previous epoch after it. A last, partial epoch still gets the value set before it.",
                     reference=_lambda_schedule, cases=_schedule_cases, forbidden=(replay_lambda,)),
    NumberExercise("adapt_adv_experiments.lambda_lag", "the first epoch whose lambda is positive",
                   "lambda of epoch 1 is -tanh(ln 50 - 1.5) lambda0; lambda of epoch e > 1 reads the mean loss of epoch "
                   "e - 1. It is positive when that level is below l_thresh = 1.5: find the first epoch whose level is.",
                   expected=_first_positive_epoch, tol=0.4),
    PredictionExercise("adapt_adv_experiments.stopped_vs_gdfl",
                       "stopped at its chosen length, does Adapt-Adv differ from +GDFL in unseen Recall@1?",
                       "Read the 95% interval of the paired difference Adapt-Adv (stopped) minus +GDFL, seed by seed: "
                       "'adapt_adv' only if it lies above 0, 'gdfl' only if below, otherwise 'no clear effect'.",
                       options=("adapt_adv", "gdfl", "no clear effect")),
]
