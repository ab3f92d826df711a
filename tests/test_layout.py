"""The package's shape: no import cycle, a short top level, one folder per paper, every recorded hash unchanged.

The import graph is read from the source (every ``import`` and ``from ... import`` statement of every module,
those inside functions included: a lazy import still ties two modules together), so the test needs no import.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zslib"
PAPERS = ("cml", "deml", "adapt_adv", "zsml", "jrd")


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the zslib modules it imports (``from pkg import sub`` counts as an import of ``pkg.sub``)."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first repeated at the end), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "zslib"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from zslib.a import x\n")
    (pkg / "a.py").write_text("from .sub import b\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    graph = import_graph()
    assert graph["zslib.sub.b"] == {"zslib.a"} and graph["zslib.a"] == {"zslib.sub.b"}
    assert find_cycle(graph) is not None


def test_zslib_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_top_level_is_short_and_each_paper_has_one_folder():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 15, entries
    for paper in PAPERS:
        folder = PACKAGE / "methods" / paper
        assert (folder / "__init__.py").is_file() and (folder / "method.py").is_file(), paper


def test_the_engine_imports_no_paper():
    """The engine owns the method interface and its registry and imports nothing from ``zslib.methods`` (nor
    from the floors above it); the papers plug into it (:data:`zslib.engine.registry.PLUGINS`), never the
    reverse."""
    upstairs = ("zslib.methods", "zslib.analysis", "zslib.campaign", "zslib.teaching", "zslib.experiment")
    for name, deps in import_graph().items():
        if name.startswith("zslib.engine"):
            bad = sorted(d for d in deps if d.startswith(upstairs))
            assert not bad, f"{name} imports {bad}"
    offenders = [str(path.relative_to(ROOT)) for path in (PACKAGE / "engine").rglob("*.py")
                 if "from zslib.methods" in path.read_text() or "import zslib.methods" in path.read_text()]
    assert not offenders, offenders


#: The modules outside a paper's folders that may import a paper's modules, and why. A paper's exercise bank is one
#: of its files (``teaching/exercises/bank_<paper>.py``, next to the others so that the grader's sandbox refuses all
#: of them by one prefix), and it imports only its own paper; the chapters before the papers check JRD's intra-class
#: penalty, which the generalization-gap chapter derives before the JRD chapter.
PAPER_IMPORTS_ALLOWED = {"zslib.teaching.exercises.bank": {"zslib.methods.jrd.intra"}}


def _paper_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] in (["zslib", "methods"], ["zslib", "present"]) \
        and parts[2] in PAPERS else None


def test_no_module_outside_a_papers_folders_imports_a_paper():
    """Only ``methods/<paper>/`` and ``present/<paper>/`` name a paper's modules (a paper may build on another's, as
    Adapt-Adv's Table 5 runs CML's energy confusion); the shared modules reach the papers through
    :data:`zslib.engine.registry.PAPERS` (the index and the table of contents list them)."""
    offenders = []
    for name, deps in import_graph().items():
        home = _paper_of(name)
        bank = name.rpartition(".bank_")[2] if name.startswith("zslib.teaching.exercises.bank_") else None
        for dep in sorted(deps):
            paper = _paper_of(dep)
            if paper is None or home or paper == bank or dep in PAPER_IMPORTS_ALLOWED.get(name, ()):
                continue
            offenders.append(f"{name} imports {dep}")
    assert not offenders, "\n".join(offenders)


def test_a_method_lookup_imports_only_what_it_needs():
    """``get_method`` of one name imports plug-in modules until the name is found, not every paper."""
    code = ("import sys; from zslib.engine.registry import get_method; get_method('baseline'); "
            "print(sorted(m for m in sys.modules if m.startswith('zslib.methods.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {m.split(".")[2] for m in eval(out)}
    assert "baseline" in loaded and not {"zsml", "jrd"} & loaded, loaded


def test_methods_never_import_the_runner_outside_their_analyses():
    for name, deps in import_graph().items():
        if name.startswith("zslib.methods") and not name.endswith(".analyses"):
            assert "zslib.engine.runner" not in deps and "zslib.analysis.records" not in deps, name


@pytest.mark.parametrize("folder", ["results/recorded", "results/recorded/analyses"])
def test_every_recorded_file_keeps_its_config_hash(folder):
    from zslib.engine.config import Config, config_hash

    files = sorted((ROOT / folder).glob("*.json"))
    assert files, f"no recorded files in {folder}"
    for path in files:
        stored = json.loads(path.read_text())
        h = config_hash(Config.from_dict(stored["config"]))
        assert h == stored["config_hash"], f"{path.name}: config hashes to {h}, stored {stored['config_hash']}"
        assert f"-{h}" in path.name, path.name


def test_every_analysis_a_record_names_is_registered():
    from zslib.analysis.records import get_analysis

    names = {json.loads(p.read_text())["analysis"] for p in (ROOT / "results/recorded/analyses").glob("*.json")}
    for name in sorted(names):
        assert get_analysis(name).name == name
