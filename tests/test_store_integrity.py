"""A store whose keys are checked, and collapsed runs that are never a normal row (issue 32).

Each test reproduces a defect of the code before these checks: an edited result file kept its name and was
served for that run; `record` rewrote a mismatching config_hash; an analysis record saved under another run's
name was served for it; a checkpoint of other code was resumed; `evaluate --result` followed a checkpoint path
into another run's checkpoint; a run whose batch-norm statistics exploded was stored as complete.
Oracles: the config hash recomputed independently (hashlib over the canonical JSON), brute-force chance recall.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import warnings

import numpy as np
import pytest
import torch

from zslib.engine.config import HASHED_UNLESS_DEFAULT, NOT_HASHED, Config
from zslib.engine.store import DIGEST_KEY, ResultFileError, content_digest, load_result, load_results, record_runs

TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


def _hash(config_dict: dict) -> str:  # the oracle: the definition of the key, written out again
    d = {k: v for k, v in config_dict.items() if k not in NOT_HASHED}
    d = {k: v for k, v in d.items()
         if not (k in HASHED_UNLESS_DEFAULT and json.loads(json.dumps(v)) == HASHED_UNLESS_DEFAULT[k])}
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from zslib.engine.runner import run

    folder = tmp_path_factory.mktemp("store")
    result = run(Config(**TINY), results_dir=folder, progress=False)
    return folder, result


def _signed(d: dict) -> str:
    """``d`` as the JSON text of a record written by the store (its digest over the new contents): to test what
    lies behind the digest check, as a file written by other code would reach it."""
    d[DIGEST_KEY] = content_digest(d)
    return json.dumps(d)


def _copy(stored, tmp_path):
    folder, result = stored
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    return tmp_path / result.path.name


def _tamper(path, lr=0.5, rehash=False):
    d = json.loads(path.read_text())
    d["config"]["lr"] = lr
    d["metrics"]["unseen"]["R@1"] = 0.99
    if rehash:
        d["config_hash"] = _hash(d["config"])
    path.write_text(json.dumps(d))
    return d


@pytest.mark.parametrize("rehash", [False, True])
def test_an_edited_result_under_its_name_is_refused(stored, tmp_path, rehash):
    from zslib.engine.runner import run

    path = _copy(stored, tmp_path)
    assert _hash(json.loads(path.read_text())["config"]) in path.name  # the name is the key of the content
    _tamper(path, rehash=rehash)
    with pytest.raises(ResultFileError, match="hashes to") as err:
        run(Config(**TINY), results_dir=tmp_path, progress=False)  # before: served R@1 0.99 without a word
    message = str(err.value)
    assert str(path) in message and "delete it" in message and "\n" not in message
    with pytest.raises(ResultFileError):
        load_results(tmp_path)


def test_an_edited_recorded_run_is_refused_and_record_does_not_rewrite_its_hash(stored, tmp_path):
    path = _copy(stored, tmp_path)
    (tmp_path / "recorded").mkdir()
    recorded = shutil.copy(path, tmp_path / "recorded" / path.name)
    _tamper(tmp_path / "recorded" / path.name)
    with pytest.raises(ResultFileError, match="hashes to"):
        load_results(tmp_path)
    (tmp_path / "recorded" / path.name).unlink()
    d = json.loads(path.read_text())
    d["config"]["profile"] = "real"  # a run of the recorded profile, edited: config_hash no longer its config's
    path.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match="hashes to"):
        record_runs("real", tmp_path)  # before: copied it and wrote a fresh config_hash over the mismatch
    assert not list((tmp_path / "recorded").glob("*.json")), recorded


def test_record_of_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results folder"):
        record_runs("real", tmp_path / "nonexistent")  # before: "copied 0", as if all were well


def test_an_analysis_record_under_another_runs_name_is_refused(stored, tmp_path):
    from zslib.analysis.records import AnalysisRecord, analysis_path, analyze, load_analysis

    _copy(stored, tmp_path)
    mine, other = Config(**TINY), Config(**TINY, seed=1)
    record = AnalysisRecord("bound_terms", mine, {}, {"lambda": 0.3}, {"run_file": stored[1].path.name})
    target = analysis_path(other, "bound_terms", tmp_path)  # where the other run's record is looked for
    record.save(target)
    with pytest.raises(ResultFileError, match="hashes to"):
        load_analysis(target)
    with pytest.raises(ResultFileError, match="hashes to"):
        analyze(other, "bound_terms", tmp_path)  # before: served the record of `mine` for `other`
    d = json.loads(target.read_text())
    d["config"], d["config_hash"] = other.as_dict(), _hash(other.as_dict())  # the config rewritten too
    target.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match="made from the run"):  # its provenance still names mine
        load_analysis(target)


def test_a_checkpoint_of_other_code_is_not_resumed(tmp_path):
    from zslib.engine.runner import run
    from zslib.engine.store import code_fingerprint

    config = Config(**{**TINY, "iterations": 6, "eval_every": 3})
    run(config, results_dir=tmp_path / "a", progress=False, max_steps=3)
    ckpt = next((tmp_path / "a" / "checkpoints").glob("*.pt"))
    state = torch.load(ckpt, weights_only=True)
    assert state["meta"]["code_fingerprint"] == code_fingerprint()
    state["meta"]["code_fingerprint"] = "0" * 16  # written by other code
    for key in list(state["model"]):  # whose weights would show if it were resumed
        if state["model"][key].is_floating_point():
            state["model"][key] = torch.full_like(state["model"][key], 0.125)
    torch.save(state, ckpt)
    with pytest.warns(UserWarning, match="other zslib code.*starts over") as caught:
        resumed = run(config, results_dir=tmp_path / "a", progress=False)
    assert len([w for w in caught if "starts over" in str(w.message)]) == 1
    fresh = run(config, results_dir=tmp_path / "b", progress=False)
    assert resumed.metrics == fresh.metrics  # trained from step 0: the stale state left no trace
    assert resumed.history.losses == fresh.history.losses


def test_a_checkpoint_of_this_code_resumes_bitwise_and_silently(tmp_path):
    from zslib.engine.runner import load_model, run

    config = Config(**{**TINY, "iterations": 6, "eval_every": 3})
    run(config, results_dir=tmp_path / "a", progress=False, max_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        resumed = run(config, results_dir=tmp_path / "a", progress=False)
    fresh = run(config, results_dir=tmp_path / "b", progress=False)
    assert resumed.history.losses == fresh.history.losses
    a, b = load_model(resumed, "cpu").state_dict(), load_model(fresh, "cpu").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_another_runs_checkpoint_under_this_runs_name_is_refused(tmp_path):
    from zslib.engine.runner import run

    one, two = Config(**TINY), Config(**TINY, seed=1)
    run(one, results_dir=tmp_path, progress=False, max_steps=2)
    run(two, results_dir=tmp_path, progress=False, max_steps=2)
    ck = sorted((tmp_path / "checkpoints").glob("*.pt"))
    mine = next(p for p in ck if one.hash in p.name)
    shutil.copy(next(p for p in ck if two.hash in p.name), mine)
    with pytest.raises(ResultFileError, match="holds run"):
        run(one, results_dir=tmp_path, progress=False)


def test_evaluate_result_does_not_follow_a_path_into_another_runs_checkpoint(stored, tmp_path):
    from zslib.engine.runner import evaluate_checkpoint, load_model, run

    path = _copy(stored, tmp_path)
    other = run(Config(**TINY, seed=1), results_dir=tmp_path / "other", progress=False)
    d = json.loads(path.read_text())
    d["provenance"]["checkpoint"] = str(other.checkpoint)  # the result now points at another run's weights
    path.write_text(_signed(d))
    result = load_result(path)
    assert result.checkpoint == other.checkpoint
    with pytest.raises(ResultFileError, match="not of"):
        evaluate_checkpoint(result.checkpoint, config=result.config, device="cpu")
    with pytest.raises(ResultFileError, match="not of"):
        load_model(result, "cpu")
    from zslib.__main__ import main

    assert main(["evaluate", "--result", str(path), "--device", "cpu"]) == 2


# ------------------------------------------------------------------------------------------- collapsed runs
def test_chance_recall_is_the_brute_force_random_ranking():
    from zslib.engine.collapse import chance_recall

    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    n = len(labels)
    # a random ranking puts each other sample first with probability 1/(n-1): average the hit over queries
    brute = np.mean([np.mean([labels[j] == labels[i] for j in range(n) if j != i]) for i in range(n)])
    assert chance_recall(labels) == pytest.approx(brute, abs=1e-12)


def test_a_collapsed_run_is_stored_as_diverged_and_a_healthy_one_is_not(tmp_path):
    from zslib.engine.runner import run
    from zslib.engine.stats import diverged_label, format_interval, paired, summarize

    healthy = run(Config(**TINY), results_dir=tmp_path, progress=False)
    assert healthy.diverged is None and "status" not in json.loads(healthy.path.read_text())  # unchanged file
    with pytest.warns(UserWarning, match="diverged"):
        bad = run(Config(**{**TINY, "iterations": 30, "eval_every": 30}, lr=1e3), results_dir=tmp_path,
                  progress=False)  # before: stored as a complete, normal run
    assert "running_var" in bad.diverged and bad.status == "diverged"
    stored = json.loads(bad.path.read_text())
    assert stored["status"] == "diverged" and stored["diverged_reason"] == bad.diverged
    back = load_result(bad.path)
    assert back.diverged == bad.diverged and _hash(stored["config"]) in bad.path.name
    text = format_interval(summarize([bad]))
    assert "diverged: 1 of 1 seed" in text and diverged_label([bad, healthy]) == "diverged: 1 of 2 seeds"
    assert "diverged" not in format_interval(summarize([healthy])) and diverged_label([healthy]) == ""
    assert paired([healthy], [bad]).verdict.startswith("n/a (diverged")


def test_the_signs_of_a_collapse():
    from zslib.engine.collapse import collapse_reason
    from zslib.engine.train.history import History

    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    moving = History(losses=[{"step": i, "total": 0.2 + 0.01 * (i % 3)} for i in range(40)])
    assert collapse_reason(net, moving, {"seen": {"R@1": 0.5}}, [0, 0, 1, 1]) is None
    pinned = History(losses=[{"step": i, "total": 0.5 - 0.01 * i} for i in range(30)]
                     + [{"step": 30 + i, "total": 0.2} for i in range(10)])
    assert "pinned" in collapse_reason(net, pinned, {}, None)
    zero = History(losses=[{"step": i, "total": 0.0} for i in range(40)])  # a fitted loss is not a collapse
    assert collapse_reason(net, zero, {}, None) is None
    fell = History(losses=moving.losses, evals=[{"step": 0, "seen": {"R@1": 0.6}}])
    labels = [0, 0, 1, 1, 2, 2, 3, 3]  # chance 1/7
    assert "fell from 0.6000" in collapse_reason(net, fell, {"seen": {"R@1": 0.14}}, labels)
    assert collapse_reason(net, moving, {"seen": {"R@1": 0.14}}, labels) is None  # no step 0, 40 steps: a short run
    net.register_buffer("step_count", torch.tensor(5e4))  # a large buffer that is not a statistic: healthy
    assert collapse_reason(net, moving, {}, None) is None
    net[1].running_var.fill_(2e8)
    assert "1.running_var reached 2e+08" in collapse_reason(net, moving, {}, None)
    net[1].running_var.fill_(float("nan"))
    assert "nan" in collapse_reason(net, moving, {}, None)


def test_a_grid_names_its_diverged_runs(stored, tmp_path):
    from zslib.engine.grid import diverged, recorded_grid, run_grid
    from zslib.engine.stats import format_interval, summarize

    path = _copy(stored, tmp_path)
    grid = {"triplet": Config(**TINY)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a healthy grid: no word about divergence
        healthy = run_grid(grid, seeds=[0], stored_only=True, results_dir=tmp_path, progress=False)
    assert diverged(healthy) == {}
    d = json.loads(path.read_text())
    d.update(status="diverged", diverged_reason="buffer bn.running_var reached 2e+08")
    path.write_text(_signed(d))  # the status is not part of the key: a file written so loads
    with pytest.warns(UserWarning, match="diverged runs.*triplet: 1 of 1 seeds"):
        out = recorded_grid(grid, "a test", seeds=[0], results_dir=tmp_path, progress=False)
    assert diverged(out) == {"triplet": ["buffer bn.running_var reached 2e+08"]}
    assert "diverged: 1 of 1 seed" in format_interval(summarize(out["triplet"]))


def test_record_replace_rewrites_only_with_a_newer_run_and_keeps_what_it_replaced(stored, tmp_path):
    """A recorded run trained again (here: the same result, dated later and with one more metric) replaces the
    record only with ``replace``; the new record says what it replaced and how every old metric moved."""
    path = _copy(stored, tmp_path)
    for f in tmp_path.glob("*.json"):
        if f != path:
            f.unlink()
    result = load_result(path)
    assert record_runs(result.config.profile, tmp_path) == [tmp_path / "recorded" / path.name]
    old = load_result(tmp_path / "recorded" / path.name)
    d = json.loads(path.read_text())
    d["provenance"]["timestamp"] = "2099-01-01T00:00:00+00:00"
    d["metrics"]["unseen"]["R@1"] += 0.25
    d["metrics"]["unseen"]["MAP@R"] = 0.5
    path.write_text(_signed(d))
    assert record_runs(result.config.profile, tmp_path) == []  # recorded already: kept as it is
    assert load_result(tmp_path / "recorded" / path.name).metrics == old.metrics
    assert record_runs(result.config.profile, tmp_path, replace=True) == [tmp_path / "recorded" / path.name]
    new = load_result(tmp_path / "recorded" / path.name)
    assert new.metrics["unseen"]["MAP@R"] == 0.5
    replaced = new.provenance["replaced"]
    assert replaced["timestamp"] == old.provenance["timestamp"]
    assert replaced["metric_changes"]["unseen R@1"] == pytest.approx(0.25)
    assert set(replaced["metric_changes"]) == {f"{s} {m}" for s, row in old.metrics.items() for m in row}
    assert record_runs(result.config.profile, tmp_path, replace=True) == []  # the record is this run now


def test_the_four_signs_name_the_collapse_of_weight_decay_1e6():
    """The run of ``train --iterations 300 --seed 11 --weight-decay 1e6`` (quick profile) ended with every Recall@K at
    0.02 and its loss at the margin give or take float rounding; it was stored as a normal run. Its numbers, as
    recorded, now name the collapse; healthy numbers still do not."""
    from zslib.engine.collapse import collapse_reason
    from zslib.engine.train.history import History

    net = torch.nn.Sequential(torch.nn.Linear(3, 3))
    rng = np.random.default_rng(0)
    tail = 0.1 + rng.uniform(-3.5e-6, 3.5e-6, 75)  # the measured last quarter: 0.0999969 .. 0.1000035
    pinned = History(losses=[{"step": i + 1, "total": 0.14 - 0.0002 * i} for i in range(225)]
                     + [{"step": 226 + i, "total": float(v)} for i, v in enumerate(tail)])
    assert "pinned" in collapse_reason(net, pinned, {}, None)
    noisy = History(losses=[{"step": i + 1, "total": 0.1 * (1 + 0.05 * np.sin(i))} for i in range(300)])
    assert collapse_reason(net, noisy, {}, None) is None  # a loss that moves by 5 %: healthy
    unseen_labels = np.repeat(np.arange(50, 100), 40)  # chance 39/1999 = 0.0195
    flat = {"seen": {"R@1": 0.3, "R@2": 0.4}, "unseen": {"R@1": 0.02, "R@2": 0.02, "R@4": 0.02, "R@8": 0.02}}
    short = History(losses=[{"step": 1, "total": 0.2}, {"step": 2, "total": 0.3}])
    reason = collapse_reason(net, short, flat, None, {"unseen": unseen_labels})
    assert "every Recall@K on the unseen classes is 0.0200" in reason and "0.0195" in reason
    rising = {"unseen": {"R@1": 0.02, "R@2": 0.039, "R@4": 0.08, "R@8": 0.15}}  # random, not tied: not this sign
    assert collapse_reason(net, short, rising, None, {"unseen": unseen_labels}) is None
    perfect = {"unseen": {"R@1": 1.0, "R@2": 1.0, "R@4": 1.0, "R@8": 1.0}}  # flat at the top is not a collapse
    assert collapse_reason(net, short, perfect, None, {"unseen": unseen_labels}) is None
    seen_labels = np.repeat(np.arange(50), 40)
    long_run = History(losses=noisy.losses, evals=[{"step": 0, "seen": {"R@1": 0.0235}}])  # at chance at step 0
    assert "after 300 steps, at chance" in collapse_reason(net, long_run, {"seen": {"R@1": 0.0195}}, seen_labels)
    assert collapse_reason(net, short, {"seen": {"R@1": 0.0195}}, seen_labels) is None  # two steps: not judged


def test_weight_decay_1e6_is_stored_as_diverged(tmp_path):
    """The issue's case at a smaller size (32-px images, 16 per class; the same 300 steps, seed and weight decay)."""
    from zslib.engine.runner import run

    config = Config(iterations=300, eval_every=300, seed=11, weight_decay=1e6, synth_images_per_class=16,
                    image_size=32, resize_size=36)
    with pytest.warns(UserWarning, match="diverged"):
        result = run(config, results_dir=tmp_path, progress=False)
    assert result.status == "diverged" and json.loads(result.path.read_text())["status"] == "diverged"


# ------------------------------------------------------------------------------------- the whole record
def _fresh(tmp_path, **kw):
    from zslib.engine.store import Result
    from zslib.engine.train.history import History

    config = Config(**TINY)
    result = Result(config, {"unseen": {"R@1": 0.0275, "R@2": 0.05}}, History(), {"complete": True,
                                                                                   "data_identity": "synthparts-x"},
                    **kw)
    return result.save(tmp_path / f"{config.name}-{config.hash}.json")


def test_an_edited_metric_or_a_deleted_status_is_refused(tmp_path):
    path = _fresh(tmp_path)
    assert load_result(path).metrics["unseen"]["R@1"] == 0.0275
    d = json.loads(path.read_text())
    d["metrics"]["unseen"]["R@1"] = 0.99  # by hand: a valid number, the config untouched
    path.write_text(json.dumps(d, indent=1))
    with pytest.raises(ResultFileError, match="do not match the digest") as err:
        load_result(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ResultFileError, match="do not match the digest"):
        load_results(tmp_path)  # never served, never silently left out

    bad = _fresh(tmp_path, diverged="the loss stayed at 0.1 for the last 75 steps")
    assert load_result(bad).status == "diverged"
    d = json.loads(bad.read_text())
    del d["status"], d["diverged_reason"]  # served as healthy before
    bad.write_text(json.dumps(d, indent=1))
    with pytest.raises(ResultFileError, match="do not match the digest"):
        load_result(bad)
    del d[DIGEST_KEY]  # and the digest with it: the provenance says this zslib wrote the file
    bad.write_text(json.dumps(d, indent=1))
    with pytest.raises(ResultFileError, match="has no 'content_sha256'"):
        load_result(bad)


def test_the_digest_is_of_the_contents_as_read_back():
    """The digest is the SHA-256 of the record without it, keys sorted: recomputed here with hashlib."""
    d = {"format": "zslib-result", "metrics": {"unseen": {"R@1": 0.1}}, "b": [1, 2.5, None], DIGEST_KEY: "x"}
    text = json.dumps({k: v for k, v in d.items() if k != DIGEST_KEY}, sort_keys=True, separators=(",", ":"))
    assert content_digest(d) == hashlib.sha256(text.encode()).hexdigest()


def test_a_recorded_run_that_differs_from_the_manifest_is_refused(stored, tmp_path):
    from zslib.__main__ import main
    from zslib.engine.store import MANIFEST, manifest_differences

    folder, result = stored
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    d = json.loads(result.path.read_text())
    del d[DIGEST_KEY]
    d["provenance"].pop("data_identity")  # a record written before records carried a digest
    (recorded / result.path.name).write_text(json.dumps(d, indent=1))
    (recorded / "analyses").mkdir()
    (recorded / "analyses" / "note.json").write_text("{}")
    assert main(["record", "--manifest", "--results-dir", str(tmp_path)]) == 0
    lines = (recorded / MANIFEST).read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["analyses/note.json", result.path.name]
    assert manifest_differences(tmp_path) == [] and load_result(recorded / result.path.name).metrics == result.metrics
    d["metrics"]["unseen"]["R@1"] = 0.99
    (recorded / result.path.name).write_text(json.dumps(d, indent=1))
    with pytest.raises(ResultFileError, match="differs from the SHA-256 that .*SHA256SUMS lists") as err:
        load_result(recorded / result.path.name)
    assert str(recorded / result.path.name) in str(err.value) and "record --manifest" in str(err.value)
    (recorded / "new.json").write_text("{}")
    assert manifest_differences(tmp_path) == [f"changed: {result.path.name}", "not in the manifest: new.json"]


def test_record_replace_gives_a_recorded_run_its_data_identity(stored, tmp_path):
    """A run recorded before data identities (no identity, no digest) is rewritten by ``record --replace`` from a run
    of this code, which carries both; the recorded runs stay usable until then."""
    from zslib.engine.store import write_manifest

    path = _copy(stored, tmp_path)
    for f in tmp_path.glob("*.json"):
        if f != path:
            f.unlink()
    d = json.loads(path.read_text())
    assert d["provenance"]["data_identity"].startswith("synthparts-")
    old = {k: v for k, v in d.items() if k != DIGEST_KEY}
    old["provenance"] = {k: v for k, v in d["provenance"].items() if k != "data_identity"}
    old["provenance"]["timestamp"] = "2026-01-01T00:00:00+00:00"
    (tmp_path / "recorded").mkdir()
    (tmp_path / "recorded" / path.name).write_text(json.dumps(old, indent=1))
    write_manifest(tmp_path)
    assert "data_identity" not in load_result(tmp_path / "recorded" / path.name).provenance  # still served
    assert record_runs(stored[1].config.profile, tmp_path, replace=True) == [tmp_path / "recorded" / path.name]
    write_manifest(tmp_path)
    new = load_result(tmp_path / "recorded" / path.name)
    assert new.provenance["data_identity"] == d["provenance"]["data_identity"]
    assert json.loads(new.path.read_text())[DIGEST_KEY] == content_digest(json.loads(new.path.read_text()))
