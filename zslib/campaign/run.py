"""The fine-tuning campaign, stage by stage: floor, validation, test, table.

:func:`run_campaign` is what ``python -m zslib finetune`` calls. On one GPU it fine-tunes the whole pretrained
network (:mod:`zslib.campaign.plan` says which runs) in four stages:

1. **floor** -- the untrained floor: the pooled ImageNet feature of each backbone, evaluated on the unseen
   classes (nothing trains);
2. **validation** -- for every method, each candidate setting and "off" (the same-loss baseline) on the seen
   classes minus a class-disjoint validation split, for the validation seeds; the setting is chosen by the
   book's one rule (:func:`zslib.engine.choice.choose`: the best validation mean, only if clearly above "off");
3. **test** -- for every method, the chosen setting and its same-loss baseline on all seen classes, for the
   test seeds, evaluated on every unseen image. When "off" is chosen the method is still trained at the
   leading setting, and its row is labelled an ablation;
4. **table** -- per method, the unseen Recall@1 and its change against the same-loss baseline and against the
   untrained floor, paired by seed with 95% intervals (:func:`zslib.engine.stats.paired`).

Every run goes through :func:`zslib.engine.runner.run`: a stored result is loaded, an interrupted run resumes
from its checkpoint (written every ``checkpoint_every`` steps), so the same command started again after a
disconnect goes on where it stopped. Each result records its provenance: device (the GPU's model), precision,
training images per second, the share of training time spent waiting for data, peak GPU memory. The campaign
writes ``campaign/<dataset>.json`` (the runs of every stage, the choices, the table) and ``campaign/<dataset>.md``
(the table) in the results folder.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from zslib.campaign.records import hardware
from zslib.campaign.plan import (RECIPES, SMOKE, SMOKE_SEEDS, UNTRAINED, Recipe, candidate_configs, estimated_images,
                                 floor_config, length_candidates, method_plan, named, skipped_methods, tuning_changes,
                                 method_plans, setting_to_test, tuning_configs, tuning_overrides)
from zslib.engine.choice import choose
from zslib.engine.stability import stability_label
from zslib.engine.config import Config
from zslib.engine.data.datasets import get_dataset_class
from zslib.engine.data.device_images import DEVICE_SHARE, HOST_SHARE
from zslib.engine.profile import device as default_device
from zslib.engine.runner import run
from zslib.engine.store import (check_writable, device_name, result_path, results_dir as default_results,
                                write_json)
from zslib.engine.train.batches import loader_workers
from zslib.engine.train.precision import Precision
from zslib.engine.stats import format_interval, interval, paired

__all__ = ["STAGES", "Campaign", "run_campaign", "setting_to_test", "device_settings", "comparison_rows", "markdown_table",
           "campaign_configs", "estimate_minutes", "ASSUMED_RATES", "record_campaigns", "load_manifest",
           "tuning_to_use", "DEFAULT_TUNING", "plan_lines", "DATASET_IMAGES", "SEEN_IMAGES", "assumed_rate",
           "method_batches", "PEAK_MEMORY_GIB", "LOADER_RATE"]

#: The stages, in order, with what each does (``--help`` prints them).
STAGES = {
    "floor": "evaluate the untrained network (pooled ImageNet feature) on the unseen classes, per backbone",
    "tuning": "the fine-tuning recipe on the validation classes: untrained, head only ('off'), rates, LP-FT, "
              "BatchNorm, and the length (evaluated every few dozen steps); choose",
    "validation": "train every method's candidate settings and 'off' with the chosen recipe; choose",
    "test": "train the chosen setting, its same-loss baseline and the head alone on all seen classes; evaluate the "
            "unseen ones",
    "table": "unseen R@1 per method vs its same-loss baseline and vs the untrained floor, paired by seed",
}

#: Training throughput used for the time estimates of ``--help`` and ``--plan`` (images per second of
#: EfficientNet-Lite0 at 224 px in 16-bit precision). The data-centre rate is close to what one run alone measured on an
#: NVIDIA H200 with 16 CPU cores (2,560 images/s, ``benchmarks/bench_train.py``, 2026-11-26). The T4 was not measured:
#: its rate is NVIDIA's published training rate of EfficientNet-B0 on one V100 in mixed precision (1,401 images/s,
#: DeepLearningExamples, PyTorch EfficientNet README, 21.03 container) times the T4's share of the V100's memory
#: bandwidth (320 of 900 GB/s: depthwise convolutions are bound by it), about 500; with the device image path
#: (:mod:`zslib.engine.data.device_images`, on by default on CUDA) the GPU, not the VM's two CPU cores, is the limit.
ASSUMED_RATES = {"one recent data-centre GPU (A100, H100), 8+ CPU cores": 2500.0,
                 "a free Colab T4 (images cropped on the GPU)": 500.0}
ASSUMED_RATE_SOURCES = dict(zip(ASSUMED_RATES, (
    "about the 2,560 images/s measured for one run on an H200",
    "NVIDIA's published 1,401 images/s of EfficientNet-B0 training on one V100, scaled by the T4's memory "
    "bandwidth, 320 of 900 GB/s; the T4 itself not measured")))
#: The rate of a T4 fed by its VM's loader (2 CPU cores), for a dataset whose pixels fit neither the T4 nor pinned
#: host memory (:data:`PIXELS_GB`): the Flowers-102 loader with the image cache measured on two shared cores
#: (README's throughput table, ``--loader-only``).
LOADER_RATE = 103.0
#: Gigabytes of a dataset's pre-resized pixels at 256 px (what the device image path holds): Flowers-102 and SOP as
#: the image cache measured them; the others estimated from their image counts at Flowers-102's bytes per image.
PIXELS_GB = {"flowers102": 2.1, "cub200": 3.0, "cars196": 4.2, "sop": 25.0, "inshop": 13.5}
#: A free Colab T4: 15 GB of GPU memory and about 12.7 GB of VM memory; the device image path takes at most half of
#: either (:data:`zslib.engine.data.device_images.DEVICE_SHARE`, ``HOST_SHARE``).
T4_MEMORY_GB = {"gpu": 15.0, "host": 12.7}


def assumed_rate(where: str, dataset: str) -> tuple[float, str]:
    """``(images per second, what it assumes)`` of ``where`` (a key of :data:`ASSUMED_RATES`) for ``dataset``: on the
    T4, the device image path where the pixels fit (:data:`PIXELS_GB`), else its loader's :data:`LOADER_RATE`."""
    rate = ASSUMED_RATES[where]
    if "T4" not in where:
        return rate, ASSUMED_RATE_SOURCES[where]
    pixels = PIXELS_GB.get(dataset, 0.0)
    if pixels <= DEVICE_SHARE * T4_MEMORY_GB["gpu"]:
        return rate, f"{ASSUMED_RATE_SOURCES[where]}; the {pixels:g} GB of pixels on the GPU"
    if pixels <= HOST_SHARE * T4_MEMORY_GB["host"]:
        return rate, f"{ASSUMED_RATE_SOURCES[where]}; the {pixels:g} GB of pixels in pinned host memory"
    return LOADER_RATE, (f"the {pixels:g} GB of pixels fit neither the T4 nor the VM's memory: its two-core loader, "
                         f"{LOADER_RATE:g} images/s measured with the image cache")


#: Peak GPU memory (GiB) of one run of the Flowers-102 recipe (32 x 4 images of 224 px, EfficientNet-Lite0, 16-bit),
#: as measured on an NVIDIA H200 on 2026-11-26 (``gpu_peak_memory_gib`` of ``results/recorded/ft-*.json``, the pixels
#: on the device included): DeML at J = 8 15.9 (9.7 at J = 4, its largest candidate counts), every other method about
#: 5 (:data:`DEFAULT_PEAK_GIB`). It grows with the batch, the basis of :func:`method_batches`.
PEAK_MEMORY_GIB = {"deml": 15.9}
DEFAULT_PEAK_GIB = 5.0
#: The batch those peaks were measured at, and what a GPU keeps besides (CUDA context, allocator slack).
PEAK_BATCH, RESERVE_GIB = 128, 1.5


def method_batches(memory_gib: float, batch: tuple[int, int], methods) -> dict[str, int]:
    """``{method: batch_classes}`` for the methods whose estimated peak (:data:`PEAK_MEMORY_GIB`, scaled by the batch's
    images) does not fit ``memory_gib`` at ``batch``: P halved until it does (K kept: the pairs of a class)."""
    out = {}
    for m in methods:
        peak = PEAK_MEMORY_GIB.get(m, DEFAULT_PEAK_GIB)
        p, k = batch
        while p > 2 and peak * p * k / PEAK_BATCH + RESERVE_GIB > memory_gib:
            p //= 2
        if p != batch[0]:
            out[m] = p
    return out


@dataclass
class Campaign:
    """What :func:`run_campaign` did: the runs of every stage, the choices, the table rows."""

    dataset: str
    smoke: bool
    floor: dict = field(default_factory=dict)  # backbone -> [Result per test seed]
    validation: dict = field(default_factory=dict)  # method -> {candidate: [Result per seed]}
    choices: dict = field(default_factory=dict)  # method -> Choice
    test: dict = field(default_factory=dict)  # method -> {"off": [...], "method": [...], "setting": label, ...}
    skipped: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)
    device: dict = field(default_factory=dict)
    tuning: dict = field(default_factory=dict)  # tuning label -> [Result per validation seed]
    tuning_choice: object = None  # the Choice over the tuning candidates at each evaluated length
    tuning_setting: str | None = None  # the tuning key the methods ran with (see tuning_to_use)
    head: list = field(default_factory=list)  # "off" of the tuning stage at test: the head on the frozen network
    trained: int = 0  # runs trained (or resumed) by this call; the others were loaded
    paths: dict = field(default_factory=dict)


def device_settings(device, recipe: Recipe, smoke: bool = False, methods=(),
                    batch_classes: int | None = None) -> tuple[dict, dict]:
    """``(overrides, description)`` for the device: loader workers (the runs ask for 8; the loader starts at most
    one per CPU core, :func:`zslib.engine.train.batches.loader_workers`), the precision the trainer will use, the
    data path (on CUDA the device image path, :mod:`zslib.engine.data.device_images`: the same batches, made on the
    GPU, where the pixels fit; its hash is unchanged), and the batch: the recipe's P x K, halved (P) on a GPU with
    less than 12 GiB of memory, where 128 images of 224 px would not fit, and for each of ``methods`` whose
    estimated peak memory does not fit the GPU (:func:`method_batches`: DeML at J = 8 on a 15-GiB T4), listed in
    ``description["method_batches"]`` (``{method: P}``). ``batch_classes``: the P the caller asked for instead of
    the recipe's (``finetune --batch-classes``; not halved below 12 GiB, but still per method where it does not
    fit). A changed batch is a different experiment (its hash changes) and is said."""
    device = torch.device(device)
    overrides: dict = {}
    sizes = SMOKE if smoke else recipe.settings
    batch = (batch_classes or sizes["batch_classes"], sizes["batch_per_class"])
    memory, per_method = None, {}
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory / 2**30
        if memory < 12 and not smoke and batch_classes is None:
            overrides["batch_classes"] = max(2, batch[0] // 2)
            batch = (overrides["batch_classes"], batch[1])
        if not smoke:
            per_method = method_batches(memory, batch, methods)
            if recipe.settings.get("image_cache"):
                overrides["device_images"] = True
    requested = 0 if smoke else int(recipe.settings["num_workers"])
    amp = False if smoke else bool(recipe.settings["amp"])
    description = {"device": device_name(device), "gpu_memory_gib": None if memory is None else round(memory, 1),
                   "precision": Precision(device, amp).name, "loader_workers": loader_workers(requested),
                   "device_images": bool(overrides.get("device_images")),
                   "batch": f"{batch[0]} x {batch[1]}", "batch_changed": "batch_classes" in overrides,
                   "method_batches": per_method}
    return overrides, description


#: The tuning key the plan assumes before the tuning stage has chosen (``--plan``): the recipe's rate, full length.
DEFAULT_TUNING = "lr=1e-05"


def campaign_configs(dataset: str, *, smoke: bool = False, methods=None, overrides=None,
                     validation_seeds=None, test_seeds=None, tuning: str | None = None,
                     method_overrides: dict | None = None) -> dict:
    """Every config of the campaign: ``{"floor": {backbone: [...]}, "tuning": {label: [...]}, "validation":
    {method: {key: [...]}}, "test": {method: {key: [...]}}, "head": [...]}``. ``tuning``: the key chosen by the
    tuning stage (:func:`tuning_to_use`), whose recipe every method's runs use; before the choice (``None``)
    the recipe's rate at its full length (:data:`DEFAULT_TUNING`). A recipe without a tuning stage (the papers'
    datasets, their own settings) has empty ``"tuning"`` and ``"head"``. ``method_overrides``: ``{method: Config
    fields}`` set on that method's runs and its baseline's after ``overrides`` (e.g. a smaller batch for DeML on
    a 15-GiB GPU, :func:`device_settings`)."""
    methods = _every_method(methods)
    recipe = _recipe(dataset)
    vseeds, tseeds = _seeds(recipe, smoke, validation_seeds, test_seeds)
    skip = skipped_methods(recipe, methods)
    out = {"floor": {}, "tuning": {}, "validation": {}, "test": {}, "head": []}
    overrides = dict(overrides or {})
    if recipe.tune:
        out["tuning"] = tuning_configs(recipe, smoke=smoke, overrides=overrides, seeds=vseeds)
        probe = out["tuning"]["off"][0]
        key = tuning if tuning is not None else DEFAULT_TUNING
        chosen = tuning_overrides(key, recipe, probe.iterations, probe.lr)  # "off" keeps the base rate
        head = tuning_changes(recipe, probe.iterations, probe.lr)["off"]
        out["head"] = [named(probe.replace(validation_fraction=0.0, seed=s, eval_every=probe.iterations, **head),
                             "test").replace(name=f"ft-test-head-{probe.loss}-{probe.dataset}-s{s}") for s in tseeds]
        overrides = {**overrides, **chosen}
        # the floor: the tuning stage's untrained network on all seen classes (whatever recipe is chosen)
        untrained = out["tuning"][UNTRAINED][0].replace(validation_fraction=0.0)
        out["floor"][untrained.backbone] = [named(untrained.replace(seed=s), "test") for s in tseeds]
    for m in methods:
        if m in skip:
            continue
        plan = method_plan(m, recipe)
        own = {**overrides, **(method_overrides or {}).get(m, {})}
        val = candidate_configs(plan, recipe, smoke=smoke, overrides=own, stage="val")
        test = candidate_configs(plan, recipe, smoke=smoke, overrides=own, stage="test")
        out["validation"][m] = {k: [named(c.replace(seed=s), "val") for s in vseeds] for k, c in val.items()}
        out["test"][m] = {k: [named(c.replace(seed=s), "test") for s in tseeds] for k, c in test.items()}
        backbone = test["off"].backbone
        if backbone not in out["floor"]:
            if own != overrides:  # the floor is the network as it comes, whatever batch one method trains with
                test = candidate_configs(plan, recipe, smoke=smoke, overrides=overrides, stage="test")
            floor = floor_config(recipe, backbone, smoke=smoke, overrides=overrides, base=test["off"])
            out["floor"][backbone] = [named(floor.replace(seed=s), "test") for s in tseeds]
    return out


#: Images in each dataset (train and test splits together): a test run's evaluation embeds all of them once.
DATASET_IMAGES = {"flowers102": 8189, "cub200": 11788, "cars196": 16185, "sop": 120053, "inshop": 52712}
#: Images of the seen classes (the training split): a validation run's evaluation embeds these only, the training
#: and the validation classes (Flowers-102's classes 1-51; CUB's, Cars', SOP's and In-Shop's training splits).
SEEN_IMAGES = {"flowers102": 3493, "cub200": 5864, "cars196": 8054, "sop": 59551, "inshop": 25882}


def _evaluations(config) -> int:
    """How many times a run embeds its splits: every ``eval_every`` steps from step 0 when that is shorter
    than the run, and once at the end (an untrained network: once)."""
    if config.method == "pretrained":
        return 1
    return 1 + (config.iterations // config.eval_every if config.eval_every < config.iterations else 0)


def _embedded(config, smoke: bool = False) -> int:
    """Images one evaluation of ``config`` embeds: the seen classes' for a validation run, every image for a test
    run (the fabricated Flowers-102 of ``--smoke``: 14 classes of 5)."""
    if smoke:
        return 14 * 5 if not config.validation_fraction else 8 * 5
    every = DATASET_IMAGES.get(config.dataset, 10000)
    return SEEN_IMAGES.get(config.dataset, every // 2) if config.validation_fraction else every


def _planned(c: dict) -> list:
    """The runs a plan trains or evaluates, once each: floor, tuning, validation, head, and at test "off" and one
    candidate per method (the one to be chosen is unknown before training: the first is counted)."""
    configs = {x.hash: x for runs in c["floor"].values() for x in runs}
    configs.update({x.hash: x for runs in c["tuning"].values() for x in runs})
    configs.update({x.hash: x for runs in c["validation"].values() for seeds in runs.values() for x in seeds})
    configs.update({x.hash: x for x in c["head"]})
    for runs in c["test"].values():
        for x in runs["off"] + next(v for k, v in runs.items() if k != "off"):
            configs[x.hash] = x
    return list(configs.values())


#: How much faster than training an evaluation embeds images: one forward pass against a forward and a backward
#: pass (about three times the work), both in 16-bit precision on a GPU.
EVAL_SPEEDUP = 3.0


def estimate_minutes(dataset: str = "flowers102", images_per_second: float = 2500.0, methods=None, *,
                     smoke: bool = False, configs: dict | None = None, eval_speedup: float = EVAL_SPEEDUP) -> float:
    """Minutes the campaign (or the plan ``configs`` of :func:`campaign_configs`) would take at
    ``images_per_second`` of training (an assumption or a measured rate, not a measurement of this plan): every
    training image, plus every evaluation's images (:func:`_embedded`: a validation run embeds the seen classes
    only) at ``eval_speedup`` times that rate (the image sizes of the plan's configs, e.g. the smoke run's two
    steps, are what is counted)."""
    methods = _every_method(methods)
    c = configs if configs is not None else campaign_configs(dataset, methods=methods, smoke=smoke)
    runs = _planned(c)
    evaluated = sum(_evaluations(x) * _embedded(x, smoke) for x in runs)
    return (estimated_images(runs) + evaluated / eval_speedup) / images_per_second / 60.0


def plan_lines(dataset: str = "flowers102", *, smoke: bool = False, methods=None, validation_seeds=None,
               test_seeds=None) -> list[str]:
    """What ``python -m zslib finetune --plan`` prints: the runs of each stage and the time they would take at
    the rates of :data:`ASSUMED_RATES` (:func:`assumed_rate`), estimated from exactly these runs (smoke or not),
    with what each figure assumes."""
    methods = _every_method(methods)
    c = campaign_configs(dataset, smoke=smoke, methods=methods, validation_seeds=validation_seeds,
                         test_seeds=test_seeds)
    n_val = sum(len(x) for r in c["validation"].values() for x in r.values())
    n_tune = sum(len(x) for x in c["tuning"].values())
    vseeds, tseeds = _seeds(_recipe(dataset), smoke, validation_seeds, test_seeds)
    lines = [f"{dataset}{' (smoke: two steps, tiny images, CPU)' if smoke else ''}: "
             f"{sum(len(x) for x in c['floor'].values())} floor evaluations, {n_tune} tuning runs, {n_val} "
             f"validation runs, then 'off', one setting per method ({len(c['test'])} method(s)) and "
             f"{len(c['head'])} head-only runs at test; validation seeds {', '.join(map(str, vseeds))}, test seeds "
             f"{', '.join(map(str, tseeds))}"]
    if c["tuning"]:
        first = c["tuning"]["off"][0]
        lines.append(f"  tuning: {first.backbone}, {first.loss} baseline, up to {first.iterations} steps of "
                     f"{first.batch_classes} x {first.batch_per_class}, validation classes evaluated every "
                     f"{first.eval_every} steps; candidates: " + ", ".join(c["tuning"]))
    for m, runs in c["validation"].items():
        first = runs["off"][0]
        lines.append(f"  {m}: {first.backbone}, loss {first.loss}, {first.iterations} steps of "
                     f"{first.batch_classes} x {first.batch_per_class}; candidates: off, "
                     + ", ".join(k for k in runs if k != "off"))
    if c["tuning"]:
        lines.append(f"  (the methods' recipe shown is {DEFAULT_TUNING!r} at full length; the tuning stage chooses it)")
    for where in ASSUMED_RATES:
        rate, source = assumed_rate(where, dataset)
        minutes = estimate_minutes(dataset, rate, methods, smoke=smoke, configs=c)
        shown = f"{minutes:.0f} min" if minutes >= 1 else f"{60 * minutes:.0f} s"
        lines.append(f"  estimated (not measured) on {where}: about {shown} at {rate:,.0f} images/s of training "
                     f"({source})")
    smaller = method_batches(T4_MEMORY_GB["gpu"] * 1e9 / 2**30, (first.batch_classes, first.batch_per_class),
                             c["validation"]) if c["validation"] and not smoke else {}
    for m, p in smaller.items():
        lines.append(f"  on a T4 {m} trains at {p} x {first.batch_per_class} (its estimated peak memory at "
                     f"{first.batch_classes} x {first.batch_per_class} does not fit 15 GB); the estimate counts the "
                     "recipe's batch")
    lines.append(f"  the estimates assume: every training image at that rate; evaluations under autocast at "
                 f"{EVAL_SPEEDUP:g} times it, a validation run embedding the seen classes' images only, a test run "
                 "every image; no time for downloads, the image cache or a disconnect")
    return lines


def _every_method(methods) -> tuple:
    """``methods``, or (``None``) every paper's method, read from the registry when called (a paper registered
    later, e.g. by a test, is included; one removed is not)."""
    return tuple(method_plans()) if methods is None else tuple(methods)


def _recipe(dataset: str) -> Recipe:
    try:
        key = get_dataset_class(dataset).name
    except ValueError:
        key = str(dataset)
    if key not in RECIPES:
        raise ValueError(f"the campaign has no recipe for dataset {dataset!r}; use one of {sorted(RECIPES)}")
    return RECIPES[key]


def _seeds(recipe: Recipe, smoke: bool, validation_seeds, test_seeds):
    if smoke:
        return tuple(validation_seeds or SMOKE_SEEDS), tuple(test_seeds or SMOKE_SEEDS)
    return tuple(validation_seeds or recipe.validation_seeds), tuple(test_seeds or recipe.test_seeds)


class _Runner:
    """Runs configs one after another through :func:`zslib.engine.runner.run`, printing a line per run."""

    def __init__(self, results_dir: Path, device, out, progress, checkpoint_every, total: int):
        self.results_dir, self.device, self.out = results_dir, device, out
        self.progress, self.checkpoint_every = progress, checkpoint_every
        self.total, self.done, self.trained = total, 0, 0

    def __call__(self, config: Config, stage: str, split: str):
        stored = result_path(config, self.results_dir).exists()
        started = time.perf_counter()
        every = self.checkpoint_every or max(1, config.iterations // 10)
        result = run(config, self.results_dir, device=self.device, progress=self.progress, checkpoint_every=every)
        self.done += 1
        p = result.provenance
        how = "stored" if stored else f"{time.perf_counter() - started:.1f} s"
        if not stored:
            self.trained += 1
        rate = f", {p['images_per_second']:,.0f} img/s" if p.get("images_per_second") else ""
        wait = f", data wait {100 * p['data_wait_share']:.0f}%" if "data_wait_share" in p else ""
        self.out(f"[{stage} {self.done}/{self.total}] {config.name}: {split} R@1 "
                 f"{100 * result.metric('R@1', split):.1f} ({how}{rate}{wait})")
        return result


def run_campaign(dataset: str = "flowers102", *, smoke: bool = False, methods=None, results_dir=None,
                 device=None, validation_seeds=None, test_seeds=None, progress=False, out=print,
                 checkpoint_every: int | None = None, overrides: dict | None = None) -> Campaign:
    """Run (or resume, or load) the whole campaign on ``dataset`` and return what it found (see the module
    docstring). ``smoke``: every configuration for two steps on tiny images on the CPU (:data:`~zslib.campaign.plan.SMOKE`),
    stored apart (``<results>/smoke-campaign/``) so that they never mix with real runs. ``overrides``: Config
    fields set on every run (e.g. ``{"iterations": 100}`` for a shorter campaign; they change the runs' hashes)."""
    methods = _every_method(methods)
    recipe = _recipe(dataset)
    device = torch.device("cpu") if smoke and device is None else torch.device(device or default_device())
    directory = default_results(results_dir)
    if smoke:
        directory = directory / "smoke-campaign"
    check_writable(directory)
    dev_overrides, described = device_settings(device, recipe, smoke, methods,
                                               batch_classes=(overrides or {}).get("batch_classes"))
    overrides = {**dev_overrides, **(overrides or {})}
    k = overrides.get("batch_per_class", (SMOKE if smoke else recipe.settings)["batch_per_class"])
    per_method = {m: {"batch_classes": p} for m, p in described["method_batches"].items()}
    configs = campaign_configs(recipe.dataset, smoke=smoke, methods=methods, overrides=overrides,
                               validation_seeds=validation_seeds, test_seeds=test_seeds, method_overrides=per_method)
    camp = Campaign(recipe.dataset, smoke, skipped=skipped_methods(recipe, methods), device=described)
    feed = ("images cropped on the device (where they fit)" if described["device_images"]
            else f"{described['loader_workers']} loader worker(s)")
    out(f"fine-tuning campaign on {recipe.dataset}{' (smoke: two steps, tiny images, CPU)' if smoke else ''}: "
        f"{described['device']}, {described['precision']}, batch {described['batch']}, {feed}; results in "
        f"{directory}")
    if described["batch_changed"]:
        out("  the GPU has less than 12 GiB: the batch is halved (a different experiment from the recipe's)")
    for m, p in described["method_batches"].items():
        peak = PEAK_MEMORY_GIB.get(m, DEFAULT_PEAK_GIB)
        out(f"  {m}: about {peak:g} GiB at {PEAK_BATCH} images (measured on an H200) does not fit this GPU's "
            f"{described['gpu_memory_gib']} GiB: its runs and its baseline train at {p} x {k} (a different "
            "experiment from the recipe's)")
    for m, why in camp.skipped.items():
        out(f"  {m} does not run on {recipe.dataset}: {why}")

    n_val = sum(len(s) for runs in configs["validation"].values() for s in runs.values())
    n_test = sum(len(runs["off"]) + len(next(iter(v for k, v in runs.items() if k != "off")))
                 for runs in configs["test"].values()) + len(configs["head"])
    n_floor = sum(len(s) for s in configs["floor"].values())
    n_tune = sum(len(s) for s in configs["tuning"].values())
    runner = _Runner(directory, device, out, progress, checkpoint_every, n_floor + n_tune + n_val + n_test)

    out(f"stage 1/5 floor: {STAGES['floor']}")
    for backbone, seeds in configs["floor"].items():
        camp.floor[backbone] = [runner(c, "floor", "unseen") for c in seeds]

    out(f"stage 2/5 tuning: {STAGES['tuning']}")
    if configs["tuning"]:
        camp.tuning = {k: [runner(c, "tuning", "val") for c in seeds] for k, seeds in configs["tuning"].items()}
        camp.tuning_choice = choose(length_candidates(camp.tuning), off="off", metric="R@1", split="val")
        camp.tuning_setting = tuning_to_use(camp.tuning_choice)
        out("  " + camp.tuning_choice.sentence())
        if camp.tuning_setting != camp.tuning_choice.chosen:
            out(f"  the methods still fine-tune, at the leading fine-tuning recipe {camp.tuning_setting!r} "
                "(an ablation of the recipe)")
        configs = campaign_configs(recipe.dataset, smoke=smoke, methods=methods, overrides=overrides,
                                   validation_seeds=validation_seeds, test_seeds=test_seeds,
                                   tuning=camp.tuning_setting, method_overrides=per_method)
    else:
        out(f"  {recipe.dataset} runs its papers' settings: no tuning stage")

    out(f"stage 3/5 validation: {STAGES['validation']}")
    for m, candidates in configs["validation"].items():
        camp.validation[m] = {k: [runner(c, "validation", "val") for c in seeds] for k, seeds in candidates.items()}
        camp.choices[m] = choose(camp.validation[m], off="off", metric="R@1", split="val")
        out(f"  {m}: " + camp.choices[m].sentence())

    out(f"stage 4/5 test: {STAGES['test']}")
    camp.head = [runner(c, "test", "unseen") for c in configs["head"]]
    for m, candidates in configs["test"].items():
        choice = camp.choices[m]
        setting = setting_to_test(choice)
        camp.test[m] = {"setting": setting, "ablation": choice.off_won,
                        "off": [runner(c, "test", "unseen") for c in candidates["off"]],
                        "method": [runner(c, "test", "unseen") for c in candidates[setting]]}

    out(f"stage 5/5 table: {STAGES['table']}")
    camp.trained = runner.trained
    camp.rows = comparison_rows(camp)
    table = markdown_table(camp.rows)
    out(table)
    camp.paths = _write(camp, directory, table)
    out(f"wrote {camp.paths['json']} and {camp.paths['markdown']} ({runner.trained} run(s) trained by this call, "
        f"{runner.done - runner.trained} loaded)")
    return camp


def tuning_to_use(choice) -> str:
    """The tuning key the methods run with: the chosen fine-tuning recipe, or, when the rule kept "off" or the
    untrained network won, the fine-tuning candidate with the best validation mean (the methods' rows then stand
    on a recipe that validation did not choose, and say so)."""
    if choice.chosen not in ("off", UNTRAINED):
        return choice.chosen
    others = {k: v for k, v in choice.means.items() if k not in ("off", UNTRAINED)}
    return max(others, key=lambda k: others[k].mean)


def comparison_rows(camp: Campaign) -> list[dict]:
    """One row per baseline loss and per method: unseen R@1 (mean and 95% interval over the test seeds), the
    paired change against the same-loss baseline and against the untrained floor of the same backbone."""
    users: dict[str, list[str]] = {}  # a baseline's config hash -> the methods it is "off" for
    for m, t in camp.test.items():
        users.setdefault(t["off"][0].config.hash, []).append(m)
    rows = [_row(f"untrained floor ({backbone})", floor[0].config, "-", "-", floor, None, None)
            for backbone, floor in camp.floor.items()]
    if camp.head:  # no fine-tuning: the tuning stage's "off", a head trained on the frozen network
        floor = camp.floor.get(camp.head[0].config.backbone)
        rows.append(_row("no fine-tuning: head on the frozen network", camp.head[0].config, "off", "-", camp.head,
                         None, floor))
    for m, t in camp.test.items():
        off, runs = t["off"], t["method"]
        floor = camp.floor[off[0].config.backbone]
        shared = users.pop(off[0].config.hash, None)
        if shared is not None:  # a baseline shared by several methods appears once, before the first of them
            rows.append(_row(f"baseline: {off[0].config.loss} (off for {', '.join(shared)})", off[0].config, "-", "-",
                             off, None, floor))
        status = "ablation ('off' chosen on validation)" if t["ablation"] else "chosen on validation"
        rows.append(_row(m, runs[0].config, t["setting"], status, runs, off, floor))
    return rows


def _row(label, config, setting, status, runs, off, floor) -> dict:
    row = {"row": label, "loss": config.loss if config.method != "pretrained" else "-", "backbone": config.backbone,
           "setting": setting, "status": status, "seeds": sorted(r.config.seed for r in runs),
           "R@1": tuple(interval([r.metric("R@1", "unseen") for r in runs]))[:3],
           "vs baseline": None, "vs floor": None,
           "hardware": sorted({hardware(r) for r in runs}), "stability": stability_label(runs)}
    for name, other in (("vs baseline", off), ("vs floor", floor)):
        if other is not None:
            p = paired(other, runs, "R@1", "unseen")
            row[name] = {"diff": tuple(p.diff)[:3], "verdict": p.verdict}
    return row


def markdown_table(rows: list[dict]) -> str:
    """The comparison as a Markdown table (percentage points; intervals are 95% Student-t over the seeds)."""
    head = ("| row | loss | setting | status | unseen R@1 | vs same-loss baseline | vs untrained floor |\n"
            "| --- | --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for r in rows:
        def diff(d):
            return "-" if d is None else f"{format_interval(d['diff'], signed=True)} {d['verdict']}"
        lines.append(f"| {r['row']} | {r['loss']} | {r['setting']} | {r['status']} | {format_interval(r['R@1'])} | "
                     f"{diff(r['vs baseline'])} | {diff(r['vs floor'])} |")
    return "\n".join(lines)


def _write(camp: Campaign, directory: Path, table: str) -> dict:
    folder = directory / "campaign"
    stem = camp.dataset

    def files(runs):
        return [r.path.name if r.path is not None else None for r in runs]

    manifest = {
        "format": "zslib-campaign", "dataset": camp.dataset, "smoke": camp.smoke, "device": camp.device,
        "skipped": camp.skipped,
        "floor": {b: files(rs) for b, rs in camp.floor.items()},
        "validation": {m: {k: files(rs) for k, rs in c.items()} for m, c in camp.validation.items()},
        "choices": {m: {"chosen": c.chosen, "leader": c.leader, "sentence": c.sentence()} for m, c in camp.choices.items()},
        "tuning": {k: files(rs) for k, rs in camp.tuning.items()}, "head": files(camp.head),
        "tuning_choice": None if camp.tuning_choice is None else {
            "chosen": camp.tuning_choice.chosen, "leader": camp.tuning_choice.leader,
            "sentence": camp.tuning_choice.sentence(), "used": camp.tuning_setting},
        "test": {m: {"setting": t["setting"], "ablation": t["ablation"], "off": files(t["off"]),
                     "method": files(t["method"])} for m, t in camp.test.items()},
        "rows": camp.rows}
    json_path = write_json(folder / f"{stem}.json", manifest)
    md = folder / f"{stem}.md"
    md.write_text(table + "\n")
    return {"json": json_path, "markdown": md}


def record_campaigns(results_dir=None, dry_run: bool = False) -> list[Path]:
    """Copy the campaigns' manifests and tables (``<results>/campaign/*.json``, ``*.md``) into
    ``<results>/recorded/campaign/`` beside the recorded runs (``python -m zslib record --profile full`` does it);
    returns the copied paths. Smoke campaigns (``<results>/smoke-campaign/``) are never copied."""
    root = default_results(results_dir)
    out = []
    for path in sorted((root / "campaign").glob("*")):
        if path.suffix in (".json", ".md") and not load_manifest(path.with_suffix(".json"))["smoke"]:
            target = root / "recorded" / "campaign" / path.name
            out.append(target)
            if not dry_run:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return out


def load_manifest(path) -> dict:
    """A campaign's ``campaign/<dataset>.json``."""
    d = json.loads(Path(path).read_text())
    if d.get("format") != "zslib-campaign":
        raise ValueError(f"{path} is not a campaign manifest (no 'format': 'zslib-campaign')")
    return d
