"""The ZSML method (zslib.methods.zsml.method) and its classic comparison NCA (zslib.methods.zsml.nca): parameter
checks, the pair set and its Eq. 3 start (against a NumPy oracle), the alternation of Algorithm 1 (the
network phase moves only the pair network, the label phase only the labels, by exactly one Eq. 8 step),
the linear-relation variant, exact resume of a run killed mid-way, the book's pairwise protocol against
brute-force loops, and short end-to-end runs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from zslib.methods.zsml import cross_update as cu
from zslib.engine.config import Config
from zslib.engine.registry import METHODS
from zslib.methods.zsml.method import ZSML
from zslib.methods.zsml.pairwise import (class_sample, euclidean_scorer, matrix_metrics, neighbor_graph,
                                        normalized_euclidean_scorer, pairwise_metrics)
from zslib.engine.train import TrainSpec, train
from toys import Blocks

SMALL = {"k": 3, "height": 4, "stride": 4, "hidden": [5], "pairs": 60, "batch_pairs": 8, "eval_per_class": 3,
         "neighbors": 2}


class Feat(nn.Module):
    """A stand-in for EmbeddingNet: a fixed 12-d pooled feature (the flattened input) and a trainable head."""

    feature_dim, embedding_dim = 12, 6

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(12, 6)

    def pooled(self, x):
        return x.flatten(1)

    def forward(self, x):
        return nn.functional.normalize(self.head(self.pooled(x)), dim=1)


def _build(seed=0, **params):
    config = Config(method="zsml", method_params={**SMALL, **params}, embedding_dim=6, seed=seed)
    torch.manual_seed(seed)
    model = ZSML.attach(Feat(), config.method_params)
    return model, ZSML(config, model, 4)


# ------------------------------------------------------------------------------------------ parameters
def test_registered_with_the_papers_defaults_and_checked_parameters():
    assert METHODS["zsml"] is ZSML and "nca" in METHODS
    p = ZSML.validate({})
    assert (p["k"], p["height"], p["stride"], p["hidden"]) == (96, 8, 10, [1000, 1000])
    assert (p["alpha"], p["lambda"], p["relation"]) == (0.3, 0.1, "kernels")
    with pytest.raises(ValueError, match="alpha"):
        Config(method="zsml", method_params={"alpha": 0.6})  # beta = 1 - alpha must stay above alpha
    with pytest.raises(ValueError, match="relation must be one of"):
        Config(method="zsml", method_params={"relation": "quadratic"})
    with pytest.raises(TypeError, match="list of layer widths"):
        Config(method="zsml", method_params={"hidden": 1000})
    with pytest.raises(ValueError, match="needs features='embedding'"):
        _build(metric_steps=3)


# --------------------------------------------------------------------------- the pair set and Eq. 3
def test_pair_set_is_seeded_and_labels_start_at_eq3_of_the_fixed_features():
    model, method = _build()
    data = Blocks()
    method.prepare(model, data)
    again = _build()[1]
    again.prepare(model, data)
    assert torch.equal(method.first, again.first) and torch.equal(method.second, again.second)
    other = _build(seed=1)[1]
    other.prepare(model, data)
    assert not torch.equal(method.first, other.first)
    method.terms("network", model, None, None)  # the first ZSML step labels P
    x = data.x.flatten(1).double().numpy()
    a, b = method.first.numpy(), method.second.numpy()
    d2 = ((x[a] - x[b]) ** 2).sum(1)
    d2 = d2 / d2.max()
    pos = data.labels[a] == data.labels[b]
    oracle = np.where(pos, 1.0 - 0.3 * d2, 0.3 * (1.0 - d2))  # Eq. 3: positives in (0.7, 1), negatives in (0, 0.3)
    assert np.array_equal(method.positive.numpy(), pos) and pos.any() and (~pos).any()
    np.testing.assert_allclose(method.pair_labels.numpy(), oracle, atol=1e-6)
    np.testing.assert_allclose(method.initial_labels.numpy(), oracle, atol=1e-6)
    y = method.pair_labels.numpy()
    assert (y[pos] >= 0.7).all() and (y[pos] <= 1).all() and (y[~pos] >= 0).all() and (y[~pos] <= 0.3).all()


# ----------------------------------------------------------------------------- the alternation
def test_network_phase_moves_only_the_pair_network_and_label_phase_only_the_labels():
    model, method = _build()
    method.prepare(model, Blocks())
    method.terms("network", model, None, None)  # label P first, so what follows sees labels already set
    method.terms("labels", model, None, None)
    labels = method.pair_labels.clone()
    terms = method.terms("network", model, None, None)
    assert set(terms) == {"similarity"} and torch.equal(method.pair_labels, labels)
    terms["similarity"].backward()
    assert all(p.grad is not None for p in model.pair.parameters())
    assert all(p.grad is None for p in model.net.parameters())  # fixed features: nothing below R trains
    ids, s = method._pending
    expected = cu.label_step(labels[ids], s, method.positive[ids], lr=0.002, lam=0.1, alpha=0.3)
    assert method.terms("labels", model, None, None) == {}
    assert torch.equal(method.pair_labels[ids], expected)
    rest = torch.ones(len(labels), dtype=torch.bool)
    rest[ids] = False
    assert torch.equal(method.pair_labels[rest], labels[rest])  # pairs outside the batch keep their labels
    assert not torch.equal(method.pair_labels[ids], labels[ids])


def test_in_the_trainer_each_phase_changes_only_its_own_variables():
    snapshots = []

    class Spy(ZSML):
        def terms(self, phase, model, images, labels):
            snapshots.append((phase, [p.detach().clone() for p in model.pair.parameters()],
                              self.pair_labels.clone(), [p.detach().clone() for p in model.net.parameters()]))
            return super().terms(phase, model, images, labels)

    config = Config(method="zsml", method_params=SMALL, embedding_dim=6)
    torch.manual_seed(0)
    model = ZSML.attach(Feat(), config.method_params)
    method = Spy(config, model, 4)
    h = train(model, method, Blocks(), TrainSpec(iterations=3, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                 objective_lr=1e-2, device="cpu", progress=False))
    assert method.phases == ("network", "labels") and int(method.steps_done) == 3
    for (phase, p0, y0, n0), (_, p1, y1, n1) in zip(snapshots[1:], snapshots[2:]):  # from step 1's labels on
        net_moved = any(not torch.equal(a, b) for a, b in zip(p0, p1))
        labels_moved = not torch.equal(y0, y1)
        assert all(torch.equal(a, b) for a, b in zip(n0, n1))
        assert (net_moved, labels_moved) == ((True, False) if phase == "network" else (False, True))
    assert set(h.losses[0]) == {"step", "similarity", "total"}


def test_a_zsml_run_killed_mid_way_resumes_bitwise(tmp_path):
    def fit(path=None, callbacks=()):
        model, method = _build()
        train(model, method, Blocks(), TrainSpec(iterations=8, batch_classes=2, batch_per_class=3, lr=1e-2,
                                                 objective_lr=1e-2, device="cpu", progress=False, seed=0,
                                                 callbacks=callbacks, checkpoint_every=2,
                                                 checkpoint_path=None if path is None else path / "ck.pt"))
        return model, method

    whole = fit()

    class Kill(Exception):
        pass

    def kill(step, history):
        if step == 5:
            raise Kill

    with pytest.raises(Kill):
        fit(tmp_path, [kill])
    resumed = fit(tmp_path)
    for a, b in zip([*whole[0].state_dict().values(), *whole[1].state_dict().values()],
                    [*resumed[0].state_dict().values(), *resumed[1].state_dict().values()]):
        assert torch.equal(a, b)
    assert int(resumed[1].steps_done) == 8


def test_linear_relation_variant_sees_only_the_difference():
    model, _ = _build(relation="linear")
    g = torch.Generator().manual_seed(3)
    a, b, shift = (torch.randn(5, 12, generator=g) for _ in range(3))
    model.eval()
    with torch.no_grad():  # Table 9's LR: s depends on x_i - x_j only
        torch.testing.assert_close(model.pair(a + shift, b + shift), model.pair(a, b))
        kernels = _build()[0].eval()
        assert not torch.allclose(kernels.pair(a + shift, b + shift), kernels.pair(a, b))


# ------------------------------------------------------------------------ the pairwise protocol
def test_class_sample_is_stratified_and_seeded():
    y = np.repeat([5, 7, 9], [4, 2, 6])
    keep = class_sample(y, 3, seed=1)
    assert sorted(np.bincount(y[keep])[[5, 7, 9]]) == [2, 3, 3]
    assert np.array_equal(keep, class_sample(y, 3, seed=1)) and np.array_equal(class_sample(y, None), np.arange(12))


def test_neighbor_graph_and_recall_against_brute_force_loops():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(9, 9))
    y = np.repeat([0, 1, 2], 3)
    g = neighbor_graph(s, 2)
    oracle = np.zeros((9, 9))
    for i in range(9):
        others = sorted((j for j in range(9) if j != i), key=lambda j: -s[i, j])[:2]
        for j in others:
            oracle[i, j] = oracle[j, i] = 1
    assert np.array_equal(g, oracle)
    row = matrix_metrics(s, y, ks=(1, 2), neighbors=2)
    for k in (1, 2):
        hits = [any(y[j] == y[i] for j in sorted((j for j in range(9) if j != i), key=lambda j: -s[i, j])[:k])
                for i in range(9)]
        assert row[f"R@{k}"] == pytest.approx(np.mean(hits))
    assert 0 <= row["NMI"] <= 1 and 1 / 3 <= row["Purity"] <= 1


def test_pairwise_metrics_of_the_euclidean_scorer_equal_the_full_distance_matrix():
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(4), 5)
    x = rng.normal(size=(4, 6))[y] + 0.5 * rng.normal(size=(20, 6))
    keep = class_sample(y, 3, seed=2)
    d2 = ((x[keep, None, :] - x[None, keep, :]) ** 2).sum(-1)
    got = pairwise_metrics(euclidean_scorer, torch.tensor(x), y, per_class=3, seed=2, neighbors=3, max_pairs=7)
    want = matrix_metrics(-d2, y[keep], neighbors=3, seed=2, ks=(1, 2, 4, 8))
    assert got == pytest.approx(want)


def test_full_gallery_ranks_every_item_for_the_sampled_queries_by_brute_force():
    """Recall@K of the sampled queries against every item of the set (the query itself left out), checked by
    loops over the full distance matrix; the clustering columns are those of the sample alone."""
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(5), 9)
    x = rng.normal(size=(5, 6))[y] + 0.9 * rng.normal(size=(45, 6))
    keep = class_sample(y, 3, seed=1)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    got = pairwise_metrics(euclidean_scorer, torch.tensor(x), y, per_class=3, seed=1, neighbors=3, max_pairs=11,
                           full_gallery=True)
    for k in (1, 2, 4, 8):
        hits = [any(y[j] == y[i] for j in sorted((j for j in range(45) if j != i), key=lambda j: (d2[i, j], j))[:k])
                for i in keep]
        assert got[f"R@{k}"] == pytest.approx(np.mean(hits))
    sample = pairwise_metrics(euclidean_scorer, torch.tensor(x), y, per_class=3, seed=1, neighbors=3)
    assert {m: got[m] for m in ("ACC", "NMI", "Purity")} == pytest.approx({m: sample[m] for m in ("ACC", "NMI", "Purity")})
    assert got["R@1"] != sample["R@1"]  # a different retrieval task from the sample's own
    # every item a query: the same as the square protocol on the whole set
    assert pairwise_metrics(euclidean_scorer, torch.tensor(x), y, full_gallery=True) == pytest.approx(
        pairwise_metrics(euclidean_scorer, torch.tensor(x), y))


def test_full_gallery_map_at_r_against_brute_force_and_pytorch_metric_learning():
    """MAP@R of the sampled queries against every item: a loop over each query's first R neighbours, and, with
    every item a query, pytorch-metric-learning's AccuracyCalculator (an independent implementation)."""
    from pytorch_metric_learning.distances import LpDistance
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(4), [6, 9, 5, 8])
    x = rng.normal(size=(4, 5))[y] + 1.1 * rng.normal(size=(len(y), 5))
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    keep = class_sample(y, 3, seed=3)
    got = pairwise_metrics(euclidean_scorer, torch.tensor(x), y, per_class=3, seed=3, neighbors=3, ks=(1,),
                           full_gallery=True)
    aps = []
    for i in keep:
        r = int((y == y[i]).sum()) - 1
        ranked = sorted((j for j in range(len(y)) if j != i), key=lambda j: (d2[i, j], j))[:r]
        correct = [y[j] == y[i] for j in ranked]
        aps.append(sum(np.mean(correct[:n + 1]) for n in range(r) if correct[n]) / r)
    assert got["MAP@R"] == pytest.approx(np.mean(aps))
    every = pairwise_metrics(euclidean_scorer, torch.tensor(x), y, ks=(1,), full_gallery=True)
    pml = AccuracyCalculator(include=("mean_average_precision_at_r",), device=torch.device("cpu"),
                             knn_func=CustomKNN(LpDistance(normalize_embeddings=False)))
    want = pml.get_accuracy(torch.tensor(x, dtype=torch.float32), torch.tensor(y), ref_includes_query=True)
    assert every["MAP@R"] == pytest.approx(want["mean_average_precision_at_r"], abs=1e-6)


def test_normalized_euclidean_scorer_ranks_as_the_cosine():
    rng = np.random.default_rng(5)
    a, b = torch.tensor(rng.normal(size=(30, 7)) * rng.uniform(0.1, 9, size=(30, 1))), torch.tensor(rng.normal(size=(30, 7)))
    cos = torch.nn.functional.cosine_similarity(a, b)
    assert torch.allclose(normalized_euclidean_scorer(a, b), 2 * cos - 2)


def test_gallery_splits_and_input_metric_change_only_the_named_split_and_the_comparator():
    """A ZSML evaluator with ``gallery_splits=["unseen"]`` ranks every image only when told the split is unseen,
    and ``input_metric="normalized"`` scores the input features by their cosine (unseen: an independent loop)."""
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(4), 8)
    x = torch.tensor(rng.normal(size=(4, 12))[y] * rng.uniform(0.2, 5, size=(32, 1)) + rng.normal(size=(32, 12)),
                     dtype=torch.float32)
    model, method = _build(gallery_splits=["unseen"], input_metric="normalized")
    evaluate = method.pair_evaluator(model)
    seen, unseen = evaluate(x, y, seed=2, split="seen"), evaluate(x, y, seed=2, split="unseen")
    keep = class_sample(y, 3, seed=2)
    xn = torch.nn.functional.normalize(x, dim=1).numpy()
    cos = xn @ xn.T
    hits = [y[max((j for j in range(32) if j != i), key=lambda j: (cos[i, j], -j))] == y[i] for i in keep]
    assert unseen["input R@1"] == pytest.approx(np.mean(hits))
    sub = cos[np.ix_(keep, keep)]
    hits_sample = [y[keep][max((j for j in range(len(keep)) if j != i), key=lambda j: (sub[i, j], -j))] == y[keep][i]
                   for i in range(len(keep))]
    assert seen["input R@1"] == pytest.approx(np.mean(hits_sample))
    plain = _build()[1].pair_evaluator(model)(x, y, seed=2, split="unseen")
    assert plain["R@1"] == seen["R@1"]  # without gallery_splits every split is the sample against itself
    with pytest.raises(ValueError, match="split names"):
        _build(gallery_splits=["test"])


# ------------------------------------------------------------------------------------- end to end
TINY = dict(iterations=4, eval_every=4, synth_images_per_class=8, image_size=32, resize_size=36, embedding_dim=16,
            batch_classes=4, batch_per_class=2)


def test_zsml_and_nca_runs_end_to_end(tmp_path):
    from zslib.engine.runner import run

    r = run(Config(method="zsml", method_params={**SMALL, "k": 4, "hidden": [8], "pairs": 200, "batch_pairs": 16},
                   **TINY), results_dir=tmp_path, progress=False)
    unseen = r.metrics["unseen"]
    assert {"R@1", "ACC", "NMI", "Purity", "input R@1", "input ACC"} <= set(unseen)
    assert all(0.0 <= v <= 1.0 for v in unseen.values())
    n = run(Config(method="nca", method_params={"components": 4, "max_iter": 3, "eval_per_class": 3,
                                                 "neighbors": 2}, **TINY), results_dir=tmp_path, progress=False)
    assert {"R@1", "ACC", "NMI", "Purity"} <= set(n.metrics["unseen"])
