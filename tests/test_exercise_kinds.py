"""What each checked exercise asks of a student, listed, and the rule that no exercise is answered by reading one
printed number: an exercise decided by the chapter's numbers is a prediction, decided by the 95% interval of a
paired difference (three answers: above, below, no clear effect), never by the sign of a noisy mean; every method
chapter has an experiment of the student's own."""
import ast
import json
import math
from pathlib import Path

import pytest

from zslib.engine.registry import PAPERS
from zslib.teaching.exercises import REGISTRY, exercises_of, verdict
from zslib.teaching.exercises.kinds import (ASKS, ChoiceExercise, ExperimentExercise, FunctionExercise,
                                            NumberExercise, PredictionExercise, ReasoningExercise)
from zslib.teaching.grading import exercise_names

BOOK = Path(__file__).resolve().parents[1] / "book"

#: Every checked exercise of the book and what it asks: implementation (write the function the chapter teaches),
#: derivation (a number from the chapter's equations), reasoning (a word that follows from the definitions),
#: prediction (decided by the 95% interval the page shows), experiment (a small experiment of the student's own).
KINDS = {
    "how_to_use.batch_size": "derivation",
    "how_to_use.iteration_factor": "derivation",
    "how_to_use.variant_leaves_profile": "reasoning",
    "zero_shot_problem.recall_at_1": "implementation",
    "zero_shot_problem.unit_distance": "derivation",
    "zero_shot_problem.tuning_classes": "reasoning",
    "datasets.pair_counts": "implementation",
    "datasets.negatives_per_positive": "derivation",
    "datasets.shortcut_split": "reasoning",
    "metrics.map_at_r": "implementation",
    "metrics.purity": "implementation",
    "metrics.duplicated_r1": "derivation",
    "metrics.singleton_clusters": "reasoning",
    "deep_metric_learning.contrastive": "implementation",
    "deep_metric_learning.triplet": "implementation",
    "deep_metric_learning.proxy_nca_floor": "derivation",
    "deep_metric_learning.unnormalized_norms": "reasoning",
    "deep_metric_learning_compare.binomial": "implementation",
    "deep_metric_learning_compare.negative_share": "derivation",
    "deep_metric_learning_compare.hard_negatives": "derivation",
    "deep_metric_learning_compare_proxies.proxy_nca": "implementation",
    "deep_metric_learning_compare_proxies.positive_gradient": "derivation",
    "deep_metric_learning_compare_proxies.deviance_fit": "prediction",
    "generalization_gap.intra_class_distance": "implementation",
    "generalization_gap.triangle_penalty": "derivation",
    "generalization_gap.penalty_step": "derivation",
    "cml.energy_confusion": "implementation",
    "cml.diversity_confusion": "implementation",
    "cml.hoeffding": "derivation",
    "cml.ec_rates": "derivation",
    "cml.ec_descent": "experiment",
    "cml.confusion_effect": "prediction",
    "cml_experiments.diversity": "implementation",
    "cml_experiments.dc_and_diversity": "derivation",
    "cml_experiments.unseen_diversity": "prediction",
    "cml_ablations.interval": "implementation",
    "cml_ablations.detectable_effect": "derivation",
    "cml_ablations.dropout_effect": "prediction",
    "deml.activation_decay": "implementation",
    "deml.stationary_mass": "derivation",
    "deml.walk_gaps": "experiment",
    "deml.walk_bipartite": "reasoning",
    "deml.adversary_similarity": "prediction",
    "deml_experiments.central_mass": "implementation",
    "deml_experiments.random_overlap": "derivation",
    "deml_experiments.gaussian_centre": "reasoning",
    "jrd.jrs": "implementation",
    "jrd.two_samples": "derivation",
    "jrd.jrs_descent": "experiment",
    "jrd.lambda_vs_jmmd": "prediction",
    "jrd_experiments.mixture_kernel": "implementation",
    "jrd_experiments.paired_interval": "implementation",
    "jrd_experiments.smallest_weight": "prediction",
    "adapt_adv.additive_attention": "implementation",
    "adapt_adv.lambda_half": "derivation",
    "adapt_adv.game": "experiment",
    "adapt_adv.larger_gain": "prediction",
    "adapt_adv_experiments.lambda_schedule": "implementation",
    "adapt_adv_experiments.lambda_lag": "derivation",
    "adapt_adv_experiments.stopped_vs_gdfl": "prediction",
    "zsml.relation": "implementation",
    "zsml.label_step": "derivation",
    "zsml.label_sign": "reasoning",
    "zsml.cross_update": "experiment",
    "zsml.versus_euclidean": "prediction",
    "zsml_experiments.uniform_share": "implementation",
    "zsml_experiments.every_pair_cost": "derivation",
    "zsml_experiments.chosen_alpha": "prediction",
    "compare.choice_rule": "implementation",
    "compare.selection_bias": "reasoning",
    "compare.adapt_adv_vs_paper": "prediction",
    "compare.detectable": "derivation",
    "compare.map_at_r_by_hand": "derivation",
}

#: the class that checks each kind
CHECKED_BY = {"implementation": FunctionExercise, "derivation": NumberExercise, "reasoning": ReasoningExercise,
              "prediction": PredictionExercise, "experiment": ExperimentExercise}


def test_the_list_of_kinds_is_the_registry():
    assert {n: e.asks for n, e in REGISTRY.items()} == KINDS
    assert set(KINDS.values()) == set(ASKS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_exercise_is_checked_as_its_kind_says(name):
    ex = REGISTRY[name]
    assert type(ex) is CHECKED_BY[ex.asks], f"{name} asks {ex.asks!r} but is a {type(ex).__name__}"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_no_exercise_is_answered_by_reading_one_printed_number(name):
    """Only a prediction reads the chapter's values, and it reads an interval: a noisy mean far above 0 whose
    interval holds 0 is "no clear effect", the same mean with the interval above 0 is the first answer."""
    ex = REGISTRY[name]
    context = tuple(getattr(ex, "context", ()))
    if not isinstance(ex, PredictionExercise):
        assert not context, f"{name} is decided by the chapter's values {context} but is no prediction"
        return
    assert context[0] == "interval" and len(ex.options) == 3
    against = {ex.against: 0.10} if ex.against else {}
    ref = against.get(ex.against, 0.0)
    noisy = (ref + 0.09, ref - 0.01, ref + 0.19)  # the mean says "above", the interval does not
    assert verdict(name, ex.options[2], interval=noisy, **against).passed
    assert not verdict(name, ex.options[0], interval=noisy, **against).passed
    assert verdict(name, ex.options[0], interval=(ref + 0.02, ref + 0.001, ref + 0.04), **against).passed
    assert verdict(name, ex.options[1], interval=(ref - 0.02, ref - 0.04, ref - 0.001), **against).passed
    one_seed = verdict(name, ex.options[2], interval=(ref, math.nan, math.nan), **against)
    assert not one_seed.passed and "could not be read" in one_seed.message


def _check_calls(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and node.args and \
                    isinstance(node.args[0], ast.Constant):
                yield node.args[0].value, [k.arg for k in node.keywords]


@pytest.mark.parametrize("path", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.stem)
def test_the_chapters_pass_an_interval_and_nothing_else(path):
    for name, keywords in _check_calls(path):
        assert set(keywords) == set(getattr(REGISTRY[name], "context", ())), (path.name, name, keywords)


def test_every_method_chapter_has_an_experiment_of_the_students_own():
    for paper in PAPERS.values():
        main = paper.chapters[0]
        kinds = {e.asks for e in exercises_of(main)}
        assert "experiment" in kinds, f"{main} has no experiment exercise ({sorted(kinds)})"
        assert {e.name for e in exercises_of(main)} <= set(exercise_names(json.loads((BOOK / f"{main}.ipynb")
                                                                                       .read_text())))


def test_the_old_table_reading_choices_are_gone():
    """compare 1-5, deep_metric_learning_compare 3, cml 3 and zsml 3 read a printed number; none of the book's
    choices is a plain ChoiceExercise any more."""
    assert not [n for n, e in REGISTRY.items() if type(e) is ChoiceExercise]
    for gone in ("compare.cml_vs_floor", "compare.deml_vs_baseline", "compare.adapted_baseline",
                 "compare.map_at_r_gain", "deep_metric_learning_compare.best_loss"):
        assert gone not in REGISTRY
    assert [e.asks for e in exercises_of("compare")] == ["implementation", "reasoning", "prediction", "derivation",
                                                         "derivation"]
