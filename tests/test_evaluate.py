"""Tests for zslib.engine.evaluate against independent oracles.

* brute-force NumPy (float64, full sort with ties broken by index) for every retrieval metric, on
  data built so that float32 arithmetic is exact and ties are frequent;
* scikit-learn for NMI (and its k-means for the clustering pipeline);
* pytorch-metric-learning's AccuracyCalculator for precision@1, MAP@R and R-Precision;
* brute force over pairs / permutations for pairwise F1, cluster accuracy and purity.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from zslib.engine import evaluate as ev

BACKENDS = ["torch", "faiss"]


# ------------------------------------------------------------------------------------------
# data where float32 is exact and ties are everywhere
# ------------------------------------------------------------------------------------------
def tie_data(metric, n=90, n_classes=12, seed=0):
    """Labels plus embeddings whose scores are exact in float32 and full of ties.

    cosine: unit vectors with four entries of +-1/2 in 8 dimensions (dot products are multiples
    of 1/4), some rows scaled by a power of two (normalization stays exact);
    euclidean / dot: small integers. A few rows are exact duplicates of others.
    """
    rng = np.random.default_rng(seed)
    if metric == "cosine":
        x = np.zeros((n, 8))
        for i in range(n):
            cols = rng.choice(8, 4, replace=False)
            x[i, cols] = rng.choice([-0.5, 0.5], 4)
        x *= rng.choice([1.0, 2.0, 4.0], (n, 1))
    else:
        x = rng.integers(-2, 3, (n, 5)).astype(np.float64)
    dup = rng.choice(n, 10, replace=False)
    x[dup[:5]] = x[dup[5:]]
    labels = rng.integers(0, n_classes, n)
    return x.astype(np.float32), labels


def oracle_keys(q, g, metric):
    q, g = q.astype(np.float64), g.astype(np.float64)
    if metric == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
    if metric == "euclidean":
        return -((q[:, None, :] - g[None, :, :]) ** 2).sum(-1)  # larger = nearer
    return q @ g.T


def oracle_order(q, g, metric, exclude_self):
    """Per query, the gallery indices best first; ties by smaller index (np.lexsort is stable)."""
    keys = oracle_keys(q, g, metric)
    orders = []
    for i in range(len(q)):
        order = np.lexsort((np.arange(len(g)), -keys[i]))
        if exclude_self:
            order = order[order != i]
        orders.append(order)
    return orders, keys


def oracle_metrics(q, ql, g, gl, metric, exclude_self, ks):
    orders, _ = oracle_order(q, g, metric, exclude_self)
    rec = {k: [] for k in ks}
    ap, rp, knn5 = [], [], []
    for i, order in enumerate(orders):
        rel = gl[order] == ql[i]
        r = int(rel.sum())
        if r == 0:
            continue  # a query that cannot be answered is left out
        first = int(np.argmax(rel))
        for k in ks:
            rec[k].append(first < k)
        top = rel[:r]
        prec = np.cumsum(top) / np.arange(1, r + 1)
        ap.append(float((prec * top).sum() / r))
        rp.append(float(top.sum() / r))
        knn5.append(int(rel[:5].sum()) >= 3)
    return ({k: float(np.mean(v)) for k, v in rec.items()}, float(np.mean(ap)), float(np.mean(rp)),
            float(np.mean(knn5)))


# ------------------------------------------------------------------------------------------
# knn search
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["cosine", "euclidean", "dot"])
@pytest.mark.parametrize("loo", [True, False])
def test_knn_matches_bruteforce_with_ties(metric, backend, loo):
    x, _ = tie_data(metric)
    q = x if loo else x[:40] * (2 if metric == "cosine" else 1)
    g = None if loo else x[30:]
    k = 17
    res = ev.knn(q, g, k=k, metric=metric, backend=backend, chunk_size=7)
    orders, keys = oracle_order(q, x if loo else g, metric, loo)
    ties_seen = 0
    for i, order in enumerate(orders):
        assert res.indices[i].tolist() == order[:k].tolist()
        want = keys[i][order[:k]]
        want = np.sqrt(-want) if metric == "euclidean" else want
        np.testing.assert_allclose(res.values[i].numpy(), want, rtol=1e-6, atol=1e-6)
        ties_seen += int((np.diff(keys[i][order[: k + 1]]) == 0).sum())
    assert ties_seen > 50  # the data really exercises the tie rule


def test_knn_exclude_self_keeps_duplicates():
    x = np.array([[1.0, 0], [1.0, 0], [0, 1.0], [1, 1.0]], dtype=np.float32)
    nb = ev.knn(x, k=3)
    assert nb.indices[0].tolist() == [1, 3, 2]  # the duplicate of 0 is its nearest, self is gone
    assert nb.indices[1].tolist() == [0, 3, 2]
    np.testing.assert_allclose(nb.values[0].numpy(), [1, 2**-0.5, 0], atol=1e-6)
    nb2 = ev.knn(x, x, k=4, exclude_self=False)
    assert nb2.indices[1].tolist() == [0, 1, 3, 2]  # exact tie 1.0 = 1.0: smaller index first


def test_knn_degenerate_all_equal_rows():
    x = np.ones((30, 4), dtype=np.float32)
    for backend in BACKENDS:
        nb = ev.knn(x, k=5, backend=backend)
        for i in range(30):
            assert nb.indices[i].tolist() == [j for j in range(30) if j != i][:5]


def test_knn_accepts_torch_and_numpy_alike():
    x, _ = tie_data("euclidean", seed=3)
    a = ev.knn(x, k=4, metric="euclidean")
    b = ev.knn(torch.from_numpy(x).double(), k=4, metric="euclidean")
    assert torch.equal(a.indices, b.indices)


# ------------------------------------------------------------------------------------------
# retrieval metrics against the brute-force oracle
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["cosine", "euclidean", "dot"])
def test_retrieval_metrics_match_oracle_leave_one_out(metric, backend):
    x, y = tie_data(metric, n=150, n_classes=20, seed=1)
    ks = (1, 2, 4, 8, 16, 70, 149)  # max(ks) > 64: the torch path counts ranks instead of top-k
    rec, ap, rp, kacc = oracle_metrics(x, y, x, y, metric, True, ks)
    assert ev.recall_at_k(x, y, ks, metric=metric, backend=backend, chunk_size=16) == pytest.approx(rec, abs=1e-12)
    assert ev.recall_at_k(x, y, (1, 8), metric=metric, backend=backend) == pytest.approx(
        {1: rec[1], 8: rec[8]}, abs=1e-12)
    assert ev.map_at_r(x, y, metric=metric, backend=backend, chunk_size=16) == pytest.approx(ap, abs=1e-12)
    assert ev.r_precision(x, y, metric=metric, backend=backend) == pytest.approx(rp, abs=1e-12)
    assert ev.knn_accuracy(x, y, metric=metric, backend=backend) == pytest.approx(kacc, abs=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_rank_counting_mask_route_matches_oracle(metric, monkeypatch):
    # one class larger than the padded-table limit forces the label-mask route
    x, y = tie_data(metric, n=160, n_classes=8, seed=2)
    y[:90] = 0
    monkeypatch.setattr(ev, "_GATHER_LIMIT", 40)
    ks = (1, 5, 65, 100)
    rec, *_ = oracle_metrics(x, y, x, y, metric, True, ks)
    assert ev.recall_at_k(x, y, ks, metric=metric, chunk_size=23) == pytest.approx(rec, abs=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_retrieval_separate_query_and_gallery(backend):
    x, y = tie_data("cosine", n=160, n_classes=10, seed=4)
    q, ql, g, gl = x[:60], y[:60], x[60:], y[60:]
    ks = (1, 10, 20, 30, 40, 50, 80)
    rec, ap, rp, kacc = oracle_metrics(q, ql, g, gl, "cosine", False, ks)
    kw = dict(query_embeddings=q, query_labels=ql, backend=backend)
    assert ev.recall_at_k(g, gl, ks, **kw) == pytest.approx(rec, abs=1e-12)
    assert ev.map_at_r(g, gl, **kw) == pytest.approx(ap, abs=1e-12)
    assert ev.r_precision(g, gl, **kw) == pytest.approx(rp, abs=1e-12)
    assert ev.knn_accuracy(g, gl, **kw) == pytest.approx(kacc, abs=1e-12)
    row = ev.evaluate(g, gl, "inshop", q, ql)
    assert list(row) == ["R@1", "R@10", "R@20", "R@30", "R@40", "R@50"]
    assert row == pytest.approx({f"R@{k}": rec[k] for k in (1, 10, 20, 30, 40, 50)}, abs=1e-12)


def test_recall_hand_example():
    # 1-D points: 0 and 1 are class a, 5 and 6 class b, 2.9 class b: its nearest is 1 (class a)
    x = np.array([[0.0], [1.0], [5.0], [6.0], [2.9]])
    y = np.array([0, 0, 1, 1, 1])
    r = ev.recall_at_k(x, y, (1, 2), metric="euclidean")
    assert r == {1: 0.8, 2: 1.0}  # point 4: neighbours 1 (wrong) then 5.0 (right)
    # MAP@R of point 4: R = 2, ranking 1(a) 2(b) 0(a) -> top-2 precision at hit 2 = 1/2, AP = 1/4
    assert ev.map_at_r(x, y, metric="euclidean") == pytest.approx((1 + 1 + 1 + 1 + 0.25) / 5)


def test_matches_pytorch_metric_learning():
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    rng = np.random.default_rng(0)
    centers = rng.standard_normal((30, 16))
    y = rng.integers(0, 30, 600)
    x = (centers[y] + 0.9 * rng.standard_normal((600, 16))).astype(np.float32)
    calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                              k="max_bin_count", device=torch.device("cpu"))
    xn = torch.nn.functional.normalize(torch.from_numpy(x))  # PML's default: L2 on normalized
    pml = calc.get_accuracy(xn, torch.from_numpy(y))
    assert 0.2 < pml["precision_at_1"] < 0.95  # a non-trivial problem
    for backend in BACKENDS:
        assert ev.recall_at_k(x, y, 1, backend=backend)[1] == pytest.approx(pml["precision_at_1"], abs=1e-9)
        assert ev.map_at_r(x, y, backend=backend) == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-6)
        assert ev.r_precision(x, y, backend=backend) == pytest.approx(pml["r_precision"], abs=1e-6)
        one = ev.retrieval_metrics(x, y, backend=backend)  # PML's set from one search
        assert one == pytest.approx({"R@1": pml["precision_at_1"], "MAP@R": pml["mean_average_precision_at_r"],
                                     "RP": pml["r_precision"]}, abs=1e-6)


def test_knn_accuracy_rule():
    # points 0..4 on a line, labels 0 0 0 1 1; equal distances are ordered by index, so
    # point 3 sees 2(0) 4(1) 1(0) 0(0) and point 2 sees 1(0) 3(1) 0(0) 4(1)
    x = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    y = np.array([0, 0, 0, 1, 1])
    assert ev.knn_accuracy(x, y, k=4, min_agree=2, metric="euclidean") == pytest.approx(
        np.mean([True, True, True, False, False]))
    assert ev.knn_accuracy(x, y, k=2, min_agree=2, metric="euclidean") == pytest.approx(
        np.mean([True, True, False, False, False]))


# ------------------------------------------------------------------------------------------
# clustering
# ------------------------------------------------------------------------------------------
def test_nmi_matches_sklearn():
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(0)
    for trial in range(20):
        n = int(rng.integers(2, 200))
        y = rng.integers(0, int(rng.integers(1, 12)), n)
        c = rng.integers(0, int(rng.integers(1, 12)), n)
        assert ev.nmi(None, y, assignments=c) == pytest.approx(normalized_mutual_info_score(y, c), abs=1e-10)
    y = np.array(list("aabbcc"))
    assert ev.nmi(None, y, assignments=[5, 5, 7, 7, 9, 9]) == pytest.approx(1.0)
    assert ev.nmi(None, [1, 1, 1], assignments=[0, 0, 0]) == 1.0  # both entropies 0


def test_nmi_kmeans_pipeline_matches_sklearn():
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(6), 25)
    x = (rng.standard_normal((6, 10))[y] + 0.8 * rng.standard_normal((150, 10))).astype(np.float32)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    c = KMeans(6, n_init=1, random_state=3).fit_predict(xn)
    assert ev.nmi(x, y, seed=3) == pytest.approx(normalized_mutual_info_score(y, c), abs=1e-10)
    assert np.array_equal(ev.kmeans(x, 6, seed=3), ev.kmeans(x, 6, seed=3))


def brute_f1(y, c):
    tp = fp = fn = 0
    for i, j in itertools.combinations(range(len(y)), 2):
        same_y, same_c = y[i] == y[j], c[i] == c[j]
        tp += same_y and same_c
        fp += same_c and not same_y
        fn += same_y and not same_c
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def brute_acc(y, c):
    ys, cs = np.unique(y), np.unique(c)
    best = 0
    big, small, swap = (cs, ys, False) if len(cs) >= len(ys) else (ys, cs, True)
    for perm in itertools.permutations(big, len(small)):
        mapping = dict(zip(small, perm))
        if swap:  # map clusters (small) to classes
            hits = sum(mapping.get(ci) == yi for yi, ci in zip(y, c))
        else:  # map classes (small) to clusters
            hits = sum(mapping.get(yi) == ci for yi, ci in zip(y, c))
        best = max(best, hits)
    return best / len(y)


def brute_purity(y, c):
    return sum(np.bincount(y[c == k]).max() for k in np.unique(c)) / len(y)


def test_pairwise_f1_accuracy_purity_against_brute_force():
    rng = np.random.default_rng(2)
    for trial in range(15):
        n = int(rng.integers(2, 40))
        y = rng.integers(0, int(rng.integers(1, 5)), n)
        c = rng.integers(0, int(rng.integers(1, 6)), n)
        assert ev.pairwise_f1(None, y, assignments=c) == pytest.approx(brute_f1(y, c), abs=1e-12)
        assert ev.cluster_accuracy(None, y, assignments=c) == pytest.approx(brute_acc(y, c), abs=1e-12)
        assert ev.purity(None, y, assignments=c) == pytest.approx(brute_purity(y, c), abs=1e-12)
    assert ev.pairwise_f1(None, [0, 1, 2], assignments=[0, 1, 2]) == 0.0  # no pair at all: 0 by convention


def test_clustering_perfect_on_separated_blobs():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(5), 20)
    x = np.eye(5, 8)[y] * 10 + 0.01 * rng.standard_normal((100, 8))
    for fn in (ev.nmi, ev.pairwise_f1, ev.cluster_accuracy, ev.purity):
        assert fn(x, y) == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------
# DeML's sim
# ------------------------------------------------------------------------------------------
def test_mean_pairwise_cosine():
    rng = np.random.default_rng(4)
    f = rng.standard_normal((7, 4, 6))
    want = np.mean([f[s, a] @ f[s, b] / np.linalg.norm(f[s, a]) / np.linalg.norm(f[s, b])
                    for s in range(7) for a in range(4) for b in range(a + 1, 4)])
    assert ev.mean_pairwise_cosine(f) == pytest.approx(want, abs=1e-12)
    assert ev.mean_pairwise_cosine(f.reshape(7, 24), n_parts=4) == pytest.approx(want, abs=1e-12)
    same = np.tile(rng.standard_normal((5, 1, 3)), (1, 3, 1))
    assert ev.mean_pairwise_cosine(torch.from_numpy(same)) == pytest.approx(1.0)
    assert ev.mean_pairwise_cosine(np.eye(4)[None].repeat(2, 0)) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="n_parts"):
        ev.mean_pairwise_cosine(f.reshape(7, 24))
    with pytest.raises(ValueError, match="split"):
        ev.mean_pairwise_cosine(f.reshape(7, 24), n_parts=5)


# ------------------------------------------------------------------------------------------
# evaluate: the book's rows
# ------------------------------------------------------------------------------------------
def test_evaluate_rows_agree_with_the_metric_functions():
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(12), 10)
    x = (rng.standard_normal((12, 16))[y] + rng.standard_normal((120, 16))).astype(np.float32)
    for ds in ("cub200", "cars196", "synthparts"):
        row = ev.evaluate(x, y, ds, seed=1)
        assert list(row) == ["R@1", "R@2", "R@4", "R@8", "NMI", "F1"]
    rec = ev.recall_at_k(x, y)
    assert row == pytest.approx({**{f"R@{k}": v for k, v in rec.items()}, "NMI": ev.nmi(x, y, seed=1),
                                 "F1": ev.pairwise_f1(x, y, seed=1)}, abs=1e-12)
    fl = ev.evaluate(x, y, "flowers102", extra=("MAP@R", "RP", "ACC", "Purity", "R@16"))
    assert list(fl) == ["R@1", "R@2", "R@4", "R@8", "kNN", "NMI", "MAP@R", "RP", "ACC", "Purity", "R@16"]
    assert fl["kNN"] == pytest.approx(ev.knn_accuracy(x, y))
    assert fl["MAP@R"] == pytest.approx(ev.map_at_r(x, y))
    assert fl["R@16"] == pytest.approx(ev.recall_at_k(x, y, 16)[16])
    assert all(0.0 <= v <= 1.0 for v in fl.values())
    sop_y = np.repeat(np.arange(300), 5)
    sop_x = rng.standard_normal((1500, 8)).astype(np.float32)
    sop = ev.evaluate(sop_x, sop_y, "sop")
    assert list(sop) == ["R@1", "R@10", "R@100", "R@1000"]
    assert sop == pytest.approx({f"R@{k}": v for k, v in
                                 ev.recall_at_k(sop_x, sop_y, (1, 10, 100, 1000), backend="faiss").items()})
    assert ev.evaluate(x, y, "cub200") == ev.evaluate(x, y, "cub200")  # deterministic


# ------------------------------------------------------------------------------------------
# bad input: clear errors or the documented conventions
# ------------------------------------------------------------------------------------------
def test_bad_input_errors():
    x = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    y = np.repeat(np.arange(5), 2)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite.*row 3"):
        ev.recall_at_k(bad, y)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        ev.knn(bad, k=1)
    with pytest.raises(ValueError, match="labels has 9 entries"):
        ev.recall_at_k(x, y[:9])
    with pytest.raises(ValueError, match="empty"):
        ev.recall_at_k(np.zeros((0, 4)), [])
    with pytest.raises(ValueError, match="shape \\(n, d\\)"):
        ev.knn(np.zeros(4), k=1)
    with pytest.raises(ValueError, match="max\\(ks\\) = 10 .* 9 gallery items"):
        ev.recall_at_k(x, y, (1, 10))
    with pytest.raises(ValueError, match="between 1 and the 9"):
        ev.knn(x, k=10)
    with pytest.raises(ValueError, match="zero"):
        ev.recall_at_k(np.vstack([x, np.zeros((1, 4))]), np.append(y, 0))
    with pytest.raises(ValueError, match="overflow"):
        ev.knn(x * 1e19, k=1, metric="dot")
    huge = ev.knn(x * 1e30, k=3)  # cosine normalizes in float64 first: same neighbours
    assert torch.equal(huge.indices, ev.knn(x, k=3).indices)
    with pytest.raises(ValueError, match="metric"):
        ev.recall_at_k(x, y, metric="manhattan")
    with pytest.raises(ValueError, match="unknown dataset"):
        ev.evaluate(x, y, "imagenet")
    with pytest.raises(ValueError, match="query_embeddings"):
        ev.evaluate(x, y, "inshop")
    with pytest.raises(ValueError, match="both"):
        ev.recall_at_k(x, y, query_embeddings=x)
    with pytest.raises(ValueError, match="dimension"):
        ev.recall_at_k(x, y, query_embeddings=x[:, :3], query_labels=y)
    with pytest.raises(ValueError, match="single sample"):
        ev.recall_at_k(x, np.arange(10))
    assert ev.recall_at_k(x, y, 9)[9] == 1.0  # K = n - 1 is allowed: everything is retrieved


def test_singleton_classes_are_left_out_with_a_warning():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    y = np.repeat(np.arange(10), 4)
    x2 = np.vstack([x, rng.standard_normal((3, 6)).astype(np.float32)])
    y2 = np.concatenate([y, [100, 101, 102]])  # three one-sample classes
    with pytest.warns(UserWarning, match="3 of 43 queries"):
        r2 = ev.recall_at_k(x2, y2, (1, 4))
    # equals the oracle restricted to the answerable queries, with the lone items still in the gallery
    rec, ap, *_ = oracle_metrics(x2, y2, x2, y2, "cosine", True, (1, 4))
    assert r2 == pytest.approx(rec, abs=1e-12)
    with pytest.warns(UserWarning):
        assert ev.map_at_r(x2, y2) == pytest.approx(ap, abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning when every class has two samples
        ev.recall_at_k(x, y, (1, 4))


# ------------------------------------------------------------------------------------------
# one search for several metrics
# ------------------------------------------------------------------------------------------
def _separate(g, gl, ks, backend, metric="cosine", **kw):
    """The row from the separate functions (one search each)."""
    kw = dict(metric=metric, backend=backend, **kw)
    row = {f"R@{k}": v for k, v in ev.recall_at_k(g, gl, ks, **kw).items()}
    row["MAP@R"] = ev.map_at_r(g, gl, **kw)
    row["RP"] = ev.r_precision(g, gl, **kw)
    row["kNN"] = ev.knn_accuracy(g, gl, **kw)
    return row


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("split", [False, True])
def test_one_search_equals_separate_calls_exactly(backend, metric, split):
    x, y = tie_data(metric, n=170, n_classes=14, seed=7)
    if split:  # In-Shop style: separate queries (some scaled copies of gallery items) and gallery
        q, ql, g, gl = x[:60], y[:60], x[60:], y[60:]
        kw = dict(query_embeddings=q, query_labels=ql)
    else:
        q, ql, g, gl, kw = x, y, x, y, {}
    ks = (1, 2, 4, 8, 70, 100)  # 70 and 100 > 64: the torch path counts ranks for those queries
    names = [f"R@{k}" for k in ks] + ["MAP@R", "RP", "kNN"]
    one = ev.retrieval_metrics(g, gl, names, metric=metric, backend=backend, chunk_size=16, **kw)
    assert list(one) == names
    assert one == _separate(g, gl, ks, backend, metric, **kw)  # exactly, not approximately
    rec, ap, rp, kacc = oracle_metrics(q, ql, g, gl, metric, not split, ks)
    assert one == pytest.approx({**{f"R@{k}": rec[k] for k in ks}, "MAP@R": ap, "RP": rp, "kNN": kacc},
                                abs=1e-12)
    # the data exercise the torch path's second stage: queries whose first hit lies deeper than
    # the top-R that MAP@R needs, and ties between the scores
    orders, keys = oracle_order(q, g, metric, not split)
    r_max = max(int((gl[o] == ql[i]).sum()) for i, o in enumerate(orders))
    deep = sum(int(np.argmax(gl[o] == ql[i])) >= r_max for i, o in enumerate(orders))
    assert deep >= 3
    # any subset and order gives the same values
    sub = ev.retrieval_metrics(g, gl, ["RP", "R@100", "R@1"], metric=metric, backend=backend, **kw)
    assert sub == {k: one[k] for k in ("RP", "R@100", "R@1")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_search_mask_route_and_knn_rule(backend, monkeypatch):
    # one class larger than the padded-table limit: the torch path's label-mask route
    x, y = tie_data("cosine", n=160, n_classes=8, seed=2)
    y[:90] = 0
    monkeypatch.setattr(ev, "_GATHER_LIMIT", 40)
    names = ["R@1", "R@65", "R@120", "MAP@R", "RP", "kNN"]
    one = ev.retrieval_metrics(x, y, names, backend=backend, chunk_size=23, knn_k=7, knn_min_agree=2)
    assert one == {**{f"R@{k}": v for k, v in ev.recall_at_k(x, y, (1, 65, 120), backend=backend).items()},
                   "MAP@R": ev.map_at_r(x, y, backend=backend), "RP": ev.r_precision(x, y, backend=backend),
                   "kNN": ev.knn_accuracy(x, y, k=7, min_agree=2, backend=backend)}


def test_backends_agree_exactly():
    x, y = tie_data("euclidean", n=200, n_classes=15, seed=8)
    names = ["R@1", "R@10", "R@100", "MAP@R", "RP", "kNN"]
    rows = [ev.retrieval_metrics(x, y, names, metric="euclidean", backend=b) for b in BACKENDS]
    assert rows[0] == rows[1]


def _count_searches(monkeypatch):
    """Wrap the two back ends' search entry points; returns the list of calls."""
    calls = []
    faiss_chunks, scores = ev._faiss_knn_chunks, ev._scores

    def counted_faiss(*a, **k):
        calls.append("faiss")
        return faiss_chunks(*a, **k)

    def counted_scores(*a, **k):
        calls.append("torch")
        return scores(*a, **k)

    monkeypatch.setattr(ev, "_faiss_knn_chunks", counted_faiss)
    monkeypatch.setattr(ev, "_scores", counted_scores)
    return calls


@pytest.mark.parametrize("backend", BACKENDS)
def test_evaluate_searches_once(backend, monkeypatch):
    rng = np.random.default_rng(9)
    y = np.repeat(np.arange(12), 10)
    x = (rng.standard_normal((12, 16))[y] + rng.standard_normal((120, 16))).astype(np.float32)
    calls = _count_searches(monkeypatch)
    row = ev.evaluate(x, y, "flowers102", extra=("MAP@R", "RP", "R@100"), backend=backend)
    assert calls == ["faiss"] if backend == "faiss" else calls == ["torch"]  # one chunk, one product
    calls.clear()
    ev.retrieval_metrics(x, y, ("R@1", "R@100", "MAP@R", "RP", "kNN"), backend=backend, chunk_size=50)
    assert calls == (["faiss"] if backend == "faiss" else ["torch"] * 3)  # 120 queries in chunks of 50
    monkeypatch.undo()
    assert row["kNN"] == ev.knn_accuracy(x, y, backend=backend)
    assert row["MAP@R"] == ev.map_at_r(x, y, backend=backend)
    assert row["R@100"] == ev.recall_at_k(x, y, 100, backend=backend)[100]


def test_retrieval_metrics_errors():
    x, y = tie_data("cosine", n=30, n_classes=5)
    with pytest.raises(ValueError, match="unknown retrieval metric 'NMI'"):
        ev.retrieval_metrics(x, y, ("R@1", "NMI"))
    with pytest.raises(ValueError, match="unknown retrieval metric 'R@0'"):
        ev.retrieval_metrics(x, y, ("R@0",))
    with pytest.raises(ValueError, match="empty"):
        ev.retrieval_metrics(x, y, ())
    with pytest.raises(ValueError, match="the largest K = 30 .* 29 gallery items"):
        ev.retrieval_metrics(x, y, ("R@30",))
    with pytest.raises(ValueError, match="min_agree"):
        ev.retrieval_metrics(x, y, ("kNN",), knn_k=3, knn_min_agree=4)
    assert ev.retrieval_metrics(x, y, "MAP@R") == {"MAP@R": ev.map_at_r(x, y)}


def test_inshop_validation_classes_are_scored_leave_one_out_only_when_asked():
    """In-Shop's row (R@1 ... R@50) on a set without queries, such as its validation classes: every item against
    the others (brute force with numpy), only with ``leave_one_out=True``; without it, an error that says so."""
    from zslib.engine.evaluate import evaluate

    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(12), 6)
    x = rng.normal(size=(len(labels), 8)) + 0.8 * rng.normal(size=(12, 8))[labels]
    with pytest.raises(ValueError, match="leave_one_out=True"):
        evaluate(torch.tensor(x), torch.tensor(labels), dataset="inshop")
    row = evaluate(torch.tensor(x), torch.tensor(labels), dataset="inshop", leave_one_out=True)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = u @ u.T
    np.fill_diagonal(sim, -np.inf)
    order = np.argsort(-sim, axis=1, kind="stable")
    for k in (1, 10, 20, 30, 40, 50):
        want = np.mean([(labels[order[i, :k]] == labels[i]).any() for i in range(len(labels))])
        assert row[f"R@{k}"] == pytest.approx(want)
    assert list(row) == ["R@1", "R@10", "R@20", "R@30", "R@40", "R@50"]
