"""The ZSML paper as one record (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``): registered in
:data:`zslib.engine.registry.PAPERS` when this folder is imported, read by every list of papers in the book."""
from __future__ import annotations

from functools import partial

from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper
from zslib.methods.zsml import recipes
from zslib.methods.zsml.deviations import DEVIATIONS
from zslib.reported import paper_tables

__all__ = ["PAPER"]


def _deviations() -> tuple:
    return DEVIATIONS


def _exercises() -> list:
    # here, not at the top: methods/ imports nothing of teaching/ at load time, and the bank imports this package
    from zslib.teaching.exercises.bank_zsml import EXERCISES

    return list(EXERCISES)


def _key_findings():
    # here, not at the top: methods/ imports nothing of present/ at load time, and present/ imports this package
    from zslib.present.zsml.sentences import key_findings

    return key_findings()


def _explorer():
    # loaded when asked: the explorer imports the runner (seconds), more than registering a paper should cost
    from zslib.methods.zsml.explore import zsml_labels

    return zsml_labels


def _analyses():
    # loaded when asked: the analyses import the runner, more than registering a paper should cost
    from zslib.methods.zsml import analyses

    return analyses


PAPER = register_paper(Paper(
    key="zsml", name="ZSML",
    title="Zero-shot Metric Learning",
    bibkey="xu2019zsml", citation="Xu, Cao, Yang, Yang and Deng, IJCAI 2019",
    methods=("zsml", "nca"), chapters=("zsml", "zsml_experiments", "zsml_appendix"), position=4,
    recipes=recipes, reported=partial(paper_tables, "xu2019zsml"),
    deviations=_deviations, exercises=_exercises, key_findings=_key_findings,
    explorer=_explorer, analyses=_analyses,
    comparison=recipes.COMPARISON, campaign=recipes.campaign_plan,
    prerequisites={"zsml": ("metrics", "cml"), "zsml_experiments": ("zsml",),
                   "zsml_appendix": ("zsml",)}))
