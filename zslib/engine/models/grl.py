"""The gradient reversal layer (Ganin and Lempitsky, ICML 2015), as DeML uses it for its adversary.

DeML's Eq. 4 is a min-max game: the adversary F minimizes the discrepancy between the J sub-learners,
while the feature extractor (FNet, GNet and the channel-attention modules) maximizes it. Placing a
gradient reversal layer between the two turns the game into one minimization: in the forward pass the
layer is the identity, in the backward pass it multiplies the gradient by ``-lambda``. Minimizing the
adversary's loss then moves F down the loss and everything before the layer *up* it, in one backward
pass with one optimizer (DeML Sec. 3.2, Fig. 3c).
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["GradientReversal", "grad_reverse"]


class _Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.lam * grad, None


def grad_reverse(x: torch.Tensor, lam: float = 1.0) -> torch.Tensor:
    """Identity in the forward pass; the gradient times ``-lam`` in the backward pass."""
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0 (the strength of the reversal), got {lam!r}")
    return _Reverse.apply(x, float(lam))


class GradientReversal(nn.Module):
    """Module form of :func:`grad_reverse`, for use inside ``nn.Sequential``."""

    def __init__(self, lam: float = 1.0):
        super().__init__()
        grad_reverse(torch.zeros(()), lam)  # validates lam
        self.lam = float(lam)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return grad_reverse(x, self.lam)

    def extra_repr(self) -> str:
        return f"lam={self.lam}"
