"""scripts/gpu_session.py: the job queue its workers share (each job trained once, none started too near the
deadline) and the provenance of runs that share a device."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def session():
    spec = importlib.util.spec_from_file_location("gpu_session", ROOT / "scripts" / "gpu_session.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _queue(tmp_path):
    queue = tmp_path / "queue"
    for sub in ("todo", "taken"):
        (queue / sub).mkdir(parents=True)
    return queue


def test_a_worker_trains_each_queued_run_once_and_records_that_the_device_was_shared(session, tmp_path, monkeypatch):
    from zslib.engine.config import Config
    from zslib.engine.store import load_result, result_path

    monkeypatch.setenv("ZS_CONCURRENT_RUNS", "6")
    configs = [Config.from_profile("quick", loss="triplet", iterations=2, eval_every=2).replace(seed=s) for s in (0, 1)]
    queue = _queue(tmp_path)
    for i, c in enumerate(configs):
        session._enqueue(queue, f"3-{i:04d}", c)
    (queue / "closed").touch()
    assert session.worker(queue, tmp_path / "results", "cpu", time.time() + 600) == 0
    assert not list((queue / "todo").glob("*.json"))
    assert len(list((queue / "taken").iterdir())) == 2
    for c in configs:
        result = load_result(result_path(c, tmp_path / "results"))
        assert result.provenance["concurrent_runs"] == 6  # its images per second are a share of the device


def test_a_run_alone_records_no_sharing(tmp_path, monkeypatch):
    from zslib.engine.config import Config
    from zslib.engine.runner import run

    monkeypatch.delenv("ZS_CONCURRENT_RUNS", raising=False)
    result = run(Config.from_profile("quick", loss="triplet", iterations=2, eval_every=2), tmp_path, progress=False)
    assert "concurrent_runs" not in result.provenance


def test_no_run_starts_when_the_deadline_is_too_near(session, tmp_path):
    from zslib.engine.config import Config

    queue = _queue(tmp_path)
    session._enqueue(queue, "3-0000", Config.from_profile("quick", loss="triplet", iterations=2, eval_every=2))
    assert session.worker(queue, tmp_path / "results", "cpu", time.time() + 5) == 0  # a first run needs 20 s
    assert len(list((queue / "todo").glob("*.json"))) == 1
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").glob("*.json"))
