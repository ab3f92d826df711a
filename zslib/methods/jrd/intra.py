"""The explicit intra-class distance penalty of JRD (Chu et al., ICML 2020, Section 2, Eq. 4), in two readings:
:func:`intra_class_distance` (squared distances) and :func:`gaussian_intra_class_distance` (a Gaussian kernel).
JRD argues against penalizing intra-class distances directly; the method ``intra``
(:mod:`zslib.methods.jrd.method`) trains with it so that the chapter can compare.
"""
from __future__ import annotations

import math

import torch

from zslib.engine.checks import class_ids, features

__all__ = ["intra_class_distance", "gaussian_intra_class_distance"]


# ----------------------------------------------------------------------------------------------------
# Explicit intra-class distance penalty (JRD Section 2, Eq. 4)


def _paired_classes(x, labels, name: str):
    """``x`` and ``labels`` checked, the batch's classes (``torch.unique``: classes, inverse, counts) and which of
    them hold two or more samples; an error naming ``name`` when none does (no within-class pair to measure)."""
    x = features(x)
    labels = class_ids(labels, x.shape[0], x.device)
    classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    paired = counts >= 2
    if not bool(paired.any()):
        raise ValueError(
            f"{name} needs at least one class with two or more samples, but all "
            f"{classes.numel()} classes of the batch occur once; sample batches of K >= 2 images per class"
        )
    return x, classes, inverse, counts, paired


def intra_class_distance(x: torch.Tensor, labels, reduction: str = "mean") -> torch.Tensor:
    r"""The explicit penalty on intra-class distances of JRD (Chu et al. 2020), Section 2, Eq. 4, read as
    squared distances (the more probable reading, a Gaussian kernel, is
    :func:`gaussian_intra_class_distance`, whose first Taylor term this is).

    For each class :math:`I` of the mini-batch with :math:`N_I \ge 2` samples, the mean over its
    :math:`N_I(N_I-1)/2` distinct pairs of half the squared Euclidean distance,

    .. math::

        D_I = \frac{1}{N_I^{pairs}} \sum_{\{i, j\} \subset T_I} \tfrac12 \|x_i - x_j\|_2^2
            = \frac{N_I}{N_I - 1}\,\mathrm{tr}\,\Sigma_I ,

    where :math:`\mathrm{tr}\,\Sigma_I = \frac1{N_I}\sum_{i \in I}\|x_i - \mu_I\|^2` is the mean
    squared distance of the class's samples to their class mean. The right-hand form (exact, since
    :math:`\sum_{i<j}\|x_i-x_j\|^2 = N_I \sum_i \|x_i-\mu_I\|^2`) is what is computed: one-hot
    matrix algebra, no loop over pairs.

    **Why the pairwise form.** JRD's Eq. 4 writes the penalty over *pairs* of same-class samples, the
    way embedding losses (contrastive, triplet) measure compactness (JRD Fig. 1); it is what JRD Fig. 2
    adds to AM-Softmax with weight :math:`\alpha`. The two forms differ only by the factor
    :math:`N_I/(N_I-1)` (2 for the 2 images per class of the papers' batches), which makes the pairwise
    mean an *unbiased* estimate of the class's total variance, whatever the batch's K per class. So
    :math:`\alpha` means the same thing for any K, and a singleton class contributes nothing: it has
    no pair (with the centroid form it would contribute an exact 0 that still counts in the mean).

    Parameters
    ----------
    x : (n, d) floating tensor
        Embeddings as the network outputs them (after its L2 normalization, if it has one).
    labels : (n,) integer tensor
        Class ids. At least one class must occur twice.
    reduction : ``"mean"`` or ``"sum"``
        Over the classes that have a pair: ``"mean"`` (default; the weight :math:`\alpha` then does not
        grow with the number P of classes per batch) or ``"sum"`` (Eq. 4 read as a sum over classes;
        the extracted text of JRD lost the summation sign, so which one the paper used is not certain).

    Returns
    -------
    A scalar tensor, differentiable in ``x``; 0 when every class collapses to one point.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' (over classes) or 'sum', got {reduction!r}")
    x, classes, inverse, counts, paired = _paired_classes(x, labels, "intra_class_distance")
    onehot = torch.zeros(x.shape[0], classes.numel(), dtype=x.dtype, device=x.device)
    onehot[torch.arange(x.shape[0], device=x.device), inverse] = 1.0
    n = counts.to(x.dtype)
    means = (onehot.T @ x) / n[:, None]
    sq_to_mean = onehot.T @ (x - means[inverse]).pow(2).sum(1)  # (K,) sum_i ||x_i - mu_I||^2
    per_class = sq_to_mean[paired] / (n[paired] - 1.0)  # = N/(N-1) * tr(Sigma_I)
    return per_class.mean() if reduction == "mean" else per_class.sum()


def gaussian_intra_class_distance(x: torch.Tensor, labels, reduction: str = "mean",
                                  bandwidth: float = 2.0) -> torch.Tensor:
    r"""JRD's Eq. 4 read as a Gaussian kernel: the intra-class penalty with saturating pair costs.

    For each class :math:`I` of the mini-batch with :math:`N_I \ge 2` samples, the mean over its
    :math:`N_I(N_I-1)/2` distinct pairs of one minus a Gaussian kernel,

    .. math::

        G_I = \frac{1}{N_I^{pairs}} \sum_{\{i, j\} \subset T_I}
              \Big(1 - e^{-\|x_i - x_j\|_2^2 / \sigma^2}\Big),\qquad \sigma^2 = 2 ,

    then the mean (or sum) over those classes, as :func:`intra_class_distance`.

    **Why this reading of Eq. 4.** The text of JRD we have lost its symbols, but what survives of Eq. 4 is
    "1/N^I_pairs sum_{x_i, x_j in T_I} e 1 2 (x_i - x_j)^2": an exponential of minus one half of the squared
    difference, not the squared difference itself. Sec. 4.3.2 uses the same expression, "a Gaussian kernel
    k(x, y) = e^{-1/2 (x - y)^2}", and says that maximizing the mean of that kernel over a class "imposes
    explicit penalization on intra-class distances ... from the discussion in Section 2", i.e. the penalty
    of Eq. 4. So Eq. 4 most probably *maximizes* the mean same-class Gaussian kernel with the fixed bandwidth
    :math:`\sigma^2 = 2`; minimizing :math:`1 - k` is the same objective (the constant changes neither the
    gradient nor the optimum) and makes the penalty 0 for a collapsed class, like the squared form.

    **How the two forms relate.** :math:`1 - e^{-d^2/2} = d^2/2 - d^4/8 + \dots`: for close pairs this is
    :func:`intra_class_distance`'s :math:`\tfrac12 d^2` (its first-order Taylor term), so on compact
    classes both penalties pull alike. Far-apart pairs differ: the squared form pulls them in the harder the
    farther they are, the Gaussian form's pull :math:`d\,e^{-d^2/2}` peaks at :math:`d = 1` and fades, so a
    same-class outlier is left alone. On unit-norm embeddings :math:`d^2 \le 4` and every pair costs less
    than :math:`1 - e^{-2} \approx 0.86`.

    ``bandwidth`` is :math:`\sigma^2` (default 2, Eq. 4's one half); ``reduction`` as in
    :func:`intra_class_distance`. Needs one class with two samples. Batched: one Gram matrix, the
    same-class pair sums by one-hot algebra.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' (over classes) or 'sum', got {reduction!r}")
    sigma2 = float(bandwidth)
    if not math.isfinite(sigma2) or sigma2 <= 0:
        raise ValueError(f"bandwidth (sigma^2) must be a positive finite number, got {bandwidth!r}")
    x, classes, inverse, counts, paired = _paired_classes(x, labels, "gaussian_intra_class_distance")
    centred = x - x.mean(0, keepdim=True)  # distances do not change; cancellation shrinks
    sq = centred.pow(2).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * centred @ centred.T).clamp_min(0.0)
    cost = 1.0 - torch.exp(-d2 / sigma2)
    cost = cost * (1.0 - torch.eye(x.shape[0], dtype=x.dtype, device=x.device))  # no i = j terms
    onehot = torch.zeros(x.shape[0], classes.numel(), dtype=x.dtype, device=x.device)
    onehot[torch.arange(x.shape[0], device=x.device), inverse] = 1.0
    block = torch.diagonal(onehot.T @ cost @ onehot)  # (K,) sum over ordered same-class pairs i != j
    n = counts.to(x.dtype)
    per_class = block[paired] / (n[paired] * (n[paired] - 1.0))  # ordered pairs: N(N-1)
    return per_class.mean() if reduction == "mean" else per_class.sum()
