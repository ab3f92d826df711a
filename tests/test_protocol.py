"""The protocol lives once: the validation share, the choice's and the test's seeds and the confidence of every
interval are declared in :mod:`zslib.engine.choice` (the module of the choice rule) and imported everywhere else, and
every interval is written by one formatter, :func:`zslib.engine.stats.format_interval`. Read from the source."""
from __future__ import annotations

import ast
from pathlib import Path

from zslib.engine import choice
from zslib.engine.stats import Interval, format_interval, paired

PACKAGE = Path(__file__).resolve().parents[1] / "zslib"
HOME = PACKAGE / "engine" / "choice.py"


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text())


def _assigned(tree):
    """(name, value node) of every assignment at a module's top level."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        for t in targets:
            if isinstance(t, ast.Name):
                yield t.id, node.value


def test_the_protocols_constants_are_declared_once_in_the_choice_rules_module():
    names = ("VALIDATION_FRACTION", "VALIDATION_SEEDS", "TEST_SEEDS", "CONFIDENCE")
    old_names = {"VALIDATION", "VAL_FRACTION", "VAL_SEEDS", "RULE_SEEDS", "REAL_SEEDS"}
    for path, tree in _trees():
        for name, value in _assigned(tree):
            if path != HOME:
                assert name not in names, f"{path.relative_to(PACKAGE)} declares {name} again"
            assert name not in old_names, f"{path.relative_to(PACKAGE)} declares {name}: import it from zslib.engine.choice"
            if "VALID" in name and isinstance(value, ast.Constant):
                assert path == HOME, f"{path.relative_to(PACKAGE)}: {name} = {value.value!r}"
    assert (choice.VALIDATION_FRACTION, choice.VALIDATION_SEEDS, choice.CONFIDENCE) == (0.3, (0, 1, 2), 0.95)


def _formats_bounds(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` writes an interval itself: an f-string holding both its ``low`` and its ``high``."""
    for node in ast.walk(fn):
        if isinstance(node, ast.JoinedStr):
            attrs = {v.value.attr for v in node.values if isinstance(v, ast.FormattedValue)
                     for v in [v] if isinstance(v.value, ast.Attribute)}
            shown = {n.attr for v in node.values if isinstance(v, ast.FormattedValue) for n in ast.walk(v.value)
                     if isinstance(n, ast.Attribute)}
            if {"low", "high"} <= attrs | shown:
                return True
    return False


def test_one_interval_formatter():
    writers = [f"{path.relative_to(PACKAGE)}:{fn.name}" for path, tree in _trees() for fn in ast.walk(tree)
               if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _formats_bounds(fn)]
    assert writers == [], f"write intervals with zslib.engine.stats.format_interval, not {writers}"
    for path, tree in _trees():
        defined = {fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)}
        assert not defined & {"signed", "fmt3", "pts", "_pts"}, (path, defined & {"signed", "fmt3", "pts", "_pts"})


def test_the_formatter_writes_intervals_differences_and_single_values_alike():
    class Run:
        def __init__(self, seed, value):
            self.config = type("C", (), {"seed": seed})()
            self.value = value

        def metric(self, name="R@1", split="unseen"):
            return self.value

    a, b = [Run(s, v) for s, v in enumerate((0.50, 0.52, 0.51))], [Run(s, v) for s, v in enumerate((0.53, 0.55, 0.56))]
    p = paired(a, b)
    assert format_interval(p, signed=True) == format_interval(p.diff, signed=True)
    assert format_interval(Interval(0.031, 0.02, 0.04, 3), signed=True) == "+3.1 [+2.0, +4.0]"
    assert format_interval(Interval(0.5, float("nan"), float("nan"), 1)) == "50.0 [n/a]"
    assert format_interval((0.12345, 0.1, 0.2), scale=1, digits=3) == "0.123 [0.100, 0.200]"
