"""The pre-resized image cache (zslib.engine.data.cached): the same tensors as decoding the files, keyed and verified.

The oracle is the uncached dataset itself: with the same random state, a cached item and a decoded item
must be bitwise equal, for the random training transform as for the test transform, item by item and
batch by batch through the trainer's batch stream.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from PIL import Image

import zslib
import zslib.engine.cache
from zslib.engine import data as zd
from zslib.engine.config import Config
from zslib.engine.data import CUB200
from zslib.engine.data.image_cache import resized_shape
from zslib.engine.train.batches import BatchStream

from data_fixtures import build_cub, write_jpeg

SIZES = [(20, 14), (14, 20), (33, 17), (9, 9), (17, 40), (25, 24)]  # (width, height): landscape, portrait, square


@pytest.fixture()
def cub(tmp_path):
    """The fixture CUB tree, its images re-written with different sizes and aspect ratios."""
    build_cub(tmp_path)
    ds = CUB200(tmp_path, "train")
    for i, p in enumerate(ds.paths):
        write_jpeg(p, 50 + i, size=SIZES[i % len(SIZES)])
    return tmp_path


def test_resized_shape_is_the_shape_torchvision_makes():
    from torchvision.transforms import v2

    rng = np.random.default_rng(0)
    for _ in range(300):
        w, h, size = (int(v) for v in rng.integers(1, 60, 3))
        got = v2.Resize(size)(Image.new("RGB", (w, h)))
        assert resized_shape(h, w, size) == (got.height, got.width), (h, w, size)


@pytest.mark.parametrize("train", [True, False])
def test_cached_items_are_bitwise_the_decoded_ones(cub, tmp_path, train):
    make = zd.train_transform if train else zd.test_transform
    ds = CUB200(cub, "train", transform=make(10, 14))
    cache = zd.cached(ds, 14, cache_dir=tmp_path / "cache", progress=False)
    assert isinstance(cache, zd.PreResizedCache) and len(cache) == len(ds)
    assert cache.labels.tolist() == ds.labels.tolist() and cache.paths == ds.paths
    for seed in range(4):  # the same random state gives the same crops and flips, image after image
        torch.manual_seed(seed)
        decoded = [ds[i] for i in range(len(ds))]
        torch.manual_seed(seed)
        stored = [cache[i] for i in range(len(ds))]
        for (a, ya), (b, yb) in zip(decoded, stored):
            assert ya == yb and a.dtype == b.dtype == torch.float32 and torch.equal(a, b)


def test_the_profile_switch_changes_no_batch_of_the_trainer(cub, monkeypatch, tmp_path):
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    full = zslib.PROFILES["full"].replace(image_size=10, resize_size=14, batch_classes=2, batch_per_class=2)
    assert full.image_cache and not zslib.PROFILES["quick"].image_cache
    decoded = zd.build_dataset(full.replace(image_cache=False), "train", True, root=cub)
    stored = zd.build_dataset(full, "train", True, root=cub)
    assert isinstance(decoded, CUB200) and isinstance(stored, zd.PreResizedCache)
    streams = [BatchStream(d, zd.ClassBalancedSampler(d.labels, 2, 2, seed=1), seed=7) for d in (decoded, stored)]
    for s in streams:
        s.start(0)
    for _ in range(4):
        (a, ya), (b, yb) = (s.next() for s in streams)
        assert torch.equal(ya, yb) and torch.equal(a, b)
    # the test split (centre crop) and the seen set reuse the one entry of the split: one build per split
    zd.build_dataset(full, "train", False, root=cub)
    assert len(list((tmp_path / "cache").glob("preresized-*"))) == 1


def test_the_switch_is_not_part_of_a_runs_identity():
    full = Config.from_profile("full")
    assert full.image_cache is True and Config().image_cache is False
    assert full.replace(image_cache=False).hash == full.hash  # same numbers, same stored result
    with pytest.raises(TypeError, match="image_cache"):
        Config(image_cache="yes")


def test_the_cache_is_keyed_reused_and_verified(cub, tmp_path):
    folder = tmp_path / "cache"
    ds = CUB200(cub, "train")
    first = zd.cached(ds, 14, cache_dir=folder, progress=False)
    pixels = [first.pixels(i).clone() for i in range(len(ds))]
    (entry,) = folder.glob("preresized-*")
    written = (entry / "pixels.npy").stat().st_mtime_ns
    again = zd.cached(CUB200(cub, "train"), 14, cache_dir=folder, progress=False)  # found by its key, not rebuilt
    assert (entry / "pixels.npy").stat().st_mtime_ns == written
    assert all(torch.equal(again.pixels(i), p) for i, p in enumerate(pixels))
    # damaged pixels (same shape, other bytes) are found by the checksum, reported and rebuilt
    raw = np.load(entry / "pixels.npy")
    raw[5] ^= 0xFF
    np.save(entry / "pixels.npy", raw)
    zslib.engine.cache._VERIFIED.discard(str(entry))
    with pytest.warns(UserWarning, match="damaged"):
        rebuilt = zd.cached(ds, 14, cache_dir=folder, progress=False)
    assert all(torch.equal(rebuilt.pixels(i), p) for i, p in enumerate(pixels))
    # another size, or other labels for the same files, is another entry
    zd.cached(ds, 12, cache_dir=folder, progress=False)
    relabelled = CUB200(cub, "train")
    relabelled.labels = relabelled.labels[::-1].copy()
    assert zd.cached(relabelled, 14, cache_dir=folder, progress=False).labels.tolist() == relabelled.labels.tolist()
    assert len(list(folder.glob("preresized-*"))) == 3


def test_caching_off_reads_the_files(cub, monkeypatch):
    monkeypatch.setenv("ZS_CACHE", "off")
    ds = CUB200(cub, "train")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert zd.cached(ds, 14) is ds
