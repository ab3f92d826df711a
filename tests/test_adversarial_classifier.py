"""Adapt-Adv's class-adversarial module: the lambda schedule (Eq. 22), the objectives (Eqs. 18-20), the sign
of the classifier term's gradient in each regime, and the equivalence with a gradient reversal layer.

Oracles: closed-form values of tanh, the softmax cross-entropy's closed-form gradient, zslib's gradient
reversal layer (Sec. 4's implementation) and a small simulated game.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from zslib.methods.adapt_adv.class_adversary import (AdversarialClassifier, EpochLambda, adaptive_lambda,
                                                     adversarial_term, classification_loss, extractor_objective)
from zslib.engine.models.grl import grad_reverse


# ----- Eq. 22 ----------------------------------------------------------------------------------------
def test_lambda_at_far_from_and_around_the_threshold():
    assert adaptive_lambda(1.5) == 0.0
    assert adaptive_lambda(1.5, l_thresh=1.5, lambda0=0.5) == 0.0
    assert adaptive_lambda(60.0, lambda0=0.5) == pytest.approx(-0.5, abs=1e-12)  # far above: -lambda0
    assert adaptive_lambda(0.0, l_thresh=40.0, lambda0=0.5) == pytest.approx(0.5, abs=1e-12)  # far below: +lambda0
    # with l_thresh = 1.5 the loss cannot go far below: the adversarial weight tops out at tanh(1.5) lambda0
    assert adaptive_lambda(0.0) == pytest.approx(math.tanh(1.5)) == pytest.approx(0.9051482536)
    # the worked example of the module docstring (51 seen classes, chance level ln 51)
    assert adaptive_lambda(math.log(51)) == pytest.approx(-0.98467, abs=1e-5)
    assert adaptive_lambda(2.5) == pytest.approx(-0.76159, abs=1e-5)
    assert adaptive_lambda(0.5) == pytest.approx(0.76159, abs=1e-5)
    assert adaptive_lambda(torch.tensor(0.5)) == adaptive_lambda(0.5)  # a scalar tensor is read as a number


def test_lambda_is_decreasing_odd_around_the_threshold_and_linear_in_lambda0():
    losses = np.linspace(0, 6, 241)
    lam = np.array([adaptive_lambda(v, lambda0=0.5) for v in losses])
    assert np.all(np.diff(lam) < 0)
    assert np.all(np.abs(lam) < 0.5)
    assert np.all(lam[losses < 1.5] > 0) and np.all(lam[losses > 1.5] < 0)
    for d in (0.1, 0.7, 1.5):
        assert adaptive_lambda(1.5 + d) == pytest.approx(-adaptive_lambda(1.5 - d))
    for lambda0 in (0.0, 0.1, 0.5, 1.0):
        assert adaptive_lambda(0.8, lambda0=lambda0) == pytest.approx(lambda0 * adaptive_lambda(0.8))


def test_lambda_bad_inputs():
    with pytest.raises(ValueError, match=">= 0"):
        adaptive_lambda(-0.1)
    with pytest.raises(ValueError, match="finite"):
        adaptive_lambda(float("nan"))
    with pytest.raises(ValueError, match="one number"):
        adaptive_lambda(torch.ones(3))
    with pytest.raises(ValueError, match="lambda0"):
        adaptive_lambda(1.0, lambda0=-1)


# ----- the classifier and Eq. 18 ---------------------------------------------------------------------
def test_classifier_architecture_and_dropout():
    torch.manual_seed(0)
    clf = AdversarialClassifier(10, 4)
    kinds = [type(m) for m in clf.net]
    assert kinds == [nn.Linear, nn.ReLU, nn.Dropout, nn.Linear]
    assert clf.net[2].p == 0.1 and clf.net[0].out_features == 512 and clf.net[3].out_features == 4
    f = torch.randn(6, 10)
    clf.eval()
    assert torch.equal(clf(f), clf(f))
    clf.train()
    assert not torch.equal(clf(f), clf(f))  # dropout is active in training mode
    with pytest.raises(ValueError, match="10-dimensional"):
        clf(torch.randn(6, 9))


def test_classification_loss_is_the_mean_cross_entropy():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(7, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 4, 2, 2, 1, 3, 0])
    z = logits.numpy()
    expect = np.mean([np.log(np.exp(z[i]).sum()) - z[i, y[i]] for i in range(7)])
    assert classification_loss(logits, y).item() == pytest.approx(expect, rel=1e-12)
    with pytest.raises(ValueError, match=r"class ids in \[0, 5\)"):
        classification_loss(logits, y + 1)


def test_cross_entropy_gradient_on_features_matches_closed_form():
    """For a linear classifier z = W f + b: dL_c/df_i = W^T (softmax(z_i) - e_{y_i}) / n."""
    g = torch.Generator().manual_seed(2)
    lin = nn.Linear(4, 3).double()
    f = torch.randn(5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 1, 2, 2, 0])
    (grad,) = torch.autograd.grad(classification_loss(lin(f), y), f)
    p = torch.softmax(lin(f), 1).detach()
    expect = (p - F.one_hot(y, 3).double()) @ lin.weight.detach() / 5
    assert torch.allclose(grad, expect, atol=1e-12)


# ----- Eqs. 19-20: the sign of the classifier term in each regime -------------------------------------
def _game_pieces(seed=3):
    torch.manual_seed(seed)
    clf = AdversarialClassifier(6, 4, hidden=16).double().eval()  # eval: a deterministic classifier
    f = torch.randn(12, 6, dtype=torch.float64, requires_grad=True)
    y = torch.arange(12) % 4
    return clf, f, y


@pytest.mark.parametrize("loss_level", [3.0, 0.4])  # above l_thresh (cooperative), below (adversarial)
def test_extractor_gradient_has_the_derived_sign(loss_level):
    clf, f, y = _game_pieces()
    lam = adaptive_lambda(loss_level, lambda0=0.5)
    metric = (f ** 2).mean()  # any metric loss: its gradient is added unchanged
    lc = classification_loss(clf(f), y)
    objective = extractor_objective(metric, lc, lam)
    assert objective.item() == pytest.approx(metric.item() - lam * lc.item())
    assert adversarial_term(lc, lam).item() == pytest.approx(-lam * lc.item())
    (g_obj,) = torch.autograd.grad(objective, f, retain_graph=True)
    (g_lc,) = torch.autograd.grad(lc, f, retain_graph=True)
    (g_m,) = torch.autograd.grad(metric, f)
    assert torch.allclose(g_obj, g_m - lam * g_lc, atol=1e-12)  # the classifier term contributes -lambda grad L_c
    # a small descent step on the classifier term alone moves L_c down (lambda < 0) or up (lambda > 0)
    step = 1e-2 * (-lam) * g_lc
    with torch.no_grad():
        after = classification_loss(clf(f - step), y).item()
    if loss_level > 1.5:
        assert lam < 0 and after < lc.item()
    else:
        assert lam > 0 and after > lc.item()
    # to first order the change is eta * lambda * ||grad L_c||^2: the sign of lambda
    predicted = 1e-2 * lam * float((g_lc ** 2).sum())
    assert after - lc.item() == pytest.approx(predicted, rel=0.05)


def test_adversarial_regime_equals_a_gradient_reversal_layer():
    """Sec. 4: a GRL (backward multiplies by -lambda) between f and the classifier, one backward pass of
    L_m + L_c, gives the extractor -lambda grad L_c and the classifier its own unscaled grad L_c: the
    extractor side is extractor_objective, the classifier side is classification_loss (no lambda)."""
    clf, f, y = _game_pieces(4)
    lam = adaptive_lambda(0.7, lambda0=1.0)
    assert lam > 0  # zslib's GRL takes lambda >= 0 only, i.e. the adversarial regime
    metric = (f ** 3).mean()
    total = metric + classification_loss(clf(grad_reverse(f, lam)), y)
    grads_grl = torch.autograd.grad(total, [f, *clf.parameters()])
    ours_f = torch.autograd.grad(extractor_objective((f ** 3).mean(), classification_loss(clf(f), y), lam), f)[0]
    ours_c = torch.autograd.grad(classification_loss(clf(f.detach()), y), list(clf.parameters()))
    assert torch.allclose(grads_grl[0], ours_f, atol=1e-12)
    for a, b in zip(grads_grl[1:], ours_c):
        assert torch.allclose(a, b, atol=1e-12)


def test_extractor_objective_bad_inputs():
    with pytest.raises(TypeError, match="plain number"):
        extractor_objective(torch.tensor(1.0), torch.tensor(2.0), torch.tensor(0.5))
    with pytest.raises(ValueError, match="scalar tensor"):
        extractor_objective(torch.ones(3), torch.tensor(2.0), 0.5)
    with pytest.raises(ValueError, match="scalar tensor"):
        adversarial_term(torch.ones(3), 0.5)
    with pytest.raises(ValueError, match="finite"):
        adversarial_term(torch.tensor(1.0), float("inf"))


# ----- the per-epoch schedule --------------------------------------------------------------------------
def test_epoch_lambda_bookkeeping():
    sched = EpochLambda(num_classes=51, lambda0=0.5)
    assert sched.value == pytest.approx(adaptive_lambda(math.log(51), lambda0=0.5))  # chance level at the start
    sched.update(torch.tensor(1.0), 30)
    sched.update(0.2, 10)
    assert sched.value == pytest.approx(adaptive_lambda(math.log(51), lambda0=0.5))  # unchanged within the epoch
    assert sched.end_epoch() == pytest.approx(adaptive_lambda(0.8, lambda0=0.5))  # size-weighted mean 0.8
    assert sched.history == [(pytest.approx(0.8), pytest.approx(adaptive_lambda(0.8, lambda0=0.5)))]
    assert sched.end_epoch() == pytest.approx(adaptive_lambda(0.8, lambda0=0.5))  # an empty epoch changes nothing
    assert len(sched.history) == 1


def test_the_schedule_holds_the_classification_loss_near_the_threshold():
    """Algorithm 1 on a toy problem: a linear extractor, a classifier over 10 classes, alternating steps,
    lambda from the previous epoch. Without the adversary (lambda0 = 0) the classifier's loss falls far below
    l_thresh; with it the loss keeps returning to l_thresh = 1.5, the fixed point of Eq. 22 (with the
    one-epoch lag it oscillates around it)."""

    def run(lambda0):
        torch.manual_seed(0)
        y = torch.arange(100) % 10
        x = torch.randn(100, 8) + 3.0 * F.one_hot(y, 10)[:, :8].float()  # classes 8 and 9 overlap
        extractor = nn.Linear(8, 8)
        clf = AdversarialClassifier(8, 10, hidden=32, dropout=0.1)
        opt_f = torch.optim.Adam(extractor.parameters(), lr=0.05)
        opt_c = torch.optim.Adam(clf.parameters(), lr=0.05)
        sched = EpochLambda(10, lambda0=lambda0)
        for _ in range(60):  # epochs
            for idx in torch.arange(100).reshape(2, 50):  # batches
                f = extractor(x[idx])
                metric = 0.1 * (f - x[idx]).pow(2).mean()  # a stand-in metric loss that keeps f informative
                # step 2.4: extractor, classifier frozen (only the extractor's optimizer steps)
                opt_f.zero_grad()
                extractor_objective(metric, classification_loss(clf(f), y[idx]), sched.value).backward()
                opt_f.step()
                # step 2.6: classifier on the (now fixed) features, its own cross-entropy
                opt_c.zero_grad()
                lc = classification_loss(clf(f.detach()), y[idx])
                lc.backward()
                opt_c.step()
                sched.update(lc, len(idx))
            sched.end_epoch()
        return np.array(sched.history)  # (epochs, 2): mean L_c, lambda

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    try:
        free, game = run(0.0), run(1.0)
    finally:
        torch.set_num_threads(threads)
    assert free[-10:, 0].mean() < 0.3
    assert 0.8 < game[-20:, 0].mean() < 2.0
    assert game[0, 1] < 0 and (game[:, 1] > 0).any() and (game[-20:, 1] < 0).any()  # the sign keeps changing
