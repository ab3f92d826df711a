"""CML's confusion terms: pure functions ``f(features, labels) -> scalar`` that the method adds to a metric loss.

The confusion terms of CML (Chen, Deng, Wang and Zhang, "Confusion-Based Metric Learning for
Regularizing Zero-Shot Image Retrieval and Clustering", IEEE TNNLS 2022; ``chen2022cml``) and the facts of
its Lemmas 1-5. The method that weighs and combines them is :mod:`zslib.methods.cml.method`.

CML adds two terms to a deep metric loss ``L_m`` and minimizes the sum over the network parameters
(the paper's Eq. 11)::

    min_theta  L = L_m + lambda1 * L_ec + lambda2 * v,        lambda1, lambda2 >= 0.

**Sign convention.** Both confusion terms enter with a *plus* sign and positive weights, and *everything
is minimized* by one optimizer. There is no min-max and no gradient reversal: the "adversarial" wording
of the paper (Sec. III-D, Remark) means only that the confusion terms pull in the opposite direction
from ``L_m``. Minimizing

* the **energy confusion** ``L_ec`` (Eq. 3, :func:`energy_confusion`) pulls the samples of two different
  classes towards each other -- a *local* confusion, directly against ``L_m``, which pushes classes apart;
* the **diversity confusion** ``v`` (Eq. 10, :func:`diversity_confusion`) shrinks the mean squared norm
  of the features, i.e. the total spread of the whole feature distribution -- a *global* confusion.

CML-e uses EC alone (``lambda2 = 0``), CML-d DC alone (``lambda1 = 0``), CML both.

**Which features.** EC and DC act on the embedding as the network outputs it, before any L2
normalization a loss may apply internally (the triplet loss of Eq. 12 normalizes first). On unit-norm
features DC is the constant 1 and has no gradient; the paper's own diversities (Table X: 1.67 and 1.24)
are above 1, so its features were not unit-norm there. Which features EC saw in the triplet case is not
stated in the paper.

Also here, for the paper's Lemmas 1-5: :func:`generalized_energy_distance` (Eq. 4),
:func:`mmd2_linear` (Eq. 5 with the kernel ``k(a, b) = a.b``), :func:`diversity` (Definition 1, Eq. 6),
:func:`gaussian_mixture_moments` (Eq. 7 and Lemmas 3-4) and :func:`hoeffding_bound` (Lemma 5). The paper's
hyperparameters and the method itself are in :mod:`zslib.methods.cml.method`.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from zslib.engine.checks import class_ids, features, same_dimension

__all__ = [
    "energy_confusion",
    "pairwise_energy_confusion",
    "diversity_confusion",
    "diversity",
    "generalized_energy_distance",
    "mmd2_linear",
    "gaussian_mixture_moments",
    "MixtureMoments",
    "hoeffding_bound",
]


# ----------------------------------------------------------------------------------------------------
# Energy confusion (Eq. 3)


class _ClassStats(NamedTuple):
    classes: torch.Tensor  # (K,) sorted class ids present in the batch
    counts: torch.Tensor  # (K,) N_k
    means: torch.Tensor  # (K, d) mu_k
    spreads: torch.Tensor  # (K,) tr(Sigma_k) = mean_{i in k} ||x_i - mu_k||^2 (1/N_k normalization)


def _class_stats(x: torch.Tensor, labels: torch.Tensor) -> _ClassStats:
    """Per-class mean and total variance by one-hot matrix algebra (no loop over samples or classes)."""
    classes, inverse = torch.unique(labels, sorted=True, return_inverse=True)
    if classes.numel() < 2:
        raise ValueError(
            f"energy confusion needs samples of at least two classes, but the batch has only "
            f"{classes.numel()} (labels {classes.tolist()}); sample batches of P >= 2 classes x K images"
        )
    onehot = torch.zeros(x.shape[0], classes.numel(), dtype=x.dtype, device=x.device)
    onehot[torch.arange(x.shape[0], device=x.device), inverse] = 1.0
    counts = onehot.sum(0)
    means = (onehot.T @ x) / counts[:, None]
    spreads = (onehot.T @ (x - means[inverse]).pow(2).sum(1)) / counts
    return _ClassStats(classes, counts, means, spreads)


def pairwise_energy_confusion(x: torch.Tensor, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """CML Eq. 3 for every pair of classes in the batch.

    Returns ``(classes, ec)`` where ``classes`` are the sorted class ids present and ``ec[a, b]`` is
    ``L_ec(X_I, X_J)`` for ``I = classes[a]``, ``J = classes[b]`` (symmetric, zero diagonal).
    Computed from the exact decomposition used by :func:`energy_confusion`.
    """
    x = features(x)
    labels = class_ids(labels, x.shape[0], x.device)
    stats = _class_stats(x, labels)
    m = stats.means - stats.means.mean(0, keepdim=True)  # centring reduces cancellation; distances unchanged
    sq = m.pow(2).sum(1)
    between = (sq[:, None] + sq[None, :] - 2.0 * (m @ m.T)).clamp_min(0.0)
    ec = between + stats.spreads[:, None] + stats.spreads[None, :]
    eye = torch.eye(ec.shape[0], dtype=torch.bool, device=ec.device)
    return stats.classes, ec.masked_fill(eye, 0.0)


def energy_confusion(
    x: torch.Tensor,
    labels,
    pairs: str = "random",
    generator: torch.Generator | None = None,
    return_pair: bool = False,
):
    r"""Energy confusion, CML Eq. 3: the expected squared distance between two different classes.

    For two class sets :math:`X_I, X_J` of the mini-batch, with :math:`\tilde X_I \sim
    \mathrm{Uniform}(X_I)` and :math:`\tilde X_J \sim \mathrm{Uniform}(X_J)` independent, so that
    :math:`p_{ij} = 1/(N_I N_J)`,

    .. math::

        L_{ec}(X_I, X_J) = \mathbb{E}\,\|\tilde X_I - \tilde X_J\|_2^2
        = \frac{1}{N_I N_J} \sum_{i \in I} \sum_{j \in J} \|x_i - x_j\|_2^2
        = \|\mu_I - \mu_J\|_2^2 + \mathrm{tr}\,\Sigma_I + \mathrm{tr}\,\Sigma_J ,

    where :math:`\mu_K` and :math:`\Sigma_K` are the mean and covariance (normalized by :math:`1/N_K`)
    of class :math:`K`'s samples in the batch. The last form is exact (the two draws are independent) and
    is what is computed: one-hot matrix algebra, :math:`O(nd)`, no loop over samples. It also shows the
    paper's Lemmas 1 and 2 at a glance (see :func:`generalized_energy_distance`, :func:`mmd2_linear`).

    Parameters
    ----------
    x : (n, d) floating tensor
        Embeddings as the network outputs them.
    labels : (n,) integer tensor
        Class ids; the batch must contain at least two classes.
    pairs : ``"random"`` or ``"all"``
        ``"random"`` (the paper, Eq. 11: "X_I, X_J are randomly chosen from the current mini-batch"):
        one ordered pair of distinct classes, uniform over the pairs present, drawn per call from
        ``generator`` (or torch's global generator when ``None``, which the trainer checkpoints).
        ``"all"``: the mean of Eq. 3 over all ordered pairs of distinct classes, in closed form
        :math:`\frac{2}{K-1}\sum_k \|\mu_k - \bar\mu\|^2 + \frac{2}{K}\sum_k \mathrm{tr}\,\Sigma_k`
        with :math:`\bar\mu` the unweighted mean of the K class means.
    generator : torch.Generator, optional
        Makes the ``"random"`` choice reproducible; ignored for ``"all"``.
    return_pair : bool
        With ``"random"``, also return the chosen class ids ``(I, J)``.

    Returns
    -------
    A scalar tensor (differentiable in ``x``), or ``(value, (I, J))`` with ``return_pair=True``.
    """
    if pairs not in ("random", "all"):
        raise ValueError(f"pairs must be 'random' (one class pair per call, as in the paper) or 'all', got {pairs!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    x = features(x)
    labels = class_ids(labels, x.shape[0], x.device)
    stats = _class_stats(x, labels)
    k = stats.classes.numel()
    if pairs == "all":
        if return_pair:
            raise ValueError("return_pair=True only makes sense with pairs='random'")
        centred = stats.means - stats.means.mean(0, keepdim=True)
        return 2.0 / (k - 1) * centred.pow(2).sum() + 2.0 / k * stats.spreads.sum()
    dev = generator.device if generator is not None else torch.device("cpu")
    a, b = torch.randperm(k, generator=generator, device=dev)[:2].tolist()
    value = (stats.means[a] - stats.means[b]).pow(2).sum() + stats.spreads[a] + stats.spreads[b]
    if return_pair:
        return value, (stats.classes[a].item(), stats.classes[b].item())
    return value


# ----------------------------------------------------------------------------------------------------
# Diversity confusion (Definition 1, Eq. 10)


def diversity_confusion(x: torch.Tensor) -> torch.Tensor:
    r"""Diversity confusion, CML Eq. 10 on a mini-batch: :math:`\frac1b \sum_{i=1}^b \|x_i\|_2^2`.

    Definition 2 / Eq. 10 of the paper reduce the diversity of Definition 1 (:func:`diversity`, the
    trace of the feature covariance) to :math:`\mathbb{E}\|x\|_2^2` under the assumption that the
    feature distribution is a *zero-mean* Gaussian mixture; the paper then minimizes the mini-batch
    average of :math:`\|x\|^2` (Sec. III-C, after Eq. 10), which is what this returns. Without the
    zero-mean assumption the two differ by the squared norm of the mean:
    ``diversity_confusion(x) == diversity(x) + ||x.mean(0)||^2`` (so minimizing DC also pulls the
    mean towards the origin). Lemma 5 (:func:`hoeffding_bound`) bounds its deviation from
    :math:`\mathbb{E}\|x\|^2`. It enters the CML objective as ``+ lambda2 * DC``, minimized.
    """
    x = features(x)
    return x.pow(2).sum(1).mean()


def diversity(x: torch.Tensor) -> torch.Tensor:
    r"""Diversity of a feature distribution, CML Definition 1 (Eq. 6): :math:`\sum_k \lambda_k`.

    The :math:`\lambda_k` are the eigenvalues of the overall covariance :math:`\Sigma^*` of the features;
    here :math:`\Sigma^*` is the covariance of the empirical distribution of the rows of ``x`` (normalized
    by :math:`1/n`, not :math:`1/(n-1)`, so that the identity below is exact). The sum of the eigenvalues
    is the trace, :math:`\mathrm{tr}\,\Sigma^* = \frac1n\sum_i\|x_i - \bar x\|^2
    = \frac1n\sum_i\|x_i\|^2 - \|\bar x\|^2`, which equals :func:`diversity_confusion` exactly when the
    rows have zero mean (the paper's Definition 2 assumes a re-centred mixture, :math:`\mu^* = 0`).
    """
    x = features(x)
    return (x - x.mean(0, keepdim=True)).pow(2).sum(1).mean()


class MixtureMoments(NamedTuple):
    mean: torch.Tensor  # mu* = sum_c gamma_c mu_c
    second_moment: torch.Tensor  # E[x x^T] = sum_c gamma_c (mu_c mu_c^T + Sigma_c): Eq. 7's right side
    covariance: torch.Tensor  # Cov(x) = E[x x^T] - mu* mu*^T; Definition 1's Sigma*
    expected_sq_norm: torch.Tensor  # E||x||^2 = sum_c gamma_c (tr Sigma_c + ||mu_c||^2): Lemma 4, Eq. 9
    diversity: torch.Tensor  # tr Cov(x), Definition 1


def gaussian_mixture_moments(weights, means, covariances) -> MixtureMoments:
    r"""Moments of :math:`x \sim \sum_c \gamma_c \mathcal N(\mu_c, \Sigma_c)` (CML Eq. 7, Lemmas 3-4).

    ``weights`` (C,), non-negative, summing to 1; ``means`` (C, d); ``covariances`` (C, d, d).
    The paper's Eq. 7 writes :math:`\Sigma^* = \sum_c \gamma_c(\mu_c\mu_c^T + \Sigma_c)`; that is the
    second-moment matrix, equal to the covariance only when :math:`\mu^* = 0` (the paper re-centres the
    mixture first). Both are returned, so ``expected_sq_norm == diversity + ||mean||^2`` in general and
    ``expected_sq_norm == diversity`` for a zero-mean mixture (Definition 2, Eq. 10).
    """
    w = torch.as_tensor(weights)
    mu = torch.as_tensor(means)
    cov = torch.as_tensor(covariances)
    if not mu.is_floating_point():
        mu = mu.double()
    w, cov = w.to(mu.dtype), cov.to(mu.dtype)
    if w.dim() != 1 or mu.dim() != 2 or cov.dim() != 3 or not (w.shape[0] == mu.shape[0] == cov.shape[0]) \
            or cov.shape[1:] != (mu.shape[1], mu.shape[1]):
        raise ValueError(
            "expected weights (C,), means (C, d) and covariances (C, d, d); got "
            f"{tuple(w.shape)}, {tuple(mu.shape)}, {tuple(cov.shape)}"
        )
    if bool((w < 0).any()) or not math.isclose(float(w.sum()), 1.0, rel_tol=0, abs_tol=1e-6):
        raise ValueError(f"mixture weights must be non-negative and sum to 1, got {w.tolist()}")
    mean = w @ mu
    second = torch.einsum("c,ci,cj->ij", w, mu, mu) + torch.einsum("c,cij->ij", w, cov)
    covariance = second - torch.outer(mean, mean)
    expected_sq_norm = (w * (torch.diagonal(cov, dim1=1, dim2=2).sum(1) + mu.pow(2).sum(1))).sum()
    return MixtureMoments(mean, second, covariance, expected_sq_norm, torch.trace(covariance))


# ----------------------------------------------------------------------------------------------------
# GED, MMD (Lemmas 1 and 2) and Hoeffding (Lemma 5)


def _sq_dists(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    centre = torch.cat([a, b]).mean(0, keepdim=True)  # translation-invariant; reduces cancellation
    a, b = a - centre, b - centre
    return (a.pow(2).sum(1)[:, None] + b.pow(2).sum(1)[None, :] - 2.0 * (a @ b.T)).clamp_min(0.0)


def generalized_energy_distance(x: torch.Tensor, y: torch.Tensor, metric: str = "sqeuclidean") -> torch.Tensor:
    r"""Generalized energy distance, CML Eq. 4, between the empirical distributions of ``x`` and ``y``.

    .. math::

        D_{E,\rho}(P, Q) = 2\,\mathbb{E}\rho(\tilde P, \tilde Q) - \mathbb{E}\rho(\tilde P, \tilde P')
        - \mathbb{E}\rho(\tilde Q, \tilde Q'),

    with :math:`\tilde P, \tilde P'` i.i.d. uniform over the rows of ``x`` (so the pair :math:`i = i'`
    is included: a V-statistic, the paper's definition applied to the empirical distributions, as EC
    is) and likewise for ``y``. ``metric="sqeuclidean"`` (:math:`\rho(a,b)=\|a-b\|^2`, a semimetric of
    negative type, the paper's Lemma 1) or ``"euclidean"`` (the classic energy distance).

    With the squared Euclidean :math:`\rho`, :math:`\frac12 D_{E,\rho} = \|\mu_x - \mu_y\|^2`, which is
    :func:`mmd2_linear`; and :math:`L_{ec} - \frac12 D_{E,\rho} = \mathrm{tr}\,\Sigma_x +
    \mathrm{tr}\,\Sigma_y \ge 0` -- Lemma 1, with equality exactly when each class sits at one point.
    """
    x, y = features(x, "x"), features(y, "y")
    same_dimension(x, y)
    if metric == "sqeuclidean":
        dist = _sq_dists
    elif metric == "euclidean":
        def dist(a, b):
            return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")
    else:
        raise ValueError(f"metric must be 'sqeuclidean' (the paper's Lemma 1) or 'euclidean', got {metric!r}")
    return 2.0 * dist(x, y).mean() - dist(x, x).mean() - dist(y, y).mean()


def mmd2_linear(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Squared MMD, CML Eq. 5, with the degree-1 homogeneous polynomial kernel :math:`k(a,b)=a^Tb`.

    .. math::

        \gamma_k^2 = \mathbb{E}\,k(\tilde P, \tilde P') + \mathbb{E}\,k(\tilde Q, \tilde Q')
        - 2\,\mathbb{E}\,k(\tilde P, \tilde Q) = \|\mu_x - \mu_y\|_2^2,

    the expectations taken over the empirical distributions of the rows (V-statistic, :math:`i = i'`
    included). The kernel mean embedding of a linear kernel is the mean itself, so the closed form on
    the right is what is computed. Lemma 2: :func:`energy_confusion` of the two classes is at least
    this, the gap being :math:`\mathrm{tr}\,\Sigma_x + \mathrm{tr}\,\Sigma_y`.
    """
    x, y = features(x, "x"), features(y, "y")
    same_dimension(x, y)
    return (x.mean(0) - y.mean(0)).pow(2).sum()


def hoeffding_bound(batch_size: int, delta: float, zeta: float = 1.0) -> float:
    r"""The deviation bound of CML Lemma 5: :math:`\zeta\sqrt{\log(4/\delta) / (2b)}`.

    Statement (Lemma 5): if the :math:`b` samples of a mini-batch are i.i.d. draws from the feature
    distribution and every squared norm lies in :math:`[0, \zeta]` (:math:`\zeta` the largest
    :math:`\|x\|^2` over the training set; :math:`\zeta = 1` for features of norm at most 1), then with
    probability at least :math:`1 - \delta/2`

    .. math::

        \Big|\frac1b\sum_{i=1}^b\|x_i\|^2 - \mathbb{E}\|x\|^2\Big| \le \zeta\sqrt{\frac{1}{2b}\log\frac4\delta}.

    It is Hoeffding's inequality :math:`P(|\cdot| \ge t) \le 2\exp(-2bt^2/\zeta^2)` with the right side set
    to :math:`\delta/2` -- so the failure probability is :math:`\delta/2`, not :math:`\delta`, as the paper
    states it. Caveats: the paper's P x K class-balanced batches are not i.i.d. draws from the feature
    distribution; sampling without replacement from a finite set only tightens Hoeffding's bound.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not (0.0 < float(delta) < 2.0):
        raise ValueError(f"delta must lie in (0, 2) so that the probability 1 - delta/2 is positive, got {delta!r}")
    if not (math.isfinite(float(zeta)) and float(zeta) > 0.0):
        raise ValueError(f"zeta (the largest squared feature norm) must be positive and finite, got {zeta!r}")
    return float(zeta) * math.sqrt(math.log(4.0 / float(delta)) / (2.0 * batch_size))
