"""Adapt-Adv's spatial attention (Eqs. 9, 11, 12 with 13-16) and the GDFL network.

Oracles: small cases worked out by hand, a brute-force NumPy loop over positions and channels,
gradcheck in float64, and invariances any weighted mean of positions must have.
"""
import math

import numpy as np
import pytest
import torch
from torch import nn

from zslib.methods.adapt_adv.spatial_attention import ATTENTION_FORMS, SpatialAttention
from zslib.methods.adapt_adv.gdfl import GDFLNet
from zslib.engine.models import build_model

LN3 = math.log(3.0)
AT6 = math.atanh(0.6)  # tanh(AT6) = 0.6


def _set(module, project, score=None):
    with torch.no_grad():
        module.project.weight.copy_(torch.as_tensor(project, dtype=torch.float64))
        if score is not None:
            module.score.weight.copy_(torch.as_tensor(score, dtype=torch.float64))
    return module


def _map(*pixels):
    """A (1, c, 1, n) map whose positions are the given c-vectors."""
    return torch.tensor(pixels, dtype=torch.float64).T[None, :, None, :]


# ----- hand-computed cases ------------------------------------------------------------------------
def test_multiplicative_hand_case():
    # W1 = I, u = (1, 0): S(q_j, u) = <q_j, u> = first coordinate: (ln 3, 0) -> softmax (3/4, 1/4)
    att = _set(SpatialAttention(2, 2, "multiplicative").double(), np.eye(2))
    q1, q2 = (LN3, 5.0), (0.0, -1.0)
    p, w = att(_map(q1, q2), torch.tensor([[1.0, 0.0]], dtype=torch.float64), return_weights=True)
    assert torch.allclose(w, torch.tensor([[[0.75, 0.25]]], dtype=torch.float64))
    assert torch.allclose(p, torch.tensor([[0.75 * LN3, 0.75 * 5 - 0.25]], dtype=torch.float64))


def test_additive_hand_case():
    # W1 = I, u = (0.3, 0), w = (ln3 / 0.6, 0): scores w . tanh(q_j + u) = (ln 3, 0) -> (3/4, 1/4)
    att = _set(SpatialAttention(2, 2, "additive").double(), np.eye(2), [[LN3 / 0.6, 0.0]])
    q1, q2 = (AT6 - 0.3, 7.0), (-0.3, -2.0)
    p, w = att(_map(q1, q2), torch.tensor([[0.3, 0.0]], dtype=torch.float64), return_weights=True)
    assert torch.allclose(w, torch.tensor([[[0.75, 0.25]]], dtype=torch.float64))
    expect = [0.75 * q1[0] + 0.25 * q2[0], 0.75 * 7.0 - 0.25 * 2.0]
    assert torch.allclose(p, torch.tensor([expect], dtype=torch.float64))


def test_multidimensional_hand_case():
    # W1 = I, u = (0.3, -0.2): tanh(q_j + u) = (0.6, 0) at j=1 and (0, 0.6) at j=2; W^T = (ln3/0.6) I, so
    # channel 0 scores (ln 3, 0) -> (3/4, 1/4) and channel 1 scores (0, ln 3) -> (1/4, 3/4) (Eq. 15, per channel)
    att = _set(SpatialAttention(2, 2, "multidimensional").double(), np.eye(2), (LN3 / 0.6) * np.eye(2))
    q1, q2 = (AT6 - 0.3, 0.2), (-0.3, AT6 + 0.2)
    p, w = att(_map(q1, q2), torch.tensor([[0.3, -0.2]], dtype=torch.float64), return_weights=True)
    assert w.shape == (1, 2, 1, 2)
    assert torch.allclose(w[0, :, 0], torch.tensor([[0.75, 0.25], [0.25, 0.75]], dtype=torch.float64))
    expect = [0.75 * q1[0] + 0.25 * q2[0], 0.25 * q1[1] + 0.75 * q2[1]]  # Eq. 16
    assert torch.allclose(p, torch.tensor([expect], dtype=torch.float64))


# ----- brute force --------------------------------------------------------------------------------
def _brute_force(form, activation, fmap, u, W1, w):
    """Eqs. 9/11/12 and 13-16 with explicit loops over images, positions and channels."""
    act = {"tanh": np.tanh, "relu": lambda z: np.maximum(z, 0), "elu": lambda z: np.where(z > 0, z, np.expm1(z))}[activation]
    B, c, H, V = fmap.shape
    out = np.zeros((B, c))
    for b in range(B):
        pixels = [fmap[b, :, y, x] for y in range(H) for x in range(V)]
        if form == "multidimensional":
            A = np.array([w @ act(W1 @ q + u[b]) for q in pixels])  # (n, c)
            for k in range(c):
                e = np.exp(A[:, k] - A[:, k].max())
                a = e / e.sum()
                out[b, k] = sum(a[j] * pixels[j][k] for j in range(len(pixels)))
        else:
            if form == "multiplicative":
                s = np.array([(W1 @ q) @ u[b] for q in pixels])
            else:
                s = np.array([w[0] @ act(W1 @ q + u[b]) for q in pixels])
            e = np.exp(s - s.max())
            a = e / e.sum()
            out[b] = sum(a[j] * pixels[j] for j in range(len(pixels)))
    return out


@pytest.mark.parametrize("form, activation", [("multiplicative", "tanh")] + [
    (f, a) for f in ("additive", "multidimensional") for a in ("tanh", "relu", "elu")])
def test_matches_brute_force_loop(form, activation):
    g = torch.Generator().manual_seed(1)
    att = SpatialAttention(3, 4, form, activation).double()
    fmap = torch.randn(2, 3, 2, 3, generator=g, dtype=torch.float64)
    u = torch.randn(2, 4, generator=g, dtype=torch.float64)
    W1 = att.project.weight.detach().numpy()
    w = att.score.weight.detach().numpy() if form != "multiplicative" else None
    expect = _brute_force(form, activation, fmap.numpy(), u.numpy(), W1, w)
    np.testing.assert_allclose(att(fmap, u).detach().numpy(), expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("form", ATTENTION_FORMS)
def test_weights_are_distributions_and_output_is_convex_combination(form):
    g = torch.Generator().manual_seed(2)
    att = SpatialAttention(5, 7, form)
    fmap = torch.randn(3, 5, 4, 6, generator=g) * 3
    u = torch.randn(3, 7, generator=g)
    p, w = att(fmap, u, return_weights=True)
    assert p.shape == (3, 5)
    assert w.shape == ((3, 5, 4, 6) if form == "multidimensional" else (3, 4, 6))
    assert bool((w >= 0).all())
    assert torch.allclose(w.sum((-2, -1)), torch.ones(w.shape[:-2]), atol=1e-6)
    # every channel of p lies between that channel's minimum and maximum over the positions
    lo, hi = fmap.amin((2, 3)), fmap.amax((2, 3))
    assert bool((p >= lo - 1e-5).all() and (p <= hi + 1e-5).all())


@pytest.mark.parametrize("form", ATTENTION_FORMS)
def test_invariant_to_the_order_of_positions_and_to_channels_last(form):
    g = torch.Generator().manual_seed(3)
    att = SpatialAttention(4, 6, form)
    fmap = torch.randn(2, 4, 3, 5, generator=g)
    u = torch.randn(2, 6, generator=g)
    p, w = att(fmap, u, return_weights=True)
    perm = torch.randperm(15, generator=g)
    shuffled = fmap.flatten(2)[:, :, perm].reshape(2, 4, 5, 3)  # positions permuted, map reshaped
    p2, w2 = att(shuffled, u, return_weights=True)
    assert torch.allclose(p, p2, atol=1e-6)
    assert torch.allclose(w.flatten(-2)[..., perm], w2.flatten(-2), atol=1e-7)
    assert torch.allclose(att(fmap.to(memory_format=torch.channels_last), u), p, atol=1e-6)


@pytest.mark.parametrize("form", ATTENTION_FORMS)
def test_gradcheck_float64(form):
    g = torch.Generator().manual_seed(4)
    att = SpatialAttention(3, 4, form).double()
    fmap = torch.randn(2, 3, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    u = torch.randn(2, 4, generator=g, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in att.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in att.parameters()]

    def f(fmap, u, *params):
        return torch.func.functional_call(att, dict(zip(names, params)), (fmap, u))

    assert torch.autograd.gradcheck(f, (fmap, u, *params), eps=1e-6, atol=1e-5, fast_mode=True)


def test_bad_inputs():
    att = SpatialAttention(3, 4, "additive")
    with pytest.raises(ValueError, match="form"):
        SpatialAttention(3, 4, "dot")
    with pytest.raises(ValueError, match="activation"):
        SpatialAttention(3, 4, activation="gelu")
    with pytest.raises(ValueError, match=r"\(B, 3, H, V\)"):
        att(torch.zeros(2, 5, 2, 2), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="guiding vector"):
        att(torch.zeros(2, 3, 2, 2), torch.zeros(3, 4))


# ----- the GDFL network -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_gdfl():
    torch.manual_seed(0)
    return GDFLNet.from_embedding_net(build_model("smallcnn", 16), form="additive").eval()


def test_gdfl_fuses_attended_maps_by_concatenation(small_gdfl):
    net = small_gdfl
    x = torch.randn(3, 3, 48, 48, generator=torch.Generator().manual_seed(5))
    assert net.layers == ("stage2", "stage3", "stage4") == net.backbone.roles["intermediate"]
    assert net.fused_dim == 64 + 128 + 256
    with torch.no_grad():
        maps = net.backbone.features(x, [*net.layers, "pool"])
        expect = torch.cat([net.attention[n](maps[n], maps["pool"]) for n in net.layers], 1)
        f = net.extract(x)
        assert torch.allclose(f, expect, atol=1e-6)
        emb = net(x)
        assert torch.allclose(emb, net.embed_features(f), atol=1e-6)
        assert torch.allclose(emb.norm(dim=1), torch.ones(3), atol=1e-5)
        out = net.features(x, ["stage3", "fused", "embedding", "pool"])
        assert torch.allclose(out["embedding"], emb, atol=1e-6) and torch.allclose(out["fused"], f, atol=1e-6)
        assert torch.allclose(out["stage3"], maps["stage3"]) and torch.allclose(out["pool"], maps["pool"])
        weights = net.attention_maps(x)
    assert {n: tuple(w.shape) for n, w in weights.items()} == {
        "stage2": (3, 12, 12), "stage3": (3, 6, 6), "stage4": (3, 3, 3)}
    for w in weights.values():
        assert torch.allclose(w.sum((1, 2)), torch.ones(3), atol=1e-5)
    with pytest.raises(NotImplementedError):
        net.embed_pooled(maps["pool"])


def test_gdfl_taps_replace_a_map_everywhere_it_is_used(small_gdfl):
    net = small_gdfl
    x = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert torch.allclose(net.forward_tapped(x, {"stage1": nn.Identity()}), net(x), atol=1e-6)
        seen = {}
        zeroed = net.forward_tapped(x, {"stage3": lambda m: seen.setdefault("m", m) * 0})
        # oracle from the backbone's public pieces: stage 3 is zero for its attention and for stage 4
        m2 = net.backbone.run(x, until="stage2")
        m3 = torch.zeros(2, 128, 6, 6)
        m4 = net.backbone.run(m3, start_after="stage3")
        u = net.backbone.pool(m4)
        f = torch.cat([net.attention["stage2"](m2, u), net.attention["stage3"](m3, u),
                       net.attention["stage4"](m4, u)], 1)
        assert torch.all(f[:, 64:192] == 0)
        assert torch.allclose(zeroed, net.embed_features(f), atol=1e-6)
        assert not torch.allclose(zeroed, net(x), atol=1e-3)
        assert seen["m"].shape == (2, 128, 6, 6)


def test_gdfl_training_wiring():
    torch.manual_seed(0)
    base = build_model("smallcnn", 8, dropout=0.2, freeze_bn=True)
    net = GDFLNet.from_embedding_net(base, layers=["stage4", "stage2"], form="multidimensional", include_pooled=True)
    assert net.backbone is base.backbone and net.bn_frozen and net.head.dropout.p == 0.2
    assert net.layers == ("stage2", "stage4") and net.fused_dim == 64 + 256 + 256
    groups = {g["name"]: {id(p) for p in g["params"]} for g in net.param_groups(1e-4)}
    assert {id(p) for p in net.attention.parameters()} <= groups["new"]
    assert {id(p) for p in net.head.parameters()} <= groups["new"]
    net.train()
    net(torch.randn(4, 3, 32, 32)).pow(2).sum().backward()
    for part in (net.attention, net.head, net.backbone.net.stage1[0]):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="distinct map names"):
        GDFLNet.from_embedding_net(base, layers=["stage2", "pool"])
    with pytest.raises(ValueError, match="distinct map names"):
        GDFLNet.from_embedding_net(base, layers=[])


def test_gdfl_on_bninception_matches_the_papers_maps():
    """Adapt-Adv Sec. 4: inception_4d/4e/5a, 608 x 14 x 14, 1056 x 7 x 7, 1024 x 7 x 7 at 224 px, u in R^1024.

    Map sizes from the backbones' contract H_s = ceil(H / stage_strides[s]) (checked by test_models);
    that the attention weights take each map's size is checked on smallcnn above."""
    torch.manual_seed(0)
    net = GDFLNet.from_embedding_net(build_model("bninception", 64))
    assert net.layers == ("inception4d", "inception4e", "inception5a") and net.feature_dim == 1024
    shapes = {n: (net.stage_channels[n], math.ceil(224 / net.stage_strides[n])) for n in net.layers}
    assert shapes == {"inception4d": (608, 14), "inception4e": (1056, 7), "inception5a": (1024, 7)}
    assert net.fused_dim == 608 + 1056 + 1024
    assert [a.project.weight.shape for a in net.attention.values()] == [(1024, 608), (1024, 1056), (1024, 1024)]
