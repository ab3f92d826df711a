"""Crop and zoom (zslib.methods.deml.attention_crop) and localization scores (zslib.analysis.localization): connected regions
against scipy.ndimage, boxes against brute-force NumPy, IoU against torchvision, crops against slicing."""
import numpy as np
import pytest
import torch
from scipy import ndimage

from zslib.methods.deml.attention_crop import _connected_labels, attention_boxes, crop_and_zoom, zoom_to_attention
from zslib.analysis.localization import (box_iou, central_mask, central_mass, localization_scores, mass_on_object,
                                         peak_on_object)


def _smooth_maps(b=16, h=40, w=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(b, 1, 5, 5, generator=g)
    return torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)[:, 0]


def test_connected_regions_match_scipy():
    g = torch.Generator().manual_seed(0)
    for density in (0.3, 0.5, 0.7):
        mask = torch.rand(6, 19, 27, generator=g) < density
        labels = _connected_labels(mask)
        for i in range(6):
            m = mask[i].numpy()
            ref, count = ndimage.label(m)  # 4-connectivity
            ours = labels[i].numpy()
            assert (ours[~m] == 0).all() and (ours[m] > 0).all()
            pairs = set(zip(ref[m].tolist(), ours[m].tolist()))
            assert len(pairs) == count == len(np.unique(ours[m]))  # the same partition


def _numpy_box(region: np.ndarray):
    ys, xs = np.nonzero(region)
    return [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]


@pytest.mark.parametrize("component", ["all", "largest", "peak"])
def test_boxes_against_numpy_before_squaring(component):
    att = _smooth_maps()
    boxes = attention_boxes(att, component=component, square=False, min_size=0.0)
    for i in range(len(att)):
        a = att[i].numpy()
        region = a > a.mean()
        if component != "all":
            lab, count = ndimage.label(region)
            if component == "largest":
                sizes = ndimage.sum(region, lab, range(1, count + 1))
                region = lab == 1 + int(np.argmax(sizes))
            else:
                region = lab == lab.flat[np.argmax(a)]
        assert boxes[i].tolist() == _numpy_box(region)


@pytest.mark.parametrize("component", ["all", "largest", "peak"])
def test_boxes_are_inside_nonempty_square_and_contain_their_region(component):
    att = torch.cat([_smooth_maps(seed=1), torch.full((1, 40, 40), 0.3)])  # the last map is constant
    tight = attention_boxes(att, component=component, square=False, min_size=0.0)
    boxes = attention_boxes(att, component=component, min_size=0.3)
    x0, y0, x1, y1 = boxes.unbind(1)
    assert (x0 >= 0).all() and (y0 >= 0).all() and (x1 <= 40).all() and (y1 <= 40).all()
    assert torch.equal(x1 - x0, y1 - y0) and ((x1 - x0) >= 12).all()
    assert torch.equal(boxes, boxes.round())
    assert (x0 <= tight[:, 0]).all() and (y0 <= tight[:, 1]).all()
    assert (x1 >= tight[:, 2]).all() and (y1 >= tight[:, 3]).all()
    assert boxes[-1].tolist() == [0, 0, 40, 40]  # uniform attention: no crop
    if component != "largest":  # the largest region need not hold the maximum
        peak = att.flatten(1).argmax(1)
        py, px = peak // 40, peak % 40
        assert ((px >= x0) & (px < x1) & (py >= y0) & (py < y1)).all()


def test_box_threshold_fraction_and_image_scaling():
    att = torch.zeros(1, 10, 10)
    att[0, 2:5, 6:9] = 1.0
    att[0, 3, 7] = 2.0
    assert attention_boxes(att, threshold=0.6, component="all", square=False, min_size=0).tolist() == [[7, 3, 8, 4]]
    assert attention_boxes(att, threshold=0.2, component="all", square=False, min_size=0).tolist() == [[6, 2, 9, 5]]
    big = attention_boxes(att, component="all", square=False, min_size=0, image_size=(40, 50))
    assert big.tolist() == [[30, 8, 45, 20]]


def test_crop_and_zoom_equals_slicing_and_is_batched():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(3, 3, 20, 30, generator=g)
    full = torch.tensor([[0.0, 0.0, 30.0, 20.0]] * 3)
    assert torch.allclose(crop_and_zoom(images, full), images, atol=1e-6)
    boxes = torch.tensor([[2.0, 3.0, 10.0, 11.0], [0.0, 0.0, 8.0, 8.0], [22.0, 12.0, 30.0, 20.0]])
    crops = crop_and_zoom(images, boxes, 8)
    for i, (x0, y0, x1, y1) in enumerate(boxes.long().tolist()):
        assert torch.allclose(crops[i], images[i, :, y0:y1, x0:x1], atol=1e-6)
    zoomed = crop_and_zoom(images, boxes, (16, 16))
    single = torch.cat([crop_and_zoom(images[i:i + 1], boxes[i:i + 1], (16, 16)) for i in range(3)])
    assert zoomed.shape == (3, 3, 16, 16) and torch.allclose(zoomed, single)
    crops, used = zoom_to_attention(images, torch.rand(3, 10, 15, generator=g), size=12)
    assert crops.shape == (3, 3, 12, 12) and used.shape == (3, 4)
    assert (used[:, 2] <= 30).all() and (used[:, 3] <= 20).all()


def test_localization_scores_and_their_chance_levels():
    masks = torch.zeros(4, 20, 20, dtype=torch.bool)
    masks[:, 5:10, 4:12] = True
    obj_boxes = torch.tensor([[4.0, 5.0, 12.0, 10.0]] * 4)
    perfect = localization_scores(masks.float(), masks, obj_boxes,
                                  attention_boxes(masks.float(), square=False, min_size=0))
    assert perfect["mass_on_object"] == 1.0 and perfect["peak_on_object"] == 1.0 and perfect["box_iou"] == 1.0
    assert perfect["lift"] == pytest.approx(1 / perfect["area_share"])
    flat = localization_scores(torch.ones(4, 20, 20), masks, obj_boxes, attention_boxes(torch.ones(4, 20, 20)))
    assert flat["mass_on_object"] == pytest.approx(40 / 400) and flat["lift"] == pytest.approx(1.0)
    assert flat["box_iou"] == pytest.approx(flat["box_iou_full_image"]) == pytest.approx(40 / 400)
    att = torch.rand(4, 20, 20)
    expected = (att * masks).sum(dim=(1, 2)) / att.sum(dim=(1, 2))
    assert torch.allclose(mass_on_object(att, masks), expected)
    att[:, 7, 6] = 5.0
    att[1, 0, 0] = 9.0
    assert peak_on_object(att, masks).tolist() == [True, False, True, True]


def test_central_mass_counts_the_middle_box_and_uniform_scores_its_area():
    mask = central_mask(8, 12)  # middle half of each side: rows 2..5, columns 3..8
    expected = torch.zeros(8, 12, dtype=torch.bool)
    expected[2:6, 3:9] = True
    assert torch.equal(mask, expected)
    assert central_mask(7, 7, 1.0).all() and central_mask(5, 5, 0.01).sum() == 1
    assert central_mass(torch.ones(3, 8, 12)).tolist() == pytest.approx([0.25] * 3)
    att = torch.zeros(2, 8, 12)
    att[0, 3, 4] = 1.0  # all mass inside the central box
    att[1, 0, 0], att[1, 4, 5] = 3.0, 1.0  # a quarter inside
    assert central_mass(att).tolist() == pytest.approx([1.0, 0.25])
    with pytest.raises(ValueError, match="fraction"):
        central_mask(8, 8, 0.0)
    with pytest.raises(ValueError, match=r"\(B, H, W\)"):
        central_mass(torch.ones(8, 8))


def test_box_iou_against_torchvision():
    from torchvision.ops import box_iou as tv_iou

    g = torch.Generator().manual_seed(3)
    a = torch.rand(50, 2, generator=g) * 20
    b = torch.rand(50, 2, generator=g) * 20
    boxes_a = torch.cat([a, a + torch.rand(50, 2, generator=g) * 10 + 0.5], 1)
    boxes_b = torch.cat([b, b + torch.rand(50, 2, generator=g) * 10 + 0.5], 1)
    assert torch.allclose(box_iou(boxes_a, boxes_b).float(), tv_iou(boxes_a, boxes_b).diagonal(), atol=1e-6)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="component"):
        attention_boxes(torch.rand(1, 5, 5), component="biggest")
    with pytest.raises(ValueError, match="threshold"):
        attention_boxes(torch.rand(1, 5, 5), threshold=1.5)
    with pytest.raises(ValueError, match=r"\(B, H, W\)"):
        attention_boxes(torch.rand(5, 5))
    with pytest.raises(ValueError, match="boxes"):
        crop_and_zoom(torch.rand(2, 3, 5, 5), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="shape"):
        mass_on_object(torch.rand(1, 5, 5), torch.ones(1, 6, 6, dtype=torch.bool))
