"""Oracle tests for zslib.engine.losses.

Values and gradients are compared in float64 with pytorch-metric-learning (PML, test-only oracle)
wherever it has the same loss, configured so that both sides compute the same quantity (same
distance, same pairs/triplets, same reducer). The binomial deviance, which PML lacks, is checked
against a brute-force loop written from CML Eq. 14 / DeML Eq. 5 and with gradcheck.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zslib.engine import losses as L

pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
from pytorch_metric_learning import distances as pml_dist  # noqa: E402
from pytorch_metric_learning import miners as pml_miners  # noqa: E402
from pytorch_metric_learning import reducers as pml_red  # noqa: E402

TOL = dict(rtol=1e-9, atol=1e-11)  # float64 agreement between two implementations


def batch(n_classes=6, per_class=4, dim=16, seed=0, shuffle=True, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    if shuffle:
        labels = labels[torch.randperm(labels.numel(), generator=g)]
    # class centres plus noise: a mix of easy and hard pairs
    centres = torch.randn(n_classes, dim, generator=g, dtype=dtype)
    x = centres[labels] * 0.7 + torch.randn(labels.numel(), dim, generator=g, dtype=dtype)
    return x, labels


def value_and_grad(fn, x, labels, *params):
    x = x.detach().clone().requires_grad_(True)
    v = fn(x, labels)
    grads = torch.autograd.grad(v, [x, *params])
    return v.detach(), grads


def assert_same(ours, theirs, x, labels, params_ours=(), params_theirs=(), tol=TOL):
    v1, g1 = value_and_grad(ours, x, labels, *params_ours)
    v2, g2 = value_and_grad(theirs, x, labels, *params_theirs)
    assert v1.item() > 0, "a test batch whose loss is 0 would test nothing"
    torch.testing.assert_close(v1, v2.to(v1.dtype), **tol)
    for a, b in zip(g1, g2):
        assert a.abs().max() > 0
        if a.shape != b.shape:  # PML stores class weights as (D, C), zslib as (C, D)
            b = b.t()
        torch.testing.assert_close(a, b, **tol)


# ----------------------------------------------------------------------------- PML oracles
@pytest.mark.parametrize("reduction,reducer", [("mean", pml_red.MeanReducer()),
                                               ("nonzero_mean", pml_red.AvgNonZeroReducer())])
def test_contrastive_matches_pml(reduction, reducer):
    x, y = batch()
    pml = pml_losses.ContrastiveLoss(pos_margin=0.3, neg_margin=1.2, reducer=reducer)
    ours = lambda e, l: L.contrastive_loss(e, l, pos_margin=0.3, neg_margin=1.2, reduction=reduction)  # noqa: E731
    assert_same(ours, pml, x, y)


def test_contrastive_squared_matches_loop_oracle():
    x, y = batch(n_classes=3, per_class=3, dim=5, seed=1)
    xn = torch.nn.functional.normalize(x, dim=1).numpy()
    pos, neg = [], []
    for i in range(len(y)):
        for j in range(len(y)):
            if i == j:
                continue
            d = np.linalg.norm(xn[i] - xn[j])
            if y[i] == y[j]:
                pos.append(max(d - 0.2, 0.0) ** 2)
            else:
                neg.append(max(1.1 - d, 0.0) ** 2)
    got = L.contrastive_loss(x, y, pos_margin=0.2, neg_margin=1.1, squared=True)
    assert got.item() == pytest.approx(np.mean(pos) + np.mean(neg), rel=1e-12)


@pytest.mark.parametrize("squared", [True, False])
@pytest.mark.parametrize("reduction,reducer", [("mean", pml_red.MeanReducer()),
                                               ("nonzero_mean", pml_red.AvgNonZeroReducer())])
def test_triplet_all_matches_pml(squared, reduction, reducer):
    x, y = batch()
    pml = pml_losses.TripletMarginLoss(margin=0.1, reducer=reducer,
                                       distance=pml_dist.LpDistance(power=2 if squared else 1))
    ours = lambda e, l: L.triplet_margin_loss(e, l, margin=0.1, squared=squared, reduction=reduction)  # noqa: E731
    assert_same(ours, pml, x, y)


def _pml_with_miner(loss, miner):
    return lambda e, l: loss(e, l, miner(e, l))


@pytest.mark.parametrize("squared,margin", [(True, 0.2), (False, 0.2), (False, 0.01)])
def test_triplet_semihard_matches_pml_miner(squared, margin):
    """PML: TripletMarginMiner('semihard') keeps 0 < d_an - d_ap <= margin; MeanReducer. Margin 0.01 on
    distances: Adapt-Adv's loss (Sec. 5.3, ``zslib.methods.adapt_adv.PAPER_TRIPLET``)."""
    x, y = batch(seed=2) if margin >= 0.1 else batch(n_classes=8, per_class=8, seed=2)  # some gaps <= 0.01
    dist = pml_dist.LpDistance(power=2 if squared else 1)
    miner = pml_miners.TripletMarginMiner(margin=margin, type_of_triplets="semihard", distance=dist)
    n_mined = len(miner(x, y)[0])
    n_all = len(L.triplet_mask(y).nonzero())
    assert 0 < n_mined < n_all  # the mining really selects a proper subset
    pml = pml_losses.TripletMarginLoss(margin=margin, distance=dist, reducer=pml_red.MeanReducer())
    ours = lambda e, l: L.triplet_margin_loss(e, l, margin=margin, mining="semihard", squared=squared)  # noqa: E731
    assert_same(ours, _pml_with_miner(pml, miner), x, y)


@pytest.mark.parametrize("squared", [True, False])
def test_triplet_batch_hard_matches_pml_miner(squared):
    x, y = batch(seed=3)
    dist = pml_dist.LpDistance(power=2 if squared else 1)
    miner = pml_miners.BatchHardMiner(distance=dist)
    pml = pml_losses.TripletMarginLoss(margin=0.1, distance=dist, reducer=pml_red.MeanReducer())
    ours = lambda e, l: L.triplet_margin_loss(e, l, margin=0.1, mining="batch_hard", squared=squared)  # noqa: E731
    assert_same(ours, _pml_with_miner(pml, miner), x, y)


def test_triplet_float32_matches_pml():
    x, y = batch(dtype=torch.float32, seed=4)
    pml = pml_losses.TripletMarginLoss(margin=0.1, distance=pml_dist.LpDistance(power=2),
                                       reducer=pml_red.MeanReducer())
    assert_same(lambda e, l: L.triplet_margin_loss(e, l), pml, x, y, tol=dict(rtol=1e-5, atol=1e-6))


@pytest.mark.parametrize("normalize", [False, True])
def test_n_pair_matches_pml(normalize):
    """PML NPairsLoss: anchor = first row of a class, positive = second row, dot products
    (PML's DotProductSimilarity normalizes by default; ours does not, so the flag is passed)."""
    x, y = batch(per_class=3, seed=5)
    pml = pml_losses.NPairsLoss(distance=pml_dist.DotProductSimilarity(normalize_embeddings=normalize))
    assert_same(lambda e, l: L.n_pair_loss(e, l, normalize=normalize), pml, x, y)


def test_n_pair_all_negatives_matches_loop_oracle():
    """CML Eq. 13 as written: every other-class row is a negative of anchor x_i."""
    x, y = batch(n_classes=3, per_class=3, dim=4, seed=6)
    xs, ys = x.numpy(), y.tolist()
    seen, terms = {}, []
    for i, c in enumerate(ys):
        if c in seen and seen[c] is not None:
            a, p = seen[c], i
            seen[c] = None
            s = sum(math.exp(xs[a] @ xs[j] - xs[a] @ xs[p]) for j in range(len(ys)) if ys[j] != c)
            terms.append(math.log1p(s))
        elif c not in seen:
            seen[c] = i
    got = L.n_pair_loss(x, y, negatives="all")
    assert got.item() == pytest.approx(np.mean(terms), rel=1e-12)


def test_lifted_structure_matches_pml():
    x, y = batch(seed=7)
    pml = pml_losses.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0, reducer=pml_red.MeanReducer())
    assert_same(lambda e, l: L.lifted_structure_loss(e, l), pml, x, y)


def test_lifted_structure_matches_song_eq4_loop():
    """Song et al. 2016 Eq. 4 over unordered positive pairs, unnormalized features."""
    x, y = batch(n_classes=3, per_class=3, dim=4, seed=8)
    xs, ys = x.numpy(), y.tolist()
    D = np.linalg.norm(xs[:, None] - xs[None], axis=2)
    n, total, P = len(ys), 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            if ys[i] != ys[j]:
                continue
            s = sum(math.exp(1.0 - D[i, k]) for k in range(n) if ys[k] != ys[i])
            s += sum(math.exp(1.0 - D[j, k]) for k in range(n) if ys[k] != ys[j])
            total += max(math.log(s) + D[i, j], 0.0) ** 2
            P += 1
    got = L.lifted_structure_loss(x, y, normalize=False)
    assert got.item() == pytest.approx(total / (2 * P), rel=1e-12)


def test_generalized_lifted_structure_matches_pml():
    x, y = batch(seed=9)  # every row has a positive and a negative
    pml = pml_losses.GeneralizedLiftedStructureLoss(neg_margin=1.0, pos_margin=0.0,
                                                    reducer=pml_red.MeanReducer())
    assert_same(lambda e, l: L.generalized_lifted_structure_loss(e, l), pml, x, y)


def test_angular_matches_pml():
    """PML's AngularLoss normalizes anchors/positives but not the negatives, so both sides get
    unit rows normalized inside the compared function; the gradient is then taken w.r.t. the raw x."""
    x, y = batch(seed=10)
    norm = lambda e: torch.nn.functional.normalize(e, dim=1)  # noqa: E731
    pml = pml_losses.AngularLoss(alpha=40)
    assert_same(lambda e, l: L.angular_loss(norm(e), l, alpha=40.0),
                lambda e, l: pml(norm(e), l), x, y)


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_proxy_nca_matches_pml(scale):
    x, y = batch(seed=11)
    torch.manual_seed(0)
    ours = L.ProxyNCA(6, 16, scale=scale).double()
    pml = pml_losses.ProxyNCALoss(6, 16, softmax_scale=scale).double()
    with torch.no_grad():
        pml.proxies.copy_(ours.proxies)
    assert_same(ours, pml, x, y, (ours.proxies,), (pml.proxies,))


def test_proxy_nca_exclude_positive_is_paper_form():
    x, y = batch(seed=12)
    torch.manual_seed(1)
    proxies = torch.randn(6, 16, dtype=torch.float64)
    xn, pn = torch.nn.functional.normalize(x, dim=1), torch.nn.functional.normalize(proxies, dim=1)
    d = ((xn[:, None] - pn[None]) ** 2).sum(-1)
    terms = [d[i, y[i]] + torch.logsumexp(torch.stack([-d[i, z] for z in range(6) if z != y[i]]), 0)
             for i in range(len(y))]
    got = L.proxy_nca_loss(x, y, proxies, exclude_positive=True)
    torch.testing.assert_close(got, torch.stack(terms).mean(), **TOL)


@pytest.mark.parametrize("scale,margin", [(30.0, 0.35), (64.0, 0.2)])
def test_am_softmax_matches_pml_cosface(scale, margin):
    x, y = batch(seed=13)
    torch.manual_seed(0)
    ours = L.AMSoftmax(6, 16, scale=scale, margin=margin).double()
    pml = pml_losses.CosFaceLoss(6, 16, margin=margin, scale=scale).double()
    with torch.no_grad():
        pml.W.copy_(ours.weight.t())  # PML stores W as (D, C)
    assert_same(ours, pml, x, y, (ours.weight,), (pml.W,))


def test_multi_similarity_without_mining_matches_pml():
    x, y = batch(seed=14)
    pml = pml_losses.MultiSimilarityLoss(alpha=2, beta=50, base=0.5)
    assert_same(lambda e, l: L.multi_similarity_loss(e, l, epsilon=None), pml, x, y)


def test_multi_similarity_with_mining_matches_pml_miner():
    x, y = batch(seed=15)
    miner = pml_miners.MultiSimilarityMiner(epsilon=0.1)
    a1, _, a2, _ = miner(x, y)
    pos, neg = L.pair_masks(y)
    assert 0 < len(a1) < pos.sum() and 0 < len(a2) < neg.sum()  # mining drops some pairs
    pml = pml_losses.MultiSimilarityLoss(alpha=2, beta=50, base=0.5)
    assert_same(lambda e, l: L.multi_similarity_loss(e, l, epsilon=0.1), _pml_with_miner(pml, miner), x, y)


# ----------------------------------------------------------------------------- binomial deviance
def binomial_loop(x, y, alpha, beta, pos_w, neg_w, reduction):
    """Brute force from CML Eq. 14 (sum) and DeML Eq. 5 (1/w_pq weights)."""
    xs = x.numpy()
    n = len(y)
    pos_t, neg_t = [], []
    for p in range(n):
        for q in range(n):
            if p == q:
                continue
            D = xs[p] @ xs[q] / (np.linalg.norm(xs[p]) * np.linalg.norm(xs[q]))
            s = 1 if y[p] == y[q] else 0
            eta = pos_w if s else neg_w
            t = math.log1p(math.exp(-(2 * s - 1) * alpha * (D - beta) * eta))
            (pos_t if s else neg_t).append(t)
    if reduction == "sum":
        return sum(pos_t) + sum(neg_t)
    if reduction == "mean":
        return (sum(pos_t) + sum(neg_t)) / (len(pos_t) + len(neg_t))
    return sum(t / len(pos_t) for t in pos_t) + sum(t / len(neg_t) for t in neg_t)


@pytest.mark.parametrize("neg_w,reduction", [(25.0, "sum"), (35.0, "balanced"), (25.0, "mean")])
def test_binomial_deviance_matches_loop_oracle(neg_w, reduction):
    x, y = batch(n_classes=4, per_class=3, dim=6, seed=16)
    want = binomial_loop(x, y, 2.0, 0.5, 1.0, neg_w, reduction)
    got = L.binomial_deviance_loss(x, y, neg_weight=neg_w, reduction=reduction)
    assert got.item() == pytest.approx(want, rel=1e-10)


def test_binomial_registry_presets_are_cml_and_deml():
    x, y = batch(n_classes=4, per_class=3, dim=6, seed=17)
    cml = L.get_loss("binomial_deviance")(x, y).item()
    deml = L.get_loss("binomial_deml")(x, y).item()
    assert cml == pytest.approx(binomial_loop(x, y, 2.0, 0.5, 1.0, 25.0, "sum"), rel=1e-10)
    assert deml == pytest.approx(binomial_loop(x, y, 2.0, 0.5, 1.0, 35.0, "balanced"), rel=1e-10)


# ----------------------------------------------------------------------------- gradcheck
GRADCHECK = {
    "binomial_sum": lambda e, l: L.binomial_deviance_loss(e, l),
    "binomial_balanced": lambda e, l: L.binomial_deviance_loss(e, l, neg_weight=35.0, reduction="balanced"),
    "contrastive_squared": lambda e, l: L.contrastive_loss(e, l, squared=True, neg_margin=1.5),
    "lifted": lambda e, l: L.lifted_structure_loss(e, l),
    "angular": lambda e, l: L.angular_loss(e, l),
    "multi_similarity": lambda e, l: L.multi_similarity_loss(e, l, epsilon=None),
    "n_pair_all": lambda e, l: L.n_pair_loss(e, l, negatives="all", l2_reg=0.01),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK))
def test_gradcheck_float64(name):
    x, y = batch(n_classes=3, per_class=2, dim=4, seed=18)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: GRADCHECK[name](e, y), (x,), eps=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- properties
def _all_losses(num_classes=6, dim=16):
    torch.manual_seed(0)
    return {n: L.get_loss(n, num_classes=num_classes, embedding_dim=dim).double() for n in L.LOSSES}


def test_permutation_invariance():
    x, y = batch(seed=19)
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(len(y), generator=g)
    # N-pair picks each class's first two rows as (anchor, positive), so it is only invariant to
    # permutations that keep the order of the rows within each class: reorder whole classes.
    classes = torch.randperm(6, generator=g)
    rank = torch.empty(6, dtype=torch.long)
    rank[classes] = torch.arange(6)
    order_keeping = torch.argsort(rank[y] * len(y) + torch.arange(len(y)))
    for name, loss in _all_losses().items():
        p = order_keeping if name == "n_pair" else perm
        assert loss(x, y).item() == pytest.approx(loss(x[p], y[p]).item(), rel=1e-10), name


def test_n_pair_depends_on_anchor_choice():
    """Documented asymmetry: a full shuffle may change the N-pair value (so the restricted
    permutation above is needed, not a convenience)."""
    x, y = batch(seed=19)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))
    assert L.n_pair_loss(x, y).item() != pytest.approx(L.n_pair_loss(x[perm], y[perm]).item())


def _separated(n_classes=4, per_class=3, dim=8, scale=1.0, noise=1e-3, seed=20):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    x = torch.eye(dim, dtype=torch.float64)[labels] * scale
    x = x + noise * torch.randn(x.shape, generator=g, dtype=torch.float64)
    return x.requires_grad_(True), labels


@pytest.mark.parametrize("name,kwargs,unit", [
    # orthogonal unit classes: d_pos ~ 0, d_neg ~ sqrt(2) (squared: 2)
    ("contrastive", dict(pos_margin=0.05, neg_margin=1.0), True),
    ("triplet", dict(margin=0.1), True),
    ("triplet_semihard", dict(margin=0.1), True),
    ("triplet_batch_hard", dict(margin=0.1), True),
    ("multi_similarity", dict(epsilon=0.1), True),  # mining keeps no pair
    # lifted: zero only when log-sum-exp of the negatives is negative, i.e. far apart (scale 10)
    ("lifted_structure", dict(normalize=False), False),
    ("generalized_lifted_structure", dict(normalize=False), False),
])
def test_zero_loss_when_classes_separated_with_margin(name, kwargs, unit):
    x, y = _separated(scale=1.0 if unit else 10.0)
    v = L.get_loss(name, **kwargs)(x, y)
    assert v.item() == 0.0
    (g,) = torch.autograd.grad(v, x)
    assert torch.all(g == 0)


@pytest.mark.parametrize("name", ["angular", "binomial_deviance", "n_pair", "multi_similarity"])
def test_smooth_losses_stay_positive_when_separated(name):
    """log(1 + sum exp) losses are never exactly 0 (without mining); they only get small."""
    x, y = _separated(scale=3.0 if name == "n_pair" else 1.0)
    kwargs = dict(epsilon=None) if name == "multi_similarity" else {}
    near, = (L.get_loss(name, **kwargs)(x, y).item(),)
    assert near > 0
    # ... and strictly larger when the classes are mixed up
    assert L.get_loss(name, **kwargs)(x, y.roll(1)).item() > near


NO_PAIR_ZERO = ["triplet", "triplet_semihard", "triplet_batch_hard", "lifted_structure",
                "generalized_lifted_structure", "angular", "n_pair"]


@pytest.mark.parametrize("labels", [[3] * 6, [0, 1, 2, 3, 4, 5], [7]], ids=["one_class", "all_distinct", "single"])
def test_no_valid_pairs_convention(labels):
    y = torch.tensor(labels)
    x = torch.randn(len(labels), 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for name, loss in _all_losses(num_classes=8, dim=5).items():
        xg = x.clone().requires_grad_(True)
        v = loss(xg, y)
        assert v.dim() == 0 and torch.isfinite(v), name
        assert v.requires_grad, name
        (g,) = torch.autograd.grad(v, xg)
        assert torch.isfinite(g).all(), name
        if name in NO_PAIR_ZERO or (len(labels) == 1 and not L.LOSSES[name].parametric):
            assert v.item() == 0.0 and torch.all(g == 0), name


def test_contrastive_one_class_keeps_positive_part():
    """With one class there are positive pairs but no negatives: the positive part still counts."""
    x = torch.randn(5, 4, dtype=torch.float64)
    y = torch.zeros(5, dtype=torch.long)
    d = L.pairwise_distances(torch.nn.functional.normalize(x, dim=1))
    off = ~torch.eye(5, dtype=torch.bool)
    assert L.contrastive_loss(x, y).item() == pytest.approx(d[off].mean().item(), rel=1e-12)


def test_pairwise_distances_zero_distance_has_finite_gradient():
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    d = L.pairwise_distances(x)
    torch.testing.assert_close(d, torch.cdist(x, x).detach(), **TOL)
    (g,) = torch.autograd.grad(d.sum(), x)
    assert torch.isfinite(g).all()


# ----------------------------------------------------------------------------- registry and errors
def test_registry_defaults_match_direct_calls():
    x, y = batch(seed=21)
    for name, spec in L.LOSSES.items():
        if spec.parametric:
            continue
        assert L.get_loss(name)(x, y).item() == pytest.approx(spec.factory(x, y, **spec.defaults).item(), rel=1e-12)


def test_registry_overrides_and_errors():
    assert L.get_loss("triplet", margin=0.3).hyper["margin"] == 0.3
    with pytest.raises(ValueError, match="unknown loss"):
        L.get_loss("tripplet")
    with pytest.raises(TypeError, match="accepts"):
        L.get_loss("triplet", marign=0.3)
    with pytest.raises(ValueError, match="num_classes"):
        L.get_loss("proxy_nca")
    m = L.get_loss("am_softmax", num_classes=5, embedding_dim=3, scale=10.0)
    assert isinstance(m, L.AMSoftmax) and m.scale == 10.0 and len(list(m.parameters())) == 1


def test_bad_inputs_give_clear_errors():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match="shape"):
        L.triplet_margin_loss(x, torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        L.triplet_margin_loss(x, torch.zeros(4))
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        L.contrastive_loss(torch.randn(4, 3, 2), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="mining"):
        L.triplet_margin_loss(x, torch.arange(4), mining="hardest")
    with pytest.raises(ValueError, match="reduction"):
        L.binomial_deviance_loss(x, torch.arange(4), reduction="nonzero_mean")
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        L.AMSoftmax(3, 3)(x, torch.tensor([0, 1, 2, 3]))
