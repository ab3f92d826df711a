"""The recorded fine-tuning campaign as a chapter shows it: a table and sentences rebuilt from the run files.

``python -m zslib record --profile full`` copies a campaign's manifest (``campaign/<dataset>.json``: which run
file is which seed of which stage) beside the recorded runs. :func:`recorded_campaign` does not trust the
manifest's numbers: it reads every run file it names through :func:`zslib.engine.store.load_result` (which refuses
a file whose contents no longer match its config hash) and recomputes the rows with the campaign's own
:func:`zslib.campaign.run.comparison_rows`. :func:`campaign_frame` and :func:`campaign_sentences` are what the
comparison chapter calls; every number in them comes from those rows, every label of hardware from the runs'
provenance (:func:`zslib.campaign.records.hardware`).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd

from zslib.analysis.compare import FINETUNED_CPU, mean_r1, regime_config
from zslib.analysis.verdict import change_words, paired_phrase
from zslib.campaign.plan import RECIPES, TUNING_LOSS, length_candidates, method_plans, tuning_configs
from zslib.campaign.records import CPU_METHODS_MANIFEST, hardware, open_manifest, recorded_cpu_methods
from zslib.campaign.run import (Campaign, campaign_configs, comparison_rows, load_manifest, tuning_to_use)
from zslib.analysis.entry import Claim
from zslib.engine.choice import choose
from zslib.engine.models import build_label
from zslib.engine.models.adapted import entry_stage
from zslib.engine.registry import PAPERS
from zslib.engine.stability import stability_label
from zslib.engine.stats import format_interval, interval, paired, verdict
from zslib.engine.store import load_result, recorded_dir
from zslib.present.base import Section
from zslib.reported import reported_value

__all__ = ["recorded_campaign", "campaign_frame", "campaign_sentences", "campaign_recipe_note", "regime_differences",
           "session_data_line", "recorded_cpu_proof", "cpu_proof_frame", "cpu_proof_sentences", "ASPECTS",
           "CPU_MANIFEST", "CPU_METHODS_MANIFEST", "BUILD_SWITCH_POINTS", "recorded_cpu_methods", "build_floors",
           "build_floor_sentence", "finetuned_section", "cpu_campaign_note", "finetuning_sentences"]



def _names() -> dict[str, str]:
    """``{method: name}``: how the book writes each paper's method (:data:`zslib.engine.registry.PAPERS`)."""
    return {paper.method: paper.name for paper in PAPERS.values()}


def recorded_campaign(dataset: str = "flowers102", directory=None):
    """The recorded campaign on ``dataset`` as a :class:`zslib.campaign.run.Campaign` (every run loaded and checked,
    choices and rows recomputed from the runs), or ``None`` when none is recorded."""

    folder = recorded_dir(directory)
    path = folder / "campaign" / f"{dataset}.json"
    if not path.is_file():
        return None
    manifest = load_manifest(path)
    if manifest["smoke"]:
        raise ValueError(f"{path} is a smoke campaign (two steps on tiny images); it is never recorded")

    def runs(names):
        return [load_result(folder / name) for name in names]

    camp = Campaign(manifest["dataset"], False, device=manifest["device"], skipped=manifest.get("skipped", {}))
    camp.floor = {b: runs(names) for b, names in manifest["floor"].items()}
    camp.test = {m: {"setting": t["setting"], "ablation": t["ablation"], "off": runs(t["off"]),
                     "method": runs(t["method"])} for m, t in manifest["test"].items()}
    camp.validation = {m: {k: runs(names) for k, names in c.items()} for m, c in manifest["validation"].items()}
    camp.choices = {m: choose(c, off="off", metric="R@1", split="val") for m, c in camp.validation.items()}
    if manifest.get("tuning"):  # campaigns with a tuning stage (the fine-tuning recipe chosen on validation classes)

        camp.tuning = {k: runs(names) for k, names in manifest["tuning"].items()}
        camp.tuning_choice = choose(length_candidates(camp.tuning), off="off", metric="R@1", split="val")
        camp.tuning_setting = tuning_to_use(camp.tuning_choice)
        camp.head = runs(manifest.get("head", []))
    camp.rows = comparison_rows(camp)
    camp.paths = {"json": path, "session": _session_file(folder, manifest["dataset"])}
    return camp


def _session_file(folder: Path, dataset: str) -> Path | None:
    path = folder / "campaign" / f"{dataset}-session.md"
    return path if path.is_file() else None


def campaign_frame(camp):
    """One row per floor, baseline and method: unseen Recall@1 and the paired changes (percentage points, 95%
    intervals over the test seeds), the seeds and the hardware the runs name."""
    def diff(d):
        return "-" if d is None else f"{format_interval(d['diff'], signed=True)} ({d['verdict']})"

    if camp is None:
        return pd.DataFrame()
    return pd.DataFrame([{
        "row": r["row"], "setting": r["setting"], "status": r["status"] if r["status"] != "-" else "",
        "test seeds": ", ".join(str(s) for s in r["seeds"]), "unseen R@1": format_interval(r["R@1"]),
        "vs same-loss baseline": diff(r["vs baseline"]), "vs untrained network": diff(r["vs floor"]),
        "stability": r.get("stability", ""), "network": build_label(r["backbone"]),
        "hardware": "; ".join(r["hardware"])} for r in camp.rows]).set_index("row")


def _points(triple, signed: bool = True) -> str:

    return format_interval(triple, signed=signed)


def campaign_sentences(camp) -> str:
    """What the recorded campaign found, in sentences generated from its rows and recorded choices, in the words of
    :mod:`zslib.analysis.verdict`: "clearly" only for a row the rules chose (the fine-tuning recipe on validation
    classes, then the method's setting), "an ablation" for a row they did not, "unstable" for a row with broken
    seeds."""

    if camp is None:
        return ("No fine-tuned campaign is recorded: `python -m zslib finetune` on a GPU trains one, and "
                "`python -m zslib record --profile full` records it.")
    rows = {r["row"]: r for r in camp.rows}
    floor = next(r for name, r in rows.items() if name.startswith("untrained floor"))
    hardware = sorted({h for r in camp.rows if r is not floor for h in r["hardware"]})
    out = [f"Fine-tuned end to end on {' and '.join(hardware)} and tested on {len(floor['seeds'])} seeds, against "
           f"the untrained network's {_points(floor['R@1'], signed=False)} unseen Recall@1."]
    choice = getattr(camp, "tuning_choice", None)
    # whether the recipe's rule chose to fine-tune (then the fine-tuned rows are chosen) or kept the head alone; a
    # campaign without a tuning stage has no rule behind its recipe, so its rows against the untrained network are
    # never "clearly" anything
    fine_tuned_chosen = choice is not None and not choice.off_won and camp.tuning_setting == choice.chosen
    if choice is not None:
        out.append(f"The fine-tuning recipe, chosen on validation classes: {choice.sentence()}")
        if camp.tuning_setting != choice.chosen:
            out.append(f"The methods below were still fine-tuned, at the leading fine-tuning recipe "
                       f"{camp.tuning_setting}, as an ablation of the recipe.")
    else:
        out.append("No rule chose this fine-tuning recipe (the campaign had no tuning stage on validation classes), "
                   "so its rows against the untrained network are described, and none is called clear.")

    def against(r, key, words, chosen):
        d = r[key]
        return paired_phrase(d["diff"], d["verdict"], chosen, words, r.get("stability", ""))

    for name, r in rows.items():
        if name.startswith("no fine-tuning"):
            head_chosen = choice is not None and choice.off_won
            out.append(f"A head trained on the frozen network reaches {_points(r['R@1'], signed=False)}, "
                       f"{against(r, 'vs floor', 'the untrained network', head_chosen)}.")
        if name.startswith("baseline:"):
            tag = ("" if fine_tuned_chosen else " (a recipe no rule chose)" if choice is None
                   else " (an ablation of the recipe)")
            out.append(f"The {r['loss']} loss alone, training every layer{tag}, reaches "
                       f"{_points(r['R@1'], signed=False)}, "
                       f"{against(r, 'vs floor', 'the untrained network', fine_tuned_chosen)}.")
    for m in method_plans():
        if m not in rows:
            continue
        r, method_choice = rows[m], camp.choices[m]
        # the method's setting is chosen by its rule within the recipe (unless the recipe itself is an ablation)
        chosen = (choice is None or fine_tuned_chosen) and not method_choice.off_won
        change = against(r, "vs baseline", "its same-loss baseline", chosen)
        if method_choice.off_won:
            out.append(f"{_names()[m]}: {method_choice.sentence()} Trained anyway at {r['setting']} as a labelled "
                       f"ablation, it reaches {_points(r['R@1'], signed=False)}, {change}.")
        else:
            out.append(f"{_names()[m]}: {method_choice.sentence()} On the unseen classes it reaches "
                       f"{_points(r['R@1'], signed=False)}, {change}.")
    missing = [m for m in method_plans() if m not in rows]
    if missing:
        out.append(f"No fine-tuned runs of {', '.join(_names()[m] for m in missing)} are recorded yet: `python -m zslib "
                   f"finetune --methods {','.join(missing)}` on a GPU trains them.")
    if camp.paths.get("session") is not None:
        out.append(f"How these runs were made (hardware, the copy of the images, the seeds) is recorded in "
                   f"`results/recorded/campaign/{camp.paths['session'].name}`.")
    return " ".join(out)


# ---- what differs between the regimes, generated from the configs ---------------------------------------------------

#: The aspects :func:`regime_differences` compares, in order.
ASPECTS = ("network", "images", "augmentation", "BatchNorm", "batch", "steps", "rates", "losses")


def _variants(values) -> str:
    """One value, or the most frequent with the others as candidates: ``"a (candidates: b, c)"``."""

    counts = Counter(values)
    ordered = [v for v, _ in counts.most_common()]
    if len(ordered) == 1:
        return str(ordered[0])
    return f"{ordered[0]} (candidates: {'; '.join(str(v) for v in ordered[1:])})"


def _describe(configs, losses: dict[str, str]) -> dict:
    """The aspects of :data:`ASPECTS` for one regime, from its configs (a value that varies between them is given
    with its variants) and ``losses`` ``{method: loss}``."""

    cs = list(configs)
    c0 = cs[0]
    trained = [c for c in cs if c.method != "pretrained"] or cs
    if c0.train_stages:
        what = f"cached map {entry_stage(c0.backbone, c0.train_stages)}; trained: {', '.join(c0.train_stages)}"
        aug = "two views, the centre crop and its mirror image, drawn per step"
        bn = _variants([f"{'ImageNet statistics frozen' if c.train_bn == 'frozen' else 'batch statistics'} "
                        "(trained stages)" for c in trained])
    elif c0.feature_stages:
        what = f"frozen; cached maps {', '.join(c0.feature_stages)}; a head trains on them"
        aug = "none (the cached centre crop)"
        bn = "ImageNet statistics (nothing of the network trains)"
    else:
        what = "the whole network trains"
        aug = "random crop of the resized image and horizontal flip, per image and step"
        bn = _variants(["ImageNet statistics frozen" if c.freeze_bn else "batch statistics, running statistics updated"
                        for c in trained])
    by_loss: dict[str, list[str]] = {}
    for m, loss in losses.items():
        by_loss.setdefault(loss, []).append(_names().get(m, m))
    return {"network": f"{build_label(c0)} ({what})", "images": _variants([f"{c.image_size}-px crop of "
                                                                          f"{c.resize_size} px" for c in cs]),
            "augmentation": aug, "BatchNorm": bn,
            "batch": _variants([f"{c.batch_classes} x {c.batch_per_class}" for c in trained]),
            "steps": _variants([c.iterations for c in trained]), "rates": _variants([_rates(c) for c in trained]),
            "losses": "; ".join(f"{', '.join(ms)}: {loss}" for loss, ms in by_loss.items())}


def _rates(c) -> str:
    head = c.lr * c.new_layer_mult
    if c.feature_stages and not c.train_stages:
        return f"head {head:.0e}"
    schedule = c.schedule if isinstance(c.schedule, dict) else {"name": c.schedule or "constant"}
    if schedule.get("name") == "head_first" and schedule.get("head_steps", 0) >= c.iterations:
        return f"head {head:.0e}, backbone 0 (not fine-tuned)"
    text = f"backbone {c.lr:.0e}, head {head:.0e}"
    if schedule.get("name") == "head_first":
        text += f", the head alone for the first {schedule['head_steps']} steps"
    return text


def session_data_line(camp) -> str | None:
    """The recorded campaign's words about the images it saw (the ``**data**`` line of its session file), or None."""
    path = None if camp is None else camp.paths.get("session")
    if path is None:
        return None

    text = " ".join(Path(path).read_text().split())
    match = re.search(r"\*\*data\*\*:(.*?)(?= - \*\*|$)", text)
    if not match:
        return None
    quality = re.search(r"(\d+) px on the short side, JPEG quality (\d+)", match.group(1))
    return f"a {quality.group(1)}-px copy at JPEG quality {quality.group(2)}" if quality else match.group(1).strip()


def regime_differences(camp=None, cpu=None):
    """Every difference between the regimes, one row per aspect (:data:`ASPECTS`), one column per regime: frozen
    and adapted (the ``real`` profile's configs, :func:`zslib.analysis.compare.regime_config`, and each method's
    loss there), the fine-tuned recipe of :mod:`zslib.campaign.plan` (Flowers-102; its tuning candidates listed),
    the recorded fine-tuned campaign ``camp`` (its run files' configs, and the images its session file names) and
    the fine-tuned runs on the CPU ``cpu`` (:func:`recorded_cpu_proof`). Aspects on which no two regimes differ are
    left out."""
    book = {paper.method: paper.comparison.loss for paper in PAPERS.values() if paper.comparison is not None}
    cols = {"frozen": _describe([regime_config("real frozen")], book),
            "adapted": _describe([regime_config("real adapted")], book)}
    plan = campaign_configs("flowers102")
    tuning = [c for runs in tuning_configs(RECIPES["flowers102"]).values() for c in runs]
    planned = {m: r["off"][0].loss for m, r in plan["validation"].items()}
    col = _describe(tuning, {"the tuning stage": TUNING_LOSS, **planned})
    col["steps"] = (f"up to {tuning[-1].iterations}, the length chosen on validation classes (evaluated every "
                    f"{tuning[-1].eval_every} steps)")
    cols["fine-tuned: the campaign's recipe"] = col
    if camp is not None:
        runs = [r.config for t in camp.test.values() for r in (*t["off"], *t["method"])]
        hw = sorted({_hardware(r) for t in camp.test.values() for r in t["method"]})
        col = _describe(runs, {m: t["method"][0].config.loss for m, t in camp.test.items()})
        data = session_data_line(camp)
        if data:
            col["images"] += f"; {data}"
        cols[f"fine-tuned: recorded ({', '.join(hw)})"] = col
    if cpu is not None:
        runs = [r.config for rs in cpu["test"].values() for r in rs]
        col = _describe(runs, {"baseline": runs[-1].loss})
        col["images"] += f"; {cpu.get('images', '')}".rstrip("; ")
        cols[f"fine-tuned: recorded on the CPU ({', '.join(cpu['hardware'])})"] = col
    frame = pd.DataFrame(cols).reindex(list(ASPECTS))
    keep = [a for a in frame.index if frame.loc[a].nunique() > 1]
    return frame.loc[keep]


def _hardware(result) -> str:

    return hardware(result)


# ---- the fine-tuned baseline recipe proven on the CPU (scripts/cpu_finetune.py) -------------------------------------

CPU_MANIFEST = "flowers102-cpu"
#: The frozen and adapted regimes stand on the symmetric build (``efficientnet_lite0``); they would move to the
#: TensorFlow build, and be recorded again, only if its untrained floor at the real profile's 224-px crop were higher
#: by more than this many points of unseen Recall@1.
BUILD_SWITCH_POINTS = 1.0


def recorded_cpu_proof(directory=None) -> dict | None:
    """The recorded CPU proof of the fine-tuned recipe (``scripts/cpu_finetune.py``; ``campaign/flowers102-cpu.json``
    beside the recorded runs), every run loaded and checked, the choice recomputed by the rule, or None.

    Returns ``{"validation": {label: [Result]}, "choice": Choice, "test": {label: [Result]}, "setting": label,
    "ablation": bool, "tiny": Result, "hardware": [...], "build": str, "size": dict}``."""


    opened = open_manifest(CPU_MANIFEST, directory)
    if opened is None:
        return None
    path, manifest, runs = opened
    folder = path.parent.parent
    val = {k: runs(v) for k, v in manifest["validation"].items()}
    test = {k: runs(v) for k, v in manifest["test"].items()}
    choice = choose(val, off="off", metric="R@1", split="val")
    every = [r for rs in test.values() for r in rs]
    return {"validation": val, "choice": choice, "test": test, "setting": manifest["setting"],
            "ablation": manifest["setting"] != choice.chosen, "tiny": load_result(folder / manifest["tiny"]),
            "hardware": sorted({hardware(r) for r in every}), "build": build_label(every[0]),
            "size": manifest["size"], "images": manifest.get("images", ""), "path": path,
            "builds": {b: load_result(folder / n) for b, n in manifest.get("builds", {}).items()}}


def cpu_proof_frame(proof):
    """The CPU proof's test rows: the untrained network, the head on the frozen network ("off") and the fine-tuned
    setting, unseen Recall@1 (95% intervals over the test seeds) and the paired changes against the first two."""
    if proof is None:
        return pd.DataFrame()
    rows = []
    labels = {"untrained": "untrained network", "off": "no fine-tuning: head on the frozen network"}
    for key, runs in proof["test"].items():
        row = {"row": labels.get(key, f"fine-tuned, {key}" + (" (ablation: not chosen)" if proof["ablation"] else "")),
               "test seeds": ", ".join(str(r.config.seed) for r in runs),
               "unseen R@1": format_interval(tuple(interval([r.metric("R@1", "unseen") for r in runs]))[:3])}
        for other, name in (("untrained", "vs untrained network"), ("off", "vs head on the frozen network")):
            if other == key:
                row[name] = "-"
                continue
            d = paired(proof["test"][other], runs, "R@1", "unseen")
            row[name] = f"{format_interval(tuple(d.diff)[:3], signed=True)} ({d.verdict})"
        row["network"] = proof["build"]
        row["hardware"] = "; ".join(sorted({_hardware(r) for r in runs}))
        rows.append(row)
    return pd.DataFrame(rows).set_index("row")


def cpu_proof_sentences(proof) -> str:
    """What the CPU proof found, in sentences generated from its recorded runs, in the words of
    :mod:`zslib.analysis.verdict` ("clearly" only when the rule chose to fine-tune)."""

    if proof is None:
        return ("No fine-tuned runs on the CPU are recorded: `python scripts/cpu_finetune.py` trains them and "
                "`python -m zslib record --profile full` records them.")
    s = proof["size"]
    val = {k: v for k, v in proof["validation"].items()}
    first = next(iter(val.values()))[0].config
    hardware = ", ".join(dict.fromkeys(h.split(", float")[0] for h in proof["hardware"]))
    out = [f"On the CPU ({hardware}), {proof['build']}, {s['image_size']}-px crops, "
           f"{s['iterations']} steps of {s['batch_classes']} x {s['batch_per_class']}: the candidates were compared "
           f"on the validation classes over seeds {', '.join(str(r.config.seed) for r in val['off'])} "
           f"({first.validation_fraction:.0%} of the seen classes held out).", proof["choice"].sentence()]
    if proof["ablation"]:
        out.append(f"The whole network was fine-tuned at test anyway, at the leading fine-tuning setting "
                   f"{proof['setting']}, as an ablation.")
    test = proof["test"]
    fin = test[proof["setting"]]
    subject = "the fine-tuned network (an ablation)" if proof["ablation"] else "the fine-tuned network"
    against = []
    unstable = stability_label(fin)
    for other, words in (("untrained", "the untrained network"), ("off", "the head trained on the frozen network")):
        d = paired(test[other], fin, "R@1", "unseen")
        against.append(paired_phrase(tuple(d.diff)[:3], d.verdict, not proof["ablation"], words, unstable))
    out.append(f"On the unseen classes {subject} reaches "
               f"{format_interval(tuple(interval([r.metric('R@1', 'unseen') for r in fin]))[:3])} Recall@1: "
               f"{'; '.join(against)}.")
    return " ".join(out)


def campaign_recipe_note(camp) -> str:
    """What the recorded campaign's runs stand on, read from their configs and session file: the network's build,
    BatchNorm, the images, each method's loss. (A table beside it never mixes its runs with another build's.)"""

    if camp is None:
        return ""
    configs = [r.config for t in camp.test.values() for r in (*t["off"], *t["method"])]
    builds = sorted({build_label(c) for c in configs})
    bn = sorted({"ImageNet statistics frozen" if c.freeze_bn else "batch statistics (running statistics updated)"
                 for c in configs})
    losses = {}
    for m, t in camp.test.items():
        losses.setdefault(t["method"][0].config.loss, []).append(_names().get(m, m))
    images = session_data_line(camp)
    rates = sorted({f"{c.lr:g}" for c in configs})
    steps = sorted({c.iterations for c in configs})
    text = (f"These recorded runs stand on {' and '.join(builds)}, with BatchNorm on {' and '.join(bn)}, backbone rate "
            f"{' and '.join(rates)} for {' and '.join(str(s) for s in steps)} steps")
    text += f", on {images}" if images else ""
    text += "; " + "; ".join(f"{', '.join(ms)} trained with the {loss} loss" for loss, ms in losses.items()) + "."
    return text


def _floor_runs(proof, methods=None) -> list:
    """The recorded untrained-floor runs of both builds: the proof's size, then 224 px (the real profile's crop)."""
    runs = list((proof or {}).get("builds", {}).values())
    return runs + list((methods or {}).get("floors_224", {}).values())


def build_floors(proof, methods=None):
    """The untrained network of each build on the unseen classes, from the recorded CPU proof (its crop) and its
    methods stage (the real profile's 224-px crop): same images and evaluation, one run each, one row per build
    and crop."""
    runs = _floor_runs(proof, methods)
    if not runs:
        return pd.DataFrame()
    rows = []
    for r in runs:
        c = r.config
        rows.append({"network": build_label(c.backbone), "crop": f"{c.image_size} px of {c.resize_size}",
                     **{f"unseen {k}": f"{100 * v:.2f}" for k, v in r.metrics["unseen"].items() if k in ("R@1", "MAP@R")},
                     "hardware": _hardware(r)})
    return pd.DataFrame(rows).set_index(["crop", "network"])


def build_floor_sentence(proof, methods=None) -> str:
    """The two builds' untrained floors compared, one sentence per crop, from the recorded CPU proof and its methods
    stage, and what the 224-px difference decides for the frozen and adapted regimes (:data:`BUILD_SWITCH_POINTS`)."""
    by_size: dict[int, dict] = {}
    for r in _floor_runs(proof, methods):
        by_size.setdefault(r.config.image_size, {})[r.config.backbone] = r
    pairs = {size: b for size, b in sorted(by_size.items()) if len(b) == 2}
    if not pairs:
        return ("The two builds' untrained floors are not recorded yet: `python scripts/cpu_finetune.py --methods all` "
                "evaluates both and `python -m zslib record --profile full` records them.")
    out = []
    tf, sym = "tf_efficientnet_lite0", "efficientnet_lite0"
    for size, b in pairs.items():
        va, vb = b[tf].metric("R@1", "unseen"), b[sym].metric("R@1", "unseen")
        out.append(f"At {size}-px crops the untrained network's unseen Recall@1 is {100 * va:.2f} in "
                   f"{build_label(tf)} and {100 * vb:.2f} in {build_label(sym)}: {100 * (va - vb):+.2f} points from the "
                   "padding and epsilon alone (one evaluation each, nothing trained).")
    if 224 in pairs:
        gap = 100 * (pairs[224][tf].metric("R@1", "unseen") - pairs[224][sym].metric("R@1", "unseen"))
        if gap > BUILD_SWITCH_POINTS:
            out.append(f"At the real profile's crop the TensorFlow build's floor is higher by more than "
                       f"{BUILD_SWITCH_POINTS:g} point, so the frozen and adapted regimes, which stand on the "
                       "symmetric build, start lower than the weights allow.")
        else:
            out.append(f"At the real profile's crop the two floors are within {BUILD_SWITCH_POINTS:g} point "
                       f"({gap:+.2f}), so the frozen and adapted regimes lose at most that by standing on the symmetric "
                       "build, and they stay on it; the fine-tuned regime uses the TensorFlow build.")
    return " ".join(out)


def _paper_cell(claim, dataset_title: str = "Flowers-102") -> str:
    """The paper's number for a fine-tuned row's variant: its R@1 and gain where the paper reports the same variant on
    the same dataset, else "none" and the nearest variant it does report."""
    if not isinstance(claim, Claim):
        return f"none ({claim})"
    (tm, rm, cm), _ = claim.method, claim.base
    value = reported_value(tm, rm, cm, claim.paper)
    if claim.dataset == dataset_title:
        return f"{value:.1f} ({claim.gain():+.1f} over its baseline; {claim.where()})"
    return f"none on {dataset_title} (nearest: {claim.gain():+.1f} points on {claim.dataset}, {claim.where()})"


def finetuned_section(method: str, stage=None):
    """One method's fine-tuned rows on the CPU (:func:`zslib.campaign.records.recorded_cpu_methods`), test runs only:
    the untrained network, the same-loss baseline ("off") and the tested setting, unseen Recall@1 and MAP@R over the
    test seeds with 95% intervals, the paired changes, and beside the setting the paper's number for the same variant
    and dataset (or "none" and the nearest variant it reports). A :class:`zslib.present.base.Section`."""
    stage = recorded_cpu_methods() if stage is None else stage
    got = (stage or {"methods": {}})["methods"].get(method)
    name = _names().get(method, method)
    if got is None:
        return Section(caption=f"No fine-tuned CPU runs of {name} are recorded yet: `python scripts/cpu_finetune.py "
                               f"--methods {method}` trains them and `python -m zslib record --profile full` records "
                               "them.")
    plan = method_plans()[method](RECIPES["flowers102"])
    untrained, off, runs = stage["untrained"], got["off"], got["method"]
    status = "an ablation: the rule kept off" if got["ablation"] else "chosen by the rule"
    rows = []
    for label, rs, paper in (("untrained network", untrained, "-"),
                             (f"{off[0].config.loss} baseline (off)", off, "-"),
                             (f"{name}, {plan.parts(got['setting'])} ({status})", runs,
                              _paper_cell(plan.claims(got["setting"])))):
        row = {"row": label, "test seeds": ", ".join(str(r.config.seed) for r in rs)}
        for metric in ("R@1", "MAP@R"):
            row[f"unseen {metric} %"] = format_interval(tuple(interval([r.metric(metric, "unseen") for r in rs]))[:3])
        for other, col in ((off, "vs baseline (R@1 pts)"), (untrained, "vs untrained (R@1 pts)")):
            if other is rs or rs is untrained:
                row[col] = "-"
                continue
            d = paired(other, rs, "R@1", "unseen")
            row[col] = f"{format_interval(tuple(d.diff)[:3], signed=True)} ({d.verdict})"
        row["paper, same variant and dataset"] = paper
        rows.append(row)
    c = runs[0].config
    caption = (f"{name} fine-tuned end to end on the CPU ({build_label(c)}, {c.image_size}-px crops, {c.iterations} "
               f"steps of {c.batch_classes} x {c.batch_per_class}; test runs only, on the unseen classes). "
               + got["choice"].sentence())
    return Section(caption=caption, table=pd.DataFrame(rows).set_index("row"))


def _every_run(stage) -> dict:
    """Every run of the CPU methods stage once, by file name (a baseline shared by several methods counted once)."""
    runs = {}
    for got in stage["methods"].values():
        for r in [*[r for rs in got["validation"].values() for r in rs], *got["off"], *got["method"]]:
            runs[r.path.name] = r
    return runs


def cpu_campaign_note(stage=None) -> str:
    """The fine-tuned CPU regime's size and cost, read from its recorded runs: the crop, steps and batch, the recipe
    (and whether the tuning rule chose it), the processor, and the CPU time the runs took (each run's own wall time,
    one thread each)."""
    stage = recorded_cpu_methods() if stage is None else stage
    if not stage or not stage["methods"]:
        return ("No fine-tuned CPU runs are recorded: `python scripts/cpu_finetune.py --methods all` trains them (about "
                "four hours of one core) and `python -m zslib record --profile full` records them.")
    runs = list(_every_run(stage).values())
    c = runs[0].config
    wall = sum(float(r.provenance.get("wall_seconds") or 0.0) for r in runs) / 3600
    train = sum(float(r.provenance.get("train_seconds") or 0.0) for r in runs) / 3600
    cpus = sorted({str(r.provenance.get("cpu") or "an unnamed CPU") for r in runs})
    threads = sorted({int(r.provenance.get("torch_threads", 0)) for r in runs})
    recipe = stage["recipe"] + (" (the leading candidate of the tuning stage, which kept the head alone: an ablation "
                                "of the recipe)" if stage["recipe_ablation"] else " (chosen by the tuning stage)")
    names = ", ".join(_names()[m] for m in stage["methods"])
    return (f"The fine-tuned regime on the CPU: {build_label(c)}, {c.image_size}-px crops of the {c.resize_size}-px "
            f"resized photographs, {c.iterations} steps of {c.batch_classes} x {c.batch_per_class} images, backbone "
            f"rate {recipe}, BatchNorm on its ImageNet statistics. Recorded for {names}: {len(runs)} runs "
            f"(validation and test, each baseline counted once) on {' and '.join(cpus)} with "
            f"{' or '.join(map(str, threads))} thread(s) each, {wall:.1f} hours of wall time in all ({train:.1f} of "
            "them training, the rest embedding and scoring), on a machine other work shared.")


def finetuning_sentences(comparisons, frozen: str = "real frozen") -> str:
    """Markdown bullets, one per method: its row in the frozen regime beside its row fine-tuned on the CPU (what each
    tested, its unseen Recall@1 and its paired change against its own baseline), in the words of
    :mod:`zslib.analysis.verdict` ("clearly" only for a setting the rule chose; an ablation named as one)."""
    by = {c.regime: c for c in comparisons}
    if FINETUNED_CPU not in by:
        return ""
    rows_f = {r.method: r for r in by[frozen].rows} if frozen in by else {}

    def said(row, where):
        d = row.vs_baseline.get("R@1")
        if not row.runs or d is None:
            return f"{where}: not recorded"
        tag = " (an ablation: the rule kept off)" if row.ablation else ""
        words = change_words(verdict(d), not row.ablation)
        return (f"{where}, {row.label or row.tested}{tag}: {100 * mean_r1(row.runs):.1f}% unseen Recall@1, {words} its "
                f"baseline ({format_interval(d, signed=True)} points)")

    out = []
    for r in by[FINETUNED_CPU].rows:
        parts = [said(rows_f[r.method], "frozen")] if r.method in rows_f else []
        parts.append(said(r, "fine-tuned on the CPU"))
        out.append(f"- **{r.method}**: " + "; ".join(parts) + ".")
    return "\n".join(out)
