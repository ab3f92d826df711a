"""Tests of zslib.experiment and the command line: configs, the results store, summaries, end-to-end runs.

The end-to-end runs use the real data, model, loss and evaluation modules at a tiny size (a few
iterations on a small SynthParts set; ResNet-50 at 32 px on a CUB-format fixture tree).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

import zslib
from zslib import experiment
from zslib.experiment import Config, Result, config_hash, load_result, results_dir, run, run_seeds, summarize
from zslib.engine.train import History, load_checkpoint

# A SynthParts run small enough for a unit test: 4 x 2 batches, 8 images per class, 32 px.
TINY = dict(iterations=6, eval_every=3, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


# ----------------------------------------------------------------------------------------------------
# Config


def test_config_from_profile_takes_the_profile_sizes_and_overrides():
    c = Config.from_profile("quick")
    p = zslib.PROFILES["quick"]
    assert (c.dataset, c.backbone, c.image_size, c.lr, c.batch_classes, c.iterations) == (
        p.dataset, p.backbone, p.image_size, p.lr, p.batch_classes, p.iterations)
    assert c.seed == p.seeds[0] and c.profile == "quick"
    f = Config.from_profile("full", loss="binomial_deviance", iterations=10)
    assert (f.dataset, f.backbone, f.lr, f.weight_decay, f.loss, f.iterations) == (
        "cub200", "googlenet", 1e-5, 2e-4, "binomial_deviance", 10)
    zslib.set_profile("full")
    try:
        assert Config.from_profile().profile == "full"
    finally:
        zslib.set_profile(None)
    with pytest.raises(TypeError, match="no field"):
        Config.from_profile("quick", iteratons=5)
    with pytest.raises(ValueError, match=">= 1"):
        Config.from_profile("quick", iterations=0)
    assert Config.from_profile("quick").to_profile().replace(seeds=p.seeds) == p


def test_config_hash_ignores_the_name_and_tracks_everything_else():
    c = Config.from_profile("quick")
    assert config_hash(c) == config_hash(c.replace(name="my label"))
    assert len({config_hash(c), config_hash(c.replace(seed=1)), config_hash(c.replace(loss_params={"margin": 0.2})),
                config_hash(c.replace(method_params={"lambda1": 0.1}, method="cml"))}) == 4
    assert Config.from_dict(json.loads(json.dumps(c.as_dict()))) == c
    # automatic names follow the seed; explicit names are kept
    assert c.replace(seed=3).name.endswith("-s3") and c.replace(name="x").replace(seed=3).name == "x"


def test_results_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "env"))
    assert results_dir() == tmp_path / "env" and results_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("ZS_RESULTS")
    assert results_dir().name == "results"


# ----------------------------------------------------------------------------------------------------
# Summaries over seeds


def test_summarize_is_the_student_t_interval():
    # mean 2, sample sd 1, n = 3: half-width t(0.975, 2) / sqrt(3) with t = 4.302653 (statistics tables)
    mean, lo, hi = summarize([1.0, 2.0, 3.0])
    assert mean == 2.0 and hi - mean == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert mean - lo == pytest.approx(hi - mean)
    m1, lo1, hi1 = summarize([0.5])
    assert m1 == 0.5 and math.isnan(lo1) and math.isnan(hi1)
    fake = [Result(Config(), {"unseen": {"R@1": v}}, History(), {}) for v in (0.2, 0.4)]
    assert summarize(fake, "R@1")[0] == pytest.approx(0.3)
    with pytest.raises(KeyError, match="no split"):
        summarize(fake, "R@1", split="val")
    with pytest.raises(ValueError, match="at least one"):
        summarize([])


# ----------------------------------------------------------------------------------------------------
# End to end on SynthParts


@pytest.fixture
def tiny_config():
    return Config.from_profile("quick", **TINY)


def test_run_trains_stores_provenance_and_then_loads(tiny_config, tmp_path, monkeypatch):
    r = run(tiny_config, results_dir=tmp_path, progress=False)
    assert r.path.exists() and r.path.name.endswith(f"-{config_hash(tiny_config)}.json")
    stored = json.loads(r.path.read_text())
    prov = stored["provenance"]
    for key in ("zslib_version", "git_commit", "torch_version", "device", "seed", "wall_seconds", "timestamp",
                "profile"):
        assert key in prov
    assert prov["zslib_version"] == zslib.__version__ and prov["torch_version"] == torch.__version__
    assert set(r.metrics["unseen"]) == {"R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R"}  # the row + HELD_OUT_EXTRA
    assert all(0.0 <= v <= 1.0 for v in r.metrics["unseen"].values())
    assert [row["step"] for row in r.history.evals] == [0, 3, 6]
    # the final curve point of the unseen classes is the final row's recall
    assert r.history.last("unseen")["R@1"] == pytest.approx(r.metrics["unseen"]["R@1"])
    assert r.checkpoint is not None and r.checkpoint.exists()

    # a second call loads the stored result: training must not run again
    def no_training(*args, **kwargs):
        raise AssertionError("a stored result was recomputed")
    from zslib.engine import runner
    monkeypatch.setattr(runner, "train", no_training)
    again = run(tiny_config, results_dir=tmp_path)
    assert again.metrics == r.metrics and again.history == r.history and again.config == tiny_config
    monkeypatch.undo()
    # force recomputes, bitwise the same numbers (determinism end to end)
    forced = run(tiny_config, results_dir=tmp_path, force=True, progress=False)
    assert forced.metrics == r.metrics and forced.history.losses == r.history.losses


def test_a_run_trained_again_never_writes_over_a_recorded_run(tiny_config, tmp_path):
    # a recorded run sits in <results>/recorded/ (or in the installed copy on Colab); training it again, e.g. to
    # get a model for a figure, must write into the results folder and leave the recorded file as it was
    made = run(tiny_config, results_dir=tmp_path / "made", progress=False)
    recorded = tmp_path / "results" / "recorded"
    recorded.mkdir(parents=True)
    kept = recorded / made.path.name
    kept.write_bytes(made.path.read_bytes())
    before = kept.read_bytes()
    assert run(tiny_config, results_dir=tmp_path / "results").path == kept  # found among the recorded runs
    again = run(tiny_config, results_dir=tmp_path / "results", force=True, progress=False)
    assert kept.read_bytes() == before
    assert again.path.parent == tmp_path / "results" and again.path.name == kept.name
    assert again.metrics == made.metrics


def test_validation_split_and_seeds(tiny_config, tmp_path):
    c = tiny_config.replace(validation_fraction=0.2, iterations=3)
    results = run_seeds(c, seeds=[0, 1], results_dir=tmp_path, progress=False)
    assert [r.config.seed for r in results] == [0, 1]
    assert results[0].metrics["val"] != results[1].metrics["val"]
    assert set(results[0].metrics) == {"seen", "val"}  # a validation run scores no unseen class
    assert results[0].history.splits == ["seen", "val"]
    mean, lo, hi = summarize(results, "R@1", split="val")
    assert lo <= mean <= hi
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_a_registered_method_runs_through_the_runner(tiny_config, tmp_path, monkeypatch):
    """A method added to the registry is trained by run() with no change to the runner or the trainer."""
    from zslib.engine import method as methods, registry

    class Spread(methods.Method):
        name, paper, equations = "spread", "test", "L_m + w * ||mean||^2"
        params = {"w": methods.Param(0.5, "weight", methods.number(low=0.0))}

        def terms(self, phase, model, images, labels):
            emb = model(images)
            return {self.loss_name: self.loss(emb, labels), "spread": self.p["w"] * emb.mean(0).pow(2).sum()}

    monkeypatch.setitem(registry.METHODS, "spread", Spread)
    c = tiny_config.replace(method="spread", method_params={"w": 0.25}, iterations=2)
    r = run(c, results_dir=tmp_path, progress=False)
    row = r.history.losses[-1]
    assert set(row) == {"step", "triplet", "spread", "total"}
    assert row["total"] == pytest.approx(row["triplet"] + row["spread"], rel=1e-6)
    assert r.config.method_params == {"w": 0.25}


def test_parametric_loss_on_a_validation_split_gets_contiguous_labels(tiny_config, tmp_path):
    """Holding out validation classes leaves training labels with gaps; Proxy-NCA needs 0..C-1."""
    c = tiny_config.replace(loss="proxy_nca", iterations=2, eval_every=2, validation_fraction=0.3)
    r = run(c, results_dir=tmp_path, progress=False)
    assert "proxy_nca" in r.history.losses[0] and math.isfinite(r.history.losses[-1]["total"])
    state = load_checkpoint(r.checkpoint)
    proxies = [v for k, v in state["method"].items() if v.ndim == 2]
    assert proxies and proxies[0].shape == (35, 16)  # 50 seen classes minus 15 validation classes


# ----------------------------------------------------------------------------------------------------
# Command line


def test_cli_train_then_evaluate_reproduces_the_stored_metrics(tmp_path, capsys):
    from zslib.__main__ import main

    args = ["train", "--loss", "triplet", "--results-dir", str(tmp_path), "--progress", "none",
            "--loss-param", "margin=0.2"]
    for key, value in TINY.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "unseen:" in out and "R@1" in out and "result: " in out
    path = out.split("result: ")[1].strip()
    result = load_result(path)
    assert result.config.loss_params == {"margin": 0.2}
    assert main(["evaluate", "--result", path, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics == pytest.approx(result.metrics["unseen"], abs=1e-6)
    assert main(["evaluate", "--checkpoint", str(result.checkpoint), "--split", "train", "--json"]) == 0
    seen = json.loads(capsys.readouterr().out)
    assert seen["R@1"] == pytest.approx(result.metrics["seen"]["R@1"], abs=1e-6)


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "zslib", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "train" in out.stdout and "evaluate" in out.stdout
    out = subprocess.run([sys.executable, "-m", "zslib", "train", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "--loss-param" in out.stdout


# ----------------------------------------------------------------------------------------------------
# The full-profile path on a CUB-200-2011 fixture tree


def make_cub_tree(root, classes=(1, 2, 3, 101, 102, 103), per_class=5, size=40):
    """A tiny CUB-200-2011 folder in the official layout (classes 1-100 train, 101-200 test)."""
    from PIL import Image

    folder = root / "cub200" / "CUB_200_2011"
    rng = np.random.default_rng(0)
    images, labels, split = [], [], []
    for c in classes:
        cdir = f"{c:03d}.Bird_{c}"
        (folder / "images" / cdir).mkdir(parents=True)
        colour = rng.integers(0, 256, 3)
        for j in range(per_class):
            pixels = np.clip(colour + rng.normal(0, 40, (size, size + 7, 3)), 0, 255).astype(np.uint8)
            name = f"{cdir}/Bird_{c}_{j:04d}.jpg"
            Image.fromarray(pixels).save(folder / "images" / name, quality=90)
            images.append(name)
            labels.append(c)
            split.append(j % 2)
    ids = range(1, len(images) + 1)
    (folder / "images.txt").write_text("".join(f"{i} {p}\n" for i, p in zip(ids, images)))
    (folder / "image_class_labels.txt").write_text("".join(f"{i} {c}\n" for i, c in zip(ids, labels)))
    (folder / "train_test_split.txt").write_text("".join(f"{i} {s}\n" for i, s in zip(ids, split)))
    (folder / "classes.txt").write_text("".join(f"{c} {c:03d}.Bird_{c}\n" for c in classes))
    return folder


def test_full_profile_end_to_end_on_a_cub_fixture(tmp_path, monkeypatch, capsys):
    """ResNet-50 (random init) at 32 px, 2 iterations, from the command line, then re-evaluated."""
    from zslib.__main__ import main

    make_cub_tree(tmp_path / "data")
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    args = ["train", "--profile", "full", "--backbone", "resnet50", "--no-pretrained", "--image-size", "32",
            "--resize-size", "36", "--iterations", "2", "--eval-every", "2", "--batch-classes", "2",
            "--batch-per-class", "2", "--embedding-dim", "16", "--num-workers", "0", "--loss", "binomial_deviance",
            "--results-dir", str(tmp_path / "results"), "--progress", "none"]
    assert main(args) == 0
    path = capsys.readouterr().out.split("result: ")[1].strip()
    result = load_result(path)
    c = result.config
    assert (c.profile, c.dataset, c.backbone, c.lr, c.weight_decay) == ("full", "cub200", "resnet50", 1e-5, 2e-4)
    assert set(result.metrics["unseen"]) == {"R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R"}
    assert [r["step"] for r in result.history.evals] == [2]  # eval_every == iterations: only the final model
    assert result.provenance["profile"] == "full" and result.provenance["device"].startswith("cpu")
    # 15 test images of 3 classes: recall of a random-init network is a valid fraction, and the stored
    # checkpoint reproduces it
    assert main(["evaluate", "--result", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == pytest.approx(result.metrics["unseen"], abs=1e-6)


def test_load_model_gives_back_the_network_that_made_the_result(tiny_config, tmp_path):
    from zslib.engine.evaluate import recall_at_k
    from zslib.engine.train import embed

    r = run(tiny_config, results_dir=tmp_path, progress=False)
    model = experiment.load_model(r, device="cpu")
    assert not model.training
    unseen = experiment.build_data(tiny_config)["unseen"]
    emb, labels = embed(model, unseen)
    assert recall_at_k(emb, labels, ks=(1,))[1] == pytest.approx(r.metrics["unseen"]["R@1"], abs=1e-12)
    r.checkpoint.unlink()
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        experiment.load_model(r)


def test_cml_runs_with_the_confusion_terms_its_config_names(tiny_config, tmp_path):
    from zslib.methods.cml.method import with_confusion

    c = with_confusion(tiny_config.replace(normalize=False, iterations=2), 0.1, 0.01)
    r = run(c, results_dir=tmp_path, progress=False)
    row = r.history.losses[-1]
    assert set(row) == {"step", "triplet", "ec", "dc", "total"}
    assert row["total"] == pytest.approx(row["triplet"] + row["ec"] + row["dc"], rel=1e-6)
    only_dc = run(with_confusion(c, 0.0, 0.01), results_dir=tmp_path, progress=False)
    assert set(only_dc.history.losses[-1]) == {"step", "triplet", "dc", "total"}
