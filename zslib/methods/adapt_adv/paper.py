"""The Adapt-Adv paper as one record (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): registered in :data:`zslib.engine.registry.PAPERS` when this folder is imported, read by
every list of papers in the book."""
from __future__ import annotations

from functools import partial

from zslib.engine.paper import Paper
from zslib.engine.registry import register_paper
from zslib.methods.adapt_adv import recipes
from zslib.methods.adapt_adv.deviations import DEVIATIONS
from zslib.reported import paper_tables

__all__ = ["PAPER"]


def _deviations() -> tuple:
    return DEVIATIONS


def _exercises() -> list:
    # here, not at the top: methods/ imports nothing of teaching/ at load time, and the bank imports this package
    from zslib.teaching.exercises.bank_adapt_adv import EXERCISES

    return list(EXERCISES)


def _key_findings():
    # here, not at the top: methods/ imports nothing of present/ at load time, and present/ imports this package
    from zslib.present.adapt_adv import key_findings

    return key_findings()


def _explorer():
    # loaded when asked: the explorer imports the runner (seconds), more than registering a paper should cost
    from zslib.methods.adapt_adv.explore import adapt_adv_lambda

    return adapt_adv_lambda


def _analyses():
    # loaded when asked: the analyses import the runner, more than registering a paper should cost
    from zslib.methods.adapt_adv import analyses

    return analyses


PAPER = register_paper(Paper(
    key="adapt_adv", name="Adapt-Adv",
    title=("A framework to enhance generalization of deep metric learning methods using "
           "general discriminative feature learning and class adversarial neural networks"),
    bibkey="alkaabi2022adaptadv", citation="Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022",
    methods=("adapt_adv",), chapters=("adapt_adv", "adapt_adv_experiments", "adapt_adv_appendix"), position=3,
    recipes=recipes, reported=partial(paper_tables, "alkaabi2022adaptadv"),
    deviations=_deviations, exercises=_exercises, key_findings=_key_findings,
    explorer=_explorer, analyses=_analyses,
    comparison=recipes.COMPARISON, campaign=recipes.campaign_plan,
    prerequisites={"adapt_adv": ("deep_metric_learning", "cml"), "adapt_adv_experiments": ("adapt_adv",),
                   "adapt_adv_appendix": ("adapt_adv",)}))
