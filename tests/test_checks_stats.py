"""zslib.engine.checks (shared input validation), zslib.engine.stats (intervals, paired verdicts) and the gradient
reversal layer of zslib.engine.models.grl."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import stats as sps

from zslib.engine import checks, stats
from zslib.engine.models.grl import GradientReversal, grad_reverse


# ------------------------------------------------------------------------------------------- checks
def test_features_keeps_autograd_and_promotes_half():
    x = torch.randn(4, 3, requires_grad=True)
    assert checks.features(x) is x
    h = checks.features(torch.randn(4, 3).half())
    assert h.dtype == torch.float32
    assert checks.features(np.ones((2, 2), dtype=np.int64)).dtype == torch.float32
    assert checks.features(np.ones((2, 2)), float32=True).dtype == torch.float32


@pytest.mark.parametrize("bad, error, words", [
    (None, TypeError, "is None"),
    (torch.ones(3, dtype=torch.long), TypeError, "floating-point"),
    (torch.ones(3), ValueError, "shape (n, d)"),
    (torch.ones(0, 3), ValueError, "empty"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), ValueError, "row 0"),
    (np.array([["a", "b"]]), TypeError, "real numbers"),
])
def test_features_rejects_with_a_clear_message(bad, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        checks.features(bad)


def test_feature_array_and_min_rows():
    a = checks.feature_array(torch.ones(3, 2))
    assert a.dtype == np.float64 and a.shape == (3, 2)
    with pytest.raises(ValueError, match="at least 4"):
        checks.feature_array(np.ones((3, 2)), min_rows=4)
    with pytest.raises(ValueError, match="NaN or infinite values in 1 row"):
        checks.feature_array([[1.0, np.inf], [1.0, 2.0]])


def test_class_ids_both_kinds():
    assert checks.class_ids([3, 1], 2).dtype == torch.long
    with pytest.raises(TypeError, match="integer class ids"):
        checks.class_ids(torch.tensor([1.0, 2.0]), 2)
    with pytest.raises(ValueError, match="match one to one"):
        checks.class_ids([1, 2, 3], 2)
    assert checks.class_id_array(np.array([1.0, 2.0])).dtype == np.int64  # integer-valued floats (files)
    with pytest.raises(TypeError, match="1.7"):
        checks.class_id_array(np.array([1.0, 1.7]))
    with pytest.raises(TypeError, match="integer class ids"):
        checks.class_id_array(np.array(["a"]))


def test_finite_number():
    assert checks.finite_number(3, "k", integer=True) == 3
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            checks.finite_number(bad, "lr")
    with pytest.raises(TypeError):
        checks.finite_number(True, "lr")
    with pytest.raises(ValueError, match="> 0"):
        checks.finite_number(0.0, "lr", low=0.0, low_open=True)


# -------------------------------------------------------------------------------------------- stats
def _run(seed, value):
    return SimpleNamespace(config=SimpleNamespace(seed=seed), metric=lambda name="R@1", split="unseen": value)


def test_interval_is_the_student_t_interval():
    v = [0.1, 0.3, 0.2, 0.25]
    iv = stats.interval(v)
    lo, hi = sps.t.interval(0.95, len(v) - 1, loc=np.mean(v), scale=sps.sem(v))
    assert iv.mean == pytest.approx(np.mean(v)) and iv.low == pytest.approx(lo) and iv.high == pytest.approx(hi)
    one = stats.interval([0.5])
    assert one.n == 1 and math.isnan(one.low)
    with pytest.raises(ValueError):
        stats.interval([])


def test_paired_matches_by_seed_not_by_position():
    a = [_run(0, 0.10), _run(1, 0.20), _run(2, 0.30)]
    b = [_run(2, 0.36), _run(0, 0.15), _run(1, 0.27)]  # reordered: pairing by position would be wrong
    p = stats.paired(a, b)
    assert p.seeds == (0, 1, 2) and np.allclose(p.differences, [0.05, 0.07, 0.06])
    assert p.verdict == "up"
    with pytest.raises(ValueError, match="same seeds"):
        stats.paired(a, b[:2])
    with pytest.raises(ValueError, match="twice"):
        stats.paired(a + [_run(0, 0.1)], b + [_run(0, 0.1)])


def test_verdict_words_and_format():
    assert stats.verdict(stats.Interval(0.0, -0.1, 0.1, 3)) == "no clear effect"
    assert stats.verdict(stats.Interval(-0.2, -0.3, -0.1, 3)) == "down"
    assert stats.verdict(stats.Interval(0.2, math.nan, math.nan, 1)) == "n/a (1 seed)"
    assert stats.format_interval((0.189, 0.122, 0.256)) == "18.9 [12.2, 25.6]"
    assert stats.format_interval((0.01, -0.02, 0.04), signed=True) == "+1.0 [-2.0, +4.0]"
    assert stats.summarize([0.1, 0.2, 0.3])[0] == pytest.approx(0.2)
    with pytest.raises(TypeError):
        stats.summarize(["0.9", "0.8"])  # a string is not silently read as a number


# ---------------------------------------------------------------------------------------------- GRL
def test_gradient_reversal_is_identity_forward_and_minus_lambda_backward():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.float64)
    y = grad_reverse(x, 0.7)
    assert torch.equal(y, x)
    (y * w).sum().backward()
    assert torch.allclose(x.grad, -0.7 * w)
    layer = GradientReversal(2.0)
    x.grad = None
    (layer(x) * w).sum().backward()
    assert torch.allclose(x.grad, -2.0 * w)
    with pytest.raises(ValueError):
        GradientReversal(-1.0)


def test_a_whole_number_check_refuses_infinity_and_nan_with_a_value_error():
    import math as _math

    import pytest as _pytest

    from zslib.engine.checks import finite_number

    for bad in (_math.inf, -_math.inf, _math.nan):
        with _pytest.raises(ValueError, match="finite"):
            finite_number(bad, "count", low=1, integer=True)
    assert finite_number(3.0, "count", integer=True) == 3
