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
import time
from dataclasses import dataclass, field
from pathlib import Path

from zslib.campaign.records import hardware
from zslib.campaign.plan import (METHODS, RECIPES, SMOKE_SEEDS, UNTRAINED, Recipe, candidate_configs, estimated_images,
                                 floor_config, length_candidates, method_plan, named, skipped_methods, tuning_changes,
                                 tuning_configs, tuning_overrides)
from zslib.engine.choice import choose
from zslib.engine.stability import stability_label
from zslib.engine.config import Config
from zslib.engine.stats import format_interval, interval, paired

__all__ = ["STAGES", "Campaign", "run_campaign", "setting_to_test", "device_settings", "comparison_rows", "markdown_table",
           "campaign_configs", "estimate_minutes", "ASSUMED_RATES", "record_campaigns", "load_manifest",
           "tuning_to_use", "DEFAULT_TUNING", "plan_lines", "DATASET_IMAGES"]

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
#: EfficientNet-Lite0 in 16-bit precision with the image cache). The data-centre rate is close to what one run alone
#: measured on an NVIDIA H200 with 16 CPU cores (2,560 images/s, ``benchmarks/bench_train.py``, 2026-11-26). A
#: Colab T4 has two CPU cores to feed it: its rate is the Flowers-102 loader's with the image cache measured on
#: two shared cores (103 images/s, README's throughput table, ``--loader-only``), the limit if the T4 itself is
#: faster; the T4 was not measured.
ASSUMED_RATES = {"one recent data-centre GPU (A100, H100), 8+ CPU cores": 2500.0,
                 "a free Colab T4 (2 CPU cores feed it; the loader is the limit)": 103.0}
ASSUMED_RATE_SOURCES = dict(zip(ASSUMED_RATES, (
    "about the 2,560 images/s measured for one run on an H200",
    "the two-core loader rate measured with the image cache; the T4 itself not measured")))


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


def device_settings(device, recipe: Recipe, smoke: bool = False) -> tuple[dict, dict]:
    """``(overrides, description)`` for the device: loader workers (the runs ask for 8; the loader starts at most
    one per CPU core, :func:`zslib.engine.train.batches.loader_workers`), the precision the trainer will use, and
    the batch: the recipe's P x K, halved (P) on a GPU with less than 12 GiB of memory, where 128 images of
    224 px would not fit. A changed batch is a different experiment (its hash changes) and is said."""
    import torch

    from zslib.engine.store import device_name
    from zslib.engine.train.batches import loader_workers
    from zslib.engine.train.precision import Precision

    device = torch.device(device)
    overrides: dict = {}
    batch = (recipe.settings["batch_classes"], recipe.settings["batch_per_class"])
    memory = None
    if device.type == "cuda":
        memory = torch.cuda.get_device_properties(device).total_memory / 2**30
        if memory < 12 and not smoke:
            overrides["batch_classes"] = max(2, batch[0] // 2)
            batch = (overrides["batch_classes"], batch[1])
    requested = 0 if smoke else int(recipe.settings["num_workers"])
    amp = False if smoke else bool(recipe.settings["amp"])
    description = {"device": device_name(device), "gpu_memory_gib": None if memory is None else round(memory, 1),
                   "precision": Precision(device, amp).name, "loader_workers": loader_workers(requested),
                   "batch": f"{batch[0]} x {batch[1]}", "batch_changed": bool(overrides)}
    return overrides, description


#: The tuning key the plan assumes before the tuning stage has chosen (``--plan``): the recipe's rate, full length.
DEFAULT_TUNING = "lr=1e-05"


def campaign_configs(dataset: str, *, smoke: bool = False, methods=METHODS, overrides=None,
                     validation_seeds=None, test_seeds=None, tuning: str | None = None) -> dict:
    """Every config of the campaign: ``{"floor": {backbone: [...]}, "tuning": {label: [...]}, "validation":
    {method: {key: [...]}}, "test": {method: {key: [...]}}, "head": [...]}``. ``tuning``: the key chosen by the
    tuning stage (:func:`tuning_to_use`), whose recipe every method's runs use; before the choice (``None``)
    the recipe's rate at its full length (:data:`DEFAULT_TUNING`). A recipe without a tuning stage (the papers'
    datasets, their own settings) has empty ``"tuning"`` and ``"head"``."""
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
        val = candidate_configs(plan, recipe, smoke=smoke, overrides=overrides, stage="val")
        test = candidate_configs(plan, recipe, smoke=smoke, overrides=overrides, stage="test")
        out["validation"][m] = {k: [named(c.replace(seed=s), "val") for s in vseeds] for k, c in val.items()}
        out["test"][m] = {k: [named(c.replace(seed=s), "test") for s in tseeds] for k, c in test.items()}
        backbone = test["off"].backbone
        if backbone not in out["floor"]:
            floor = floor_config(recipe, backbone, smoke=smoke, overrides=overrides, base=test["off"])
            out["floor"][backbone] = [named(floor.replace(seed=s), "test") for s in tseeds]
    return out


#: Images in each dataset (train and test splits together): every evaluation embeds all of them once.
DATASET_IMAGES = {"flowers102": 8189, "cub200": 11788, "cars196": 16185, "sop": 120053, "inshop": 52712}


def _evaluations(config) -> int:
    """How many times a run embeds the whole dataset: every ``eval_every`` steps from step 0 when that is shorter
    than the run, and once at the end (an untrained network: once)."""
    if config.method == "pretrained":
        return 1
    return 1 + (config.iterations // config.eval_every if config.eval_every < config.iterations else 0)


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


def estimate_minutes(dataset: str = "flowers102", images_per_second: float = 2500.0, methods=METHODS, *,
                     smoke: bool = False, configs: dict | None = None, eval_speedup: float = 3.0) -> float:
    """Minutes the campaign (or the plan ``configs`` of :func:`campaign_configs`) would take at
    ``images_per_second`` of training (an assumption or a measured rate, not a measurement of this plan): every
    training image, plus every evaluation's images at ``eval_speedup`` times that rate (a forward pass only;
    the image sizes of the plan's configs, e.g. the smoke run's two steps, are what is counted)."""
    c = configs if configs is not None else campaign_configs(dataset, methods=methods, smoke=smoke)
    runs = _planned(c)
    images = DATASET_IMAGES.get(runs[0].dataset, 10000) if runs else 0
    if smoke:
        images = 14 * 5  # the fabricated Flowers-102 (zslib.campaign.fabricate)
    evaluated = sum(_evaluations(x) for x in runs) * images
    return (estimated_images(runs) + evaluated / eval_speedup) / images_per_second / 60.0


def plan_lines(dataset: str = "flowers102", *, smoke: bool = False, methods=METHODS, validation_seeds=None,
               test_seeds=None) -> list[str]:
    """What ``python -m zslib finetune --plan`` prints: the runs of each stage and the time they would take at
    the rates of :data:`ASSUMED_RATES`, estimated from exactly these runs (smoke or not)."""
    c = campaign_configs(dataset, smoke=smoke, methods=methods, validation_seeds=validation_seeds,
                         test_seeds=test_seeds)
    n_val = sum(len(x) for r in c["validation"].values() for x in r.values())
    n_tune = sum(len(x) for x in c["tuning"].values())
    lines = [f"{dataset}{' (smoke: two steps, tiny images, CPU)' if smoke else ''}: "
             f"{sum(len(x) for x in c['floor'].values())} floor evaluations, {n_tune} tuning runs, {n_val} "
             f"validation runs, then 'off', one setting per method ({len(c['test'])} method(s)) and "
             f"{len(c['head'])} head-only runs at test"]
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
    for where, rate in ASSUMED_RATES.items():
        minutes = estimate_minutes(dataset, rate, methods, smoke=smoke, configs=c)
        shown = f"{minutes:.0f} min" if minutes >= 1 else f"{60 * minutes:.0f} s"
        lines.append(f"  estimated (not measured) on {where}: about {shown} at {rate:,.0f} images/s of training "
                     f"({ASSUMED_RATE_SOURCES[where]})")
    return lines


def _recipe(dataset: str) -> Recipe:
    from zslib.engine.data.datasets import get_dataset_class

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
        from zslib.engine.runner import run
        from zslib.engine.store import result_path

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


def run_campaign(dataset: str = "flowers102", *, smoke: bool = False, methods=METHODS, results_dir=None,
                 device=None, validation_seeds=None, test_seeds=None, progress=False, out=print,
                 checkpoint_every: int | None = None, overrides: dict | None = None) -> Campaign:
    """Run (or resume, or load) the whole campaign on ``dataset`` and return what it found (see the module
    docstring). ``smoke``: every configuration for two steps on tiny images on the CPU (:data:`~zslib.campaign.plan.SMOKE`),
    stored apart (``<results>/smoke-campaign/``) so that they never mix with real runs. ``overrides``: Config
    fields set on every run (e.g. ``{"iterations": 100}`` for a shorter campaign; they change the runs' hashes)."""
    import torch

    from zslib.engine.profile import device as default_device
    from zslib.engine.store import check_writable, results_dir as default_results

    recipe = _recipe(dataset)
    device = torch.device("cpu") if smoke and device is None else torch.device(device or default_device())
    directory = default_results(results_dir)
    if smoke:
        directory = directory / "smoke-campaign"
    check_writable(directory)
    dev_overrides, described = device_settings(device, recipe, smoke)
    overrides = {**dev_overrides, **(overrides or {})}
    configs = campaign_configs(recipe.dataset, smoke=smoke, methods=methods, overrides=overrides,
                               validation_seeds=validation_seeds, test_seeds=test_seeds)
    camp = Campaign(recipe.dataset, smoke, skipped=skipped_methods(recipe, methods), device=described)
    out(f"fine-tuning campaign on {recipe.dataset}{' (smoke: two steps, tiny images, CPU)' if smoke else ''}: "
        f"{described['device']}, {described['precision']}, batch {described['batch']}, "
        f"{described['loader_workers']} loader worker(s); results in {directory}")
    if described["batch_changed"]:
        out("  the GPU has less than 12 GiB: the batch is halved (a different experiment from the recipe's)")
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
                                   tuning=camp.tuning_setting)
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


def setting_to_test(choice) -> str:
    """The setting the test stage trains beside "off": the chosen one, or, when the rule kept "off", the best
    candidate other than "off" by validation mean (its row is then labelled an ablation)."""
    if not choice.off_won:
        return choice.chosen
    others = {k: v for k, v in choice.means.items() if k != choice.off}
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
    from zslib.engine.store import write_json

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
    import shutil

    from zslib.engine.store import results_dir as default_results

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
