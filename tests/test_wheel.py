"""A pip install of zslib (what the Colab setup cell does) finds every recorded run and analysis record.

The wheel is built from this checkout (`pip wheel --no-deps --no-build-isolation`) and installed into a
temporary virtual environment outside the checkout; torch and the other dependencies are reused from the
running environment through a .pth file (nothing is downloaded). The installed zslib is then asked, from a
folder that is not a checkout, for its recorded runs and analysis records, and must find as many as the
checkout holds, with the same file names.
"""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

COUNT = r"""
import json, zslib
from zslib.engine.store import recorded_runs, recorded_dir
from zslib.analysis.records import recorded_analysis_records
runs = recorded_runs()
print(json.dumps({"zslib": zslib.__file__, "dir": str(recorded_dir()),
                  "runs": sorted(r.path.name for r in runs),
                  "analyses": len(recorded_analysis_records())}))
"""


def test_an_installed_wheel_finds_every_recorded_run(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(REPO)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("zslib-*.whl")

    env_dir = tmp_path / "env"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the running environment's packages (torch, numpy, ...) after the new environment's own
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "_parent_env.pth").write_text("\n".join(parents) + "\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "ZS_RESULTS", "VIRTUAL_ENV"))}
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "-q", str(wheel)], capture_output=True, text=True, env=clean,
                             cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-3000:]

    away = tmp_path / "elsewhere"  # not a checkout: no results/ folder here
    away.mkdir()
    got = subprocess.run([str(python), "-c", COUNT], capture_output=True, text=True, env=clean, cwd=away)
    assert got.returncode == 0, got.stderr[-3000:]
    found = json.loads(got.stdout.strip().splitlines()[-1])
    assert Path(found["zslib"]).resolve().is_relative_to(env_dir.resolve()), found["zslib"]  # the installed copy
    expected = sorted(p.name for p in (REPO / "results" / "recorded").glob("*.json"))
    assert len(expected) > 600
    assert found["runs"] == expected
    assert found["analyses"] == len(list((REPO / "results" / "recorded" / "analyses").glob("*.json")))
