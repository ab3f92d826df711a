"""Benchmark: DeML's object attention batched over images against a per-image Python loop.

The same function, :func:`zslib.methods.deml.object_attention.object_attention_map` (graph, T = 10 walk steps,
rescale, resize to the image, average over layers), is timed on a batch of 64 images in one call and
image by image in a Python loop; the goal is a batched speed-up of at least 20x. Maps have the sizes
of the two profiles:

* ``real``  -- EfficientNet-Lite0 at 224 px: 14 x 14 x 112 and 7 x 7 x 1280, attention at 224 x 224;
* ``quick`` -- SmallCNN (widths 16-128) at 48 px: stage3 6 x 6 x 64 and stage4 3 x 3 x 128, at 48 x 48;
* ``quick96`` -- the same network at 96 px: 12 x 12 x 64 and 6 x 6 x 128, at 96 x 96.

Each contender runs ``--repeats`` times after a warm-up, alternating, and the best time is reported
(the machine is shared: the minimum is the least disturbed run). Feature maps are random ReLU outputs:
the cost does not depend on their values.

What to expect: a batched call saves the per-call overhead (some fifty small tensor operations per
image), not arithmetic. On a CPU that wins where the overhead dominates, the quick profile's tiny maps;
at the real profile's sizes the ``n^2 C`` Gram matrices dominate (196^2 x 112 and 49^2 x 1280
multiply-adds per image) and a loop does the same arithmetic, so on a CPU the ratio there stays near 1.
On a GPU every small operation costs a kernel launch and the batched call wins at every size.

    python benchmarks/bench_oam.py                  # all sizes, batch 64, CPU
    python benchmarks/bench_oam.py --device cuda --repeats 20
"""
from __future__ import annotations

import argparse
import time

import torch

from zslib.methods.deml.object_attention import object_attention_map

SIZES = {
    "real": ([(112, 14, 14), (1280, 7, 7)], 224),
    "quick": ([(64, 6, 6), (128, 3, 3)], 48),
    "quick96": ([(64, 12, 12), (128, 6, 6)], 96),
}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def bench(name: str, batch: int, repeats: int, device: torch.device, spatial_sigma) -> dict:
    shapes, size = SIZES[name]
    g = torch.Generator().manual_seed(0)
    maps = [torch.randn(batch, *s, generator=g).relu().to(device) for s in shapes]

    def batched():
        return object_attention_map(maps, size, spatial_sigma=spatial_sigma)

    def looped():
        return torch.cat([object_attention_map([m[i:i + 1] for m in maps], size, spatial_sigma=spatial_sigma)
                          for i in range(batch)])

    assert torch.allclose(batched(), looped(), atol=1e-5), "batched and per-image results differ"
    best = {"batched": float("inf"), "loop": float("inf")}
    for _ in range(repeats):
        best["batched"] = min(best["batched"], _time(batched, device))
        best["loop"] = min(best["loop"], _time(looped, device))
    return {"size": name, **best, "ratio": best["loop"] / best["batched"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--spatial-sigma", type=float, default=None,
                        help="the released code's spatial Gaussian (0.15); default the paper's plain Eq. 2")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"object_attention_map, batch {args.batch}, T = 10, device {device}, torch threads "
          f"{torch.get_num_threads()}, best of {args.repeats}")
    print(f"{'maps':8s} {'batched (ms)':>13s} {'loop (ms)':>11s} {'speed-up':>9s}")
    rows = [bench(name, args.batch, args.repeats, device, args.spatial_sigma) for name in args.sizes]
    for r in rows:
        print(f"{r['size']:8s} {1e3 * r['batched']:13.2f} {1e3 * r['loop']:11.2f} {r['ratio']:8.1f}x")
    worst = min(r["ratio"] for r in rows)
    print(f"smallest speed-up {worst:.1f}x: goal of 20x {'met' if worst >= 20 else 'NOT met'}")
    return rows


if __name__ == "__main__":
    main()
