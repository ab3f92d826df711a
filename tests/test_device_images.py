"""zslib.engine.data.device_images: batches cropped, flipped and normalized on the device, image by image, equal
to what the loader makes on the host (here the device is the CPU; the GPU session checks the same on CUDA)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

SIZES = {"image_size": 32, "resize_size": 36, "batch_classes": 2, "batch_per_class": 2, "pretrained": False,
         "amp": False, "num_workers": 0, "embedding_dim": 16, "iterations": 2, "eval_every": 2}


@pytest.fixture()
def flowers(tmp_path, monkeypatch):
    from zslib.campaign.fabricate import fabricate_flowers

    root = fabricate_flowers(tmp_path / "data", seen=4, unseen=3, per_class=10)
    monkeypatch.setenv("ZS_DATA", str(root))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    return root


def _config(**changes):
    from zslib.engine.config import Config

    return Config.from_profile("full", dataset="flowers102", backbone="efficientnet_lite0", **{**SIZES, **changes})


def _data(config):
    from zslib.engine.runner import build_data

    return build_data(config)


def _moved(data):
    from zslib.engine.data.device_images import on_device

    return on_device(data, "cpu")


def test_two_copies_of_one_image_in_a_batch_get_their_own_crops(flowers):
    """A batched v2 transform draws one crop for the whole batch; here each image draws its own."""
    train = _moved(_data(_config()))["train"]
    differ = 0
    for step in range(4):
        images, _ = train.step_batch(step, [0, 0, 0, 0], seed=0)
        top, left, flip = train.draws([0, 0, 0, 0], torch.Generator().manual_seed(step))
        assert len({(int(t), int(l), bool(f)) for t, l, f in zip(top, left, flip)}) > 1  # the draws differ...
        differ += sum(not torch.equal(images[0], images[k]) for k in (1, 2, 3))
    assert differ >= 8  # ... and so do the crops of the same image


def test_a_crop_equals_the_host_reference_crop_for_the_same_box_exactly(flowers):
    from torchvision.transforms.v2 import functional as F

    train = _moved(_data(_config()))["train"]
    source = train.source
    for i, (top, left, flip) in enumerate([(0, 0, False), (4, 16, True), (2, 7, True), (3, 11, False)]):
        got = train.crops([i], [top], [left], [flip])[0]
        pixels = source.pixels(i)  # uint8 3 x H x W, the stored pre-resized image
        ref = F.crop(pixels, top, left, 32, 32)
        if flip:
            ref = F.horizontal_flip(ref)
        ref = F.normalize(F.to_dtype(ref, torch.float32, scale=True), train.plan["mean"], train.plan["std"])
        assert got.dtype == torch.float32 and got.shape == ref.shape
        assert torch.equal(got, ref)


def test_the_batches_are_bitwise_the_loaders_and_channels_last(flowers):
    from zslib.engine.data import ClassBalancedSampler
    from zslib.engine.data.splits import labels_of
    from zslib.engine.train.batches import BatchStream

    config = _config(validation_fraction=0.25)  # a class-disjoint subset view on top of the cache
    host, device = _data(config)["train"], _moved(_data(config))["train"]
    streams = []
    for ds in (host, device):
        sampler = ClassBalancedSampler(labels_of(ds), 2, 2, seed=3)
        stream = BatchStream(ds, sampler, seed=3)
        stream.start(0)
        streams.append(stream)
    for _ in range(5):
        (a, la), (b, lb) = streams[0].next(), streams[1].next()
        assert torch.equal(la, lb)
        assert torch.equal(a, b)
        assert b.is_contiguous(memory_format=torch.channels_last)


def test_the_evaluation_crops_are_the_loaders_centre_crops(flowers):
    from zslib.engine.train.batches import in_memory

    data = _data(_config(validation_fraction=0.25))
    moved = _moved(data)
    for split in ("seen", "val", "unseen"):
        images, labels = in_memory(moved[split])
        assert len(images) == len(data[split])
        ref = torch.stack([data[split][i][0] for i in range(len(data[split]))])
        assert torch.equal(images[0:len(images)], ref)
        assert np.array_equal(np.asarray(labels), np.asarray(data[split].labels))
    assert moved["seen"].dataset._pixels is moved["train"].dataset._pixels  # one copy of the seen classes' pixels


def test_the_crops_are_a_function_of_the_seed_and_step(flowers):
    train = _moved(_data(_config()))["train"]
    a, _ = train.step_batch(7, [0, 1, 2, 3], seed=1)
    b, _ = train.step_batch(7, [0, 1, 2, 3], seed=1)
    c, _ = train.step_batch(7, [0, 1, 2, 3], seed=2)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_a_run_on_device_images_is_the_run_on_the_loader_and_keeps_its_hash(flowers, tmp_path):
    from zslib.engine.runner import run

    config = _config(validation_fraction=0.25)
    moved = config.replace(device_images=True)
    assert moved.hash == config.hash
    a = run(config, tmp_path / "loader", progress=False, device="cpu")
    b = run(moved, tmp_path / "device", progress=False, device="cpu")
    assert a.metrics == b.metrics
    assert [r["total"] for r in a.history.losses] == [r["total"] for r in b.history.losses]


def test_what_the_device_cannot_reproduce_is_refused(flowers):
    from torchvision.transforms import v2

    from zslib.engine.config import Config
    from zslib.engine.data.device_images import DeviceImages, crop_plan

    with pytest.raises(ValueError, match="cannot reproduce"):
        crop_plan(v2.Compose([v2.Resize(36), v2.ColorJitter(0.2), v2.CenterCrop(32)]))
    with pytest.raises(ValueError, match="order"):
        crop_plan(v2.Compose([v2.CenterCrop(32), v2.Resize(36), v2.ToDtype(torch.float32, scale=True)]))
    with pytest.raises(TypeError, match="image_cache=True"):
        DeviceImages(_data(_config(image_cache=False))["train"], "cpu")
    with pytest.raises(ValueError, match="image_cache=True"):
        Config.from_profile("full", image_cache=False, device_images=True)


@pytest.mark.parametrize("free, host, want", [(3, 3, "device"), (1, 3, "host"), (1, 1, "loader")])
def test_pixels_go_to_the_gpu_then_pinned_host_memory_only_where_they_fit_else_they_stay_with_the_loader(
        flowers, monkeypatch, free, host, want):
    """On a (simulated) GPU: the device while the pixels take at most half its free memory, pinned host memory
    while they take at most half the memory the VM has available (a Colab VM has about 12 GB), else the loader,
    the set left as it was. ``free`` and ``host``: the memory, in multiples of the pixels' size."""
    import zslib.engine.data.device_images as di

    data = _data(_config(validation_fraction=0.3))
    nbytes = max(int(ds.arrays["pixels"].shape[0]) for ds in (data["unseen"], data["train"].dataset))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free * nbytes, 16 * 2**30))
    monkeypatch.setattr(di, "host_memory_available", lambda: host * nbytes)
    assert di.placement_of(nbytes, "cuda") == want
    if want == "loader":  # nothing is allocated on the (absent) GPU: every set stays as it was
        moved = di.on_device(data, "cuda")
        assert moved["unseen"] is data["unseen"] and moved["train"].dataset is data["train"].dataset
        assert di.data_path(moved) == "loader"
    assert di.data_path(di.on_device(data, "cpu")) == "device images (device)"
