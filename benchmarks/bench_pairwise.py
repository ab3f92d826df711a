"""Benchmark: ZSML's pairwise evaluation of the unseen half of Flowers-102, time and peak memory.

The unseen classes 52-102 of Flowers-102 hold 4,696 images. ZSML scores every ordered pair with its
network, 4,696^2 = 22.05 million network evaluations. This script builds the network with the
paper's sizes (``zslib.methods.zsml.relation.pair_similarity``: k = 96 kernels 8 x 2 with stride 10,
FC 1,000 - 1,000 - 1), random features of the real shape (4,696 x 1,280, EfficientNet-Lite0's
pooled feature size; the values do not change the cost), and runs
``zslib.methods.zsml.pairwise.score_matrix`` over the full problem.

The full matrix takes hours on a 2-core CPU, so by default the run stops after ``--seconds``
seconds. It then extrapolates the time from the measured rate of scored pairs. Peak memory is the
growth of the process's peak resident set (``VmHWM``) over its resident set once the model and the
features are in memory and one warm-up chunk has run. A partial run has not yet touched all of the
output matrix (4,696^2 float32 = 84 MiB), so the script also reports peak + whole matrix as an
upper bound.

    python benchmarks/bench_pairwise.py                      # 120 s sample, extrapolated
    python benchmarks/bench_pairwise.py --seconds 0          # the whole matrix (hours on 2 CPUs)
    python benchmarks/bench_pairwise.py --max-pairs 1024     # another chunk size
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch

N_UNSEEN, DIM = 4696, 1280


class _Stop(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=N_UNSEEN)
    ap.add_argument("--dim", type=int, default=DIM)
    ap.add_argument("--max-pairs", type=int, default=None, help="default: zslib.methods.zsml.pairwise.DEFAULT_MAX_PAIRS")
    ap.add_argument("--seconds", type=float, default=120.0, help="stop after this long and extrapolate; 0 = run all")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from zslib.methods.zsml import pairwise as pw
    from zslib.engine.memory import peak_rss_mib, reset_peak_rss, rss_mib
    from zslib.methods.zsml.relation import pair_similarity

    max_pairs = args.max_pairs or pw.DEFAULT_MAX_PAIRS
    torch.manual_seed(0)
    net = pair_similarity(args.dim).eval().to(args.device)
    x = torch.rand(args.n, args.dim, device=args.device)  # non-negative, like pooled ReLU features
    with torch.no_grad():  # warm-up chunk (allocator, BLAS threads)
        net(x[:256], x[-256:])
    reset_peak_rss()
    base = rss_mib()

    done = [0]
    t0 = time.perf_counter()

    def scorer(a, b):
        if args.seconds and time.perf_counter() - t0 > args.seconds:
            raise _Stop
        done[0] += a.shape[0]
        return net(a, b)

    finished = True
    try:
        pw.score_matrix(scorer, x, max_pairs=max_pairs)
    except _Stop:
        finished = False
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    total = args.n * args.n
    matrix_mb = total * 4 / 2**20
    peak = peak_rss_mib() - base
    out = {
        "n": args.n, "dim": args.dim, "pairs_total": total, "max_pairs": max_pairs, "device": args.device,
        "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "pairs_scored": done[0], "seconds": round(elapsed, 1), "finished": finished,
        "pairs_per_second": round(done[0] / elapsed, 1),
        "seconds_full_matrix": round(total / (done[0] / elapsed)) if not finished else round(elapsed, 1),
        "peak_extra_mb": round(peak, 1), "matrix_mb": round(matrix_mb, 1),
        "peak_extra_upper_bound_mb": round(peak + (0 if finished else matrix_mb), 1),
        "parameters": sum(p.numel() for p in net.parameters()),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
