"""The book as a whole: structure checks (fast) and the executed build (the integration test)."""
from __future__ import annotations

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
CHAPTER_BUDGET_S = 180  # quick profile, 2-core machine
BOOK_BUDGET_S = 40 * 60


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc.get("parts", toc.get("chapters", [])))
    return files


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
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    setup = code[0]
    assert f"git+{repository_url()}" in setup, \
        f"{path.name}: the setup cell must install zslib from {repository_url()} (_config.yml)"
    assert 'ZS_PROFILE = "quick"  # @param ["quick", "full"]' in setup
    assert "zslib.get_profile()" in setup
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Learning goals" in text, f"{path.name}: no '## Learning goals' section"
    assert "## Exercises" in text, f"{path.name}: no '## Exercises' section"


# ---------------------------------------------------------------- the executed build

@pytest.fixture(scope="module")
def built_book():
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT)], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.fail("the book build failed:\n" + proc.stdout[-8000:], pytrace=False)
    return REPO / "_build" / "html"


@pytest.mark.book
def test_every_toc_entry_produced_an_html_page(built_book):
    assert (built_book / "index.html").exists()
    for entry in toc_files():
        assert (built_book / f"{entry}.html").exists(), f"no HTML page for {entry}"


@pytest.mark.book
def test_chapters_fit_the_quick_profile_budget(built_book):
    times = json.loads((REPO / "_build" / "execution_times.json").read_text())
    expected = {nb.relative_to(REPO).as_posix() for nb in notebooks()}
    assert expected <= set(times), f"chapters without an execution record: {expected - set(times)}"
    slow = {k: v for k, v in times.items() if v is None or v > CHAPTER_BUDGET_S}
    assert not slow, f"chapters over the {CHAPTER_BUDGET_S} s budget: {slow}"
    assert sum(times.values()) <= BOOK_BUDGET_S


@pytest.mark.book
def test_colab_button_points_at_the_chapter(built_book):
    url = repository_url().replace("https://github.com/", "")
    for nb in notebooks():
        rel = nb.relative_to(REPO).as_posix()
        html = (built_book / rel).with_suffix(".html").read_text()
        assert f"https://colab.research.google.com/github/{url}/blob/main/{rel}" in html


@pytest.mark.book
def test_a_failing_cell_fails_the_build_and_names_the_chapter(tmp_path):
    """A tiny book with one chapter that raises: the build script must exit non-zero and say which."""
    (tmp_path / "_config.yml").write_text(textwrap.dedent("""\
        title: broken
        only_build_toc_files: true
        execute:
          execute_notebooks: cache
          timeout: 60
        """))
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: broken_chapter\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Broken"),
        nbformat.v4.new_code_cell("x = 1 / 0"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "broken_chapter.ipynb")
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode != 0
    assert "broken_chapter.ipynb" in proc.stdout and "ZeroDivisionError" in proc.stdout
    assert "These chapters raised while executing" in proc.stdout
