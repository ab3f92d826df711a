"""Tests of zslib.methods.jrd.intra.intra_class_distance (JRD Eq. 4, chu2020jrd).

Oracles: a brute-force double loop over same-class pairs, the centroid identity, and gradcheck.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from zslib.methods.jrd.intra import gaussian_intra_class_distance, intra_class_distance


def _batch(seed, sizes=(1, 2, 3, 5), d=4):
    rng = np.random.default_rng(seed)
    labels = np.repeat(rng.choice(50, size=len(sizes), replace=False), sizes)
    x = rng.normal(size=(labels.size, d)) * 3 + rng.normal(size=(50, d))[labels] * 10
    perm = rng.permutation(labels.size)
    return torch.tensor(x[perm], dtype=torch.float64), torch.tensor(labels[perm])


def _bruteforce(x, labels, reduction="mean"):
    x, labels = x.numpy(), labels.numpy()
    per_class = []
    for c in np.unique(labels):
        members = x[labels == c]
        pairs = list(itertools.combinations(range(len(members)), 2))
        if pairs:
            per_class.append(np.mean([0.5 * np.sum((members[i] - members[j]) ** 2) for i, j in pairs]))
    return np.mean(per_class) if reduction == "mean" else np.sum(per_class)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_matches_bruteforce_pairs_of_eq4(seed, reduction):
    x, y = _batch(seed)
    got = intra_class_distance(x, y, reduction=reduction).item()
    assert got == pytest.approx(_bruteforce(x, y, reduction), rel=1e-10)


def test_equals_unbiased_spread_around_class_mean():
    x, y = _batch(7, sizes=(4, 4, 4))
    expected = np.mean([
        (x[y == c] - x[y == c].mean(0)).pow(2).sum().item() / (4 - 1) for c in torch.unique(y)
    ])
    assert intra_class_distance(x, y).item() == pytest.approx(expected, rel=1e-12)


def test_zero_for_collapsed_classes_and_invariant_to_translation_and_order():
    y = torch.tensor([0, 0, 1, 1, 1])
    centres = torch.tensor([[1.0, 2.0], [-3.0, 0.5]], dtype=torch.float64)
    assert intra_class_distance(centres[y], y).item() == pytest.approx(0.0, abs=1e-15)
    x, y = _batch(3)
    base = intra_class_distance(x, y).item()
    assert intra_class_distance(x + 100.0, y).item() == pytest.approx(base, rel=1e-9)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    assert intra_class_distance(x[perm], y[perm]).item() == pytest.approx(base, rel=1e-12)
    # scaling the features by s scales the penalty by s^2
    assert intra_class_distance(2.0 * x, y).item() == pytest.approx(4.0 * base, rel=1e-12)


def test_gradcheck_float64():
    x, y = _batch(1, sizes=(2, 3, 1), d=3)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: intra_class_distance(t, y), (x,))


def test_minimizing_pulls_each_class_to_its_mean():
    x, y = _batch(2, sizes=(3, 4))
    means_before = {int(c): x[y == c].mean(0) for c in torch.unique(y)}
    x = x.clone().requires_grad_(True)
    intra_class_distance(x, y).backward()
    step = x.detach() - 0.05 * x.grad
    assert intra_class_distance(step, y) < intra_class_distance(x.detach(), y)
    for c, m in means_before.items():  # the gradient moves samples towards, not the class mean itself
        torch.testing.assert_close(step[y == c].mean(0), m)


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="two or more samples"):
        intra_class_distance(torch.randn(3, 2), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction"):
        intra_class_distance(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), reduction="max")
    with pytest.raises(ValueError, match="must match"):
        intra_class_distance(torch.randn(4, 2), torch.tensor([0, 0, 1]))
    with pytest.raises(TypeError, match="integer"):
        intra_class_distance(torch.randn(2, 2), torch.tensor([0.0, 0.0]))


# ------------------------------------------------------------------------------------------------
# Eq. 4 read as a Gaussian kernel: gaussian_intra_class_distance


def _bruteforce_gaussian(x, labels, reduction="mean", sigma2=2.0):
    x, labels = x.numpy(), labels.numpy()
    per_class = []
    for c in np.unique(labels):
        members = x[labels == c]
        pairs = list(itertools.combinations(range(len(members)), 2))
        if pairs:
            per_class.append(np.mean([1.0 - np.exp(-np.sum((members[i] - members[j]) ** 2) / sigma2)
                                      for i, j in pairs]))
    return np.mean(per_class) if reduction == "mean" else np.sum(per_class)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gaussian_form_matches_bruteforce_pairs(seed, reduction):
    x, y = _batch(seed)
    x = x / 10.0  # distances of order 1, where the kernel is neither 0 nor 1
    got = gaussian_intra_class_distance(x, y, reduction=reduction).item()
    assert got == pytest.approx(_bruteforce_gaussian(x, y, reduction), rel=1e-10)
    assert gaussian_intra_class_distance(x, y, bandwidth=0.7).item() == pytest.approx(
        _bruteforce_gaussian(x, y, sigma2=0.7), rel=1e-10)


def test_gaussian_form_starts_as_the_squared_form_and_saturates():
    """1 - exp(-d^2/2) = d^2/2 - ...: on compact classes the two readings of Eq. 4 agree; far apart, the
    Gaussian one is bounded by 1 and its pull on a pair, d exp(-d^2/2), peaks at d = 1."""
    x, y = _batch(4)
    for eps in (1e-3, 1e-4):
        ratio = gaussian_intra_class_distance(eps * x, y) / intra_class_distance(eps * x, y)
        assert ratio.item() == pytest.approx(1.0, abs=10 * eps)
    assert gaussian_intra_class_distance(1e3 * x, y).item() == pytest.approx(1.0, abs=1e-12)
    pull = []
    for d in (0.5, 1.0, 2.0):
        pair = torch.tensor([[0.0], [d]], dtype=torch.float64, requires_grad=True)
        gaussian_intra_class_distance(pair, torch.tensor([0, 0])).backward()
        pull.append(pair.grad[1, 0].item())
        assert pull[-1] == pytest.approx(d * math.exp(-d * d / 2.0), rel=1e-12)
    assert pull[1] > pull[0] and pull[1] > pull[2]


def test_gaussian_form_gradcheck_and_errors():
    x, y = _batch(1, sizes=(2, 3, 1), d=3)
    x = (x / 10.0).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: gaussian_intra_class_distance(t, y), (x,))
    with pytest.raises(ValueError, match="two or more samples"):
        gaussian_intra_class_distance(torch.randn(3, 2), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="bandwidth"):
        gaussian_intra_class_distance(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), bandwidth=0.0)
    with pytest.raises(ValueError, match="reduction"):
        gaussian_intra_class_distance(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), reduction="max")
