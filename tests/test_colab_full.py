"""A Colab run-all of the CML chapter on the full profile needs no manual step besides choosing the profile.

What the chapter's setup cell does on Colab is done here: ``ZS_PROFILE=full`` and ``ZS_DOWNLOAD=1``. The
network stands in as local ``file://`` folders: ``ZS_DATA_MIRROR`` holds a tiny CUB-200-2011 archive built
from the fixture tree, ``ZS_WEIGHTS_MIRROR`` a GoogLeNet weights file with random values, both named as the
published files are (the published checksums cannot match stand-ins, so the test puts the stand-ins' own
checksums where the published ones are). Data, weights, the image cache and the results go to empty
folders. Then the chapter's first training configuration is built exactly as the chapter's full-profile
branch builds it and trained through ``run_grid`` for two steps at a small image size: the dataset is
downloaded and unpacked, the weights fetched and loaded, the image cache built, and a result stored.
"""
from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import torch

import zslib
import zslib.engine.models as zm
from zslib.engine.data import CUB200
from zslib.engine.data.download import file_checksum

from data_fixtures import build_cub

ROOT = Path(__file__).resolve().parents[1]
# A few classes on each side of the zero-shot split (CUB: classes 1-100 seen, 101-200 unseen).
CLASSES = {1: 2, 2: 3, 3: 2, 4: 2, 100: 2, 101: 2, 150: 3, 199: 2, 200: 2}
# What a CPU can train in seconds; everything else is the chapter's configuration.
SMALL = dict(iterations=2, eval_every=2, batch_classes=4, batch_per_class=2, image_size=64, resize_size=72)


def _chapter_cell() -> str:
    cells = json.loads((ROOT / "book" / "cml.ipynb").read_text())["cells"]
    return next("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "run_grid(" in "".join(c["source"]))


def _mirror(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with CUB_200_2011.tgz (the fixture tree) and a random GoogLeNet file named like torchvision's."""
    from torchvision.models import googlenet

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    build_cub(tmp_path / "src", CLASSES)
    with tarfile.open(mirror / "CUB_200_2011.tgz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "cub200" / "CUB_200_2011", arcname="CUB_200_2011")
    torch.manual_seed(0)
    raw = mirror / "raw.pth"
    torch.save(googlenet(weights=None, aux_logits=False, init_weights=True).state_dict(), raw)
    weights = mirror / f"googlenet-{hashlib.sha256(raw.read_bytes()).hexdigest()[:8]}.pth"
    raw.rename(weights)
    return mirror, weights


def test_full_profile_run_all_needs_no_manual_step(tmp_path, monkeypatch):
    cell = _chapter_cell()  # the chapter still builds its full-profile runs the way this test does
    assert "grid = recipes.quick_grid(profile)" in cell and "runs = run_grid(grid)" in cell

    mirror, weights = _mirror(tmp_path)
    known = zm.KNOWN_WEIGHTS["googlenet"]
    monkeypatch.setitem(zm.KNOWN_WEIGHTS, "googlenet", type(known)("googlenet", weights.name, known.url, known.note))
    monkeypatch.setattr(CUB200, "md5", file_checksum(mirror / "CUB_200_2011.tgz"))
    # the setup cell on Colab ...
    monkeypatch.setenv("ZS_PROFILE", "full")
    monkeypatch.setenv("ZS_DOWNLOAD", "1")
    # ... and the network, and a fresh machine's empty folders
    monkeypatch.setenv("ZS_DATA_MIRROR", mirror.as_uri())
    monkeypatch.setenv("ZS_WEIGHTS_MIRROR", mirror.as_uri())
    for name, folder in (("ZS_DATA", "data"), ("ZS_WEIGHTS", "weights"), ("ZS_CACHE", "cache"),
                         ("ZS_RESULTS", "results")):
        monkeypatch.setenv(name, str(tmp_path / folder))
    monkeypatch.setattr("zslib.engine.profile._active", None)

    # the chapter's full-profile branch (book/cml.ipynb), then its first configuration at a CPU's size
    from zslib.experiment import run_grid
    from zslib.methods.cml import recipes

    profile = zslib.get_profile()
    assert profile.name == "full" and profile.image_cache
    grid = recipes.quick_grid(profile)  # the chapter's grid on the full profile: the paper's settings (Sec. IV-A)
    key = ("triplet", "baseline")
    assert next(iter(grid)) == key
    config = grid[key].replace(**SMALL)
    runs = run_grid({key: config})

    (result,) = runs[key]
    assert result.provenance["complete"] and result.path.parent == tmp_path / "results"
    assert result.config.backbone == "googlenet" and result.config.pretrained and result.config.lr == 1e-5
    assert result.config.weight_decay == 2e-4 and result.config.dataset == "cub200" and result.config.image_cache
    assert [r["step"] for r in result.history.losses] == [1, 2]
    assert {"R@1", "NMI"} <= set(result.metrics["unseen"]) and "R@1" in result.metrics["seen"]
    # what the run fetched and made on its own
    assert (tmp_path / "data" / "cub200" / "CUB_200_2011" / "images.txt").is_file()
    assert (tmp_path / "weights" / weights.name).read_bytes() == weights.read_bytes()
    assert len(list((tmp_path / "cache").glob("preresized-*"))) == 2  # the seen and the unseen split
    assert result.checkpoint is not None and result.checkpoint.is_file()
    prov = result.provenance
    assert prov["precision"] == "float32" and prov["processes"] == 1 and 0 <= prov["data_wait_share"] < 1
