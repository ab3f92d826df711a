"""DeML's channel-attention modules, CAM (Chen & Deng, CVPR 2019, Sec. 3.2, Fig. 3b).

One CAM reweights the channels of a convolutional map ``U`` (the output of FNet, ``C x h x w``):

    cap = CAM(U) = U [] sigmoid(W2 relu(W1 Psi(U))),   W1: 64 x C,  W2: C x 64,

with ``Psi`` spatial average pooling and ``[]`` channel-wise multiplication (a squeeze-and-excitation
block, Hu et al. 2018, used as an attribute selector). DeML runs ``J`` of them *in parallel* on the
same ``U``, one per channel-attention sub-learner; :class:`ChannelAttention` holds all ``J`` and
computes them in one batched pass (no loop over modules).

``spatial=True`` is the variant of the authors' released Caffe code: there the two layers are 1x1
convolutions applied at every position (no pooling), so every position gets its own channel weights.
The paper's equation pools; that is the default.

Initialization: the paper says only "random weights"; we draw ``W1, W2`` Xavier-uniform with zero
biases (as the released code's fillers), so the ``J`` modules differ from the first step.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["ChannelAttention"]


class ChannelAttention(nn.Module):
    """``J`` parallel channel-attention modules (DeML Sec. 3.2, the CAM equation; Fig. 3b).

    ``forward(u)`` takes ``u`` of shape ``(B, C, h, w)`` and returns the ``J`` channel-attention
    proposals ``(J, B, C, h, w)``; :meth:`channel_weights` returns the weights in (0, 1), ``(J, B, C)``
    (``(J, B, C, h, w)`` with ``spatial=True``).
    """

    def __init__(self, channels: int, num_modules: int = 1, hidden: int = 64, spatial: bool = False):
        super().__init__()
        for name, value in (("channels", channels), ("num_modules", num_modules), ("hidden", hidden)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        self.channels, self.num_modules, self.hidden, self.spatial = channels, num_modules, hidden, bool(spatial)
        self.w1 = nn.Parameter(torch.empty(num_modules, hidden, channels))
        self.b1 = nn.Parameter(torch.zeros(num_modules, hidden))
        self.w2 = nn.Parameter(torch.empty(num_modules, channels, hidden))
        self.b2 = nn.Parameter(torch.zeros(num_modules, channels))
        for j in range(num_modules):
            nn.init.xavier_uniform_(self.w1.data[j])
            nn.init.xavier_uniform_(self.w2.data[j])

    def _check(self, u: torch.Tensor) -> None:
        if not torch.is_tensor(u) or u.dim() != 4 or u.shape[1] != self.channels:
            raise ValueError(f"ChannelAttention was built for {self.channels} channels and expects maps "
                             f"(B, {self.channels}, h, w), got {tuple(getattr(u, 'shape', ()))}")

    def channel_weights(self, u: torch.Tensor) -> torch.Tensor:
        """``sigmoid(W2 relu(W1 Psi(u)))`` for every module: ``(J, B, C)`` (or per position)."""
        self._check(u)
        if not self.spatial:
            z = u.mean(dim=(2, 3))  # (B, C): Psi, spatial average pooling
            a = torch.relu(torch.einsum("jkc,bc->jbk", self.w1, z) + self.b1[:, None, :])
            return torch.sigmoid(torch.einsum("jck,jbk->jbc", self.w2, a) + self.b2[:, None, :])
        a = torch.relu(torch.einsum("jkc,bchw->jbkhw", self.w1, u) + self.b1[:, None, :, None, None])
        return torch.sigmoid(torch.einsum("jck,jbkhw->jbchw", self.w2, a) + self.b2[:, None, :, None, None])

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        weights = self.channel_weights(u)
        if not self.spatial:
            weights = weights[..., None, None]
        return u[None] * weights

    def extra_repr(self) -> str:
        return f"channels={self.channels}, num_modules={self.num_modules}, hidden={self.hidden}, spatial={self.spatial}"
