"""Tests of zslib.methods.zsml.pairwise: retrieval and clustering from a pair scorer, in chunks (xu2019zsml).

Oracles: brute-force Python loops over every pair (scores, top-k with ties by gallery index, Recall@K),
zslib.engine.evaluate.recall_at_k with a dot-product scorer, separable toy data for the clusterings, and
invariance of every result to the chunk size.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zslib.engine import evaluate as ev
from zslib.methods.zsml import pairwise as pw
from zslib.methods.zsml.relation import pair_similarity


def _asym(a, b):
    """An asymmetric, nonlinear scorer computed per pair (no cross-pair arithmetic)."""
    return torch.tanh((a * b).sum(1)) + 0.3 * (a[:, 0] - b[:, 1])


def _tied(a, b):
    """Few distinct values: lots of ties."""
    return torch.round(2 * ((a - b) ** 2).sum(1).neg()) / 2


def _data(n=23, d=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=dtype)


def _brute_matrix(scorer, q, g):
    return torch.tensor([[float(scorer(q[i:i + 1], g[j:j + 1])) for j in range(len(g))] for i in range(len(q))],
                        dtype=torch.float64)


def _brute_topk(s, k, exclude_self):
    idx = []
    for i, row in enumerate(s.tolist()):
        cand = [(-v, j) for j, v in enumerate(row) if not (exclude_self and j == i)]
        idx.append([j for _, j in sorted(cand)[:k]])
    return torch.tensor(idx)


@pytest.mark.parametrize("max_pairs", [1, 5, 23, 24, 100, 10_000])
def test_score_matrix_equals_brute_force_for_every_chunk_size(max_pairs):
    q, g = _data(9, seed=1), _data(23, seed=2)
    want = _brute_matrix(_asym, q, g)
    torch.testing.assert_close(pw.score_matrix(_asym, q, g, max_pairs=max_pairs), want, rtol=0, atol=0)
    torch.testing.assert_close(pw.score_matrix(_asym, q, max_pairs=max_pairs), _brute_matrix(_asym, q, q),
                               rtol=0, atol=0)


def test_score_matrix_with_zsml_network_matches_all_pairs():
    torch.manual_seed(0)
    net = pair_similarity(20, k=4, height=4, stride=3, hidden=(8, 8)).double().eval()
    x = _data(13, 20, seed=3)
    with torch.no_grad():
        want = net.all_pairs(x)
    for max_pairs in (7, 64, 1000):
        torch.testing.assert_close(pw.score_matrix(net, x, max_pairs=max_pairs), want, rtol=1e-12, atol=1e-12)
    # the network goes through its per-vector halves; a plain function of the pairs takes the generic path
    calls = []

    def pairs_only(a, b):
        calls.append(a.shape[0])
        return net(a, b)

    for relation in ("kernels", "linear"):
        net = pair_similarity(20, relation, k=4, height=4, stride=3, hidden=(8, 8)).double().eval()
        q, g = _data(5, 20, seed=4), _data(9, 20, seed=5)
        with torch.no_grad():
            want = torch.stack([net(qi.expand(9, -1), g) for qi in q])  # brute force, one row at a time
        for max_pairs in (1, 4, 9, 30):
            torch.testing.assert_close(pw.score_matrix(net, q, g, max_pairs=max_pairs), want, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(pw.score_matrix(pairs_only, q, g, max_pairs=max_pairs), want, rtol=1e-12,
                                       atol=1e-12)
    assert calls and max(calls) <= 30


@pytest.mark.parametrize("scorer", [_asym, _tied])
@pytest.mark.parametrize("max_pairs", [1, 6, 22, 23, 50, 10_000])
def test_score_topk_equals_brute_force_with_ties_by_gallery_index(scorer, max_pairs):
    x = _data(23, seed=4)
    s = _brute_matrix(scorer, x, x)
    for k in (1, 4, 22):
        nb = pw.score_topk(scorer, x, k=k, max_pairs=max_pairs)  # leave-one-out
        assert torch.equal(nb.indices, _brute_topk(s, k, True))
        torch.testing.assert_close(nb.values, s.gather(1, nb.indices), rtol=0, atol=0)
    q = _data(7, seed=5)
    sq = _brute_matrix(scorer, q, x)
    nb = pw.score_topk(scorer, q, x, k=5, max_pairs=max_pairs)
    assert torch.equal(nb.indices, _brute_topk(sq, 5, False))
    if scorer is _tied:
        assert bool((nb.values[:, 1:] == nb.values[:, :-1]).any())  # the test did exercise ties


def test_score_topk_agrees_with_zslib_evaluate_knn():
    x = _data(40, 6, seed=6, dtype=torch.float32)
    nb = pw.score_topk(lambda a, b: (a * b).sum(1), x, k=5, max_pairs=37)
    ref = ev.knn(x, k=5, metric="dot")
    assert torch.equal(nb.indices, ref.indices.cpu())


def _clustered(n_classes=5, per=8, d=6, spread=0.6, seed=7):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), per)
    x = rng.normal(size=(n_classes, d))[labels] * 1.0 + spread * rng.normal(size=(len(labels), d))
    perm = rng.permutation(len(labels))
    return torch.tensor(x[perm]), labels[perm]


def _cos(a, b):
    return torch.nn.functional.cosine_similarity(a, b, dim=1)


def test_pair_recall_equals_zslib_evaluate_with_a_cosine_scorer():
    x, y = _clustered(spread=1.2)
    ks = (1, 2, 4, 8)
    got = pw.pair_recall_at_k(_cos, x, y, ks, max_pairs=50)
    assert got == pytest.approx(ev.recall_at_k(x.numpy(), y, ks, metric="cosine"), abs=1e-12)
    assert 0 < got[1] < 1  # neither trivial nor impossible
    q, qy = x[:10], y[:10]
    got = pw.pair_recall_at_k(_cos, x[10:], y[10:], (1, 3), query=q, query_labels=qy, max_pairs=13)
    want = ev.recall_at_k(x[10:].numpy(), y[10:], (1, 3), metric="cosine", query_embeddings=q.numpy(),
                          query_labels=qy)
    assert got == pytest.approx(want, abs=1e-12)


def test_pair_recall_brute_force_with_an_asymmetric_scorer():
    x, y = _clustered(seed=8)
    s = _brute_matrix(_asym, x, x)
    order = _brute_topk(s, 4, True).numpy()
    want = {k: float(np.mean([(y[order[i, :k]] == y[i]).any() for i in range(len(y))])) for k in (1, 4)}
    assert pw.pair_recall_at_k(_asym, x, y, (1, 4), max_pairs=9) == pytest.approx(want, abs=1e-12)


def test_pair_recall_warns_about_unanswerable_queries():
    x, y = _clustered()
    y = y.copy()
    y[0] = 99  # a class of one
    with pytest.warns(UserWarning, match="1 of 40 queries"):
        pw.pair_recall_at_k(_cos, x, y, 1)


@pytest.mark.parametrize("cluster", [pw.spectral_clusters, pw.k_medoids])
def test_clusterings_recover_separable_classes(cluster):
    x, y = _clustered(spread=0.05, seed=9)
    s = pw.score_matrix(lambda a, b: torch.exp(-((a - b) ** 2).sum(1)), x)
    a = cluster(s, 5, seed=0)
    assert pw.cluster_scores(a, y) == {"ACC": 1.0, "NMI": 1.0, "Purity": 1.0}
    assert np.array_equal(cluster(s, 5, seed=0), a)  # deterministic given the seed


def test_k_medoids_result_is_a_fixed_point():
    x, y = _clustered(spread=1.0, seed=10)
    s = pw.score_matrix(_cos, x).numpy()
    a = pw.k_medoids(s, 5, seed=1)
    medoids = [np.flatnonzero(a == c)[s[np.ix_(a == c, a == c)].sum(1).argmax()] for c in range(5)]
    assert np.array_equal(s[:, medoids].argmax(1), a)


def test_cluster_scores_match_hand_computation_and_evaluate():
    labels = np.array([0, 0, 0, 1, 1, 2])
    assign = np.array([5, 5, 7, 7, 7, 7])  # cluster 5 = {0,0}, cluster 7 = {0,1,1,2}
    got = pw.cluster_scores(assign, labels)
    assert got["ACC"] == pytest.approx(4 / 6)  # 5 -> class 0 (2), 7 -> class 1 (2)
    assert got["Purity"] == pytest.approx(4 / 6)
    assert got["NMI"] == pytest.approx(ev.nmi(None, labels, assignments=assign))


def test_bad_input_and_training_mode_are_reported():
    x = _data(6)
    with pytest.raises(ValueError, match="shape"):
        pw.score_matrix(lambda a, b: a.sum(), x)
    with pytest.raises(ValueError, match="NaN"):
        pw.score_matrix(lambda a, b: a[:, 0] * float("nan"), x)
    with pytest.raises(ValueError, match="exceeds"):
        pw.score_topk(_asym, x, k=6)
    with pytest.raises(TypeError, match="callable"):
        pw.score_matrix("cosine", x)
    with pytest.raises(ValueError, match="square"):
        pw.spectral_clusters(np.ones((3, 4)), 2)
    net = pair_similarity(4, k=2, height=2, stride=1, hidden=(3,)).double()
    with pytest.warns(UserWarning, match="eval"):
        pw.score_matrix(net, x)
