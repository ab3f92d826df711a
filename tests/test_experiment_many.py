"""Tests of zslib.experiment.run_many (grids of runs, several at once) and of the dropout option."""
from __future__ import annotations

import os

import pytest
import torch

from zslib import experiment
from zslib.experiment import Config, config_hash, default_workers, run, run_grid, run_many
from zslib.engine.models import build_model

TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


def test_parallel_runs_equal_sequential_runs_and_keep_the_order(tmp_path, one_thread):
    configs = [Config.from_profile("quick", **TINY, seed=s, loss=loss)
               for s, loss in ((1, "triplet"), (0, "contrastive"), (2, "triplet"))]
    parallel = run_many(configs, workers=2, results_dir=tmp_path / "par", progress=False)
    sequential = run_many(configs, workers=1, results_dir=tmp_path / "seq", progress=False)
    assert [r.config for r in parallel] == configs
    for p, s in zip(parallel, sequential):
        # one thread in the workers and here: the same arithmetic, so bitwise the same numbers
        assert p.metrics == s.metrics and p.history.losses == s.history.losses
        assert p.provenance["torch_threads"] == s.provenance["torch_threads"] == 1
    assert parallel[0].metrics != parallel[2].metrics  # different seeds really are different runs


def test_stored_runs_are_loaded_and_equal_configs_train_once(tmp_path, monkeypatch, one_thread):
    a = Config.from_profile("quick", **TINY, seed=0)
    first = run(a, results_dir=tmp_path, progress=False)
    trained = []
    from zslib.engine import grid, store
    real_run = grid.run

    def counting_run(config, *args, **kwargs):
        if not store.result_path(config, tmp_path).exists():
            trained.append(config_hash(config))
        return real_run(config, *args, **kwargs)

    monkeypatch.setattr(grid, "run", counting_run)
    b = a.replace(seed=1)
    out = run_many([a, b, b, a], workers=1, results_dir=tmp_path, progress=False)
    assert trained == [config_hash(b)]  # a was stored; b appears twice and trains once
    assert out[0].metrics == first.metrics and out[3].metrics == first.metrics
    assert out[1].metrics == out[2].metrics and out[1].config.seed == 1


def test_a_failing_run_in_a_worker_is_reported(tmp_path, one_thread, monkeypatch):
    from zslib.engine import method as methods, registry

    class Failing(methods.Method):
        name, paper, equations = "failing", "test", "none"

        def terms(self, phase, model, images, labels):
            raise RuntimeError("boom in a worker")

    monkeypatch.setitem(registry.METHODS, "failing", Failing)  # registered before the pool forks
    bad = Config.from_profile("quick", **TINY, method="failing")
    good = Config.from_profile("quick", **TINY)
    with pytest.raises(Exception, match="boom in a worker"):
        run_many([good, bad], workers=2, results_dir=tmp_path, progress=False)


def test_default_workers(monkeypatch):
    monkeypatch.delenv("ZS_WORKERS", raising=False)
    assert default_workers("cuda") == 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert default_workers("cpu") == cores
    monkeypatch.setenv("ZS_WORKERS", "3")
    assert default_workers("cpu") == 3
    monkeypatch.setenv("ZS_WORKERS", "two")
    with pytest.raises(ValueError, match="ZS_WORKERS"):
        default_workers("cpu")


def test_run_many_rejects_what_is_not_a_config(tmp_path):
    with pytest.raises(TypeError, match="Config"):
        run_many([{"loss": "triplet"}], results_dir=tmp_path)


def test_dropout_sits_before_the_embedding_layer_and_only_acts_in_training():
    torch.manual_seed(0)
    model = build_model("smallcnn", 8, dropout=0.5, normalize=False, widths=[4, 4, 4, 4])
    x = torch.rand(6, 3, 32, 32)
    model.eval()
    u = model.pooled(x)
    assert torch.allclose(model(x), model.head.linear(u))  # identity at evaluation
    model.train()
    torch.manual_seed(1)
    dropped = model.head.dropout(u)
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    assert torch.allclose(dropped[kept], 2 * u[kept])  # inverted dropout: survivors scaled by 1/(1-p)
    # no parameters: a checkpoint of a dropout model loads into a model without dropout
    plain = build_model("smallcnn", 8, normalize=False, widths=[4, 4, 4, 4])
    plain.load_state_dict(model.state_dict())
    with pytest.raises(ValueError, match="dropout"):
        build_model("smallcnn", 8, dropout=1.0)
    with pytest.raises(ValueError, match="dropout"):
        Config.from_profile("quick", dropout=-0.1)


def test_backbone_params_reach_the_model_and_survive_a_round_trip():
    c = Config.from_profile("quick", backbone_params={"widths": (8, 8, 16, 16)})
    model = experiment.build_model(c)
    assert model.backbone.net.widths == (8, 8, 16, 16)
    assert Config.from_dict(c.as_dict()) == c


def test_run_grid_groups_the_seeds_of_each_configuration(tmp_path, one_thread):
    from zslib.experiment import run_grid

    c = Config.from_profile("quick", **TINY)
    out = run_grid({"a": c, ("b", 2): c.replace(loss="contrastive")}, seeds=[3, 4], workers=2,
                   results_dir=tmp_path, progress=False)
    assert list(out) == ["a", ("b", 2)]
    assert [r.config.seed for r in out["a"]] == [3, 4]
    assert {r.config.loss for r in out["b", 2]} == {"contrastive"}
    # the same runs, asked for one by one, are loaded from the store: identical numbers
    again = run(c.replace(seed=4), results_dir=tmp_path)
    assert again.metrics == out["a"][1].metrics
    with pytest.raises(TypeError, match="Config"):
        run_grid({"a": {"loss": "triplet"}}, results_dir=tmp_path)


def test_load_results_reads_recorded_runs_too(tmp_path, one_thread):
    from zslib.experiment import load_results

    c = Config.from_profile("quick", **TINY)
    r = run(c, results_dir=tmp_path, progress=False)
    (tmp_path / "recorded").mkdir()
    r.path.rename(tmp_path / "recorded" / r.path.name)  # as if committed under results/recorded/
    found = load_results(tmp_path, loss="triplet")
    assert [x.metrics for x in found] == [r.metrics]
    assert load_results(tmp_path, loss="contrastive") == []


def test_recorded_grid_names_what_is_missing_and_returns_the_stored_runs(tmp_path, capsys):
    from zslib.experiment import recorded_grid

    c = Config.from_profile("quick", **TINY)
    assert recorded_grid({"a": c}, "the tiny grid", seeds=[0], results_dir=tmp_path) is None
    printed = capsys.readouterr().out
    assert "the tiny grid are not all recorded" in printed and c.replace(seed=0).name in printed
    trained = run_grid({"a": c}, seeds=[0], results_dir=tmp_path, progress=False)
    shown = recorded_grid({"a": c}, "the tiny grid", seeds=[0], results_dir=tmp_path)
    assert capsys.readouterr().out == "" and shown["a"][0].metrics == trained["a"][0].metrics
