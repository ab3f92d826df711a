"""Dependencies at the top of each module: few imports inside functions, and a reason given for each that stays.

An import inside a function hides a dependency from the reader of the module's head. One stays only where the top
would make a cycle, load an optional extra, or load a heavy library into a path that must stay light (``import
zslib``, the command line before its arguments are checked); it says which on its line or just above its block.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zslib"
LIMIT = 150  # the most function-local imports zslib may hold


def _core_packages() -> set[str]:
    """The import names of pyproject's [project].dependencies (pillow -> PIL, scikit-learn -> sklearn), and zslib."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.S | re.M).group(1)
    names = {re.match(r"[A-Za-z0-9_.-]+", item).group(0).lower() for item in re.findall(r'"([^"]+)"', block)}
    renames = {"pillow": "PIL", "scikit-learn": "sklearn"}
    return {renames.get(n, n.replace("-", "_")) for n in names} | {"zslib"}


def _local_imports(path: Path):
    """``(line, top package, import node)`` of each import inside a function of ``path``, each once."""
    tree = ast.parse(path.read_text(), filename=str(path))
    seen = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in seen:
                    if isinstance(node, ast.ImportFrom):
                        top = "zslib" if node.level else (node.module or "").split(".")[0]
                    else:
                        top = node.names[0].name.split(".")[0]
                    seen[node.lineno] = (node.lineno, top, node)
    return [seen[k] for k in sorted(seen)]


def _comment_lines(path: Path) -> tuple[set[int], set[int]]:
    """The lines that hold a comment, and those that are only a comment."""
    text = path.read_text()
    lines = text.splitlines()
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    anywhere = {tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT}
    return anywhere, {n for n in anywhere if lines[n - 1].lstrip().startswith("#")}


def _explained(node, imports_at: dict[int, ast.AST], comments: tuple[set[int], set[int]]) -> bool:
    """A comment on a line of ``node``'s block of consecutive imports, or a comment line just above the block."""
    first = node
    while True:  # up through the imports just above (a blank line between allowed): the block shares its reason
        above = [n for n in imports_at.values() if n is not first and n.col_offset == first.col_offset
                 and n.end_lineno in (first.lineno - 1, first.lineno - 2)]
        if not above:
            break
        first = above[0]
    anywhere, whole_line = comments
    return bool(set(range(first.lineno, node.end_lineno + 1)) & anywhere) or first.lineno - 1 in whole_line


def _all_local_imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, top, node in _local_imports(path):
            yield path, line, top, node


def test_fewer_function_local_imports_than_the_limit():
    found = list(_all_local_imports())
    per_file = {}
    for path, *_ in found:
        per_file[path.relative_to(ROOT)] = per_file.get(path.relative_to(ROOT), 0) + 1
    worst = sorted(per_file.items(), key=lambda kv: -kv[1])[:5]
    count = len(found)
    assert count < LIMIT, f"{count} imports inside functions (at most {LIMIT - 1}); most in {worst}"


def test_each_local_import_of_a_core_dependency_says_why():
    core = _core_packages()
    assert {"torch", "numpy", "pandas", "sklearn", "PIL", "zslib"} <= core  # the names were read
    silent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        comments = _comment_lines(path)
        local = _local_imports(path)
        imports_at = {line: node for line, _, node in local}
        for line, top, node in local:
            if top in core and not _explained(node, imports_at, comments):
                silent.append(f"{path.relative_to(ROOT)}:{line} ({top})")
    assert not silent, ("an import inside a function of a core dependency or of zslib says why it is not at the top "
                        "(a cycle, a light path, ...), on its line or just above its block: " + ", ".join(silent))


def test_the_checks_see_a_local_import_and_its_reason(tmp_path):
    """The two checks on a made-up module: a silent import is found, a commented one is not."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    import torch\n    return torch\n\n\n"
                      "def g():\n    # here, not at the top: a cycle\n    import numpy\n    import pandas\n"
                      "    return numpy, pandas\n")
    local = _local_imports(module)
    assert [(line, top) for line, top, _ in local] == [(2, "torch"), (8, "numpy"), (9, "pandas")]
    at, comments = {line: node for line, _, node in local}, _comment_lines(module)
    assert [_explained(node, at, comments) for _, _, node in local] == [False, True, True]
