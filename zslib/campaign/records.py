"""Fine-tuned runs as chapters find them: a third regime beside the frozen and the adapted one, with its hardware.

The book's real runs come in regimes that differ in what of the pretrained network trains:

* ``"quick"``: SynthParts and the small CNN trained from scratch;
* ``"frozen"``: the ``real`` profile's head (and each method's modules) on cached maps of a frozen network;
* ``"adapted"``: cached maps with the network's last stages training (a config with ``train_stages``);
* ``"fine-tuned"``: the whole network trained end to end on images (the ``full`` profile's path, the runs of
  ``python -m zslib finetune``), usually on a GPU.

:func:`regime` names a result's regime from its config alone; :func:`finetuned_runs` returns the fine-tuned
results stored in the results folder and among the recorded runs, and :func:`regime_label` the words a chapter
puts beside them, hardware included (``"fine-tuned on cuda (NVIDIA L4), bfloat16"``).
"""
from __future__ import annotations

import json

from zslib.campaign.plan import setting_to_test
from zslib.engine.choice import choose
from zslib.engine.store import load_result, load_results, recorded_dir, recorded_runs

__all__ = ["REGIMES", "regime", "hardware", "regime_label", "finetuned_runs", "CPU_METHODS_MANIFEST",
           "open_manifest", "recorded_cpu_methods"]

REGIMES = ("quick", "frozen", "adapted", "fine-tuned")

#: The CPU proof's methods stage (``scripts/cpu_finetune.py --methods``): each method's validation, choice and test
#: runs at the proof's size, each method's short run, and both builds' untrained floors at 224 px.
CPU_METHODS_MANIFEST = "flowers102-cpu-methods"


def regime(result) -> str:
    """The regime of a result (one of :data:`REGIMES`), read from its config."""
    c = result.config
    if c.dataset == "synthparts" and not c.feature_stages:
        return "quick"
    if c.feature_stages:
        return "adapted" if getattr(c, "train_stages", None) else "frozen"
    return "fine-tuned"


def hardware(result) -> str:
    """The device and precision the result was computed with, from its provenance (``"unknown device"`` when
    the file does not say)."""
    p = result.provenance
    parts = [str(x) for x in (p.get("device"), p.get("precision")) if x]
    return ", ".join(parts) or "unknown device"


def regime_label(result) -> str:
    """``"<regime> on <hardware>"``: how a chapter labels a run it shows."""
    return f"{regime(result)} on {hardware(result)}"


def finetuned_runs(directory=None, *, recorded_only: bool = False, **match) -> list:
    """The stored fine-tuned results (:func:`regime` ``== "fine-tuned"``) whose configs match ``match`` (e.g.
    ``dataset="flowers102", method="cml"``): from ``<results>/`` and ``<results>/recorded/``, or from the
    recorded runs alone with ``recorded_only``. An empty list when there are none (a chapter then says so)."""
    runs = recorded_runs(directory) if recorded_only else load_results(directory)
    return [r for r in runs if regime(r) == "fine-tuned"
            and all(getattr(r.config, k) == v for k, v in match.items())]


def open_manifest(name: str, directory=None):
    """``(path, manifest, runs)`` of the recorded campaign manifest ``campaign/<name>.json`` (``runs(names)`` loads and
    checks the run files it names, beside it), or ``None`` when it is not recorded."""
    folder = recorded_dir(directory)
    path = folder / "campaign" / f"{name}.json"
    if not path.is_file():
        return None

    def runs(names):
        return [load_result(folder / n) for n in names]

    return path, json.loads(path.read_text()), runs


def recorded_cpu_methods(directory=None) -> dict | None:
    """The recorded methods stage of the CPU proof (:data:`CPU_METHODS_MANIFEST` beside the recorded runs), every run
    loaded and checked and every choice recomputed by the rule from the validation runs, or ``None``.

    Returns ``{"methods": {method: {"validation": {label: [Result]}, "choice": Choice, "setting": label,
    "ablation": bool, "off": [Result], "method": [Result]}}, "untrained": [Result], "tiny": {method: Result},
    "floors_224": {backbone: Result}, "size": dict, "recipe": str, "recipe_ablation": bool, "images": str}``;
    a method still training when the manifest was written is absent from ``"methods"``."""
    opened = open_manifest(CPU_METHODS_MANIFEST, directory)
    if opened is None:
        return None
    path, manifest, runs = opened
    folder = path.parent.parent
    methods = {}
    for m, entry in manifest.get("methods", {}).items():
        val = {k: runs(v) for k, v in entry["validation"].items()}
        choice = choose(val, off="off", metric="R@1", split="val")
        setting = setting_to_test(choice)
        if setting != entry["setting"]:
            raise ValueError(f"{path}: {m}'s test runs are of {entry['setting']!r}, but its validation runs make the "
                             f"rule test {setting!r}; the manifest does not match its run files")
        methods[m] = {"validation": val, "choice": choice, "setting": setting, "ablation": choice.off_won,
                      "off": runs(entry["test"]["off"]), "method": runs(entry["test"]["method"])}
    return {"methods": methods, "untrained": runs(manifest.get("untrained", [])),
            "tiny": {m: load_result(folder / n) for m, n in manifest.get("tiny", {}).items()},
            "floors_224": {b: load_result(folder / n) for b, n in manifest.get("floors_224", {}).items()},
            "size": manifest.get("size", {}), "recipe": manifest.get("recipe", ""),
            "recipe_ablation": bool(manifest.get("recipe_ablation")), "images": manifest.get("images", ""),
            "path": path}
