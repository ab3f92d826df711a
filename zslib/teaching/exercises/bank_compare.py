"""Checked exercises of the one-protocol comparison (book/compare.ipynb): predict a row before reading it again.

The right answer is computed from the numbers the chapter passes in (means over seeds, from
``zslib.analysis.compare``), so it follows the runs, whatever they turned out to be.
"""
from __future__ import annotations

from zslib.teaching.exercises.kinds import ChoiceExercise


def _cml_vs_floor(floor, cml):
    return "above" if float(cml) > float(floor) else "below"


def _deml_vs_baseline(baseline, deml):
    return "above" if float(deml) > float(baseline) else "below"


def _larger_or_smaller(claimed, measured):
    return "larger" if float(measured) > float(claimed) else "smaller"


def _adapted_vs_frozen(frozen, adapted):
    return "above" if float(adapted) > float(frozen) else "below"


def _larger_gain(r1_gain, map_gain):
    return "MAP@R" if float(map_gain) > float(r1_gain) else "Recall@1"


EXERCISES = [
    ChoiceExercise("compare.cml_vs_floor", "CML's unseen Recall@1 against the untrained network (real frozen regime)",
                   "Compare the CML row's unseen R@1 with the untrained features' R@1 (the 'vs untrained' column is "
                   "their difference).",
                   options=("above", "below"), context=("floor", "cml"), decide=_cml_vs_floor),
    ChoiceExercise("compare.deml_vs_baseline", "DeML's unseen Recall@1 against its own baseline (real frozen regime)",
                   "The 'vs baseline' column of the DeML row is DeML minus its binomial baseline, seed by seed.",
                   options=("above", "below"), context=("baseline", "deml"), decide=_deml_vs_baseline),
    ChoiceExercise("compare.adapt_adv_vs_paper", "Adapt-Adv's measured gain against the gain its paper claims",
                   "Put the 'vs baseline' mean of the Adapt-Adv row beside the paper's claimed gain in the last "
                   "column (both in points of Recall@1).",
                   options=("larger", "smaller"), context=("claimed", "measured"), decide=_larger_or_smaller),
    ChoiceExercise("compare.adapted_baseline", "The triplet baseline when the network's last stages train",
                   "Compare the unseen R@1 of CML's baseline (the triplet loss alone) in the real adapted regime with "
                   "the same baseline in the real frozen regime.",
                   options=("above", "below"), context=("frozen", "adapted"), decide=_adapted_vs_frozen),
    ChoiceExercise("compare.map_at_r_gain", "What training on the seen classes buys: the first neighbour or the class",
                   "Subtract the untrained network's unseen Recall@1 and MAP@R from those of CML's baseline (the "
                   "triplet loss alone) in the real frozen regime, and compare the two gains in points.",
                   options=("Recall@1", "MAP@R"), context=("r1_gain", "map_gain"), decide=_larger_gain),
]
