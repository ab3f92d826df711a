"""The Adapt-Adv chapter's checked exercises. ``book/adapt_adv.ipynb``: additive attention pooling (Eqs. 11,
13, 14) written by hand, Eq. 22 inverted by hand, and which of the two additions gained more on this run.
``book/adapt_adv_experiments.ipynb``: the per-epoch schedule of lambda (Eq. 22) replayed by hand, the loss on
which Adapt-Adv gained most (Table 5 analogue), and whether Adapt-Adv stopped at its chosen length beats +GDFL.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math

import torch
from torch.func import functional_call

from zslib.methods.adapt_adv.class_adversary import replay_lambda
from zslib.methods.adapt_adv.spatial_attention import SpatialAttention
from zslib.teaching.exercises.kinds import Case, ChoiceExercise, FunctionExercise, NumberExercise


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


def _gdfl_or_adv(gdfl, adv) -> str:
    return "gdfl" if float(gdfl) > float(adv) else "adv"


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


def _largest(table) -> str:
    return max(table, key=lambda k: float(table[k])).lower()


def _stopped_or_gdfl(gdfl, adapt_adv) -> str:
    return "adapt_adv" if float(adapt_adv) > float(gdfl) else "gdfl"


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
    ChoiceExercise("adapt_adv.larger_gain", "which addition alone reaches the higher mean unseen Recall@1, gdfl or adv?",
                   "Compare the mean unseen Recall@1 of the +GDFL and +Adv rows of the ablation table (the paper's "
                   "conclusion II says GDFL; the paired interval printed under the table says whether this run "
                   "can tell them apart).",
                   options=("gdfl", "adv"), context=("gdfl", "adv"), decide=_gdfl_or_adv),
    FunctionExercise("adapt_adv_experiments.lambda_schedule", "lambda at every step, replayed from the losses (Eq. 22)",
                     "Walk through the steps an epoch at a time: every step of an epoch gets -tanh(level - l_thresh) "
                     "* lambda0, where level is ln(num_classes) for the first epoch and the mean loss of the "
                     "previous epoch after it. A last, partial epoch still gets the value set before it.",
                     reference=_lambda_schedule, cases=_schedule_cases, forbidden=(replay_lambda,)),
    ChoiceExercise("adapt_adv_experiments.largest_gain", "on which loss does Adapt-Adv gain most against its own base?",
                   "Read the column 'vs base (pts)' of the three Adapt-Adv rows of the Table 5 analogue: the mean "
                   "paired difference against the same loss's base.",
                   options=(),  # the losses of the table
                   context=("table",), decide=_largest),
    ChoiceExercise("adapt_adv_experiments.stopped_vs_gdfl",
                   "stopped at its chosen length, does Adapt-Adv reach a higher unseen Recall@1 than +GDFL?",
                   "Compare the mean unseen Recall@1 of Adapt-Adv stopped at the length chosen on validation "
                   "classes with that of +GDFL (the attention alone, 200 steps); the paired interval in the "
                   "sentences under the stopping figure says whether the difference is clear.",
                   options=("adapt_adv", "gdfl"), context=("gdfl", "adapt_adv"), decide=_stopped_or_gdfl),
]
