"""Images and settings that cannot give a right number are refused in one line naming the file or the setting,
before anything trains; the others are read as what they are.

Each case failed before: a 16-bit PNG was read as white; a header claiming 30,000 x 30,000 pixels ended in
Pillow's DecompressionBombError traceback; a truncated JPEG read in a training loader's worker said only "Caught
CorruptFileError in DataLoader worker process 0"; a file name that is not UTF-8 gave "'utf-8' codec can't encode"
without the path; ``batch_per_class=1`` and ``synth_images_per_class=1`` trained and ended "diverged", blaming the
learning rate; labels with no unseen class failed only once the cache had been built.
Oracles: the 8-bit value of a 16-bit one is round(v / 257); a PNG header written byte by byte.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from data_fixtures import build_flowers
from zslib.engine.data.errors import CorruptFileError

LABELS = [c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)]
HERE = str(Path(__file__).resolve().parents[1])


def _one_line(err) -> str:
    return str(err).splitlines()[0]


def test_a_16_bit_png_is_scaled_to_8_bits_not_clipped_to_white(tmp_path):
    from zslib.engine.data.datasets import load_image

    values = (np.arange(32 * 32).reshape(32, 32) * 64).astype(np.uint16)  # 0 .. 65472
    Image.fromarray(values).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")  # Pillow keeps the 16 bits
    got = np.asarray(load_image(tmp_path / "deep.png"))
    want = np.round(values / 257.0).astype(np.uint8)
    assert got.shape == (32, 32, 3) and (got == want[..., None]).all()  # before: 255 almost everywhere


def test_a_floating_point_image_is_refused_naming_it(tmp_path):
    from zslib.engine.data.datasets import load_image

    Image.fromarray(np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)).save(tmp_path / "float.tif")
    with pytest.raises(CorruptFileError) as err:
        load_image(tmp_path / "float.tif")
    assert str(tmp_path / "float.tif") in _one_line(err.value) and "mode F" in _one_line(err.value)


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header claims ``width x height`` grey pixels, with almost no data behind it."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))


class _Listed(list):
    """A dataset as the image cache sees it: its ``paths``."""

    @property
    def paths(self):
        return list(self)


@pytest.mark.parametrize("side", [30_000, 10_000])  # Pillow's error, and its warning (between 1x and 2x the limit)
def test_a_decompression_bomb_is_refused_before_decoding(tmp_path, side):
    from zslib.engine.data.image_cache import _shapes
    from zslib.engine.data.datasets import load_image

    bomb = tmp_path / "bomb.png"
    _png_header_only(bomb, side, side)
    for read in (lambda: load_image(bomb), lambda: _shapes(_Listed([bomb]), 16)):
        with pytest.raises(CorruptFileError) as err:
            read()
        assert str(bomb) in _one_line(err.value) and "pixels" in _one_line(err.value)


def test_a_truncated_jpeg_in_a_training_loader_worker_is_named(tmp_path):
    import torch

    from zslib.engine.data.datasets import load_image

    Image.fromarray(np.full((40, 40, 3), 99, np.uint8)).save(tmp_path / "ok.jpg", quality=90)
    data = (tmp_path / "ok.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) * 2 // 3])

    class Photos(torch.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return torch.as_tensor(np.asarray(load_image(tmp_path / ("ok.jpg", "cut.jpg")[i])))

    with pytest.raises(CorruptFileError) as err:
        list(torch.utils.data.DataLoader(Photos(), batch_size=1, num_workers=1))
    first = _one_line(err.value)
    assert str(tmp_path / "cut.jpg") in first and "worker process 0" in first  # before: "Caught CorruptFileError ..."


def test_a_file_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    from zslib.engine.data.datasets import load_image
    from zslib.engine.data.identity import folder_identity

    tree = tmp_path / "tree"
    tree.mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tree / "fine.jpg")
    bad = os.path.join(os.fsencode(tree), b"caf\xe9.jpg")
    with open(bad, "wb") as fh:
        fh.write((tree / "fine.jpg").read_bytes())
    for read in (lambda: folder_identity(tree), lambda: load_image(os.fsdecode(bad))):
        with pytest.raises(CorruptFileError) as err:
            read()
        first = _one_line(err.value)
        first.encode("utf-8")  # printable: before, the error itself could not be encoded
        assert "caf\\xe9.jpg" in first and "UTF-8" in first


@pytest.mark.parametrize("setting, flag", [({"batch_per_class": 1}, "--batch-per-class"),
                                           ({"synth_images_per_class": 1}, "--synth-images-per-class")])
def test_an_impossible_batch_or_dataset_setting_is_refused_before_training(setting, flag, tmp_path):
    from zslib.engine.config import Config

    name = next(iter(setting))
    with pytest.raises(ValueError, match=f"Config.{name}=1"):
        Config(**setting)
    out = subprocess.run([sys.executable, "-m", "zslib", "train", flag, "1", "--iterations", "2",
                          "--results-dir", str(tmp_path)], capture_output=True, text=True, cwd=HERE,
                         env=dict(os.environ, PYTHONPATH=HERE, ZS_CACHE="off"))
    assert out.returncode == 2 and name in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not list(tmp_path.glob("*.json"))  # nothing trained


def test_a_proxy_loss_may_have_one_image_per_class_and_hashes_stay():
    from zslib.engine.config import Config

    assert Config(loss="proxy_nca", batch_per_class=1).batch_per_class == 1  # a proxy is its positive
    assert Config().hash == Config(batch_per_class=4).hash  # validation only: the quick default hashes as before


def test_labels_with_no_unseen_class_are_refused_before_a_cache_is_built(tmp_path, monkeypatch):
    from zslib.engine.data.build import build_dataset
    from zslib.engine.data.features import feature_cache
    from zslib.engine.profile import PROFILES

    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    build_flowers(tmp_path / "data", [c for c in (1, 2, 3) for _ in range(4)])  # every class among the seen ones
    full = PROFILES["full"].replace(dataset="flowers102", image_cache=True, image_size=16, resize_size=18)
    with pytest.raises(ValueError, match="no image in its unseen"):
        build_dataset(full, "test", root=tmp_path / "data")
    with pytest.raises(ValueError, match="no image in its unseen"):
        feature_cache("flowers102", "efficientnet_lite0", ["head"], 16, 18, root=tmp_path / "data")
    assert not list((tmp_path / "cache").glob("*features*"))
