"""Tests of zslib.analysis.probe: linear attribute probes.

Truth checks: an embedding that carries attribute A linearly and not B decodes A and B at chance;
the explicit split reproduces a direct scikit-learn fit exactly; class-disjoint folds stop a probe
from memorizing class clusters.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from zslib.analysis.probe import attribute_probe, probe_folds


def _embedding_with_a_not_b(seed=0, n=600, d=16):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = rng.integers(0, 3, n)
    directions = rng.normal(size=(4, d)) * 3.0
    x = directions[a] + rng.normal(size=(n, d))  # A is in the embedding, B is not
    return x, a, b


def test_attribute_in_the_embedding_decodes_and_absent_one_sits_at_chance():
    x, a, b = _embedding_with_a_not_b()
    rep = attribute_probe(x, {"A": a, "B": b}, folds=5, seed=0)
    assert rep.accuracy["A"] > 0.95
    assert abs(rep.accuracy["B"] - rep.chance["B"]) < 0.08
    assert rep.chance["B"] == pytest.approx(np.bincount(b).max() / b.size, abs=0.05)
    assert rep.above_chance("A") > 0.6
    assert rep.n_test == len(a) and rep.folds == 5 and not rep.grouped
    assert rep.n_values == {"A": 4, "B": 3}


def test_explicit_split_equals_a_direct_sklearn_fit_and_majority_chance():
    x, a, b = _embedding_with_a_not_b(1, n=300)
    mask = np.zeros(len(a), dtype=bool)
    mask[::3] = True
    rep = attribute_probe(torch.tensor(x), np.stack([a, b], 1), names=["A", "B"], test_mask=mask, C=0.5)
    for name, y in (("A", a), ("B", b)):
        scaler = StandardScaler().fit(x[~mask])
        clf = LogisticRegression(C=0.5, max_iter=1000).fit(scaler.transform(x[~mask]), y[~mask])
        expected = (clf.predict(scaler.transform(x[mask])) == y[mask]).mean()
        assert rep.accuracy[name] == pytest.approx(expected, abs=1e-12)
        majority = np.bincount(y[~mask]).argmax()
        assert rep.chance[name] == pytest.approx((y[mask] == majority).mean(), abs=1e-12)
        acc = rep.accuracy[name]
        assert rep.stderr[name] == pytest.approx(np.sqrt(acc * (1 - acc) / mask.sum()))
    assert rep.n_test == mask.sum() and rep.folds == 1


def test_class_disjoint_folds_stop_memorizing_class_clusters():
    # 40 classes, each a random point in 32-d; a class-level attribute with no direction in the space
    rng = np.random.default_rng(2)
    classes = np.repeat(np.arange(40), 10)
    attr_of_class = rng.integers(0, 2, 40)
    x = rng.normal(size=(40, 32))[classes] * 5 + rng.normal(size=(400, 32)) * 0.1
    y = attr_of_class[classes]
    memorized = attribute_probe(x, {"attr": y}, folds=5, seed=0)
    grouped = attribute_probe(x, {"attr": y}, groups=classes, folds=5, seed=0)
    assert memorized.accuracy["attr"] > 0.95  # image-level split: the clusters are simply memorized
    assert grouped.grouped
    assert grouped.accuracy["attr"] < 0.75  # class-disjoint: nothing general to find


def test_folds_are_seeded_balanced_and_group_disjoint():
    f = probe_folds(103, 5, seed=3)
    assert np.array_equal(f, probe_folds(103, 5, seed=3))
    assert not np.array_equal(f, probe_folds(103, 5, seed=4))
    assert np.bincount(f).max() - np.bincount(f).min() <= 1
    groups = np.repeat(np.arange(12), 7)
    g = probe_folds(len(groups), 4, groups=groups, seed=0)
    for c in range(12):
        assert np.unique(g[groups == c]).size == 1
    assert np.bincount(np.unique(np.stack([groups, g], 1), axis=0)[:, 1]).tolist() == [3, 3, 3, 3]


def test_deterministic_in_seed():
    x, a, b = _embedding_with_a_not_b(3, n=200)
    r1 = attribute_probe(x, {"A": a, "B": b}, seed=5)
    r2 = attribute_probe(x, {"A": a, "B": b}, seed=5)
    assert r1.accuracy == r2.accuracy and r1.chance == r2.chance
    assert list(r1.to_frame()["attribute"]) == ["A", "B"]
    assert "chance" in str(r1)


def test_bad_inputs_are_refused_clearly():
    x, a, b = _embedding_with_a_not_b(0, n=50)
    with pytest.raises(ValueError, match="one value per embedding"):
        attribute_probe(x, {"A": a[:-1]})
    with pytest.raises(TypeError, match="discrete"):
        attribute_probe(x, {"A": a.astype(float)})
    with pytest.raises(ValueError, match="names"):
        attribute_probe(x, np.stack([a, b], 1), names=["only_one"])
    with pytest.raises(ValueError, match="NaN"):
        attribute_probe(np.full((50, 2), np.nan), {"A": a})
    with pytest.raises(ValueError, match="distinct groups"):
        attribute_probe(x, {"A": a}, groups=np.arange(50) % 3, folds=5)
    with pytest.raises(ValueError, match="test_mask"):
        attribute_probe(x, {"A": a}, test_mask=np.ones(50, dtype=bool))


def test_first_per_group_against_a_loop():
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 7, size=200)
    from zslib.analysis.probe import first_per_group

    for k in (1, 3, 50):
        seen, expected = {}, []
        for i, g in enumerate(groups):
            seen[g] = seen.get(g, 0) + 1
            if seen[g] <= k:
                expected.append(i)
        assert first_per_group(groups, k).tolist() == expected


def test_max_per_group_equals_probing_the_subset():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(20), 12)
    attrs = (groups % 3)[:, None]
    x = rng.normal(size=(groups.size, 8)) + attrs * 1.5
    from zslib.analysis.probe import first_per_group

    rows = first_per_group(groups, 4)
    direct = attribute_probe(x[rows], attrs[rows], names=["a"], groups=groups[rows], folds=4)
    capped = attribute_probe(x, attrs, names=["a"], groups=groups, folds=4, max_per_group=4)
    assert capped.accuracy == direct.accuracy and capped.chance == direct.chance
    assert capped.n_test == rows.size
    with pytest.raises(ValueError, match="groups"):
        attribute_probe(x, attrs, names=["a"], max_per_group=4)
    with pytest.raises(ValueError, match="positive"):
        attribute_probe(x, attrs, names=["a"], groups=groups, max_per_group=0)
