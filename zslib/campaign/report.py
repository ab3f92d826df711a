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

from pathlib import Path

__all__ = ["recorded_campaign", "campaign_frame", "campaign_sentences"]

_NAMES = {"cml": "CML", "deml": "DeML", "adapt_adv": "Adapt-Adv", "zsml": "ZSML", "jrd": "JRD"}
_WHERE = {"down": "below", "up": "above"}


def recorded_campaign(dataset: str = "flowers102", directory=None):
    """The recorded campaign on ``dataset`` as a :class:`zslib.campaign.run.Campaign` (every run loaded and checked,
    choices and rows recomputed from the runs), or ``None`` when none is recorded."""
    from zslib.campaign.run import Campaign, comparison_rows, load_manifest
    from zslib.engine.choice import choose
    from zslib.engine.store import load_result, recorded_dir

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
    camp.rows = comparison_rows(camp)
    camp.paths = {"json": path, "session": _session_file(folder, manifest["dataset"])}
    return camp


def _session_file(folder: Path, dataset: str) -> Path | None:
    path = folder / "campaign" / f"{dataset}-session.md"
    return path if path.is_file() else None


def campaign_frame(camp):
    """One row per floor, baseline and method: unseen Recall@1 and the paired changes (percentage points, 95%
    intervals over the test seeds), the seeds and the hardware the runs name."""
    import pandas as pd

    from zslib.engine.stats import format_interval

    def diff(d):
        return "-" if d is None else f"{format_interval(d['diff'], signed=True)} ({d['verdict']})"

    if camp is None:
        return pd.DataFrame()
    return pd.DataFrame([{
        "row": r["row"], "setting": r["setting"], "status": r["status"] if r["status"] != "-" else "",
        "test seeds": ", ".join(str(s) for s in r["seeds"]), "unseen R@1": format_interval(r["R@1"]),
        "vs same-loss baseline": diff(r["vs baseline"]), "vs untrained network": diff(r["vs floor"]),
        "hardware": "; ".join(r["hardware"])} for r in camp.rows]).set_index("row")


def _points(triple, signed: bool = True) -> str:
    from zslib.engine.stats import format_interval

    return format_interval(triple, signed=signed)


def campaign_sentences(camp) -> str:
    """What the recorded campaign found, in sentences generated from its rows and recorded choices."""
    from zslib.campaign.plan import METHODS

    if camp is None:
        return ("No fine-tuned campaign is recorded: `python -m zslib finetune` on a GPU trains one, and "
                "`python -m zslib record --profile full` records it.")
    rows = {r["row"]: r for r in camp.rows}
    floor = next(r for name, r in rows.items() if name.startswith("untrained floor"))
    hardware = sorted({h for r in camp.rows if r is not floor for h in r["hardware"]})
    out = [f"Fine-tuned end to end on {' and '.join(hardware)} and tested on {len(floor['seeds'])} seeds, against "
           f"the untrained network's {_points(floor['R@1'], signed=False)} unseen Recall@1."]
    for name, r in rows.items():
        if name.startswith("baseline:"):
            d = r["vs floor"]
            out.append(f"The {r['loss']} loss alone, training every layer, reaches {_points(r['R@1'], signed=False)}, "
                       f"a change of {_points(d['diff'])} points ({_WHERE.get(d['verdict'], 'no clear difference')}).")
    for m in METHODS:
        if m not in rows:
            continue
        r, choice = rows[m], camp.choices[m]
        d = r["vs baseline"]
        change = (f"a change of {_points(d['diff'])} points against its same-loss baseline "
                  f"({_WHERE.get(d['verdict'], 'no clear difference')})")
        if choice.off_won:
            out.append(f"{_NAMES[m]}: {choice.sentence()} Trained anyway at {r['setting']} as a labelled ablation, "
                       f"it reaches {_points(r['R@1'], signed=False)}, {change}.")
        else:
            out.append(f"{_NAMES[m]}: {choice.sentence()} On the unseen classes it reaches "
                       f"{_points(r['R@1'], signed=False)}, {change}.")
    missing = [m for m in METHODS if m not in rows]
    if missing:
        out.append(f"No fine-tuned runs of {', '.join(_NAMES[m] for m in missing)} are recorded yet: `python -m zslib finetune "
                   f"--methods {','.join(missing)}` on a GPU trains them.")
    if camp.paths.get("session") is not None:
        out.append(f"How these runs were made (hardware, the copy of the images, the seeds) is recorded in "
                   f"`results/recorded/campaign/{camp.paths['session'].name}`.")
    return " ".join(out)
