"""The JRD paper as one record (Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020; ``chu2020jrd``): registered in
:data:`zslib.engine.registry.PAPERS` when this folder is imported, read by every list of papers in the book."""
from __future__ import annotations

from functools import partial

from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper
from zslib.methods.jrd import recipes
from zslib.methods.jrd.deviations import DEVIATIONS
from zslib.reported import paper_tables

__all__ = ["PAPER"]


def _deviations() -> tuple:
    return DEVIATIONS


def _exercises() -> list:
    # here, not at the top: methods/ imports nothing of teaching/ at load time, and the bank imports this package
    from zslib.teaching.exercises.bank_jrd import EXERCISES

    return list(EXERCISES)


def _key_findings():
    # here, not at the top: methods/ imports nothing of present/ at load time, and present/ imports this package
    from zslib.present.jrd import key_findings

    return key_findings()


def _explorer():
    # loaded when asked: the explorer imports the runner (seconds), more than registering a paper should cost
    from zslib.methods.jrd.explore import jrd_bound

    return jrd_bound


def _analyses():
    # loaded when asked: the analyses import the runner, more than registering a paper should cost
    from zslib.methods.jrd import analyses

    return analyses


PAPER = register_paper(Paper(
    key="jrd", name="JRD",
    title="Distance Metric Learning with Joint Representation Diversification",
    bibkey="chu2020jrd", citation="Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020",
    methods=("jrd", "intra"), chapters=("jrd", "jrd_experiments", "jrd_appendix"), position=2,
    recipes=recipes, reported=partial(paper_tables, "chu2020jrd"),
    deviations=_deviations, exercises=_exercises, key_findings=_key_findings,
    explorer=_explorer, analyses=_analyses,
    comparison=recipes.COMPARISON, campaign=recipes.campaign_plan,
    prerequisites={"jrd": ("generalization_gap", "cml"), "jrd_experiments": ("jrd",),
                   "jrd_appendix": ("jrd",)}))
