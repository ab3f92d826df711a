"""The setup cell every chapter opens with (``scripts/setup_cell.py``): the same in every chapter, outputs empty; on
Colab it offers to keep results, checkpoints and caches on Google Drive; outside Colab (the book's build) its Colab
branch never runs. Colab is simulated here: a stand-in ``google.colab`` module, and ``pip`` not run."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("setup_cell", REPO / "scripts" / "setup_cell.py")
setup_cell = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_cell)

DRIVE_BOX = 'KEEP_ON_DRIVE = False  # @param {type:"boolean"}'


@pytest.mark.parametrize("path", setup_cell.notebooks(), ids=lambda p: p.name)
def test_every_chapter_opens_with_the_same_setup_cell(path):
    cell = nbformat.read(path, as_version=4).cells[setup_cell.SETUP_INDEX]
    assert cell.cell_type == "code" and cell.source == setup_cell.SETUP
    assert not cell.get("outputs") and cell.get("execution_count") is None


def test_the_drive_option_is_a_checkbox_of_the_colab_branch():
    lines = setup_cell.SETUP.splitlines()
    colab = lines.index('if "google.colab" in sys.modules:')
    box = next(i for i, line in enumerate(lines) if DRIVE_BOX in line)
    assert box > colab and all(line.startswith("    ") for line in lines[colab + 1:box + 1])
    mount = next(i for i, line in enumerate(lines) if "drive.mount(" in line)
    assert mount > box and lines[mount].startswith("        ")  # only when the box is ticked, only on Colab


def _run_cell(tmp_path, colab: bool, keep: bool = False) -> dict:
    """Execute the cell in a fresh interpreter; on a simulated Colab, with the box ``keep``; return what it did."""
    source = setup_cell.SETUP.replace(DRIVE_BOX, DRIVE_BOX.replace("False", str(keep)))
    prelude = textwrap.dedent(f"""
        import json, os, subprocess, sys, types
        calls = {{"mount": [], "pip": [], "widgets": 0}}
        if {colab}:
            colab = types.ModuleType("google.colab")
            colab.drive = types.SimpleNamespace(mount=lambda where: calls["mount"].append(where))
            def widgets():
                calls["widgets"] += 1
            colab.output = types.SimpleNamespace(enable_custom_widget_manager=widgets)
            google = types.ModuleType("google")
            google.colab = colab
            sys.modules.update({{"google": google, "google.colab": colab,
                                "google.colab.drive": colab.drive, "google.colab.output": colab.output}})
            subprocess.run = lambda args, **kw: calls["pip"].append(args[-1])
    """)
    epilogue = textwrap.dedent("""
        calls.update({k: os.environ.get(k) for k in ("ZS_RESULTS", "ZS_CACHE", "ZS_PROFILE")})
        print("CALLS " + json.dumps(calls))
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("ZS_RESULTS", "ZS_PROFILE")}
    env["ZS_CACHE"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", prelude + source + "\n" + epilogue], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "profile: " in out.stdout and "device: " in out.stdout
    return json.loads(out.stdout.split("CALLS ", 1)[1])


def test_outside_colab_the_cell_only_reports_the_profile(tmp_path):
    calls = _run_cell(tmp_path, colab=False)
    assert calls["mount"] == [] and calls["pip"] == [] and calls["widgets"] == 0
    assert calls["ZS_RESULTS"] is None and calls["ZS_CACHE"] == str(tmp_path / "cache")


@pytest.mark.parametrize("keep", [False, True])
def test_on_colab_a_ticked_box_keeps_results_checkpoints_and_caches_on_drive(tmp_path, keep):
    calls = _run_cell(tmp_path, colab=True, keep=keep)
    assert calls["pip"] and calls["widgets"] == 1 and calls["ZS_PROFILE"] == "quick"
    if keep:
        assert calls["mount"] == ["/content/drive"]
        assert calls["ZS_RESULTS"] == f"{setup_cell.DRIVE_FOLDER}/results"  # checkpoints go to <results>/checkpoints
        assert calls["ZS_CACHE"] == f"{setup_cell.DRIVE_FOLDER}/cache"
        assert setup_cell.DRIVE_FOLDER.startswith("/content/drive/MyDrive/")
    else:
        assert calls["mount"] == [] and calls["ZS_RESULTS"] is None
        assert calls["ZS_CACHE"] == str(tmp_path / "cache")
