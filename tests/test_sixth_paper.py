"""A sixth paper, declared in a temporary package, reaches every list of papers without a shared module edited.

A real paper needs these files (:data:`REAL_PAPER_FILES`); the toy below declares what the shared modules read from
them -- one method, one recipe (its comparison entry and its campaign plan), a reported table, its deviations, its
exercises, its key findings and its chapter's prerequisites -- in one package outside ``zslib``, and the index
findings, the comparison, the deviations table, the campaign plan, the command line's choices and the chapter cards
list it."""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from zslib.engine.registry import METHODS, PAPERS

#: What adding a paper touches: its own folders and files, and no shared module.
REAL_PAPER_FILES = (
    "zslib/methods/<paper>/ (method.py, the math, recipes.py, deviations.py, explore.py, paper.py)",
    "zslib/present/<paper>/ (its chapters' studies, tables, figures, sentences, key findings)",
    "zslib/teaching/exercises/bank_<paper>.py (its checked exercises)",
    "book/<paper>.ipynb (and its experiments chapter)",
    "zslib/reported.py: the paper's own tables, as data",
    "_toc.yml: the chapter's place",
    "references.bib: the paper's entry",
    "results/recorded/: its recorded runs (and zslib/engine/catalog.json regenerated from the registries)",
)

_METHOD = '''
from zslib.engine.method import Method
from zslib.engine.registry import register


@register
class Toy(Method):
    name = "toy"
    title = "a toy regularizer"
    paper = "toy2030"
    equations = "L = L_m"

    def terms(self, phase, model, images, labels):
        return {self.loss_name: self.loss(model(images), labels)}
'''

_PAPER = '''
from zslib.analysis.deviations import COMMON, Deviation, common_rows
from zslib.analysis.entry import Entry
from zslib.analysis.findings import findings_box
from zslib.campaign.plan import MethodPlan
from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper

from toypaper import method  # noqa: F401  (registers the method)


def toy(base, weight=None):
    return base.replace(loss="triplet", method="baseline" if weight is None else "toy", method_params={})


COMPARISON = Entry("triplet", "weight", toy, {"weight 1": 1.0}, quick=("weight 1",))


def campaign_plan(recipe):
    return MethodPlan("toy", {"loss": "triplet", "method": "toy", "method_params": {}}, "on or off", {"on": {}})


PAPER = register_paper(Paper(
    key="toy", name="Toy", title="A toy paper", bibkey="toy2030", citation="Nobody, 2030", methods=("toy",),
    chapters=("toy",), position=99, recipes=__import__("sys").modules[__name__],
    reported=lambda: {"1": {"paper": "toy2030", "columns": ["R@1"], "rows": [{"method": "Toy", "R@1": 50.0}]}},
    deviations=lambda: (*common_rows({k: "the paper's" for k in COMMON}), Deviation("the toy", "paper's", "book's", "a toy")),
    exercises=lambda: [], key_findings=lambda: findings_box(["the toy finding.", "more."]),
    comparison=COMPARISON, campaign=campaign_plan, prerequisites={"toy": ("cml",)}))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    package = tmp_path / "toypaper"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "method.py").write_text(textwrap.dedent(_METHOD))
    (package / "paper.py").write_text(textwrap.dedent(_PAPER))
    monkeypatch.syspath_prepend(str(tmp_path))
    list(PAPERS), list(METHODS)  # the book's own papers first
    try:
        yield importlib.import_module("toypaper.paper").PAPER
    finally:
        PAPERS._items.pop("toy", None)
        METHODS._items.pop("toy", None)
        for name in [m for m in sys.modules if m.startswith("toypaper")]:
            del sys.modules[name]


def test_a_toy_sixth_paper_reaches_every_list_of_papers(toy):
    from zslib.analysis.compare import all_entries, regime_config, validation_grid
    from zslib.analysis.deviations import deviation_table
    from zslib.campaign.plan import RECIPES, candidate_configs, method_plan, method_plans
    from zslib.campaign.run import campaign_configs
    from zslib.engine.catalog import build
    from zslib.methods.book_findings import book_findings
    from zslib.teaching import path

    assert list(PAPERS)[-1] == "toy" and len(PAPERS) == 6
    assert "- **Toy** ([chapter](toy.ipynb)): the toy finding." in book_findings()
    entry = next(e for e in all_entries() if e.name == "Toy")
    assert entry.paper == "toy2030"
    grid = validation_grid(entry, regime_config("quick"), "quick")
    assert grid["weight 1"].method == "toy" and grid["off"].method == "baseline"
    assert grid["off"].validation_fraction == 0.3
    assert deviation_table("toy").startswith("| What | The paper |") and "the toy" in deviation_table("toy")
    assert "toy" in method_plans() and method_plan("toy", RECIPES["flowers102"]).axis == "on or off"
    assert set(candidate_configs(method_plan("toy", RECIPES["flowers102"]), RECIPES["flowers102"])) == {"off", "on"}
    assert set(campaign_configs("flowers102", methods=("toy",))["test"]) == {"toy"}
    assert {"key": "toy", "name": "Toy", "method": "toy", "finetune": True} in build()["papers"]
    assert "toy" in path.prerequisites("compare") and path.prerequisites("toy") == ("cml",)
    assert path.chapter_methods("toy") == ("toy",) and "toy" in path.chapter_methods("compare")
    assert toy.exercises() == []


def test_the_toy_leaves_the_book_as_it_was(toy):
    PAPERS._items.pop("toy")
    from zslib.analysis.compare import all_entries

    assert [e.name for e in all_entries()] == [p.name for p in PAPERS.values()]
    assert len(PAPERS) == 5
