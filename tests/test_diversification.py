"""Tests of zslib.methods.jrd.diversification: JRD's joint representation similarity (chu2020jrd, Eqs. 6-11), its
Table 2 variants, the comparison regularizers JMMD and JIntra (Eqs. 15-16) and the link to CML's energy
confusion.

Oracles: brute-force NumPy loops over sample pairs, layers and bandwidths in float64; the definitions
of the kernels written out entry by entry; zslib.methods.cml.confusion (CML Eq. 3) for the energy-confusion
identity; torch.autograd.gradcheck in float64.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
import torch

from zslib.methods.jrd import diversification as D
from zslib.methods.cml import confusion as R


def _batch(seed, sizes=(1, 3, 2, 4, 1), dims=(7, 5, 4), dtype=torch.float64):
    """Unequal class sizes (so the n_I n_J weights matter), singleton classes included, shuffled."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(rng.choice(50, size=len(sizes), replace=False), sizes)
    layers = []
    for d in dims:
        centres = rng.normal(size=(50, d)) * 1.5
        layers.append(centres[labels] + rng.normal(size=(labels.size, d)))
    perm = rng.permutation(labels.size)
    return [torch.tensor(x[perm], dtype=dtype) for x in layers], torch.tensor(labels[perm])


# ---------------------------------------------------------------------------------------------------
# Brute-force oracles (float64 NumPy, explicit loops)


def _bf_tau(x):
    m = len(x)
    return sum(float(np.sum((x[i] - x[j]) ** 2)) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))


def _bf_kernel_value(x, i, j, scales, tau):
    d2 = float(np.sum((x[i] - x[j]) ** 2))
    return sum(math.exp(-d2 / (s * tau)) for s in scales) / len(scales)


def _bf_joint(layers, scales, combine="product"):
    """Joint kernel matrix entry by entry: product (or sum) over layers of the Gaussian mixtures."""
    xs = [np.asarray(x) for x in layers]
    taus = [_bf_tau(x) for x in xs]
    m = len(xs[0])
    k = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            vals = [_bf_kernel_value(x, i, j, sc, t) for x, sc, t in zip(xs, scales, taus)]
            k[i, j] = np.prod(vals) if combine == "product" else np.sum(vals)
    return k


def _bf_inner(k, labels, a, b):
    """<C(P_a), C(P_b)>: mean of the joint kernel over i in a, j in b (Eqs. 7-8)."""
    ia = [i for i in range(len(labels)) if labels[i] == a]
    ib = [j for j in range(len(labels)) if labels[j] == b]
    return sum(k[i, j] for i in ia for j in ib) / (len(ia) * len(ib))


def _bf_jrs_reg(k, labels):
    """Eqs. 10-11: sum of the joint kernel over different-class sample pairs / their number."""
    total, pairs = 0.0, 0
    for i in range(len(labels)):
        for j in range(len(labels)):
            if labels[i] != labels[j]:
                total += k[i, j]
                pairs += 1
    return total / pairs


def _bf_class_pair_mean(k, labels, d_fn):
    """Sum over ordered class pairs I != J of n_I n_J D(I, J), divided by N_pairs."""
    classes = sorted(set(labels))
    n = {c: sum(1 for y in labels if y == c) for c in classes}
    num = sum(n[a] * n[b] * d_fn(a, b) for a in classes for b in classes if a != b)
    return num / sum(n[a] * n[b] for a in classes for b in classes if a != b)


JRD_SCALES = [(0.5, 1.0, 2.0), (0.5, 1.0, 2.0), (1.0,)]


# ---------------------------------------------------------------------------------------------------
# Bandwidth and kernels


@pytest.mark.parametrize("seed", range(3))
def test_bandwidth_is_mean_off_diagonal_squared_distance(seed):
    (x, *_), _ = _batch(seed)
    assert D.bandwidth(x).item() == pytest.approx(_bf_tau(x.numpy()), rel=1e-12)


def test_bandwidth_carries_no_gradient():
    (x, *_), _ = _batch(0)
    x = x.clone().requires_grad_(True)
    tau = D.bandwidth(x)
    assert not tau.requires_grad and tau.grad_fn is None


def test_adaptive_tau_gives_the_gradient_of_a_constant_tau():
    """Autograd through the kernel with the self-adaptive tau equals autograd with tau fixed at the same
    value; a tau left in the graph gives a different gradient (so this test can fail)."""
    (x, *_), y = _batch(1)
    x = x.clone().requires_grad_(True)
    tau = D.bandwidth(x).item()
    (g_adaptive,) = torch.autograd.grad(D.jrs_regularizer([x], y, [(0.5, 1.0, 2.0)]), x)
    fixed = functools.partial(D.gaussian_kernel, scales=(0.5, 1.0, 2.0), tau=tau)
    (g_fixed,) = torch.autograd.grad(D.jrs_regularizer([x], y, [fixed]), x)
    torch.testing.assert_close(g_adaptive, g_fixed, rtol=1e-12, atol=1e-14)

    def with_grad_tau(t):  # the same kernel, but tau differentiable
        d2 = torch.cdist(t, t).pow(2)
        tau_g = d2.sum() / (t.shape[0] * (t.shape[0] - 1))
        return torch.stack([torch.exp(-d2 / (s * tau_g)) for s in (0.5, 1.0, 2.0)]).mean(0)

    (g_graph,) = torch.autograd.grad(D.jrs_regularizer([x], y, [with_grad_tau]), x)
    assert (g_graph - g_fixed).abs().max() > 1e-3 * g_fixed.abs().max()


def test_detached_tau_gradient_points_inwards_so_descent_inflates_the_scale():
    """The value is scale invariant, so with tau in the graph the gradient is orthogonal to x (Euler);
    with tau detached (JRD's choice) it has a strictly negative radial part: a descent step grows x."""
    layers, y = _batch(2)
    x = layers[0].clone().requires_grad_(True)
    (g,) = torch.autograd.grad(D.jrs_regularizer([x], y), x)
    assert (g * x).sum().item() < -1e-3 * g.norm().item() * x.norm().item()

    def with_grad_tau(t):
        d2 = torch.cdist(t, t).pow(2)
        tau = d2.sum() / (t.shape[0] * (t.shape[0] - 1))
        return torch.stack([torch.exp(-d2 / (s * tau)) for s in (0.5, 1.0, 2.0)]).mean(0)

    (g_full,) = torch.autograd.grad(D.jrs_regularizer([x], y, [with_grad_tau]), x)
    assert abs((g_full * x).sum().item()) < 1e-10 * g_full.norm().item() * x.norm().item()


@pytest.mark.parametrize("scales", [(0.5, 1.0, 2.0), (1.0,), (0.25, 4.0)])
def test_gaussian_kernel_matches_definition(scales):
    (x, *_), _ = _batch(2)
    k = D.gaussian_kernel(x, scales)
    tau = _bf_tau(x.numpy())
    for i, j in itertools.product(range(x.shape[0]), repeat=2):
        assert k[i, j].item() == pytest.approx(_bf_kernel_value(x.numpy(), i, j, scales, tau), rel=1e-10, abs=1e-14)
    assert torch.all(torch.diagonal(k) == 1.0)


def test_other_kernels_match_definitions():
    (x, *_), _ = _batch(3, dims=(4,))
    xn = x.numpy()
    m = len(xn)
    d1 = np.array([[np.abs(xn[i] - xn[j]).sum() for j in range(m)] for i in range(m)])
    sigma = d1[~np.eye(m, dtype=bool)].mean()
    dots = np.array([[float(xn[i] @ xn[j]) for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(D.laplace_kernel(x).numpy(), np.exp(-d1 / sigma), rtol=1e-10)
    np.testing.assert_allclose(D.laplace_kernel(x, (0.5, 2.0), sigma=1.3).numpy(),
                               (np.exp(-d1 / 0.65) + np.exp(-d1 / 2.6)) / 2, rtol=1e-10)
    np.testing.assert_allclose(D.polynomial_kernel(x, 5, 1.0).numpy(), (dots + 1) ** 5, rtol=1e-10)
    np.testing.assert_allclose(D.linear_kernel(x).numpy(), dots, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(D.exponential_kernel(x / 3).numpy(), np.exp(dots / 9), rtol=1e-10)


# ---------------------------------------------------------------------------------------------------
# JRS against brute force (Eqs. 6-8, 10-11)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("combine", ["product", "sum"])
def test_kernel_mean_inner_products_match_double_loop(seed, combine):
    layers, y = _batch(seed)
    means = D.kernel_mean_embeddings(layers, y, JRD_SCALES, combine)
    k = _bf_joint(layers, JRD_SCALES, combine)
    labels = y.tolist()
    assert means.classes.tolist() == sorted(set(labels))
    for (a, ca), (b, cb) in itertools.product(enumerate(means.classes.tolist()), repeat=2):
        assert means.inner[a, b].item() == pytest.approx(_bf_inner(k, labels, ca, cb), rel=1e-10)
    assert means.counts.tolist() == [labels.count(c) for c in means.classes.tolist()]
    expected_self = 1.0 if combine == "product" else 3.0  # normalized mixtures: k(x, x) = 1 per layer
    torch.testing.assert_close(means.self_kernel, torch.full_like(means.self_kernel, expected_self))


@pytest.mark.parametrize("seed", range(3))
def test_jrs_regularizer_matches_double_loop(seed):
    layers, y = _batch(seed)
    k = _bf_joint(layers, JRD_SCALES)
    value = D.jrs_regularizer(layers, y, JRD_SCALES, alpha=0.7)
    assert value.item() == pytest.approx(0.7 * _bf_jrs_reg(k, y.tolist()), rel=1e-10)
    # the same number as the n_I n_J-weighted mean of the class-pair similarities (Eq. 10)
    labels = y.tolist()
    weighted = _bf_class_pair_mean(k, labels, lambda a, b: _bf_inner(k, labels, a, b))
    assert value.item() == pytest.approx(0.7 * weighted, rel=1e-10)


def test_jrs_is_symmetric_in_permutation_and_label_names():
    layers, y = _batch(4)
    base = D.jrs_regularizer(layers, y, JRD_SCALES)
    perm = torch.randperm(y.shape[0], generator=torch.Generator().manual_seed(0))
    relabel = y * 7 + 1000
    assert D.jrs_regularizer([x[perm] for x in layers], relabel[perm], JRD_SCALES).item() == pytest.approx(base.item(), rel=1e-12)


def test_jrs_falls_as_classes_separate_at_fixed_bandwidth():
    """Two classes drawn from one distribution are similar; moving one away lowers JRS towards 0."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1] * 20)
    kern = [functools.partial(D.gaussian_kernel, tau=D.bandwidth(x).item())]
    values = [D.jrs_regularizer([x + shift * y[:, None].to(x.dtype)], y, kern).item() for shift in (0, 2, 5, 20)]
    assert values[0] > 0.4 and all(a > b for a, b in zip(values, values[1:])) and values[-1] < 1e-12


def test_self_adaptive_bandwidth_makes_jrs_scale_invariant():
    """tau scales with the squared distances, so multiplying a layer by a constant changes nothing: the
    regularizer sees the *relative* arrangement of the classes, never their absolute spread."""
    layers, y = _batch(3)
    base = D.jrs_regularizer(layers, y, JRD_SCALES).item()
    scaled = D.jrs_regularizer([layers[0] * 50.0, layers[1] * 0.01, layers[2]], y, JRD_SCALES).item()
    assert scaled == pytest.approx(base, rel=1e-10)
    # ... so far-apart classes do not drive it to 0: its floor for two classes at distance >> spread is
    # the mixture at d^2 = 2 tau, (e^-4 + e^-2 + e^-1) / 3 (here about half of the pairs are between classes)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=g, dtype=torch.float64) * 1e-3 + 100.0 * torch.tensor([0, 1] * 20)[:, None]
    floor = (math.exp(-4) + math.exp(-2) + math.exp(-1)) / 3
    assert D.jrs_regularizer([x], torch.tensor([0, 1] * 20)).item() == pytest.approx(floor, rel=0.05)


# ---------------------------------------------------------------------------------------------------
# Variants (Table 2) and the comparison regularizers (Eqs. 15-16)


def test_mrd_sum_is_sum_of_per_layer_regularizers():
    layers, y = _batch(5)
    k_layers = [_bf_joint([x], [sc]) for x, sc in zip(layers, JRD_SCALES)]
    brute = sum(_bf_jrs_reg(k, y.tolist()) for k in k_layers)
    assert D.jrs_regularizer(layers, y, JRD_SCALES, "sum").item() == pytest.approx(brute, rel=1e-10)


def test_variants_use_the_layers_of_table_2():
    layers, y = _batch(6, dims=(9, 6))
    pooled, raw = layers
    proxies = torch.tensor(np.random.default_rng(0).normal(size=(11, 6)))
    emb = raw / raw.norm(dim=1, keepdim=True)
    cls = emb @ (proxies / proxies.norm(dim=1, keepdim=True)).T
    # the class level is Eq. 9: cosines to every proxy, entry by entry
    for i, c in itertools.product(range(emb.shape[0]), range(proxies.shape[0])):
        cos = float(raw[i] @ proxies[c] / (raw[i].norm() * proxies[c].norm()))
        assert D.class_level_representation(raw, proxies)[i, c].item() == pytest.approx(cos, rel=1e-12)
    expected = {
        "jrd": ([pooled, emb, cls], JRD_SCALES, "product"),
        "jrd_c": ([pooled, emb], JRD_SCALES[:2], "product"),
        "jrd_pooling": ([emb, cls], JRD_SCALES[1:], "product"),
        "mrd": ([emb], JRD_SCALES[1:2], "product"),
        "mrd_sum": ([pooled, emb, cls], JRD_SCALES, "sum"),
    }
    assert set(expected) == set(D.VARIANTS)
    for variant, (ls, scales, combine) in expected.items():
        r = D.jrd_representations(pooled, raw, proxies, variant)
        value = D.jrs_regularizer(r.layers, y, r.kernels, r.combine).item()
        brute = _bf_jrs_reg(_bf_joint(ls, scales, combine), y.tolist())
        assert value == pytest.approx(brute, rel=1e-10), variant


@pytest.mark.parametrize("seed", range(3))
def test_jmmd_and_jintra_match_their_definitions(seed):
    layers, y = _batch(seed)
    k = _bf_joint(layers, JRD_SCALES)
    labels = y.tolist()

    def norm2(a):
        return _bf_inner(k, labels, a, a)

    mmd = _bf_class_pair_mean(k, labels, lambda a, b: norm2(a) + norm2(b) - 2 * _bf_inner(k, labels, a, b))
    intra = _bf_class_pair_mean(k, labels, lambda a, b: norm2(a) + norm2(b))
    assert D.jmmd_regularizer(layers, y, JRD_SCALES, alpha=0.3).item() == pytest.approx(-0.3 * mmd, rel=1e-10)
    assert D.jintra_regularizer(layers, y, JRD_SCALES, alpha=0.3).item() == pytest.approx(-0.3 * intra, rel=1e-10)
    # Eq. 14's decomposition, regularizer by regularizer
    jrs = D.jrs_regularizer(layers, y, JRD_SCALES)
    jintra = D.jintra_regularizer(layers, y, JRD_SCALES)
    assert D.jmmd_regularizer(layers, y, JRD_SCALES).item() == pytest.approx((jintra + 2 * jrs).item(), rel=1e-12)


def test_jintra_rewards_compact_classes():
    """Shrinking every class towards its mean raises the norms of the class embeddings: JIntra falls."""
    (x, *_), y = _batch(7, sizes=(4, 4, 4, 4), dims=(5,))
    onehot = torch.nn.functional.one_hot(torch.unique(y, return_inverse=True)[1]).to(x.dtype)
    means = (onehot.T @ x) / onehot.sum(0)[:, None]
    tight = means[torch.unique(y, return_inverse=True)[1]] + 0.2 * (x - means[torch.unique(y, return_inverse=True)[1]])
    tau = D.bandwidth(x).item()
    kern = [functools.partial(D.gaussian_kernel, tau=tau)]
    assert D.jintra_regularizer([tight], y, kern) < D.jintra_regularizer([x], y, kern)


# ---------------------------------------------------------------------------------------------------
# CML's energy confusion is the linear-kernel case


@pytest.mark.parametrize("seed", range(4))
def test_energy_confusion_is_linear_kernel_jrs_identity(seed):
    (x, *_), y = _batch(seed, sizes=(2, 3, 1, 5, 2, 4), dims=(6,))
    x = x + 3.0  # off-centre, so the second moments m_I are not trivial
    classes, e_k = D.kernel_energy_confusion([x], y, [D.linear_kernel])
    classes_ec, ec = R.pairwise_energy_confusion(x, y)
    assert classes.tolist() == classes_ec.tolist()
    off = ~torch.eye(len(classes), dtype=torch.bool)
    torch.testing.assert_close(e_k[off], ec[off], rtol=1e-10, atol=1e-10)
    # written out: EC = m_I + m_J - 2 <mu_I, mu_J>, the last being the linear-kernel JRS
    means = D.kernel_mean_embeddings([x], y, [D.linear_kernel])
    m = torch.stack([x[y == c].pow(2).sum(1).mean() for c in classes])
    torch.testing.assert_close(means.self_kernel, m)
    torch.testing.assert_close((m[:, None] + m[None, :] - 2 * means.inner)[off], ec[off], rtol=1e-10, atol=1e-10)
    # CML's "all pairs" batch value is the unweighted mean over ordered class pairs
    assert R.energy_confusion(x, y, pairs="all").item() == pytest.approx(e_k[off].mean().item(), rel=1e-10)


def test_energy_confusion_on_unit_sphere_is_two_minus_twice_linear_jrs():
    (x, *_), y = _batch(8, sizes=(3, 3, 3, 3), dims=(5,))
    x = x / x.norm(dim=1, keepdim=True)
    means = D.kernel_mean_embeddings([x], y, [D.linear_kernel])
    _, ec = R.pairwise_energy_confusion(x, y)
    off = ~torch.eye(4, dtype=torch.bool)
    torch.testing.assert_close(ec[off], (2 - 2 * means.inner)[off], rtol=1e-10, atol=1e-10)
    # balanced batch: the n_I n_J weights of Eq. 11 are equal, so the batch means agree too
    assert R.energy_confusion(x, y, pairs="all").item() == pytest.approx(
        2 - 2 * D.jrs_regularizer([x], y, [D.linear_kernel]).item(), rel=1e-10)


def test_gaussian_energy_confusion_is_two_minus_twice_jrs():
    layers, y = _batch(9)
    _, e = D.kernel_energy_confusion(layers, y, JRD_SCALES)
    means = D.kernel_mean_embeddings(layers, y, JRD_SCALES)
    torch.testing.assert_close(e, 2 - 2 * means.inner)


# ---------------------------------------------------------------------------------------------------
# Gradients


def _reg(kind):
    return {"jrs": D.jrs_regularizer, "jmmd": D.jmmd_regularizer, "jintra": D.jintra_regularizer}[kind]


@pytest.mark.parametrize("kind", ["jrs", "jmmd", "jintra"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_finite_with_one_image_per_class(kind, dtype):
    g = torch.Generator().manual_seed(0)
    pooled = torch.randn(10, 16, generator=g, dtype=dtype).relu().requires_grad_(True)
    emb = torch.randn(10, 8, generator=g, dtype=dtype, requires_grad=True)
    proxies = torch.randn(10, 8, generator=g, dtype=dtype, requires_grad=True)
    y = torch.arange(10)
    r = D.jrd_representations(pooled, emb, proxies, "jrd")
    value = _reg(kind)(r.layers, y, r.kernels, r.combine)
    grads = torch.autograd.grad(value, [pooled, emb, proxies], allow_unused=True)
    assert torch.isfinite(value)
    for grad in grads:
        assert grad is not None and torch.isfinite(grad).all()
    if kind == "jrs":
        assert all(grad.abs().sum() > 0 for grad in grads)


@pytest.mark.parametrize("kind", ["jrs", "jmmd", "jintra"])
@pytest.mark.parametrize("kernel", ["gaussian", "laplace"])
def test_identical_samples_give_finite_values_and_zero_gradients(kind, kernel):
    """tau = 0 is floored: a collapsed batch gives kernel 1 everywhere, no NaN, and no gradient."""
    x = torch.full((6, 4), 0.3, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 2, 3])
    assert D.bandwidth(x).item() == pytest.approx(torch.finfo(torch.float32).eps)
    spec = JRD_SCALES[0] if kernel == "gaussian" else D.laplace_kernel
    value = _reg(kind)([x], y, [spec])
    (grad,) = torch.autograd.grad(value, x)
    assert torch.isfinite(value) and torch.all(grad == 0)
    assert value.item() == pytest.approx({"jrs": 1.0, "jmmd": 0.0, "jintra": -2.0}[kind])


@pytest.mark.parametrize("kind, variant", [("jrs", "jrd"), ("jrs", "mrd_sum"), ("jrs", "jrd_pooling"),
                                           ("jmmd", "jrd"), ("jintra", "jrd")])
def test_gradcheck_through_representations(kind, variant):
    """float64 gradcheck w.r.t. pooled features, raw embedding and proxies. The bandwidths are fixed
    (computed once): autograd treats tau as a constant, finite differences would move it."""
    g = torch.Generator().manual_seed(1)
    pooled = torch.randn(7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    emb = torch.randn(7, 4, generator=g, dtype=torch.float64, requires_grad=True)
    proxies = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    r0 = D.jrd_representations(pooled, emb, proxies, variant)
    taus = [D.bandwidth(x).item() for x in r0.layers]

    def fn(p, e, w):
        r = D.jrd_representations(p, e, w, variant)
        kernels = [functools.partial(D.gaussian_kernel, scales=s, tau=t) for s, t in zip(r.kernels, taus)]
        return _reg(kind)(r.layers, y, kernels, r.combine)

    assert torch.autograd.gradcheck(fn, (pooled, emb, proxies), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gradcheck_other_kernels():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 1, 1, 2, 2, 3])
    fixed_laplace = functools.partial(D.laplace_kernel, sigma=2.0)
    for kern in (fixed_laplace, D.linear_kernel, functools.partial(D.polynomial_kernel, degree=2),
                 D.exponential_kernel):
        assert torch.autograd.gradcheck(lambda t: D.jrs_regularizer([t], y, [kern]), (x,), eps=1e-6, atol=1e-8)


def test_kernels_ignore_autocast():
    """Inside a mixed-precision region the result is the float32 one, not a 16-bit approximation."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=g).relu() * 5
    y = torch.arange(64) // 4
    reference = D.jrs_regularizer([x], y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = D.jrs_regularizer([x], y)
    assert value.dtype == torch.float32 and value.item() == pytest.approx(reference.item(), rel=1e-6)


# ---------------------------------------------------------------------------------------------------
# Input checks


def test_bad_inputs_get_clear_errors():
    layers, y = _batch(0)
    with pytest.raises(ValueError, match="only one"):
        D.jrs_regularizer(layers, torch.zeros_like(y))
    with pytest.raises(ValueError, match="rows"):
        D.jrs_regularizer([layers[0], layers[1][:-1]], y)
    with pytest.raises(ValueError, match="one kernel per layer"):
        D.jrs_regularizer(layers, y, JRD_SCALES[:2])
    with pytest.raises(ValueError, match="combine"):
        D.jrs_regularizer(layers, y, JRD_SCALES, combine="max")
    with pytest.raises(TypeError, match="kernels\\[0\\]"):
        D.jrs_regularizer(layers[:1], y, ["gauss"])
    with pytest.raises(TypeError, match="list"):
        D.jrs_regularizer(layers[0], y)
    with pytest.raises(ValueError, match="variant"):
        D.jrd_representations(layers[0], layers[1], None, "jrd-c")
    with pytest.raises(ValueError, match="pooled"):
        D.jrd_representations(None, layers[1], None, "jrd_c")
    with pytest.raises(ValueError, match="proxies"):
        D.jrd_representations(None, layers[1], None, "jrd_pooling")
    with pytest.raises(ValueError, match="at least 2"):
        D.bandwidth(layers[0][:1])
    with pytest.raises(ValueError, match="alpha"):
        D.jrs_regularizer(layers, y, alpha=-1.0)
    with pytest.raises(ValueError, match="NaN"):
        D.jrs_regularizer([layers[0] * float("nan")], y)


def test_jrd_representations_take_the_mixture_sizes_of_the_pooling_and_embedding_layers():
    torch.manual_seed(0)
    pooled, emb, proxies = torch.randn(6, 5), torch.randn(6, 4), torch.randn(3, 4)
    r = D.jrd_representations(pooled, emb, proxies, "jrd", mixture=(5, 2))
    assert r.kernels == [D.mixture_scales(5), D.mixture_scales(2), D.CLASS_LEVEL_SCALES]
    default = D.jrd_representations(pooled, emb, proxies, "jrd")
    assert default.kernels == [D.GAUSSIAN_SCALES, D.GAUSSIAN_SCALES, (1.0,)]
    with pytest.raises(ValueError, match=r"\(K, K'\)"):
        D.jrd_representations(pooled, emb, proxies, "jrd", mixture=(3,))
    with pytest.raises(ValueError, match="has none"):
        D.jrd_representations(pooled, emb, proxies, "jrd", kernel="laplace", mixture=(1, 1))
