"""Teaching: the exercises every chapter ends with, and the assignment pack built from the chapters.

* ``exercises/`` -- :func:`~zslib.teaching.exercises.check` and the bank of checks, one file per paper;
* ``assignments`` -- student and instructor notebooks, the rubric and the grader.
"""
import importlib

_SUBMODULES = {"exercises", "assignments"}


def __getattr__(name):  # PEP 562
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'zslib.teaching' has no attribute {name!r}")
