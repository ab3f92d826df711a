"""zslib.analysis.records: records of analyses that need a run's trained model (JRD Table 3's lambda and d_H), stored
beside the run and keyed by its config hash, made from the checkpoint or by training the run again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zslib.analysis.records import (AnalysisRecord, analysis_path, analyze, load_analysis, record_analyses,
                                    recorded_analyses)
from zslib.engine.config import Config, config_hash
from zslib.engine.store import ResultFileError, load_result
from zslib.engine.runner import run

REPO = Path(__file__).resolve().parents[1]
TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)
KEYS = {"lambda", "lambda_low", "lambda_high", "lambda_sum", "seen_error", "unseen_error", "d_H", "d_H_low",
        "d_H_high", "R@1"}


def test_an_analysis_from_the_checkpoint_equals_one_from_a_retrained_run(tmp_path, one_thread, capsys):
    c = Config.from_profile("quick", **TINY)
    assert recorded_analyses({"a": c}, "bound_terms", "the tiny grid", seeds=[0], results_dir=tmp_path) is None
    assert "the tiny grid are not all recorded" in capsys.readouterr().out
    with pytest.raises(LookupError, match="run"):
        analyze(c, results_dir=tmp_path)  # neither the run nor its analysis is stored

    result = run(c, results_dir=tmp_path, progress=False, device="cpu")
    first = analyze(c, results_dir=tmp_path, device="cpu")
    assert KEYS <= set(first.values) and first.provenance["model_from"] == "checkpoint"
    assert first.values["R@1"] == first.values["run R@1"] == result.metric("R@1")
    assert 0 <= first["lambda"] <= 1 and 0 <= first["d_H"] <= 1
    assert first["lambda_sum"] == pytest.approx(2 * first["lambda"])
    assert first.path == analysis_path(c, "bound_terms", tmp_path) and first.path.parent.name == "analyses"
    assert f"-{config_hash(c)}-bound_terms" in first.path.name
    assert first.provenance["run_file"] == result.path.name
    assert [p.name for p in first.path.parent.iterdir()] == [first.path.name]  # one file, no other folder
    assert analyze(c, results_dir=tmp_path).values == first.values  # stored: loaded, not made again

    # as a recorded run: no checkpoint; the run is trained again in a scratch folder and must reproduce
    (tmp_path / "recorded").mkdir()
    recorded = tmp_path / "recorded" / result.path.name
    result.path.rename(recorded)
    for ck in (tmp_path / "checkpoints").glob("*.pt"):
        ck.unlink()
    first.path.unlink()
    again = analyze(c, results_dir=tmp_path, device="cpu")
    assert again.provenance["model_from"] == "retrained" and again.provenance["reproduced_max_metric_diff"] == 0.0
    assert again.values == first.values  # one thread: bitwise the same model, the same estimates
    assert not list(tmp_path.glob("*.json")) and load_result(recorded).metrics == result.metrics  # nothing else written

    shown = recorded_analyses({"a": c}, "bound_terms", "the tiny grid", seeds=[0], results_dir=tmp_path)
    assert capsys.readouterr().out == "" and shown["a"][0].values == first.values

    copied = record_analyses("quick", tmp_path)
    assert [p.parent for p in copied] == [tmp_path / "recorded" / "analyses"]
    assert record_analyses("quick", tmp_path) == []  # recorded once
    assert load_analysis(copied[0]).provenance["recorded_from"] == again.path.name


def test_a_run_that_does_not_reproduce_is_not_analyzed(tmp_path, one_thread):
    c = Config.from_profile("quick", **TINY)
    result = run(c, results_dir=tmp_path, progress=False, device="cpu")
    for ck in (tmp_path / "checkpoints").glob("*.pt"):
        ck.unlink()
    d = json.loads(result.path.read_text())
    d["metrics"]["unseen"]["R@1"] = min(1.0, d["metrics"]["unseen"]["R@1"] + 0.2)  # not what this config gives
    from zslib.engine.store import DIGEST_KEY, content_digest

    d[DIGEST_KEY] = content_digest(d)  # as other code would have written it (a hand edit is refused by the store)
    result.path.write_text(json.dumps(d))
    with pytest.raises(RuntimeError, match="does not reproduce"):
        analyze(c, results_dir=tmp_path, device="cpu")


def test_a_damaged_or_moved_record_is_an_error(tmp_path):
    c = Config.from_profile("quick", **TINY)
    path = tmp_path / "x-bound_terms.json"
    path.write_text("{not json")
    with pytest.raises(ResultFileError, match="not valid JSON"):
        load_analysis(path)
    record = AnalysisRecord("bound_terms", c, {}, {"lambda": 0.3}, {})
    d = record.to_dict()
    d["config_hash"] = "0" * 12  # stored under another config's hash
    path.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match="hashes to"):
        load_analysis(path)
    with pytest.raises(ValueError, match="unknown analysis"):
        analyze(c, "no_such_analysis", results_dir=tmp_path)
    for bad in ([[0.1, 0.2], [0.3]], [0.1, float("nan")], "0.3", True):  # ragged, not finite, not a number
        d = AnalysisRecord("bound_terms", c, {}, {"lambda": bad}, {}).to_dict()
        path.write_text(json.dumps(d))
        with pytest.raises(ResultFileError, match="finite numbers or arrays"):
            load_analysis(path)


def test_an_analysis_may_store_arrays(tmp_path):
    """Maps (e.g. attention of a few images) are stored as nested lists and read back unchanged."""
    c = Config.from_profile("quick", **TINY)
    maps = [[[0.25, 0.5], [0.125, 1.0]], [[0.0, 0.5], [2.0, 3.0]]]
    saved = AnalysisRecord("bound_terms", c, {}, {"maps": maps, "lambda": 0.5}, {}).save(tmp_path / "a.json")
    back = load_analysis(saved)
    assert back["maps"] == maps and back["lambda"] == 0.5


def test_every_recorded_analysis_belongs_to_a_recorded_run_with_the_same_numbers():
    """Fast: the committed records name a committed run of the same config hash, and the model they analyzed
    had that run's unseen Recall@1 (a retrained model is checked against the run when the record is made)."""
    for path in sorted((REPO / "results" / "recorded" / "analyses").glob("*.json")):
        record = load_analysis(path)
        found = sorted((REPO / "results" / "recorded").glob(f"*-{config_hash(record.config)}.json"))
        assert found, f"{path.name}: its run is not recorded"
        run_file = found[0]
        assert record.provenance["run_file"] == run_file.name
        run_r1 = record.values.get("run R@1", record["R@1"])  # records before "run R@1" kept it as "R@1"
        assert run_r1 == pytest.approx(load_result(run_file).metric("R@1"), abs=0.01)


def test_every_pair_equals_the_runs_own_evaluation_when_the_run_scored_every_image(tmp_path, one_thread):
    """With ``eval_per_class=None`` a ZSML run already scores every pair of each split, so the every_pair analysis
    of its model must give the run's own unseen metrics exactly, its Euclidean row included."""
    params = {"k": 4, "height": 4, "stride": 4, "hidden": [8], "pairs": 200, "batch_pairs": 16,
              "eval_per_class": None, "neighbors": 2}
    c = Config.from_profile("quick", method="zsml", method_params=params, **TINY)
    result = run(c, results_dir=tmp_path, progress=False, device="cpu")
    record = analyze(c, "every_pair", results_dir=tmp_path, device="cpu")
    n = record["n_images"]
    assert record["pairs"] == n * n and record["matrix_mib"] == pytest.approx(4 * n * n / 2 ** 20)
    for name, value in result.metrics["unseen"].items():
        assert record[name] == pytest.approx(value, abs=1e-12), name
    assert record["run R@1"] == result.metric("R@1")
    assert record["seconds"] > 0 and record["peak_rss_mib"] > 0
    with pytest.raises(TypeError, match="pair scorer"):
        analyze(Config.from_profile("quick", **TINY), "every_pair", results_dir=tmp_path, train=True, device="cpu")


@pytest.mark.parametrize("method,params", [("zsml", {"k": 4, "height": 4, "stride": 4, "hidden": [8], "pairs": 200,
                                                      "batch_pairs": 16, "eval_per_class": 3, "neighbors": 2}),
                                            ("baseline", {})])
def test_transfer_evaluates_the_other_dataset_as_the_run_evaluates_its_own(tmp_path, one_thread, monkeypatch, method,
                                                                          params):
    """Pointed at a 'dataset' whose unseen images are the run's own, the transfer analysis must give the run's own
    unseen metrics exactly: the same evaluator (pairs or embeddings) with the same seed."""
    import zslib.analysis.records
    import zslib.engine.runner
    from zslib.methods.zsml import analyses as zsml_analyses

    c = Config.from_profile("quick", method=method, method_params=params, **TINY)
    result = run(c, results_dir=tmp_path, progress=False, device="cpu")
    with pytest.raises(ValueError, match="trained on that dataset"):
        analyze(c, "to_synthparts", results_dir=tmp_path, device="cpu")
    build = zslib.engine.runner.build_data
    asked = []

    def same_images(config):
        asked.append(config.dataset)
        return build(config.replace(dataset="synthparts"))

    monkeypatch.setattr(zslib.engine.runner, "build_data", same_images)
    monkeypatch.setattr(zsml_analyses, "build_data", same_images)  # the analysis imports it at module level
    monkeypatch.setattr(zslib.analysis.records, "build_data", same_images)  # and so does analyze()'s module
    record = analyze(c, "to_flowers102", results_dir=tmp_path, device="cpu")
    assert "flowers102" in asked and record.params == {"dataset": "flowers102", "split": "unseen"}
    shared = set(result.metrics["unseen"]) & set(record.values)  # the target dataset decides the standard row
    assert {"R@1", "NMI"} <= shared
    for name in shared:
        assert record[name] == pytest.approx(result.metrics["unseen"][name], abs=1e-12), name


def test_the_5nn_bound_terms_are_bound_terms_with_five_neighbours(tmp_path, one_thread):
    """JRD's second estimator setting: the registered analysis passes k = 5 (and the rest of its settings) through to
    bound_terms; its record equals a direct call with those settings and differs from the 1-NN record."""
    import torch

    from zslib.analysis.records import get_analysis
    from zslib.methods.jrd.analyses import bound_terms
    from zslib.engine.runner import build_data, load_model

    c = Config.from_profile("quick", **dict(TINY, synth_images_per_class=16))
    result = run(c, results_dir=tmp_path, progress=False, device="cpu")
    five = analyze(c, "bound_terms_5nn", tmp_path, device="cpu")
    assert get_analysis("bound_terms_5nn").function is bound_terms
    assert five.params == {"k": 5, "folds": 5, "repeats": 2, "seed": 0} and five.path.name.endswith("-bound_terms_5nn.json")
    with torch.no_grad():
        direct = bound_terms(load_model(result, "cpu").eval(), build_data(c), c, k=5, folds=5, repeats=2, seed=0)
    assert {k: five[k] for k in direct} == pytest.approx(direct, abs=1e-12)
    one = analyze(c, "bound_terms", tmp_path, device="cpu")
    assert (one["lambda"], one["d_H"]) != (five["lambda"], five["d_H"])  # k reached the estimators
