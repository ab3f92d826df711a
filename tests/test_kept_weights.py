"""Kept weights (zslib.engine.kept_weights): a recorded run's trained parameters in float16, checksummed, used only when
they give the run's recorded retrieval metrics again.

A tiny quick-profile run is trained once, recorded into a recorded/ folder of its own and its weights kept with the
same command a person uses (``python -m zslib record --weights``); the tests then load, tamper with and perturb
them. The last test loads every committed kept-weights file on the real profile and requires its record.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from zslib.engine.config import Config
from zslib.engine.store import load_result, manifest_differences, record_runs, write_manifest
from zslib.engine.kept_weights import (TOLERANCE, KeptWeightsError, check_reproduces, kept_embeddings, kept_model,
                                  kept_names, kept_state, model_from_weights, read_weights, retrieval_gaps,
                                  save_weights, weights_path)

REPO = Path(__file__).resolve().parents[1]
TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)
#: The caller's feature cache and data (the autouse fixture of conftest.py points ZS_CACHE at a fresh folder).
CALLER_CACHE, CALLER_DATA = os.environ.get("ZS_CACHE", "").strip(), os.environ.get("ZS_DATA", "").strip()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A tiny quick run recorded in ``<results>/recorded/`` with kept weights made by the CLI; its result."""
    import zslib.engine.profile
    from zslib.__main__ import main
    from zslib.engine.runner import run

    folder = tmp_path_factory.mktemp("kept")
    results = folder / "results"
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: conftest's per-test settings are not in place yet
        mp.setenv("ZS_CACHE", str(folder / "cache"))
        mp.setenv("ZS_PROFILE", "quick")
        mp.setattr(zslib.engine.profile, "_active", None)
        try:
            config = Config.from_profile("quick", **TINY)
            run(config, results_dir=results, progress=False)
            [path] = record_runs("quick", results)
            assert main(["record", "--weights", str(path), "--scratch", str(results)]) == 0
        finally:
            torch.set_num_threads(old)
    return load_result(path)


def test_kept_names_are_the_trained_parameters_and_their_modules_buffers():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2), nn.BatchNorm1d(2))
    for p in (*net[0].parameters(), *net[1].parameters()):  # a frozen "backbone": its layer and its statistics
        p.requires_grad_(False)
    assert kept_names(net) == ["2.weight", "2.bias", "3.weight", "3.bias", "3.running_mean", "3.running_var",
                               "3.num_batches_tracked"]
    state = kept_state(net)
    assert state["3.weight"].dtype == torch.float16 and state["3.num_batches_tracked"].dtype == torch.int64


def test_the_quick_profile_keeps_its_whole_network(recorded):
    from zslib.engine.runner import build_model

    model = build_model(recorded.config)
    assert kept_names(model) == list(model.state_dict())  # a small CNN trained from scratch: everything


def test_a_round_trip_gives_the_float16_rounded_parameters_bitwise(recorded, tmp_path):
    from zslib.engine.runner import build_model

    torch.manual_seed(1)
    model = build_model(recorded.config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # values float16 cannot hold exactly
    save_weights(model, recorded.config, tmp_path / "w.pt")
    back = model_from_weights(recorded.config, read_weights(tmp_path / "w.pt", recorded.config))
    want, got = model.state_dict(), back.state_dict()
    assert any(not torch.equal(v, v.half().float()) for v in want.values() if v.is_floating_point())
    for k, v in want.items():
        expected = v.half().float() if v.is_floating_point() else v
        assert got[k].dtype == v.dtype and torch.equal(got[k], expected), k


def test_kept_weights_reproduce_the_record_and_give_the_recorded_model(recorded):
    from zslib.analysis.photos import recorded_model
    from zslib.engine.runner import load_model

    path = weights_path(recorded)
    assert path == recorded.path.parent / "weights" / f"{recorded.path.stem}.pt" and path.is_file()
    assert recorded.checkpoint is None  # a recorded run keeps no checkpoint
    assert manifest_differences(recorded.path.parent.parent) == []  # the manifest lists weights/<stem>.pt
    diffs = check_reproduces(recorded, kept_model(recorded))
    assert diffs and max(abs(d) for d in diffs.values()) <= TOLERANCE
    model = recorded_model(recorded)
    tensors = read_weights(path, recorded.config)
    assert all(torch.equal(model.state_dict()[k], t.float()) for k, t in tensors.items())
    with pytest.raises(FileNotFoundError, match="kept_model"):  # the checkpoint loader names the way
        load_model(recorded, "cpu")


def _copy(recorded, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(recorded.path.parent.parent, folder, ignore=shutil.ignore_patterns("checkpoints"))
    return load_result(folder / "recorded" / recorded.path.name)


def test_a_tampered_weights_file_is_refused_by_the_manifest(recorded, tmp_path):
    copy = _copy(recorded, tmp_path)
    path = weights_path(copy)
    tensors = read_weights(path, copy.config)
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1
    body = torch.load(path, weights_only=True)
    body["tensors"] = tensors
    torch.save(body, path)  # a valid file of this run, with other numbers
    with pytest.raises(KeptWeightsError, match="differs from the SHA-256"):
        kept_model(copy)
    assert manifest_differences(tmp_path / "results") == [f"changed: weights/{path.name}"]
    path.with_name("other.pt").write_bytes(b"x")
    assert "not in the manifest: weights/other.pt" in manifest_differences(tmp_path / "results")


def test_an_unlisted_weights_file_is_refused(recorded, tmp_path):
    copy = _copy(recorded, tmp_path)
    manifest = tmp_path / "results" / "recorded" / "SHA256SUMS"
    manifest.write_text("".join(line + "\n" for line in manifest.read_text().splitlines() if "weights/" not in line))
    with pytest.raises(KeptWeightsError, match="is not listed in"):
        kept_model(copy)


def test_weights_that_do_not_reproduce_the_record_are_refused(recorded, tmp_path):
    copy = _copy(recorded, tmp_path)
    path = weights_path(copy)
    model = model_from_weights(copy.config, read_weights(path, copy.config))
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * (p.detach().abs().mean() + 0.05))  # another network
    gaps = retrieval_gaps(copy, model)
    # the perturbation is visible, also on the unseen split alone (what a figure's check compares)
    assert max(abs(now - rec) for (split, _), (rec, now) in gaps.items() if split == "unseen") > TOLERANCE
    save_weights(model, copy.config, path)
    write_manifest(tmp_path / "results")  # listed: only the metrics can refuse it
    with pytest.raises(KeptWeightsError, match="do not reproduce the record"):
        kept_model(copy)
    from zslib.analysis.photos import unseen_embeddings

    with pytest.raises(KeptWeightsError, match="do not reproduce the record"):  # no figure from them either
        unseen_embeddings(copy)
    save_weights(model, copy.config, path, tolerance=1.0)  # a file that states a wider tolerance ...
    write_manifest(tmp_path / "results")
    assert kept_model(copy) is not None  # ... is held to it
    with pytest.raises(KeptWeightsError, match="do not reproduce the record"):
        kept_model(copy, tolerance=TOLERANCE)  # unless the caller names another


def _count_embeddings(monkeypatch):
    """Count the embedding passes (every caller's :func:`zslib.engine.train.embed`): ``[number of images]`` each."""
    import zslib.engine.runner
    import zslib.engine.train

    passes, real = [], zslib.engine.train.embed

    def counted(model, dataset, *args, **kwargs):
        passes.append(len(dataset))
        return real(model, dataset, *args, **kwargs)
    monkeypatch.setattr(zslib.engine.train, "embed", counted)
    monkeypatch.setattr(zslib.engine.runner, "embed", counted)
    return passes


def test_a_figure_embeds_the_unseen_split_once_and_draws_what_it_checked(recorded, monkeypatch):
    from zslib.analysis import photos
    from zslib.engine.runner import build_data, split_metrics

    unseen = len(build_data(recorded.config)["unseen"])
    passes = _count_embeddings(monkeypatch)
    emb, labels, model = photos.unseen_embeddings(recorded, with_model=True)
    assert passes == [unseen]  # checked and drawn from one pass over the unseen split, nothing else embedded
    assert np.array_equal(np.asarray(labels), build_data(recorded.config)["unseen"].labels)
    # the embeddings drawn are those the check scored: scored again from a fresh pass, the same unseen metrics
    fresh = split_metrics(recorded.config, model, build_data(recorded.config), "cpu", splits=("unseen",))
    again = split_metrics(recorded.config, model, build_data(recorded.config), "cpu", splits=("unseen",),
                          embedded={"unseen": (torch.as_tensor(np.asarray(emb)), torch.as_tensor(labels))})
    assert fresh == again


def test_a_figure_is_refused_when_the_unseen_record_is_not_reproduced(recorded, tmp_path):
    copy = _copy(recorded, tmp_path)
    model, emb, labels = kept_embeddings(copy)  # the copy reproduces its record
    assert emb.shape[0] == len(labels) > 0
    metric = next(m for m in copy.metrics["unseen"] if m.startswith("R@"))
    copy.metrics["unseen"][metric] += 2 * TOLERANCE  # a record these weights did not give
    with pytest.raises(KeptWeightsError, match=f"unseen {metric}.*do not reproduce the record"):
        kept_embeddings(copy)
    del copy.metrics["unseen"]  # a run that never scored the unseen classes has nothing to check a figure by
    with pytest.raises(KeptWeightsError, match="records no retrieval metric on unseen"):
        kept_embeddings(copy)


def test_weights_of_another_run_are_refused(recorded, tmp_path):
    other = recorded.config.replace(seed=recorded.config.seed + 1)
    with pytest.raises(KeptWeightsError, match="not of"):
        read_weights(weights_path(recorded), other)


def test_unseen_embeddings_of_a_run_with_kept_weights_does_not_train(recorded, monkeypatch, tmp_path):
    import zslib.engine.runner
    import zslib.engine.train
    from zslib.analysis import photos

    def no_training(*args, **kwargs):
        raise AssertionError("trained")

    monkeypatch.setattr(zslib.engine.runner, "run", no_training)
    monkeypatch.setattr(zslib.engine.runner, "train", no_training)
    monkeypatch.setattr(zslib.engine.train, "train", no_training)
    assert photos.has_kept_weights(recorded)
    emb, labels, model = photos.unseen_embeddings(recorded, with_model=True)
    assert emb.shape[0] == len(labels) > 0
    from zslib.engine.runner import build_data
    from zslib.engine.train import embed

    again, _ = embed(photos.recorded_model(recorded), build_data(recorded.config)["unseen"], batch_size=64,
                     device="cpu", num_workers=0)
    assert np.array_equal(np.asarray(emb), np.asarray(again))
    copy = _copy(recorded, tmp_path)
    weights_path(copy).unlink()  # without them the run would be trained again: the patch above would say so
    assert not photos.has_kept_weights(copy)
    with pytest.raises(AssertionError, match="trained"):
        photos.unseen_embeddings(copy)


def test_record_weights_refuses_a_file_outside_a_recorded_folder(recorded, tmp_path):
    from zslib.__main__ import main

    shutil.copy(recorded.path, tmp_path / recorded.path.name)
    assert main(["record", "--weights", str(tmp_path / recorded.path.name)]) != 0


# ---------------------------------------------------------------------------------------------- the committed files

COMMITTED = sorted((REPO / "results" / "recorded" / "weights").glob("*.pt"))


def _real_data_reason() -> str | None:
    from zslib.analysis.photos import data_required

    if data_required():
        return None  # declared present: the test must run (and builds the feature cache if it has to)
    flowers = Path(CALLER_DATA or REPO.parent / "shared" / "data") / "flowers102"
    if not (flowers / "imagelabels.mat").is_file():
        return f"Flowers-102 is absent ({flowers}); set ZS_DATA (ZS_REQUIRE_DATA=1 makes this test required)"
    if not CALLER_CACHE or not Path(CALLER_CACHE).is_dir():
        return "ZS_CACHE names no feature cache of the real profile (ZS_REQUIRE_DATA=1 makes this test required)"
    return None


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_each_committed_weights_file_reproduces_its_record(path, monkeypatch):
    reason = _real_data_reason()
    if reason:
        pytest.skip(reason)
    import zslib.engine.profile

    if CALLER_CACHE:
        monkeypatch.setenv("ZS_CACHE", CALLER_CACHE)
    else:  # required without a named cache: the default one (the checkout's data/cache), built once and reused
        monkeypatch.delenv("ZS_CACHE", raising=False)
    monkeypatch.setenv("ZS_DATA", CALLER_DATA or str(REPO.parent / "shared" / "data"))
    monkeypatch.setattr(zslib.engine.profile, "_active", None)
    result = load_result(path.parent.parent / f"{path.stem}.json")
    assert result.config.profile == "real" and result.config.seed == 0
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = kept_model(result)  # checked against the record within the tolerance the file states
    finally:
        torch.set_num_threads(old)
    assert not model.training and set(kept_names(model)) == set(read_weights(path, result.config))
