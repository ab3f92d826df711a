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


def test_the_estimate_grows_with_the_images_a_run_trains(session):
    from zslib.campaign.run import campaign_configs

    c = campaign_configs("flowers102", methods=("cml",))
    run = c["validation"]["cml"]["EC+DC (0.02, 0.01)"][0]
    assert session.estimated_seconds(run.replace(iterations=2 * run.iterations)) == pytest.approx(
        2 * session.estimated_seconds(run))
    assert session.estimated_seconds(c["validation"]["cml"]["off"][0]) < session.estimated_seconds(run)


def test_the_plan_counts_each_shared_run_once(session, tmp_path):
    from zslib.campaign.run import campaign_configs

    c = campaign_configs("flowers102", methods=("cml", "adapt_adv"), validation_seeds=(0, 1), test_seeds=(0, 1))
    total = session.write_plan(c, ("cml", "adapt_adv"), tmp_path, 8.0)
    runs = {x.hash: x for runs in c["validation"].values() for seeds in runs.values() for x in seeds}
    runs.update({x.hash: x for seeds in c["floor"].values() for x in seeds})
    runs.update({x.hash: x for seeds in c["tuning"].values() for x in seeds})  # the tuning stage, trained first
    for m in ("cml", "adapt_adv"):  # "off" and the costliest candidate at test
        runs.update({x.hash: x for x in c["test"][m]["off"]})
        worst = max((k for k in c["test"][m] if k != "off"),
                    key=lambda k: sum(session.estimated_seconds(x) for x in c["test"][m][k]))
        runs.update({x.hash: x for x in c["test"][m][worst]})
    assert total == pytest.approx(sum(session.estimated_seconds(x) for x in runs.values()))
    assert "estimated GPU time" in (tmp_path / "plan.txt").read_text()
    assert session.write_plan(c, ("cml", "adapt_adv"), tmp_path, 8.0, stored=lambda config: True) == 0


@pytest.mark.slow  # a whole smoke run (campaign, session, class grading, two processes): in `make test`
def test_a_smoke_session_trains_chooses_tabulates_and_a_second_one_trains_nothing(session, tmp_path, capsys):
    import json
    import tarfile

    argv = ["--smoke", "--out", str(tmp_path / "out"), "--methods", "cml", "--validation-seeds", "0,1",
            "--test-seeds", "0,1", "--parallel", "2", "--minutes", "8", "--bench-seconds", "0"]
    assert session.main(argv) == 0
    out = tmp_path / "out"
    assert "equal True" in (out / "check.txt").read_text() and "equal False" not in (out / "check.txt").read_text()
    table = (out / "table.md").read_text()
    assert "| cml |" in table and "untrained floor" in table
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
    manifest = json.loads((out / "results" / "smoke-campaign" / "campaign" / "flowers102.json").read_text())
    stored = [f for runs in manifest["validation"]["cml"].values() for f in runs] + manifest["test"]["cml"]["off"]
    assert all(f"smoke-campaign/{f}" in names for f in stored)
    # the workers trained the tuning stage first and the methods with its choice: the table step trained nothing
    tuning = [f for runs in manifest["tuning"].values() for f in runs]
    assert tuning and all(f"smoke-campaign/{f}" in names for f in tuning)
    first = capsys.readouterr().out
    assert "tuning: " in first and "-> the methods run" in first and "the table step trained" not in first
    assert "(0 run(s) trained by this call" in first
    files = {p: p.stat().st_mtime_ns for p in (out / "results" / "smoke-campaign").glob("*.json")}
    assert session.main(argv) == 0  # everything stored: nothing is queued, nothing trained
    log = capsys.readouterr().out
    assert "methods with every run stored: ['cml']" in log and "(0 run(s) trained by this call" in log
    assert "what is left of the campaign (an estimate from the runs of 2026-11-26, six sharing an H200): 0 s" in log
    assert {p: p.stat().st_mtime_ns for p in (out / "results" / "smoke-campaign").glob("*.json")} == files


def test_the_results_are_packed_after_every_finished_run(session, tmp_path):
    """``results.tar.gz`` is rewritten whole (beside it, then renamed) with every result file so far: a session
    stopped after any run returns the runs it finished."""
    import tarfile

    results, out = tmp_path / "results", tmp_path / "out"
    out.mkdir()
    (results / "checkpoints").mkdir(parents=True)
    (results / "a.json").write_text("{}")
    (results / "checkpoints" / "a.pt").write_text("x")
    session._pack(results, out)
    (results / "b.json").write_text("{}")
    session._pack(results, out)
    with tarfile.open(out / "results.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["a.json", "b.json"]
    assert sorted(p.name for p in out.iterdir()) == ["results.tar.gz"]
