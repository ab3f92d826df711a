"""Where the time of a quick-profile run and of a grid of runs goes.

    .venv/bin/python benchmarks/bench_run.py            # one run's phases, then a grid of 8 runs
    .venv/bin/python benchmarks/bench_run.py --grid 0   # one run only

Each phase is timed in a fresh process with a fresh results folder and a fresh array cache, on one
thread (as a worker of ``zslib.experiment.run_many`` trains), except the grid, which uses the default
pool (one worker per core). Times are seconds of wall clock; on a shared machine compare ratios taken
in one invocation, not absolute times across days.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ONE_RUN = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
torch.set_num_threads(1)
import zslib.experiment as E
t_import = time.perf_counter() - t0
config = E.Config.from_profile("quick", eval_every=300, name="bench")
t = time.perf_counter(); E.build_data(config); t_data_cold = time.perf_counter() - t
import zslib.engine.data.synthparts as S
S._RENDERED.clear()
t = time.perf_counter(); E.build_data(config); t_data_warm = time.perf_counter() - t
S._RENDERED.clear()
t = time.perf_counter(); r = E.run(config, progress=False); t_run = time.perf_counter() - t
print(json.dumps({"imports": t_import, "data (first process)": t_data_cold, "data (later process)": t_data_warm,
                  "run(): total": t_run, "run(): training": r.provenance["train_seconds"],
                  "run(): data, model, evaluation": t_run - r.provenance["train_seconds"],
                  "unseen R@1": r.metric("R@1")}))
"""

GRID = r"""
import json, sys, time
import zslib.experiment as E
n = int(sys.argv[1])
base = E.Config.from_profile("quick", eval_every=300)
configs = [base.replace(loss=loss, seed=s) for loss in ("triplet", "angular") for s in range(n // 2)]
t = time.perf_counter(); E.run_many(configs, progress=False); wall = time.perf_counter() - t
print(json.dumps({"grid runs": n, "grid wall": wall, "grid seconds per run": wall / n,
                  "workers": E.default_workers()}))
"""


def _python(code: str, *args: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=8, help="runs in the grid (0 skips it)")
    args = parser.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ZS_RESULTS": os.path.join(tmp, "results"), "ZS_CACHE": os.path.join(tmp, "cache"),
               "ZS_PROGRESS": "none", "ZS_PROFILE": "quick"}
        rows.update(_python(ONE_RUN, env=env))
        if args.grid:
            env["ZS_RESULTS"] = os.path.join(tmp, "grid")
            rows.update(_python(GRID, str(args.grid), env=env))
    width = max(len(k) for k in rows)
    for key, value in rows.items():
        print(f"{key:<{width}}  {value:8.3f}" if isinstance(value, float) else f"{key:<{width}}  {value:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
