"""Tests of zslib.methods.cml.confusion: the confusion terms of CML (chen2022cml) and the paper's Lemmas 1-5.

Oracles: brute-force NumPy double loops over samples, NumPy eigenvalues, Monte Carlo sampling, and
torch.autograd.gradcheck in float64.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from zslib.methods.cml import confusion as R


def _batch(seed, n_classes=5, per_class=(1, 4), d=6, shift=0.0, dtype=torch.float64):
    """A labelled batch with unequal class sizes (so p_ij = 1/(N_I N_J) really matters)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(per_class[0], per_class[1] + 1, size=n_classes)
    labels = np.repeat(rng.choice(100, size=n_classes, replace=False), sizes)
    centres = rng.normal(size=(100, d)) * 2.0
    x = centres[labels] + rng.normal(size=(labels.size, d)) + shift
    perm = rng.permutation(labels.size)
    return torch.tensor(x[perm], dtype=dtype), torch.tensor(labels[perm])


def _ec_bruteforce(x, labels, i_class, j_class):
    """CML Eq. 3 literally: sum over i in I, j in J of p_ij ||x_i - x_j||^2 with p_ij = 1/(N_I N_J)."""
    x, labels = np.asarray(x), np.asarray(labels)
    xi, xj = x[labels == i_class], x[labels == j_class]
    total = 0.0
    for a in xi:
        for b in xj:
            total += float(np.sum((a - b) ** 2)) / (len(xi) * len(xj))
    return total


# ---------------------------------------------------------------------------------------------------
# Energy confusion (Eq. 3)


@pytest.mark.parametrize("seed", range(4))
def test_pairwise_energy_confusion_matches_bruteforce_eq3(seed):
    x, y = _batch(seed, shift=5.0)
    classes, ec = R.pairwise_energy_confusion(x, y)
    assert classes.tolist() == sorted(set(y.tolist()))
    for a, b in itertools.product(range(len(classes)), repeat=2):
        expected = 0.0 if a == b else _ec_bruteforce(x, y, classes[a].item(), classes[b].item())
        assert ec[a, b].item() == pytest.approx(expected, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_all_mode_is_mean_over_ordered_distinct_pairs(seed):
    x, y = _batch(seed, n_classes=6)
    value = R.energy_confusion(x, y, pairs="all")
    classes = sorted(set(y.tolist()))
    brute = np.mean([_ec_bruteforce(x, y, i, j) for i in classes for j in classes if i != j])
    assert value.item() == pytest.approx(brute, rel=1e-10)
    _, ec = R.pairwise_energy_confusion(x, y)
    k = len(classes)
    assert value.item() == pytest.approx(ec.sum().item() / (k * (k - 1)), rel=1e-10)


def test_random_mode_each_draw_is_one_pair_and_deterministic():
    x, y = _batch(0, n_classes=4)
    classes, ec = R.pairwise_energy_confusion(x, y)
    index = {c: i for i, c in enumerate(classes.tolist())}

    def draws(seed, n=200):
        g = torch.Generator().manual_seed(seed)
        return [R.energy_confusion(x, y, generator=g, return_pair=True) for _ in range(n)]

    first, again, other = draws(7), draws(7), draws(8)
    seen = set()
    for (v, (i, j)), (v2, pair2) in zip(first, again):
        assert i != j and (i, j) == pair2 and v.item() == v2.item()
        assert v.item() == pytest.approx(ec[index[i], index[j]].item(), rel=1e-12)
        assert v.item() == pytest.approx(_ec_bruteforce(x, y, i, j), rel=1e-10)
        seen.add((i, j))
    assert len(seen) == 12  # every ordered pair of the 4 classes is drawn in 200 draws
    assert [p for _, p in first] != [p for _, p in other]
    # the global generator is used without one, so torch.manual_seed makes it reproducible too
    torch.manual_seed(3)
    a = [R.energy_confusion(x, y, return_pair=True)[1] for _ in range(10)]
    torch.manual_seed(3)
    assert a == [R.energy_confusion(x, y, return_pair=True)[1] for _ in range(10)]


def test_energy_confusion_is_translation_invariant_and_stable_far_from_origin():
    x, y = _batch(1, shift=0.0)
    for pairs in ("all", "random"):
        g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
        near = R.energy_confusion(x, y, pairs=pairs, generator=g1)
        far = R.energy_confusion(x.float() + 1e4, y, pairs=pairs, generator=g2)  # float32, large offset
        assert far.item() == pytest.approx(near.item(), rel=1e-4)


def test_energy_confusion_gradcheck_float64():
    x, y = _batch(2, n_classes=4, d=3)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: R.energy_confusion(t, y, pairs="all"), (x,))
    # the same pair on every call: a fresh generator with a fixed seed each time
    assert torch.autograd.gradcheck(
        lambda t: R.energy_confusion(t, y, generator=torch.Generator().manual_seed(5)), (x,))
    assert torch.autograd.gradcheck(lambda t: R.pairwise_energy_confusion(t, y)[1], (x,))


def test_energy_confusion_gradient_pulls_classes_together():
    """Minimizing EC (it is added with lambda1 > 0, Eq. 11) moves each class towards the other."""
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [4.0, 0.0], [4.0, 1.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1])
    R.energy_confusion(x, y, pairs="all").backward()
    step = -x.grad  # gradient descent direction
    assert (step[:2, 0] > 0).all() and (step[2:, 0] < 0).all()


def test_energy_confusion_errors():
    x, y = _batch(0)
    with pytest.raises(ValueError, match="at least two classes"):
        R.energy_confusion(x, torch.zeros(len(y), dtype=torch.long))
    with pytest.raises(ValueError, match="must match"):
        R.energy_confusion(x, y[:-1])
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        R.energy_confusion(bad, y)
    with pytest.raises(ValueError, match="pairs must be"):
        R.energy_confusion(x, y, pairs="some")
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        R.energy_confusion(x[0], y[:1])
    with pytest.raises(TypeError, match="integer class ids"):
        R.energy_confusion(x, y.double())
    with pytest.raises(TypeError, match="floating-point"):
        R.energy_confusion(x.long(), y)
    with pytest.raises(TypeError, match="Generator"):
        R.energy_confusion(x, y, generator=3)


# ---------------------------------------------------------------------------------------------------
# Diversity confusion (Eq. 10) and Definition 1


def test_diversity_confusion_matches_bruteforce_and_gradcheck():
    x, _ = _batch(3, shift=1.5)
    brute = np.mean([sum(v * v for v in row) for row in x.tolist()])
    assert R.diversity_confusion(x).item() == pytest.approx(brute, rel=1e-12)
    xg = x[:6, :3].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(R.diversity_confusion, (xg,))
    g = torch.autograd.grad(R.diversity_confusion(xg), xg)[0]
    assert torch.allclose(g, 2 * xg.detach() / xg.shape[0])  # d/dx (1/b) sum ||x||^2 = 2x/b
    with pytest.raises(ValueError, match="NaN or infinite"):
        R.diversity_confusion(torch.tensor([[1.0, float("inf")]]))


@pytest.mark.parametrize("seed", range(4))
def test_definition1_diversity_is_sum_of_covariance_eigenvalues_and_trace_identity(seed):
    """Definition 1 (Eq. 6): v = sum of the eigenvalues of Sigma*. Definition 2 (Eq. 10): v = E||x||^2
    for a zero-mean mixture; in general E||x||^2 = tr Cov(x) + ||E x||^2 (the trace identity)."""
    x, _ = _batch(seed, shift=3.0)
    xn = x.numpy()
    eig = np.linalg.eigvalsh(np.cov(xn, rowvar=False, bias=True))
    v = R.diversity(x).item()
    assert v == pytest.approx(eig.sum(), rel=1e-10)
    mean_sq = float(np.sum(xn.mean(0) ** 2))
    assert mean_sq > 1.0  # the shifted batch really is off-centre, so the two quantities differ
    assert R.diversity_confusion(x).item() == pytest.approx(v + mean_sq, rel=1e-10)
    centred = x - x.mean(0)
    assert R.diversity_confusion(centred).item() == pytest.approx(R.diversity(centred).item(), rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_lemmas_3_4_and_eq7_on_gaussian_mixtures(seed):
    """Lemma 3 (E||z||^2 = tr Sigma + ||mu||^2), Lemma 4 (its mixture form, Eq. 9), Eq. 7 (Sigma* of a
    zero-mean mixture) and Definition 2 (tr Sigma* = E||x||^2), checked exactly and by Monte Carlo."""
    rng = np.random.default_rng(seed)
    c, d = 3, 4
    w = rng.dirichlet(np.ones(c))
    mu = rng.normal(size=(c, d)) * 2
    a = rng.normal(size=(c, d, d)) * 0.5
    cov = a @ a.transpose(0, 2, 1) + 0.1 * np.eye(d)
    m = R.gaussian_mixture_moments(w, mu, cov)
    assert m.expected_sq_norm.item() == pytest.approx(m.diversity.item() + float(np.sum((w @ mu) ** 2)), rel=1e-10)
    # Monte Carlo: sample the mixture
    n = 200_000
    comp = rng.choice(c, size=n, p=w)
    z = mu[comp] + np.einsum("nij,nj->ni", np.linalg.cholesky(cov)[comp], rng.normal(size=(n, d)))
    assert np.mean(np.sum(z ** 2, 1)) == pytest.approx(m.expected_sq_norm.item(), rel=0.02)
    assert np.allclose(np.cov(z, rowvar=False), m.covariance.numpy(), atol=0.1 * np.abs(m.covariance.numpy()).max())
    # re-centre the mixture (the paper's mu* = 0): Eq. 7's matrix is then the covariance, and v = E||x||^2
    mu0 = mu - w @ mu
    m0 = R.gaussian_mixture_moments(w, mu0, cov)
    assert torch.allclose(m0.second_moment, m0.covariance, atol=1e-12)
    assert m0.diversity.item() == pytest.approx(m0.expected_sq_norm.item(), rel=1e-12)
    assert m0.diversity.item() == pytest.approx(np.linalg.eigvalsh(m0.covariance.numpy()).sum(), rel=1e-10)
    with pytest.raises(ValueError, match="sum to 1"):
        R.gaussian_mixture_moments(w * 2, mu, cov)


# ---------------------------------------------------------------------------------------------------
# Lemmas 1 and 2: EC versus GED and MMD


def _ged_bruteforce(x, y, rho):
    x, y = np.asarray(x), np.asarray(y)
    exy = np.mean([rho(a, b) for a in x for b in y])
    exx = np.mean([rho(a, b) for a in x for b in x])
    eyy = np.mean([rho(a, b) for a in y for b in y])
    return 2 * exy - exx - eyy


def _mmd2_bruteforce(x, y):
    x, y = np.asarray(x), np.asarray(y)
    k = lambda a, b: float(a @ b)  # noqa: E731  degree-1 homogeneous polynomial kernel
    return (np.mean([k(a, b) for a in x for b in x]) + np.mean([k(a, b) for a in y for b in y])
            - 2 * np.mean([k(a, b) for a in x for b in y]))


@pytest.mark.parametrize("seed", range(3))
def test_ged_and_mmd_match_bruteforce(seed):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(size=(7, 3)) + 1.0)
    y = torch.tensor(rng.normal(size=(5, 3)))
    sq = lambda a, b: float(np.sum((a - b) ** 2))  # noqa: E731
    eu = lambda a, b: float(np.sqrt(np.sum((a - b) ** 2)))  # noqa: E731
    assert R.generalized_energy_distance(x, y).item() == pytest.approx(_ged_bruteforce(x, y, sq), rel=1e-10)
    assert R.generalized_energy_distance(x, y, metric="euclidean").item() == pytest.approx(
        _ged_bruteforce(x, y, eu), rel=1e-8)
    assert R.mmd2_linear(x, y).item() == pytest.approx(_mmd2_bruteforce(x, y), rel=1e-10)
    with pytest.raises(ValueError, match="same feature dimension"):
        R.mmd2_linear(x, y[:, :2])
    with pytest.raises(ValueError, match="metric must be"):
        R.generalized_energy_distance(x, y, metric="cosine")


@pytest.mark.parametrize("seed", range(6))
def test_lemma1_ec_at_least_half_ged_and_lemma2_ec_at_least_mmd2(seed):
    """Lemma 1: L_ec(X_I, X_J) >= 1/2 D_{E,rho}(X_I, X_J) with rho = ||. - .||^2.
    Lemma 2: L_ec(X_I, X_J) >= gamma_k^2(X_I, X_J) with k(a, b) = a.b.
    Both gaps equal tr Sigma_I + tr Sigma_J (the within-class spreads), and 1/2 GED = MMD^2 here."""
    x, y = _batch(seed, n_classes=3, per_class=(2, 6))
    classes = sorted(set(y.tolist()))
    for i, j in itertools.permutations(classes, 2):
        xi, xj = x[y == i], x[y == j]
        ec = _ec_bruteforce(x, y, i, j)
        half_ged = 0.5 * R.generalized_energy_distance(xi, xj).item()
        mmd2 = R.mmd2_linear(xi, xj).item()
        spread = R.diversity(xi).item() + R.diversity(xj).item()
        assert spread > 0.1
        assert ec >= half_ged and ec >= mmd2
        assert ec - half_ged == pytest.approx(spread, rel=1e-9)
        assert half_ged == pytest.approx(mmd2, rel=1e-9)


def test_lemmas_1_2_equality_when_each_class_is_one_point():
    """Equality in Lemmas 1 and 2 holds exactly when neither class has any spread."""
    xi = torch.tensor([[1.0, 2.0]] * 3, dtype=torch.float64)
    xj = torch.tensor([[-1.0, 0.5]] * 2, dtype=torch.float64)
    x, y = torch.cat([xi, xj]), torch.tensor([0, 0, 0, 1, 1])
    ec = R.energy_confusion(x, y, pairs="all").item()
    assert ec == pytest.approx(0.5 * R.generalized_energy_distance(xi, xj).item(), rel=1e-12)
    assert ec == pytest.approx(R.mmd2_linear(xi, xj).item(), rel=1e-12)
    assert ec == pytest.approx(4.0 + 2.25)


# ---------------------------------------------------------------------------------------------------
# Lemma 5: Hoeffding bound on the mini-batch DC


def test_hoeffding_bound_formula_and_errors():
    assert R.hoeffding_bound(128, 0.1) == pytest.approx(math.sqrt(math.log(40) / 256))
    assert R.hoeffding_bound(50, 0.2, zeta=3.0) == pytest.approx(3.0 * math.sqrt(math.log(20) / 100))
    for bad in ({"batch_size": 0, "delta": 0.1}, {"batch_size": 8, "delta": 0.0},
                {"batch_size": 8, "delta": 2.5}, {"batch_size": 8, "delta": 0.1, "zeta": -1.0},
                {"batch_size": 8.0, "delta": 0.1}):
        with pytest.raises(ValueError):
            R.hoeffding_bound(**bad)


@pytest.mark.parametrize("batch_size,delta", [(16, 0.2), (128, 0.05)])
def test_lemma5_hoeffding_bound_holds_on_sampled_minibatches(batch_size, delta):
    """Lemma 5: for i.i.d. batches with ||x||^2 in [0, zeta], |DC_batch - E||x||^2| <= zeta sqrt(log(4/delta)/(2b))
    with probability >= 1 - delta/2. Features: points in the unit ball (zeta = 1) whose squared norm is
    0 or 1 with equal odds, the worst case for Hoeffding, so the bound is tested where it is tightest."""
    gen = torch.Generator().manual_seed(batch_size)
    n_batches, d = 4000, 8
    direction = torch.nn.functional.normalize(torch.randn(n_batches, batch_size, d, generator=gen), dim=-1)
    radius = torch.randint(0, 2, (n_batches, batch_size, 1), generator=gen).double()
    x = direction.double() * radius  # E||x||^2 = 1/2 exactly
    estimates = torch.stack([R.diversity_confusion(b) for b in x])
    deviation = (estimates - 0.5).abs()
    bound = R.hoeffding_bound(batch_size, delta, zeta=1.0)
    violations = (deviation > bound).double().mean().item()
    assert violations <= delta / 2
    # the test can fail: a bound a third as wide is violated far more often than delta/2
    assert (deviation > bound / 3).double().mean().item() > delta / 2
