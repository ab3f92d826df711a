"""No silent wrong number, no lost work (issue 22, items 2-5): each test reproduces a defect that the code
before these checks had (the run trained and then died, a diverged run was stored as complete, a damaged
result file was averaged or silently skipped, a stored result answered for changed code)."""
from __future__ import annotations

import json
import warnings

import pytest

from zslib.engine.config import Config
from zslib.engine.store import (DIGEST_KEY, ResultFileError, ResultsNotWritableError, content_digest, load_result,
                                load_results)

TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


# ------------------------------------------------------------------------------- 2. unwritable results
def test_an_unwritable_results_folder_is_found_before_any_work(tmp_path, monkeypatch):
    from zslib.engine import runner

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(runner, "build_data", lambda config: pytest.fail("data was built before the check"))
    with pytest.raises(ResultsNotWritableError, match="set ZS_RESULTS to a writable folder"):
        runner.run(Config(**TINY), results_dir=blocker / "results", progress=False)
    from zslib.engine.grid import run_many
    with pytest.raises(ResultsNotWritableError):
        run_many([Config(**TINY)], results_dir=blocker / "results", progress=False)


# ------------------------------------------------------------------------------------ 3. divergence
def test_a_diverged_run_is_not_stored(tmp_path):
    from zslib.engine.runner import run

    with pytest.raises(FloatingPointError, match="exploded|non-finite|became"):
        run(Config(**{**TINY, "iterations": 20, "eval_every": 20}, lr=1e6), results_dir=tmp_path, progress=False)
    assert not list(tmp_path.glob("*.json")), "a diverged run must not be stored as a result"
    for bad in (float("nan"), float("inf"), -1.0, 0.0):
        with pytest.raises(ValueError, match="lr"):
            Config(lr=bad)


def test_a_loss_that_never_moves_is_not_a_result(tmp_path, monkeypatch):
    from zslib.engine import registry
    from zslib.engine.method import Method
    from zslib.engine.runner import run

    class Frozen(Method):
        name, paper, equations = "frozen_test", "test", "none"

        def terms(self, phase, model, images, labels):
            return {"constant": model(images).sum() * 0 + 1.0}

    monkeypatch.setitem(registry.METHODS, "frozen_test", Frozen)  # registered for this test only
    config = Config(**{**TINY, "iterations": 12, "eval_every": 12}, method="frozen_test")
    with pytest.raises(FloatingPointError, match="stayed exactly 1 for all 12 steps"):
        run(config, results_dir=tmp_path, progress=False)
    assert not list(tmp_path.glob("*.json"))


# ----------------------------------------------------------------------------- 4. result files checked
def _stored(tmp_path):
    from zslib.engine.runner import run

    return run(Config(**TINY), results_dir=tmp_path, progress=False)


@pytest.mark.parametrize("damage, words", [
    (lambda d: d["metrics"]["unseen"].__setitem__("R@1", "0.9"), "not a finite number"),
    (lambda d: d.__setitem__("metrics", [0.9]), "'metrics' must be"),
    (lambda d: d.pop("metrics"), "'metrics' must be"),
    (lambda d: d["metrics"]["unseen"].__setitem__("R@1", float("nan")), "not a finite number"),
    (lambda d: d.pop("config"), "'config' is missing"),
    (lambda d: d["provenance"].__setitem__("complete", False), "incomplete run"),
])
def test_a_damaged_result_file_names_itself(tmp_path, damage, words):
    result = _stored(tmp_path)
    d = json.loads(result.path.read_text())
    damage(d)
    result.path.write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match=words) as err:
        load_result(result.path)
    assert str(result.path) in str(err.value) and ("delete it" in str(err.value) or "delete" in str(err.value))
    with pytest.raises(ResultFileError):
        load_results(tmp_path)  # never a silently shorter list


def test_a_truncated_result_is_an_error_not_a_missing_run(tmp_path):
    result = _stored(tmp_path)
    result.path.write_text(result.path.read_text()[:200])
    with pytest.raises(ResultFileError, match="not valid JSON"):
        load_results(tmp_path)


def test_summarize_refuses_strings():
    from zslib.engine.stats import summarize

    with pytest.raises(TypeError):
        summarize(["0.9", "0.8"])


# ------------------------------------------------------------------------- 5. results and changed code
def test_a_result_computed_by_other_code_is_named(tmp_path):
    from zslib.engine.runner import run

    result = _stored(tmp_path)
    assert result.provenance["code_fingerprint"]
    d = json.loads(result.path.read_text())
    d["provenance"]["code_fingerprint"] = "0" * 16
    d[DIGEST_KEY] = content_digest(d)  # as other code would have written it
    result.path.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match=r"1 stored result\(s\) were computed by other zslib code"):
        again = run(Config(**TINY), results_dir=tmp_path, progress=False)
    assert again.metrics == result.metrics
    with warnings.catch_warnings():  # a result of this code loads silently
        warnings.simplefilter("error")
        d["provenance"]["code_fingerprint"] = result.provenance["code_fingerprint"]
        d[DIGEST_KEY] = content_digest(d)
        result.path.write_text(json.dumps(d))
        run(Config(**TINY), results_dir=tmp_path, progress=False)
