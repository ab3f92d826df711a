"""Training throughput of the full profile: images per second, the share of a step spent waiting for data,
and peak GPU memory, for GoogLeNet and EfficientNet-Lite0.

    python benchmarks/bench_train.py                                # Flowers-102 at the campaign's batch (32 x 4)
    python benchmarks/bench_train.py --data fake-cub --cache off    # full-size JPEGs decoded every step
    python benchmarks/bench_train.py --data fake-cub --cache on     # ... read through the pre-resized cache
    python benchmarks/bench_train.py --small                        # 8 x 2 images, a few steps: a CPU check
    python benchmarks/bench_train.py --loader-only --data fake-cub  # the data path alone, without a network
    python benchmarks/bench_train.py --path both --shared 1 4       # loader vs device images, alone and 4 at once

What runs is the trainer itself (:func:`zslib.engine.train.train`) on the network, method and data path a run of the
full profile builds (:func:`zslib.engine.runner.build_model`, ``build_method``, ``build_data``), with random
weights instead of the ImageNet ones (the speed is the same) and no evaluation. The first ``--warmup``
steps (cuDNN's algorithm search, the loader's start) are not timed. Printed per backbone:

* ``img/s``: images trained per second over the timed steps;
* ``data wait``: the share of the timed wall time the loop spent getting the next batch (from the loader,
  onto the device) -- :attr:`zslib.engine.train.History.data_seconds`. The loop waits for the GPU once per step
  (it reads the loss to check it is finite), so this is time the GPU had no work queued, up to the part
  of the wait that overlaps the step's last kernels: an upper bound of the GPU's idle share due to data;
* ``peak mem``: the peak of ``torch.cuda.max_memory_allocated`` over the timed steps (on the CPU, the
  process's peak resident memory instead);
* ``loader img/s``: what the data path alone delivers (no network), for comparison with ``img/s``.

Data path (``--path``): ``loader`` (loader processes crop, flip and normalize every image on the CPU) or ``device``
(:mod:`zslib.engine.data.device_images`: the pre-resized pixels held on the device, every batch cropped there; the
same batches), or ``both``. ``--shared N ...``: besides one run alone, ``N`` runs at once in ``N`` processes sharing
the device, as ``scripts/gpu_session.py`` trains the campaign; the row gives their images per second together
(all images over the span from the first timed step of any to the last of any), the mean data wait and the
largest peak memory of one process.

Data (``--data``): ``flowers`` (Flowers-102 from ``--root``, default ``$ZS_SHARED_DATA/flowers102`` or
``../shared/data/flowers102``; the shared copy's images are already small, 160 px), ``fake-cub`` (a CUB-like
tree of full-size 500 x 375 JPEGs written to a temporary folder: what decoding real CUB costs), or ``memory``
(random tensors in memory: the network alone). ``--cache on`` reads image files through the pre-resized
image cache (built once, in ``$ZS_CACHE`` or a temporary folder, and not timed).
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BACKBONES = ("googlenet", "efficientnet_lite0")


class InMemory(torch.utils.data.Dataset):
    """Random images already on the host, no decoding, no augmentation: the network's speed alone."""

    def __init__(self, n: int, classes: int, size: int):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(n, 3, size, size, generator=g)
        self.labels = np.arange(n) % classes

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])

    def tensors(self):
        return self.images, torch.from_numpy(self.labels)


def fake_cub(folder: Path, classes: int = 100, per_class: int = 6) -> Path:
    """A CUB-200-2011 tree of ``classes`` training classes (and two test classes) of smooth random
    500 x 375 JPEGs, about the size and decoding cost of CUB's photographs."""
    from PIL import Image

    top = folder / "CUB_200_2011"
    if (top / "images.txt").is_file():
        return folder
    rng = np.random.default_rng(0)
    lines, labels, k = [], [], 0
    ids = list(range(1, classes + 1)) + [101, 102]
    for c in ids:
        for j in range(per_class):
            k += 1
            rel = f"{c:03d}.Bird/{c}_{j}.jpg"
            small = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
            (top / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(small).resize((500, 375), Image.BICUBIC).save(top / "images" / rel, quality=90)
            lines.append(f"{k} {rel}")
            labels.append(f"{k} {c}")
    (top / "images.txt").write_text("\n".join(lines) + "\n")
    (top / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (top / "classes.txt").write_text("\n".join(f"{c} {c:03d}.Bird" for c in range(1, 201)) + "\n")
    return folder


def loader_rate(train_set, config, batches: int, device=None) -> float:
    """Images per second the trainer's batch stream delivers (on the host; device images on the device), without a
    network."""
    from zslib.engine.data import ClassBalancedSampler
    from zslib.engine.data.splits import labels_of
    from zslib.engine.train.batches import BatchStream

    sampler = ClassBalancedSampler(labels_of(train_set), config.batch_classes, config.batch_per_class, seed=0)
    stream = BatchStream(train_set, sampler, seed=0, num_workers=config.num_workers)
    stream.start(0)
    try:
        stream.next()  # workers started
        sync = torch.cuda.synchronize if device is not None and device.type == "cuda" else (lambda *a: None)
        sync()
        t = time.perf_counter()
        for _ in range(batches):
            stream.next()
        sync()
        return batches * config.batch_classes * config.batch_per_class / (time.perf_counter() - t)
    finally:
        stream.close()


def bench(backbone: str, args, device) -> dict:
    from zslib.engine.config import Config
    from zslib.engine.data import build_dataset
    from zslib.engine.models import normalization
    from zslib.engine.runner import build_method, build_model
    from zslib.engine.train import Precision, set_seed, TrainSpec, train

    device_path = getattr(args, "path_now", "loader") == "device"
    config = Config.from_profile("full", backbone=backbone, pretrained=False, dataset=args.dataset,
                                 image_cache=args.cache == "on" or device_path, **args.sizes)
    batch = config.batch_classes * config.batch_per_class
    if args.data == "memory":
        train_set = InMemory(4 * batch, 2 * config.batch_classes, config.image_size)
    else:  # the training split as a run of the full profile reads it (build_data's "train")
        started = time.perf_counter()
        mean, std = normalization(config.backbone)
        train_set = build_dataset(config.to_profile(), "train", True, mean=mean, std=std)
        if device_path:
            from zslib.engine.data.device_images import on_device

            train_set = on_device({"train": train_set}, device)["train"]
        prepared = time.perf_counter() - started
    if args.loader_only:
        return {"backbone": backbone, "path": args.path_now, "batch": batch,
                "loader img/s": loader_rate(train_set, config, args.loader_batches, device),
                "data ready in": f"{prepared:.1f} s"}
    classes = np.unique(np.asarray(train_set.labels))
    set_seed(0)
    model = build_model(config)
    method = build_method(config, model, classes)
    marks = {}

    def mark(step, history):
        if step == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            marks["start"] = (time.perf_counter(), history.data_seconds)
            marks["wall_start"] = time.time()
        if step == args.warmup + args.steps:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            marks["end"] = (time.perf_counter(), history.data_seconds)
            marks["wall_end"] = time.time()

    train(model, method, train_set, TrainSpec(iterations=args.warmup + args.steps, batch_classes=config.batch_classes,
                                              batch_per_class=config.batch_per_class, lr=config.lr,
                                              weight_decay=config.weight_decay, new_layer_mult=config.new_layer_mult,
                                              seed=0, device=device, amp=config.amp, num_workers=config.num_workers,
                                              callbacks=[mark], progress=False))
    (t0, d0), (t1, d1) = marks["start"], marks["end"]
    row = {"backbone": backbone, "path": args.path_now, "batch": batch, "img/s": args.steps * batch / (t1 - t0),
           "data wait": (d1 - d0) / (t1 - t0), "precision": Precision(device, config.amp).name}
    if device.type == "cuda":
        row["peak mem"] = f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB (GPU)"
    else:
        row["peak mem"] = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (CPU RSS)"
    if args.data != "memory" and not getattr(args, "child", False):
        row["loader img/s"] = loader_rate(train_set, config, args.loader_batches, device)
        row["data ready in"] = f"{prepared:.1f} s"
    row["window"] = (marks["wall_start"], marks["wall_end"])
    row["images"] = args.steps * batch
    return row


def shared(backbone: str, n: int, argv: list[str]) -> dict:
    """``n`` processes train at once on the device (each this benchmark with ``--child``); their rows together."""
    import json
    import subprocess

    env = {**os.environ, "ZS_CONCURRENT_RUNS": str(n)}
    cmd = [sys.executable, __file__, *argv, "--backbones", backbone, "--child"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(n)]
    rows = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"a shared benchmark process failed:\n{err[-2000:]}")
        rows.append(json.loads(out.strip().splitlines()[-1]))
    start, end = min(r["window"][0] for r in rows), max(r["window"][1] for r in rows)
    return {"backbone": backbone, "path": rows[0]["path"], "runs sharing": n,
            "img/s together": sum(r["images"] for r in rows) / (end - start),
            "img/s each": float(np.mean([r["img/s"] for r in rows])),
            "data wait": float(np.mean([r["data wait"] for r in rows])),
            "peak mem": max(r["peak mem"] for r in rows)}


def _main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backbones", nargs="+", default=list(BACKBONES), choices=BACKBONES)
    p.add_argument("--data", choices=["flowers", "fake-cub", "memory"], default="flowers")
    p.add_argument("--root", help="data root (flowers: the folder holding flowers102/ or flowers102 itself)")
    p.add_argument("--cache", choices=["on", "off"], default="on", help="the pre-resized image cache (full profile: on)")
    p.add_argument("--small", action="store_true", help="a CPU check: batch 8 x 2, 3 + 3 steps")
    p.add_argument("--batch-classes", type=int)
    p.add_argument("--batch-per-class", type=int)
    p.add_argument("--image-size", type=int)
    p.add_argument("--steps", type=int, help="timed steps (default 30; --small: 3)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default 5; --small: 2)")
    p.add_argument("--workers", type=int, help="data-loading processes (default: the profile's, at most one per core)")
    p.add_argument("--loader-batches", type=int, default=None, help="batches for the loader-only rate")
    p.add_argument("--loader-only", action="store_true", help="only the data path's rate (no network)")
    p.add_argument("--device", help="cuda, cpu ... (default: CUDA when present)")
    p.add_argument("--path", choices=["loader", "device", "both"], default="loader",
                   help="the data path: loader processes, or device images (zslib.engine.data.device_images)")
    p.add_argument("--shared", type=int, nargs="+", default=[1],
                   help="how many runs train at once (1: alone; e.g. 1 4 measures both)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one of --shared's processes
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    if args.loader_only and args.data == "memory":
        p.error("--loader-only measures reading image files: use --data flowers or fake-cub")

    from zslib.engine.profile import PROFILES, device as default_device

    device = torch.device(args.device) if args.device else default_device()
    full = PROFILES["full"]
    # Flowers-102 trains on 51 classes, fewer than the full profile's 64 per batch: its default batch is the
    # fine-tuning campaign's (32 x 4, zslib.campaign.plan.RECIPES), the same 128 images.
    from zslib.campaign.plan import RECIPES

    if args.data == "flowers":
        recipe = RECIPES["flowers102"].settings
        default = (recipe["batch_classes"], recipe["batch_per_class"])
    else:
        default = (full.batch_classes, full.batch_per_class)
    sizes = {"batch_classes": args.batch_classes or (8 if args.small else default[0]),
             "batch_per_class": args.batch_per_class or default[1]}
    if args.image_size:
        sizes["image_size"], sizes["resize_size"] = args.image_size, round(args.image_size * 256 / 224)
    if args.workers is not None:
        sizes["num_workers"] = args.workers
    args.sizes = sizes
    args.steps = args.steps or (3 if args.small else 30)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.small else 5)
    args.loader_batches = args.loader_batches or (4 if args.small else 20)
    tmp = tempfile.TemporaryDirectory(prefix="zslib-bench-")
    os.environ.setdefault("ZS_CACHE", str(Path(tmp.name) / "cache"))  # never the checkout's data/ folder
    if args.data == "flowers":
        args.dataset = "flowers102"
        root = args.root or os.environ.get("ZS_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
        os.environ["ZS_DATA"] = str(root)
    elif args.data == "fake-cub":
        args.dataset = "cub200"
        os.environ["ZS_DATA"] = str(fake_cub(Path(tmp.name) / "cub200"))
    else:
        args.dataset = "cub200"
    from zslib.engine.store import device_name
    from zslib.engine.train.batches import loader_workers

    paths = ["loader", "device"] if args.path == "both" else [args.path]
    if args.child:
        import json

        args.path_now = paths[0]
        print(json.dumps(bench(args.backbones[0], args, device)), flush=True)
        return 0
    print(f"device {device_name(device)}; torch {torch.__version__}; {torch.get_num_threads()} threads; "
          f"data {args.data} (image cache {args.cache}); batch {sizes['batch_classes']} x {sizes['batch_per_class']}; "
          f"loader workers {loader_workers(sizes.get('num_workers', full.num_workers))}; "
          f"{args.warmup} warm-up + {args.steps} timed steps", flush=True)

    def show(row):
        row = {k: v for k, v in row.items() if k not in ("window", "images")}
        print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)

    for backbone in args.backbones:
        for path in paths:
            args.path_now = path
            for n in args.shared:
                if n <= 1:
                    show(bench(backbone, args, device))
                else:
                    child = [a for a in _without(raw, ("--backbones", "--path", "--shared"))]
                    show(shared(backbone, n, [*child, "--path", path]))
    tmp.cleanup()
    return 0


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` without the given options and their values (a child process gets its own)."""
    out, skip = [], False
    for a in argv:
        if a.startswith("--"):
            skip = a.split("=", 1)[0] in options
        if not skip:
            out.append(a)
    return out


def main(argv=None) -> int:
    """Run the script; ``ZS_DATA`` and ``ZS_CACHE``, which it may point at its own folders, are put back after it,
    so a caller in the same process (a test, a notebook) goes on reading its own data."""
    from zslib.engine.data.root import environment_kept

    with environment_kept("ZS_DATA", "ZS_CACHE"):
        return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
