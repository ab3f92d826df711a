"""Every exercise check passes with the zslib reference (or the true number / the choice the numbers make)
and fails, with a message that names the failing input and gives the hint, for a deliberately wrong answer."""
import math
import re

import pytest
import torch

from zslib.teaching.exercises import REGISTRY, check, verdict
from zslib.teaching.exercises.kinds import (FunctionExercise, NumberExercise, PredictionExercise, ReasoningExercise,
                                            interval_word)

FUNCTIONS = [e for e in REGISTRY.values() if isinstance(e, FunctionExercise)]
NUMBERS = [e for e in REGISTRY.values() if isinstance(e, NumberExercise)]
PREDICTIONS = [e for e in REGISTRY.values() if isinstance(e, PredictionExercise)]
REASONING = [e for e in REGISTRY.values() if isinstance(e, ReasoningExercise)]


def _copy_of(ref):
    return lambda *a, **k: ref(*a, **k)


@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.name)
def test_a_function_check_passes_with_the_reference(ex):
    out = verdict(ex.name, _copy_of(ex.reference))
    assert out.passed, out.message
    assert "passed" in out.message


@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.name)
def test_a_function_check_fails_a_wrong_value_and_says_where(ex):
    wrong = lambda *a, **k: torch.as_tensor(ex.reference(*a, **k)) * 1.1 + 0.01  # noqa: E731
    out = verdict(ex.name, wrong)
    assert not out.passed
    assert "failed on input 1 of" in out.message and "expected" in out.message and "got" in out.message
    assert ex.hint in out.message


@pytest.mark.parametrize("ex", [e for e in FUNCTIONS if any(c.grad is not None for c in e.cases())], ids=lambda e: e.name)
def test_a_function_check_fails_a_value_without_gradient(ex):
    out = verdict(ex.name, lambda *a, **k: torch.as_tensor(ex.reference(*a, **k)).detach())
    assert not out.passed and "no gradient" in out.message


def test_a_right_value_with_a_wrong_gradient_fails():
    ex = REGISTRY["cml.diversity_confusion"]
    # the same value at the inputs, but a gradient that is twice too large:
    wrong = lambda x: 2 * x.pow(2).sum(1).mean() - x.pow(2).sum(1).mean().detach()  # noqa: E731
    out = verdict(ex.name, wrong)
    assert not out.passed and "gradient does not" in out.message


@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.name)
def test_unanswered_stub_raising_or_none_and_the_reference_itself_fail(ex):
    assert "not answered yet" in verdict(ex.name, ...).message
    assert "not answered yet" in verdict(ex.name, lambda *a: None).message  # compiles as the `...` stub does

    def forgot_return(*a):
        values = [x for x in a]  # works, then returns nothing
        del values

    assert "returned None" in verdict(ex.name, forgot_return).message

    def stub(*a):
        raise NotImplementedError

    assert "not answered yet" in verdict(ex.name, stub).message
    assert "reference itself" in verdict(ex.name, ex.reference).message
    boom = verdict(ex.name, lambda *a: 1 / 0)
    assert not boom.passed and "ZeroDivisionError" in boom.message


@pytest.mark.parametrize("ex", NUMBERS, ids=lambda e: e.name)
def test_a_number_check_accepts_the_value_and_refuses_ten_percent_off(ex):
    truth = ex.expected()
    assert verdict(ex.name, truth).passed
    off = tuple(t * 1.1 + 0.1 for t in truth) if isinstance(truth, tuple) else truth * 1.1 + 0.1
    out = verdict(ex.name, off)
    assert not out.passed and "too high" in out.message and ex.hint in out.message
    shown = [f"{t:.6g}" for t in (truth if isinstance(truth, tuple) else (truth,)) if t != int(t)]
    before_hint = out.message.split("Hint:")[0]
    assert not any(re.search(rf"(?<![\d.]){re.escape(s)}(?![\d.e])", before_hint) for s in shown), \
        "a failed check must not print the answer"


def test_known_numbers_from_independent_arithmetic():
    assert verdict("deep_metric_learning.proxy_nca_floor", 0.6405200).passed  # log(1 + 49 e^-4)
    assert verdict("cml.hoeffding", math.sqrt(math.log(80) / 128)).passed
    assert verdict("generalization_gap.triangle_penalty", 8 / 3).passed
    assert verdict("cml_experiments.dc_and_diversity", (5, 1)).passed
    assert verdict("deep_metric_learning_compare_proxies.positive_gradient", 1.4621172).passed
    assert verdict("deep_metric_learning_compare.hard_negatives", 0.99330715 / 4.5397868e-05).passed
    assert verdict("cml.ec_rates", (0.8 ** 2, 0.9 ** 2)).passed
    assert not verdict("cml.ec_rates", (0.8, 0.9)).passed  # the factors of the lengths, not of the squared lengths
    assert verdict("generalization_gap.penalty_step", 1.2).passed
    assert verdict("compare.detectable", (2.7764451 * 1.2 / math.sqrt(5), 4.3026527 * 1.2 / math.sqrt(3))).passed
    assert verdict("compare.map_at_r_by_hand", (1, (1 + 2 / 3) / 4, 0, (1 / 2 + 2 / 3 + 3 / 4) / 4)).passed
    assert verdict("adapt_adv_experiments.lambda_lag", 4).passed
    assert not verdict("adapt_adv_experiments.lambda_lag", 3).passed  # lambda reads the previous epoch's loss


@pytest.mark.parametrize("ex", PREDICTIONS, ids=lambda e: e.name)
def test_a_prediction_follows_the_interval_the_chapter_passes(ex):
    extra = {ex.against: 0.05} if ex.against else {}
    ref = extra.get(ex.against, 0.0)
    above, below, across = (ref + 0.03, ref + 0.01, ref + 0.05), (ref - 0.03, ref - 0.05, ref - 0.01), \
        (ref + 0.03, ref - 0.01, ref + 0.07)
    for interval, right in ((above, ex.options[0]), (below, ex.options[1]), (across, ex.options[2])):
        assert verdict(ex.name, right, interval=interval, **extra).passed
        assert verdict(ex.name, f" {right.swapcase()} ", interval=interval, **extra).passed  # read without regard to case
        for wrong in (o for o in ex.options if o != right):
            out = verdict(ex.name, wrong, interval=interval, **extra)
            assert not out.passed and ex.hint in out.message and "interval" in out.message
    assert "answer one of" in verdict(ex.name, "perhaps", interval=above, **extra).message
    with pytest.raises(TypeError, match="needs the chapter's"):
        verdict(ex.name, ex.options[0])


def test_the_interval_word_reads_the_ends_never_the_mean():
    assert interval_word((5.0, -0.1, 10.1)) == "no clear effect"
    assert interval_word((0.2, 0.1, 0.3)) == "up" and interval_word((-0.2, -0.3, -0.1)) == "down"
    assert interval_word((0.043, 0.0372, 0.0488), 0.0486, ("larger", "smaller", "within")) == "within"
    assert interval_word((0.043, 0.0372, 0.0480), 0.0486, ("larger", "smaller", "within")) == "smaller"
    with pytest.raises(ValueError, match="one seed"):
        interval_word((0.1, math.nan, math.nan))


@pytest.mark.parametrize("ex", REASONING, ids=lambda e: e.name)
def test_a_reasoning_check_accepts_its_answer_only(ex):
    assert verdict(ex.name, ex.answer).passed
    assert verdict(ex.name, f" {ex.answer.upper()} ").passed
    for wrong in (o for o in ex.options if o != ex.answer):
        out = verdict(ex.name, wrong)
        assert not out.passed and ex.hint in out.message
    assert "answer one of" in verdict(ex.name, "perhaps").message
    assert "not answered yet" in verdict(ex.name, ...).message


def test_independent_brute_force_solutions_pass():
    def ec(xi, xj):  # the double sum of CML Eq. 3, literally
        return sum(((a - b) ** 2).sum() for a in xi for b in xj) / (len(xi) * len(xj))

    def recall1(x, y):
        xn = x / x.norm(dim=1, keepdim=True)
        s = xn @ xn.T
        s.fill_diagonal_(-math.inf)
        return (y[s.argmax(1)] == y).double().mean()

    def purity(labels, clusters):
        return sum(max(int(((clusters == c) & (labels == k)).sum()) for k in labels.unique())
                   for c in clusters.unique()) / len(labels)

    assert verdict("cml.energy_confusion", ec).passed
    assert verdict("zero_shot_problem.recall_at_1", recall1).passed
    assert verdict("metrics.purity", purity).passed


def test_check_prints_and_writes_no_grade_log(tmp_path, monkeypatch, capsys):
    """Grades no longer come from a log a notebook could write itself (zslib.teaching.grading)."""
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("ZS_GRADE_LOG", str(log))
    check("metrics.duplicated_r1", 1.0)
    check("metrics.duplicated_r1", 0.5)
    assert "✔" in capsys.readouterr().out
    assert not log.exists()
    with pytest.raises(KeyError, match="metrics.map_at_r"):
        check("metrics.nope", 1)
