r"""Joint representation diversification: the regularizers of JRD (Chu, Lin, Wang, Wang, Yu, Gao and
Tong, "Distance Metric Learning with Joint Representation Diversification", ICML 2020; ``chu2020jrd``).

JRD adds to AM-Softmax a penalty on how *similar* the distributions of two different classes are, in
several layers of the network at once. A class ``I`` in a mini-batch is a sample of the joint
distribution :math:`P_I` of its representations :math:`(x'_i, x_i, x^+_i)` -- pooled backbone feature,
L2-normalized embedding, and cosines to the class proxies. Each layer ``l`` has a kernel ``k_l``;
the *kernel mean embedding* of :math:`P_I` in the tensor product of the layers' RKHSs is estimated by
:math:`\hat C(P_I) = \frac1{n_I}\sum_{i\in I} \otimes_l k_l(\cdot, x^l_i)` (JRD Eq. 7), and the
reproducing property turns the inner product of two of them into kernel evaluations (Eq. 8):

.. math::

    \hat S_{JRS}(P_I, P_J) = \langle \hat C(P_I), \hat C(P_J)\rangle
      = \frac{1}{n_I n_J}\sum_{i\in I}\sum_{j\in J}\prod_{l=1}^{L} k_l(x^l_i, x^l_j).

Everything here is computed for all classes of the batch at once: one ``(M, M)`` kernel matrix per
layer, their elementwise product (the joint kernel), and the class-by-class block sums by one-hot
matrix algebra, :math:`Y^\top K Y`. :func:`kernel_mean_embeddings` returns those inner products;
the regularizers are weighted means of them.

What the paper leaves open, and what we take
--------------------------------------------
The text of the paper available to us lost most mathematical symbols. Equations 10-11, 15-16 and the
kernel formula of Sec. 5.1 are reconstructed from the surviving words and from the authors' released
code (github.com/YangLin122/JRD, files ``loss.py`` and ``args.py``, CUB only), whose *facts* we use:

* **Kernels** (Sec. 5.1 "Kernel design"): a mixture of Gaussians
  :math:`k(x, x') = \frac1K\sum_{k=1}^K \exp(-\|x-x'\|^2/\sigma_k^2)` with
  :math:`\sigma_k^2 \in \{\tau/2, \tau, 2\tau\}` for the pooling and embedding layers and
  :math:`\sigma^2 = \tau` for the class level. The mixture weights are ``1/K`` (the released code
  averages the K Gaussians), so every layer kernel is at most 1 and equals 1 on the diagonal.
* **Bandwidth** :math:`\tau`: the mean squared distance over the ``M(M-1)`` off-diagonal pairs of the
  batch, per layer, taken *without gradient* (the code reads ``.data``). See :func:`bandwidth`.
* **Joint kernel** (Eq. 8): the product over layers of the per-layer kernel values.
* **Regularizer** (Eqs. 10-11): Eq. 10 weights the similarity of classes ``I != J`` by
  :math:`n_I n_J`, which turns :math:`\sum_{I\ne J} n_I n_J \hat S(P_I,P_J)` into the plain sum of the
  joint kernel over all sample pairs of different classes; Eq. 11 divides it by
  :math:`N_{pairs}`, the number of such sample pairs. The term is therefore the *mean joint kernel
  value over different-class pairs of the batch*, exactly what the released code computes. (Ordered
  or unordered pairs give the same mean.)
* **AM-Softmax** with ``s = 20``, ``m = 0.1``; Adam at ``1e-4`` for the network and ``1e-2`` for the
  class proxies (Sec. 5.1 and the code); see :data:`JRD_SETTINGS`.

Class-level gradient: the class-level representation depends on the proxies, and the released code
lets the regularizer's gradient reach them; :func:`class_level_representation` does not detach.
Kernels are computed with autocast switched off (in float32 or float64), also inside a mixed-precision
training step: squared distances from 16-bit Gram matrices would lose most of their digits.

The guard for :math:`\tau = 0`
------------------------------
If every sample of the batch has the same representation (a collapsed layer), the mean squared
distance is 0 and :math:`\exp(-d^2/\tau)` is 0/0. :func:`bandwidth` floors :math:`\tau` at the
machine epsilon of the dtype (``1.2e-7`` in float32). Distances are computed from features centred on
the batch mean, so identical samples have a squared distance of exactly 0: their kernel value is
exactly 1 and their gradient exactly 0, never NaN. The floor only acts when the layer has collapsed
to within :math:`\sqrt{\epsilon}` of one point, where no bandwidth is meaningful.

How CML's energy confusion is a linear-kernel case
--------------------------------------------------
JRD (Sec. 6) calls the energy confusion of Chen and Deng (CML's Eq. 3,
:func:`zslib.methods.cml.confusion.energy_confusion`) "a particular case of JRS regularizer when only
considering the DML representation with a degree-1 homogeneous polynomial kernel". Exactly: with any
kernel and :math:`\phi` its feature map, the expected squared RKHS distance between a random member of
``I`` and one of ``J`` is

.. math::

    \mathbb E\|\phi(X_I) - \phi(X_J)\|^2 = m_I + m_J - 2\langle \hat\mu_I, \hat\mu_J\rangle,
    \qquad m_I = \frac1{n_I}\sum_{i\in I} k(x_i, x_i),

(:func:`kernel_energy_confusion`). With :math:`k(x, x') = x^\top x'` this *is* CML's EC,
:math:`m_I = \frac1{n_I}\sum_i\|x_i\|^2`, and :math:`\langle\hat\mu_I,\hat\mu_J\rangle` is the
linear-kernel JRS. So EC and JRS differ by the per-class second moments and by a factor ``-2``;
on L2-normalized embeddings :math:`m_I = 1` and :math:`EC(I, J) = 2 - 2\,S^{lin}_{JRS}(I, J)` exactly.
The two papers push in *opposite* directions: CML minimizes EC (it pulls classes together, a
confusion), JRD minimizes JRS (it pushes their mean embeddings apart). For the normalized Gaussian
mixtures of JRD :math:`k(x, x) = 1` in every layer, hence also for their product, so the same
identity reads :math:`\mathbb E\|\phi(X_I)-\phi(X_J)\|^2 = 2 - 2\,\hat S_{JRS}(P_I, P_J)`:
minimizing JRS *is* maximizing the energy distance between classes in the joint RKHS.
Batch averages differ in one detail: ``energy_confusion(pairs="all")`` weights every class pair
equally, Eq. 11 weights pair ``(I, J)`` by :math:`n_I n_J`; for P x K batches the two coincide.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

from zslib.engine import checks

__all__ = [
    "GAUSSIAN_SCALES",
    "CLASS_LEVEL_SCALES",
    "PAPER_MIXTURE",
    "mixture_scales",
    "JRD_SETTINGS",
    "VARIANTS",
    "KERNELS",
    "REGULARIZERS",
    "bandwidth",
    "gaussian_kernel",
    "laplace_kernel",
    "polynomial_kernel",
    "linear_kernel",
    "exponential_kernel",
    "joint_kernel",
    "KernelMeans",
    "kernel_mean_embeddings",
    "jrs_regularizer",
    "jmmd_regularizer",
    "jintra_regularizer",
    "kernel_energy_confusion",
    "class_level_representation",
    "Representations",
    "jrd_representations",
]

#: Bandwidth multipliers of tau for the pooling and embedding layers (JRD Sec. 5.1: K = 3).
GAUSSIAN_SCALES: tuple[float, ...] = (0.5, 1.0, 2.0)
#: Bandwidth multiplier of tau for the class-level layer (JRD Sec. 5.1: K = 1, sigma^2 = tau).
CLASS_LEVEL_SCALES: tuple[float, ...] = (1.0,)
#: The mixture sizes ``(K, K')`` of the pooling and embedding layers that JRD fixes (Sec. 5.1: K = 3 for both).
PAPER_MIXTURE: tuple[int, int] = (3, 3)


def mixture_scales(k: int, ratio: float = 2.0) -> tuple[float, ...]:
    r"""The bandwidth multipliers of a mixture of ``k`` Gaussians: :math:`\text{ratio}^{\,i - \lfloor k/2\rfloor}`,
    :math:`i = 0, \dots, k-1`, so that :math:`\sigma^2_i = \tau\,2^{\,i - \lfloor k/2\rfloor}`.

    JRD's Fig. 6 varies the number of Gaussians ``(K, K')`` of the pooling and embedding layers
    (``chu2020jrd``, Sec. 5.3, "On kernel design") but gives bandwidths only for ``K = 3``
    (:math:`\{\tau/2, \tau, 2\tau\}`, Sec. 5.1). The rule here is the released code's
    (``guassian_kernel`` in ``loss.py``: the bandwidth divided by ``kernel_mul ** (kernel_num // 2)``, then
    multiplied by ``kernel_mul ** i``, with ``kernel_mul = 2``), which gives exactly that set for ``k = 3``:
    ``(1,)`` for 1, ``(0.5, 1)`` for 2, ``(0.5, 1, 2)`` (= :data:`GAUSSIAN_SCALES`) for 3, ``(0.25, ..., 4)``
    for 5. Each multiplier is a power of two, exact in floating point.
    """
    k = int(checks.finite_number(k, "the number of Gaussians of a mixture", low=1, integer=True))
    ratio = checks.finite_number(ratio, "ratio", low=0.0, low_open=True)
    return tuple(float(ratio ** (i - k // 2)) for i in range(k))


#: The paper's training setting (JRD Sec. 5.1, CUB column; the released code's defaults where the
#: paper is silent: Adam ``eps`` and weight decay, and batches drawn uniformly at random, not P x K).
JRD_SETTINGS: dict = {
    "alpha": 1.0,  # 1 for CUB and Cars, 0.4 for SOP (Sec. 5.1)
    "am_softmax_scale": 20.0,
    "am_softmax_margin": 0.1,  # 0.05 for Cars
    "lr": 1e-4,  # network (backbone and embedding layer)
    "proxy_lr": 1e-2,  # AM-Softmax class proxies (1e-1 for SOP)
    "adam_eps": 1e-2,  # released code
    "weight_decay": 1e-4,  # released code
    "epochs": 50,  # learning rates divided by 10 every 20 epochs
    "batch_size": 100,  # 50 for Cars, 120 for SOP; the released code shuffles images, no class balancing
    "embedding_dim": 512,
    "backbone": "bninception",  # ImageNet-pretrained, BatchNorm frozen
}

_COMBINE = ("product", "sum")
Kernel = Callable[[torch.Tensor], torch.Tensor]


# ----------------------------------------------------------------------------------------------------
# Distances, bandwidth and kernels


def _full_precision(fn):
    """Run ``fn`` with autocast off: under mixed precision the Gram matrices behind the distances would be
    computed in 16 bits, and ``|a|^2 + |b|^2 - 2 a.b`` loses most of its digits there."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.autocast("cpu", enabled=False), torch.autocast("cuda", enabled=False):
            return fn(*args, **kwargs)
    return wrapper


def _squared_distances(x: torch.Tensor) -> torch.Tensor:
    """All pairwise squared Euclidean distances, with an exact zero diagonal and no negative values.

    The features are centred first (distances do not change; cancellation shrinks) and the squared
    norms are read off the Gram matrix's diagonal, so two identical rows give exactly 0.
    """
    x = x - x.mean(0, keepdim=True)
    gram = x @ x.T
    sq = torch.diagonal(gram)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * gram).clamp_min(0.0)
    eye = torch.eye(x.shape[0], dtype=torch.bool, device=x.device)
    return d2.masked_fill(eye, 0.0)


def _off_diagonal_mean(dist: torch.Tensor, floor: float | None) -> torch.Tensor:
    """Mean of a distance matrix over its off-diagonal entries, without gradient, floored."""
    m = dist.shape[0]
    if m < 2:
        raise ValueError("a self-adaptive bandwidth needs at least two samples in the batch; pass tau explicitly")
    with torch.no_grad():
        mean = dist.detach().sum() / (m * (m - 1))
        low = torch.finfo(dist.dtype).eps if floor is None else checks.finite_number(floor, "min_tau", low=0.0, low_open=True)
        return mean.clamp_min(low)


def _scales(scales) -> tuple[float, ...]:
    scales = tuple(scales)
    if not scales:
        raise ValueError("scales must list at least one bandwidth multiplier, e.g. (0.5, 1.0, 2.0)")
    return tuple(checks.finite_number(s, "each bandwidth scale", low=0.0, low_open=True) for s in scales)


@_full_precision
def bandwidth(x: torch.Tensor, min_tau: float | None = None) -> torch.Tensor:
    r"""The self-adaptive bandwidth :math:`\tau` of JRD Sec. 5.1, without gradient.

    .. math:: \tau = \frac{1}{M(M-1)}\sum_{i\ne j}\|x_i - x_j\|_2^2 ,

    the mean squared distance between two different samples of the batch (the paper: "computed by
    averages of l2-distances in the exponent part"; the released code divides the sum of the squared
    distance matrix by ``M^2 - M``). It is a constant for autograd: the returned tensor has no graph,
    so no gradient flows through :math:`\tau`. It is floored at ``min_tau`` (default: the machine
    epsilon of ``x``'s dtype) so that a batch of identical samples gives a finite kernel (see the module
    docstring). ``x`` is ``(M, d)`` with ``M >= 2``.

    Two consequences. A Gaussian kernel at this bandwidth is invariant to rescaling the layer: only the
    *relative* arrangement of the samples counts, so far-apart classes do not drive JRS to 0. And since
    the gradient ignores that :math:`\tau` grows with the distances, it always has an outward radial
    part (:math:`\langle\nabla_x, x\rangle < 0`): on a layer that is not normalized (the pooling
    features), descending it inflates the features' scale without lowering the value.
    """
    x = checks.features(x, "x", min_rows=2)
    with torch.no_grad():
        return _off_diagonal_mean(_squared_distances(x), min_tau)


@_full_precision
def gaussian_kernel(x: torch.Tensor, scales: Sequence[float] = GAUSSIAN_SCALES,
                    tau: float | torch.Tensor | None = None) -> torch.Tensor:
    r"""Kernel matrix of a mixture of Gaussians on the rows of ``x`` (JRD Sec. 5.1, Table 4 row 1).

    .. math:: K_{ij} = \frac{1}{K}\sum_{k=1}^{K}\exp\!\Big(-\frac{\|x_i - x_j\|_2^2}{s_k\,\tau}\Big)

    with ``scales`` :math:`s_k` (``(0.5, 1, 2)`` for the pooling and embedding layers, ``(1,)`` for the
    class level) and :math:`\tau` = :func:`bandwidth` of ``x`` unless given. Returns ``(M, M)``;
    the diagonal is exactly 1. Pass a fixed ``tau`` (e.g. for ``gradcheck``, which would otherwise
    see :math:`\tau` move with its finite differences although autograd treats it as a constant).
    """
    x = checks.features(x, "x")
    d2 = _squared_distances(x)
    if tau is None:
        tau = _off_diagonal_mean(d2, None)
    else:
        tau = torch.as_tensor(tau, dtype=x.dtype, device=x.device).detach()
        if tau.numel() != 1 or not bool(tau > 0) or not bool(torch.isfinite(tau)):
            raise ValueError(f"tau must be one positive finite number, got {tau}")
    return torch.stack([torch.exp(-d2 / (s * tau)) for s in _scales(scales)]).mean(0)


@_full_precision
def laplace_kernel(x: torch.Tensor, scales: Sequence[float] = (1.0,),
                   sigma: float | torch.Tensor | None = None) -> torch.Tensor:
    r"""Kernel matrix of a (mixture of) Laplace kernel(s) (JRD Table 4, row 2).

    .. math:: K_{ij} = \frac1K\sum_k \exp\!\Big(-\frac{\|x_i - x_j\|_1}{s_k\,\sigma}\Big)

    The paper does not say how it chose :math:`\sigma`; by analogy with the Gaussian we take the mean
    L1 distance between two different samples of the batch, without gradient, floored as in
    :func:`bandwidth`.
    """
    x = checks.features(x, "x")
    d1 = torch.cdist(x, x, p=1.0)
    if sigma is None:
        sigma = _off_diagonal_mean(d1, None)
    else:
        sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).detach()
        if sigma.numel() != 1 or not bool(sigma > 0) or not bool(torch.isfinite(sigma)):
            raise ValueError(f"sigma must be one positive finite number, got {sigma}")
    return torch.stack([torch.exp(-d1 / (s * sigma)) for s in _scales(scales)]).mean(0)


@_full_precision
def polynomial_kernel(x: torch.Tensor, degree: int = 2, offset: float = 1.0) -> torch.Tensor:
    r"""Polynomial kernel matrix :math:`K_{ij} = (x_i^\top x_j + c)^p` (JRD Table 4, rows 3-4: ``c = 1``,
    ``p = 2, 5``). ``degree=1, offset=0`` is the linear kernel of the energy-confusion identity."""
    x = checks.features(x, "x")
    p = checks.finite_number(degree, "degree", low=1, integer=True)
    c = checks.finite_number(offset, "offset")
    return (x @ x.T + c) ** p


def linear_kernel(x: torch.Tensor) -> torch.Tensor:
    r"""The degree-1 homogeneous polynomial kernel :math:`K_{ij} = x_i^\top x_j` (JRD Sec. 6; with it
    the kernel energy confusion is CML's Eq. 3, see the module docstring)."""
    return polynomial_kernel(x, degree=1, offset=0.0)


@_full_precision
def exponential_kernel(x: torch.Tensor) -> torch.Tensor:
    r""":math:`K_{ij} = \exp(x_i^\top x_j)`, whose mean embedding is the moment-generating function
    (JRD Table 4, last row, and Sec. 6). It overflows for features of large norm; use it on the
    L2-normalized embedding or the class-level cosines."""
    x = checks.features(x, "x")
    return torch.exp(x @ x.T)


def _kernel(spec, index: int) -> Kernel:
    """A kernel callable from a spec: a callable, or a sequence of Gaussian bandwidth scales."""
    if callable(spec):
        return spec
    if isinstance(spec, (tuple, list)) and spec and all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in spec):
        return functools.partial(gaussian_kernel, scales=tuple(float(s) for s in spec))
    raise TypeError(f"kernels[{index}] must be a callable x -> (M, M) kernel matrix (e.g. linear_kernel) or a "
                    f"tuple of Gaussian bandwidth scales such as (0.5, 1.0, 2.0); got {spec!r}")


# ----------------------------------------------------------------------------------------------------
# Joint kernel and kernel mean embeddings (Eqs. 6-8)


@_full_precision
def joint_kernel(layers: Sequence[torch.Tensor], kernels: Sequence | None = None,
                 combine: str = "product") -> torch.Tensor:
    r"""The joint kernel matrix over ``L`` representations of the same ``M`` samples (JRD Eq. 8).

    .. math:: K_{ij} = \prod_{l=1}^{L} k_l(x^l_i, x^l_j)\qquad(\text{combine}=\text{"product"})

    which is the kernel of the tensor product of the layers' RKHSs, so that the inner product of two
    empirical embeddings (Eq. 7) is a block mean of this matrix. ``combine="sum"`` gives instead
    :math:`\sum_l k_l(x^l_i, x^l_j)`, the kernel of the direct sum: with it every similarity below is
    the *sum of the per-layer (marginal) similarities* (the MRD reading of issue 17; see
    :data:`VARIANTS`).

    ``layers``: a sequence of ``(M, d_l)`` tensors (one per representation, same rows). ``kernels``:
    one entry per layer, a callable ``x -> (M, M)`` or a tuple of Gaussian scales; default
    :data:`GAUSSIAN_SCALES` for every layer.
    """
    if torch.is_tensor(layers) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise TypeError("layers must be a non-empty list of (M, d) tensors, one per representation, e.g. "
                        "[pooled, embedding, class_level]")
    if combine not in _COMBINE:
        raise ValueError(f"combine must be one of {_COMBINE} (product: joint kernel, Eq. 8; sum: marginal), got {combine!r}")
    if kernels is None:
        kernels = [GAUSSIAN_SCALES] * len(layers)
    if isinstance(kernels, (str, bytes)) or callable(kernels) or len(kernels) != len(layers):
        raise ValueError(f"kernels must list one kernel per layer ({len(layers)} layers); got {kernels!r}")
    xs = [checks.features(x, f"layers[{i}]") for i, x in enumerate(layers)]
    m = xs[0].shape[0]
    for i, x in enumerate(xs):
        if x.shape[0] != m:
            raise ValueError(f"layers[{i}] has {x.shape[0]} rows but layers[0] has {m}; every layer holds the "
                             "representations of the same samples, one row each")
    total = None
    for i, (x, spec) in enumerate(zip(xs, kernels)):
        k = _kernel(spec, i)(x)
        if k.shape != (m, m):
            raise ValueError(f"kernels[{i}] returned shape {tuple(k.shape)}; a kernel must return the ({m}, {m}) matrix")
        total = k if total is None else (total * k if combine == "product" else total + k)
    return total


class KernelMeans(NamedTuple):
    """Inner products of the empirical kernel mean embeddings of the classes of a batch."""

    classes: torch.Tensor  # (C,) sorted class ids present
    counts: torch.Tensor  # (C,) n_I, as the kernel's dtype
    inner: torch.Tensor  # (C, C) <C(P_I), C(P_J)>: JRS for I != J (Eq. 8), ||C(P_I)||^2 on the diagonal
    self_kernel: torch.Tensor  # (C,) m_I = mean over i in I of k(x_i, x_i)


@_full_precision
def kernel_mean_embeddings(layers: Sequence[torch.Tensor], labels, kernels: Sequence | None = None,
                           combine: str = "product") -> KernelMeans:
    r"""Empirical joint representation similarities of every pair of classes in the batch (JRD Eqs. 6-8).

    With :math:`K` the :func:`joint_kernel` and :math:`Y` the ``(M, C)`` one-hot class matrix,

    .. math::

        \langle \hat C(P_I), \hat C(P_J)\rangle = \frac{(Y^\top K Y)_{IJ}}{n_I n_J}
        = \frac{1}{n_I n_J}\sum_{i\in I}\sum_{j\in J}\prod_l k_l(x^l_i, x^l_j),

    for all ``I, J`` at once: ``inner[I, J]`` is :math:`\hat S_{JRS}(P_I, P_J)` (Eq. 8) off the
    diagonal and the squared norm :math:`\|\hat C(P_I)\|^2` on it (the V-statistic, with the ``i = i'``
    terms, as Eq. 7's estimate gives). ``self_kernel[I]`` is :math:`\frac1{n_I}\sum_{i\in I} K_{ii}`
    (1 for normalized Gaussian and Laplace mixtures), needed by :func:`kernel_energy_confusion`.
    """
    k = joint_kernel(layers, kernels, combine)
    labels = checks.class_ids(labels, k.shape[0], device=k.device, of="layers")
    classes, inverse = torch.unique(labels, sorted=True, return_inverse=True)
    onehot = F.one_hot(inverse, classes.numel()).to(k.dtype)
    counts = onehot.sum(0)
    inner = (onehot.T @ k @ onehot) / (counts[:, None] * counts[None, :])
    self_kernel = (onehot.T @ torch.diagonal(k)) / counts
    return KernelMeans(classes, counts, inner, self_kernel)


def _between_class_mean(means: KernelMeans, values: torch.Tensor, name: str) -> torch.Tensor:
    """Mean of ``values[I, J]`` over ordered pairs of different classes, weighted by n_I n_J (Eqs. 10-11)."""
    c = means.classes.numel()
    if c < 2:
        raise ValueError(f"{name} compares different classes, but the batch holds only one (labels "
                         f"{means.classes.tolist()}); sample batches with at least two classes")
    weights = means.counts[:, None] * means.counts[None, :]
    weights = weights.masked_fill(torch.eye(c, dtype=torch.bool, device=weights.device), 0.0)
    return (weights * values).sum() / weights.sum()


# ----------------------------------------------------------------------------------------------------
# Regularizers: JRS (Eqs. 10-11), JMMD (Eq. 15), JIntra (Eq. 16)


def jrs_regularizer(layers: Sequence[torch.Tensor], labels, kernels: Sequence | None = None,
                    combine: str = "product", alpha: float = 1.0) -> torch.Tensor:
    r"""The JRS regularizer term of the JRD objective (JRD Eqs. 10-11), to be *added* to AM-Softmax.

    .. math::

        \alpha\,\frac{1}{N_{pairs}}\,\mathcal L_{JRS},\qquad
        \mathcal L_{JRS} = \sum_{I\ne J} n_I n_J\,\hat S_{JRS}(P_I, P_J)
        = \sum_{y_i \ne y_j}\prod_l k_l(x^l_i, x^l_j),

    with :math:`N_{pairs}` the number of sample pairs of different classes: the mean joint kernel over
    different-class pairs, in ``(0, 1]`` for the normalized Gaussian mixtures. Minimizing it makes the
    classes' joint distributions of representations dissimilar. The full objective is
    ``L_JRD = L_AMS + jrs_regularizer(...)`` (Eq. 11; ``alpha = 1`` on CUB and Cars).

    Which ``layers`` and ``kernels`` give JRD and its Table 2 variants: :func:`jrd_representations`.
    Needs at least two classes in the batch; a batch of one image per class is fine.
    """
    alpha = checks.finite_number(alpha, "alpha", low=0.0)
    means = kernel_mean_embeddings(layers, labels, kernels, combine)
    return alpha * _between_class_mean(means, means.inner, "jrs_regularizer")


def jmmd_regularizer(layers: Sequence[torch.Tensor], labels, kernels: Sequence | None = None,
                     combine: str = "product", alpha: float = 1.0) -> torch.Tensor:
    r"""The joint-MMD comparison regularizer of JRD Sec. 5.3 (Eq. 15, Fig. 5, Table 3), to be *added*.

    .. math::

        -\alpha\,\frac{1}{N_{pairs}}\sum_{I\ne J} n_I n_J\,\hat D_{JMMD}(P_I, P_J),\qquad
        \hat D_{JMMD} = \|\hat C(P_I) - \hat C(P_J)\|^2
          = \|\hat C(P_I)\|^2 + \|\hat C(P_J)\|^2 - 2\,\hat S_{JRS}(P_I, P_J).

    Eq. 15 is unreadable in our copy; we take the joint MMD of Long et al. (2017), which the paper names,
    on the kernel mean embeddings of Eq. 7 (biased V-statistic norms) with the same kernels and class-pair
    weights as JRS. The paper *maximizes* the discrepancy between classes (Sec. 4.3.2: "maximizing the MMD
    distance ... is equivalent to minimizing the inner product similarity plus maximizing the norm"), so
    the term to add is minus it. Identity: ``jmmd = jintra + 2 * jrs`` (same arguments).
    """
    alpha = checks.finite_number(alpha, "alpha", low=0.0)
    means = kernel_mean_embeddings(layers, labels, kernels, combine)
    norms = torch.diagonal(means.inner)
    mmd2 = norms[:, None] + norms[None, :] - 2.0 * means.inner
    return -alpha * _between_class_mean(means, mmd2, "jmmd_regularizer")


def jintra_regularizer(layers: Sequence[torch.Tensor], labels, kernels: Sequence | None = None,
                       combine: str = "product", alpha: float = 1.0) -> torch.Tensor:
    r"""The joint intra-class comparison regularizer of JRD Sec. 5.3 (Eq. 16, Fig. 5), to be *added*.

    .. math::

        -\alpha\,\frac{1}{N_{pairs}}\sum_{I\ne J} n_I n_J\,\hat D_{JIntra}(P_I, P_J),\qquad
        \hat D_{JIntra} = \|\hat C(P_I)\|^2 + \|\hat C(P_J)\|^2 .

    The paper describes JIntra as "considering only the norm of kernel embeddings" and "imposing explicit
    penalization on intra-class distances": the squared norm
    :math:`\|\hat C(P_I)\|^2 = \frac1{n_I^2}\sum_{i,i'\in I}\prod_l k_l(x^l_i, x^l_{i'})` grows as the
    class contracts, and it is maximized. Eq. 16 itself is garbled in our copy (two norms with the
    operator between them lost); we read it as the sum of the squared norms, the part of the MMD of
    Eq. 14 that is not the inner product, so that ``jmmd = jintra + 2 * jrs``. (The other possible
    reading, the product of the two norms, would couple the classes in a way the text does not
    describe.) Singleton classes contribute the constant :math:`K_{ii}` and no gradient.
    """
    alpha = checks.finite_number(alpha, "alpha", low=0.0)
    means = kernel_mean_embeddings(layers, labels, kernels, combine)
    norms = torch.diagonal(means.inner)
    return -alpha * _between_class_mean(means, norms[:, None] + norms[None, :], "jintra_regularizer")


def kernel_energy_confusion(layers: Sequence[torch.Tensor], labels, kernels: Sequence | None = None,
                            combine: str = "product") -> tuple[torch.Tensor, torch.Tensor]:
    r"""CML's energy confusion in the RKHS of a kernel, for every pair of classes (JRD Sec. 6).

    .. math::

        E_k(I, J) = \frac{1}{n_I n_J}\sum_{i\in I}\sum_{j\in J}\|\phi(x_i) - \phi(x_j)\|^2
                  = m_I + m_J - 2\,\langle \hat C(P_I), \hat C(P_J)\rangle,

    with :math:`m_I = \frac1{n_I}\sum_{i\in I}k(x_i, x_i)`. Returns ``(classes, E)``, ``E`` of shape
    ``(C, C)``; its diagonal is the within-class mean, :math:`2(m_I - \|\hat C(P_I)\|^2)`.

    With one layer and :func:`linear_kernel`, ``E`` off the diagonal equals
    :func:`zslib.methods.cml.confusion.pairwise_energy_confusion` (CML Eq. 3) exactly; so EC is
    :math:`m_I + m_J - 2\,S^{lin}_{JRS}(I, J)`, which is :math:`2 - 2\,S^{lin}_{JRS}` on unit-norm
    embeddings. With normalized Gaussian mixtures :math:`m_I = 1` and ``E = 2 - 2 * JRS``: JRD's
    regularizer is, up to a constant and a factor -2, the energy confusion in a Gaussian RKHS, minimized
    where CML minimizes the linear one with the opposite sign.
    """
    means = kernel_mean_embeddings(layers, labels, kernels, combine)
    m = means.self_kernel
    return means.classes, m[:, None] + m[None, :] - 2.0 * means.inner


# ----------------------------------------------------------------------------------------------------
# The representations of JRD (Eq. 9) and the variants of Table 2


def class_level_representation(embedding: torch.Tensor, proxies: torch.Tensor) -> torch.Tensor:
    r"""The class-level representation of JRD Eq. 9: cosines of the embedding to every class proxy.

    .. math:: x^+_i = \Big[\frac{w_1}{\|w_1\|}, \dots, \frac{w_C}{\|w_C\|}\Big]^\top \frac{x_i}{\|x_i\|}

    ``embedding`` ``(M, d)``, ``proxies`` ``(C, d)`` (the AM-Softmax weight vectors, e.g.
    ``zslib.engine.losses.AMSoftmax.weight``); returns ``(M, C)``. These are the cosines AM-Softmax itself
    scores; the gradient reaches both the embedding and the proxies.
    """
    embedding = checks.features(embedding, "embedding")
    proxies = checks.features(proxies, "proxies")
    checks.same_dimension(embedding, proxies, ("embedding", "proxies"))
    return F.normalize(embedding, dim=1) @ F.normalize(proxies.to(embedding.dtype), dim=1).T


class Representations(NamedTuple):
    """What a regularizer of this module takes: ``reg(r.layers, labels, r.kernels, r.combine)``."""

    layers: list[torch.Tensor]
    kernels: list
    combine: str


#: The layers (p: pooling, e: embedding, c: class level) and combination of JRD and its variants
#: (JRD Sec. 5.3, Table 2). "mrd" follows the paper's text, "the model using only DML representation";
#: "mrd_sum" is issue 17's reading of "marginal": the sum of the three per-layer similarities.
VARIANTS: dict[str, tuple[str, str]] = {
    "jrd": ("pec", "product"),
    "jrd_c": ("pe", "product"),  # without the class level
    "jrd_pooling": ("ec", "product"),  # without the pooling level
    "mrd": ("e", "product"),
    "mrd_sum": ("pec", "sum"),
}


#: The kernel choices of JRD Sec. 5.1, Fig. 6 and Table 4, by name (see :func:`jrd_representations`).
KERNELS: tuple[str, ...] = ("gaussian_mixture", "gaussian", "laplace", "polynomial2", "polynomial5", "exponential")

#: The regularizers a layer set can feed (JRD Eq. 10-11, 15, 16), by name.
REGULARIZERS: dict[str, Callable] = {}  # filled below the definitions: "jrs", "jmmd", "jintra"


def _on_unit_rows(x: torch.Tensor, kernel: Kernel) -> torch.Tensor:
    """``kernel`` applied to the rows of ``x`` scaled to unit length (bounded polynomial / exponential kernels)."""
    return kernel(F.normalize(x, dim=1))


def _layer_kernel(kernel: str, code: str, mixture: tuple[int, int] = PAPER_MIXTURE):
    """The kernel of one layer (``p``, ``e`` or ``c``) for a named choice of :data:`KERNELS`; ``mixture`` is
    ``(K, K')``, the number of Gaussians of the pooling and the embedding layer (``gaussian_mixture`` only)."""
    if kernel == "gaussian_mixture":
        if code == "c":
            return CLASS_LEVEL_SCALES
        return mixture_scales(mixture[0] if code == "p" else mixture[1])
    if kernel == "gaussian":
        return (1.0,)
    if kernel == "laplace":
        return functools.partial(laplace_kernel, scales=(1.0,))
    if kernel in ("polynomial2", "polynomial5"):
        poly = functools.partial(polynomial_kernel, degree=int(kernel[-1]), offset=1.0)
        return functools.partial(_on_unit_rows, kernel=poly)
    return functools.partial(_on_unit_rows, kernel=exponential_kernel)


def jrd_representations(pooled: torch.Tensor | None, embedding: torch.Tensor, proxies: torch.Tensor | None = None,
                        variant: str = "jrd", kernel: str = "gaussian_mixture",
                        mixture: Sequence[int] = PAPER_MIXTURE) -> Representations:
    r"""The representations and kernels of JRD (Fig. 3, Eq. 9, Sec. 5.1) or one of its Table 2 variants.

    * pooling representation :math:`x'`: ``pooled`` as the backbone gives it, Gaussian mixture at
      :math:`\tau\{1/2, 1, 2\}`;
    * embedding :math:`x`: ``embedding`` L2-normalized (Eq. 9), the same mixture;
    * class level :math:`x^+`: :func:`class_level_representation` with ``proxies``, one Gaussian at
      :math:`\tau`.

    ``variant`` is a key of :data:`VARIANTS`; ``pooled`` or ``proxies`` may be ``None`` when the variant
    does not use them. ``kernel`` (a name of :data:`KERNELS`) replaces the kernel of *every* layer:

    * ``"gaussian_mixture"``: the kernels above (Sec. 5.1; the released code), with ``mixture`` =
      :math:`(K, K')` Gaussians on the pooling and the embedding layer (Fig. 6; default the paper's
      ``(3, 3)``; bandwidths by :func:`mixture_scales`). ``(1, 1)`` is the ``"gaussian"`` kernel below;
    * ``"gaussian"``: one Gaussian at :math:`\tau` per layer (Fig. 6's :math:`(K, K') = (1, 1)`; Table 4's
      first row is named so, but it reports the R@1 of Table 1's JRD, 67.9, which used the mixture);
    * ``"laplace"``: :math:`\exp(-\|x - x'\|_1/\sigma)`, :math:`\sigma` the batch's mean L1 distance
      (:func:`laplace_kernel`; Table 4 row 2);
    * ``"polynomial2"``, ``"polynomial5"``: :math:`(x^\top x' + 1)^p` (Table 4 rows 3-4);
    * ``"exponential"``: :math:`\exp(x^\top x')`, whose mean embedding is the moment-generating function
      (Table 4 row 5).

    The paper does not say how it kept the last three finite on unnormalized layers: on the pooled
    features of a CNN (norms of tens) :math:`(x^\top x' + 1)^5` and :math:`e^{x^\top x'}` overflow float32.
    We apply them to each layer's rows scaled to unit length, which bounds a layer's kernel by
    :math:`2^p` or :math:`e` (the embedding is unit-norm already). Their products over layers are still up
    to :math:`2^{3p}` or :math:`e^3`, far above the Gaussian's 1, consistent with the much smaller weights
    the paper found for them (Table 4: :math:`\alpha = 10^{-3}` against 1).

    A method's regularizer term is then one line::

        r = jrd_representations(pooled, emb, loss_fn.weight, "jrd")
        term = jrs_regularizer(r.layers, labels, r.kernels, r.combine, alpha=1.0)
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {list(KERNELS)}, got {kernel!r}")
    mixture = tuple(mixture)
    if len(mixture) != 2:
        raise ValueError(f"mixture must be (K, K'), the number of Gaussians of the pooling and the embedding layer; "
                         f"got {mixture!r}")
    mixture_scales(mixture[0]), mixture_scales(mixture[1])  # checks: positive whole numbers
    if kernel != "gaussian_mixture" and mixture != PAPER_MIXTURE:
        raise ValueError(f"mixture {mixture!r} sets the sizes of the Gaussian mixture; kernel {kernel!r} has none")
    which, combine = VARIANTS[variant]
    embedding = checks.features(embedding, "embedding")
    layers, kernels = [], []
    for code in which:
        if code == "p":
            if pooled is None:
                raise ValueError(f"variant {variant!r} uses the pooling representation; pass the pooled features")
            layers.append(checks.features(pooled, "pooled"))
        elif code == "e":
            layers.append(F.normalize(embedding, dim=1))
        else:
            if proxies is None:
                raise ValueError(f"variant {variant!r} uses the class-level representation; pass the class proxies")
            layers.append(class_level_representation(embedding, proxies))
        kernels.append(_layer_kernel(kernel, code, mixture))
    return Representations(layers, kernels, combine)


REGULARIZERS.update({"jrs": jrs_regularizer, "jmmd": jmmd_regularizer, "jintra": jintra_regularizer})
