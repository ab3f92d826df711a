"""Benchmark: retrieval metrics of ``zslib.engine.evaluate`` against a bare faiss search and PML.

Stanford Online Products' test split is 60,502 images of 11,316 classes (about 5.3 images per class,
at least 2). This script builds random embeddings of that shape (512-d, float32, a weak class
structure so recall is neither 0 nor 1) and times, each in a process of its own (forked after the
imports, so start-up costs nothing) so that neither peak memory nor warm caches mix:

* ``floor``          -- a bare ``faiss.IndexFlatIP`` built on the embeddings and searched for
                        k = 1000 (what any exact R@1000 needs at least); no labels, no metric;
* ``ours``           -- ``evaluate(x, y, "sop")``: R@1, R@10, R@100, R@1000, exact, leave-one-out,
                        ties by index (``backend="auto"``: for a Recall@K this deep, the torch
                        path's rank count, on the CPU as on CUDA);
* ``ours-faiss``     -- the same row with ``backend="faiss"`` (a chunked k = 1002 faiss search);
* ``ours-pml``       -- ``retrieval_metrics(x, y, ("R@1", "MAP@R", "RP"))``: the metrics PML's
                        calculator reports, from one call and one search (``"auto"``: faiss on
                        the CPU, k = the largest class size);
* ``ours-pml-torch`` -- the same with ``backend="torch"`` (the path used on CUDA);
* ``pml``            -- pytorch-metric-learning's ``AccuracyCalculator`` (precision_at_1,
                        mean_average_precision_at_r, r_precision; k = "max_bin_count"), under a
                        time limit.

Two tables: the SOP size (60,502 x 512; all contenders, about ten minutes on 2 cores) and a quick
one at 20,000 x 512 (floor, ours, ours-pml and pml: about a minute on 2 cores). The machine may be
shared, so with ``--repeat R`` the contenders run in rounds (floor, ours, ..., then again), and
every ratio is taken within a round, against that round's floor (or PML), then the median over
rounds is reported.

Peak memory is the growth of the process's peak resident set (``VmHWM`` in /proc/self/status)
over its resident set once the data are in memory, so it also sees faiss's C++ allocations.

    python benchmarks/bench_eval.py                    # SOP table, then the 20,000 x 512 table
    python benchmarks/bench_eval.py --quick            # the 20,000 x 512 table only
    python benchmarks/bench_eval.py --n 5000 --dim 64  # one table of any size (smoke run)
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np

SOP_N, SOP_CLASSES = 60502, 11316
QUICK_N = 20000
CONTENDERS = ("floor", "ours", "ours-faiss", "ours-pml", "ours-pml-torch", "pml")
QUICK_CONTENDERS = ("floor", "ours", "ours-pml", "pml")  # the done-when ratios, quickly
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


def worker(name: str, x: np.ndarray, y: np.ndarray) -> dict:
    """Time one contender on ``(x, y)``; runs in a child process of its own (see :func:`_run_one`)."""
    import faiss
    import torch

    from zslib.engine import evaluate as ev
    from zslib.engine.memory import peak_rss_mib, reset_peak_rss, rss_mib

    if name == "pml":
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    n = len(y)
    reset_peak_rss()
    base = rss_mib()
    t0 = time.perf_counter()
    if name == "floor":
        index = faiss.IndexFlatIP(x.shape[1])
        index.add(x)
        _, I = index.search(x, min(1000, n))
    elif name in ("ours", "ours-faiss"):
        row = ev.evaluate(x, y, "sop", backend="faiss" if name == "ours-faiss" else "auto")
    elif name in ("ours-pml", "ours-pml-torch"):
        row = ev.retrieval_metrics(x, y, PML_SET, backend="torch" if name == "ours-pml-torch" else "auto")
    else:
        calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                                  k="max_bin_count", device=torch.device("cpu"))
        res = calc.get_accuracy(torch.from_numpy(x), torch.from_numpy(y))
        row = {"R@1": res["precision_at_1"], "MAP@R": res["mean_average_precision_at_r"], "RP": res["r_precision"]}
    out = {"seconds": time.perf_counter() - t0, "peak_extra_mb": peak_rss_mib() - base,
           "threads": torch.get_num_threads()}
    if name == "floor":  # cross-check (untimed): recall from its first 101 neighbours, self dropped
        top = I[:, :101]
        keep = top != np.arange(n)[:, None]
        match = (y[top] == y[:, None]) & keep
        rank = np.cumsum(keep, axis=1)  # 1-based position among the neighbours other than self
        row = {f"R@{k}": round(float((match & (rank <= k)).any(1).mean()), 4) for k in (1, 10, 100)}
    out["row"] = {k: float(v) for k, v in row.items()}
    return out


def _child(name, x, y, conn) -> None:
    try:
        conn.send(worker(name, x, y))
    except BaseException as err:  # report, do not hang the parent
        conn.send({"error": f"{type(err).__name__}: {err}"})
    conn.close()


def _run_one(name: str, x: np.ndarray, y: np.ndarray, limit: float | None) -> dict:
    """Run one contender in a forked child: its own process (own peak memory, its own threads), but
    the parent's imports and data are inherited, so no contender pays seconds of start-up."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(name, x, y, send))
    proc.start()
    send.close()
    try:
        if not recv.poll(limit):
            proc.kill()
            proc.join()
            return {"error": f"stopped after the {limit:.0f} s time limit"}
        return recv.recv()
    except EOFError:  # the child died without a word
        proc.join()
        why = "killed (out of memory?)" if proc.exitcode in (-9, 137) else "no result"
        return {"error": f"exit {proc.exitcode}: {why}"}
    finally:
        proc.join()


def _fmt_row(row: dict) -> str:
    return ", ".join(f"{k} {100 * v:.2f}" for k, v in row.items())


def table(n: int, args) -> None:
    names = args.only.split(",") if args.only else list(QUICK_CONTENDERS if n == QUICK_N else CONTENDERS)
    classes = args.classes or max(1, round(n * SOP_CLASSES / SOP_N))
    print(f"\n## {n} x {args.dim} float32 embeddings, {classes} classes ({n / classes:.2f} per class), "
          f"{os.cpu_count()} CPUs, {args.repeat} round(s)", flush=True)
    unknown = sorted(set(names) - set(CONTENDERS))
    if unknown:
        raise SystemExit(f"unknown contender(s) {', '.join(unknown)}; use {', '.join(CONTENDERS)}")
    t_start = time.perf_counter()
    x, y = make_data(n, args.dim, classes, args.seed)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for rnd in range(args.repeat):
        for name in names:
            r = _run_one(name, x, y, args.pml_timeout if name == "pml" else None)
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
    ap.add_argument("--only", default=None, help="comma-separated contenders (default: all of "
                    f"{', '.join(CONTENDERS)}; for the 20,000 table {', '.join(QUICK_CONTENDERS)})")
    ap.add_argument("--pml-timeout", type=float, default=900, help="seconds before PML is stopped")
    args = ap.parse_args()
    # imported once here, inherited by every forked contender (none of them runs a thread before)
    import faiss  # noqa: F401
    import torch  # noqa: F401

    import zslib.engine.evaluate  # noqa: F401
    sizes = [args.n] if args.n else [QUICK_N] if args.quick else [SOP_N, QUICK_N]
    for n in sizes:
        table(n, args)


if __name__ == "__main__":
    main()
