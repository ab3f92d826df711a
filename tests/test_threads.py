"""zslib.engine.threads: one thread for small problems, the worker limit, and the OpenMP spin default."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_info

from zslib.engine.threads import SPIN_COUNT, one_thread


def _counts():
    return [pool["num_threads"] for pool in threadpool_info()]


def test_one_thread_limits_every_pool_inside_and_restores_after():
    before = _counts()
    seen = []

    @one_thread()
    def work():
        seen.append(_counts())
        with one_thread():  # nested use keeps the limit and restores the outer one
            seen.append(_counts())
        seen.append(_counts())

    work()
    assert seen and all(c == 1 for counts in seen for c in counts)
    assert _counts() == before


def test_one_thread_changes_no_result():
    from zslib.analysis.probe import attribute_probe

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(20), 10)
    attribute = labels % 3
    x = rng.normal(size=(200, 8)) + attribute[:, None] * np.eye(8)[0]
    probed = attribute_probe(x, {"a": attribute}, groups=labels, folds=4, C=0.5)
    from sklearn.linear_model import LogisticRegression  # the same fits without the limit, by hand
    from sklearn.preprocessing import StandardScaler
    from zslib.analysis.probe import probe_folds

    fold = probe_folds(200, 4, groups=labels, seed=0)
    hits = 0
    for f in range(4):
        tr, te = fold != f, fold == f
        scaler = StandardScaler().fit(x[tr])
        clf = LogisticRegression(C=0.5, max_iter=1000).fit(scaler.transform(x[tr]), attribute[tr])
        hits += int((clf.predict(scaler.transform(x[te])) == attribute[te]).sum())
    assert probed.accuracy["a"] == hits / 200


def _fresh_python(code: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sets_a_short_openmp_spin_unless_the_user_chose_one():
    code = "import os, json, zslib; print(json.dumps(os.environ.get('GOMP_SPINCOUNT')))"
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    assert _fresh_python(code, env) == SPIN_COUNT
    assert _fresh_python(code, {**env, "GOMP_SPINCOUNT": "7"}) == "7"


def test_a_grid_worker_runs_every_pool_on_its_share_of_threads():
    code = ("import json, torch, sklearn.cluster; from threadpoolctl import threadpool_info; "
            "from zslib.engine.grid import _pool_init; _pool_init(1); "
            "print(json.dumps([torch.get_num_threads()] + [p['num_threads'] for p in threadpool_info()]))")
    counts = _fresh_python(code, dict(os.environ))
    assert counts and all(c == 1 for c in counts)
