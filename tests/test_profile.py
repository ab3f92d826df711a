import dataclasses

import pytest
import torch

import zslib
from zslib.engine.profile import PROFILES


def test_default_profile_is_quick(monkeypatch):
    monkeypatch.delenv("ZS_PROFILE", raising=False)
    assert zslib.get_profile().name == "quick"


def test_env_variable_selects_profile(monkeypatch):
    monkeypatch.setenv("ZS_PROFILE", "FULL")
    p = zslib.get_profile()
    assert p is PROFILES["full"]
    assert (p.image_size, p.embedding_dim, p.batch_size) == (224, 512, 128)


def test_unknown_profile_names_the_choices(monkeypatch):
    monkeypatch.setenv("ZS_PROFILE", "fast")
    with pytest.raises(ValueError, match=r"ZS_PROFILE='fast'.*\['full', 'quick', 'real'\]"):
        zslib.get_profile()
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        zslib.set_profile("fast")
    with pytest.raises(TypeError):
        zslib.set_profile(3)


def test_set_profile_overrides_environment_until_reset(monkeypatch):
    monkeypatch.setenv("ZS_PROFILE", "quick")
    zslib.set_profile("full")
    assert zslib.get_profile().name == "full"
    zslib.set_profile(None)
    assert zslib.get_profile().name == "quick"


def test_replace_returns_a_copy_and_profiles_are_frozen():
    p = zslib.get_profile()
    q = p.replace(iterations=7)
    assert q.iterations == 7 and p.iterations == PROFILES["quick"].iterations
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.iterations = 1  # type: ignore[misc]
    assert q.as_dict()["iterations"] == 7


def test_full_profile_matches_the_papers_common_setting():
    # CML / DeML: batch 128 = 64 classes x 2 images, Adam 1e-5, weight decay 2e-4, 512-d, 224 px crops.
    f = PROFILES["full"]
    assert (f.batch_classes, f.batch_per_class, f.lr, f.weight_decay) == (64, 2, 1e-5, 2e-4)
    assert (f.embedding_dim, f.image_size, f.resize_size) == (512, 224, 256)


def test_device(monkeypatch):
    monkeypatch.delenv("ZS_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert zslib.device().type == expected
    assert zslib.device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        monkeypatch.setenv("ZS_DEVICE", "cuda")
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            zslib.device()


def test_lazy_submodule_access():
    with pytest.raises(AttributeError):
        zslib.not_a_module  # noqa: B018


def test_resolve_folder_order(monkeypatch, tmp_path):
    from zslib.engine.profile import repository_root, resolve_folder

    monkeypatch.setenv("ZS_TEST_DIR", str(tmp_path / "env"))
    assert resolve_folder(tmp_path / "arg", "ZS_TEST_DIR", "x", "/fallback") == tmp_path / "arg"
    assert resolve_folder(None, "ZS_TEST_DIR", "x", "/fallback") == tmp_path / "env"
    monkeypatch.delenv("ZS_TEST_DIR")
    repo = repository_root()
    expected = repo / "x" if repo is not None else __import__("pathlib").Path("/fallback")
    assert resolve_folder("", "ZS_TEST_DIR", "x", "/fallback") == expected
    assert str(resolve_folder(None, "ZS_TEST_DIR", None, "/fallback")) == "/fallback"
