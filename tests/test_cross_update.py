"""Tests of zslib.methods.zsml.cross_update: ZSML's continuous labels (Eq. 3), cross-update regression loss
(Eq. 4-8), its gradients (Eq. 9-10) and the label step of Algorithm 1 (xu2019zsml).

Oracles: the closed forms of Eq. 3 and Eq. 6, autograd and gradcheck (float64) for every hinge term,
a dense grid search for the minimizer of Eq. 8, and brute-force checks of the pair sampler.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zslib.methods.zsml import cross_update as cu

ALPHA, BETA = 0.3, 0.7


def _pairs(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    positive = torch.rand(n, generator=g) < 0.5
    return positive, g


# ----------------------------------------------------------------------------------------------------
# Eq. 3


def test_continuous_labels_formula_and_ends():
    d2 = torch.tensor([0.0, 0.5, 1.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    pos = torch.tensor([True, True, True, False, False, False])
    y = cu.continuous_labels(d2, pos, alpha=ALPHA)
    torch.testing.assert_close(y, torch.tensor([1.0, 0.85, 0.7, 0.3, 0.15, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.3, 0.4])  # the values of Table 8
def test_continuous_labels_ranges_and_monotone(alpha):
    g = torch.Generator().manual_seed(int(alpha * 10))
    d2 = torch.rand(500, generator=g, dtype=torch.float64).clamp(1e-6, 1 - 1e-6)
    pos = torch.rand(500, generator=g) < 0.5
    y = cu.continuous_labels(d2, pos, alpha=alpha)
    beta = 1 - alpha
    assert bool(((y[pos] > beta) & (y[pos] < 1)).all())
    assert bool(((y[~pos] > 0) & (y[~pos] < alpha)).all())
    for group in (pos, ~pos):  # strictly decreasing in the distance
        order = d2[group].argsort()
        assert bool((y[group][order].diff() < 0).all())


def test_normalized_sq_distances_fill_unit_interval_and_respect_scale():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(30, 5)), rng.normal(size=(30, 5))
    d2 = cu.normalized_sq_distances(a, b)
    raw = ((a - b) ** 2).sum(1)
    np.testing.assert_allclose(d2.numpy(), raw / raw.max(), rtol=1e-12)
    assert float(d2.max()) == 1.0
    np.testing.assert_allclose(cu.normalized_sq_distances(a, b, scale=2 * raw.max()).numpy(),
                               raw / (2 * raw.max()), rtol=1e-12)
    with pytest.raises(ValueError, match="exceeds scale"):
        cu.normalized_sq_distances(a, b, scale=raw.max() / 2)


def test_alpha_beta_and_input_checks():
    d2, pos = torch.tensor([0.5]), torch.tensor([True])
    with pytest.raises(ValueError, match="alpha <= beta"):
        cu.continuous_labels(d2, pos, alpha=0.6)  # beta = 0.4 < alpha
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cu.continuous_labels(torch.tensor([1.5]), pos)
    with pytest.raises(TypeError, match="boolean"):
        cu.continuous_labels(d2, torch.tensor([1]))
    with pytest.raises(ValueError, match="one flag per pair"):
        cu.continuous_labels(d2, torch.tensor([True, False]))
    with pytest.raises(ValueError, match="one value per pair"):
        cu.similarity_loss(torch.zeros(3), torch.zeros(2), torch.zeros(3, dtype=torch.bool))


# ----------------------------------------------------------------------------------------------------
# hinge terms and gradients (Eq. 7-10)


def _near_each_bound(n_each=6, dtype=torch.float64):
    """Values on both sides of every bound (never exactly on a kink), for positive and negative pairs."""
    offsets = torch.linspace(-0.25, 0.25, n_each, dtype=dtype) + 0.013
    v, p = [], []
    for bound, is_pos in ((1.0, True), (BETA, True), (ALPHA, False), (0.0, False)):
        v.append(bound + offsets)
        p.append(torch.full((n_each,), is_pos))
    return torch.cat(v), torch.cat(p)


def test_range_penalty_each_hinge_term_by_hand():
    v = torch.tensor([1.2, 0.5, 0.8, 0.5, -0.1, 0.2], dtype=torch.float64)
    pos = torch.tensor([True, True, True, False, False, False])
    want = torch.tensor([0.2**2, 0.2**2, 0.0, 0.2**2, 0.1**2, 0.0], dtype=torch.float64)
    torch.testing.assert_close(cu.range_penalty(v, pos), want)


def test_range_penalty_gradient_matches_autograd_for_each_hinge_term():
    v, pos = _near_each_bound()
    v.requires_grad_(True)
    (auto,) = torch.autograd.grad(cu.range_penalty(v, pos).sum(), v)
    torch.testing.assert_close(cu.range_penalty_grad(v, pos), auto)
    # each term separately: [v-1]_+^2 and [beta-v]_+^2 (positives), [v-alpha]_+^2 and [-v]_+^2 (negatives)
    for block, sign in zip(range(4), (+1, -1, +1, -1)):
        sl = slice(6 * block, 6 * block + 6)
        g = cu.range_penalty_grad(v[sl], pos[sl])
        violated = g != 0
        assert bool(violated.any()) and bool((torch.sign(g[violated]) == sign).all())
    assert torch.autograd.gradcheck(lambda t: cu.range_penalty(t, pos), (v,))


@pytest.mark.parametrize("which", ["similarity", "label"])
def test_cross_update_gradient_is_eq7_8_differentiated(which):
    v, pos = _near_each_bound()
    g = torch.Generator().manual_seed(1)
    target = torch.rand(v.shape, generator=g, dtype=torch.float64)
    v = v.clone().requires_grad_(True)
    loss = cu.similarity_loss(v, target, pos) if which == "similarity" else cu.label_loss(v, target, pos)
    (auto,) = torch.autograd.grad(loss, v)
    torch.testing.assert_close(cu.cross_update_gradient(v, target, pos), auto)
    fn = (lambda t: cu.similarity_loss(t, target, pos)) if which == "similarity" else \
        (lambda t: cu.label_loss(t, target, pos))
    assert torch.autograd.gradcheck(fn, (v,))


def test_printed_eq9_sign_of_lower_bound_terms_cancels_the_pull_below_the_range():
    """Eq. 9 as printed adds [beta - s]_+; the derivative subtracts it. With the printed sign, a positive
    pair below beta gets (s - y + beta - s) / (2N) = (beta - y) / (2N) whatever s is: no stronger pull
    the further it falls (against the paper's own remark). The true gradient grows with the violation."""
    y, pos = torch.tensor([0.75], dtype=torch.float64), torch.tensor([True])
    true_grads, printed = [], []
    for s0 in (0.6, 0.3, -0.5):
        s = torch.tensor([s0], dtype=torch.float64, requires_grad=True)
        (auto,) = torch.autograd.grad(cu.similarity_loss(s, y, pos), s)
        assert float(auto) == pytest.approx(2 * ((s0 - 0.75) - (BETA - s0)))
        true_grads.append(float(auto))
        printed.append(0.5 * ((s0 - 0.75) + max(0.0, BETA - s0)))  # 1/(2N) (s - y + [beta - s]_+), N = 1
    assert printed == pytest.approx([0.5 * (BETA - 0.75)] * 3)
    assert true_grads[0] > true_grads[1] > true_grads[2]


def test_each_loss_reaches_only_its_own_variable():
    pos, g = _pairs()
    s = torch.rand(40, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.rand(40, generator=g, dtype=torch.float64, requires_grad=True)
    cu.similarity_loss(s, y, pos).backward()
    assert s.grad is not None and y.grad is None  # network step: labels fixed
    s.grad = None
    cu.label_loss(y, s, pos).backward()
    assert y.grad is not None and s.grad is None  # label step: predictions fixed


def test_objective_is_eq6_inside_the_ranges():
    pos, g = _pairs(seed=2)
    lo, hi = cu.label_bounds(pos, like=torch.zeros(40, dtype=torch.float64))
    s = lo + (hi - lo) * torch.rand(40, generator=g, dtype=torch.float64)
    y = lo + (hi - lo) * torch.rand(40, generator=g, dtype=torch.float64)
    got = cu.cross_update_objective(s, y, pos, lam=0.1)
    torch.testing.assert_close(got, (1 + 0.1) * ((s - y) ** 2).mean())


# ----------------------------------------------------------------------------------------------------
# the label step (Algorithm 1 step 4) and its fixed point


def test_label_step_is_a_gradient_step_on_eq8():
    v, pos = _near_each_bound()
    s = torch.rand(v.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    y = v.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(cu.label_loss(y, s, pos), y)
    new = cu.label_step(y, s, pos, lr=0.5, lam=0.1)
    torch.testing.assert_close(new, y.detach() - 0.5 * 0.1 * grad)
    assert not new.requires_grad


def test_label_step_inside_the_range_is_a_moving_average_towards_s():
    pos, g = _pairs(seed=4)
    lo, hi = cu.label_bounds(pos, like=torch.zeros(40, dtype=torch.float64))
    y = lo + (hi - lo) * torch.rand(40, generator=g, dtype=torch.float64)
    s = lo + (hi - lo) * torch.rand(40, generator=g, dtype=torch.float64)
    lr, lam = 3.0, 0.1
    eta = 2 * lr * lam / 40
    torch.testing.assert_close(cu.label_step(y, s, pos, lr=lr, lam=lam), (1 - eta) * y + eta * s)
    # nothing moves where the prediction already equals the label, or when lr * lam = 0
    torch.testing.assert_close(cu.label_step(y, y.clone(), pos, lr=lr, lam=lam), y, rtol=0, atol=0)
    torch.testing.assert_close(cu.label_step(y, s, pos, lr=lr, lam=0.0), y, rtol=0, atol=0)


def test_label_fixed_point_minimizes_eq8_and_is_where_label_steps_converge():
    s = torch.tensor([1.3, 0.9, 0.4, 0.5, 0.2, -0.4], dtype=torch.float64)
    pos = torch.tensor([True, True, True, False, False, False])
    want = torch.tensor([(1.3 + 1) / 2, 0.9, (0.4 + BETA) / 2, (0.5 + ALPHA) / 2, 0.2, -0.4 / 2],
                        dtype=torch.float64)
    fixed = cu.label_fixed_point(s, pos)
    torch.testing.assert_close(fixed, want)
    grid = torch.linspace(-1, 2, 300_001, dtype=torch.float64)  # step 1e-5: brute-force the minimizer
    for i in range(len(s)):
        per_pair = (grid - s[i]) ** 2 + cu.range_penalty(grid, pos[i].expand(grid.shape))
        assert float(grid[per_pair.argmin()]) == pytest.approx(float(fixed[i]), abs=2e-5)
    y = torch.tensor([0.8, 0.95, 0.9, 0.1, 0.25, 0.05], dtype=torch.float64)
    for _ in range(400):
        y = cu.label_step(y, s, pos, lr=10.0, lam=0.1)  # eta = 2 * 10 * 0.1 / 6 = 1/3
    torch.testing.assert_close(y, fixed, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------------
# the pair set P


def test_random_pairs_fraction_classes_and_determinism():
    labels = np.repeat(np.arange(7), [1, 2, 3, 4, 5, 6, 9])
    first, second = cu.random_pairs(labels, 1000, positive_fraction=0.25, seed=3)
    same = labels[first] == labels[second]
    assert same.sum() == 250 and not (first == second).any()
    assert not np.isin(first[same], np.flatnonzero(labels == 0)).any()  # a singleton has no positive pair
    f2, s2 = cu.random_pairs(labels, 1000, positive_fraction=0.25, seed=3)
    assert np.array_equal(first, f2) and np.array_equal(second, s2)
    assert not np.array_equal(first, cu.random_pairs(labels, 1000, positive_fraction=0.25, seed=4)[0])


def test_random_pairs_uniform_mode_hits_the_positive_rate_of_all_pairs():
    labels = np.repeat(np.arange(4), [5, 10, 15, 20])
    first, second = cu.random_pairs(labels, 40_000, seed=0)
    n = len(labels)
    rate = sum(c * (c - 1) for c in (5, 10, 15, 20)) / (n * (n - 1))
    assert not (first == second).any()
    assert np.mean(labels[first] == labels[second]) == pytest.approx(rate, abs=0.01)
    assert cu.uniform_positive_share(labels) == pytest.approx(rate, rel=1e-12)
    assert cu.uniform_positive_share(np.repeat(np.arange(5), 3)) == pytest.approx(2 / 14)  # (n/C - 1) / (n - 1)
    with pytest.raises(ValueError, match="at least 2 samples"):
        cu.uniform_positive_share([0])
    with pytest.raises(ValueError, match="no negative pairs"):
        cu.random_pairs(np.zeros(5, dtype=int), 10, positive_fraction=0.5)
