"""The book as a whole: structure checks (fast) and the executed build (the integration test)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "scripts" / "build_book.py"


def toc_files() -> list[str]:
    """The entries of _toc.yml, as the browser check reads them (scripts/browse_book.py: one walk of the toc)."""
    spec = importlib.util.spec_from_file_location("browse_book", REPO / "scripts" / "browse_book.py")
    browse = sys.modules.get("browse_book")
    if browse is None:
        browse = sys.modules.setdefault("browse_book", importlib.util.module_from_spec(spec))
        spec.loader.exec_module(browse)
    return browse.toc_pages(REPO)


def notebooks() -> list[Path]:
    return sorted((REPO / "book").rglob("*.ipynb"))


def repository_url() -> str:
    return yaml.safe_load((REPO / "_config.yml").read_text())["repository"]["url"]


# ---------------------------------------------------------------- structure (fast)

def test_toc_entries_exist_and_every_chapter_is_listed():
    listed = set(toc_files())
    for entry in listed:
        matches = [p for p in (REPO / f"{entry}{ext}" for ext in (".md", ".ipynb")) if p.exists()]
        assert matches, f"_toc.yml lists {entry!r} but no {entry}.md or {entry}.ipynb exists"
    for nb in notebooks():
        entry = nb.relative_to(REPO).with_suffix("").as_posix()
        assert entry in listed, f"{nb.relative_to(REPO)} is not listed in _toc.yml"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them before committing"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_chapter_follows_the_template(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), \
        f"{path.name}: the first cell must be the markdown title"
    cells = [c for c in nb.cells if c.cell_type == "code"]
    setup = cells[0].source
    assert f'"zslib[notebook,full] @ git+{repository_url()}"' in setup, \
        f"{path.name}: the setup cell must install zslib[notebook,full] from {repository_url()} (_config.yml)"
    # short for the reader: a form on Colab (its title and the profile menu), collapsed on the page
    assert setup.startswith("# @title Setup") and 'display-mode: "form"' in setup.splitlines()[0]
    assert cells[0].metadata.get("cellView") == "form" and "hide-input" in cells[0].metadata.get("tags", [])
    assert 'ZS_PROFILE = "quick"  # @param ["quick", "real", "full"]' in setup
    assert 'os.environ.setdefault("ZS_DOWNLOAD", "1")' in setup
    assert "zslib.get_profile()" in setup
    assert "output.enable_custom_widget_manager()" in setup, \
        f"{path.name}: on Colab the setup cell must enable the custom widget manager (the explorers' live controls)"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Learning goals" in text, f"{path.name}: no '## Learning goals' section"
    assert "## Exercises" in text, f"{path.name}: no '## Exercises' section"


# ---------------------------------------------------------------- the executed build

# The fixture ``built_book`` (the build itself, once per test session) is in conftest.py: the browser tests
# of tests/test_browser.py read the same build.


@pytest.mark.book
def test_every_toc_entry_produced_an_html_page(built_book):
    assert (built_book / "index.html").exists()
    for entry in toc_files():
        assert (built_book / f"{entry}.html").exists(), f"no HTML page for {entry}"


@pytest.mark.book
def test_chapters_fit_the_quick_profile_budget(built_book):
    """Every chapter within its budget on the reference machine, judged from the build's own report.

    The build times a fixed workload before and after (the speed factor: this machine's time over the
    reference machine's), so a slower machine gets a proportionally larger allowance, and a faster one is judged by
    its own wall time (``allowance_factor``, at least 1: the budget is minutes on the machine); and it records how
    many other programs competed for the CPU while each chapter ran. A chapter that ran while the machine
    was busy (another program runnable on average half the time or more, or the hypervisor taking 10% of
    the CPU) is reported but not judged: its time says more about the neighbours than about the chapter.
    """
    report = json.loads((REPO / "_build" / "build_report.json").read_text())
    chapters = report["chapters"]
    expected = {nb.relative_to(REPO).as_posix() for nb in notebooks()}
    assert expected <= set(chapters), f"chapters without an execution record: {expected - set(chapters)}"
    factor = report.get("allowance_factor") or 1.0
    budget = report["budget_seconds"]
    lines, slow, unjudged = [], [], []
    for name in sorted(expected):
        e = chapters[name]
        assert e["seconds"] is not None, f"{name} has no execution time (it failed or was not executed)"
        busy = e.get("busy") or {}
        quiet = busy.get("other_running", 0.0) < 0.5 and busy.get("steal", 0.0) < 0.1
        scaled = e["seconds"] / factor
        lines.append(f"{name}: {e['seconds']:.0f} s here, {scaled:.0f} s scaled to the reference machine, "
                     f"other load {busy.get('other_running', float('nan')):.2f}")
        if not quiet:
            unjudged.append(name)
        elif scaled > budget:
            slow.append(lines[-1])
    summary = (f"speed factor {factor:.2f} (calibration {report['calibration_seconds']} s vs "
               f"{report['reference_seconds']} s on the reference machine); budget {budget} s per chapter")
    assert not slow, f"chapters over the {budget} s budget ({summary}):\n" + "\n".join(slow)
    total = sum(chapters[n]["seconds"] for n in expected) / factor
    assert total <= report["book_budget_seconds"], f"the book took {total:.0f} s scaled ({summary})"
    if unjudged:
        import warnings
        warnings.warn(f"not judged against the budget, the machine was busy while they ran: {unjudged} "
                      f"({summary})\n" + "\n".join(lines))


@pytest.mark.book
def test_colab_button_points_at_the_chapter(built_book):
    url = repository_url().replace("https://github.com/", "")
    for nb in notebooks():
        rel = nb.relative_to(REPO).as_posix()
        html = (built_book / rel).with_suffix(".html").read_text()
        assert f"https://colab.research.google.com/github/{url}/blob/main/{rel}" in html


def _tiny_book(folder: Path, chapters: dict[str, list[str]]) -> Path:
    """A book with one notebook per entry of ``chapters`` (name -> code cells) and a markdown root."""
    (folder / "_config.yml").write_text(textwrap.dedent("""\
        title: tiny
        only_build_toc_files: true
        execute:
          execute_notebooks: cache
          timeout: 60
        """))
    toc = "format: jb-book\nroot: intro\nchapters:\n" + "".join(f"  - file: {n}\n" for n in chapters)
    (folder / "_toc.yml").write_text(toc)
    (folder / "intro.md").write_text("# Intro\n")
    for name, cells in chapters.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]
                                      + [nbformat.v4.new_code_cell(c) for c in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"{name}.ipynb")
    return folder


def _build(folder: Path, **env):
    import os
    return subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(folder), "--no-calibration"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, **env})


def _executed_at(folder: Path) -> dict[str, object]:
    from jupyter_cache import get_cache
    cache = get_cache(folder / "_build" / ".jupyter_cache")
    return {Path(r.uri).name: r.created for r in cache.list_cache_records()}


@pytest.mark.book
def test_a_failing_cell_fails_the_build_and_names_the_chapter_cell_and_remedy(tmp_path):
    """A chapter whose second code cell raises: non-zero exit, the chapter, the cell and what to do."""
    _tiny_book(tmp_path, {"broken_chapter": ["y = 2", "x = 1 / 0"]})
    proc = _build(tmp_path)
    assert proc.returncode != 0
    assert "broken_chapter.ipynb (code cell 2: x = 1 / 0)" in proc.stdout, proc.stdout[-3000:]
    assert "ZeroDivisionError" in proc.stdout and "What to do:" in proc.stdout
    assert "These chapters raised while executing" in proc.stdout


@pytest.mark.book
def test_a_timed_out_cell_names_the_variable_that_gives_more_time(tmp_path):
    _tiny_book(tmp_path, {"slow_chapter": ["import time", "time.sleep(30)"]})
    proc = _build(tmp_path, ZS_CELL_TIMEOUT="3")
    assert proc.returncode != 0
    assert "slow_chapter.ipynb (code cell 2: time.sleep(30))" in proc.stdout, proc.stdout[-3000:]
    assert "cell timeout (3 s)" in proc.stdout and "ZS_CELL_TIMEOUT=12 make book" in proc.stdout
    assert not (tmp_path / ".build_config.yml").exists(), "the derived configuration must be removed"


@pytest.mark.book
def test_a_second_build_executes_only_what_failed_or_changed(tmp_path):
    _tiny_book(tmp_path, {"good": ["a = 1"], "bad": ["raise RuntimeError('not yet')"]})
    assert _build(tmp_path).returncode != 0
    first = _executed_at(tmp_path)
    assert set(first) == {"good.ipynb"}  # a failed chapter is not cached
    assert _build(tmp_path).returncode != 0
    assert _executed_at(tmp_path) == first  # the good chapter was not executed again
    _tiny_book(tmp_path, {"good": ["a = 1"], "bad": ["b = 2"]})  # fix the bad chapter (rewrites both files)
    proc = _build(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    second = _executed_at(tmp_path)
    assert second["good.ipynb"] == first["good.ipynb"] and "bad.ipynb" in second
    report = json.loads((tmp_path / "_build" / "build_report.json").read_text())
    assert set(report["chapters"]) == {"good.ipynb", "bad.ipynb"}


def test_the_execution_cache_is_dropped_when_zslib_changes(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_book", BUILD_SCRIPT)
    bb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bb)
    (tmp_path / "zslib").mkdir()
    (tmp_path / "zslib" / "m.py").write_text("x = 1\n")
    cache = tmp_path / "_build" / ".jupyter_cache"
    cache.mkdir(parents=True)
    assert bb.invalidate_if_stale(tmp_path) is True  # no fingerprint recorded yet: cannot trust the cache
    cache.mkdir()
    assert bb.invalidate_if_stale(tmp_path) is False and cache.exists()
    (tmp_path / "zslib" / "m.py").write_text("x = 2\n")
    assert bb.invalidate_if_stale(tmp_path) is True and not cache.exists()


def test_the_execution_cache_is_dropped_when_the_recorded_runs_change(tmp_path):
    """Chapters and the Recorded runs page show results/recorded/: a new recorded run must be shown."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_book", BUILD_SCRIPT)
    bb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bb)
    cache = tmp_path / "_build" / ".jupyter_cache"
    cache.mkdir(parents=True)
    assert bb.invalidate_if_stale(tmp_path) is True
    cache.mkdir()
    assert bb.invalidate_if_stale(tmp_path) is False
    (tmp_path / "results" / "recorded").mkdir(parents=True)
    (tmp_path / "results" / "recorded" / "run-0123.json").write_text("{}")
    doctrees = tmp_path / "_build" / ".doctrees"
    doctrees.mkdir()  # Sphinx's saved environment: kept, it would skip every unchanged page
    assert bb.invalidate_if_stale(tmp_path) is True and not cache.exists() and not doctrees.exists()
    cache.mkdir()
    doctrees.mkdir()
    (tmp_path / "results" / "run-4567.json").write_text("{}")  # a run made here, not recorded: no effect
    assert bb.invalidate_if_stale(tmp_path) is False and cache.exists() and doctrees.exists()


WHERE_CELL = """\
import json
from zslib.engine.profile import repository_root
from zslib.engine.store import recorded_dir, recorded_runs, results_dir
import zslib
print("WHERE", json.dumps({"zslib": zslib.__file__, "checkout": str(repository_root()),
                           "recorded": str(recorded_dir()), "runs": len(recorded_runs()),
                           "results": str(results_dir())}))
"""


@pytest.mark.book
def test_the_build_executes_the_chapters_with_zslib_installed_from_its_wheel(tmp_path):
    """--zslib wheel (the default for the book's checkout): the chapters' kernel imports zslib from the wheel
    installed in _build/reader/env, finds the recorded runs the wheel carries and stores its runs outside the
    checkout; a chapter that works only in a checkout fails the build."""
    import os
    _tiny_book(tmp_path, {"where": [WHERE_CELL],
                          "checkout_only": ["from zslib.engine.profile import repository_root",
                                            "assert repository_root() is not None, 'not a checkout'"]})
    env = {k: v for k, v in os.environ.items() if k != "ZS_RESULTS"}
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(tmp_path), "--no-calibration",
                           "--zslib", "wheel", "--project", str(REPO)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.returncode != 0 and "checkout_only.ipynb (code cell 2:" in proc.stdout, proc.stdout[-3000:]
    from jupyter_cache import get_cache
    cache = get_cache(tmp_path / "_build" / ".jupyter_cache")
    (record,) = [r for r in cache.list_cache_records() if Path(r.uri).name == "where.ipynb"]
    nb = cache.get_cache_bundle(record.pk).nb
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    where = json.loads(text.split("WHERE ", 1)[1].splitlines()[0])
    env_dir = tmp_path / "_build" / "reader" / "env"
    assert Path(where["zslib"]).is_relative_to(env_dir) and where["checkout"] == "None", where
    assert Path(where["recorded"]).is_relative_to(env_dir) and where["runs"] == len(
        list((REPO / "results" / "recorded").glob("*.json")))
    assert where["results"] == str(tmp_path / "_build" / "reader" / "results")
    report = json.loads((tmp_path / "_build" / "build_report.json").read_text())
    assert report["zslib"]["from"] == "wheel" and report["zslib"]["wheel_seconds"] > 0
