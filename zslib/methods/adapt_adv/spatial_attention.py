r"""Attention over the spatial positions of one feature map: Adapt-Adv's general discriminative features.

Adapt-Adv (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022, ``alkaabi2022adaptadv``,
Sec. 3.1) argues that intermediate maps of a CNN cover more of the image and generalize better to
unseen classes than the last pooled feature ``u``, but discriminate less. It keeps them and lets ``u``
decide, position by position, how much each part of an intermediate map counts: every *pixel*
:math:`q_j \in \mathbb{R}^{c}` of the map (:math:`j = 1..HV`) gets a score :math:`S(q_j, u)`, the scores
go through a softmax over the positions, and the output is the weighted mean of the pixels. Attention
here is therefore a *learned weighted average pooling* whose weights depend on the image (through ``u``).

:class:`SpatialAttention` implements the paper's three scores, all with ``W1`` of shape ``(l, c)``
mapping a pixel into the space of ``u`` (``l = dim u``):

* ``"multiplicative"`` (Eq. 9):  :math:`S(q_j, u) = \langle W_1 q_j, u\rangle`;
* ``"additive"`` (Eq. 11):  :math:`S(q_j, u) = w^\top \sigma(W_1 q_j + u)`, ``w`` in :math:`\mathbb{R}^l`;
* ``"multidimensional"`` (Eq. 12):  :math:`S(q_j, u) = W^\top \sigma(W_1 q_j + u) \in \mathbb{R}^{c}`,
  ``W`` of shape ``(l, c)``: one score per position *and* channel.

Normalization and pooling: the scalar scores go through a softmax over the ``HV`` positions (Eq. 13) and
the output is :math:`p = \sum_j \tilde a_j q_j` (Eq. 14). Multi-dimensional scores :math:`A_{jk}` get
one softmax over the positions per channel ``k`` (Eq. 15) and :math:`p_k = \sum_j \tilde A_{jk} q_{jk}`
(Eq. 16). In all three forms ``p`` has the map's ``c`` channels, and every channel of ``p`` is a convex
combination of that channel's values over the map.

Where the extracted text is garbled or silent, and what this module reads:

* Eq. 13's denominator came out as ":math:`\frac{H_i\times V_i}{\sum_{k=1}^{K}}`": it is the sum over
  the :math:`H_i V_i` positions, :math:`\sum_{k=1}^{H_i V_i} \exp S(q_k, u)`, i.e. a softmax over
  positions. Eq. 15 normalizes over the positions ``l = 1..H_i V_i`` for each channel ``k`` (not over
  channels), which is also what makes Eq. 16 a per-channel weighted mean.
* The text says :math:`p^{(i)} \in \mathbb{R}^l`, but Eqs. 14 and 16 are weighted means of the pixels
  :math:`q_j \in \mathbb{R}^{c_i}`, so :math:`p^{(i)} \in \mathbb{R}^{c_i}`; we follow the equations.
* The activation :math:`\sigma` of Eqs. 11-12 is not named; we use ``tanh`` (the usual additive
  attention of Bahdanau et al.) and accept ``"relu"`` and ``"elu"``.
* No biases appear in Eqs. 9, 11 and 12 and none are used. A bias added to a score would be the same
  for every position and cancel in the softmax (per channel in Eq. 15), so the only bias that could
  matter is one inside :math:`\sigma`, which the paper does not have (``u`` plays that role per image).
* The scores are not scaled (no :math:`1/\sqrt{l}` as in scaled dot-product attention): the paper has none.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ATTENTION_FORMS", "SpatialAttention"]

ATTENTION_FORMS = ("multiplicative", "additive", "multidimensional")
_ACTIVATIONS = {"tanh": torch.tanh, "relu": F.relu, "elu": F.elu}


class SpatialAttention(nn.Module):
    r"""Attention-weighted pooling of one map ``(B, c, H, V)`` guided by a vector ``u`` ``(B, l)``
    (Adapt-Adv Eqs. 9, 11 or 12 for the scores, Eqs. 13-14 or 15-16 for the normalization and pooling;
    see the module docstring for the readings taken).

    Args:
        in_channels: ``c``, the channels of the attended map.
        query_dim: ``l``, the width of ``u`` (the backbone's pooled last feature in Adapt-Adv).
        form: ``"multiplicative"`` (Eq. 9), ``"additive"`` (Eq. 11, the paper's choice, Sec. 4) or
            ``"multidimensional"`` (Eq. 12).
        activation: :math:`\sigma` of Eqs. 11-12: ``"tanh"`` (default), ``"relu"`` or ``"elu"``; unused
            by the multiplicative form.

    Parameters: ``project`` holds :math:`W_1` (``project.weight`` is ``(l, c)``); ``score`` holds
    ``w`` (additive, ``score.weight`` is ``(1, l)``) or :math:`W^\top` (multi-dimensional,
    ``score.weight`` is ``(c, l)``); the multiplicative form has no ``score``.

    ``forward(fmap, u)`` returns ``p`` ``(B, c)``; with ``return_weights=True`` also the normalized
    weights: ``(B, H, V)`` summing to one over the positions, or, multi-dimensional, ``(B, c, H, V)``
    summing to one over the positions for every channel.
    """

    def __init__(self, in_channels: int, query_dim: int, form: str = "additive", activation: str = "tanh"):
        super().__init__()
        if int(in_channels) <= 0 or int(query_dim) <= 0:
            raise ValueError(f"in_channels and query_dim must be positive, got {in_channels} and {query_dim}")
        if form not in ATTENTION_FORMS:
            raise ValueError(f"form must be one of {ATTENTION_FORMS}, got {form!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(_ACTIVATIONS)}, got {activation!r}")
        self.in_channels, self.query_dim = int(in_channels), int(query_dim)
        self.form, self.activation = form, activation
        self.project = nn.Linear(self.in_channels, self.query_dim, bias=False)  # W1 (Eqs. 9, 11, 12)
        if form == "additive":
            self.score = nn.Linear(self.query_dim, 1, bias=False)  # w (Eq. 11)
        elif form == "multidimensional":
            self.score = nn.Linear(self.query_dim, self.in_channels, bias=False)  # W^T (Eq. 12)

    def scores(self, fmap: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Unnormalized scores: ``(B, H*V)`` (Eqs. 9, 11) or ``(B, c, H*V)`` (Eq. 12)."""
        return self._score_pixels(self._pixels(fmap, u), u)

    def _score_pixels(self, q: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        if self.form == "multiplicative":
            # <W1 q_j, u> = q_j . (W1^T u): one (c,)-vector per image instead of an (l, n) product
            return torch.einsum("bcn,bc->bn", q, u @ self.project.weight)
        hidden = torch.einsum("lc,bcn->bln", self.project.weight, q) + u[:, :, None]
        hidden = _ACTIVATIONS[self.activation](hidden)  # sigma(W1 q_j + u), (B, l, n)
        out = torch.einsum("kl,bln->bkn", self.score.weight, hidden)  # (B, 1 or c, n)
        return out[:, 0] if self.form == "additive" else out

    def forward(self, fmap: torch.Tensor, u: torch.Tensor, return_weights: bool = False):
        q = self._pixels(fmap, u)
        weights = torch.softmax(self._score_pixels(q, u), dim=-1)  # over the positions (Eqs. 13, 15)
        if self.form == "multidimensional":
            p = (weights * q).sum(-1)  # Eq. 16
        else:
            p = torch.einsum("bn,bcn->bc", weights, q)  # Eq. 14
        if not return_weights:
            return p
        return p, weights.reshape(*weights.shape[:-1], *fmap.shape[-2:])

    def _pixels(self, fmap: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The map as ``(B, c, n)`` pixels after checking it against ``u`` (reshape: maps may be channels_last)."""
        if not torch.is_tensor(fmap) or fmap.dim() != 4 or fmap.shape[1] != self.in_channels:
            shape = tuple(fmap.shape) if torch.is_tensor(fmap) else type(fmap).__name__
            raise ValueError(f"fmap must be a (B, {self.in_channels}, H, V) feature map, got {shape}")
        if not torch.is_tensor(u) or u.dim() != 2 or u.shape != (fmap.shape[0], self.query_dim):
            shape = tuple(u.shape) if torch.is_tensor(u) else type(u).__name__
            raise ValueError(f"u must be ({fmap.shape[0]}, {self.query_dim}): one guiding vector per image of "
                             f"the map's batch, got {shape}")
        return fmap.flatten(2)

    def extra_repr(self) -> str:
        act = "" if self.form == "multiplicative" else f", activation={self.activation}"
        return f"in_channels={self.in_channels}, query_dim={self.query_dim}, form={self.form}{act}"
