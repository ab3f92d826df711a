"""The experiment and reasoning exercises against answers written independently of their references: closed forms
derived from the equations, numpy loops with hand-written gradients, and simulations of the claims the reasoning
answers make."""
import math

import numpy as np
import torch
from scipy import stats

from zslib.teaching.exercises import verdict
from zslib.teaching.exercises.bank_cml import decomposition, toy_two_classes


def test_ec_descent_follows_the_closed_form_of_its_gradient():
    """Eq. 3's gradient (2 / N_I)(x_i - mu_J) multiplies the mean gap by 1 - 2 lr (1/N_I + 1/N_J) and each class's
    deviations by 1 - 2 lr / N_I per step: the experiment's outcome without running it."""
    def closed_form(xi, xj, lr, steps):
        gap, ti, tj = decomposition(xi, xj)
        ni, nj = len(xi), len(xj)
        return torch.stack([gap * (1 - 2 * lr * (1 / ni + 1 / nj)) ** (2 * steps),
                            ti * (1 - 2 * lr / ni) ** (2 * steps), tj * (1 - 2 * lr / nj) ** (2 * steps)])

    assert verdict("cml.ec_descent", closed_form).passed
    assert not verdict("cml.ec_descent", lambda xi, xj, lr, steps: closed_form(xi, xj, lr, 0)).passed


def test_jrs_descent_by_loops_and_it_parts_the_classes():
    def loop_jrs(x, labels):
        m = len(x)
        d2 = [[((x[a] - x[b]) ** 2).sum() for b in range(m)] for a in range(m)]
        tau = (sum(d2[a][b] for a in range(m) for b in range(m) if a != b) / (m * (m - 1))).detach()
        terms = [sum(torch.exp(-d2[a][b] / (s * tau)) for s in (0.5, 1.0, 2.0)) / 3
                 for a in range(m) for b in range(m) if labels[a] != labels[b]]
        return torch.stack(terms).mean()

    def experiment(xi, xj, lr, steps):
        x = torch.cat([xi, xj]).clone().requires_grad_(True)
        labels = [0] * len(xi) + [1] * len(xj)
        for _ in range(steps):
            (g,) = torch.autograd.grad(loop_jrs(x, labels), x)
            x = (x - lr * g).detach().requires_grad_(True)
        return decomposition(x.detach()[:len(xi)], x.detach()[len(xi):])

    assert verdict("jrd.jrs_descent", experiment).passed
    xi, xj = toy_two_classes(10, 10, 0)
    before, after = decomposition(xi, xj), experiment(xi, xj, 1.0, 20)
    assert after[0] > 1.2 * before[0]  # JRS pushes the classes apart, where CML's EC pulls them together


def test_the_walk_by_numpy_power_iteration():
    def gaps(fmap, steps):
        out = []
        for image in fmap.numpy():
            u = image.reshape(image.shape[0], -1).T
            w = np.sqrt(((u[:, None, :] - u[None, :, :]) ** 2).sum(-1))
            pi = w.sum(1) / w.sum()
            p = w / w.sum(1, keepdims=True)
            m = np.full(len(u), 1 / len(u))
            row = []
            for _ in range(steps):
                m = m @ p
                row.append(np.abs(m - pi).sum())
            out.append(row)
        return torch.tensor(out, dtype=torch.float64)

    assert verdict("deml.walk_gaps", gaps).passed
    assert not verdict("deml.walk_gaps", lambda fmap, steps: gaps(fmap, steps) * 0 + 1).passed


def test_the_game_with_hand_written_softmax_gradients():
    """The same game in numpy: dL/dlogits = (softmax - onehot) / N, so dL/dv = G^T f and dL/da = (G v)^T z."""
    def game(z, labels, a, v, lr, steps, l_thresh, lambda0):
        z, a, v, y = z.numpy(), a.numpy().copy(), v.numpy().copy(), labels.numpy()
        onehot, out = np.eye(v.shape[0])[y], []

        def loss_and_grad(a, v):
            f = z @ a.T
            logits = f @ v.T
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            g = (p - onehot) / len(y)
            return -np.log(p[np.arange(len(y)), y]).mean(), (g @ v).T @ z, g.T @ f

        for _ in range(steps):
            loss, grad_a, _ = loss_and_grad(a, v)
            lam = -math.tanh(loss - l_thresh) * lambda0
            a = a - lr * (-lam) * grad_a
            _, _, grad_v = loss_and_grad(a, v)
            v = v - lr * grad_v
            out.append(loss)
        return torch.tensor(out, dtype=torch.float64)

    assert verdict("adapt_adv.game", game).passed
    no_reversal = verdict("adapt_adv.game", lambda z, y, a, v, lr, s, t, l0: game(z, y, a, v, lr, s, t, -l0))
    assert not no_reversal.passed  # the sign of Eq. 19 reversed: the extractor helps where it should fight


def test_the_game_holds_the_loss_at_the_threshold():
    from zslib.teaching.exercises.bank_adapt_adv import _game, game_toy

    z, labels, a, v = game_toy(3, 10, 2, 1)
    free = _game(z, labels, a, v, 0.5, 150, 0.8, 0.0)
    held = _game(z, labels, a, v, 0.5, 150, 0.8, 1.0)
    assert free[-1] < 0.6 and abs(held[-1] - 0.8) < 0.01


def test_the_cross_update_by_its_corrected_closed_form_gradient():
    """Eq. 7-8's gradient per pair: (2/N)(value - target + [value - hi]_+ - [lo - value]_+)."""
    def grad(value, target, lo, hi):
        return 2 / len(value) * (value - target + np.clip(value - hi, 0, None) - np.clip(lo - value, 0, None))

    def experiment(s, y, positive, lr, lam, steps):
        s, y, pos = s.numpy().copy(), y.numpy().copy(), positive.numpy()
        lo, hi = np.where(pos, 0.7, 0.0), np.where(pos, 1.0, 0.3)
        for _ in range(steps):
            s, y = s - lr * grad(s, y, lo, hi), y - lr * lam * grad(y, s, lo, hi)
        return torch.tensor(np.stack([s, y]))

    assert verdict("zsml.cross_update", experiment).passed
    label_first = verdict("zsml.cross_update", lambda s, y, p, lr, lam, n: experiment(s, y, p, lr, lam, n)[[1, 0]])
    assert not label_first.passed


def test_the_label_step_sign_by_zslibs_step():
    from zslib.methods.zsml import cross_update as cu

    y = s = torch.tensor([0.35], dtype=torch.float64)
    assert float(cu.label_step(y, s, torch.tensor([False]), lr=1.0, lam=1.0)) < 0.35
    assert verdict("zsml.label_sign", "down").passed


def test_the_choice_rule_by_scipy():
    def rule(off, candidates):
        rows = np.vstack([off.numpy(), candidates.numpy()])
        leader = int(np.argmax(rows.mean(1)))  # numpy's argmax keeps the first of equal values
        if leader == 0:
            return 0.0
        d = rows[leader] - rows[0]
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        return float(leader) if d.mean() - half > 0 else 0.0

    def last_of_ties(off, candidates):
        rows = np.vstack([off.numpy(), candidates.numpy()])
        means = rows.mean(1)
        leader = len(means) - 1 - int(np.argmax(means[::-1]))
        if leader == 0:
            return 0.0
        d = rows[leader] - rows[0]
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        return float(leader) if d.mean() - half > 0 else 0.0

    def best_mean(off, candidates):
        rows = np.vstack([off.numpy(), candidates.numpy()])
        return float(np.argmax(rows.mean(1)))

    assert verdict("compare.choice_rule", rule).passed
    assert "input 3 of 5" in verdict("compare.choice_rule", last_of_ties).message  # the tie case
    assert not verdict("compare.choice_rule", best_mean).passed  # "clearly above off" is half the rule


def test_choosing_on_the_test_classes_biases_the_gain_up():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 1, size=(20_000, 10))  # ten settings with no effect at all, many studies
    assert noise.max(1).mean() > 1.0  # the reported gain of the best of ten
    assert verdict("compare.selection_bias", "up").passed


def test_singletons_game_purity_not_nmi():
    from zslib.engine import evaluate as ev

    labels = np.repeat(np.arange(3), 4)
    singletons = np.arange(12)
    assert ev.purity(None, labels, assignments=singletons) == 1.0
    assert ev.nmi(None, labels, assignments=singletons) < 0.7
    assert verdict("metrics.singleton_clusters", "purity").passed


def test_norms_grow_without_normalization():
    from zslib.engine import losses

    torch.manual_seed(0)
    free = (0.1 * torch.randn(32, 8)).requires_grad_()
    labels = torch.arange(8).repeat_interleave(4)
    sgd = torch.optim.SGD([free], lr=0.5)
    before = free.norm(dim=1).mean().item()
    for _ in range(50):
        loss = losses.contrastive_loss(free, labels, normalize=False)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    assert free.norm(dim=1).mean().item() > 2 * before
    assert verdict("deep_metric_learning.unnormalized_norms", "grow").passed


def test_a_variant_leaves_the_active_profile():
    import zslib

    before = zslib.get_profile()
    before.replace(batch_classes=32, batch_per_class=4)
    assert zslib.get_profile() == before
    assert verdict("how_to_use.variant_leaves_profile", "unchanged").passed
