"""SynthParts: the designed shortcut, ground truth that matches the pixels, determinism."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zslib.engine.data import SynthParts, shortcut_probe
from zslib.engine.data import synthparts as sp


@pytest.fixture(scope="module")
def seen():
    return SynthParts("seen", 48, 10)


@pytest.fixture(scope="module")
def unseen():
    return SynthParts("unseen", 48, 10)


# ------------------------------------------------------------------------------------- class design
def test_design_builds_the_shortcut():
    d = sp.design_classes()
    A = d.class_attributes
    assert d.num_classes >= 100
    seen_pairs = {tuple(r) for r in A[: d.num_seen, :2]}
    unseen_pairs = [tuple(r) for r in A[d.num_seen:, :2]]
    assert len(seen_pairs) == d.num_seen  # the shortcut tells every seen class apart
    assert not seen_pairs & set(unseen_pairs)  # unseen classes use new combinations ...
    for a in (0, 1):  # ... of colours the seen classes already show
        assert set(A[d.num_seen:, a]) <= set(A[: d.num_seen, a]) == set(range(len(sp.SHORTCUT_COLORS)))
    assert len(set(unseen_pairs)) == d.unseen_groups
    hard = list(sp._HARD)
    for g in range(d.unseen_groups):
        rows = A[d.num_seen:][d.unseen_group == g]
        assert len({tuple(r[:2]) for r in rows}) == 1
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                assert (rows[i, hard] != rows[j, hard]).sum() >= 2
    for a in hard:  # every hard value is learnable from the seen classes
        assert set(A[: d.num_seen, a]) == set(range(sp._SIZES[a]))
    assert len({tuple(r) for r in A}) == d.num_classes  # all classes differ in some attribute
    again = sp.design_classes()
    assert np.array_equal(again.class_attributes, A)
    assert not np.array_equal(sp.design_classes(design_seed=1).class_attributes, A)


def test_labels_are_global_and_disjoint(seen, unseen):
    assert seen.labels.dtype == np.int64 and seen.num_classes == 50 and unseen.num_classes == 50
    assert seen.labels.min() == 0 and seen.labels.max() == 49
    assert unseen.labels.min() == 50 and unseen.labels.max() == 99
    assert np.array_equal(seen.labels, np.repeat(np.arange(50), 10))
    assert seen.seen_mask.all() and not unseen.seen_mask.any()
    assert np.array_equal(unseen.attributes, unseen.design.class_attributes[unseen.labels])
    both = SynthParts("all", 32, 1)
    assert both.num_classes == 100 and len(both) == 100
    assert SynthParts("train", 32, 1).split == "seen" and SynthParts("test", 32, 1).split == "unseen"


# ------------------------------------------------------------------------------------- the probe
def test_shortcut_probe_separates_seen_not_unseen(seen, unseen):
    r = shortcut_probe(seen, unseen)
    assert r.seen_accuracy >= 0.95
    assert r.unseen_accuracy <= 0.40  # 5 unseen classes share each colour pair: about 1/5 at best
    full = shortcut_probe(seen, unseen, attributes=sp.ATTRIBUTE_NAMES)
    assert full.seen_accuracy >= 0.95 and full.unseen_accuracy >= 0.9
    hard_only = shortcut_probe(seen, unseen, attributes=[n for n in sp.ATTRIBUTE_NAMES
                                                         if n not in sp.SHORTCUT_ATTRIBUTES])
    assert hard_only.unseen_accuracy > r.unseen_accuracy + 0.3


# ------------------------------------------------------------------------------------- ground truth
def test_masks_boxes_and_pixels_agree(seen):
    pm = seen.part_map
    obj = pm > 0
    S = seen.image_size
    for i in range(0, len(seen), 7):
        ys, xs = torch.nonzero(obj[i], as_tuple=True)
        box = seen.boxes[i]
        assert box.tolist() == [xs.min().item(), ys.min().item(), xs.max().item() + 1, ys.max().item() + 1]
        masks = seen.part_masks(i)
        assert masks.shape == (6, S, S) and masks.sum(0).max() <= 1
        assert torch.equal(masks.any(0), obj[i])
        assert masks[0].sum() > 10 and masks[1].sum() > 3  # body and head are visible
    # independent check that the masks sit on the rendered pixels: in the interior of the body mask
    # (eroded by one pixel, away from blended edges) the colour is the class's body colour times the
    # image's brightness plus its jitter, up to the +-0.02 pixel noise
    images, _ = seen.tensors()
    body = (pm == 1).float()
    inner = body.clone()
    inner[:, 1:] *= body[:, :-1]
    inner[:, :-1] *= body[:, 1:]
    inner[:, :, 1:] *= body[:, :, :-1]
    inner[:, :, :-1] *= body[:, :, 1:]
    mean = (images * inner[:, None]).sum((2, 3)) / inner.sum((1, 2))[:, None]
    expected = (sp._SHORTCUT_RGB[seen.attributes[:, 0]] * seen.nuisances["brightness"][:, None]
                + seen.nuisances["jitter"][:, 0])
    err = np.abs(mean.numpy() - np.clip(expected, 0, 1))
    assert np.median(err) < 0.01 and np.quantile(err, 0.95) < 0.03
    wrong = np.abs(mean.numpy() - np.clip(np.roll(expected, 1, axis=0), 0, 1))  # another image's colour
    assert np.median(wrong) > 3 * np.median(err)
    gt = seen.ground_truth(3)
    assert gt["label"] == seen.labels[3] and gt["attributes"]["body_color"] in sp.SHORTCUT_COLORS


def test_getitem_tensors_and_transform(seen):
    x, y = seen[5]
    assert x.dtype == torch.float32 and x.shape == (3, 48, 48) and 0 <= x.min() and x.max() <= 1
    images, labels = seen.tensors()
    assert torch.equal(images[5], x) and labels[5].item() == y and labels.dtype == torch.int64
    tf = SynthParts("seen", 48, 2, transform=lambda t: t * 2)
    assert torch.equal(tf[1][0], SynthParts("seen", 48, 2)[1][0] * 2)
    with pytest.raises(IndexError):
        seen[len(seen)]


# ------------------------------------------------------------------------------------- determinism
def test_deterministic_prefix_and_lazy():
    a = SynthParts("unseen", 40, 3, seed=7)
    b = SynthParts("unseen", 40, 5, seed=7)
    idx_b = np.arange(len(b)).reshape(50, 5)[:, :3].ravel()  # first 3 images of every class
    assert torch.equal(a.tensors()[0], b.tensors()[0][idx_b])
    assert torch.equal(a.part_map, b.part_map[idx_b])
    fresh_images, fresh_map, fresh_boxes = a.render(np.arange(len(a)))  # bypasses the per-process memo
    assert torch.equal(fresh_images.float() / 255, a.tensors()[0]) and torch.equal(fresh_map, a.part_map)
    assert torch.equal(fresh_boxes, a.boxes)
    lazy = SynthParts("unseen", 40, 3, seed=7, lazy=True)
    assert torch.equal(lazy[17][0], a[17][0]) and torch.equal(lazy.part_map, a.part_map)
    other = SynthParts("unseen", 40, 3, seed=8)
    assert not torch.equal(other.tensors()[0], a.tensors()[0])
    assert np.array_equal(other.labels, a.labels) and np.array_equal(other.attributes, a.attributes)


def test_any_resolution_same_scene():
    small = SynthParts("seen", 32, 2)
    large = SynthParts("seen", 224, 2)
    assert large[0][0].shape == (3, 224, 224)
    # the same nuisances: boxes agree once scaled (thin legs and beak tips may vanish at 32 px)
    a, b = small.boxes / 32, large.boxes / 224
    lo, hi = torch.maximum(a[:, :2], b[:, :2]), torch.minimum(a[:, 2:], b[:, 2:])
    inter = (hi - lo).clamp(min=0).prod(1)
    area = lambda x: (x[:, 2:] - x[:, :2]).prod(1)  # noqa: E731
    iou = inter / (area(a) + area(b) - inter)
    assert iou.min() > 0.6 and iou.mean() > 0.85
    assert (a - b).abs().median() < 1 / 32
    # and the part layout agrees when the large map is pooled to 32 px
    big = large.part_map[:, 3::7, 3::7]
    agree = (big == small.part_map).float().mean()
    assert agree > 0.9


def test_nuisances_vary(seen):
    n = seen.nuisances
    assert n["scale"].std() > 0.02 and n["angle"].std() > 0.2 and n["center"].std(0).min() > 0.03
    assert set(n["flip"]) == {-1.0, 1.0}
    # no two images of a class are the same picture
    images = seen.tensors()[0][:10]
    assert all(not torch.equal(images[i], images[j]) for i in range(10) for j in range(i + 1, 10))


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        SynthParts("val")
    with pytest.raises(ValueError, match="image_size"):
        SynthParts("seen", 8)
    with pytest.raises(ValueError, match="colour pairs"):
        SynthParts("seen", 32, 1, num_seen=60, unseen_groups=10)
