"""activation_map: channel averaging, upsampling and mode handling against numpy oracles."""
import numpy as np
import pytest
import torch
from torch import nn

from zslib.analysis.saliency import activation_map, last_conv_stage


class _Fake(nn.Module):
    """A 'model' whose stage maps are given tensors, so the expected output is known exactly."""

    stage_names = ["stage1", "stage2", "pool"]

    def __init__(self, maps):
        super().__init__()
        self.maps = maps

    def features(self, x, names):
        return {n: self.maps[n] for n in names}


def test_channel_mean_and_nearest_upsampling_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 5, 3, 4)).astype(np.float32)
    model = _Fake({"stage2": torch.from_numpy(a), "stage1": torch.zeros(2, 1, 6, 8)})
    out = activation_map(model, torch.zeros(2, 3, 12, 16), mode="nearest", normalize=False)
    expect = np.stack([np.kron(a[i].mean(0), np.ones((4, 4))) for i in range(2)])
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-6, atol=1e-6)
    assert last_conv_stage(model) == "stage2"


def test_normalization_and_constant_maps():
    a = torch.randn(3, 4, 5, 5, generator=torch.Generator().manual_seed(0))
    a[1] = 2.0  # a constant map
    out = activation_map(_Fake({"stage2": a}), torch.zeros(3, 3, 10, 10), stage="stage2")
    assert out.shape == (3, 10, 10)
    for i in (0, 2):
        assert out[i].min().item() == pytest.approx(0.0, abs=1e-6) and out[i].max().item() == pytest.approx(1.0)
    assert torch.all(out[1] == 0)
    # nearest upsampling: the argmax cell's 2x2 block is exactly the normalized maximum, the argmin's 0
    near = activation_map(_Fake({"stage2": a}), torch.zeros(3, 3, 10, 10), stage="stage2", mode="nearest")
    raw = a[0].mean(0)
    ys, xs = divmod(int(raw.argmax()), 5)
    assert torch.all(near[0, 2 * ys: 2 * ys + 2, 2 * xs: 2 * xs + 2] == 1.0)
    ys, xs = divmod(int(raw.argmin()), 5)
    assert torch.all(near[0, 2 * ys: 2 * ys + 2, 2 * xs: 2 * xs + 2] == 0.0)


def test_real_model_restores_mode_and_is_nonnegative():
    from zslib.engine.models import build_model

    torch.manual_seed(0)
    model = build_model("smallcnn", 16, pretrained=False).train()
    x = torch.randn(2, 3, 32, 32)
    m1 = activation_map(model, x, normalize=False)
    assert model.training
    m2 = activation_map(model, x, normalize=False)
    assert m1.shape == (2, 32, 32) and torch.equal(m1, m2)
    assert bool((m1 >= 0).all())  # the last stage ends in a ReLU
    # size= overrides the output size
    assert activation_map(model, x, size=(8, 8)).shape == (2, 8, 8)


def test_bad_inputs():
    model = _Fake({"stage2": torch.zeros(1, 2, 2, 2)})
    with pytest.raises(ValueError, match="unknown stage"):
        activation_map(model, torch.zeros(1, 3, 4, 4), stage="pool")
    with pytest.raises(ValueError, match="B, C, H, W"):
        activation_map(model, torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="mode"):
        activation_map(model, torch.zeros(1, 3, 4, 4), mode="cubic")
