"""Time each student notebook of the assignment pack as a student's first run: executed from the top on the
quick profile with empty cache and home folders and a results folder holding only the recorded runs (``jupyter
nbconvert --execute``, errors allowed:
the exercises are unanswered). Prints one line per notebook (seconds and the load average after it) for
``MEASURED_SECONDS`` in ``zslib/teaching/assignments.py``.

    python scripts/time_pack.py [CHAPTER ...]      # default: every chapter with exercises
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zslib.teaching.assignments import build_pack, chapters_with_exercises

RECORDED = Path(__file__).resolve().parents[1] / "results" / "recorded"


def main(chapters) -> int:
    chapters = chapters or [p.stem for p in chapters_with_exercises()]
    with tempfile.TemporaryDirectory() as tmp:
        pack = build_pack(Path(tmp) / "pack", chapters=chapters)
        for stem in chapters:
            run = Path(tempfile.mkdtemp(dir=tmp))
            env = dict(os.environ, ZS_PROFILE="quick", ZS_WORKERS="1", ZS_PROGRESS="none", HOME=str(run / "home"),
                       ZS_RESULTS=str(run / "results"), ZS_CACHE=str(run / "cache"))
            (run / "home").mkdir()
            # the recorded runs, as an installed zslib ships them to a student (chapters show them, never train them)
            (run / "results").mkdir()
            (run / "results" / "recorded").symlink_to(RECORDED, target_is_directory=True)
            start = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--execute", "--allow-errors",
                                  "--to", "notebook", "--ExecutePreprocessor.timeout=1800", "--output",
                                  str(run / "out.ipynb"), str(pack / "student" / f"{stem}.ipynb")],
                                 env=env, capture_output=True, text=True)
            seconds = time.monotonic() - start
            load = os.getloadavg()[0]
            print(f"{stem} {seconds:.1f} s, load {load:.1f}" + ("" if out.returncode == 0 else
                                                                f" (failed: {out.stderr.strip()[-200:]})"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
