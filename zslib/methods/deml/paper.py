"""The DeML paper as one record (Chen and Deng, CVPR 2019; ``chen2019deml``): registered in
:data:`zslib.engine.registry.PAPERS` when this folder is imported, read by every list of papers in the book."""
from __future__ import annotations

from functools import partial

from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper
from zslib.methods.deml import recipes
from zslib.methods.deml.deviations import DEVIATIONS
from zslib.reported import paper_tables

__all__ = ["PAPER"]


def _deviations() -> tuple:
    return DEVIATIONS


def _exercises() -> list:
    # here, not at the top: methods/ imports nothing of teaching/ at load time, and the bank imports this package
    from zslib.teaching.exercises.bank_deml import EXERCISES

    return list(EXERCISES)


def _key_findings():
    # here, not at the top: methods/ imports nothing of present/ at load time, and present/ imports this package
    from zslib.present.deml import key_findings

    return key_findings()


def _explorer():
    # loaded when asked: the explorer imports the runner (seconds), more than registering a paper should cost
    from zslib.methods.deml.explore import deml_attention

    return deml_attention


def _analyses():
    # loaded when asked: the analyses import the runner, more than registering a paper should cost
    from zslib.methods.deml import analyses

    return analyses


PAPER = register_paper(Paper(
    key="deml", name="DeML",
    title="Hybrid-Attention based Decoupled Metric Learning for Zero-Shot Image Retrieval",
    bibkey="chen2019deml", citation="Chen and Deng, CVPR 2019",
    methods=("deml",), chapters=("deml", "deml_experiments", "deml_appendix"), position=1,
    recipes=recipes, reported=partial(paper_tables, "chen2019deml"),
    deviations=_deviations, exercises=_exercises, key_findings=_key_findings,
    explorer=_explorer, analyses=_analyses,
    comparison=recipes.COMPARISON, campaign=recipes.campaign_plan,
    prerequisites={"deml": ("deep_metric_learning", "cml"), "deml_experiments": ("deml",),
                   "deml_appendix": ("deml",)}))
