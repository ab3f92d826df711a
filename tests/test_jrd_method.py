"""The JRD method (zslib.methods.jrd.method.JRD, chu2020jrd Eq. 11) and the Gaussian reading of the intra-class
penalty (``intra`` with ``form="gaussian"``, Eq. 4).

Oracles: the functions of zslib.methods.jrd.diversification called directly on the same features (the method must add
nothing), a brute-force double loop over sample pairs and bandwidths for the default JRD term, CML's energy
confusion (zslib.methods.cml.confusion, CML Eq. 3) for the linear-kernel identity, the baseline method for alpha = 0,
and the optimizer the trainer builds for the Adam epsilon of the released code.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from zslib.methods.jrd import diversification as D
from zslib.methods.cml import confusion as R
from zslib.methods.jrd.intra import gaussian_intra_class_distance
from zslib.engine.config import Config
from zslib.engine.registry import METHODS, get_method
from zslib.methods.jrd.method import JRD_PRESETS, jrd_method, jrd_preset
from zslib.engine.models import CachedBackbone, EmbeddingNet, build_model
from zslib.engine.train.optim import OptimSettings


class _Backbone(nn.Module):
    """A tiny stand-in for a backbone: ``pooled(x)`` (counted) and ``feature_dim``."""

    feature_dim = 6

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(5, 6)
        self.calls = 0

    def pooled(self, x):
        self.calls += 1
        return torch.tanh(self.body(x)) * 3.0


def _net(dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return EmbeddingNet(_Backbone(), 4).to(dtype)


def _method(num_classes=5, loss="am_softmax", dtype=torch.float64, **params):
    config = Config(loss=loss, method="jrd", method_params=params, embedding_dim=4,
                    loss_params={"scale": 20.0, "margin": 0.1} if loss == "am_softmax" else {})
    return get_method("jrd")(config, None, num_classes).to(dtype)


def _batch(classes=5, per_class=2, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(classes).repeat_interleave(per_class)
    x = torch.randn(classes, 5, generator=g, dtype=dtype)[y] + 0.5 * torch.randn(len(y), 5, generator=g, dtype=dtype)
    perm = torch.randperm(len(y), generator=g)
    return x[perm], y[perm]


# ------------------------------------------------------------------------------------------ parameters
def test_registered_with_paper_parameters_and_checks():
    assert METHODS["jrd"].paper == "chu2020jrd" and "Eq. 11" in METHODS["jrd"].equations
    c = Config(loss="am_softmax", method="jrd")
    assert c.method_params == {"alpha": 1.0, "variant": "jrd", "regularizer": "jrs", "kernel": "gaussian_mixture",
                               "adam_eps": None}
    assert get_method("jrd").uses_maps is False  # the real profile feeds it the cached pooled feature only
    for bad, match in (({"alpha": -1.0}, "alpha must be >= 0"), ({"variant": "jrdx"}, "variant must be one of"),
                       ({"regularizer": "mmd"}, "regularizer must be one of"), ({"kernel": "rbf"}, "kernel must be one of"),
                       ({"adam_eps": 0.0}, "adam_eps must be > 0"), ({"beta": 1.0}, r"no parameter\(s\) \['beta'\]")):
        with pytest.raises(ValueError, match=match):
            Config(loss="am_softmax", method="jrd", method_params=bad)
    with pytest.raises(ValueError, match="uses the class-level representation"):
        _method(loss="triplet")
    assert set(_method(loss="triplet", variant="jrd_c").terms("main", _net(), *_batch())) == {"triplet", "jrs"}


# ------------------------------------------------------------------------------------------- the terms
@pytest.mark.parametrize("variant", sorted(D.VARIANTS))
@pytest.mark.parametrize("regularizer", ["jrs", "jmmd", "jintra"])
def test_terms_are_the_loss_and_the_regularizer_on_one_forward_pass(variant, regularizer):
    net, (x, y) = _net(), _batch()
    m = _method(alpha=0.7, variant=variant, regularizer=regularizer)
    terms = m.terms("main", net, x, y)
    assert net.backbone.calls == 1  # the embedding reuses the pooled feature
    pooled = net.backbone.pooled(x)
    emb = net.head(pooled)
    assert terms["am_softmax"].item() == pytest.approx(m.loss(emb, y).item(), rel=1e-12)
    r = D.jrd_representations(pooled, emb, m.loss.weight, variant)
    expected = D.REGULARIZERS[regularizer](r.layers, y, r.kernels, r.combine, alpha=0.7)
    assert set(terms) == {"am_softmax", regularizer}
    assert terms[regularizer].item() == pytest.approx(expected.item(), rel=1e-12)


@pytest.mark.parametrize("kernel", D.KERNELS)
def test_kernel_choices_match_table_4_definitions(kernel):
    """Every kernel choice, entry by entry: the method's JRS term against a double loop over pairs."""
    net, (x, y) = _net(), _batch(seed=3)
    m = _method(alpha=1.0, kernel=kernel)
    value = m.terms("main", net, x, y)["jrs"].item()
    pooled = net.backbone.pooled(x).detach().numpy()
    emb = net.head(torch.as_tensor(pooled)).detach()
    emb = (emb / emb.norm(dim=1, keepdim=True)).numpy()
    w = m.loss.weight.detach().numpy()
    cls = emb @ (w / np.linalg.norm(w, axis=1, keepdims=True)).T
    layers = {"p": pooled, "e": emb, "c": cls}
    n = len(y)

    def mean_off(dist):
        return dist[~np.eye(n, dtype=bool)].mean()

    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    if kernel in ("polynomial2", "polynomial5", "exponential"):
        layers = {code: unit(a) for code, a in layers.items()}
    d2 = {code: np.array([[float(np.sum((a[p] - a[q]) ** 2)) for q in range(n)] for p in range(n)])
          for code, a in layers.items()}
    d1 = {code: np.array([[float(np.abs(a[p] - a[q]).sum()) for q in range(n)] for p in range(n)])
          for code, a in layers.items()}
    tau = {code: mean_off(d) for code, d in d2.items()}
    sigma = {code: mean_off(d) for code, d in d1.items()}

    def k(code, i, j):
        a = layers[code]
        if kernel == "gaussian_mixture":
            scales = (1.0,) if code == "c" else (0.5, 1.0, 2.0)
            return sum(math.exp(-d2[code][i, j] / (s * tau[code])) for s in scales) / len(scales)
        if kernel == "gaussian":
            return math.exp(-d2[code][i, j] / tau[code])
        if kernel == "laplace":
            return math.exp(-d1[code][i, j] / sigma[code])
        if kernel == "exponential":
            return math.exp(float(a[i] @ a[j]))
        return (float(a[i] @ a[j]) + 1.0) ** int(kernel[-1])

    labels = y.tolist()
    pairs = [(i, j) for i in range(n) for j in range(n) if labels[i] != labels[j]]
    brute = sum(k("p", i, j) * k("e", i, j) * k("c", i, j) for i, j in pairs) / len(pairs)
    assert value == pytest.approx(brute, rel=1e-9)


def test_alpha_zero_is_the_loss_alone_bitwise():
    net, (x, y) = _net(torch.float32), _batch(dtype=torch.float32)
    torch.manual_seed(1)
    jrd = _method(alpha=0.0, dtype=torch.float32)
    config = Config(loss="am_softmax", loss_params={"scale": 20.0, "margin": 0.1}, embedding_dim=4)
    torch.manual_seed(1)
    baseline = get_method("baseline")(config, None, 5)
    t_jrd, t_base = jrd.terms("main", net, x, y), baseline.terms("main", net, x, y)
    assert set(t_jrd) == {"am_softmax"} and torch.equal(t_jrd["am_softmax"], t_base["am_softmax"])


# ------------------------------------------------------------------------------------------ gradients
@pytest.mark.parametrize("regularizer", ["jrs", "jmmd", "jintra"])
def test_gradients_are_finite_for_one_image_per_class(regularizer):
    """The released code draws batches uniformly, so most classes of a batch have one image: every pair is
    then a different-class pair, the class embeddings are single kernel rows, and nothing may be 0/0."""
    net, (x, y) = _net(torch.float32), _batch(classes=8, per_class=1, dtype=torch.float32)
    x = torch.cat([x, x[:1]])  # two identical images of different classes: distance exactly 0
    y = torch.cat([y, torch.tensor([8])])
    m = _method(num_classes=9, alpha=1.0, regularizer=regularizer, dtype=torch.float32)
    terms = m.terms("main", net, x, y)
    terms[regularizer].backward()
    grads = {n: p.grad for n, p in [*net.named_parameters(), *m.named_parameters()]}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), grads
    if regularizer == "jintra":  # a singleton class's embedding norm is its K_ii = 1: no gradient at all
        assert all(float(g.abs().sum()) == 0 for g in grads.values())
    else:  # the regularizer reaches the backbone (pooling), the head (embedding) and the proxies (class level)
        assert all(float(g.abs().sum()) > 0 for g in grads.values())


def test_descending_jrs_lowers_it():
    net, (x, y) = _net(), _batch(classes=4, per_class=3, seed=5)
    m = _method(num_classes=4, alpha=1.0)
    params = [*net.parameters(), *m.parameters()]
    values = []
    for _ in range(3):
        term = m.terms("main", net, x, y)["jrs"]
        values.append(term.item())
        grads = torch.autograd.grad(term, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= 0.05 * g
    assert values[2] < values[1] < values[0]


def test_on_the_real_profile_the_pooled_feature_is_a_constant():
    """CachedBackbone(pooled_only): the pooling kernel weights the pairs but receives no gradient; the
    head and the proxies do."""
    torch.manual_seed(0)
    net = EmbeddingNet(CachedBackbone("efficientnet_lite0", ("block4", "block5", "head"), 224, pooled_only=True), 8)
    config = Config(profile="real", loss="am_softmax", method="jrd", embedding_dim=8)
    m = get_method("jrd")(config, net, 4)
    x = torch.rand(8, 1280) * 3
    y = torch.arange(4).repeat(2)
    terms = m.terms("main", net, x.requires_grad_(True), y)
    terms["jrs"].backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()  # the input itself would get one...
    assert list(net.backbone.parameters()) == []  # ... but nothing below the head can train
    assert float(net.head.linear.weight.grad.abs().sum()) > 0 and float(m.loss.weight.grad.abs().sum()) > 0
    r = D.jrd_representations(x.detach(), net(x.detach()), m.loss.weight, "jrd")
    assert not r.layers[0].requires_grad


# ------------------------------------------------------------------------- CML's energy confusion
def test_energy_confusion_of_the_embedding_is_two_minus_twice_linear_jrs():
    """JRD Sec. 6: CML's EC is the JRS-like quantity with the embedding layer alone and the degree-1
    homogeneous polynomial kernel. On the method's (unit-norm) embedding and a P x K batch, the mean EC over
    all class pairs (zslib.methods.cml.confusion, CML Eq. 3) is 2 - 2 x the Eq. 11 JRS with the linear kernel."""
    net, (x, y) = _net(), _batch(classes=6, per_class=3, seed=2)
    emb = net(x)
    ec = R.energy_confusion(emb, y, pairs="all")
    jrs_linear = D.jrs_regularizer([emb], y, [D.linear_kernel])
    assert ec.item() == pytest.approx(2.0 - 2.0 * jrs_linear.item(), rel=1e-12)
    # and class pair by class pair, through kernel_energy_confusion
    classes, e_lin = D.kernel_energy_confusion([emb], y, [D.linear_kernel])
    _, ec_pairs = R.pairwise_energy_confusion(emb, y)
    off = ~torch.eye(len(classes), dtype=torch.bool)
    torch.testing.assert_close(e_lin[off], ec_pairs[off], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------- optimizer, presets
def test_adam_eps_reaches_every_parameter_group():
    net = build_model("smallcnn", 8, widths=[4, 8, 8, 8])
    m = get_method("jrd")(Config(loss="am_softmax", method="jrd", method_params={"adam_eps": 0.01}, embedding_dim=8),
                          net, 3)
    groups = m.param_groups("main", net, OptimSettings(1e-4, 1e-4, 1.0, 1e-2))
    opt = torch.optim.Adam(groups)
    assert [g["eps"] for g in opt.param_groups] == [0.01] * len(groups)
    assert opt.param_groups[-1]["lr"] == 1e-2 and any(p is m.loss.weight for p in opt.param_groups[-1]["params"])
    plain = get_method("jrd")(Config(loss="am_softmax", method="jrd", embedding_dim=8), net, 3)
    assert all(g["eps"] == 1e-8 for g in torch.optim.Adam(plain.param_groups("main", net, OptimSettings(1e-4))).param_groups)


def test_presets_are_the_papers_settings():
    cub = Config.from_profile("full", dataset="cub200", **jrd_preset("cub200"))
    assert (cub.loss, cub.loss_params) == ("am_softmax", {"scale": 20.0, "margin": 0.1})
    assert cub.method == "jrd" and cub.method_params["alpha"] == 1.0 and cub.method_params["adam_eps"] == 0.01
    assert (cub.lr, cub.objective_lr, cub.weight_decay, cub.new_layer_mult) == (1e-4, 1e-2, 1e-4, 1.0)
    assert cub.batch_classes * cub.batch_per_class == 100 and cub.backbone == "bninception" and cub.freeze_bn
    assert cub.iterations == 50 * 59 and cub.schedule == {"name": "step", "every": 20 * 59, "gamma": 0.1}
    assert jrd_method("cars196")["loss_params"]["margin"] == 0.05
    assert JRD_PRESETS["sop"]["alpha"] == 0.4 and JRD_PRESETS["sop"]["proxy_lr"] == 0.1
    base = Config.from_profile("full", dataset="cub200", **jrd_preset("cub200", alpha=0.0))
    assert base.method_params["alpha"] == 0.0 and base.method_params["adam_eps"] == 0.01  # same optimizer
    mmd = jrd_method("cub200", alpha=0.1, regularizer="jmmd")
    assert mmd["method_params"]["regularizer"] == "jmmd"
    with pytest.raises(KeyError, match="no JRD preset"):
        jrd_method("flowers102")
    # In-Shop is not in the paper: its preset is stated as the paper's SOP settings over In-Shop's training images
    shop, sop = JRD_PRESETS["inshop"], JRD_PRESETS["sop"]
    assert "not in chu2020jrd" in shop["source"] and "SOP settings" in shop["source"]
    assert {k: shop[k] for k in ("alpha", "margin", "proxy_lr", "batch_size")} == \
        {k: sop[k] for k in ("alpha", "margin", "proxy_lr", "batch_size")}
    assert shop["iterations"] == 80 * math.ceil(25882 / 120) and "chu2020jrd Sec. 5.1" in sop["source"]


# -------------------------------------------------------------------------------------- end to end
def test_a_tiny_run_trains_and_logs_the_regularizer(tmp_path):
    from zslib.engine.runner import run

    config = Config(iterations=4, eval_every=4, synth_images_per_class=8, image_size=32, resize_size=36,
                    embedding_dim=16, batch_classes=4, batch_per_class=2, objective_lr=1e-2,
                    **jrd_method(alpha=0.5))
    r = run(config, results_dir=tmp_path, progress=False, device="cpu")
    assert [set(row) for row in r.history.losses] == [{"step", "am_softmax", "jrs", "total"}] * 4
    jrs = [row["jrs"] / 0.5 for row in r.history.losses]
    assert all(0.0 < v <= 1.0 for v in jrs)  # a mean of products of normalized Gaussian mixtures
    assert 0.0 <= r.metric("R@1") <= 1.0


# ------------------------------------------------------------------------- intra, the Gaussian form
def test_intra_method_gaussian_form_is_the_gaussian_penalty():
    torch.manual_seed(0)
    config = Config(loss="am_softmax", method="intra", method_params={"alpha": 2.0, "form": "gaussian"},
                    embedding_dim=4)
    m = get_method("intra")(config, None, 5)
    model = nn.Linear(6, 4)
    x, y = torch.randn(10, 6), torch.arange(5).repeat_interleave(2)
    emb = model(x)
    assert m.terms("main", model, x, y)["intra"].item() == pytest.approx(
        2.0 * gaussian_intra_class_distance(emb, y).item(), rel=1e-6)
    assert Config(method="intra").method_params["form"] == "squared"  # earlier runs keep their meaning


# ------------------------------------------------------------------------------ mixture sizes (Fig. 6)
def _released_code_scales(k, mul=2.0):
    """The bandwidth multipliers of the released code's ``guassian_kernel`` (loss.py, github.com/YangLin122/JRD):
    the mean squared distance divided by ``mul ** (k // 2)``, then times ``mul ** i`` for ``i < k``."""
    base = 1.0 / mul ** (k // 2)
    return [base * mul ** i for i in range(k)]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7])
def test_mixture_scales_are_the_released_codes(k):
    assert list(D.mixture_scales(k)) == _released_code_scales(k)
    assert D.mixture_scales(3) == D.GAUSSIAN_SCALES  # the paper's K = 3 (Sec. 5.1)


def test_mixture_scales_refuse_an_empty_or_fractional_mixture():
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError):
            D.mixture_scales(bad)


@pytest.mark.parametrize("mixture", [(1, 1), (1, 5), (5, 1), (2, 3), (5, 5)])
def test_mixture_sizes_set_the_pooling_and_embedding_kernels(mixture):
    """The method's JRS term with mixture (K, K') against a double loop over pairs with the released code's
    bandwidths: K Gaussians on the pooling layer, K' on the embedding, one on the class level."""
    net, (x, y) = _net(), _batch(seed=4)
    m = _method(alpha=1.0, mixture=list(mixture))
    value = m.terms("main", net, x, y)["jrs"].item()
    pooled = net.backbone.pooled(x).detach().numpy()
    emb = net.head(torch.as_tensor(pooled)).detach()
    emb = (emb / emb.norm(dim=1, keepdim=True)).numpy()
    w = m.loss.weight.detach().numpy()
    layers = {"p": pooled, "e": emb, "c": emb @ (w / np.linalg.norm(w, axis=1, keepdims=True)).T}
    scales = {"p": _released_code_scales(mixture[0]), "e": _released_code_scales(mixture[1]), "c": [1.0]}
    n = len(y)
    d2 = {c: ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1) for c, a in layers.items()}
    tau = {c: d[~np.eye(n, dtype=bool)].mean() for c, d in d2.items()}
    labels = y.tolist()
    brute = np.mean([np.prod([np.mean([math.exp(-d2[c][i, j] / (s * tau[c])) for s in scales[c]]) for c in "pec"])
                     for i in range(n) for j in range(n) if labels[i] != labels[j]])
    assert value == pytest.approx(brute, rel=1e-9)


def test_mixture_one_one_is_the_single_gaussian_kernel_bitwise():
    net, (x, y) = _net(), _batch(seed=5)
    single = _method(alpha=1.0, kernel="gaussian").terms("main", net, x, y)["jrs"]
    torch.manual_seed(0)
    a = _method(alpha=1.0, kernel="gaussian")
    torch.manual_seed(0)
    b = _method(alpha=1.0, mixture=[1, 1])
    assert torch.equal(a.terms("main", net, x, y)["jrs"], b.terms("main", net, x, y)["jrs"])
    assert torch.isfinite(single)


def test_mixture_at_its_default_is_left_out_of_the_config_and_its_hash():
    """``mixture`` was added after JRD runs were recorded: at the paper's [3, 3] it is not in method_params,
    so those configs keep their hash; another value is kept (and hashed), as a list."""
    from zslib.engine.config import config_hash

    plain = Config(loss="am_softmax", method="jrd")
    for same in ([3, 3], (3, 3)):
        c = Config(loss="am_softmax", method="jrd", method_params={"mixture": same})
        assert "mixture" not in c.method_params and config_hash(c) == config_hash(plain)
    other = Config(loss="am_softmax", method="jrd", method_params={"mixture": (1, 5)})
    assert other.method_params["mixture"] == [1, 5] and config_hash(other) != config_hash(plain)
    assert Config.from_dict(other.as_dict()) == other
    assert _method().p["mixture"] == [3, 3]  # the method itself sees the default
    assert _method(mixture=(5, 1)).p["mixture"] == [5, 1]
    for bad in ([3], [0, 3], [3, 2.5], 3, "33", [True, 3]):
        with pytest.raises(ValueError, match="mixture must be"):
            Config(loss="am_softmax", method="jrd", method_params={"mixture": bad})
    with pytest.raises(ValueError, match="has none"):
        Config(loss="am_softmax", method="jrd", method_params={"kernel": "laplace", "mixture": [1, 1]})
    assert "mixture" not in Config(loss="am_softmax", method="jrd", method_params={"kernel": "laplace"}).method_params


def test_recorded_jrd_runs_keep_their_config_hash():
    """Every recorded JRD run (and analysis record) is still found under the hash in its file name."""
    import json
    from pathlib import Path

    from zslib.engine.config import config_hash

    root = Path(__file__).resolve().parents[1] / "results" / "recorded"
    files = sorted(root.glob("jrd-*.json")) + sorted((root / "analyses").glob("jrd-*.json"))
    for f in files:
        d = json.loads(f.read_text())
        assert config_hash(Config.from_dict(d["config"])) in f.name, f.name
