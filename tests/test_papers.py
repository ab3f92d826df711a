"""One record per paper (zslib.engine.paper.Paper) in one registry (zslib.engine.registry.PAPERS), and every list
of papers in the book built from it: the index page's findings, the deviations tables, the chapter cards and the
exercises; the comparison and the campaign hold every paper; the protocol has one home (each paper's recipes)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from zslib.engine.config import Config
from zslib.engine.paper import Paper
from zslib.engine.registry import METHODS, PAPERS, get_paper, register_paper

ROOT = Path(__file__).resolve().parents[1]
KEYS = list(PAPERS)


def test_every_paper_folder_has_one_record_and_the_registry_lists_them_in_the_books_order():
    folders = sorted(p.parent.name for p in (ROOT / "zslib" / "methods").glob("*/method.py"))
    assert sorted(PAPERS) == folders
    toc = re.findall(r"file:\s*book/(\w+)", (ROOT / "_toc.yml").read_text())
    assert KEYS == sorted(KEYS, key=lambda k: toc.index(PAPERS[k].chapter))
    for key, paper in PAPERS.items():
        assert paper.key == key and isinstance(paper, Paper)
        assert all((ROOT / "book" / f"{c}.ipynb").is_file() for c in paper.chapters), paper.chapters
        assert re.search(rf"@\w+\{{{paper.bibkey},", (ROOT / "references.bib").read_text()), paper.bibkey


@pytest.mark.parametrize("key", KEYS)
def test_a_papers_methods_are_registered_and_name_the_paper(key):
    paper = PAPERS[key]
    assert METHODS[paper.method].paper == paper.bibkey
    assert set(paper.methods) <= set(METHODS)
    assert {name for name, cls in METHODS.items() if cls.paper == paper.bibkey} <= set(paper.methods)


@pytest.mark.parametrize("key", KEYS)
def test_a_papers_parts_load_and_belong_to_it(key):
    from zslib.teaching.exercises import EXERCISES

    paper = PAPERS[key]
    tables = paper.reported()
    assert tables and all(t["paper"] == paper.bibkey for t in tables.values())
    assert len(paper.deviations()) >= 5
    mine = paper.exercises()
    assert mine and {e.name.split(".")[0] for e in mine} <= set(paper.chapters)
    assert {e.name for e in EXERCISES if e.name.split(".")[0] in paper.chapters} == {e.name for e in mine}
    assert callable(paper.explorer())


def test_every_paper_reaches_the_index_page(monkeypatch):
    """The index page's findings hold one bullet per paper with the first sentence of its own key-findings box
    (each box replaced by one that names its paper, so the test reads no recorded run)."""
    import dataclasses

    from zslib.analysis.findings import findings_box
    from zslib.methods import book_findings

    for key in KEYS:
        box = lambda key=key: findings_box([f"finding of {key}.", "more."])  # noqa: E731
        monkeypatch.setitem(PAPERS, key, dataclasses.replace(PAPERS[key], key_findings=box))
    text = book_findings.book_findings()
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert bullets == [f"- **{p.name}** ([chapter]({p.chapter}.ipynb)): finding of {p.key}." for p in PAPERS.values()]
    committed = (ROOT / "book" / "_findings.md").read_text()
    assert all(f"- **{p.name}** ([chapter]({p.chapter}.ipynb))" in committed for p in PAPERS.values())


def test_every_paper_reaches_the_deviations_table_the_comparison_and_the_campaign():
    from zslib.analysis import compare
    from zslib.analysis.deviations import deviation_table
    from zslib.campaign import plan

    compared = {entry.paper for entry in compare.ENTRIES}
    for paper in PAPERS.values():
        assert deviation_table(paper.key).startswith("| What | The paper |")
        assert paper.bibkey in compared, paper.key
        assert paper.method in plan.METHODS, paper.key


def test_every_paper_reaches_the_chapter_cards():
    from zslib.teaching import path

    assert set(path.prerequisites("compare")) == {p.chapter for p in PAPERS.values()}
    for paper in PAPERS.values():
        for chapter in paper.chapters:
            assert set(paper.methods) <= set(path.chapter_methods(chapter)), chapter
        assert paper.method in path.chapter_methods("compare")


def test_a_key_is_registered_once_and_an_unknown_key_lists_the_papers():
    paper = PAPERS["deml"]
    assert register_paper(paper) is paper  # registering the same record again changes nothing
    import dataclasses

    with pytest.raises(ValueError, match="registered already"):
        register_paper(dataclasses.replace(paper, position=99))
    with pytest.raises(KeyError, match="the papers are"):
        get_paper("nosuch")
    with pytest.raises(TypeError, match="Paper"):
        register_paper("deml")


# -- the protocol's one home: what the comparison and the campaign build is what the recipes build


def test_the_comparison_builds_adapt_adv_and_deml_as_their_recipes_do():
    from zslib.analysis import compare
    from zslib.methods.adapt_adv import recipes as adapt
    from zslib.methods.deml import recipes as deml

    entries = {entry.paper: entry for entry in compare.ENTRIES}
    for base in (Config.from_profile("real"), Config.from_profile("real", validation_fraction=0.3)):
        aa = entries[PAPERS["adapt_adv"].bibkey]
        assert aa.build(base, None) == adapt.triplet_base(base)
        for lambda0, adversary in aa.candidates.values():
            expected = adapt.adapt_adv(base, adversary=adversary, lambda0=lambda0)
            assert aa.build(base, (lambda0, adversary)).hash == expected.hash
        assert {v for v, on in aa.candidates.values() if on} == set(adapt.LAMBDA0S)
        dm = entries[PAPERS["deml"].bibkey]
        assert dm.build(base, None) == deml.binomial_base(base)
        assert {dm.build(base, v).hash for v in dm.candidates.values()} == {
            deml.deml(base, 4, v).hash for v in deml.LAMBDA0S}


def test_the_campaign_runs_adapt_advs_parts_apart_and_together_at_a_lambda0_of_the_papers_set():
    from zslib.campaign.plan import RECIPES, method_plan
    from zslib.engine.registry import METHODS as REGISTERED
    from zslib.methods.adapt_adv import recipes as adapt

    for recipe in RECIPES.values():
        plan = method_plan("adapt_adv", recipe)
        parts = {(c["use_gdfl"], c["use_adversary"]) for c in plan.candidates.values()}
        assert parts == {(True, False), (False, True), (True, True)}
        assert all("lambda0" not in c for c in plan.candidates.values())  # the method's own lambda0 ...
    assert REGISTERED["adapt_adv"].params["lambda0"].default in adapt.LAMBDA0S  # ... one of the paper's


def test_the_chapters_rows_are_found_by_name():
    """The deviations tables describe the recipe's row of that name, so reordering the rows changes nothing."""
    from zslib.analysis.deviations import recipe_row
    from zslib.methods.adapt_adv import deviations, recipes

    assert deviations.chapter_config() == recipes.real_configs()[recipes.METHOD]
    assert deviations.chapter_config().method_params["use_adversary"] is True
    with pytest.raises(KeyError, match="has no row 'nosuch'"):
        recipe_row(recipes, "nosuch")()
