"""ZSML's pair network: a relation function R and a similarity function S (Xu, Cao, Yang, Yang and
Deng, "Zero-shot Metric Learning", IJCAI 2019; ``xu2019zsml``).

ZSML does not embed single images. It scores a *pair* of fixed feature vectors ``(x_i, x_j)``::

    (r_1, ..., r_k) = R(x_i, x_j)          (Eq. 1: k width-2 convolution kernels, bias, ReLU)
    s_ij            = S(r_1, ..., r_k)     (Eq. 2: three fully connected layers, one output)

* :class:`RelationKernels` -- R of Eq. 1 (the paper's "multi-nonlinear relations", MR);
* :class:`LinearRelation` -- the "linear relation" (LR) of Table 9: ``x_i - x_j`` instead of R;
* :class:`SimilarityHead` -- S of Eq. 2;
* :class:`PairSimilarity` -- S after R: scores ``P`` pairs in one call, or every ordered pair of a
  mini-batch (:meth:`PairSimilarity.all_pairs`); :func:`pair_similarity` builds it.

**One trick makes batching cheap.** Before its ReLU a width-2 kernel is a sum of one term that reads
only ``x_i`` and one that reads only ``x_j``. Both relations here therefore split into per-vector
halves ``first(x)`` and ``second(x)``, computed once per vector, and a per-pair ``combine(u, v)``. A
mini-batch of ``n`` vectors costs ``n`` convolutions, not ``n^2``, and the ``(n^2, m, 2)`` stacked
pair matrices are never built; only the relation vectors that S needs are.

**R is not symmetric.** Column 1 of each kernel reads ``x_i`` and column 2 reads ``x_j``, so swapping
the pair swaps the columns: ``R(x_i, x_j) != R(x_j, x_i)`` unless the two columns are equal, and so
``s_ij != s_ji`` in general (the linear relation flips sign, with the same effect). The paper does not
mention this. Its pairs are drawn at random, so both orders occur in training, and nothing forces
agreement. We keep the network as printed and offer ``symmetric=True``, which scores both orders
and averages them. For a whole mini-batch this costs nothing extra: ``(S + S^T) / 2``.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ZSML_ARCHITECTURE",
    "RelationKernels",
    "LinearRelation",
    "SimilarityHead",
    "PairSimilarity",
    "pair_similarity",
]

#: ZSML Table 1 and Sec. 5.1. ``k`` kernels of height 8 and width 2, stride 10 along the feature axis
#: (on the paper's 2,608-dim features: 96 x 261 outputs and 96 * 261 * 16 = 400K multiply-adds, the
#: table's "400K"); then FC 1,000, ReLU, FC 1,000, FC 1.
ZSML_ARCHITECTURE = {"k": 96, "height": 8, "stride": 10, "hidden": (1000, 1000)}

_NORMS = (None, "lrn", "batch")


def _check_pair_input(x: torch.Tensor, dim: int, name: str) -> None:
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor of feature vectors, shape (n, {dim})")
    if x.dim() != 2 or x.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}) -- one feature vector per row -- "
                         f"got {tuple(x.shape)}")


class RelationKernels(nn.Module):
    """ZSML Eq. 1: the relation function R, ``k`` convolution kernels of width 2 plus bias and ReLU.

    The pair is stacked as an ``m x 2`` matrix ``[x_i, x_j]``. Kernel ``c`` (``height x 2`` weights
    ``W_c``, bias ``b_c``) slides down the feature axis with step ``stride``. At output position
    ``p`` (rows ``p*stride .. p*stride + height - 1``)::

        r_c[p] = ReLU( sum_h W_c[h, 0] x_i[p*stride + h] + W_c[h, 1] x_j[p*stride + h] + b_c )

    giving ``k`` relation vectors of length ``L = (m - height) // stride + 1``. They are flattened
    kernel-major to ``k * L`` numbers, the order Caffe's fully connected layer reads them in.

    **Reading of the paper.** Sec. 3.2 and Fig. 2 say only "width 2, sliding vertically". Table 1
    gives "Conv 2 x 8 / 10" with output ``96 x 261`` for ``m = 2608``. We read this as a kernel 8 tall
    and 2 wide with stride 10, because it matches the table twice. First, ``(2608 - 8) // 10 + 1 =
    261``. Second, ``96 * 261 * 16 = 400,896`` multiply-adds, the table's "400K". A height-2 kernel also
    gives 261 outputs but only 100K multiply-adds. So 2 of every 10 feature dimensions are never read.
    Table 1 also puts a "Norm" between the convolution and the ReLU, which Eq. 1's text ("a Conv and a
    ReLU") leaves out. ``norm=None`` (the default) follows Eq. 1. ``norm="lrn"`` reads the table's Norm
    as Caffe's local response normalization across kernels (AlexNet's constants: size 5, alpha 1e-4,
    beta 0.75). ``norm="batch"`` uses batch normalization instead.

    Per-vector halves: ``first(x) = W[:, 0] * x`` and ``second(x) = W[:, 1] * x`` (1-D convolutions,
    shape ``(n, k, L)``), and ``combine(u, v) = ReLU(norm(u + v + b))`` -- see the module docstring.
    """

    def __init__(self, dim: int, k: int = 96, height: int = 8, stride: int = 10, norm: str | None = None):
        super().__init__()
        for name, v in (("dim", dim), ("k", k), ("height", height), ("stride", stride)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if height > dim:
            raise ValueError(f"kernel height {height} exceeds the feature dimension {dim}; use height <= dim")
        if norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        self.dim, self.k, self.height, self.stride, self.norm_kind = dim, k, height, stride, norm
        self.length = (dim - height) // stride + 1
        # The paper's layer, literally: one input channel, an (m x 2) "image" per pair.
        self.conv = nn.Conv2d(1, k, kernel_size=(height, 2), stride=(stride, 1))
        if norm == "lrn":
            self.norm = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)
        elif norm == "batch":
            self.norm = nn.BatchNorm1d(k)
        else:
            self.norm = nn.Identity()

    @property
    def out_features(self) -> int:
        """Length of the flattened relation, ``k * L``."""
        return self.k * self.length

    def _half(self, x: torch.Tensor, column: int) -> torch.Tensor:
        _check_pair_input(x, self.dim, "x")
        w = self.conv.weight[:, :, :, column]  # (k, 1, height)
        return F.conv1d(x.unsqueeze(1), w, stride=self.stride)  # (n, k, L)

    def first(self, x: torch.Tensor) -> torch.Tensor:
        """The kernels' first column applied to ``x`` (the pair's first vector), ``(n, k, L)``."""
        return self._half(x, 0)

    def second(self, x: torch.Tensor) -> torch.Tensor:
        """The kernels' second column applied to ``x`` (the pair's second vector), ``(n, k, L)``."""
        return self._half(x, 1)

    def combine(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``ReLU(norm(u + v + b))`` flattened to ``(P, k * L)``; ``u``, ``v`` are ``(P, k, L)``."""
        z = u + v
        if torch.is_grad_enabled() or self.norm_kind is not None:
            return F.relu(self.norm(z + self.conv.bias[:, None])).flatten(1)
        return z.add_(self.conv.bias[:, None]).relu_().flatten(1)  # inference: no further temporaries

    def forward(self, xi: torch.Tensor, xj: torch.Tensor) -> torch.Tensor:
        """Relations of the pairs ``(xi[p], xj[p])``, ``(P, k * L)``."""
        return self.combine(self.first(xi), self.second(xj))

    def stacked(self, xi: torch.Tensor, xj: torch.Tensor) -> torch.Tensor:
        """The same relations computed literally: the 2-D convolution over the stacked ``(P, 1, m, 2)``
        pair matrices (the oracle for :meth:`forward`; slower, more memory)."""
        _check_pair_input(xi, self.dim, "xi")
        _check_pair_input(xj, self.dim, "xj")
        z = self.conv(torch.stack([xi, xj], dim=2).unsqueeze(1))  # (P, k, L, 1)
        return F.relu(self.norm(z.squeeze(3))).flatten(1)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, k={self.k}, height={self.height}, stride={self.stride}, length={self.length}"


class LinearRelation(nn.Module):
    """ZSML Table 9's "linear relation" (LR): the difference ``x_i - x_j`` takes the place of R.

    Sec. 5.3: "we first minus two feature vectors of two data points, and employ S to project into
    similarity space." There are no parameters and no ReLU. The halves are ``first(x) = x`` and
    ``second(x) = -x``, and ``combine`` adds them. Like R, it is not symmetric: swapping the pair
    flips the sign of the input to S.
    """

    def __init__(self, dim: int):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = dim

    @property
    def out_features(self) -> int:
        return self.dim

    def first(self, x: torch.Tensor) -> torch.Tensor:
        _check_pair_input(x, self.dim, "x")
        return x

    def second(self, x: torch.Tensor) -> torch.Tensor:
        _check_pair_input(x, self.dim, "x")
        return -x

    def combine(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return u + v

    def forward(self, xi: torch.Tensor, xj: torch.Tensor) -> torch.Tensor:
        return self.combine(self.first(xi), self.second(xj))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class SimilarityHead(nn.Module):
    """ZSML Eq. 2: the similarity function S, fully connected layers ending in one output.

    Sec. 3.2 says S has three fully connected layers and the last has one neuron. Table 1 gives the
    sizes 1,000, 1,000 and 1 (``hidden=(1000, 1000)``). Table 1 shows a ReLU only after the first
    layer. Without one after the second, the second and third layers multiply into a single linear
    map, so the second layer would add parameters but no expressive power. We read that as an
    omission in the table and put a ReLU after every hidden layer. The output is a raw number: there
    is no sigmoid. The squared-hinge terms of Eq. 7 (:mod:`zslib.methods.zsml.cross_update`) push it into
    ``(0, 1)``.
    """

    def __init__(self, in_features: int, hidden: Sequence[int] = (1000, 1000)):
        super().__init__()
        sizes = [in_features, *hidden]
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
            raise ValueError(f"in_features and hidden sizes must be positive integers, got {sizes}")
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU(inplace=True)]
        layers.append(nn.Linear(sizes[-1], 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """``(P, in_features)`` relations to ``(P,)`` similarities."""
        return self.layers(r).squeeze(1)


class PairSimilarity(nn.Module):
    """ZSML's whole network, ``s_ij = S(R(x_i, x_j))`` (Eq. 1-2), batched over pairs.

    ``relation`` is any module with ``first``, ``second``, ``combine`` and ``out_features``
    (:class:`RelationKernels` or :class:`LinearRelation`). Three ways to call it:

    * ``net(xa, xb)``: ``P`` explicit pairs ``(xa[p], xb[p])`` to ``(P,)`` scores. This is also the
      *pair scorer* that :mod:`zslib.methods.zsml.pairwise` expects.
    * ``net.indexed(x, first, second)``: the pairs ``(x[first[p]], x[second[p]])`` of one mini-batch.
      The halves are computed once per vector.
    * ``net.all_pairs(x)``: the ``(n, n)`` matrix of every ordered pair, ``[i, j] = s(x_i, x_j)``.

    ``symmetric=True`` averages both orders of each pair (see the module docstring).
    """

    def __init__(self, relation: nn.Module, hidden: Sequence[int] = (1000, 1000)):
        super().__init__()
        self.relation = relation
        self.head = SimilarityHead(relation.out_features, hidden)

    @property
    def dim(self) -> int:
        return self.relation.dim

    def _score(self, ua, va, ub, vb, ia, ib, symmetric: bool) -> torch.Tensor:
        s = self.head(self.relation.combine(ua[ia], vb[ib]))
        if symmetric:
            s = 0.5 * (s + self.head(self.relation.combine(ub[ib], va[ia])))
        return s

    def forward(self, xa: torch.Tensor, xb: torch.Tensor, symmetric: bool = False) -> torch.Tensor:
        if xa.shape != xb.shape:
            raise ValueError(f"xa and xb must hold the same number of pairs, got shapes {tuple(xa.shape)} "
                             f"and {tuple(xb.shape)}")
        r = self.relation
        s = self.head(r.combine(r.first(xa), r.second(xb)))
        if symmetric:
            s = 0.5 * (s + self.head(r.combine(r.first(xb), r.second(xa))))
        return s

    def indexed(self, x: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
                symmetric: bool = False) -> torch.Tensor:
        """Scores of the pairs ``(x[first[p]], x[second[p]])``, ``(P,)``."""
        first, second = torch.as_tensor(first, device=x.device), torch.as_tensor(second, device=x.device)
        if first.shape != second.shape or first.dim() != 1:
            raise ValueError("first and second must be 1-D index tensors of the same length (one entry per pair)")
        r = self.relation
        u, v = r.first(x), r.second(x)
        return self._score(u, v, u, v, first, second, symmetric)

    def halves(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The relation's per-vector halves ``(first(x), second(x))``: what a vector contributes as the first or as
        the second member of a pair. :func:`zslib.methods.zsml.pairwise.score_matrix` computes them once per vector."""
        return self.relation.first(x), self.relation.second(x)

    def from_halves(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Scores ``(P,)`` of the pairs whose first members have halves ``u`` and second members ``v`` (rows of
        :meth:`halves`' first and second outputs)."""
        return self.head(self.relation.combine(u, v))

    def all_pairs(self, x: torch.Tensor, symmetric: bool = False) -> torch.Tensor:
        """The ``(n, n)`` similarity matrix of every ordered pair of the rows of ``x`` (diagonal
        included). It keeps ``n^2`` relation vectors, which training needs for backpropagation anyway;
        for evaluation on many vectors use :func:`zslib.methods.zsml.pairwise.score_matrix`, which works in chunks."""
        n = x.shape[0]
        i = torch.arange(n, device=x.device)
        s = self.indexed(x, i.repeat_interleave(n), i.repeat(n)).reshape(n, n)
        return 0.5 * (s + s.T) if symmetric else s


def pair_similarity(dim: int, relation: str = "kernels", *, k: int = ZSML_ARCHITECTURE["k"],
                    height: int = ZSML_ARCHITECTURE["height"], stride: int = ZSML_ARCHITECTURE["stride"],
                    norm: str | None = None, hidden: Sequence[int] = ZSML_ARCHITECTURE["hidden"]
                    ) -> PairSimilarity:
    """ZSML's network for ``dim``-dimensional features with the paper's sizes (Table 1) by default.

    ``relation="kernels"``: R of Eq. 1 (MR); ``relation="linear"``: Table 9's LR (``x_i - x_j``).
    """
    if relation == "kernels":
        rel: nn.Module = RelationKernels(dim, k=k, height=height, stride=stride, norm=norm)
    elif relation == "linear":
        rel = LinearRelation(dim)
    else:
        raise ValueError(f"relation must be 'kernels' (ZSML Eq. 1) or 'linear' (Table 9's LR), got {relation!r}")
    return PairSimilarity(rel, hidden)
