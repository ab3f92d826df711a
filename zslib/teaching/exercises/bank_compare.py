"""Checked exercises of the one-protocol comparison (book/compare.ipynb): predict a row before reading it again.

The right answer is computed from the comparison the chapter made (``zslib.analysis.compare``), so it follows
the runs, whatever they turned out to be.
"""
from __future__ import annotations

from zslib.engine.stats import verdict
from zslib.teaching.exercises.kinds import ChoiceExercise


def _kept_off(off_won):
    return "off" if bool(off_won) else "setting"


def _verdict(diff):
    if diff is None:
        raise ValueError("this row has no paired difference in this copy of the book (its runs are not recorded)")
    return verdict(diff)


EXERCISES = [
    ChoiceExercise("compare.cml_kept_off", "did the choice rule keep CML switched off in the real frozen regime?",
                   "Look at the CML line of the validation choices: is the leader clearly above 'off' (its paired "
                   "interval entirely above zero)?",
                   options=("off", "setting"), context=("off_won",), decide=_kept_off),
    ChoiceExercise("compare.adapt_adv_verdict", "Adapt-Adv against its own baseline in the real frozen regime",
                   "Read the paired interval of the Adapt-Adv row: above zero is 'up', below is 'down', across zero "
                   "is 'no clear effect'.",
                   options=("up", "down", "no clear effect"), context=("diff",), decide=_verdict),
]
