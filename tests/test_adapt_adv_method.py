"""Adapt-Adv as a method (zslib.methods.adapt_adv.method): parameters, the network attach builds, the two phases of
Algorithm 1 (each moves only its own parameters), the extractor's term against Eq. 20 and Eq. 22 computed by
hand, the per-epoch lambda schedule against a replay from the logged losses, end-to-end runs and exact resume."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zslib.methods.adapt_adv.class_adversary import adaptive_lambda
from zslib.engine.config import Config
from zslib.engine.registry import METHODS, get_method
from zslib.methods.adapt_adv.method import AdaptAdv, lambda_trace
from zslib.methods.adapt_adv.gdfl import GDFLNet
from zslib.engine.runner import build_data, build_method, build_model, run
from zslib.engine.train.optim import OptimSettings

TINY = dict(iterations=4, eval_every=4, synth_images_per_class=8, image_size=32, resize_size=36, embedding_dim=16,
            batch_classes=4, batch_per_class=2)


def test_registered_with_the_issue_parameters():
    assert METHODS["adapt_adv"] is AdaptAdv and get_method("adapt_adv") is AdaptAdv
    p = AdaptAdv.validate({})
    assert p["form"] == "additive" and p["lambda0"] == 0.5 and p["l_thresh"] == 1.5 and p["dropout"] == 0.1
    assert p["layers"] is None and p["use_gdfl"] and p["use_adversary"]
    assert AdaptAdv.validate({"layers": "block2"})["layers"] == ["block2"]
    for bad, match in [({"form": "dot"}, "form must be one of"), ({"lambda0": -0.1}, "lambda0 must be >= 0"),
                       ({"dropout": 1.0}, "dropout must be <= 0.99"), ({"layers": []}, "list of map names"),
                       ({"layers": ["a", "a"]}, "distinct"), ({"classifier_lr": 0.0}, "classifier_lr"),
                       ({"epoch_steps": 0}, "epoch_steps"), ({"use_gdfl": 1}, "true or false"),
                       ({"lambda": 1.0}, r"no parameter\(s\) \['lambda'\]")]:
        with pytest.raises((ValueError, TypeError), match=match):
            Config(method="adapt_adv", method_params=bad)
    assert AdaptAdv.reads_maps({}) and not AdaptAdv.reads_maps({"use_gdfl": False})


def _built(**method_params):
    config = Config(method="adapt_adv", method_params=method_params, **TINY)
    data = build_data(config)
    classes = np.unique(np.asarray(data["train"].labels))
    torch.manual_seed(0)
    model = build_model(config)
    method = build_method(config, model, classes)
    images, labels = next(iter(torch.utils.data.DataLoader(data["train"], batch_size=8, shuffle=False)))[:2]
    return config, model, method, images, labels, len(classes)


def test_attach_builds_gdfl_only_when_asked_and_the_classifier_reads_f():
    _, model, method, images, _, C = _built()
    assert isinstance(model, GDFLNet) and list(model.layers) == list(model.backbone.roles["intermediate"])
    assert method.classifier.net[0].in_features == model.fused_dim == model.extract(images).shape[1]
    _, plain, method2, images, _, _ = _built(use_gdfl=False)
    assert not isinstance(plain, GDFLNet) and method2.classifier.net[0].in_features == plain.feature_dim
    _, _, alone, _, _, _ = _built(use_adversary=False)
    assert alone.classifier is None and alone.phases == ("extractor",) and alone.lam == 0.0
    assert method.phases == ("extractor", "classifier")


def test_extractor_term_is_eq20_with_the_chance_level_lambda_of_eq22():
    _, model, method, images, labels, C = _built(lambda0=1.0)
    method.classifier.eval()  # no dropout: the same logits twice
    terms = method.terms("extractor", model, images, labels)
    lam = -math.tanh(math.log(C) - 1.5) * 1.0  # before the first epoch ends: chance level ln C
    assert method.lam == pytest.approx(lam) and lam < 0  # cooperative start
    lc = torch.nn.functional.cross_entropy(method.classifier(model.extract(images)), labels)
    assert float(terms["adv"].detach()) == pytest.approx(-lam * float(lc.detach()), rel=1e-5)
    assert float(terms["triplet"].detach()) == pytest.approx(float(method.loss(model(images), labels).detach()), rel=1e-5)


def _step(method, model, phase, images, labels, optimizer):
    for p in [*model.parameters(), *method.parameters()]:
        p.grad = None
    sum(method.terms(phase, model, images, labels).values()).backward()
    optimizer.step()


@pytest.mark.parametrize("use_gdfl", [True, False])
def test_each_phase_moves_only_its_own_parameters(use_gdfl):
    config, model, method, images, labels, _ = _built(use_gdfl=use_gdfl)
    settings = OptimSettings(lr=1e-2, new_layer_mult=1.0, weight_decay=0.0)
    optim = {ph: torch.optim.SGD(method.param_groups(ph, model, settings), lr=1e-2) for ph in method.phases}
    cls_ids = {id(p) for p in method.classifier.parameters()}
    ext_ids = {id(p) for g in method.param_groups("extractor", model, settings) for p in g["params"]}
    assert not cls_ids & ext_ids
    assert {id(p) for g in method.param_groups("classifier", model, settings) for p in g["params"]} == cls_ids
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {id(p) for p in trainable} <= ext_ids

    def snapshot():
        return [p.detach().clone() for p in trainable], [p.detach().clone() for p in method.classifier.parameters()]

    m0, c0 = snapshot()
    _step(method, model, "extractor", images, labels, optim["extractor"])
    m1, c1 = snapshot()
    assert all(torch.equal(a, b) for a, b in zip(c0, c1))  # the classifier is frozen in the extractor step
    assert any(not torch.equal(a, b) for a, b in zip(m0, m1))
    _step(method, model, "classifier", images, labels, optim["classifier"])
    m2, c2 = snapshot()
    assert all(torch.equal(a, b) for a, b in zip(m1, m2))  # the extractor is frozen in the classifier step
    assert any(not torch.equal(a, b) for a, b in zip(c1, c2))


def test_the_classifier_phase_needs_the_extractor_phase_first():
    _, model, method, images, labels, _ = _built()
    with pytest.raises(RuntimeError, match="after the extractor phase"):
        method.terms("classifier", model, images, labels)


def test_lambda_is_set_per_epoch_from_the_mean_classifier_loss():
    _, model, method, images, labels, C = _built(epoch_steps=2, lambda0=0.5, l_thresh=1.5)
    losses = []
    for step in range(5):
        method.terms("extractor", model, images, labels)
        losses.append(float(method.terms("classifier", model, images, labels)["classifier_ce"].detach()))
        if step < 1:
            assert method.lam == pytest.approx(adaptive_lambda(math.log(C), 1.5, 0.5))
    expected = [adaptive_lambda(np.mean(losses[0:2]), 1.5, 0.5), adaptive_lambda(np.mean(losses[2:4]), 1.5, 0.5)]
    assert [lam for _, lam in method.schedule.history] == pytest.approx(expected)
    assert method.lam == pytest.approx(expected[-1])
    state = method.state_dict()
    _, model2, fresh, *_ = _built(epoch_steps=2, lambda0=0.5, l_thresh=1.5)
    fresh.load_state_dict(state)
    assert fresh.steps == 5 and fresh.lam == method.lam and fresh.schedule.history == method.schedule.history


def test_end_to_end_runs_log_the_terms_and_replay_lambda(tmp_path):
    params = {"epoch_steps": 2, "lambda0": 1.0}
    r = run(Config(method="adapt_adv", method_params=params, **TINY), results_dir=tmp_path, progress=False)
    assert {"triplet", "adv", "classifier_ce"} <= set(r.history.losses[-1])
    assert 0.0 <= r.metrics["unseen"]["R@1"] <= 1.0 and np.isfinite(r.metrics["unseen"]["NMI"])
    trace = lambda_trace(r.history, _num_classes(r.config), params)
    ce = trace["classifier_ce"]
    C = _num_classes(r.config)
    assert trace["lambda"][0] == pytest.approx(adaptive_lambda(math.log(C), 1.5, 1.0))
    assert trace["lambda"][2] == pytest.approx(adaptive_lambda(ce[:2].mean(), 1.5, 1.0))
    assert trace["lambda"][3] == trace["lambda"][2]
    # the logged adversarial term is -lambda * L_c of the extractor step, with the replayed lambda
    adv = np.array([row["adv"] for row in r.history.losses])
    assert np.all(np.sign(adv) == -np.sign(trace["lambda"])) or np.all(trace["lambda"] == 0)
    plain = run(Config(method="adapt_adv", method_params={"use_gdfl": False, "use_adversary": False}, **TINY),
                results_dir=tmp_path, progress=False)
    assert set(plain.history.losses[-1]) - {"step", "total"} == {"triplet"}


def _num_classes(config):
    return len(np.unique(np.asarray(build_data(config)["train"].labels)))


def test_a_killed_run_resumes_exactly(tmp_path):
    config = Config(method="adapt_adv", method_params={"epoch_steps": 2}, **TINY)
    whole = run(config, results_dir=tmp_path / "a", progress=False)
    part = run(config, results_dir=tmp_path / "b", progress=False, checkpoint_every=2, max_steps=3)
    assert part.provenance == {"complete": False}
    resumed = run(config, results_dir=tmp_path / "b", progress=False, checkpoint_every=2)
    assert whole.history.losses == resumed.history.losses
    assert whole.metrics == resumed.metrics
