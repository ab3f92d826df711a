"""The methods extension point (zslib.methods): registry and parameter validation, the config hash, a
two-phase method trained alternately (each phase moves only its own parameters; exact resume), CML and
the intra-class penalty as methods, and the trainer's checks on what a method returns."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from zslib.methods.cml import confusion as R
from zslib.methods.jrd.intra import intra_class_distance
from zslib.engine.config import Config, config_hash
from zslib.engine.registry import METHODS, get_method
from zslib.engine.method import Method, Param, number, objective_method, one_of
from zslib.methods.cml.method import CML_PRESETS, CML_TRAINING, cml_method, cml_preset, with_confusion
from zslib.engine.models.grl import grad_reverse
from zslib.engine.train import TrainSpec, train
from toys import Blocks


# ------------------------------------------------------------------------------------ registry, params
def test_registry_names_papers_and_parameters():
    assert {"baseline", "cml", "intra"} <= set(METHODS)
    for name, cls in METHODS.items():
        assert cls.name == name and cls.paper and cls.equations and cls.title
        assert issubclass(cls, Method)
        assert name in cls.describe()
    with pytest.raises(ValueError, match=r"unknown method 'cmll'; choose one of \["):
        get_method("cmll")


def test_method_params_are_completed_and_checked():
    c = Config(method="cml", method_params={"lambda1": 0.1})
    assert c.method_params == {"lambda1": 0.1, "lambda2": 0.0, "ec_pairs": "random", "scale": "paper"}
    with pytest.raises(ValueError, match=r"no parameter\(s\) \['lambda3'\]; it accepts: lambda1 \(default 0.0\)"):
        Config(method="cml", method_params={"lambda3": 1.0})
    with pytest.raises(ValueError, match="lambda1 must be >= 0.0"):
        Config(method="cml", method_params={"lambda1": -1.0})
    with pytest.raises(ValueError, match="finite"):
        Config(method="cml", method_params={"lambda2": float("nan")})
    with pytest.raises(ValueError, match="ec_pairs must be one of"):
        Config(method="cml", method_params={"ec_pairs": "some"})
    with pytest.raises(ValueError, match="unknown method"):
        Config(method="nosuch")
    with pytest.raises(ValueError, match="unknown loss"):
        Config(loss="nosuch")
    with pytest.raises(ValueError, match=r"loss 'triplet' has no parameter\(s\) \['margn'\]"):
        Config(loss_params={"margn": 0.2})


def test_config_defaults_come_from_the_profile_only():
    from zslib.engine.profile import PROFILES

    for name, profile in PROFILES.items():
        c = Config(profile=name)
        assert (c.image_size, c.lr, c.new_layer_mult, c.backbone_params) == (
            profile.image_size, profile.lr, profile.new_layer_mult, dict(profile.backbone_params))
    assert Config() == Config.from_profile("quick")


def test_the_config_hash_includes_the_method_and_its_parameters():
    base = Config()
    a = base.replace(method="cml", method_params={"lambda1": 0.1})
    b = base.replace(method="cml", method_params={"lambda1": 0.2})
    explicit = base.replace(method="cml", method_params={"lambda1": 0.1, "lambda2": 0.0, "scale": "paper"})
    assert len({config_hash(base), config_hash(a), config_hash(b)}) == 3
    assert config_hash(a) == config_hash(explicit)  # defaults filled in: the same experiment
    assert base.replace(method="cml").replace(method="baseline").method_params == {}


def test_method_param_checks():
    check = number(low=0.0, high=1.0)
    assert check(0.5, "x") == 0.5
    with pytest.raises(ValueError):
        check(1.5, "x")
    with pytest.raises(ValueError, match="one of"):
        one_of("a", "b")("c", "x")


# ------------------------------------------------------------------------------------- a two-phase toy
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 8))

    def forward(self, x):
        return nn.functional.normalize(self.body(x), dim=1)


class AlternatingAdversary(Method):
    """Embedding phase: a pair loss minus the adversary's classification loss (through a gradient
    reversal layer); adversary phase: the adversary fits the classes on detached embeddings."""

    name, paper, equations = "toy_adversary", "test", "none"
    phases = ("embedding", "adversary")
    params = {"weight": Param(0.5, "adversary weight", number(low=0.0))}

    def __init__(self, n_classes=4):
        super().__init__()
        self.adversary = nn.Linear(8, n_classes)
        self.stored = None

    def param_groups(self, phase, model, settings):
        if phase == "embedding":
            return [{"params": list(model.parameters()), "lr": settings.lr}]
        return [{"params": list(self.adversary.parameters()), "lr": settings.method_lr}]

    def terms(self, phase, model, images, labels):
        if phase == "embedding":
            emb = model(images)
            self.stored = emb.detach()
            sim = emb @ emb.T
            same = labels[:, None] == labels[None, :]
            pair = (1 - sim)[same].mean() + torch.relu(sim[~same]).mean()
            adv = nn.functional.cross_entropy(self.adversary(grad_reverse(emb)), labels)
            return {"pair": pair, "reversed_ce": self.p["weight"] * adv}
        return {"adversary_ce": nn.functional.cross_entropy(self.adversary(self.stored), labels)}


def _train_toy(tmp_path=None, iterations=6, callbacks=(), seed=0, checkpoint_every=None):
    torch.manual_seed(seed)
    model, method = Tiny(), AlternatingAdversary()
    h = train(model, method, Blocks(), TrainSpec(iterations=iterations, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                 objective_lr=5e-2, device="cpu", progress=False, seed=seed,
                                                 callbacks=callbacks, checkpoint_every=checkpoint_every,
                                                 checkpoint_path=None if tmp_path is None else tmp_path / "ck.pt",
                                                 schedule={"name": "step", "every": 3, "gamma": 0.5}))
    return model, method, h


def test_each_phase_moves_only_its_own_parameters():
    snapshots = []

    class Spy(AlternatingAdversary):
        def terms(self, phase, model, images, labels):
            snapshots.append((phase, [p.detach().clone() for p in model.parameters()],
                              [p.detach().clone() for p in self.adversary.parameters()]))
            return super().terms(phase, model, images, labels)

    torch.manual_seed(0)
    model, method = Tiny(), Spy()
    h = train(model, method, Blocks(), TrainSpec(iterations=3, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                 device="cpu", progress=False))
    # snapshots: (embedding, adversary) per step; compare each with the next
    for (phase, m0, a0), (_, m1, a1) in zip(snapshots, snapshots[1:]):
        model_moved = any(not torch.equal(x, y) for x, y in zip(m0, m1))
        adv_moved = any(not torch.equal(x, y) for x, y in zip(a0, a1))
        if phase == "embedding":
            assert model_moved and not adv_moved
        else:
            assert adv_moved and not model_moved
    assert set(h.losses[0]) == {"step", "pair", "reversed_ce", "adversary_ce", "total"}


def test_reversal_pushes_the_extractor_up_the_adversary_loss():
    """With the gradient reversal layer, the embedding phase's step changes the model so that the adversary
    (held fixed) does worse: its loss on the new embeddings rises."""
    torch.manual_seed(0)
    model, method = Tiny(), AlternatingAdversary()
    method.p["weight"] = 1.0
    x, y = Blocks().x[:12], torch.as_tensor(Blocks().labels[:12])
    before = nn.functional.cross_entropy(method.adversary(model(x)), y).item()
    terms = method.terms("embedding", model, x, y)
    model.zero_grad()
    terms["reversed_ce"].backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.05 * p.grad
    after = nn.functional.cross_entropy(method.adversary(model(x)), y).item()
    assert after > before


def test_a_two_phase_run_resumes_bitwise(tmp_path):
    whole = _train_toy(iterations=8)

    class Kill(Exception):
        pass

    def kill(step, history):
        if step == 5:
            raise Kill

    with pytest.raises(Kill):
        _train_toy(tmp_path, iterations=8, callbacks=[kill], checkpoint_every=2)
    from zslib.engine.train import load_checkpoint
    state = load_checkpoint(tmp_path / "ck.pt")
    assert state["step"] == 4 and set(state["optimizers"]) == {"embedding", "adversary"}
    assert set(state["schedulers"]) == {"embedding", "adversary"} and set(state["scalers"]) == set(state["optimizers"])
    resumed = _train_toy(tmp_path, iterations=8, checkpoint_every=2)  # continues from step 4
    for a, b in zip([*whole[0].state_dict().values(), *whole[1].state_dict().values()],
                    [*resumed[0].state_dict().values(), *resumed[1].state_dict().values()]):
        assert torch.equal(a, b)
    assert whole[2].losses == resumed[2].losses


def test_the_trainer_checks_what_a_method_returns():
    class Foreign(AlternatingAdversary):
        def param_groups(self, phase, model, settings):
            return [{"params": [nn.Parameter(torch.zeros(1))], "lr": 1.0}]

    with pytest.raises(ValueError, match="belongs neither to the model nor to the method"):
        train(Tiny(), Foreign(), Blocks(), TrainSpec(iterations=1, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                     device="cpu", progress=False))

    class Clash(AlternatingAdversary):
        def terms(self, phase, model, images, labels):
            t = super().terms(phase, model, images, labels)
            return {"pair": sum(t.values())}

    with pytest.raises(ValueError, match="repeats the term name"):
        train(Tiny(), Clash(), Blocks(), TrainSpec(iterations=1, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                   device="cpu", progress=False))

    class TwoPhasesNoGroups(Method):
        name, paper, equations = "x", "x", "x"
        phases = ("a", "b")

    with pytest.raises(NotImplementedError, match="override param_groups"):
        train(Tiny(), TwoPhasesNoGroups(), Blocks(),
              TrainSpec(iterations=1, batch_classes=2, batch_per_class=3, lr=1e-2, device="cpu", progress=False))


def test_a_phase_may_skip_a_step():
    class EveryOther(AlternatingAdversary):
        def terms(self, phase, model, images, labels):
            if phase == "adversary" and self.calls % 2:
                self.calls += 1
                return {}
            self.calls += phase == "adversary"
            return super().terms(phase, model, images, labels)

    m = EveryOther()
    m.calls = 0
    torch.manual_seed(0)
    h = train(Tiny(), m, Blocks(), TrainSpec(iterations=4, batch_classes=2, batch_per_class=3, lr=1e-2, device="cpu",
                                             progress=False))
    assert ["adversary_ce" in row for row in h.losses] == [True, False, True, False]


# ------------------------------------------------------------------------------------------------ CML
def _cml(loss="triplet", **params):
    config = Config(loss=loss, method="cml", method_params=params, embedding_dim=3)
    return get_method("cml")(config, None, 4)


def test_cml_terms_are_the_weighted_regularizers():
    torch.manual_seed(0)
    model = nn.Linear(5, 3).double()
    images = torch.randn(12, 5, dtype=torch.float64)
    labels = torch.arange(4).repeat_interleave(3)
    emb = model(images)
    m = _cml(lambda1=0.3, lambda2=0.05, ec_pairs="all", scale="mean").double()
    terms = m.terms("main", model, images, labels)
    assert set(terms) == {"triplet", "ec", "dc"}
    assert terms["triplet"].item() == pytest.approx(m.loss(emb, labels).item())
    assert terms["ec"].item() == pytest.approx(0.3 * R.energy_confusion(emb, labels, pairs="all").item())
    assert terms["dc"].item() == pytest.approx(0.05 * R.diversity_confusion(emb).item())
    # the paper's scale: Eq. 12 sums the triplet loss over the batch, zslib averages: lambdas / batch size
    paper = _cml(lambda1=0.3, lambda2=0.05, ec_pairs="all", scale="paper").double().terms("main", model, images, labels)
    assert paper["ec"].item() == pytest.approx(terms["ec"].item() / 12)
    assert paper["dc"].item() == pytest.approx(terms["dc"].item() / 12)
    binomial = _cml("binomial_deviance", lambda1=0.3, ec_pairs="all", scale="paper").double()
    assert binomial.terms("main", model, images, labels)["ec"].item() == pytest.approx(terms["ec"].item())
    assert set(_cml(lambda1=0.3).terms("main", model.float(), images.float(), labels)) == {"triplet", "ec"}
    assert set(_cml(lambda2=0.3).terms("main", model, images.float(), labels)) == {"triplet", "dc"}
    with pytest.raises(ValueError, match="scale='paper' is defined for the paper's losses"):
        _cml("angular", lambda1=0.1)


def test_cml_minimizing_ec_lowers_ec_and_warns_on_unit_norm():
    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    images, labels = torch.randn(12, 5), torch.arange(4).repeat_interleave(3)
    m = _cml(lambda1=1.0, ec_pairs="all", scale="mean")
    before = R.energy_confusion(model(images), labels, pairs="all").item()
    m.terms("main", model, images, labels)["ec"].backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
    assert R.energy_confusion(model(images), labels, pairs="all").item() < before

    class Normalized(nn.Module):
        def forward(self, x):
            return nn.functional.normalize(x, dim=1)

    with pytest.warns(UserWarning, match="unit-norm"):
        _cml(lambda2=0.1).terms("main", Normalized(), torch.randn(8, 3), torch.arange(4).repeat_interleave(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _cml(lambda2=0.1).terms("main", nn.Identity(), 3 * torch.randn(8, 3), torch.arange(4).repeat_interleave(2))


def test_cml_presets_are_engine_config_overrides():
    assert set(CML_PRESETS) == {"cub200", "cars196", "sop", "inshop"}
    assert (CML_PRESETS["cars196"]["binomial"]["lambda1"], CML_PRESETS["cars196"]["binomial"]["lambda2"]) == (0.13, 0.03)
    assert [CML_PRESETS[d]["binomial"]["iterations"] for d in ("cub200", "cars196", "sop", "inshop")] == [
        5000, 10000, 20000, 20000]
    assert CML_TRAINING["batch_classes"] * CML_TRAINING["batch_per_class"] == 128
    for dataset in CML_PRESETS:
        for loss in ("triplet", "npair", "binomial", "n_pair", "binomial_deviance"):
            for variant in ("baseline", "cml-e", "cml-d", "cml"):
                c = Config.from_profile("full", dataset=dataset, **cml_preset(dataset, loss, variant))
                assert c.normalize is False and c.lr == 1e-5 and c.embedding_dim == 512
                if variant == "baseline":
                    assert c.method == "baseline"
                else:
                    p = c.method_params
                    assert (p["lambda1"] > 0) == (variant in ("cml", "cml-e"))
                    assert (p["lambda2"] > 0) == (variant in ("cml", "cml-d"))
    n = cml_method("cub200", "npair")
    assert n["loss"] == "n_pair" and n["loss_params"] == {"negatives": "all"}
    with pytest.raises(KeyError, match="dataset"):
        cml_method("imagenet", "triplet")
    with pytest.raises(KeyError, match="variant"):
        cml_method("sop", "triplet", "cml-x")


def test_with_confusion():
    base = Config(iterations=3)
    assert with_confusion(base).method == "baseline"
    c = with_confusion(base, 0.1, 0.0, embedding_dim=8)
    assert c.method == "cml" and c.method_params["lambda1"] == 0.1 and c.embedding_dim == 8
    with pytest.raises(ValueError, match="lambda2"):
        with_confusion(base, 0.1, -1.0)


# --------------------------------------------------------------------------------------------- intra
def test_intra_method_is_loss_plus_alpha_times_intra_distance():
    torch.manual_seed(0)
    config = Config(loss="am_softmax", method="intra", method_params={"alpha": 3.0}, embedding_dim=4)
    m = get_method("intra")(config, None, 5)
    model = nn.Linear(6, 4)
    x, y = torch.randn(10, 6), torch.arange(5).repeat_interleave(2)
    terms = m.terms("main", model, x, y)
    emb = model(x)
    assert terms["am_softmax"].item() == pytest.approx(m.loss(emb, y).item())
    assert terms["intra"].item() == pytest.approx(3.0 * intra_class_distance(emb, y).item())


def test_class_ids_are_mapped_to_contiguous_indices():
    config = Config(loss="proxy_nca", embedding_dim=4)
    m = get_method("baseline")(config, None, 3)
    m.use_classes(np.array([5, 9, 12]))
    seen = []
    m.terms = lambda phase, model, images, labels: seen.append(labels) or {}
    m.step_terms("main", None, None, torch.tensor([12, 5, 9]))
    assert seen[0].tolist() == [2, 0, 1]
    m.use_classes(np.arange(3))
    assert m.class_index is None


def test_objective_method_wraps_a_function():
    m = objective_method(lambda model, x, y: {"sum": model(x).sum()})
    assert m.terms("main", nn.Identity(), torch.ones(2, 2), None)["sum"].item() == 4.0
    with pytest.raises(TypeError, match="callable"):
        objective_method(3)


def test_the_pretrained_method_evaluates_without_training(tmp_path):
    from zslib.experiment import load_model, run
    from zslib.engine.train import embed

    config = Config(method="pretrained", iterations=5, eval_every=5, synth_images_per_class=6, image_size=32,
                    resize_size=36, embedding_dim=8)
    r = run(config, results_dir=tmp_path, progress=False)
    assert r.provenance["train_seconds"] == 0.0 and r.history.losses == []
    model = load_model(r, device="cpu")
    from zslib.experiment import build_data
    from zslib.engine.evaluate import recall_at_k
    emb, labels = embed(model, build_data(config)["unseen"])
    assert emb.shape[1] == 128  # the pooled feature of the quick CNN, not the 8-d head
    assert torch.allclose(emb.norm(dim=1), torch.ones(len(emb)), atol=1e-5)
    assert recall_at_k(emb, labels, ks=(1,))[1] == pytest.approx(r.metric("R@1"), abs=1e-12)
