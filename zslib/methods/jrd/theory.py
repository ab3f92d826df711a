"""The domain-adaptation bound that JRD uses to explain the generalization gap, estimated from data.

Ben-David et al. (2010), "A theory of learning from different domains" (Theorem 2), bounds the
error of a hypothesis ``h`` on a target domain by its error on the source domain plus two terms:

.. math::

    \\epsilon_T(h) \\le \\epsilon_S(h) + \\tfrac12 d_{\\mathcal H\\Delta\\mathcal H}(S, T) + \\lambda,
    \\qquad \\lambda = \\min_{h'} \\epsilon_S(h') + \\epsilon_T(h').

The empirical divergence is estimated from a classifier that tells the two domains apart
(Ben-David et al. 2010, Lemma 2): with equal sample sizes and pooled held-out error ``err`` of the
best domain classifier, the "proxy A-distance" is :math:`\\hat d_{\\mathcal H} = 2(1 - 2\\,err)`.

JRD (Chu et al. 2020, Section 2, Eqs. 1-3) applies this to deep metric learning: the source domain
is the representations of *seen* classes, the target the representations of *unseen* classes, and
the hypothesis space is nearest-neighbour classifiers fitted on a labelled split and evaluated on
an unlabelled split. JRD writes the bound as
:math:`\\epsilon_u(h) \\le \\epsilon_s(h) + \\hat d_{\\mathcal H}(D_s, D_u) + \\lambda` (Eq. 1), with
:math:`\\hat d_{\\mathcal H} = 1 - \\min_h \\epsilon(h)` (Eq. 2) and
:math:`\\lambda = \\epsilon_s(h^*) + \\epsilon_u(h^*)` (Eq. 3), and reports for CUB-200-2011
(JRD Table 3) :math:`\\hat d_{\\mathcal H} \\approx 0.93` and :math:`\\lambda \\approx 0.31`.
(The text of JRD available to us lost its math symbols; Eqs. 2-3 are read from context and from
Ben-David et al., and the reconciliation below is an inference from the published numbers, not a
reproduction of them.)

Normalization used here (and why it matches the scale of JRD Table 3)
----------------------------------------------------------------------

* :func:`h_divergence` returns :math:`d = 1 - 2\\,\\mathrm{BER}` clipped to ``[0, 1]``, where BER is
  the balanced held-out error of the domain classifier (equal to its pooled error, because the two
  sets are subsampled to equal size). This is half of Ben-David's proxy A-distance, i.e. exactly the
  term :math:`\\tfrac12 \\hat d` that enters Ben-David's bound, which is why JRD's Eq. 1 carries no
  factor 1/2. It also reads JRD's Eq. 2 with :math:`\\epsilon(h)` as in Ben-David's Lemma 2: the
  *sum* of the two per-domain error rates, :math:`\\epsilon(h) = \\mathrm{FNR} + \\mathrm{FPR} =
  2\\,\\mathrm{BER}`. Identical distributions give 0 (any classifier is at chance, BER = 0.5) and
  perfectly separable ones give 1. On this scale JRD's 0.93 means a domain classifier with a
  balanced error of about 3.5 %: plausible, because in CUB's zero-shot split every seen-class
  image is a training image, so the seen representations sit in tight clusters around their class
  proxies, and a 1-NN classifier rarely confuses them with the more diffuse unseen
  representations. On the proxy A-distance scale [0, 2] the same 0.93 would mean an error of 27 %,
  hard to reconcile with an embedding that fits its training classes. (Reading :math:`\\epsilon(h)` as the plain
  pooled error instead would put chance
  level at 0.5, not 0, which is not a divergence; multiply our value by 2 for the proxy A-distance:
  :attr:`HDivergence.proxy_a_distance`.)
* :func:`ideal_joint_error` returns :math:`\\lambda = (\\epsilon_s + \\epsilon_u)/2`, the *mean* of
  the two per-domain held-out errors of one classifier trained on labelled data of both sets (equal
  to the pooled error on a balanced sample). Ben-David's and JRD's Eq. 3 write the *sum*
  (:attr:`IdealJointError.sum_of_errors`, twice our value). JRD Table 3's 0.31 is only plausible as
  the mean: on CUB the nearest-neighbour error on unseen classes alone is about one minus Recall@1,
  i.e. about 0.5 (JRD Table 3: Recall@1 = 0.506), so a sum could not fall to 0.31, while a mean of
  roughly 0.1 (seen, training images) and 0.5 (unseen) gives 0.31. The two rows of Table 3 agree:
  a Recall@1 higher by 0.02 comes with a λ lower by 0.011, about half of it, as a mean predicts.

With these two conventions the bound of Ben-David et al. (2010) reads
``eps_unseen <= eps_seen + d.value + lam.sum_of_errors``.

How the estimates are made
--------------------------

JRD Section 2 fits each classifier on a labelled split and evaluates it on the unlabelled split.
Here every point serves once as unlabelled: a stratified ``folds``-fold split fits an exact k-NN
classifier on ``folds - 1`` folds and predicts the held-out fold. Each *repeat* draws a new
subsample and a new fold assignment, and the estimates are averaged. The confidence band is a
normal interval whose variance adds (a) the binomial sampling variance of the held-out error, i.e.
how much the estimate would move on a fresh sample of the same size, and (b) the spread over repeats
(subsampling and splitting) divided by their number. It does not include the randomness of training
the network; for that, call these functions on representations of several training runs.

The minimum over a hypothesis class is approximated, as in JRD, by one k-NN classifier, so the
divergence is a lower estimate and λ an upper estimate of their ideal values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.neighbors import KNeighborsClassifier

from zslib.engine.threads import one_thread

__all__ = ["HDivergence", "IdealJointError", "h_divergence", "ideal_joint_error"]

_METRICS = ("euclidean", "cosine")
_CLASSIFIERS = ("knn",)


@dataclass(frozen=True)
class HDivergence:
    """Estimated H-divergence between seen and unseen representations (see the module docstring).

    Attributes:
        value: mean over repeats of ``1 - 2 * error``, clipped to ``[0, 1]`` (0: indistinguishable
            sets, 1: perfectly separable). This is the term that enters JRD Eq. 1.
        ci_low, ci_high: confidence band (see the module docstring), clipped to ``[0, 1]``.
        errors: balanced held-out error of the domain classifier in each repeat.
        per_repeat: ``1 - 2 * errors``, unclipped (may be slightly negative from noise).
        n_per_set: how many representations of each set every repeat used.
        k, metric, confidence: the settings used.
    """

    value: float
    ci_low: float
    ci_high: float
    errors: np.ndarray
    per_repeat: np.ndarray
    n_per_set: int
    k: int
    metric: str
    confidence: float

    @property
    def proxy_a_distance(self) -> float:
        """Ben-David et al. (2010) proxy A-distance ``2 (1 - 2 err)`` in ``[0, 2]``: twice :attr:`value`."""
        return 2.0 * self.value


@dataclass(frozen=True)
class IdealJointError:
    """Estimated error λ of an ideal joint hypothesis on seen and unseen representations.

    Attributes:
        value: mean over repeats of ``(seen_error + unseen_error) / 2`` (the scale of JRD Table 3).
        ci_low, ci_high: confidence band (see the module docstring), clipped to ``[0, 1]``.
        errors: λ of each repeat.
        seen_errors, unseen_errors: held-out error on each set, per repeat.
        k, metric, confidence: the settings used.
    """

    value: float
    ci_low: float
    ci_high: float
    errors: np.ndarray
    seen_errors: np.ndarray
    unseen_errors: np.ndarray
    k: int
    metric: str
    confidence: float

    @property
    def sum_of_errors(self) -> float:
        """λ as Ben-David et al. (2010) and JRD Eq. 3 write it, ``eps_s + eps_u``: twice :attr:`value`."""
        return 2.0 * self.value


# --------------------------------------------------------------------------- input checks


def _representations(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a 2-D array of numbers (n_samples, dim); got {type(x).__name__}") from err
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, dim); got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty: pass at least a few representations (rows)")
    if x.shape[1] == 0:
        raise ValueError(f"{name} has zero feature dimensions (shape {x.shape})")
    bad = ~np.isfinite(x)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/inf values (first in row {int(rows[0])}); "
            "remove or repair those representations first"
        )
    return x


def _labels(y, n: int, name: str, of: str) -> np.ndarray:
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one class id per row of {of}); got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but {of} has {n} rows; give one class id per row")
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN/inf; class ids must be integers")
        if not np.all(y == np.round(y)):
            raise ValueError(f"{name} contains non-integer values; class ids must be integers")
        y = y.astype(np.int64)
    elif y.dtype.kind not in "iub":
        raise TypeError(f"{name} must hold integer class ids; got dtype {y.dtype}")
    return y.astype(np.int64)


def _check_settings(k, folds, repeats, metric, confidence, seed) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer (number of neighbours); got {k!r}")
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2 (labelled/unlabelled splits); got {folds!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer; got {repeats!r}")
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {_METRICS}; got {metric!r}")
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an integer (or None for a non-reproducible run); got {seed!r}")


def _prepare(x: np.ndarray, metric: str, name: str) -> np.ndarray:
    """Euclidean: as given. Cosine: L2-normalize rows, so Euclidean neighbours are cosine neighbours."""
    if metric == "euclidean":
        return x
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"{name} has {int((norms == 0).sum())} all-zero rows; the cosine metric needs non-zero vectors")
    return x / norms


# --------------------------------------------------------------------------- k-NN machinery


def _stratified_folds(labels: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold id per sample; every label's members are spread over the folds as evenly as possible."""
    n = labels.shape[0]
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(labels[shuffled], kind="stable")]
    fold = np.empty(n, dtype=np.int64)
    fold[order] = (np.arange(n) + rng.integers(folds)) % folds
    return fold


# Up to this many pooled representations, all pairwise distances are computed once per call and
# every fold of every repeat selects its neighbours from them; beyond it, each fold searches anew.
_PRECOMPUTE_MAX = 8000


def _squared_distances(x: np.ndarray) -> np.ndarray:
    """All pairwise squared Euclidean distances (exact up to float64 rounding; ranking is what matters)."""
    sq = np.einsum("ij,ij->i", x, x)
    d = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    np.maximum(d, 0.0, out=d)
    return d


class _NeighbourSearch:
    """Exact k-nearest-neighbour search among rows of a pool of representations.

    Pools up to ``_PRECOMPUTE_MAX`` rows get all pairwise distances once per call; each repeat then
    masks the pairs that share a fold and selects neighbours with numpy. Larger pools use
    scikit-learn's exact brute-force search (``KNeighborsClassifier``) fold by fold. Either could
    be ``zslib.engine.evaluate.knn``. The vote is done in :func:`_vote` so that ties are broken by rank.
    """

    def __init__(self, pool: np.ndarray):
        self.pool = pool
        self.dist = _squared_distances(pool) if pool.shape[0] <= _PRECOMPUTE_MAX else None

    def out_of_fold(self, rows: np.ndarray, fold: np.ndarray, k: int) -> np.ndarray:
        """For each pool row in ``rows``: positions (into ``rows``, nearest first) of its k nearest
        neighbours among the entries of ``rows`` that lie in another fold."""
        if self.dist is None:
            return self._out_of_fold_sklearn(rows, fold, k)
        if rows.shape[0] == self.dist.shape[0] and np.array_equal(rows, np.arange(rows.shape[0])):
            dist = self.dist.copy()
        else:
            dist = self.dist[rows][:, rows]
        for f in np.unique(fold):  # a point may not use neighbours from its own (held-out) fold
            same = np.flatnonzero(fold == f)
            dist[np.ix_(same, same)] = np.inf
        if k == 1:
            return dist.argmin(axis=1)[:, None]
        part = np.argpartition(dist, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(dist, part, axis=1), axis=1, kind="stable")
        return np.take_along_axis(part, order, axis=1)

    def _out_of_fold_sklearn(self, rows: np.ndarray, fold: np.ndarray, k: int) -> np.ndarray:
        result = np.empty((rows.shape[0], k), dtype=np.int64)
        for f in np.unique(fold):
            held_out = fold == f
            train_pos = np.flatnonzero(~held_out)
            search = KNeighborsClassifier(n_neighbors=k, algorithm="brute", metric="euclidean")
            search.fit(self.pool[rows[train_pos]], np.zeros(train_pos.shape[0], dtype=np.int64))
            result[held_out] = train_pos[search.kneighbors(self.pool[rows[held_out]], return_distance=False)]
        return result


def _vote(neighbour_labels: np.ndarray, n_classes: int) -> np.ndarray:
    """Majority vote over the columns (nearest first); ties go to the class whose member is nearest."""
    m, k = neighbour_labels.shape
    if k == 1:
        return neighbour_labels[:, 0].copy()
    # Each neighbour casts 1 vote plus a bonus 2^-(rank+1); the bonuses sum to < 1, so they only
    # decide ties, and a class's bonus is larger the nearer its nearest member is.
    weights = 1.0 + 0.5 ** (np.arange(k) + 1.0)
    votes = np.zeros((m, n_classes))
    np.add.at(votes, (np.repeat(np.arange(m), k), neighbour_labels.ravel()), np.tile(weights, m))
    return votes.argmax(axis=1)


def _out_of_fold_predictions(
    search: _NeighbourSearch, rows: np.ndarray, y: np.ndarray, k: int, fold: np.ndarray
) -> np.ndarray:
    """k-NN prediction of every pool row listed in ``rows`` by a classifier fitted on the other folds.

    ``y`` holds class ids 0..C-1 for ``rows``; ``fold`` the fold id of each of them.
    """
    return _vote(y[search.out_of_fold(rows, fold, k)], int(y.max()) + 1)


def _mean_ci(values: np.ndarray, sampling_var: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Mean over repeats and a normal band whose variance adds two parts: the binomial sampling
    variance of the held-out error (averaged over repeats; it does not shrink with more repeats,
    since every repeat reuses the same data) and the spread over repeats divided by their number."""
    mean = float(values.mean())
    split_var = values.var(ddof=1) / values.size if values.size > 1 else 0.0
    half = stats.norm.ppf(0.5 + confidence / 2.0) * np.sqrt(float(sampling_var.mean()) + split_var)
    return mean, mean - float(half), mean + float(half)


def _clip01(v: float) -> float:
    return float(min(1.0, max(0.0, v)))


# --------------------------------------------------------------------------- public API


@one_thread()
def h_divergence(
    seen,
    unseen,
    classifier: str = "knn",
    k: int = 1,
    folds: int = 5,
    seed: int | None = 0,
    repeats: int = 10,
    *,
    metric: str = "euclidean",
    max_per_set: int | None = None,
    confidence: float = 0.95,
) -> HDivergence:
    """H-divergence between seen and unseen representations, JRD Section 2 Eq. 2 / Ben-David et al. (2010).

    A k-nearest-neighbour classifier learns to tell seen (label 0) from unseen (label 1)
    representations; its held-out error ``err`` gives ``d = 1 - 2 err``. Each repeat subsamples
    both sets to the same size (so chance error is exactly 0.5 and d = 0 for identical
    distributions), assigns stratified folds, fits on ``folds - 1`` of them and predicts the last,
    rotating so every point is predicted once (JRD's labelled / unlabelled splits). For identical
    distributions the estimate is 0 in expectation; for two Gaussians (k=1, many points) it lies
    between the Cover-Hart lower bound of the 1-NN error and the total variation distance.

    Normalization: ``value`` is ``1 - 2 err`` clipped to ``[0, 1]``, the term of JRD Eq. 1 and
    half of Ben-David's proxy A-distance (``.proxy_a_distance``). On this scale JRD Table 3 reports
    about 0.93 on CUB; the module docstring explains why this scale, and not ``[0, 2]``, fits it.

    Args:
        seen, unseen: representations, arrays (or tensors) of shape (n_seen, dim), (n_unseen, dim).
        classifier: the hypothesis space; only ``"knn"`` (exact nearest neighbours, as in JRD).
        k: neighbours per vote (ties are broken by the nearest neighbour).
        folds: number of labelled/unlabelled splits per repeat (>= 2).
        seed: makes subsampling and splits reproducible.
        repeats: independent subsample-and-split repetitions, averaged.
        metric: ``"euclidean"`` on the representations as given, or ``"cosine"`` (L2-normalized first).
        max_per_set: cap on the per-set sample size (for speed); default: the smaller set's size.
        confidence: level of the confidence band.

    Returns:
        :class:`HDivergence` with ``value``, ``ci_low``, ``ci_high`` and per-repeat ``errors``.
    """
    if classifier not in _CLASSIFIERS:
        raise ValueError(f"classifier must be one of {_CLASSIFIERS} (nearest neighbours, as in JRD); got {classifier!r}")
    _check_settings(k, folds, repeats, metric, confidence, seed)
    seen = _representations(seen, "seen")
    unseen = _representations(unseen, "unseen")
    if seen.shape[1] != unseen.shape[1]:
        raise ValueError(f"seen and unseen must have the same dimension; got {seen.shape[1]} and {unseen.shape[1]}")
    n = min(seen.shape[0], unseen.shape[0])
    if max_per_set is not None:
        if isinstance(max_per_set, bool) or not isinstance(max_per_set, (int, np.integer)) or max_per_set < 1:
            raise ValueError(f"max_per_set must be a positive integer or None; got {max_per_set!r}")
        n = min(n, int(max_per_set))
    # Smallest training set: 2n points minus the largest held-out fold (ceil(n/folds) per set).
    train_size = 2 * (n - -(-n // folds))
    if n < folds or train_size < k:
        raise ValueError(
            f"too few representations: {n} per set (after balancing) for folds={folds} and k={k}; "
            "each set needs at least `folds` rows and each training split at least k points; "
            "pass more data, fewer folds or a smaller k"
        )
    seen = _prepare(seen, metric, "seen")
    unseen = _prepare(unseen, metric, "unseen")

    search = _NeighbourSearch(np.concatenate([seen, unseen]))
    domain = np.repeat(np.array([0, 1]), n)
    errors = np.empty(repeats)
    sampling_var = np.empty(repeats)
    for r, child in enumerate(np.random.SeedSequence(seed).spawn(repeats)):
        rng = np.random.default_rng(child)
        rows = np.concatenate([
            np.sort(rng.choice(seen.shape[0], n, replace=False)),
            seen.shape[0] + np.sort(rng.choice(unseen.shape[0], n, replace=False)),
        ])
        pred = _out_of_fold_predictions(search, rows, domain, int(k), _stratified_folds(domain, int(folds), rng))
        wrong = pred != domain
        e_seen, e_unseen = wrong[:n].mean(), wrong[n:].mean()
        errors[r] = 0.5 * (e_seen + e_unseen)  # balanced error (= pooled error here)
        sampling_var[r] = (e_seen * (1 - e_seen) + e_unseen * (1 - e_unseen)) / n  # of 1 - (e_seen + e_unseen)
    per_repeat = 1.0 - 2.0 * errors
    mean, low, high = _mean_ci(per_repeat, sampling_var, confidence)
    return HDivergence(
        value=_clip01(mean), ci_low=_clip01(low), ci_high=_clip01(high), errors=errors,
        per_repeat=per_repeat, n_per_set=int(n), k=int(k), metric=metric, confidence=float(confidence),
    )


@one_thread()
def ideal_joint_error(
    seen,
    seen_labels,
    unseen,
    unseen_labels,
    k: int = 1,
    folds: int = 5,
    seed: int | None = 0,
    repeats: int = 10,
    *,
    metric: str = "euclidean",
    max_per_set: int | None = None,
    shared_classes: bool = False,
    confidence: float = 0.95,
) -> IdealJointError:
    """Error λ of an ideal joint hypothesis, JRD Section 2 Eq. 3 / Ben-David et al. (2010).

    One k-nearest-neighbour classifier is trained on labelled representations of *both* sets (all
    seen and unseen classes together) and evaluated on held-out representations of both, with
    stratified ``folds``-fold splits as in :func:`h_divergence` (every point is predicted once per
    repeat; each repeat draws new splits, and a new subsample when ``max_per_set`` caps the sets).

    Normalization: ``value`` is the *mean* of the seen and unseen held-out errors, in ``[0, 1]``
    (the scale on which JRD Table 3 reports λ ≈ 0.31 on CUB); Ben-David's and JRD's written λ is
    the sum, ``.sum_of_errors``. The module docstring explains the choice.

    Args:
        seen, unseen: representations, shapes (n_seen, dim) and (n_unseen, dim).
        seen_labels, unseen_labels: integer class ids, one per row.
        k, folds, seed, repeats, metric, confidence: as in :func:`h_divergence`.
        max_per_set: optional cap on the number of representations drawn from each set per repeat.
        shared_classes: ``False`` (zero-shot: seen and unseen classes are disjoint, and overlapping
            ids raise an error, since they usually mean the unseen ids were renumbered from 0);
            ``True`` when both sets share one label space (domain adaptation).

    Returns:
        :class:`IdealJointError` with ``value``, ``ci_low``, ``ci_high``, per-repeat ``errors``,
        ``seen_errors`` and ``unseen_errors``.
    """
    _check_settings(k, folds, repeats, metric, confidence, seed)
    seen = _representations(seen, "seen")
    unseen = _representations(unseen, "unseen")
    if seen.shape[1] != unseen.shape[1]:
        raise ValueError(f"seen and unseen must have the same dimension; got {seen.shape[1]} and {unseen.shape[1]}")
    seen_labels = _labels(seen_labels, seen.shape[0], "seen_labels", "seen")
    unseen_labels = _labels(unseen_labels, unseen.shape[0], "unseen_labels", "unseen")
    common = np.intersect1d(seen_labels, unseen_labels)
    if common.size and not shared_classes:
        raise ValueError(
            f"seen and unseen share {common.size} class ids (e.g. {common[:5].tolist()}); zero-shot splits "
            "use disjoint classes, so give unseen classes their own ids (e.g. offset them by the number of "
            "seen classes), or pass shared_classes=True if both sets really share one label space"
        )
    n_s, n_u = seen.shape[0], unseen.shape[0]
    if max_per_set is not None:
        if isinstance(max_per_set, bool) or not isinstance(max_per_set, (int, np.integer)) or max_per_set < 1:
            raise ValueError(f"max_per_set must be a positive integer or None; got {max_per_set!r}")
        n_s, n_u = min(n_s, int(max_per_set)), min(n_u, int(max_per_set))
    total = n_s + n_u
    if min(n_s, n_u) < 1 or total < 2 * folds:
        raise ValueError(f"too few representations ({n_s} seen, {n_u} unseen) for folds={folds}; pass more data or fewer folds")
    seen = _prepare(seen, metric, "seen")
    unseen = _prepare(unseen, metric, "unseen")

    _, encoded = np.unique(np.concatenate([seen_labels, unseen_labels]), return_inverse=True)
    search = _NeighbourSearch(np.concatenate([seen, unseen]))
    is_unseen = np.repeat(np.array([False, True]), [n_s, n_u])
    seen_err = np.empty(repeats)
    unseen_err = np.empty(repeats)
    for r, child in enumerate(np.random.SeedSequence(seed).spawn(repeats)):
        rng = np.random.default_rng(child)
        si = np.sort(rng.choice(seen.shape[0], n_s, replace=False)) if n_s < seen.shape[0] else np.arange(n_s)
        ui = np.sort(rng.choice(unseen.shape[0], n_u, replace=False)) if n_u < unseen.shape[0] else np.arange(n_u)
        rows = np.concatenate([si, seen.shape[0] + ui])
        y = encoded[rows]
        fold = _stratified_folds(y, int(folds), rng)
        smallest_train = total - np.bincount(fold).max()
        if smallest_train < k:
            raise ValueError(f"k={k} exceeds the {smallest_train} training points of a fold; use a smaller k or fewer folds")
        wrong = _out_of_fold_predictions(search, rows, y, int(k), fold) != y
        seen_err[r] = wrong[~is_unseen].mean()
        unseen_err[r] = wrong[is_unseen].mean()
    errors = 0.5 * (seen_err + unseen_err)
    sampling_var = (seen_err * (1 - seen_err) / n_s + unseen_err * (1 - unseen_err) / n_u) / 4.0
    mean, low, high = _mean_ci(errors, sampling_var, confidence)
    return IdealJointError(
        value=_clip01(mean), ci_low=_clip01(low), ci_high=_clip01(high), errors=errors,
        seen_errors=seen_err, unseen_errors=unseen_err, k=int(k), metric=metric, confidence=float(confidence),
    )
