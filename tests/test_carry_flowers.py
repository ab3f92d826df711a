"""scripts/carry_flowers.py: the re-encoded copy keeps the layout, the labels and every image's size; the weights
come back byte for byte; the transfer check counts what travels."""
from __future__ import annotations

import importlib.util
import lzma
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def carry():
    spec = importlib.util.spec_from_file_location("carry_flowers", ROOT / "scripts" / "carry_flowers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_copy_has_every_image_at_its_size_and_the_same_labels(carry, tmp_path):
    from PIL import Image

    from zslib.campaign.fabricate import fabricate_flowers

    src = fabricate_flowers(tmp_path / "src", per_class=3) / "flowers102"
    made = carry.reencode(src, tmp_path / "out", quality=20)
    dest = tmp_path / "out" / "flowers102"
    names = sorted(p.name for p in (src / "jpg").glob("*.jpg"))
    assert made["images"] == len(names) and sorted(p.name for p in (dest / "jpg").glob("*.jpg")) == names
    for name in names:
        a, b = Image.open(src / "jpg" / name), Image.open(dest / "jpg" / name)
        assert a.size == b.size and b.format == "JPEG"
        assert not np.array_equal(np.asarray(a), np.asarray(b))  # re-encoded, not copied
    for name in ("imagelabels.mat", "setid.mat"):
        assert (dest / name).read_bytes() == (src / name).read_bytes()
    assert carry.estimate_mib(src, 20, every=1) == pytest.approx(made["mib"], abs=0.01)


def test_packed_weights_come_back_byte_for_byte(carry, tmp_path):
    data = np.random.default_rng(0).bytes(10000)
    (tmp_path / "w.xz").write_bytes(lzma.compress(data))
    path = carry.unpack_weights(tmp_path / "w.xz", tmp_path / "weights", name="net-00000000.pth")
    assert path.read_bytes() == data


def test_the_transfer_check_counts_the_carried_folder(carry, tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("carry/\n")
    (tmp_path / "tracked.txt").write_bytes(b"x" * 2**20)
    subprocess.run(["git", "-C", str(tmp_path), "add", "tracked.txt", ".gitignore"], check=True)
    (tmp_path / "loose.txt").write_bytes(b"y" * 2**19)
    (tmp_path / "carry").mkdir()
    (tmp_path / "carry" / "a.bin").write_bytes(b"z" * 3 * 2**20)
    row = carry.tree_mib(tmp_path, ["carry"])
    assert (row["tracked"], row["untracked"], row["carried"]) == (pytest.approx(1.0, abs=0.01), 0.5, 3.0)
    assert row["total"] == pytest.approx(4.5, abs=0.01)
