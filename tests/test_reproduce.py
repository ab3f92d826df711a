"""zslib.analysis.reproduce: a retrained run against its stored result. Retrieval metrics must agree; a clustering
metric must lie in the range its k-means seeds give, because one k-means start can land in another optimum."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from zslib.engine.config import Config
from zslib.engine.evaluate import evaluate
from zslib.analysis.reproduce import CLUSTER_METRICS, check_reproduced, reproduction_gaps
from zslib.engine.runner import build_data, build_method, load_model, run, split_metrics
from zslib.engine.train import embed

TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    c = Config.from_profile("quick", **TINY)
    first = run(c, results_dir=tmp_path_factory.mktemp("a"), progress=False, device="cpu")
    again = run(c, results_dir=tmp_path_factory.mktemp("b"), force=True, progress=False, device="cpu")
    return first, again


def _with(result, split, name, value):
    metrics = {s: dict(row) for s, row in result.metrics.items()}
    metrics[split][name] = value
    return dataclasses.replace(result, metrics=metrics)


def test_split_metrics_at_the_runs_own_seed_is_the_stored_evaluation(runs, one_thread):
    first, again = runs
    data = build_data(again.config)
    model = load_model(again, "cpu")
    method = build_method(again.config, model, np.unique(np.asarray(data["train"].labels)))
    assert split_metrics(again.config, model, data, "cpu", method) == again.metrics
    # another k-means seed: the unseen row of zslib.engine.evaluate with that seed, computed here independently
    e, labels = embed(model, data["unseen"], batch_size=again.config.eval_batch_size, device="cpu")
    seeded = split_metrics(again.config, model, data, "cpu", method, cluster_seed=3)
    assert seeded["unseen"] == evaluate(e, labels, dataset=again.config.dataset, seed=3, extra=("MAP@R",))
    assert seeded["seen"] == again.metrics["seen"]  # Recall@K has no seed


def test_the_same_run_retrained_has_no_gap(runs, one_thread):
    first, again = runs
    gaps = reproduction_gaps(first, again)
    assert set(gaps) == {(s, m) for s, row in first.metrics.items() for m in row}
    assert max(gaps.values()) == 0.0 and check_reproduced(first, again) == 0.0


def test_a_moved_retrieval_metric_is_caught(runs, one_thread):
    first, again = runs
    moved = _with(first, "unseen", "R@1", first.metrics["unseen"]["R@1"] + 0.05)
    assert reproduction_gaps(moved, again)["unseen", "R@1"] == pytest.approx(0.05)
    with pytest.raises(RuntimeError, match="unseen R@1 recorded .* off by 0.0500"):
        check_reproduced(moved, again, tolerance=0.01)


def test_a_clustering_metric_is_judged_against_the_range_of_its_kmeans_seeds(runs, one_thread):
    first, again = runs
    (name,) = [m for m in first.metrics["unseen"] if m in CLUSTER_METRICS][:1]
    data = build_data(again.config)
    model = load_model(again, "cpu")
    e, labels = embed(model, data["unseen"], batch_size=again.config.eval_batch_size, device="cpu")
    values = [again.metrics["unseen"][name]] + [evaluate(e, labels, dataset=again.config.dataset, seed=s)[name]
                                                  for s in range(5)]
    lo, hi = min(values), max(values)
    inside = _with(first, "unseen", name, (lo + hi) / 2)
    assert reproduction_gaps(inside, again)["unseen", name] == 0.0
    below = _with(first, "unseen", name, lo - 0.2)
    assert reproduction_gaps(below, again)["unseen", name] == pytest.approx(0.2)
    with pytest.raises(RuntimeError, match=f"unseen {name} .* outside the range of k-means seeds by 0.2000"):
        check_reproduced(below, again, tolerance=0.01)


def test_two_different_runs_are_refused(runs):
    first, again = runs
    other = dataclasses.replace(first, config=first.config.replace(seed=1))
    with pytest.raises(ValueError, match="two different runs"):
        reproduction_gaps(other, again)


def test_a_run_records_the_cpu_it_ran_on(runs):
    from pathlib import Path

    from zslib.engine.store import cpu_model

    first, _ = runs
    assert first.provenance["cpu"] == cpu_model()
    info = Path("/proc/cpuinfo")
    if info.is_file():
        names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
                 if line.lower().startswith("model name")]
        assert cpu_model() == (names[0] if names else cpu_model())


def test_the_rule_is_exact_on_the_recording_machine_and_the_stated_tolerance_elsewhere(runs):
    from zslib.analysis.reproduce import EXACT, check_reproduced_here, reproduction_mode, reproduction_rule

    first, again = runs
    assert reproduction_mode(first)[0] == "exact"  # recorded by this process: same processor and torch
    assert reproduction_rule(first, 0.01)[0] == EXACT
    assert check_reproduced_here(first, again, 0.01)[0] == 0.0  # bitwise
    moved = _with(first, "unseen", "R@1", first.metrics["unseen"]["R@1"] + 1e-4)  # one query of 10,000
    with pytest.raises(RuntimeError, match="on the processor that recorded it"):
        check_reproduced_here(moved, again, 0.01)
    elsewhere = dataclasses.replace(moved, provenance={**moved.provenance, "cpu": "Intel(R) Xeon(R) Platinum 8480+"})
    assert reproduction_mode(elsewhere)[0] == "tolerance"
    tolerance, why = reproduction_rule(elsewhere, 0.01)
    assert tolerance == 0.01 and "Intel" in why
    assert check_reproduced_here(elsewhere, again, 0.01)[0] == pytest.approx(1e-4)
    other_torch = dataclasses.replace(first, provenance={**first.provenance, "torch_version": "2.0.0"})
    assert reproduction_mode(other_torch)[0] == "tolerance"  # another torch may sum in another order too
