"""Benchmark: retrieval metrics of ``zslib.evaluate`` against a bare faiss search and PML.

Stanford Online Products' test split is 60,502 images of 11,316 classes (about 5.3 images per class,
at least 2). This script builds random embeddings of that shape (512-d, float32, a weak class
structure so recall is neither 0 nor 1) and times, each in its own subprocess so that neither peak
memory nor warm caches mix:

* ``floor``          -- a bare ``faiss.IndexFlatIP`` built on the embeddings and searched for
                        k = 1000 (what any exact R@1000 needs at least); no labels, no metric;
* ``ours``           -- ``evaluate(x, y, "sop")``: R@1, R@10, R@100, R@1000, exact, leave-one-out,
                        ties by index (on the CPU the faiss path);
* ``ours-torch``     -- the same row with ``backend="torch"`` (the path used on CUDA: chunked
                        matrix products, a rank count instead of a top-1000);
* ``ours-pml``       -- ``retrieval_metrics(x, y, ("R@1", "MAP@R", "RP"))``: the metrics PML's
                        calculator reports, from one call and one search;
* ``ours-pml-torch`` -- the same with ``backend="torch"``;
* ``pml``            -- pytorch-metric-learning's ``AccuracyCalculator`` (precision_at_1,
                        mean_average_precision_at_r, r_precision; k = "max_bin_count"), under a
                        time limit.

Two tables: the SOP size (60,502 x 512; minutes on 2 cores) and a quick one at 20,000 x 512 (under
a minute on 2 cores). The machine may be shared, so with ``--repeat R`` the contenders run in
rounds (floor, ours, ..., then again), and every ratio is taken within a round, against that
round's floor (or PML), then the median over rounds is reported.

Peak memory is the growth of the process's peak resident set (``VmHWM`` in /proc/self/status)
over its resident set once the data are in memory, so it also sees faiss's C++ allocations.

    python benchmarks/bench_eval.py                    # SOP table, then the 20,000 x 512 table
    python benchmarks/bench_eval.py --quick            # the 20,000 x 512 table only
    python benchmarks/bench_eval.py --n 5000 --dim 64  # one table of any size (smoke run)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SOP_N, SOP_CLASSES = 60502, 11316
QUICK_N = 20000
CONTENDERS = ("floor", "ours", "ours-torch", "ours-pml", "ours-pml-torch", "pml")
PML_SET = ("R@1", "MAP@R", "RP")  # precision_at_1, mean_average_precision_at_r, r_precision


def make_data(n: int, dim: int, n_classes: int, seed: int = 0):
    """SOP-like labels (every class >= 2 images, mean n / n_classes) and unit-norm embeddings."""
    rng = np.random.default_rng(seed)
    if n < 2 * n_classes:
        raise SystemExit(f"--n {n} is too small for {n_classes} classes of at least 2 images")
    sizes = 2 + rng.multinomial(n - 2 * n_classes, np.full(n_classes, 1.0 / n_classes))
    labels = rng.permutation(np.repeat(np.arange(n_classes), sizes))
    centers = rng.standard_normal((n_classes, dim), dtype=np.float32)
    x = np.empty((n, dim), dtype=np.float32)
    for a in range(0, n, 8192):  # in slices: no large float64 temporaries
        b = min(a + 8192, n)
        x[a:b] = centers[labels[a:b]] + 2.0 * rng.standard_normal((b - a, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, labels


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _reset_peak() -> bool:
    try:  # Linux: writing 5 resets VmHWM to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def worker(name: str, args) -> dict:
    import faiss  # noqa: F401  (import cost outside the timing, for every contender alike)
    import torch

    from zslib import evaluate as ev

    x, y = make_data(args.n, args.dim, args.classes, args.seed)
    _reset_peak()
    base = _status_kb("VmRSS")
    t0 = time.perf_counter()
    out: dict = {}
    if name == "floor":
        index = faiss.IndexFlatIP(x.shape[1])
        index.add(x)
        D, I = index.search(x, min(1000, args.n))
        elapsed = time.perf_counter() - t0
        # cross-check (untimed): recall from the floor's own neighbours, self dropped
        keep = I != np.arange(args.n)[:, None]
        rec = {}
        for k in (1, 10, 100):
            hits = np.zeros(args.n, dtype=bool)
            for a in range(0, args.n, 8192):
                Ia, ka = I[a:a + 8192], keep[a:a + 8192]
                cols = np.cumsum(ka, axis=1) <= k
                hits[a:a + 8192] = ((y[Ia] == y[a:a + 8192, None]) & ka & cols).any(1)
            rec[f"R@{k}"] = round(float(hits.mean()), 4)
        out["row"] = rec
    elif name in ("ours", "ours-torch"):
        row = ev.evaluate(x, y, "sop", backend="torch" if name == "ours-torch" else "auto")
        elapsed = time.perf_counter() - t0
        out["row"] = row
    elif name in ("ours-pml", "ours-pml-torch"):
        row = ev.retrieval_metrics(x, y, PML_SET, backend="torch" if name == "ours-pml-torch" else "auto")
        elapsed = time.perf_counter() - t0
        out["row"] = row
    elif name == "pml":
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                                  k="max_bin_count", device=torch.device("cpu"))
        res = calc.get_accuracy(torch.from_numpy(x), torch.from_numpy(y))
        elapsed = time.perf_counter() - t0
        out["row"] = {"R@1": res["precision_at_1"], "MAP@R": res["mean_average_precision_at_r"],
                      "RP": res["r_precision"]}
    else:
        raise SystemExit(f"unknown contender {name}")
    out["seconds"] = elapsed
    out["peak_extra_mb"] = (_status_kb("VmHWM") - base) / 1024
    out["threads"] = torch.get_num_threads()
    return out


def _run_one(name: str, n: int, args) -> dict:
    classes = args.classes or max(1, round(n * SOP_CLASSES / SOP_N))
    cmd = [sys.executable, __file__, "--worker", name, "--n", str(n), "--dim", str(args.dim),
           "--classes", str(classes), "--seed", str(args.seed)]
    limit = args.pml_timeout if name == "pml" else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after the {limit:.0f} s time limit"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        why = "killed (out of memory?)" if proc.returncode in (-9, 137) else proc.stderr.strip()[-400:]
        return {"error": f"exit {proc.returncode}: {why}"}
    return json.loads(lines[-1][7:])


def _fmt_row(row: dict) -> str:
    return ", ".join(f"{k} {100 * v:.2f}" for k, v in row.items())


def table(n: int, args) -> None:
    names = args.only.split(",")
    classes = args.classes or max(1, round(n * SOP_CLASSES / SOP_N))
    print(f"\n## {n} x {args.dim} float32 embeddings, {classes} classes ({n / classes:.2f} per class), "
          f"{os.cpu_count()} CPUs, {args.repeat} round(s)", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    t_start = time.perf_counter()
    for rnd in range(args.repeat):
        for name in names:
            r = _run_one(name, n, args)
            runs[name].append(r)
            if "error" in r:
                print(f"  round {rnd + 1} {name:15s} {r['error']}", flush=True)
            else:
                print(f"  round {rnd + 1} {name:15s} {r['seconds']:7.1f} s  peak +{r['peak_extra_mb']:6.0f} MB  "
                      f"{_fmt_row(r['row'])}", flush=True)

    def ratios(name, ref):  # within each round, then the median
        vals = [a["seconds"] / b["seconds"] for a, b in zip(runs.get(name, []), runs.get(ref, []))
                if "seconds" in a and "seconds" in b]
        return f"{statistics.median(vals):.2f}" if vals else "-"

    print("\n| contender | seconds | x floor | x pml | peak extra memory (MB) | metrics (%) |")
    print("|---|---:|---:|---:|---:|---|")
    for name in names:
        ok = [r for r in runs[name] if "seconds" in r]
        if not ok:
            print(f"| {name} | {runs[name][-1]['error']} | | | | |")
            continue
        sec = statistics.median(r["seconds"] for r in ok)
        mem = max(r["peak_extra_mb"] for r in ok)
        pml = ratios(name, "pml") if name in ("ours-pml", "ours-pml-torch", "pml") else ""
        print(f"| {name} | {sec:.1f} | {ratios(name, 'floor')} | {pml} | {mem:.0f} | {_fmt_row(ok[-1]['row'])} |")
    print(f"\n(table took {time.perf_counter() - t_start:.0f} s of wall time)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=None,
                    help="one table of this many embeddings (default: SOP's 60502, then 20000)")
    ap.add_argument("--quick", action="store_true", help="only the 20,000 x 512 table")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", type=int, default=None, help="default: n * 11316 / 60502")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of all contenders (median reported)")
    ap.add_argument("--only", default=",".join(CONTENDERS), help="comma-separated contenders")
    ap.add_argument("--pml-timeout", type=float, default=900, help="seconds before PML is stopped")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args)))
        return
    sizes = [args.n] if args.n else [QUICK_N] if args.quick else [SOP_N, QUICK_N]
    for n in sizes:
        table(n, args)


if __name__ == "__main__":
    main()
