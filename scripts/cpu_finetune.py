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

``--methods`` then runs the five methods at the same size on the recipe the tuning stage led with (the campaign's
:func:`zslib.campaign.run.campaign_configs` at :data:`CPU_SIZE`): per method, its same-loss baseline ("off") and
its candidate settings on the validation classes, the rule's choice, then the chosen setting (or the leading one,
an ablation) and "off" on the unseen classes with the test seeds, paired by seed with the untrained network of the
proof. One method after another, each written to ``campaign/flowers102-cpu-methods.json`` as soon as it is done
(so a recording in batches can follow it); also a short run per method that a test trains again
(:func:`tiny_method_configs`) and both builds' untrained floors at the real profile's 224-px crops.

    OMP_NUM_THREADS=1 nice -n 10 python scripts/cpu_finetune.py                    # the whole proof
    OMP_NUM_THREADS=1 python scripts/cpu_finetune.py --time 20                     # time one 20-step run, store nothing
    OMP_NUM_THREADS=1 nice -n 10 python scripts/cpu_finetune.py --methods all      # the five methods after the proof
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zslib.campaign.report import CPU_MANIFEST as MANIFEST, CPU_METHODS_MANIFEST as METHODS_MANIFEST  # noqa: E402

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


#: The real profile's crop, at which both builds' untrained floors are measured for the datasets chapter.
FLOOR_224 = {**CPU_SIZE, "image_size": 224, "resize_size": 256, "eval_batch_size": 64}
#: The setting each method's short recorded run trains (all its parts on, the paper's values).
TINY_SETTINGS = {"cml": "EC+DC (0.02, 0.01)", "deml": "J=4", "adapt_adv": "GDFL + adversary", "zsml": "alpha=0.3",
                 "jrd": "alpha=1"}
#: Method parameters of a short run that differ from its setting's: ZSML scores every test pair through its network,
#: and 10 query images per unseen class against all 4,696 took about 3 minutes of one core; 2 per class run the same
#: code on a fifth of the pairs.
TINY_PARAMS = {"zsml": {"eval_per_class": 2}}


def method_configs(method: str, setting: str, size: dict = CPU_SIZE, validation_seeds=(0, 1, 2),
                   test_seeds=(0, 1, 2, 3, 4)) -> tuple[dict, dict]:
    """``(validation, test)``, each ``{candidate: [Config per seed]}`` with "off" first: ``method``'s campaign
    runs (:func:`zslib.campaign.run.campaign_configs`) at ``size`` on the tuning key ``setting``."""
    from zslib.campaign.run import campaign_configs

    c = campaign_configs("flowers102", methods=(method,), overrides=dict(size), tuning=setting,
                         validation_seeds=tuple(validation_seeds), test_seeds=tuple(test_seeds))
    return c["validation"][method], c["test"][method]


def tiny_method_configs(setting: str = "lr=1e-05", size: dict = TINY) -> dict:
    """``{method: Config}``: each method's short run (:data:`TINY` size, test stage, seed 0) at
    :data:`TINY_SETTINGS` (with :data:`TINY_PARAMS`), the path of the methods stage that a test trains again."""
    from zslib.campaign.plan import METHODS

    out = {}
    for m in METHODS:
        _, test = method_configs(m, setting, size, validation_seeds=(0,), test_seeds=(0,))
        config = test[TINY_SETTINGS[m]][0]
        config = config.replace(method_params={**config.method_params, **TINY_PARAMS.get(m, {})})
        out[m] = config.replace(name=f"ft-cpu-tiny-{m}-s0")
    return out


def run_methods(go, directory: Path, methods, setting: str, ablation: bool, untrained: list, size: dict,
                vseeds, tseeds, tiny_size: dict, floors: dict, out=print) -> dict:
    """The methods stage (see the module docstring): every method's validation, choice and test runs through
    ``go(config, stage)``; the manifest rewritten after each method, so that what finished can be recorded."""
    from zslib.campaign.run import setting_to_test
    from zslib.engine.choice import choose
    from zslib.engine.store import write_json

    def files(runs):
        return [r.path.name for r in runs]

    path = directory / "campaign" / f"{METHODS_MANIFEST}.json"
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    manifest.update({"format": "zslib-campaign", "dataset": "flowers102", "smoke": False, "kind": "cpu-methods",
                     "size": size, "recipe": setting, "recipe_ablation": ablation,
                     "untrained": files(untrained), "images": IMAGES})
    manifest.setdefault("methods", {})
    manifest.setdefault("tiny", {})
    for m, config in tiny_method_configs(setting, tiny_size).items():
        if m in methods:
            manifest["tiny"][m] = go(config, "tiny").path.name
    write_json(path, manifest)
    for m in methods:
        val_configs, test_configs = method_configs(m, setting, size, vseeds, tseeds)
        val = {k: [go(c, f"{m} validation") for c in runs] for k, runs in val_configs.items()}
        choice = choose(val, off="off", metric="R@1", split="val")
        out(f"{m}: {choice.sentence()}")
        chosen = setting_to_test(choice)
        test = {"off": [go(c, f"{m} test") for c in test_configs["off"]],
                "method": [go(c, f"{m} test") for c in test_configs[chosen]]}
        manifest["methods"][m] = {"validation": {k: files(v) for k, v in val.items()},
                                  "choice": {"chosen": choice.chosen, "leader": choice.leader,
                                             "sentence": choice.sentence()},
                                  "setting": chosen, "ablation": choice.off_won,
                                  "test": {k: files(v) for k, v in test.items()}}
        write_json(path, manifest)
        out(f"wrote {path} ({m} done)")
    for backbone in floors:
        manifest.setdefault("floors_224", {})[backbone] = go(build_floor(backbone, floors[backbone]), "floor 224").path.name
        write_json(path, manifest)
    return manifest


def _main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results-dir", default="results", help="where the runs go (default results/)")
    p.add_argument("--candidates", default=",".join(CPU_CANDIDATES), help="tuning candidates besides off, untrained")
    p.add_argument("--validation-seeds", default="0,1,2")
    p.add_argument("--test-seeds", default="0,1,2,3,4")
    p.add_argument("--time", type=int, metavar="STEPS", help="time one validation run of STEPS steps; store nothing")
    p.add_argument("--methods", default="", help="after the proof, the methods stage for these methods (comma-"
                   "separated, or 'all'): validation, choice and test of each at the proof's size")
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
    if args.methods:
        from zslib.campaign.plan import METHODS

        methods = METHODS if args.methods == "all" else tuple(m for m in args.methods.split(",") if m)
        unknown = sorted(set(methods) - set(METHODS))
        if unknown:
            raise SystemExit(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
        floors = {} if args.smoke else {b: FLOOR_224 for b in BUILD_FLOORS}
        run_methods(go, directory, methods, setting, setting != choice.chosen, test["untrained"], size, vseeds, tseeds,
                    tiny_size, floors, out=lambda line: print(line, flush=True))
    return 0


def main(argv=None) -> int:
    """Run the script; ``ZS_DATA`` and ``ZS_CACHE``, which it may point at its own folders, are put back after it,
    so a caller in the same process (a test, a notebook) goes on reading its own data."""
    from zslib.engine.data.root import environment_kept

    with environment_kept("ZS_DATA", "ZS_CACHE"):
        return _main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
