"""part_shares: the mass of a map on each SynthParts part, against hand counts and SynthParts' masks."""
import numpy as np
import pytest
import torch

from zslib.engine.data.synthparts import PART_NAMES, SynthParts
from zslib.analysis.saliency import part_shares


def test_hand_counted_case():
    # labels: background 0, part 1 ("a"), part 2 ("b"); part 3 ("c") not visible
    labels = torch.tensor([[[0, 0, 1, 1],
                            [0, 2, 1, 1],
                            [0, 2, 2, 0],
                            [0, 0, 0, 0]]], dtype=torch.uint8)
    maps = torch.tensor([[[1., 0., 2., 2.],
                          [0., 3., 0., 0.],
                          [0., 1., 0., 0.],
                          [0., 0., 0., 1.]]])
    s = part_shares(maps, labels, part_names=("a", "b", "c"))
    total = 10.0
    assert s["a"][0] == pytest.approx(4 / total) and s["b"][0] == pytest.approx(4 / total)
    assert s["c"][0] == 0.0 and s["background"][0] == pytest.approx(2 / total)
    assert s["object"][0] == pytest.approx(8 / total)
    r = part_shares(maps, labels, part_names=("a", "b", "c"), relative=True)
    assert r["a"][0] == pytest.approx((4 / total) / (4 / 16)) and r["b"][0] == pytest.approx((4 / total) / (3 / 16))
    assert r["background"][0] == pytest.approx((2 / total) / (9 / 16)) and np.isnan(r["c"][0])


def test_uniform_map_gives_area_fractions_and_coarse_maps_are_resized():
    ds = SynthParts("seen", image_size=48, images_per_class=1, lazy=True)
    parts = ds.part_map[:4]
    uniform = part_shares(torch.ones(4, 48, 48), parts, relative=True)
    for name in ("background", "object", *PART_NAMES):
        visible = np.array([bool((parts[i] > 0).any()) if name == "object" else
                            bool((parts[i] == 0).any()) if name == "background" else
                            bool((parts[i] == PART_NAMES.index(name) + 1).any()) for i in range(4)])
        np.testing.assert_allclose(uniform[name][visible], 1.0, rtol=1e-12)
    # a 12x12 map, nearest-upsampled by 4: the mass of each cell spreads over its 4x4 block
    coarse = torch.rand(4, 12, 12, generator=torch.Generator().manual_seed(0))
    fine = coarse.repeat_interleave(4, 1).repeat_interleave(4, 2)
    a = part_shares(coarse, parts, mode="nearest")
    b = part_shares(fine, parts)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12)
    # shares sum to one over background and parts; object = sum of the parts
    total = a["background"] + sum(a[p] for p in PART_NAMES)
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)
    np.testing.assert_allclose(a["object"], sum(a[p] for p in PART_NAMES), rtol=1e-12)
    # a map that is exactly a part's mask puts all its mass on that part
    body = (parts == 1).float()
    np.testing.assert_allclose(part_shares(body, parts)["body"], 1.0)


def test_zero_maps_and_bad_inputs():
    labels = torch.zeros(2, 4, 4, dtype=torch.long)
    labels[:, 1:3, 1:3] = 1
    assert np.isnan(part_shares(torch.zeros(2, 4, 4), labels)["body"]).all()
    with pytest.raises(ValueError, match="non-negative"):
        part_shares(-torch.ones(2, 4, 4), labels)
    with pytest.raises(ValueError, match="labels must lie"):
        part_shares(torch.ones(2, 4, 4), labels + 7)
    with pytest.raises(TypeError, match="integer part labels"):
        part_shares(torch.ones(2, 4, 4), labels.float())
    with pytest.raises(ValueError, match=r"\(B, H, W\)"):
        part_shares(torch.ones(2, 4, 4), labels[:1])
    with pytest.raises(ValueError, match=r"\(B, h, w\)"):
        part_shares(torch.ones(4, 4), labels)
