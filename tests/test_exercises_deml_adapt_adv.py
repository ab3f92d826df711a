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


def test_predictions_follow_the_paired_interval():
    # the paper's Table 4 gap (-0.08 against 0.92) would be a clear "lower"; a noisy gap is no clear effect
    assert verdict("deml.adversary_similarity", "lower", interval=(-1.0, -1.2, -0.8)).passed
    assert verdict("deml.adversary_similarity", "no clear effect", interval=(-0.1, -0.3, 0.1)).passed
    assert verdict("adapt_adv.larger_gain", "no clear effect", interval=(0.02, -0.01, 0.05)).passed
    assert not verdict("adapt_adv.larger_gain", "gdfl", interval=(0.02, -0.01, 0.05)).passed
    assert verdict("adapt_adv.larger_gain", "adv", interval=(-0.02, -0.03, -0.01)).passed


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


def test_the_gaussian_puts_a_map_without_layout_at_the_centre():
    """One-hot features: every pair of the 49 positions is at the same distance, so only the Gaussian shapes the
    walk's limit; it is largest in the middle and smallest in the corners, as the reasoning answer says."""
    from zslib.methods.deml.object_attention import object_attention

    no_layout = torch.eye(49, dtype=torch.float64).reshape(1, 49, 7, 7)
    plain = object_attention(no_layout, None)[0]
    assert torch.allclose(plain, torch.full_like(plain, 1 / 49))
    pi = object_attention(no_layout, None, spatial_sigma=0.15)[0]
    assert torch.isclose(pi[3, 3], pi.max()) and torch.isclose(pi[0, 0], pi.min()) and pi[3, 3] > 2 * pi[0, 0]
    assert verdict("deml_experiments.gaussian_centre", "centre").passed


def test_the_walk_on_map_a_oscillates_and_on_map_b_converges():
    from zslib.methods.deml.object_attention import object_attention

    a, b = toy_map([1, 1, 1, 1]), toy_map([1, 1, 2, 2])
    bird = lambda m: float(m[0, 2:4, 2:4].sum())  # noqa: E731
    assert abs(bird(object_attention(a, 10)) - 4 / 36) < 1e-12 and abs(bird(object_attention(a, 11)) - 32 / 36) < 1e-12
    assert verdict("deml.walk_bipartite", "oscillates").passed
    far = object_attention(b, 2000)
    assert torch.allclose(far, object_attention(b, None), atol=1e-9)  # map (b) has edges inside the bird
