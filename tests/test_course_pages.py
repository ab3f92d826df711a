"""The course pages (book/syllabus.md, book/project.md): in the table of contents, every chapter of the book on the
syllabus once, every exercise the syllabus sets exists as a checked exercise of its chapter, every link leads to a
page of the book, and the project page's code runs against zslib's API."""
import json
import re
from pathlib import Path

import torch
import yaml

from zslib.teaching.exercises import exercises_of
from zslib.teaching.grading import exercise_names

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"


def _toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_both_pages_are_in_the_table_of_contents():
    assert {"book/syllabus", "book/project"} <= set(_toc_files())


def _weeks() -> list[tuple[str, str, str]]:
    text = (BOOK / "syllabus.md").read_text()
    return re.findall(r"^\| (\d+) \| (.*?) \| (.*?) \|$", text, re.M)


def test_every_chapter_is_on_the_syllabus_once_and_after_what_it_needs():
    linked = [m for _, chapters, _ in _weeks() for m in re.findall(r"\]\(([\w.]+)\)", chapters)]
    stems = [Path(m).stem for m in linked]
    book = [Path(f).name for f in _toc_files() if f not in ("book/syllabus", "book/project")]
    assert sorted(stems) == sorted(book) and len(set(stems)) == len(stems)
    assert len(_weeks()) == 10
    from zslib.teaching.path import prerequisites

    for chapter in stems:  # the chapter cards' prerequisites come earlier in the syllabus
        assert all(stems.index(p) < stems.index(chapter) for p in prerequisites(chapter)), chapter


def _numbered_exercises(chapter: str) -> dict[int, list[str]]:
    """Exercise number -> the names its cells check, read from the chapter's headings and check calls."""
    nb = json.loads((BOOK / f"{chapter}.ipynb").read_text())
    out, current = {}, None
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        m = re.search(r"^#+ Exercise (\d+)", text, re.M) if cell["cell_type"] == "markdown" else None
        if m:
            current = int(m.group(1))
            out[current] = []
        elif cell["cell_type"] == "markdown" and text.startswith("### More exercises"):
            current = None
        elif cell["cell_type"] == "code" and current is not None:
            out[current] += [n for n in exercise_names({"cells": [cell]}) if n not in out[current]]
    return out


def test_every_exercise_the_syllabus_sets_is_a_checked_exercise_of_its_chapter():
    set_ = [s for _, _, s in _weeks()]
    found = 0
    for item in "; ".join(set_).split("; "):
        m = re.fullmatch(r"(\w+) (\d+)(?:-(\d+))?", item.strip())
        if not m:
            assert "project" in item, item
            continue
        chapter, first, last = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))
        numbered = _numbered_exercises(chapter)
        registered = {e.name for e in exercises_of(chapter)}
        for n in range(first, last + 1):
            assert numbered.get(n), f"{chapter} has no checked exercise {n}"
            assert set(numbered[n]) <= registered
            found += 1
    assert found > 40


def test_the_links_lead_to_pages_of_the_book():
    pages = {Path(f).name for f in _toc_files()}
    for page in ("syllabus.md", "project.md"):
        for target in re.findall(r"\]\(([^)#\s]+)\)", (BOOK / page).read_text()):
            assert Path(target).stem in pages and (BOOK / target).is_file(), (page, target)


def test_the_project_pages_code_runs_against_zslibs_api():
    from zslib.engine.registry import METHODS

    blocks = re.findall(r"```python\n(.*?)```", (BOOK / "project.md").read_text(), re.S)
    assert len(blocks) == 3
    ns = {"my_term": lambda emb, labels: emb.pow(2).sum(1).mean()}  # a stand-in for the student's R
    try:
        exec(blocks[0], ns)
        method = ns["MyRegularizer"]
        assert METHODS["my_regularizer"] is method
        from zslib.experiment import Config

        config = Config.from_profile("quick", method="my_regularizer", method_params={"weight": 0.5})
        mod = method(config, torch.nn.Linear(6, 4).double(), 3)
        images, labels = torch.randn(8, 6, dtype=torch.float64), torch.arange(4).repeat(2)
        terms = mod.terms("main", mod_model := torch.nn.Linear(6, 4).double(), images, labels)
        assert set(terms) == {config.loss, "mine"}
        assert torch.isclose(terms["mine"], 0.5 * mod_model(images).pow(2).sum(1).mean())
        for block in blocks[1:]:  # the imports and the names they use exist; nothing is trained here
            for line in block.splitlines():
                if line.startswith("from "):
                    exec(line, ns)
        assert callable(ns["choose_on_validation"]) and len(ns["TEST_SEEDS"]) == 5
    finally:
        METHODS._items.pop("my_regularizer", None)
