"""Exercises that check themselves: ``check("cml.energy_confusion", my_function)`` in a notebook cell.

A check compares a student's answer with the zslib reference the chapter teaches (see
:mod:`zslib.teaching.exercises.bank` and each paper's ``bank_<paper>.py`` for the lists,
:mod:`zslib.teaching.exercises.kinds` for how each kind compares) and prints what it found in plain words: passed,
or which generated input failed, expected against got, and a hint tied to the derivation. It never prints the
solution and never raises on a wrong answer, so a notebook with unsolved exercises still runs to the end.

A check decides nothing about grades: the grader (:mod:`zslib.teaching.grading`) runs a submission in a
separate process where ``check`` only hands the answer over, and scores it in its own process against
references and hidden inputs the submission never sees. (An earlier version appended verdicts to a
``ZS_GRADE_LOG`` file, which a submission could write itself; nothing reads that variable any more.)
"""
from __future__ import annotations

from zslib.engine.registry import PAPERS
from zslib.teaching.exercises.bank import EXERCISES as _BANK
from zslib.teaching.exercises.bank_compare import EXERCISES as COMPARE_EXERCISES
from zslib.teaching.exercises.kinds import Outcome

#: Every paper's exercises (:attr:`zslib.engine.paper.Paper.exercises`), in the book's order.
PAPER_EXERCISES = [e for paper in PAPERS.values() for e in paper.exercises()]

#: Every exercise: those of the chapters before the papers, then every paper's, then the comparison's.
EXERCISES = [*(e for e in _BANK if all(e is not p for p in PAPER_EXERCISES)), *PAPER_EXERCISES, *COMPARE_EXERCISES]

__all__ = ["REGISTRY", "check", "verdict", "exercises_of", "Outcome"]


REGISTRY = {e.name: e for e in EXERCISES}
assert len(REGISTRY) == len(EXERCISES), "two exercises share a name"

def _exercise(name: str):
    if not isinstance(name, str):
        raise TypeError(f"the exercise's name must be a string such as 'metrics.purity', got {name!r} "
                        f"({type(name).__name__})")
    try:
        return REGISTRY[name]
    except KeyError:
        close = [n for n in REGISTRY if n.split(".")[0] == name.split(".")[0]] or sorted(REGISTRY)
        raise KeyError(f"no exercise named {name!r}; this chapter's are: {', '.join(close)}") from None


def verdict(name: str, answer, **context) -> Outcome:
    """The :class:`Outcome` of exercise ``name`` for ``answer`` (nothing printed). A name that is not a string
    fails the check with a message; an unknown name raises ``KeyError`` listing the chapter's names."""
    if not isinstance(name, str):
        return Outcome(str(name), False, f"check({name!r}, ...): the first argument must be the exercise's name "
                                         "as a string, e.g. check(\"metrics.purity\", my_purity).")
    return _exercise(name).run(answer, **context)


def check(name: str, answer, **context) -> Outcome:
    """Check ``answer`` to exercise ``name``, print the verdict and return it.

    ``answer`` is a function (implementation exercises), a number or tuple of numbers, or one of the
    offered words (experiment questions, which also take the chapter's printed numbers as keyword
    arguments, e.g. ``check("cml.confusion_effect", "raised", baseline=..., cml=...)``).
    """
    outcome = verdict(name, answer, **context)
    print(("✔ " if outcome.passed else "✘ ") + outcome.message)
    return outcome


def exercises_of(chapter: str) -> list:
    """The exercises of one chapter (its notebook's stem), in their numbered order."""
    return [e for e in EXERCISES if e.name.split(".")[0] == chapter]
