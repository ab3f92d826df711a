"""Shared test configuration.

* The integration tests that build the book (marker ``book``) run after every unit test.
* The optional real data in ``../shared/data`` (or ``$ZS_SHARED_DATA``) is located by
  ``data_fixtures.shared_data_dir``; tests that need it skip cleanly when it is absent.
"""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _quick_profile(monkeypatch):
    """Every test starts on the quick profile, whatever the caller's environment says."""
    import zslib.profile

    monkeypatch.setenv("ZS_PROFILE", "quick")
    monkeypatch.setattr(zslib.profile, "_active", None)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("book") is not None)
