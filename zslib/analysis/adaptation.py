"""The adapted regime's own setting: the learning rate of the trained stages, chosen on validation classes.

In the adapted regime (:data:`zslib.engine.profile.ADAPTED_REAL`) the last MBConv block and the 1x1 head
convolution of EfficientNet-Lite0 train from their ImageNet weights. How fast they may move is a setting like any
other, so it is chosen by the book's one rule (:func:`zslib.engine.choice.choose`) on the validation classes of the
comparison (:data:`zslib.analysis.compare.VAL_FRACTION` of the seen classes, seeds 0-2), with "off" a candidate:
here "off" is no adaptation at all, the frozen regime's run of the same loss on the same validation split.

The candidates train the triplet loss alone (the baseline that CML and Adapt-Adv share) with the stages at
1e-5, 1e-4 or 1e-3 while the embedding head keeps the profile's 1e-4 (``lr`` is the backbone's rate and
``new_layer_mult`` scales it for the head, so the head's product stays fixed). The 1e-4 candidate is the very
config of the recorded adapted runs (same hash).
"""
from __future__ import annotations

from zslib.analysis.compare import ENTRIES, regime_config, validation_grid
from zslib.engine.choice import OFF, VALIDATION_SEEDS, Choice, choose
from zslib.engine.grid import MissingRunsError, run_grid

__all__ = ["STAGE_RATES", "rate_grid", "rate_choice", "rate_sentence"]

#: The candidate rates of the trained stages (the recorded adapted runs use the middle one).
STAGE_RATES = (1e-5, 1e-4, 1e-3)


def _label(rate: float) -> str:
    return f"stages at {rate:g}"


def rate_grid() -> dict:
    """``{label: config}``: "off" (the frozen regime's triplet baseline on the validation split) and the adapted
    triplet baseline at each rate of :data:`STAGE_RATES`, the head's rate unchanged."""
    cml = next(e for e in ENTRIES if e.name == "CML")  # its "off" is the triplet loss alone
    frozen = validation_grid(cml, regime_config("real frozen"), "real frozen")[OFF]
    adapted = validation_grid(cml, regime_config("real adapted"), "real adapted")[OFF]
    head = adapted.lr * adapted.new_layer_mult
    grid = {OFF: frozen}
    for rate in STAGE_RATES:
        grid[_label(rate)] = adapted.replace(lr=rate, new_layer_mult=round(head / rate, 9))
    return grid


def rate_choice(train: bool = False) -> Choice | None:
    """The rule over :func:`rate_grid` (``None`` when its runs are neither stored nor recorded and ``train`` is
    false)."""
    try:
        runs = run_grid(rate_grid(), seeds=VALIDATION_SEEDS, stored_only=not train)
    except MissingRunsError:
        return None
    return choose(runs, off=OFF, metric="R@1", split="val")


def rate_sentence(choice: Choice | None) -> str:
    """What the rule chose for the stages' rate, and whether the recorded adapted runs use it, in words."""
    if choice is None:
        return ("The validation runs of the trained stages' rate are not here: "
                "`zslib.analysis.adaptation.rate_choice(train=True)` trains them (six adapted runs).")
    text = ("With no adaptation (the frozen network) as \"off\", the rule over the trained stages' rate reads: "
            + choice.sentence(lambda k: "the frozen network" if k == OFF else str(k)))
    used = _label(STAGE_RATES[1])
    if choice.chosen == used:
        return text + f" The adapted runs of this chapter are trained at that rate, {STAGE_RATES[1]:g}."
    if choice.off_won:
        return text + (f" So on validation classes adapting is not chosen; the adapted rows (stages at "
                       f"{STAGE_RATES[1]:g}) show what it does as an ablation.")
    return text + (f" The adapted runs of this chapter were trained at {STAGE_RATES[1]:g}, not at the chosen rate: "
                   "their rows are an ablation of the rate.")
