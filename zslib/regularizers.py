"""Confusion regularizers of CML (Chen, Deng, Wang and Zhang, "Confusion-Based Metric Learning for
Regularizing Zero-Shot Image Retrieval and Clustering", IEEE TNNLS 2022; ``chen2022cml``).

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
:func:`gaussian_mixture_moments` (Eq. 7 and Lemmas 3-4) and :func:`hoeffding_bound` (Lemma 5); the
paper's hyperparameters in :data:`CML_PRESETS`; and :func:`cml_objective`, the trainer objective.
"""
from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

__all__ = [
    "cml_objective_factory",
    "with_confusion",
    "energy_confusion",
    "pairwise_energy_confusion",
    "diversity_confusion",
    "diversity",
    "generalized_energy_distance",
    "mmd2_linear",
    "gaussian_mixture_moments",
    "MixtureMoments",
    "hoeffding_bound",
    "CML_TRAINING",
    "CML_LOSS_SETTINGS",
    "CML_PRESETS",
    "cml_preset",
    "cml_objective",
    "CMLObjective",
    "intra_class_distance",
]


# ----------------------------------------------------------------------------------------------------
# Input checks


def _features(x, name: str = "x") -> torch.Tensor:
    """Check that ``x`` is a finite (n, d) floating tensor with n >= 1; half precision goes to float32."""
    if not torch.is_tensor(x):
        raise TypeError(f"{name} must be a torch.Tensor of features with shape (n, d), got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape (n, d) -- one feature vector per row -- got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}; call .float() on it first")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)}); it needs at least one sample and one dimension")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or infinite values; check the network output and the learning rate")
    if x.dtype in (torch.float16, torch.bfloat16):  # sums of squares overflow / lose precision in half
        x = x.float()
    return x


def _labels(labels, n: int, device) -> torch.Tensor:
    labels = torch.as_tensor(labels, device=device)
    if labels.dim() != 1:
        raise ValueError(f"labels must be a 1-D tensor of class ids, got shape {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"labels must hold integer class ids, got dtype {labels.dtype}")
    if labels.shape[0] != n:
        raise ValueError(f"x has {n} rows but labels has {labels.shape[0]} entries; they must match one to one")
    return labels


def _same_dim(x: torch.Tensor, y: torch.Tensor) -> None:
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same feature dimension, got {x.shape[1]} and {y.shape[1]}")


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
    onehot = torch.zeros(labels.shape[0], classes.numel(), dtype=x.dtype, device=x.device)
    onehot[torch.arange(labels.shape[0], device=x.device), inverse] = 1.0
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
    x = _features(x)
    labels = _labels(labels, x.shape[0], x.device)
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
    x = _features(x)
    labels = _labels(labels, x.shape[0], x.device)
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
    x = _features(x)
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
    x = _features(x)
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
    x, y = _features(x, "x"), _features(y, "y")
    _same_dim(x, y)
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
    x, y = _features(x, "x"), _features(y, "y")
    _same_dim(x, y)
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


# ----------------------------------------------------------------------------------------------------
# The paper's settings (Sec. IV-A and Tables II-V)

#: Training settings shared by every CML run (Sec. IV-A). The data preprocessing is "exactly the same
#: as [Song et al. 2016]"; the CML text does not spell out crop sizes, so none are given here.
CML_TRAINING: dict = {
    "backbone": "googlenet",  # GoogLeNet V1, ImageNet-pretrained, new FC layer after global pooling
    "pretrained": True,
    "embedding_dim": 512,
    "optimizer": "adam",
    "lr": 1e-5,
    "weight_decay": 2e-4,  # also used for the baselines (footnote 6)
    "new_layer_mult": 10,  # the new FC layer trains at 10x the learning rate
    "batch_classes": 64,
    "batch_per_class": 2,  # 128 = 64 classes x 2 images
    "batch_size": 128,
    "ec_pairs": "random",  # one class pair per iteration (Eq. 11)
}

#: The metric losses L_m of Sec. III-D (Eqs. 12-14).
CML_LOSS_SETTINGS: dict = {
    "triplet": {"margin": 0.1, "normalize": True},  # Eq. 12, on L2-normalized features
    "npair": {},  # Eq. 13, inner products, no extra hyperparameter given
    "binomial": {"alpha": 2.0, "beta": 0.5, "eta_pos": 1.0, "eta_neg": 25.0},  # Eq. 14, cosine similarity
}

#: (Table, training iterations) per dataset; keys follow zslib.data's folder names.
_DATASETS = {"cars196": ("II", 10_000), "sop": ("III", 20_000), "cub200": ("IV", 5_000), "inshop": ("V", 20_000)}

#: (lambda1, lambda2) per dataset and loss, from the captions of Tables II-V, which list them in the
#: order (Tri, N-Pair, Binomial). All twelve pairs are legible in the text; the CARS values agree with
#: the optima of the CARS ablations (Tables VII-VIII: lambda1 peaks at 0.02 / 0.3 / 0.13, lambda2 at
#: 0.04 / 0.02 / 0.03). The SOP and In-Shop captions give the same values.
_LAMBDAS = {
    "cars196": {"triplet": (0.02, 0.04), "npair": (0.3, 0.02), "binomial": (0.13, 0.03)},
    "sop": {"triplet": (0.002, 0.01), "npair": (0.03, 0.02), "binomial": (0.013, 0.01)},
    "cub200": {"triplet": (0.02, 0.01), "npair": (0.3, 0.02), "binomial": (0.13, 0.03)},
    "inshop": {"triplet": (0.002, 0.01), "npair": (0.03, 0.02), "binomial": (0.013, 0.01)},
}

#: ``CML_PRESETS[dataset][loss]``: the paper's full CML setting (lambda1, lambda2, iterations, source
#: table, the shared training settings and the loss's own settings). Datasets: ``cub200``, ``cars196``,
#: ``sop``, ``inshop``; losses: ``triplet``, ``npair``, ``binomial``. For CML-e set lambda2 = 0, for
#: CML-d lambda1 = 0 (the paper reuses the same single values; Sec. IV-D3). Use :func:`cml_preset` for
#: a copy you may change.
CML_PRESETS: dict = {
    dataset: {
        loss: {
            "lambda1": lam1,
            "lambda2": lam2,
            "iterations": _DATASETS[dataset][1],
            "source": f"chen2022cml, Table {_DATASETS[dataset][0]} caption and Sec. IV-A",
            **CML_TRAINING,
            "loss": loss,
            "loss_settings": dict(CML_LOSS_SETTINGS[loss]),
        }
        for loss, (lam1, lam2) in losses.items()
    }
    for dataset, losses in _LAMBDAS.items()
}

_VARIANTS = {"cml": (1, 1), "cml-e": (1, 0), "cml-d": (0, 1), "baseline": (0, 0)}


def cml_preset(dataset: str, loss: str, variant: str = "cml") -> dict:
    """A deep copy of ``CML_PRESETS[dataset][loss]`` with the lambdas of ``variant`` applied.

    ``variant``: ``"cml"`` (both terms), ``"cml-e"`` (EC only, lambda2 = 0), ``"cml-d"`` (DC only,
    lambda1 = 0) or ``"baseline"`` (the plain metric loss, both 0).
    """
    d, l, v = str(dataset).lower(), str(loss).lower(), str(variant).lower()
    if d not in CML_PRESETS:
        raise KeyError(f"no CML preset for dataset {dataset!r}; the paper covers {sorted(CML_PRESETS)}")
    if l not in CML_PRESETS[d]:
        raise KeyError(f"no CML preset for loss {loss!r}; the paper covers {sorted(CML_PRESETS[d])}")
    if v not in _VARIANTS:
        raise KeyError(f"unknown variant {variant!r}; use one of {sorted(_VARIANTS)}")
    preset = copy.deepcopy(CML_PRESETS[d][l])
    keep1, keep2 = _VARIANTS[v]
    preset["lambda1"] *= keep1
    preset["lambda2"] *= keep2
    preset["variant"] = v
    return preset


# ----------------------------------------------------------------------------------------------------
# The CML objective (Eq. 11)


class CMLObjective(nn.Module):
    """``objective(model, images, labels) -> {"metric": L_m, "ec": lambda1*EC, "dc": lambda2*DC}``.

    The trainer (:mod:`zslib.train`) sums the named terms and minimizes the sum: CML Eq. 11. A term
    whose lambda is 0 is left out (CML-e has no ``"dc"``, CML-d no ``"ec"``). A module, so that a
    metric loss holding parameters is checkpointed and optimized, and so that a private ``generator``
    for the random class pair is saved and restored with the checkpoint (its state is the module's
    extra state).
    """

    def __init__(self, metric_loss: Callable, lambda1: float, lambda2: float, ec_pairs: str = "random",
                 generator: torch.Generator | None = None, metric_name: str = "metric"):
        super().__init__()
        if not callable(metric_loss):
            raise TypeError(f"metric_loss must be a callable (embeddings, labels) -> scalar, got {type(metric_loss).__name__}")
        for name, lam in (("lambda1", lambda1), ("lambda2", lambda2)):
            if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
                raise ValueError(
                    f"{name} must be a finite number >= 0 (CML adds the confusion terms and minimizes; "
                    f"0 switches a term off), got {lam!r}"
                )
        if ec_pairs not in ("random", "all"):
            raise ValueError(f"ec_pairs must be 'random' (the paper) or 'all', got {ec_pairs!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        if metric_name in ("ec", "dc"):
            raise ValueError(f"metric_name {metric_name!r} clashes with the confusion terms' names 'ec' and 'dc'")
        self.metric_loss = metric_loss  # registered as a submodule when it is a Module
        self.lambda1, self.lambda2 = float(lambda1), float(lambda2)
        self.ec_pairs, self.generator, self.metric_name = ec_pairs, generator, metric_name
        self._checked_norms = False

    def forward(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        emb = model(images)
        terms = {self.metric_name: self.metric_loss(emb, labels)}
        if self.lambda1 > 0:
            terms["ec"] = self.lambda1 * energy_confusion(emb, labels, pairs=self.ec_pairs, generator=self.generator)
        if self.lambda2 > 0:
            if not self._checked_norms:
                self._checked_norms = True
                norms = emb.detach().float().norm(dim=1)
                if bool(((norms - 1).abs() < 1e-3).all()):
                    warnings.warn(
                        "the model outputs unit-norm embeddings: diversity confusion is then the constant 1 "
                        "and has no gradient. Apply DC to the un-normalized embedding (normalize inside the "
                        "metric loss instead).", stacklevel=2)
            terms["dc"] = self.lambda2 * diversity_confusion(emb)
        return terms

    def get_extra_state(self):
        return {"generator": None if self.generator is None else self.generator.get_state()}

    def set_extra_state(self, state):
        if state and state.get("generator") is not None and self.generator is not None:
            self.generator.set_state(state["generator"])

    def extra_repr(self) -> str:
        return f"lambda1={self.lambda1}, lambda2={self.lambda2}, ec_pairs={self.ec_pairs!r}"


def cml_objective(metric_loss: Callable, lambda1: float, lambda2: float, ec_pairs: str = "random", *,
                  generator: torch.Generator | None = None, metric_name: str = "metric") -> CMLObjective:
    """CML, Eq. 11: ``L_m + lambda1 * EC + lambda2 * DC`` as a trainer objective of named terms.

    ``metric_loss(embeddings, labels) -> scalar`` is ``L_m`` (e.g. from :mod:`zslib.losses`);
    ``lambda1 = 0`` gives CML-d, ``lambda2 = 0`` CML-e, both 0 the baseline. EC and DC see the
    embedding exactly as ``model`` returns it. See :class:`CMLObjective`.
    """
    return CMLObjective(metric_loss, lambda1, lambda2, ec_pairs, generator=generator, metric_name=metric_name)


# ----------------------------------------------------------------------------------------------------
# Explicit intra-class distance penalty (JRD Section 2, Eq. 4)


def intra_class_distance(x: torch.Tensor, labels, reduction: str = "mean") -> torch.Tensor:
    r"""The explicit penalty on intra-class distances of JRD (Chu et al. 2020), Section 2, Eq. 4.

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
    x = _features(x)
    labels = _labels(labels, x.shape[0], x.device)
    classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    paired = counts >= 2
    if not bool(paired.any()):
        raise ValueError(
            f"intra_class_distance needs at least one class with two or more samples, but all "
            f"{classes.numel()} classes of the batch occur once; sample batches of K >= 2 images per class"
        )
    onehot = torch.zeros(labels.shape[0], classes.numel(), dtype=x.dtype, device=x.device)
    onehot[torch.arange(labels.shape[0], device=x.device), inverse] = 1.0
    n = counts.to(x.dtype)
    means = (onehot.T @ x) / n[:, None]
    sq_to_mean = onehot.T @ (x - means[inverse]).pow(2).sum(1)  # (K,) sum_i ||x_i - mu_I||^2
    per_class = sq_to_mean[paired] / (n[paired] - 1.0)  # = N/(N-1) * tr(Sigma_I)
    return per_class.mean() if reduction == "mean" else per_class.sum()


def cml_objective_factory(config, model, loss_fn, *, ec_pairs: str = "random") -> "CMLObjective":
    """The objective :func:`zslib.experiment.run` builds for a CML config (its ``objective_factory``).

    ``config.regularizers`` names the weights of CML Eq. 11: ``"ec"`` is lambda1 (energy confusion,
    Eq. 3) and ``"dc"`` is lambda2 (diversity confusion, Eq. 10); a missing key means 0, so
    ``{"ec": l1}`` is CML-e, ``{"dc": l2}`` CML-d and ``{}`` the plain metric loss.
    """
    reg = dict(config.regularizers)
    unknown = sorted(set(reg) - {"ec", "dc"})
    if unknown:
        raise ValueError(f"CML knows the regularizers 'ec' (lambda1) and 'dc' (lambda2), not {unknown}")
    return cml_objective(loss_fn, reg.get("ec", 0.0), reg.get("dc", 0.0), ec_pairs=ec_pairs)


def with_confusion(config, lambda1: float = 0.0, lambda2: float = 0.0, **changes):
    """``config`` (a :class:`zslib.experiment.Config`) as a CML run with weights ``lambda1`` (EC) and
    ``lambda2`` (DC) of Eq. 11, plus any other ``changes``.

    Sets ``regularizers`` in the form :func:`cml_objective_factory` reads (a zero weight is left out)
    and names ``method`` after the terms that are on: ``"baseline"`` (none), ``"cml-e"``, ``"cml-d"``
    or ``"cml"`` (both), so that each variant's results are stored apart.
    """
    for name, lam in (("lambda1", lambda1), ("lambda2", lambda2)):
        if not lam >= 0:
            raise ValueError(f"{name} must be a non-negative weight, got {lam!r}")
    reg = {key: float(lam) for key, lam in (("ec", lambda1), ("dc", lambda2)) if lam > 0}
    method = {(): "baseline", ("ec",): "cml-e", ("dc",): "cml-d", ("ec", "dc"): "cml"}[tuple(reg)]
    return config.replace(regularizers=reg, method=method, **changes)
