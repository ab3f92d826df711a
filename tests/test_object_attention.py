"""DeML's random-walk object attention (zslib.methods.deml.object_attention), checked against an independent
eigenvector computation (NumPy), exact stationary masses of a designed map, and per-image loops."""
import math

import numpy as np
import pytest
import torch

from zslib.methods.deml.object_attention import (convergence_gap, dissimilarity_graph, object_attention,
                                                 object_attention_map, random_walk, shuffle_positions,
                                                 stationary_distribution, transition_matrix)


def _numpy_chain(fmap: np.ndarray, sigma=None) -> np.ndarray:
    """Brute-force transition matrix of one map (C, h, w): loops over position pairs."""
    c, h, w = fmap.shape
    n = h * w
    weights = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            ya, xa, yb, xb = a // w, a % w, b // w, b % w
            d = np.linalg.norm(fmap[:, ya, xa] - fmap[:, yb, xb])
            if sigma is not None:
                s = sigma * math.sqrt(h * w)
                d *= math.exp(-((ya - yb) ** 2 + (xa - xb) ** 2) / (2 * s * s))
            weights[a, b] = d
    return weights / weights.sum(1, keepdims=True)


def _eig_stationary(p: np.ndarray) -> np.ndarray:
    """The left eigenvector of eigenvalue 1 (the largest), normalized to a distribution."""
    vals, vecs = np.linalg.eig(p.T)
    k = int(np.argmax(vals.real))
    assert abs(vals[k] - 1) < 1e-9
    v = vecs[:, k].real
    return v / v.sum()


@pytest.mark.parametrize("sigma", [None, 0.15])
def test_walk_reaches_the_dominant_eigenvector(sigma):
    torch.manual_seed(0)
    fmap = torch.randn(3, 5, 4, 5, dtype=torch.float64).relu()  # non-square, ReLU-like features
    exact = object_attention(fmap, steps=None, spatial_sigma=sigma).reshape(3, -1)
    walked = random_walk(transition_matrix(dissimilarity_graph(fmap, sigma)), steps=None, tol=1e-14)
    for i in range(3):
        p = _numpy_chain(fmap[i].numpy(), sigma)
        np.testing.assert_allclose(transition_matrix(dissimilarity_graph(fmap[i:i + 1], sigma))[0].numpy(), p,
                                   atol=1e-12)
        pi = _eig_stationary(p)
        np.testing.assert_allclose(exact[i].numpy(), pi, atol=1e-12)
        np.testing.assert_allclose(walked[i].numpy(), pi, atol=1e-10)


def test_ten_steps_are_close_to_stationary_on_the_plain_graph():
    torch.manual_seed(1)
    fmap = torch.randn(4, 16, 6, 6).relu()
    gap = convergence_gap(fmap, 10)
    assert float(gap.max()) < 1e-4
    # the walk does move: after one step it is not yet there, after ten it is much closer
    assert float(convergence_gap(fmap, 1).min()) > 10 * float(gap.max())


def test_stationary_mass_of_a_designed_map():
    # k object positions with feature a on a background of feature b: degrees (n-k)|a-b| and k|a-b|,
    # so the object holds 1/(2k) per position and the background 1/(2(n-k)).
    h = w = 6
    n, fmap = h * w, torch.zeros(1, 3, h, w, dtype=torch.float64)
    fmap[0, :, 2:4, 1:4] = torch.tensor([1.0, 2.0, -1.0])[:, None, None]
    k = 6
    m = object_attention(fmap, steps=None)[0]
    obj = torch.zeros(h, w, dtype=torch.bool)
    obj[2:4, 1:4] = True
    assert torch.allclose(m[obj], torch.full((k,), 1 / (2 * k), dtype=torch.float64))
    assert torch.allclose(m[~obj], torch.full((n - k,), 1 / (2 * (n - k)), dtype=torch.float64))
    # With exactly two distinct feature vectors the graph is bipartite (zero weight inside each
    # group): the chain has period 2 and the walk oscillates, returning to uniform at every even step.
    walked = object_attention(fmap, steps=10)[0]
    assert torch.allclose(walked, torch.full_like(walked, 1 / n), atol=1e-12)
    odd = object_attention(fmap, steps=11)[0]
    assert torch.allclose(odd[obj], torch.full((k,), (n - k) / (n * k), dtype=torch.float64))
    assert torch.allclose((walked + odd) / 2, m, atol=1e-12)  # the average of the two phases is pi


def test_literal_reading_stays_uniform_and_walk_moves():
    torch.manual_seed(2)
    fmap = torch.randn(5, 8, 6, 6).relu()
    literal = object_attention(fmap, steps=10, reading="literal")
    assert torch.allclose(literal, torch.full_like(literal, 1 / 36), atol=1e-7)
    literal_forever = object_attention(fmap, steps=None, reading="literal")
    assert torch.allclose(literal_forever, torch.full_like(literal, 1 / 36), atol=1e-7)
    walk = object_attention(fmap, steps=10)
    assert float((walk - 1 / 36).abs().amax(dim=(1, 2)).min()) > 1e-3


def test_maps_are_distributions_and_batching_equals_per_image():
    torch.manual_seed(3)
    fmap = torch.randn(6, 12, 5, 7)
    for sigma in (None, 0.15):
        batch = object_attention(fmap, spatial_sigma=sigma)
        assert torch.allclose(batch.sum(dim=(1, 2)), torch.ones(6), atol=1e-5)
        single = torch.cat([object_attention(fmap[i:i + 1], spatial_sigma=sigma) for i in range(6)])
        assert torch.allclose(batch, single, atol=1e-6)
    maps = [torch.randn(6, 12, 6, 6), torch.randn(6, 20, 3, 3), torch.randn(6, 7, 6, 6)]
    batch = object_attention_map(maps, (24, 30))
    single = torch.cat([object_attention_map([m[i:i + 1] for m in maps], (24, 30)) for i in range(6)])
    assert batch.shape == (6, 24, 30)
    assert torch.allclose(batch, single, atol=1e-6)


def test_constant_map_gives_uniform_attention_without_nan():
    fmap = torch.ones(2, 4, 5, 5) * 3.7
    fmap = torch.cat([fmap, torch.randn(1, 4, 5, 5)])
    for steps in (0, 10, None):
        m = object_attention(fmap, steps=steps)
        assert torch.isfinite(m).all()
        assert torch.allclose(m[:2], torch.full((2, 5, 5), 1 / 25))
    assert torch.equal(dissimilarity_graph(fmap[:2]), torch.zeros(2, 25, 25))
    for rescale in ("minmax", "uniform"):
        att = object_attention_map([fmap], 10, rescale=rescale)
        assert torch.isfinite(att).all()
        assert torch.allclose(att[:2], torch.ones(2, 10, 10))  # no information: flat, all ones
    assert float(object_attention_map([fmap], 5)[2].min()) == pytest.approx(0.0, abs=1e-6)  # minmax at own size


def test_multi_layer_map_is_the_mean_of_rescaled_resized_layers():
    torch.manual_seed(4)
    a, b = torch.randn(3, 8, 6, 6), torch.randn(3, 16, 3, 3)
    both = object_attention_map({"s3": a, "s4": b}, 12)
    one, two = object_attention_map([a], 12), object_attention_map([b], 12)
    assert torch.allclose(both, (one + two) / 2, atol=1e-6)
    assert float(one.min()) >= 0 and float(one.max()) <= 1 + 1e-6
    uni = object_attention_map([a], 6, rescale="uniform")  # at the map's own size: mean exactly 1
    assert torch.allclose(uni.mean(dim=(1, 2)), torch.ones(3), atol=1e-5)


def test_channels_last_and_half_inputs():
    torch.manual_seed(5)
    fmap = torch.randn(2, 8, 6, 6)
    ref = object_attention(fmap)
    assert torch.allclose(object_attention(fmap.contiguous(memory_format=torch.channels_last)), ref, atol=1e-7)
    assert torch.allclose(object_attention(fmap.half()), ref, atol=1e-3)


def test_stationary_distribution_satisfies_detailed_balance():
    torch.manual_seed(6)
    w = dissimilarity_graph(torch.randn(2, 5, 4, 4, dtype=torch.float64), 0.3)
    pi, p = stationary_distribution(w), transition_matrix(w)
    flow = pi[:, :, None] * p
    assert torch.allclose(flow, flow.transpose(1, 2), atol=1e-15)
    assert torch.allclose(torch.bmm(pi[:, None], p)[:, 0], pi, atol=1e-15)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match=r"\(B, C, h, w\)"):
        object_attention(torch.randn(3, 4, 5))
    with pytest.raises(ValueError, match="steps"):
        object_attention(torch.randn(1, 2, 3, 3), steps=-1)
    with pytest.raises(ValueError, match="reading"):
        object_attention(torch.randn(1, 2, 3, 3), reading="backwards")
    with pytest.raises(ValueError, match="spatial_sigma"):
        dissimilarity_graph(torch.randn(1, 2, 3, 3), spatial_sigma=0)
    with pytest.raises(ValueError, match="NaN"):
        object_attention(torch.full((1, 2, 3, 3), float("nan")))
    with pytest.raises(ValueError, match="same images"):
        object_attention_map([torch.randn(2, 3, 4, 4), torch.randn(3, 3, 4, 4)], 8)
    with pytest.raises(ValueError, match="rescale"):
        object_attention_map([torch.randn(2, 3, 4, 4)], 8, rescale="softmax")


def test_minmax_keeps_a_nearly_flat_map_flat():
    # the literal reading returns 1/n up to rounding; min-max scaling must not turn that noise into a map
    torch.manual_seed(7)
    att = object_attention_map([torch.randn(3, 16, 6, 6).relu()], 12, reading="literal")
    assert torch.allclose(att, torch.ones_like(att))


def test_resizing_is_bilinear_interpolation():
    torch.manual_seed(8)
    fmap = torch.randn(3, 8, 5, 7).relu()
    att = object_attention_map([fmap], (23, 31))
    small = object_attention_map([fmap], (5, 7))  # at the map's own size: the rescaled map itself
    ref = torch.nn.functional.interpolate(small[:, None], size=(23, 31), mode="bilinear", align_corners=False)[:, 0]
    assert torch.allclose(att, ref, atol=1e-6)


def test_shuffled_positions_permute_the_plain_attention_but_not_the_gaussian_one():
    g = torch.Generator().manual_seed(5)
    maps = {"a": torch.rand(3, 4, 5, 5, generator=g, dtype=torch.float64),
            "b": torch.rand(3, 6, 5, 5, generator=g, dtype=torch.float64),
            "c": torch.rand(3, 2, 3, 4, generator=g, dtype=torch.float64)}
    shuffled = shuffle_positions(maps, seed=1)
    assert list(shuffled) == ["a", "b", "c"] and all(shuffled[k].shape == maps[k].shape for k in maps)
    assert torch.equal(shuffle_positions(maps, seed=1)["a"], shuffled["a"])  # the seed fixes the permutations
    assert not torch.equal(shuffle_positions(maps, seed=2)["a"], shuffled["a"])
    for i in range(3):
        # every position's feature vector is moved as a whole; layers of the same size move together
        flat_a, flat_b = maps["a"][i].flatten(1), maps["b"][i].flatten(1)
        perm = [int((flat_a == shuffled["a"][i].flatten(1)[:, j:j + 1]).all(0).nonzero()[0]) for j in range(25)]
        assert sorted(perm) == list(range(25))
        assert torch.equal(shuffled["b"][i].flatten(1), flat_b[:, perm])
        plain, moved = object_attention(maps["a"][i:i + 1]), object_attention(shuffled["a"][i:i + 1])
        assert torch.allclose(moved.flatten(), plain.flatten()[perm], atol=1e-12)
        gauss = object_attention(maps["a"][i:i + 1], spatial_sigma=0.15).flatten()[perm]
        assert not torch.allclose(object_attention(shuffled["a"][i:i + 1], spatial_sigma=0.15).flatten(), gauss)
    as_list = shuffle_positions([maps["a"], maps["c"]], seed=1)
    assert isinstance(as_list, list) and torch.equal(as_list[0], shuffled["a"])
    with pytest.raises(ValueError, match="same images"):
        shuffle_positions([maps["a"], maps["b"][:2]])
    with pytest.raises(ValueError, match="empty"):
        shuffle_positions([])
