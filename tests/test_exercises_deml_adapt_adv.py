"""The DeML and Adapt-Adv chapters' checked exercises against independent arithmetic and brute-force loops,
and against the plausible wrong readings the hints warn about."""
import math

import torch

from zslib.teaching.exercises import verdict
from zslib.teaching.exercises.bank_deml import toy_map


def test_stationary_mass_by_counting_degrees():
    # four bird positions of value 1 among 32 zeros: every edge joins the two groups, so each side holds half
    bird, background = 32 * 1.0, 4 * 1.0
    assert 4 * bird / (4 * bird + 32 * background) == 0.5
    # values 1, 1, 2, 2: degrees 34 (ones), 66 (twos), 6 (background); 200 of 392 on the bird
    ones, twos, bg = 32 * 1 + 2 * 1, 32 * 2 + 2 * 1, 2 * 1 + 2 * 2
    assert verdict("deml.stationary_mass", (0.5, (2 * ones + 2 * twos) / (2 * ones + 2 * twos + 32 * bg))).passed
    assert not verdict("deml.stationary_mass", (0.5, 4 / 36)).passed  # the bird's area share is not the answer
    assert toy_map([1, 1, 2, 2]).sum() == 6


def test_activation_decay_by_loops_and_the_frobenius_reading_fails():
    def decay_loops(z, w):
        act = sum((z[k, n] ** 2).sum() for k in range(z.shape[0]) for n in range(z.shape[1]))
        ntri = sum(((w[k, r] ** 2).sum() - 1) ** 2 for k in range(w.shape[0]) for r in range(w.shape[1]))
        return 0.014 / (2 * z.shape[0] * z.shape[1]) * act + 0.25 * ntri

    def decay_frobenius(z, w):
        gram = w @ w.transpose(1, 2) - torch.eye(w.shape[1], dtype=w.dtype)
        return 0.014 / (2 * z.shape[0] * z.shape[1]) * z.pow(2).sum() + 0.25 * gram.pow(2).sum()

    assert verdict("deml.activation_decay", decay_loops).passed
    assert not verdict("deml.activation_decay", decay_frobenius).passed


def test_additive_attention_by_loops_and_mean_pooling_fails():
    def attend_loops(fmap, u, w1, w):
        out = []
        for b in range(fmap.shape[0]):
            q = fmap[b].reshape(fmap.shape[1], -1)
            s = torch.stack([w @ torch.tanh(w1 @ q[:, j] + u[b]) for j in range(q.shape[1])])
            a = torch.exp(s) / torch.exp(s).sum()
            out.append(sum(a[j] * q[:, j] for j in range(q.shape[1])))
        return torch.stack(out)

    assert verdict("adapt_adv.additive_attention", attend_loops).passed
    assert not verdict("adapt_adv.additive_attention", lambda fmap, u, w1, w: fmap.mean((2, 3))).passed


def test_lambda_half_inverts_eq22():
    lc = 1.5 - 0.5 * math.log(3)  # artanh(1/2) = ln(3) / 2
    assert verdict("adapt_adv.lambda_half", lc).passed
    assert not verdict("adapt_adv.lambda_half", 1.5 + 0.5 * math.log(3)).passed  # the sign of Eq. 22 flipped


def test_choices_follow_the_printed_numbers():
    assert verdict("deml.adversary_similarity", "lower", with_adversary=-0.08, without_adversary=0.92).passed
    assert verdict("deml.adversary_similarity", "higher", with_adversary=0.9, without_adversary=0.5).passed
    assert verdict("adapt_adv.larger_gain", "adv", gdfl=0.31, adv=0.33).passed
    assert not verdict("adapt_adv.larger_gain", "gdfl", gdfl=0.31, adv=0.33).passed


def test_central_mass_by_loops_and_the_whole_image_mean_fails():
    def central_loops(attention):
        out = []
        for a in attention:
            h, w = a.shape
            bh, bw = max(1, round(h / 2)), max(1, round(w / 2))
            inside = sum(a[y, x] for y in range(h) for x in range(w)
                         if (h - bh) // 2 <= y < (h - bh) // 2 + bh and (w - bw) // 2 <= x < (w - bw) // 2 + bw)
            out.append(inside / a.sum())
        return torch.stack(out)

    assert verdict("deml_experiments.central_mass", central_loops).passed
    assert not verdict("deml_experiments.central_mass", lambda a: a[:, 1:-1, 1:-1].sum((1, 2)) / a.sum((1, 2))).passed


def test_random_overlap_by_expected_counts():
    both = 64 * 64 / 1280  # a channel is in both random sets with probability (64 / 1280) ** 2
    assert verdict("deml_experiments.random_overlap", both / (128 - both)).passed
    assert not verdict("deml_experiments.random_overlap", 64 / 1280).passed  # the share of one set is not the overlap


def test_the_gaussian_choice_follows_the_table():
    assert verdict("deml_experiments.gaussian_peak", "raises", plain=0.278, gaussian=0.548).passed
    assert verdict("deml_experiments.gaussian_peak", "lowers", plain=0.5, gaussian=0.4).passed
    assert not verdict("deml_experiments.gaussian_peak", "lowers", plain=0.278, gaussian=0.548).passed
