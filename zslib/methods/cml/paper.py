"""The CML paper as one record (Chen, Deng, Wang and Zhang, IEEE TNNLS 2022; ``chen2022cml``): registered in
:data:`zslib.engine.registry.PAPERS` when this folder is imported, read by every list of papers in the book."""
from __future__ import annotations

from functools import partial

from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper
from zslib.methods.cml import recipes
from zslib.methods.cml.deviations import DEVIATIONS
from zslib.reported import paper_tables

__all__ = ["PAPER"]


def _deviations() -> tuple:
    return DEVIATIONS


def _exercises() -> list:
    # here, not at the top: methods/ imports nothing of teaching/ at load time, and the bank imports this package
    from zslib.teaching.exercises.bank_cml import EXERCISES

    return [e for e in EXERCISES if e.name.split(".")[0] in PAPER.chapters]


def _key_findings():
    # here, not at the top: methods/ imports nothing of present/ at load time, and present/ imports this package
    from zslib.present.cml import key_findings

    return key_findings()


def _explorer():
    # loaded when asked: the explorer imports the runner (seconds), more than registering a paper should cost
    from zslib.methods.cml.explore import cml_confusion

    return cml_confusion


PAPER = register_paper(Paper(
    key="cml", name="CML",
    title="Confusion-Based Metric Learning for Regularizing Zero-Shot Image Retrieval and Clustering",
    bibkey="chen2022cml", citation="Chen, Deng, Wang and Zhang, IEEE TNNLS 2022",
    methods=("cml",), chapters=("cml", "cml_experiments", "cml_ablations", "cml_appendix"), position=0,
    recipes=recipes, reported=partial(paper_tables, "chen2022cml"),
    deviations=_deviations, exercises=_exercises, key_findings=_key_findings,
    explorer=_explorer,
    comparison=recipes.COMPARISON, campaign=recipes.campaign_plan,
    prerequisites={"cml": ("deep_metric_learning", "generalization_gap"), "cml_experiments": ("cml",),
                   "cml_ablations": ("cml",),
                   "cml_appendix": ("cml",)},
    shared_methods={"cml": ("baseline", "pretrained")}))
