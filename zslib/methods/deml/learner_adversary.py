"""DeML's adversary over the channel-attention sub-learners (Chen & Deng, CVPR 2019, Eq. 4, Fig. 3c),
and the hinge the authors' released code uses instead.

The adversary game (the paper)
------------------------------
At scale ``i`` the ``J`` sub-learners give embeddings ``z_j = CA_(i,j)[x]`` of the same image. An
adversary network ``F^i`` maps each of them, and Eq. 4 measures their discrepancy:

    L_adv = lambda0 * sum_{j, j'} || F(z_j) - F(z_j') ||_2^2,

``F`` minimizes it while the feature extractor (FNet, GNet, the CAMs, and with them the learners)
maximizes it. A gradient reversal layer (:mod:`zslib.engine.models.grl`) between the learners and ``F`` turns
the max-min game into one minimization of ``L_adv``: ``F`` receives the gradient of ``L_adv`` and the
learners its negative (DeML Sec. 3.2). We read ``sum_{j, j'}`` literally, over all ordered pairs
(each unordered pair counts twice, ``j = j'`` adds zero), and average over the images of the batch
(Eq. 4 is written for one image ``x_n``).

The network F
-------------
The text says only that F "is placed after the CA sub-learners" with the GRL in front (Fig. 3c); its
layers are not given, and the released code does not contain it. :class:`LearnerAdversary` is our
choice: one F per scale, shared by that scale's ``J`` learners, a two-layer perceptron
``d -> hidden -> d`` with a ReLU (``hidden = d`` by default). Note what Eq. 4 allows: F can drive the
discrepancy to zero by becoming a constant map, after which the learners receive no gradient from it;
watching the spread of F's outputs during training tells whether the game is still being played.

The hinge (the released code)
-----------------------------
The released Caffe code replaces the adversary by a direct constraint (its README: "Hinge_Loss-like
adversarial constraint instead of the original adversary network"). Our reading of its training
prototxt: for each unordered pair ``j < j'`` of learners at one scale, a Caffe ``ContrastiveLoss``
between the L2-normalized embeddings of the *same* image, with every pair labelled dissimilar and
margin 2, weight 0.2 per pair. That is, per pair, ``1 / (2 B) * sum_n max(0, m - ||z^_j,n - z^_j',n||)^2``
with ``z^`` unit vectors and ``m = 2``: since unit vectors are at most 2 apart, it is active until the
two learners' embeddings of an image are antipodal, and it pushes them apart. :func:`learner_hinge_loss`
implements exactly this sum over pairs (the 0.2 weight is the caller's). This is our reading of the
released code's idea, not an equation of the paper.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zslib.engine.checks import finite_number
from zslib.engine.models.grl import grad_reverse

__all__ = ["LearnerAdversary", "learner_discrepancy", "adversary_loss", "learner_hinge_loss"]


def _check_learners(z, name: str = "z") -> torch.Tensor:
    if isinstance(z, (list, tuple)):
        z = torch.stack(list(z))
    if not torch.is_tensor(z) or z.dim() != 3 or z.shape[0] < 1 or z.shape[1] < 1 or z.shape[2] < 1:
        raise ValueError(f"{name} must be the J learners' embeddings of the same images, shaped (J, B, d) "
                         f"(or a list of J (B, d) tensors), got {tuple(getattr(z, 'shape', ()))}")
    if not z.is_floating_point():
        raise TypeError(f"{name} must be floating point, got {z.dtype}")
    return z


class LearnerAdversary(nn.Module):
    """The adversary ``F^i`` of one scale (our architecture, see the module docstring): ``d -> hidden -> d``."""

    def __init__(self, dim: int, hidden: int | None = None):
        super().__init__()
        hidden = dim if hidden is None else hidden
        for name, value in (("dim", dim), ("hidden", hidden)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def learner_discrepancy(z) -> torch.Tensor:
    """``sum_{j, j'} ||z_j - z_j'||^2`` over all ordered pairs of learners, per image: ``(B,)``.

    ``z``: ``(J, B, d)`` (or a list of ``J`` tensors ``(B, d)``). Computed from the pairwise differences
    ``j < j'`` (doubled), not from the expanded square, so nothing cancels.
    """
    z = _check_learners(z)
    j = z.shape[0]
    if j < 2:
        return z.new_zeros(z.shape[1])
    a, b = torch.triu_indices(j, j, offset=1, device=z.device)
    return 2 * (z[a] - z[b]).pow(2).sum(-1).sum(0)


def adversary_loss(z, adversary: nn.Module, weight: float = 1.0, *, reverse: bool = True,
                   reversal: float = 1.0) -> torch.Tensor:
    """DeML Eq. 4 with the gradient reversal layer: ``weight * mean_n sum_{j,j'} ||F(z_j) - F(z_j')||^2``.

    ``z``: the ``J`` learners' embeddings of one scale, ``(J, B, d)``; ``adversary``: ``F`` for that
    scale; ``weight``: ``lambda0`` (1 in the paper). With ``reverse`` (default) the embeddings pass a
    gradient reversal layer of strength ``reversal`` before ``F``, so minimizing the returned loss
    trains ``F`` to shrink the discrepancy and everything before the layer to grow it. ``reverse=False``
    gives the plain loss (gradients of the same sign everywhere).
    """
    z = _check_learners(z)
    finite_number(weight, "weight (lambda0)", low=0)
    inputs = grad_reverse(z, reversal) if reverse else z
    return weight * learner_discrepancy(adversary(inputs)).mean()


def learner_hinge_loss(z, margin: float = 2.0) -> torch.Tensor:
    """The released code's replacement for the adversary (our reading; see the module docstring).

    ``sum_{j < j'} 1 / (2 B) * sum_n max(0, margin - ||z^_{j,n} - z^_{j',n}||)^2``, ``z^`` the
    L2-normalized embeddings, ``z``: ``(J, B, d)``. The released code weights each pair by 0.2.
    """
    z = _check_learners(z)
    finite_number(margin, "margin", low=0, low_open=True)
    j, b = z.shape[0], z.shape[1]
    if j < 2:
        return z.new_zeros(())
    unit = F.normalize(z, dim=-1)
    first, second = torch.triu_indices(j, j, offset=1, device=z.device)
    dist = (unit[first] - unit[second]).pow(2).sum(-1).clamp_min(1e-12).sqrt()  # (pairs, B)
    return (margin - dist).clamp_min(0).pow(2).sum() / (2 * b)
