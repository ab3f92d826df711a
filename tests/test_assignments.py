"""The assignment pack: solutions hidden in the book, stripped from the student version, and an autograder
that gives a solved notebook full marks and an unsolved one zero."""
import html as html_text
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zslib.teaching.assignments import (BOOK_DIR, HIDE_TAG, SOLUTION_TAG, build_pack, exercise_names, grade,
                                        solution_text, strip_solutions)
from zslib.teaching.exercises import REGISTRY

CHAPTERS = sorted(p for p in BOOK_DIR.glob("*.ipynb") if p.stem != "recorded_runs")
#: The pages a student works through: a paper's appendix (its settings, paper-setting and fine-tuned rows) is
#: reference material read beside its chapter, and carries no exercises of its own.
TAUGHT = [p for p in CHAPTERS if not p.stem.endswith("_appendix")]


def _nb(cells):
    for i, cell in enumerate(cells):
        cell["id"] = f"tiny{i}"
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def _code(text, tags=()):
    return {"cell_type": "code", "metadata": {"tags": list(tags)} if tags else {}, "source": text,
            "outputs": [], "execution_count": None}


TINY = _nb([
    {"cell_type": "markdown", "metadata": {}, "source": "# Tiny chapter\n\n### Exercise 1"},
    _code("from zslib.teaching.exercises import check"),
    _code("def floor():\n    # BEGIN SOLUTION\n    import math\n    return math.log(1 + 49 * math.exp(-4))\n"
          "    # END SOLUTION\n\nanswer = 1.0  # SOLUTION", tags=(SOLUTION_TAG, HIDE_TAG)),
    _code('check("deep_metric_learning.proxy_nca_floor", floor())'),
    _code('check("metrics.duplicated_r1", answer)'),
])


def _sources(nb):
    return "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"])


def test_strip_solutions_leaves_stubs_and_no_solution_text():
    student = strip_solutions(TINY)
    text = _sources(student)
    for line in solution_text(_sources(TINY)):
        assert line not in text
    assert "math.exp(-4)" not in text and "answer = ...  # your answer" in text and "def floor():" in text
    stub = student["cells"][2]
    assert stub["metadata"]["tags"] == []  # the stub is shown to students


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_solution_cell_of_the_book_is_hidden_and_stripped(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        text = "".join(cell["source"])
        if SOLUTION_TAG in tags:
            assert HIDE_TAG in tags, f"{path.name}: a solution cell without the {HIDE_TAG} tag:\n{text[:200]}"
            assert cell["cell_type"] != "code" or solution_text(text), (
                f"{path.name}: a solution cell whose markers strip nothing (a '# SOLUTION' line needs an "
                f"assignment on that line; use BEGIN/END SOLUTION around a statement of several lines):\n{text[:300]}")
        if "# BEGIN SOLUTION" in text or text.rstrip().endswith("# SOLUTION"):
            assert SOLUTION_TAG in tags, f"{path.name}: solution markers in an untagged cell:\n{text[:200]}"
    student = _sources(strip_solutions(nb))
    for cell in nb["cells"]:
        if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            for line in solution_text("".join(cell["source"])):
                assert line not in student, f"{path.name}: the student version still holds {line!r}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_code_cell_of_the_student_version_is_valid_python(path):
    """A "# SOLUTION" mark on the last line of a statement that spans several lines would leave a broken
    stub: every code cell of the student version must still parse (IPython magics and shell lines aside)."""
    import ast

    for cell in strip_solutions(json.loads(path.read_text()))["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        code = "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())
        try:
            ast.parse(code)
        except SyntaxError as e:
            pytest.fail(f"{path.name}: the student version of this cell does not parse ({e}):\n{text[:400]}")


@pytest.mark.parametrize("path", TAUGHT, ids=lambda p: p.stem)
def test_every_chapter_has_three_checked_exercises_known_to_the_registry(path):
    nb = json.loads(path.read_text())
    names = exercise_names(nb)
    assert len(names) >= 3, f"{path.name} checks {names}"
    assert all(n in REGISTRY for n in names)
    assert sum(SOLUTION_TAG in c.get("metadata", {}).get("tags", []) for c in nb["cells"]) >= 1


def test_every_registered_exercise_is_used_by_its_chapter():
    used = {n for p in CHAPTERS for n in exercise_names(json.loads(p.read_text()))}
    assert set(REGISTRY) - used == set()


def test_the_pack_student_version_has_no_solution_and_the_grader_scores_it(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    (book / "tiny.ipynb").write_text(json.dumps(TINY))
    pack = build_pack(tmp_path / "pack", book_dir=book)
    student = (pack / "student" / "tiny.ipynb").read_text()
    assert "math.exp(-4)" not in student and "1.0  # SOLUTION" not in student
    assert "math.exp(-4)" in (pack / "instructor" / "tiny.ipynb").read_text()
    rubric = json.loads((pack / "rubric.json").read_text())
    assert rubric == {"tiny": {"deep_metric_learning.proxy_nca_floor": 1, "metrics.duplicated_r1": 1}}
    readme = (pack / "README.md").read_text()
    assert "python -m zslib grade" in readme and "grade-all" in readme and "measured on a 2-core CPU" in readme
    assert "| not measured yet |" in readme  # the GPU column
    assert isinstance(json.loads((pack / "grader" / "hidden.json").read_text())["seed"], int)
    assert "seed" not in "".join(p.read_text() for p in (pack / "student").iterdir())

    # user=None: the grader's own user (as root, the default "nobody" needs a Python it can run)
    solved = grade(pack / "instructor" / "tiny.ipynb", rubric=pack / "rubric.json", timeout=120, user=None)
    assert (solved.points, solved.total) == (2, 2), solved.report()
    unsolved = grade(pack / "student" / "tiny.ipynb", rubric=pack / "rubric.json", timeout=120, user=None)
    assert (unsolved.points, unsolved.total) == (0, 2), unsolved.report()
    assert "failed: not attempted" in unsolved.report()


def test_the_cli_writes_a_pack_of_every_chapter(tmp_path):
    out = subprocess.run([sys.executable, "-m", "zslib", "assignments", "--out", str(tmp_path / "p"),
                          "--chapter", "metrics"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p" / "student" / "metrics.ipynb").exists()
    bad = subprocess.run([sys.executable, "-m", "zslib", "grade", str(tmp_path / "missing.ipynb")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such notebook" in bad.stderr


_SOLUTION_CELL = re.compile(r'<div class="cell tag_solution[^"]*">\s*<details class="[^"]*"(?P<attrs>[^>]*)>'
                            r'(?P<body>.*?)</details>', re.S)


def _check_solutions_collapsed(html: str, sources: list[str]) -> int:
    """Every solution's first line sits inside a closed <details> of a solution cell, nowhere else."""
    hidden = [m for m in _SOLUTION_CELL.finditer(html)]
    assert all("open" not in m.group("attrs") for m in hidden), "a solution cell is rendered open"
    inside = " ".join(m.group("body") for m in hidden)
    outside = _SOLUTION_CELL.sub("", html)
    plain = lambda s: html_text.unescape(re.sub(r"<[^>]+>", "", s))  # noqa: E731  (code is split into spans)
    for src in sources:
        marker = solution_text(src)[0]
        assert marker in plain(inside), f"solution not inside a collapsed cell: {marker!r}"
        assert marker not in plain(outside), f"solution text visible outside the collapsed cell: {marker!r}"
    return len(hidden)


@pytest.mark.book
def test_a_solution_cell_renders_collapsed_in_jupyter_book(tmp_path):
    """A tiny book with the tags the chapters use: the solution is inside a closed <details> (collapsed
    without JavaScript), and its text appears nowhere else on the page."""
    import shutil

    jb = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    if not Path(jb).exists():
        pytest.skip("jupyter-book is not installed")
    nb = json.loads(json.dumps(TINY))
    nb["cells"][3]["source"] = "print(floor())"  # no check calls: the tiny book needs no zslib kernel state
    nb["cells"][4]["source"] = "print(answer)"
    (tmp_path / "tiny.ipynb").write_text(json.dumps(nb))
    (tmp_path / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: force\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: tiny\n")
    subprocess.run([jb, "build", str(tmp_path)], check=True, capture_output=True, timeout=600)
    html = (tmp_path / "_build" / "html" / "tiny.html").read_text()
    assert _check_solutions_collapsed(html, ["".join(TINY["cells"][2]["source"])]) == 1


@pytest.mark.book
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_built_pages_show_no_solution_unless_opened(path, built_book):
    page = built_book / "book" / f"{path.stem}.html"  # this session's build, never a stale one
    nb = json.loads(path.read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if SOLUTION_TAG in c.get("metadata", {}).get("tags", [])]
    assert _check_solutions_collapsed(page.read_text(), sources) == len(sources)
