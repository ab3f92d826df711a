"""The extras of pyproject.toml against what the chapters and zslib import.

``notebook`` is what a reader installs to run the chapters (the setup cell installs ``zslib[notebook,full]``):
it must provide every package a chapter or zslib imports beyond the core dependencies (``full`` adds the
real and full profiles' networks), and nothing of the book build. Imports are read from the source (every
``import`` statement of the chapters' code cells and of zslib's modules, at any depth), and mapped to the
distributions that provide them in this environment.
"""
from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
#: imported only where the module exists: Colab's own package (the setup cell checks for it first)
ONLY_ON_COLAB = {"google"}
#: the book build's packages, never needed to read or run a chapter
BOOK_BUILD = {"jupyter-book", "sphinx", "myst-nb", "jupyter-cache", "sphinx-book-theme", "docutils"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    return {_norm(re.match(r"[A-Za-z0-9_.\-]+", r).group(0)) for r in requirements}


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def chapter_imports() -> dict[str, set[str]]:
    """top-level module -> the chapters that import it (magics and shell lines left out)."""
    found: dict[str, set[str]] = {}
    for nb in sorted((REPO / "book").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            text = "".join(cell["source"])
            code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in text.split("\n"))
            for name in _imports(code):
                found.setdefault(name, set()).add(nb.stem)
    return found


def zslib_imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "zslib").rglob("*.py")):
        for name in _imports(path.read_text()):
            found.setdefault(name, set()).add(path.relative_to(REPO).as_posix())
    return found


def third_party(found: dict[str, set[str]]) -> dict[str, set[str]]:
    """module -> distributions providing it, for the modules neither in the standard library nor zslib."""
    providers = md.packages_distributions()
    out = {}
    for name in found:
        if name in sys.stdlib_module_names or name in ("zslib", "__future__") or name in ONLY_ON_COLAB:
            continue
        assert name in providers, f"{name} (imported by {sorted(found[name])[:3]}) is provided by no installed package"
        out[name] = {_norm(d) for d in providers[name]}
    return out


def test_the_notebook_extra_covers_every_package_the_chapters_import():
    core, notebook = _names(PROJECT["dependencies"]), _names(PROJECT["optional-dependencies"]["notebook"])
    missing = {m: sorted(d) for m, d in third_party(chapter_imports()).items() if not d & (core | notebook)}
    assert not missing, f"chapters import packages that neither the dependencies nor the notebook extra give: {missing}"


def test_the_notebook_and_full_extras_cover_every_package_zslib_imports():
    """zslib imports its optional packages inside the functions that need them; a chapter reaches them (the
    explorers' ipywidgets, Grad-CAM's captum, the real profile's timm). Every one is declared, directly: a
    package that arrives only as another's dependency (threadpoolctl under scikit-learn) may leave."""
    extras = PROJECT["optional-dependencies"]
    declared = _names(PROJECT["dependencies"]) | _names(extras["notebook"]) | _names(extras["full"])
    missing = {m: sorted(d) for m, d in third_party(zslib_imports()).items() if not d & declared}
    assert not missing, f"zslib imports packages no dependency or extra (notebook, full) declares: {missing}"


def test_the_notebook_extra_is_lean():
    """Nothing of the book build, and every package in it imported by a chapter or by zslib."""
    notebook = _names(PROJECT["optional-dependencies"]["notebook"])
    assert not notebook & BOOK_BUILD and "zslib" not in notebook
    used = set().union(*third_party({**zslib_imports(), **chapter_imports()}).values())
    assert notebook <= used, f"the notebook extra lists packages nothing imports: {sorted(notebook - used)}"
    assert "zslib[notebook]" in PROJECT["optional-dependencies"]["book"]  # the book build runs the chapters too


def test_every_setup_cell_installs_the_notebook_extra():
    for nb in sorted((REPO / "book").glob("*.ipynb")):
        cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
        setup = "".join(cells[0]["source"])
        assert '"zslib[notebook,full] @ git+' in setup, nb.name
        assert "[book" not in setup, nb.name
