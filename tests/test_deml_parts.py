"""DeML's trainable parts: channel attention (Fig. 3b), the adversary with gradient reversal (Eq. 4) and
the released code's hinge, activation decay (Eq. 6), the learner-summed binomial deviance (Eq. 5) and the
DeML(I, J) network -- against brute-force loops and plain autograd."""
import math

import numpy as np
import pytest
import torch

from zslib.methods.deml.decoupled_losses import activation_decay, decoupled_binomial_loss, nontrivial_term
from zslib.engine.losses import binomial_deviance_loss
from zslib.engine.models import build_backbone
from zslib.methods.deml.channel_attention import ChannelAttention
from zslib.methods.deml.network import DeMLNet
from zslib.methods.deml.learner_adversary import (LearnerAdversary, adversary_loss, learner_discrepancy,
                                                  learner_hinge_loss)


# ----- channel attention ------------------------------------------------------------------------
@pytest.mark.parametrize("spatial", [False, True])
def test_channel_attention_equals_per_module_loop(spatial):
    torch.manual_seed(0)
    cam = ChannelAttention(6, num_modules=3, hidden=4, spatial=spatial)
    u = torch.randn(5, 6, 3, 4).relu()
    out, weights = cam(u), cam.channel_weights(u)
    assert out.shape == (3, 5, 6, 3, 4)
    assert weights.shape == ((3, 5, 6, 3, 4) if spatial else (3, 5, 6))
    assert (weights > 0).all() and (weights < 1).all()
    for j in range(3):
        w1, b1, w2, b2 = cam.w1[j], cam.b1[j], cam.w2[j], cam.b2[j]
        if spatial:  # a 1x1 convolution pair at every position
            x = u.permute(0, 2, 3, 1)
            s = torch.sigmoid(torch.relu(x @ w1.T + b1) @ w2.T + b2).permute(0, 3, 1, 2)
        else:
            pooled = u.mean(dim=(2, 3))
            s = torch.sigmoid(torch.relu(pooled @ w1.T + b1) @ w2.T + b2)[:, :, None, None]
        assert torch.allclose(out[j], u * s, atol=1e-6)
    assert not torch.allclose(weights[0], weights[1])  # the J modules start different


def test_channel_attention_gradcheck_and_channels_last():
    torch.manual_seed(1)
    cam = ChannelAttention(4, num_modules=2, hidden=3).double()
    u = torch.randn(2, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: cam(x), (u,))
    assert torch.allclose(cam(u.contiguous(memory_format=torch.channels_last)), cam(u))
    with pytest.raises(ValueError, match="channels"):
        cam(torch.randn(2, 5, 3, 3, dtype=torch.float64))


# ----- the adversary and the hinge ------------------------------------------------------------------
def test_discrepancy_and_hinge_against_loops():
    torch.manual_seed(2)
    z = torch.randn(4, 6, 5, dtype=torch.float64)
    brute = torch.zeros(6, dtype=torch.float64)
    for j in range(4):
        for k in range(4):  # every ordered pair, as Eq. 4's sum over j, j'
            brute += ((z[j] - z[k]) ** 2).sum(-1)
    assert torch.allclose(learner_discrepancy(z), brute)
    assert torch.allclose(learner_discrepancy(list(z)), brute)
    unit = z / z.norm(dim=-1, keepdim=True)
    hinge = 0.0
    for j in range(4):
        for k in range(j + 1, 4):  # Caffe ContrastiveLoss, all pairs dissimilar, margin 2
            d = (unit[j] - unit[k]).norm(dim=-1)
            hinge += (torch.clamp(2.0 - d, min=0) ** 2).sum() / (2 * 6)
    assert torch.allclose(learner_hinge_loss(z), hinge)
    assert float(learner_discrepancy(z[:1]).abs().max()) == 0 and float(learner_hinge_loss(z[:1])) == 0
    antipodal = torch.stack([unit[0], -unit[0]])
    assert float(learner_hinge_loss(antipodal)) == pytest.approx(0.0, abs=1e-10)


def test_gradient_reversal_signs_of_the_adversary():
    torch.manual_seed(3)
    adversary = LearnerAdversary(5, hidden=7).double()
    z = torch.randn(3, 8, 5, dtype=torch.float64, requires_grad=True)

    # plain autograd of Eq. 4, no reversal
    plain = adversary_loss(z, adversary, 1.0, reverse=False)
    g_z_plain, *g_f_plain = torch.autograd.grad(plain, [z, *adversary.parameters()])
    # with the reversal layer: F gets the same gradient, the learners the opposite one
    rev = adversary_loss(z, adversary, 1.0)
    assert torch.allclose(rev, plain)
    g_z, *g_f = torch.autograd.grad(rev, [z, *adversary.parameters()])
    assert torch.allclose(g_z, -g_z_plain)
    for a, b in zip(g_f, g_f_plain):
        assert torch.allclose(a, b)

    # one descent step on the single loss: the embeddings' step raises the discrepancy, F's lowers it
    lr = 1e-3
    with torch.no_grad():
        before = float(adversary_loss(z, adversary, reverse=False))
        z_after = z - lr * g_z
        after_z = float(adversary_loss(z_after, adversary, reverse=False))
        for p, g in zip(adversary.parameters(), g_f):
            p -= lr * g
        after_f = float(adversary_loss(z, adversary, reverse=False))
    assert after_z > before and after_f < before


def test_gradient_reversal_reaches_the_extractor_through_a_network():
    torch.manual_seed(4)
    extractor = torch.nn.Linear(6, 4).double()
    adversary = LearnerAdversary(4).double()
    x = torch.randn(3, 10, 6, dtype=torch.float64)
    loss = adversary_loss(extractor(x), adversary, 2.0, reversal=0.5)
    grads = torch.autograd.grad(loss, list(extractor.parameters()))
    plain = torch.autograd.grad(adversary_loss(extractor(x), adversary, 2.0, reverse=False),
                                list(extractor.parameters()))
    for a, b in zip(grads, plain):
        assert torch.allclose(a, -0.5 * b)


# ----- Eqs. 5 and 6 ------------------------------------------------------------------------------------
def test_activation_decay_against_brute_force():
    torch.manual_seed(5)
    emb = torch.randn(6, 10, 4, dtype=torch.float64)  # I J = 6 learners, N = 10, d_l = 4
    w = torch.randn(6, 4, 9, dtype=torch.float64) * 0.5
    lam1, lam2 = 0.014, 0.25
    act = sum(float(emb[l, n] @ emb[l, n]) for l in range(6) for n in range(10)) * lam1 / (2 * 6 * 10)
    had = fro = 0.0
    for l in range(6):
        a = w[l].numpy() @ w[l].numpy().T - np.eye(4)
        had += np.trace(a * a)  # the Hadamard product inside the trace, as printed in Eq. 6
        fro += np.trace(a @ a.T)
    assert float(activation_decay(emb, lambda1=lam1)) == pytest.approx(act, rel=1e-12)
    assert float(activation_decay(emb, w, lambda1=lam1, lambda2=lam2)) == pytest.approx(act + lam2 * had, rel=1e-12)
    assert float(nontrivial_term(w, lam2, "frobenius")) == pytest.approx(lam2 * fro, rel=1e-12)
    assert float(nontrivial_term(list(w), 1.0)) == pytest.approx(had, rel=1e-12)
    unit_rows = torch.nn.functional.normalize(w, dim=-1)
    assert float(nontrivial_term(unit_rows)) == pytest.approx(0.0, abs=1e-12)  # the printed form: unit rows
    e = emb.clone().requires_grad_()
    ww = w.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: activation_decay(a, b, form="frobenius"), (e, ww))
    assert torch.autograd.gradcheck(lambda a, b: activation_decay(a, b), (e, ww))


def test_decoupled_binomial_is_the_mean_of_learner_terms():
    torch.manual_seed(6)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3])
    emb = torch.randn(4, 8, 5, dtype=torch.float64)
    ours = decoupled_binomial_loss(emb, labels)
    per = [binomial_deviance_loss(emb[k], labels, reduction="balanced", neg_weight=35) for k in range(4)]
    assert torch.allclose(ours, torch.stack(per).mean())
    # one learner by Eq. 5 directly: sum over ordered pairs p != q of log(1 + exp(...)) / w_pq
    x = emb[0].numpy()
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = labels.numpy()
    n_pos = sum(y[p] == y[q] for p in range(8) for q in range(8) if p != q)
    n_neg = sum(y[p] != y[q] for p in range(8) for q in range(8))
    total = 0.0
    for p in range(8):
        for q in range(8):
            if p == q:
                continue
            s = float(y[p] == y[q])
            gamma, w = (1.0, n_pos) if s else (35.0, n_neg)
            total += math.log1p(math.exp(-(2 * s - 1) * 2 * (x[p] @ x[q] - 0.5) * gamma)) / w
    assert float(per[0]) == pytest.approx(total, rel=1e-10)


# ----- the DeML(I, J) network ---------------------------------------------------------------------------
def _net(**kw):
    torch.manual_seed(7)
    bb = build_backbone("smallcnn", widths=[8, 16, 32, 64])
    return DeMLNet(bb, **{"embedding_dim": 24, "scales": 2, "learners": 3, **kw})


def test_deml_net_shapes_and_deterministic_evaluation():
    net = _net()
    x = torch.rand(6, 3, 48, 48)
    out = net.forward_train(x)
    assert out.embeddings.shape == (6, 6, 4)  # I J = 6 learners of 24 / 6 = 4 units, B = 6
    assert out.by_scale.shape == (2, 3, 6, 4)
    assert out.weights.shape == (6, 4, 64)
    assert len(out.images) == 2 and out.images[1].shape == x.shape and len(out.boxes) == 1
    boxes = out.boxes[0]
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= 48).all() and (boxes[:, 2:] > boxes[:, :2]).all()
    net.eval()
    e1, e2 = net(x), net(x)
    assert e1.shape == (6, 24) and torch.equal(e1, e2)
    chunks = e1.reshape(6, 6, 4)  # each learner's part is a unit vector / sqrt(I J)
    assert torch.allclose(chunks.norm(dim=-1), torch.full((6, 6), 1 / math.sqrt(6)), atol=1e-6)
    assert torch.allclose(e1.norm(dim=1), torch.ones(6), atol=1e-6)


def test_deml_net_wiring_matches_a_manual_pass():
    net = _net(scales=2, learners=2, embedding_dim=8).eval()
    x = torch.rand(4, 3, 48, 48)
    with torch.no_grad():
        out = net.forward_train(x, last_attention=True)
        for i, image in enumerate(out.images):
            bb = net.backbones[i]
            u = bb.run(image, None, "stage2")
            for j in range(2):
                cap = net.cams[i](u)[j]
                pooled = bb.pool(bb.run(cap, "stage2", None))
                assert torch.allclose(out.embeddings[2 * i + j], pooled @ net.heads[i][j].T, atol=1e-5)
        # scale 2 is scale 1's image cropped to the boxes of scale 1's attention
        from zslib.methods.deml.attention_crop import crop_and_zoom

        assert torch.allclose(out.images[1], crop_and_zoom(x, out.boxes[0], 48))
        assert len(out.attention) == 2 and out.attention[0].shape == (4, 48, 48)


def test_deml_net_sharing_options_and_parameter_groups():
    base, shared = _net(), _net(share_scales=True, share_heads=True)
    assert len(base.backbones) == 2 and len(shared.backbones) == 1
    assert base.heads[0].shape == (3, 4, 64) and shared.heads[0].shape == (1, 4, 64)
    assert torch.equal(shared.learner_weights()[0], shared.learner_weights()[2])
    for net in (base, shared):
        groups = net.param_groups(1e-3, new_layer_mult=10)
        ids = [id(p) for g in groups for p in g["params"]]
        assert len(ids) == len(set(ids)) == len(list(net.parameters()))
        assert groups[1]["lr"] == pytest.approx(1e-2)
        assert {id(p) for p in net.cams.parameters()} <= {id(p) for p in groups[1]["params"]}
    single = _net(scales=1, learners=1, embedding_dim=16)
    assert single(torch.rand(2, 3, 48, 48)).shape == (2, 16)


def test_deml_net_refuses_bad_configurations():
    bb = build_backbone("smallcnn", widths=[8, 16, 32, 64])
    with pytest.raises(ValueError, match="not divisible"):
        DeMLNet(bb, 512, scales=3, learners=3)
    with pytest.raises(ValueError, match="after the channel-attention stage"):
        DeMLNet(bb, 8, scales=2, learners=2, oam_stages=["stage1"])
    with pytest.raises(TypeError, match="Backbone"):
        DeMLNet(torch.nn.Linear(2, 2), 8)


def test_one_training_step_with_every_term_reaches_every_part():
    net = _net()
    adversaries = torch.nn.ModuleList([LearnerAdversary(4) for _ in range(2)])
    x = torch.rand(8, 3, 48, 48)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    out = net.forward_train(x)
    terms = {
        "metric": decoupled_binomial_loss(out.embeddings, labels),
        "act": activation_decay(out.embeddings, out.weights),
        "adv": sum(adversary_loss(z, f) for z, f in zip(out.by_scale, adversaries)),
        "hinge": 0.2 * sum(learner_hinge_loss(z) for z in out.by_scale),
    }
    sum(terms.values()).backward()
    assert all(torch.isfinite(t) for t in terms.values())
    for part in (net.backbones[0], net.backbones[1], net.cams[0], net.cams[1], adversaries):
        grads = [p.grad for p in part.parameters() if p.requires_grad]
        assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
        assert sum(float(g.abs().sum()) for g in grads) > 0
    assert all(h.grad is not None and float(h.grad.abs().sum()) > 0 for h in net.heads)
