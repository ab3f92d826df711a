"""The linter passes on the package, the tests, the scripts and the benchmarks (configuration: ``[tool.ruff]`` in
pyproject.toml), so CI fails on an undefined name, an unused import or a line over the limit."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]' (or make env) installs it")
    return [found]


def test_ruff_passes():
    out = subprocess.run([*_ruff(), "check", "zslib", "tests", "scripts", "benchmarks", "_ext"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-1000:]


def test_ruff_would_catch_an_undefined_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    out = subprocess.run([*_ruff(), "check", "--config", str(ROOT / "pyproject.toml"), str(bad)], capture_output=True,
                         text=True)
    assert out.returncode == 1 and "F821" in out.stdout, out.stdout
