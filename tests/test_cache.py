"""zslib.engine.cache: keyed, verified arrays on disk, and the SynthParts splits stored through it."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from zslib.engine.cache import ArrayCache, cache_dir, source_fingerprint


def test_round_trip_and_key_separation(tmp_path):
    a = ArrayCache("thing", {"size": 3, "code": "abc"}, folder=tmp_path)
    assert a.load() is None
    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "y": np.array([1, 2, 3], dtype=np.uint8)}
    a.save(arrays)
    got = ArrayCache("thing", {"code": "abc", "size": 3}, folder=tmp_path).load()  # key order does not matter
    assert set(got) == {"x", "y"} and all(np.array_equal(got[k], arrays[k]) for k in arrays)
    assert got["x"].dtype == np.float32
    assert ArrayCache("thing", {"size": 4, "code": "abc"}, folder=tmp_path).load() is None
    assert ArrayCache("thing", {"size": 3, "code": "abd"}, folder=tmp_path).load() is None
    mm = ArrayCache("thing", {"size": 3, "code": "abc"}, folder=tmp_path).load(mmap=True)
    assert isinstance(mm["x"], np.memmap) and not mm["x"].flags.writeable


def test_a_damaged_entry_is_removed_and_reported(tmp_path):
    key = {"k": 1}
    ArrayCache("thing", key, folder=tmp_path).save({"x": np.arange(1000, dtype=np.int64)})
    entry = ArrayCache("thing", key, folder=tmp_path)
    raw = np.load(entry.path / "x.npy")
    raw[500] = -1  # same shape and dtype, different bytes: only the checksum can tell
    np.save(entry.path / "x.npy", raw)
    import zslib.engine.cache as C
    C._VERIFIED.discard(str(entry.path))
    with pytest.warns(UserWarning, match="damaged"):
        assert entry.load() is None
    assert not entry.path.exists()


def test_an_interrupted_write_is_not_a_cache(tmp_path):
    entry = ArrayCache("thing", {"k": 2}, folder=tmp_path)
    entry.path.mkdir(parents=True)
    np.save(entry.path / "x.npy", np.zeros(3))  # no meta.json: never completed
    assert entry.load() is None


def test_off_switch_and_unwritable_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_CACHE", "off")
    assert cache_dir() is None
    off = ArrayCache("thing", {"k": 3})
    assert not off.enabled and off.load() is None and off.save({"x": np.zeros(2)}) is None
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    entry = ArrayCache("thing", {"k": 3}, folder=blocker / "sub")
    with pytest.warns(UserWarning, match="could not write"):
        assert entry.save({"x": np.zeros(2)}) is None


def test_source_fingerprint_follows_the_bytes(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    a = source_fingerprint(f)
    f.write_text("x = 2\n")
    assert source_fingerprint(f) != a and len(a) == 16


def test_synthparts_split_is_stored_and_loaded_bitwise(tmp_path, monkeypatch):
    from zslib.engine.data import synthparts as S

    monkeypatch.setenv("ZS_CACHE", str(tmp_path))
    monkeypatch.setattr(S, "_RENDERED", type(S._RENDERED)())
    first = S.SynthParts("unseen", image_size=24, images_per_class=2)
    entries = list(tmp_path.glob("synthparts-*"))
    assert len(entries) == 1
    meta = json.loads((entries[0] / "meta.json").read_text())
    assert meta["key"]["image_size"] == 24 and meta["key"]["code"] == source_fingerprint(S.__file__)
    monkeypatch.setattr(S, "_RENDERED", type(S._RENDERED)())
    calls = []
    monkeypatch.setattr(S.SynthParts, "render", lambda self, idx: calls.append(1))
    second = S.SynthParts("unseen", image_size=24, images_per_class=2)
    assert not calls, "the second build must load the stored split, not render it"
    assert torch.equal(first.tensors()[0], second.tensors()[0])
    assert torch.equal(first.part_map, second.part_map) and torch.equal(first.boxes, second.boxes)
