"""Shared test configuration.

* The integration tests that build the book (marker ``book``) run after every unit test.
* ``shared_data_dir`` locates the optional real data in ``../shared/data`` (or ``$ZS_SHARED_DATA``);
  tests that need it skip cleanly when it is absent.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_path() -> Path:
    return Path(os.environ.get("ZS_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    path = shared_data_path()
    if not path.is_dir():
        pytest.skip(f"real data folder {path} is absent (set ZS_SHARED_DATA to use one)")
    return path


@pytest.fixture(autouse=True)
def _quick_profile(monkeypatch):
    """Every test starts on the quick profile, whatever the caller's environment says."""
    import zslib.profile

    monkeypatch.setenv("ZS_PROFILE", "quick")
    monkeypatch.setattr(zslib.profile, "_active", None)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("book") is not None)
