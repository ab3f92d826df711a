"""Tests of zslib.methods.jrd.theory: the H-divergence and λ of Ben-David et al. (2010) as JRD Section 2 uses them.

Constructed cases with known answers: identical distributions (d_H = 0), separable sets (d_H = 1),
two Gaussians (d_H between the 1-NN Cover-Hart bound and the total variation distance),
separable / indistinguishable classes (λ = 0 / λ = 1 - 1/C), and a brute-force numpy k-NN oracle.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import norm

from zslib.methods.jrd import theory


def gaussian(rng, n, dim, shift=0.0):
    x = rng.normal(size=(n, dim))
    x[:, 0] += shift
    return x


def class_clusters(rng, n_classes, per_class, dim, spread, first_label=0, offset=0.0):
    """Classes whose centres lie far apart on a random scale (spread: within-class std)."""
    centres = rng.normal(size=(n_classes, dim)) * 10.0 + offset
    labels = np.repeat(np.arange(n_classes), per_class)
    x = centres[labels] + spread * rng.normal(size=(labels.size, dim))
    return x, labels + first_label


# ------------------------------------------------------------------------------------ h_divergence


def test_identical_distributions_give_zero_divergence():
    rng = np.random.default_rng(0)
    seen, unseen = gaussian(rng, 600, 32), gaussian(rng, 600, 32)
    d = theory.h_divergence(seen, unseen, repeats=5)
    assert d.value < 0.08
    assert d.ci_low <= 0.0 + 1e-12 <= d.ci_high  # the band covers 0
    assert np.all(np.abs(d.errors - 0.5) < 0.06)  # the domain classifier is at chance
    assert d.n_per_set == 600


def test_separable_sets_give_maximum_divergence():
    rng = np.random.default_rng(1)
    seen, unseen = gaussian(rng, 300, 16), gaussian(rng, 200, 16, shift=50.0)
    d = theory.h_divergence(seen, unseen, repeats=3)
    assert d.value == 1.0 and d.ci_low == 1.0 and d.ci_high == 1.0
    assert np.all(d.errors == 0.0)
    assert d.proxy_a_distance == 2.0  # Ben-David's scale is twice ours
    assert d.n_per_set == 200  # balanced by subsampling the larger set


def test_divergence_grows_with_mean_shift():
    rng = np.random.default_rng(2)
    base = gaussian(rng, 400, 8)
    noise = gaussian(rng, 400, 8)
    values = []
    for shift in [0.0, 1.0, 2.0, 3.0, 6.0]:
        other = noise.copy()
        other[:, 0] += shift
        values.append(theory.h_divergence(base, other, repeats=3).value)
    assert np.all(np.diff(values) > 0), values
    assert values[0] < 0.1 and values[-1] > 0.95


def test_divergence_between_cover_hart_bound_and_total_variation():
    # Two unit Gaussians in 2-D shifted by delta: the Bayes balanced error is Phi(-delta/2), so the
    # best possible d = 1 - 2 err is the total variation 2 Phi(delta/2) - 1, and a 1-NN classifier
    # (asymptotic error <= 2R(1-R), Cover & Hart 1967) gets at least 1 - 4R(1-R).
    rng = np.random.default_rng(3)
    delta = 2.0
    d = theory.h_divergence(gaussian(rng, 1500, 2), gaussian(rng, 1500, 2, shift=delta), repeats=2)
    bayes = norm.cdf(-delta / 2)
    total_variation = 1 - 2 * bayes
    cover_hart = 1 - 4 * bayes * (1 - bayes)
    assert cover_hart - 0.04 < d.value < total_variation + 0.02, (cover_hart, d.value, total_variation)


def test_divergence_equals_brute_force_one_nn_on_a_single_split():
    # Oracle: with a fixed 3-fold split, reproduce the out-of-fold 1-NN predictions in numpy.
    rng = np.random.default_rng(4)
    x = np.concatenate([gaussian(rng, 60, 5), gaussian(rng, 60, 5, shift=1.0)])
    y = np.repeat([0, 1], 60)
    fold = theory._stratified_folds(y, 3, np.random.default_rng(9))
    assert np.bincount(fold[y == 0]).tolist() == [20, 20, 20]  # stratified
    search = theory._NeighbourSearch(x)
    pred = theory._out_of_fold_predictions(search, np.arange(120), y, 1, fold)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    d2[fold[:, None] == fold[None, :]] = np.inf
    assert np.array_equal(pred, y[d2.argmin(axis=1)])
    # k = 3 majority vote (two classes: no ties) against numpy, on both search paths
    nearest3 = np.argsort(d2, axis=1, kind="stable")[:, :3]
    expected = (y[nearest3].sum(axis=1) >= 2).astype(int)
    assert np.array_equal(theory._out_of_fold_predictions(search, np.arange(120), y, 3, fold), expected)
    search.dist = None  # force the scikit-learn path used for large pools
    assert np.array_equal(theory._out_of_fold_predictions(search, np.arange(120), y, 3, fold), expected)


def test_vote_breaks_ties_by_the_nearest_neighbour():
    labels = np.array([[2, 0, 0, 2], [0, 2, 2, 0], [1, 1, 0, 0]])  # nearest first
    assert theory._vote(labels, 3).tolist() == [2, 0, 1]


def test_divergence_is_deterministic_given_the_seed():
    rng = np.random.default_rng(5)
    seen, unseen = gaussian(rng, 300, 16), gaussian(rng, 250, 16, shift=0.7)
    a = theory.h_divergence(seen, unseen, seed=7, repeats=4)
    b = theory.h_divergence(seen, unseen, seed=7, repeats=4)
    c = theory.h_divergence(seen, unseen, seed=8, repeats=4)
    assert np.array_equal(a.errors, b.errors) and a.value == b.value
    assert not np.array_equal(a.errors, c.errors)
    # more repeats extend, not change, the sequence of repeats
    assert np.array_equal(theory.h_divergence(seen, unseen, seed=7, repeats=6).errors[:4], a.errors)


def test_cosine_metric_ignores_vector_length():
    rng = np.random.default_rng(6)
    seen, unseen = gaussian(rng, 200, 8, shift=1.0), gaussian(rng, 200, 8)
    scale = rng.uniform(0.1, 10.0, size=(200, 1))
    cos = theory.h_divergence(seen, unseen, metric="cosine", repeats=2)
    assert np.array_equal(theory.h_divergence(seen * scale, unseen, metric="cosine", repeats=2).errors, cos.errors)
    # the Euclidean metric does see the lengths: scaling the seen set apart makes it separable
    assert theory.h_divergence(seen * 100.0, unseen, repeats=2).value > cos.value + 0.3


def test_torch_tensors_and_max_per_set():
    rng = np.random.default_rng(7)
    seen, unseen = gaussian(rng, 300, 8), gaussian(rng, 300, 8, shift=1.0)
    a = theory.h_divergence(torch.from_numpy(seen), torch.from_numpy(unseen).requires_grad_(), repeats=2)
    assert np.array_equal(a.errors, theory.h_divergence(seen, unseen, repeats=2).errors)
    assert theory.h_divergence(seen, unseen, max_per_set=50, repeats=2).n_per_set == 50


def test_large_pool_path_matches_precomputed_path(monkeypatch):
    rng = np.random.default_rng(8)
    seen, unseen = gaussian(rng, 150, 6), gaussian(rng, 150, 6, shift=0.8)
    expected = theory.h_divergence(seen, unseen, k=3, repeats=2).errors
    monkeypatch.setattr(theory, "_PRECOMPUTE_MAX", 10)
    assert np.array_equal(theory.h_divergence(seen, unseen, k=3, repeats=2).errors, expected)


# ------------------------------------------------------------------------------- ideal_joint_error


def test_perfect_joint_classifier_gives_zero_lambda():
    rng = np.random.default_rng(10)
    seen, ys = class_clusters(rng, 8, 30, 16, spread=0.1)
    unseen, yu = class_clusters(rng, 6, 30, 16, spread=0.1, first_label=8)
    lam = theory.ideal_joint_error(seen, ys, unseen, yu, repeats=3)
    assert lam.value == 0.0 and lam.ci_high == 0.0
    assert np.all(lam.seen_errors == 0) and np.all(lam.unseen_errors == 0)


def test_overlapping_classes_give_large_lambda():
    # All classes of both sets drawn from one Gaussian: a 1-NN label is a random one of the
    # 2C classes, so the error is 1 - 1/(2C) in expectation.
    rng = np.random.default_rng(11)
    c, per = 10, 40
    seen, unseen = gaussian(rng, c * per, 16), gaussian(rng, c * per, 16)
    ys, yu = np.repeat(np.arange(c), per), np.repeat(np.arange(c, 2 * c), per)
    lam = theory.ideal_joint_error(seen, ys, unseen, yu, repeats=3)
    assert abs(lam.value - (1 - 1 / (2 * c))) < 0.04
    assert lam.ci_low <= 1 - 1 / (2 * c) <= lam.ci_high
    assert lam.sum_of_errors == pytest.approx(2 * lam.value)


def test_lambda_is_the_mean_of_the_two_domain_errors():
    # Seen classes separable, unseen classes indistinguishable: lambda = (0 + (1 - 1/C)) / 2,
    # since the unseen set sits far from the seen one and its C classes are confused among themselves.
    rng = np.random.default_rng(12)
    seen, ys = class_clusters(rng, 5, 40, 8, spread=0.1)
    c = 5
    unseen = gaussian(rng, c * 40, 8, shift=500.0)
    yu = np.repeat(np.arange(100, 100 + c), 40)
    lam = theory.ideal_joint_error(seen, ys, unseen, yu, k=1, repeats=4)
    assert np.all(lam.seen_errors == 0)
    assert abs(lam.unseen_errors.mean() - (1 - 1 / c)) < 0.06
    assert np.allclose(lam.errors, 0.5 * (lam.seen_errors + lam.unseen_errors))
    assert lam.value == pytest.approx(lam.errors.mean())


def test_lambda_grows_with_class_overlap_and_is_deterministic():
    rng = np.random.default_rng(13)
    values = []
    for spread in [0.5, 5.0, 8.0, 16.0]:
        r = np.random.default_rng(99)  # same centres, only the spread changes
        seen, ys = class_clusters(r, 6, 30, 8, spread=spread)
        unseen, yu = class_clusters(r, 6, 30, 8, spread=spread, first_label=6)
        values.append(theory.ideal_joint_error(seen, ys, unseen, yu, k=3, repeats=2).value)
    assert values[0] == 0.0 and np.all(np.diff(values) > 0) and values[-1] > 0.5, values
    seen, ys = class_clusters(rng, 6, 30, 8, spread=6.0)
    unseen, yu = class_clusters(rng, 6, 30, 8, spread=6.0, first_label=6)
    a = theory.ideal_joint_error(seen, ys, unseen, yu, seed=3, repeats=3)
    b = theory.ideal_joint_error(seen, ys, unseen, yu, seed=3, repeats=3)
    assert np.array_equal(a.errors, b.errors)


# ------------------------------------------------------------------------------------- bad input


def test_bad_input_raises_clear_errors():
    rng = np.random.default_rng(14)
    x, y = rng.normal(size=(50, 4)), np.arange(50) % 5
    with pytest.raises(ValueError, match="seen is empty"):
        theory.h_divergence(np.empty((0, 4)), x)
    with pytest.raises(ValueError, match="unseen contains 1 NaN"):
        bad = x.copy()
        bad[3, 2] = np.nan
        theory.h_divergence(x, bad)
    with pytest.raises(ValueError, match="same dimension"):
        theory.h_divergence(x, rng.normal(size=(50, 5)))
    with pytest.raises(ValueError, match="2-D"):
        theory.h_divergence(x[:, 0], x)
    with pytest.raises(ValueError, match="classifier"):
        theory.h_divergence(x, x, classifier="svm")
    with pytest.raises(ValueError, match="metric"):
        theory.h_divergence(x, x, metric="manhattan")
    with pytest.raises(ValueError, match="too few"):
        theory.h_divergence(x[:3], x, folds=5)
    with pytest.raises(ValueError, match="folds"):
        theory.h_divergence(x, x, folds=1)
    with pytest.raises(ValueError, match="all-zero rows"):
        theory.h_divergence(np.zeros((10, 4)), x, metric="cosine")
    with pytest.raises(ValueError, match="unseen_labels has 49 entries"):
        theory.ideal_joint_error(x, y, x, y[:-1] + 10)
    with pytest.raises(ValueError, match="share 5 class ids"):
        theory.ideal_joint_error(x, y, x, y)
    with pytest.raises(ValueError, match="seen_labels contains NaN"):
        theory.ideal_joint_error(x, np.full(50, np.nan), x, y + 10)
    with pytest.raises(ValueError, match="exceeds"):
        theory.ideal_joint_error(x[:6], y[:6], x[:6], y[:6] + 10, k=20, folds=2)
    # shared label spaces are allowed on request (domain adaptation)
    assert 0.0 <= theory.ideal_joint_error(x, y, x + 0.01, y, shared_classes=True, repeats=1).value <= 1.0
