"""Shared test configuration.

* The integration tests that build the book (marker ``book``) run after every unit test; the book is
  built once per session (fixture ``built_book``) and read by tests/test_book.py and tests/test_browser.py.
* The optional real data in ``../shared/data`` (or ``$ZS_SHARED_DATA``) is located by
  ``data_fixtures.shared_data_dir``; tests that need it skip cleanly when it is absent.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The caller's environment as pytest found it: the book build gets it back, with the caller's cache folder (the
#: real profile's feature cache takes minutes to build; .ci/run builds it once before the tests) and without what a
#: test changed (a test that leaves ZS_DATA or the cache folder changed fails: `_environment_put_back`).
_CALLER_ENV = dict(os.environ)


@pytest.fixture(scope="session")
def _session_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("zslib-cache")


#: Variables that say where zslib reads its data and keeps its caches: a test that changes one must put it back
#: (monkeypatch.setenv does), or every later test of the session reads another dataset folder.
_WHERE = ("ZS_DATA", "ZS_CACHE", "ZS_RESULTS", "ZS_PROFILE", "ZS_WEIGHTS")


@pytest.fixture(autouse=True)
def _environment_put_back():
    """Fails the test that leaves ``ZS_DATA`` (or another of ``_WHERE``) changed after its own teardown, and puts
    the value back, so the leak is named where it happens instead of breaking a later test that reads real data."""
    before = {name: os.environ.get(name) for name in _WHERE}
    yield
    changed = {name: os.environ.get(name) for name in _WHERE if os.environ.get(name) != before[name]}
    for name in changed:
        if before[name] is None:
            os.environ.pop(name)
        else:
            os.environ[name] = before[name]
    if changed:
        pytest.fail(f"the test left {', '.join(f'{k}={v!r}' for k, v in changed.items())} in the environment "
                    f"(was {', '.join(f'{k}={before[k]!r}' for k in changed)}): use monkeypatch.setenv, or put it back")


@pytest.fixture(autouse=True)
def _quick_profile(_environment_put_back, monkeypatch, _session_cache):
    """Every test starts on the quick profile, whatever the caller's environment says, with weight
    downloads off, and caches arrays (zslib.engine.cache) in a folder of the test session, not in the checkout."""
    import zslib.engine.profile

    monkeypatch.setenv("ZS_PROFILE", "quick")
    for name in ("ZS_DOWNLOAD", "ZS_WEIGHTS_MIRROR", "ZS_DATA_MIRROR"):  # tests never download: no caller's switch leaks in
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ZS_CACHE", str(_session_cache))
    monkeypatch.setattr(zslib.engine.profile, "_active", None)


@pytest.fixture
def one_thread():
    """PyTorch on one thread for the test, restored afterwards (runs compared bitwise must not depend on the
    number of threads, and forked workers must not oversubscribe the cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def built_book():
    """The executed book in ``_build/html``, built once per test session by scripts/build_book.py (the
    checks of tests/test_book.py and the browser tests of tests/test_browser.py read the same build)."""
    env = dict(_CALLER_ENV)  # not the test session's cache folder nor a test's leftovers: the caller's, as `make book`
    env["ZS_PROFILE"] = "quick"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py")], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.fail("the book build failed:\n" + proc.stdout[-8000:], pytrace=False)
    return REPO / "_build" / "html"


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("book") is not None)
