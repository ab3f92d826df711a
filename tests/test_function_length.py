"""Every function of zslib is read in one sitting: none, method or nested function included, is longer than
:data:`LIMIT` lines from its ``def`` line to its last line (docstring and comments count; decorators do not).
The lengths are read from the source by ``ast``, so the test imports nothing."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zslib"
LIMIT = 100


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of every function in ``source`` longer than ``limit`` lines."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def test_the_measure_sees_methods_and_nested_functions():
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))  # with its def line: exactly LIMIT lines
    source = (f"def fits():\n{body}\n"
              f"class A:\n    @staticmethod\n    def method():\n{body.replace('    ', '        ')}        y = 0\n\n"
              f"def outer():\n    def inner():\n{body.replace('    ', '        ')}        y = 0\n    return inner\n")
    found = sorted((name, length) for name, _, length in long_functions(source))
    assert found == [("inner", LIMIT + 1), ("method", LIMIT + 1), ("outer", LIMIT + 3)]  # not "fits": LIMIT lines


def test_no_function_in_zslib_is_longer_than_the_limit():
    offenders = [f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for name, line, length in long_functions(path.read_text(encoding="utf-8"))]
    assert not offenders, f"functions over {LIMIT} lines (split them into named helpers): " + "; ".join(offenders)
