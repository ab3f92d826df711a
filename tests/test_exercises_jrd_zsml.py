"""The JRD and ZSML chapter exercises (zslib/exercises/bank_jrd.py, bank_zsml.py) against answers written
independently of zslib: brute-force loops over pairs and windows, and the numbers by hand arithmetic."""
import math

import torch

from zslib.teaching.exercises import verdict


def _loop_jrs(pooled, embedding, labels, detach_tau=True):
    """JRD Eqs. 8, 10-11 with Python loops over the sample pairs (two layers, Gaussian mixture 1/2, 1, 2)."""
    m = len(labels)
    taus = []
    for x in (pooled, embedding):
        tau = sum(((x[i] - x[j]) ** 2).sum() for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
        taus.append(tau.detach() if detach_tau else tau)
    terms = []
    for i in range(m):
        for j in range(m):
            if labels[i] != labels[j]:
                k = 1.0
                for x, tau in zip((pooled, embedding), taus):
                    d2 = ((x[i] - x[j]) ** 2).sum()
                    k = k * sum(torch.exp(-d2 / (s * tau)) for s in (0.5, 1.0, 2.0)) / 3
                terms.append(k)
    return torch.stack(terms).mean()


def _loop_relation(xi, xj, weight, bias, stride):
    """ZSML Eq. 1 with loops over pairs, kernels and positions."""
    p, m = xi.shape
    k, h, _ = weight.shape
    length = (m - h) // stride + 1
    rows = []
    for a in range(p):
        row = []
        for c in range(k):
            for q in range(length):
                lo = q * stride
                z = (weight[c, :, 0] * xi[a, lo:lo + h]).sum() + (weight[c, :, 1] * xj[a, lo:lo + h]).sum() + bias[c]
                row.append(torch.relu(z))
        rows.append(torch.stack(row))
    return torch.stack(rows)


def test_loop_answers_pass_and_an_undetached_bandwidth_fails_on_the_gradient():
    assert verdict("jrd.jrs", _loop_jrs).passed
    out = verdict("jrd.jrs", lambda a, b, y: _loop_jrs(a, b, y, detach_tau=False))
    assert not out.passed and "gradient does not" in out.message
    assert verdict("zsml.relation", _loop_relation).passed
    swapped = verdict("zsml.relation", lambda xi, xj, w, b, t: _loop_relation(xj, xi, w, b, t))
    assert not swapped.passed  # R is not symmetric in the pair


def test_numbers_by_hand():
    k = (math.exp(-2) + math.exp(-1) + math.exp(-0.5)) / 3  # tau = d^2 for two samples, whatever the cosine
    assert verdict("jrd.two_samples", (k, 2 - 2 * k)).passed
    assert not verdict("jrd.two_samples", (math.exp(-0.8), 2 - 2 * math.exp(-0.8))).passed
    eta = 2 * 0.002 * 0.1 / 128  # 3.125e-6
    assert verdict("zsml.label_step", (eta, math.log(2) / eta)).passed
    assert not verdict("zsml.label_step", (eta / 2, math.log(2) / eta)).passed


def _loop_share(labels):
    """The share of same-class pairs among ordered pairs of two different samples, counted pair by pair."""
    y = labels.tolist()
    same = sum(y[i] == y[j] for i in range(len(y)) for j in range(len(y)) if i != j)
    return same / (len(y) * (len(y) - 1))


def test_the_zsml_experiments_exercises():
    assert verdict("zsml_experiments.uniform_share", _loop_share).passed
    one_over_c = verdict("zsml_experiments.uniform_share", lambda y: 1 / len(set(y.tolist())))
    assert not one_over_c.passed  # a share of 1/C ignores that a sample is never paired with itself
    assert verdict("zsml_experiments.every_pair_cost", (22_052_416, 84.12)).passed
    assert not verdict("zsml_experiments.every_pair_cost", (4696 * 4695, 84.12 * 8)).passed  # float64 is 8 bytes
    assert verdict("zsml_experiments.chosen_alpha", "raised", interval=(0.014, 0.004, 0.024)).passed
    assert verdict("zsml_experiments.chosen_alpha", "no clear effect", interval=(0.014, -0.004, 0.032)).passed
    assert not verdict("zsml_experiments.chosen_alpha", "raised", interval=(0.014, -0.004, 0.032)).passed
    missing = verdict("zsml_experiments.chosen_alpha", "raised", interval=None)  # runs not recorded here
    assert not missing.passed and "could not be read" in missing.message


def _loop_mixture_kernel(x, k):
    """A mixture of k Gaussians written with loops over the pairs (bandwidth multipliers 2 ** (i - k // 2))."""
    m = len(x)
    d2 = [[((x[a] - x[b]) ** 2).sum() for b in range(m)] for a in range(m)]
    tau = (sum(d2[a][b] for a in range(m) for b in range(m) if a != b) / (m * (m - 1))).detach()
    return torch.stack([torch.stack([sum(torch.exp(-d2[a][b] / (2.0 ** (i - k // 2) * tau)) for i in range(k)) / k
                                     for b in range(m)]) for a in range(m)])


def test_the_experiments_page_exercises_by_independent_answers():
    import numpy as np
    from scipy import stats

    assert verdict("jrd_experiments.mixture_kernel", _loop_mixture_kernel).passed
    assert not verdict("jrd_experiments.mixture_kernel", lambda x, k: _loop_mixture_kernel(x, 3)).passed

    def by_seed(seeds_a, a, seeds_b, b):
        va, vb = dict(zip(seeds_a.tolist(), a.tolist())), dict(zip(seeds_b.tolist(), b.tolist()))
        d = np.array([vb[s] - va[s] for s in sorted(va)])
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        return torch.tensor([d.mean(), d.mean() - half, d.mean() + half])

    def by_position(seeds_a, a, seeds_b, b):
        return by_seed(seeds_a, a, seeds_a, b)  # pairs b[i] with a[i] whatever its seed

    assert verdict("jrd_experiments.paired_interval", by_seed).passed
    out = verdict("jrd_experiments.paired_interval", by_position)
    assert not out.passed and "input 1 of 3" in out.message  # the first input lists the second arm backwards
    assert verdict("jrd_experiments.smallest_weight", "down", interval=(-0.02, -0.03, -0.01)).passed
    assert verdict("jrd_experiments.smallest_weight", "no clear effect", interval=(-0.02, -0.05, 0.01)).passed
