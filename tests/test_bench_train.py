"""benchmarks/bench_train.py on the CPU: both data paths train and report their rows, alone and shared."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--small", "--data", "flowers", "--backbones", "efficientnet_lite0", "--image-size", "32", "--device", "cpu",
         "--batch-classes", "4", "--batch-per-class", "2", "--workers", "0", "--steps", "2", "--warmup", "1",
         "--loader-batches", "2"]


@pytest.fixture()
def bench(tmp_path, monkeypatch):
    from zslib.campaign.fabricate import fabricate_flowers

    root = fabricate_flowers(tmp_path / "data", per_class=6)
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("bench_train", ROOT / "benchmarks" / "bench_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, root


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("backbone ")]


def test_both_data_paths_report_speed_data_wait_and_memory(bench, capsys):
    module, root = bench
    assert module.main([*SMALL, "--root", str(root), "--path", "both"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [r.split("  path ")[1].split()[0] for r in rows] == ["loader", "device"]
    for r in rows:
        for field in ("img/s", "data wait", "peak mem", "loader img/s"):
            assert f"  {field} " in r


def test_runs_sharing_the_device_are_measured_together(bench, capsys):
    module, root = bench
    assert module.main([*SMALL, "--root", str(root), "--path", "device", "--shared", "2"]) == 0
    (row,) = _rows(capsys.readouterr().out)
    assert "runs sharing 2" in row and "img/s together" in row and "data wait" in row and "peak mem" in row
