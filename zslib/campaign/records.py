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

__all__ = ["REGIMES", "regime", "hardware", "regime_label", "finetuned_runs"]

REGIMES = ("quick", "frozen", "adapted", "fine-tuned")


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
    from zslib.engine.store import load_results, recorded_runs

    runs = recorded_runs(directory) if recorded_only else load_results(directory)
    return [r for r in runs if regime(r) == "fine-tuned"
            and all(getattr(r.config, k) == v for k, v in match.items())]
