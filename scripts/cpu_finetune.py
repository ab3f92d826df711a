"""The fine-tuned regime's baseline recipe, end to end on the CPU: EfficientNet-Lite0 in its TensorFlow build.

The recipe of the fine-tuning campaign (:mod:`zslib.campaign.plan`: the whole network trained on images, the
triplet baseline) at a size one busy CPU core can afford in about an hour: 96-px crops of the 160-px Flowers-102
copy (resize 110, ImageNet's 256/224 ratio), 8 x 4 batches, 100 steps (:data:`CPU_SIZE`). What runs, in order
(every run stored with its provenance in the results folder; a run already stored is loaded, so the script resumes
where it stopped):

1. ``tiny``: one short run (2 steps at 64 px) that a test trains again and matches (``tests/test_cpu_finetune.py``);
   ``build``: the untrained network of each build (TensorFlow and symmetric padding) on the unseen classes;
2. ``validation``: the tuning candidates (:func:`zslib.campaign.plan.tuning_changes`: the head on the frozen network
   "off", the backbone's rates, BatchNorm frozen or on batch statistics) and the untrained network on the
   seen classes minus the validation classes, validation seeds; the choice by the book's rule
   (:func:`zslib.engine.choice.choose`), the length fixed (one evaluation at the end);
3. ``test``: the chosen setting (if "off" or the untrained network is chosen, the leading fine-tuning candidate,
   labelled an ablation), "off" and the untrained network on all seen classes, evaluated on the unseen classes,
   test seeds.

It writes ``campaign/flowers102-cpu.json`` (which file is which run, the choice) beside the runs; record it with
``python -m zslib record --profile full`` (the runs and that manifest go to ``results/recorded/``).

    OMP_NUM_THREADS=1 nice -n 10 python scripts/cpu_finetune.py                    # the whole proof
    OMP_NUM_THREADS=1 python scripts/cpu_finetune.py --time 20                     # time one 20-step run, store nothing
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The CPU size of the recipe (Config fields over the campaign's Flowers-102 recipe). Measured in CPU time of one
#: thread on the 2-core AMD EPYC (2026-11-27): a training step of 8 x 4 images takes 0.63 s at 96 px (1.15 s at
#: 128 px), embedding one image 8.4 ms (19.6 ms), and every run embeds all 8,189 images once at its end; so a
#: trained run costs about 2.2 minutes of CPU at this size (about 4.6 at 128 px), the whole proof about an hour.
CPU_SIZE = {"backbone": "tf_efficientnet_lite0", "image_size": 96, "resize_size": 110, "batch_classes": 8,
            "batch_per_class": 4, "iterations": 100, "num_workers": 0, "amp": False, "image_cache": False,
            "eval_batch_size": 128}
#: The short run a test trains again: the same path, 2 steps of 4 x 2 at 64 px.
TINY = {**CPU_SIZE, "image_size": 64, "resize_size": 73, "batch_classes": 4, "batch_per_class": 2, "iterations": 2}
#: ``--smoke``: the whole script in seconds on a fabricated Flowers-102 (random weights, 2 steps of 2 x 2 at 32 px).
SMOKE_SIZE = {**CPU_SIZE, "image_size": 32, "resize_size": 36, "batch_classes": 2, "batch_per_class": 2,
              "iterations": 2, "pretrained": False, "embedding_dim": 16}
#: The tuning candidates the CPU affords (keys of tuning_changes), "off" and the untrained network always.
CPU_CANDIDATES = ("lr=1e-05", "batch BN lr=1e-05")
MANIFEST = "flowers102-cpu"
#: The images the proof reads (the config hashes do not cover the image files).
IMAGES = "Flowers-102 resized to 160 px on the short side, JPEG quality 88"


def cpu_configs(size: dict = CPU_SIZE, candidates=CPU_CANDIDATES, validation_seeds=(0, 1, 2)) -> dict:
    """``{label: [Config per seed]}`` of the validation stage at ``size``, "untrained" and "off" first."""
    from zslib.campaign.plan import RECIPES, UNTRAINED, tuning_configs

    overrides = {**size, "eval_every": size["iterations"]}
    every = tuning_configs(RECIPES["flowers102"], overrides=overrides, seeds=tuple(validation_seeds))
    unknown = sorted(set(candidates) - set(every))
    if unknown:
        raise SystemExit(f"unknown candidate(s) {unknown}; choose from {sorted(set(every) - {UNTRAINED, 'off'})}")
    return {k: v for k, v in every.items() if k in (UNTRAINED, "off", *candidates)}


def test_config(config, seed: int, label: str):
    """The test-stage twin of a validation config: all seen classes, evaluated on the unseen ones."""
    slug = "".join(ch if ch.isalnum() or ch in ".-" else "-" for ch in label.lower())
    return config.replace(validation_fraction=0.0, seed=seed,
                          name=f"ft-cpu-test-{slug}-{config.loss}-{config.dataset}-s{seed}")


def tiny_config(size: dict = TINY):
    """The short recorded run (``TINY``): the chosen-recipe path at a size a test retrains in seconds."""
    return test_config(cpu_configs(size, candidates=("lr=1e-05",), validation_seeds=(0,))["lr=1e-05"][0], 0, "tiny")


#: The untrained network of each build at the proof's size, one evaluation each (the datasets chapter's floors).
BUILD_FLOORS = ("tf_efficientnet_lite0", "efficientnet_lite0")


def build_floor(backbone: str, size: dict = CPU_SIZE):
    """The untrained network of ``backbone`` at :data:`CPU_SIZE`, evaluated on the unseen classes (test seed 0)."""
    untrained = cpu_configs(size, candidates=(), validation_seeds=(0,))["untrained"][0]
    return test_config(untrained.replace(backbone=backbone), 0, f"untrained {backbone}")


def _main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results-dir", default="results", help="where the runs go (default results/)")
    p.add_argument("--candidates", default=",".join(CPU_CANDIDATES), help="tuning candidates besides off, untrained")
    p.add_argument("--validation-seeds", default="0,1,2")
    p.add_argument("--test-seeds", default="0,1,2,3,4")
    p.add_argument("--time", type=int, metavar="STEPS", help="time one validation run of STEPS steps; store nothing")
    p.add_argument("--smoke", action="store_true", help="every stage in seconds on a fabricated Flowers-102 "
                   "(random weights, 32 px), results in <results-dir>/smoke-cpu/ with the data")
    args = p.parse_args(argv)

    import torch

    from zslib.engine.choice import choose
    from zslib.engine.runner import run
    from zslib.engine.store import write_json

    torch.set_num_threads(1)
    directory = Path(args.results_dir).resolve()
    size, tiny_size = CPU_SIZE, TINY
    if args.smoke:
        import os

        from zslib.campaign.fabricate import fabricate_flowers

        directory = directory / "smoke-cpu"
        os.environ["ZS_DATA"] = str(fabricate_flowers(directory / "data"))
        size = tiny_size = SMOKE_SIZE
    candidates = tuple(c for c in args.candidates.split(",") if c)
    vseeds = tuple(int(s) for s in args.validation_seeds.split(","))
    tseeds = tuple(int(s) for s in args.test_seeds.split(","))

    if args.time:
        import tempfile

        config = cpu_configs({**CPU_SIZE, "iterations": args.time}, ("lr=1e-05",), (0,))["lr=1e-05"][0]
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            r = run(config, tmp, device="cpu", progress=False)
            total = time.perf_counter() - started
        train = r.provenance["train_seconds"]
        print(f"{args.time} steps of {config.batch_classes} x {config.batch_per_class} at {config.image_size} px: "
              f"{train:.0f} s of training ({train / args.time:.2f} s/step), {total - train:.0f} s of data set-up "
              f"and evaluation, {total:.0f} s in all; val R@1 {100 * r.metric('R@1', 'val'):.2f}", flush=True)
        return 0

    def go(config, stage):
        started = time.perf_counter()
        r = run(config, directory, device="cpu", progress=False)
        split = "val" if config.validation_fraction > 0 else "unseen"
        print(f"[{time.strftime('%H:%M:%S')}] {stage} {config.name} ({config.hash}): {split} R@1 "
              f"{100 * r.metric('R@1', split):.2f} ({time.perf_counter() - started:.0f} s)", flush=True)
        return r

    tiny = go(tiny_config(tiny_size), "tiny")
    builds = {b: go(build_floor(b, size), "build") for b in BUILD_FLOORS}
    val = {k: [go(c, "validation") for c in runs] for k, runs in cpu_configs(size, candidates, vseeds).items()}
    choice = choose(val, off="off", metric="R@1", split="val")
    print(choice.sentence(), flush=True)
    trained = [k for k in val if k not in ("off", "untrained")]
    setting = choice.chosen if choice.chosen in trained else max(trained, key=lambda k: choice.means[k].mean)
    test = {k: [go(test_config(val[k][0].config, s, k), "test") for s in tseeds] for k in ("untrained", "off", setting)}

    def files(runs):
        return [r.path.name for r in runs]

    manifest = {"format": "zslib-campaign", "dataset": "flowers102", "smoke": False, "kind": "cpu-proof",
                "device": {"device": tiny.provenance.get("device"), "threads": torch.get_num_threads()},
                "size": size, "tiny": tiny.path.name, "images": "fabricated" if args.smoke else IMAGES,
                "validation": {k: files(v) for k, v in val.items()},
                "choice": {"chosen": choice.chosen, "leader": choice.leader, "sentence": choice.sentence()},
                "test": {k: files(v) for k, v in test.items()}, "setting": setting,
                "builds": {b: r.path.name for b, r in builds.items()},
                "ablation": setting != choice.chosen}
    path = write_json(directory / "campaign" / f"{MANIFEST}.json", manifest)
    print(f"wrote {path}", flush=True)
    return 0


def main(argv=None) -> int:
    """Run the script; ``ZS_DATA`` and ``ZS_CACHE``, which it may point at its own folders, are put back after it,
    so a caller in the same process (a test, a notebook) goes on reading its own data."""
    from zslib.engine.data.root import environment_kept

    with environment_kept("ZS_DATA", "ZS_CACHE"):
        return _main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
