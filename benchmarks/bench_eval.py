"""Benchmark: the SOP retrieval row of ``zslib.evaluate`` against a bare faiss search and PML.

Stanford Online Products' test split is 60,502 images of 11,316 classes (about 5.3 images per class,
at least 2). This script builds random embeddings of that shape (512-d, float32, a weak class
structure so recall is neither 0 nor 1) and times, each in its own subprocess so that peak memory
does not mix:

* ``floor``      -- a bare ``faiss.IndexFlatIP`` built on the embeddings and searched for k = 1000
                    (what any exact R@1000 needs at least); no labels, no metric;
* ``ours``       -- ``zslib.evaluate.evaluate(x, y, "sop")``: R@1, R@10, R@100, R@1000, exact,
                    leave-one-out, ties by index (on the CPU this is the chunked faiss path);
* ``ours-torch`` -- the same row through ``recall_at_k(..., backend="torch")`` (the path used on
                    CUDA: chunked matrix products and rank counting, no top-k);
* ``ours-pmlset``-- our R@1, MAP@R and R-Precision (the metrics PML's calculator computes;
                    three separate calls, so three searches);
* ``pml``        -- pytorch-metric-learning's ``AccuracyCalculator`` (precision_at_1,
                    mean_average_precision_at_r, r_precision; k = "max_bin_count"), under a time limit.

Peak memory is the growth of the process's peak resident set (``VmHWM`` in /proc/self/status)
over its resident set once the data are in memory, so it also sees faiss's C++ allocations.

    python benchmarks/bench_eval.py                 # full SOP size (minutes on 2 cores)
    python benchmarks/bench_eval.py --n 5000 --dim 64   # smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

SOP_N, SOP_CLASSES = 60502, 11316
CONTENDERS = ("floor", "ours", "ours-torch", "ours-pmlset", "pml")


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
            rec[f"R@{k}"] = float(hits.mean())
        out["check"] = rec
    elif name == "ours":
        out["row"] = ev.evaluate(x, y, "sop")
        elapsed = time.perf_counter() - t0
    elif name == "ours-torch":
        out["row"] = {f"R@{k}": v for k, v in
                      ev.recall_at_k(x, y, (1, 10, 100, 1000), backend="torch").items()}
        elapsed = time.perf_counter() - t0
    elif name == "ours-pmlset":
        out["row"] = {"P@1": ev.recall_at_k(x, y, 1)[1], "MAP@R": ev.map_at_r(x, y),
                      "RP": ev.r_precision(x, y)}
        elapsed = time.perf_counter() - t0
    elif name == "pml":
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                                  k="max_bin_count", device=torch.device("cpu"))
        res = calc.get_accuracy(torch.from_numpy(x), torch.from_numpy(y))
        elapsed = time.perf_counter() - t0
        out["row"] = {"P@1": res["precision_at_1"], "MAP@R": res["mean_average_precision_at_r"],
                      "RP": res["r_precision"]}
    else:
        raise SystemExit(f"unknown contender {name}")
    out["seconds"] = elapsed
    out["peak_extra_mb"] = (_status_kb("VmHWM") - base) / 1024
    out["threads"] = torch.get_num_threads()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=SOP_N, help="embeddings (default: SOP test size 60502)")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", type=int, default=None, help="default: n * 11316 / 60502")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=",".join(CONTENDERS), help="comma-separated contenders")
    ap.add_argument("--pml-timeout", type=float, default=900, help="seconds before PML is stopped")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.classes is None:
        args.classes = max(1, round(args.n * SOP_CLASSES / SOP_N))
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args)))
        return

    print(f"# {args.n} x {args.dim} float32 embeddings, {args.classes} classes "
          f"({args.n / args.classes:.2f} per class), {os.cpu_count()} CPUs")
    results = {}
    for name in args.only.split(","):
        cmd = [sys.executable, __file__, "--worker", name, "--n", str(args.n), "--dim", str(args.dim),
               "--classes", str(args.classes), "--seed", str(args.seed)]
        limit = args.pml_timeout if name == "pml" else None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            results[name] = {"error": f"stopped after the {limit:.0f} s time limit"}
            print(f"{name:12s} stopped after {limit:.0f} s", flush=True)
            continue
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            why = "killed (out of memory?)" if proc.returncode in (-9, 137) else proc.stderr.strip()[-400:]
            results[name] = {"error": f"exit {proc.returncode}: {why}"}
            print(f"{name:12s} failed: {results[name]['error']}", flush=True)
            continue
        results[name] = json.loads(lines[-1][7:])
        r = results[name]
        print(f"{name:12s} {r['seconds']:8.1f} s  peak +{r['peak_extra_mb']:7.0f} MB  "
              f"{r.get('row') or r.get('check')}", flush=True)

    floor = results.get("floor", {}).get("seconds")
    print("\n| contender | seconds | x floor | peak extra memory (MB) |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        if "error" in r:
            print(f"| {name} | {r['error']} | | |")
            continue
        ratio = f"{r['seconds'] / floor:.2f}" if floor else "-"
        print(f"| {name} | {r['seconds']:.1f} | {ratio} | {r['peak_extra_mb']:.0f} |")
    if "ours" in results and "pml" in results and "seconds" in results["pml"]:
        print(f"\nours / pml time: {results['ours']['seconds'] / results['pml']['seconds']:.2f}")


if __name__ == "__main__":
    main()
