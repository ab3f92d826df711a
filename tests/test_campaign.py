"""The fine-tuning campaign (``python -m zslib finetune``) without a GPU: ``--smoke`` runs every configuration for two
steps on the CPU on fabricated Flowers-102, the table's numbers are recomputed from the stored result files, a
second call trains nothing, a run cut off after its first step resumes from its checkpoint to the same numbers,
and each of the five datasets' plans trains on a fabricated folder in the official layout."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from data_fixtures import build_cars_annos, build_cub, build_flowers, build_inshop, build_sop

from zslib.engine.registry import PAPERS

METHODS = tuple(paper.method for paper in PAPERS.values())  # every paper's method is in the campaign

@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ZS_DOWNLOAD", "0")


def _flowers(root: Path) -> Path:
    # 8 seen classes x 5 images (the validation split holds 2 of them: 10 images, enough for Recall@8) and
    # 6 unseen classes x 4 images, in the official layout
    build_flowers(root, labels=[c for c in range(1, 9) for _ in range(5)] + [c for c in range(52, 58) for _ in range(4)])
    return root


def _unseen_r1(path: Path) -> float:
    return json.loads(path.read_text())["metrics"]["unseen"]["R@1"]


def _t_interval(x):
    x = np.asarray(x, float)
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return x.mean(), x.mean() - half, x.mean() + half


#: The methods of the smoke campaign below: one, with every stage and every configuration of its own (the floor, the
#: tuning stage, its validation and test runs); the other methods' configurations are built and checked by the tests
#: of the plan, and each would add as many two-step runs again.
SMOKE_METHODS = ("cml",)


@pytest.mark.slow
def test_smoke_runs_every_configuration_then_resumes(tmp_path, capsys, monkeypatch):
    from zslib.__main__ import main
    from zslib.campaign.run import campaign_configs, load_manifest
    from zslib.engine.runner import run
    from zslib.engine.store import result_path

    data, results = _flowers(tmp_path / "data"), tmp_path / "results"
    argv = ["finetune", "--smoke", "--data-root", str(data), "--results-dir", str(results), "--methods",
            ",".join(SMOKE_METHODS)]
    before = os.environ.get("ZS_DATA")
    assert main(argv) == 0
    assert os.environ.get("ZS_DATA") == before  # the campaign's data folder does not outlive the command
    first = capsys.readouterr().out
    for stage in ("stage 1/5 floor", "stage 2/5 tuning", "stage 3/5 validation", "stage 4/5 test", "stage 5/5 table"):
        assert stage in first
    folder = results / "smoke-campaign"
    manifest = load_manifest(folder / "campaign" / "flowers102.json")

    # every configuration of the validation stage and the floor ran, two steps on the CPU
    configs = campaign_configs("flowers102", smoke=True, methods=SMOKE_METHODS, tuning=manifest["tuning_choice"]["used"])
    for runs in [*configs["floor"].values(), *(s for m in configs["validation"].values() for s in m.values()),
                 *configs["tuning"].values()]:
        for c in runs:
            stored = json.loads(result_path(c, folder).read_text())
            # two steps, or the length the tuning stage chose (one or two)
            assert stored["config"]["iterations"] == c.iterations in (1, 2) and stored["config"]["image_cache"] is True
            assert stored["provenance"]["device"].startswith("cpu")
            if c.method != "pretrained":
                p = stored["provenance"]
                assert p["precision"] == "float32" and p["images_per_second"] > 0 and 0 <= p["data_wait_share"] <= 1
                assert stored["history"]["losses"][-1]["step"] == c.iterations
                # images per second: the steps of 2 x 2 images over the training wall time, stored to one decimal
                # (so off by at most 0.05 image per second of training, however long a busy machine took)
                elapsed = stored["history"]["elapsed"]
                assert abs(p["images_per_second"] * elapsed - 4 * c.iterations) <= 0.05 * elapsed + 1e-9

    # the tuning stage's choice: every (recipe, length) read from the runs' histories, brute force, by the rule
    tuning = manifest["tuning"]
    assert {"untrained", "off"} <= set(tuning) and len(tuning) >= 5
    means, per_seed = {}, {}
    for label, fs in tuning.items():
        stored = [json.loads((folder / f).read_text()) for f in fs]
        if label in ("untrained", "off"):
            per_seed[label] = [d["metrics"]["val"]["R@1"] for d in stored]
            continue
        steps = sorted({row["step"] for row in stored[0]["history"]["evals"] if "val" in row and row["step"] > 0})
        assert steps == [1, 2]  # evaluated every step of the smoke run; the length is a candidate too
        for step in steps:
            per_seed[f"{label} @ {step}"] = [next(row["val"]["R@1"] for row in d["history"]["evals"][::-1]
                                                  if row["step"] == step and "val" in row) for d in stored]
    means = {k: np.mean(v) for k, v in per_seed.items()}
    leader = max(means, key=means.get)  # the first of equal means, in the order listed
    assert manifest["tuning_choice"]["leader"] == leader
    low = _t_interval(np.subtract(per_seed[leader], per_seed["off"]))[1] if leader != "off" else -1
    assert manifest["tuning_choice"]["chosen"] == (leader if low > 0 else "off")
    used = manifest["tuning_choice"]["used"]
    if manifest["tuning_choice"]["chosen"] in ("off", "untrained"):
        trained = {k: m for k, m in means.items() if k not in ("off", "untrained")}
        assert used == max(trained, key=trained.get)
    else:
        assert used == leader
    # the methods ran the recipe the tuning stage gave them: its rate, BatchNorm and length
    from zslib.campaign.plan import RECIPES, tuning_overrides

    want = tuning_overrides(used, RECIPES["flowers102"], 2)  # the smoke run: two steps
    some = json.loads((folder / manifest["test"]["cml"]["off"][0]).read_text())["config"]
    assert all(some[k] == v for k, v in want.items()), (want, some)
    assert len(manifest["head"]) == 2 and manifest["rows"][1]["row"].startswith("no fine-tuning")

    # the choice of each method follows the rule, recomputed from the files with numpy and scipy
    for m in SMOKE_METHODS:
        files = manifest["validation"][m]
        val = {k: [json.loads((folder / f).read_text())["metrics"]["val"]["R@1"] for f in fs] for k, fs in files.items()}
        leader = max(val, key=lambda k: np.mean(val[k]))
        assert manifest["choices"][m]["leader"] == leader
        low = _t_interval(np.subtract(val[leader], val["off"]))[1] if leader != "off" else -1
        expected = leader if low > 0 else "off"
        assert manifest["choices"][m]["chosen"] == expected
        t = manifest["test"][m]
        assert t["ablation"] == (expected == "off")
        assert t["setting"] == (expected if expected != "off" else max((k for k in val if k != "off"),
                                                                          key=lambda k: np.mean(val[k])))

    # each method's row: its change against the same-loss baseline and the floor, paired by seed, from the files
    rows = {r["row"]: r for r in manifest["rows"]}
    floor = [_unseen_r1(folder / f) for f in manifest["floor"]["tf_efficientnet_lite0"]]
    for m in SMOKE_METHODS:
        t = manifest["test"][m]
        method, off = [_unseen_r1(folder / f) for f in t["method"]], [_unseen_r1(folder / f) for f in t["off"]]
        for key, other in (("vs baseline", off), ("vs floor", floor)):
            got = rows[m][key]["diff"]
            assert np.allclose(got, _t_interval(np.subtract(method, other)), atol=1e-12), (m, key)
        assert rows[m]["hardware"] and rows[m]["hardware"][0].startswith("cpu")
    assert "| cml |" in (folder / "campaign" / "flowers102.md").read_text()
    assert len(list((tmp_path / "cache").glob("preresized-*"))) == 2  # the seen and the unseen split, cached once

    # a disconnect: one test run lost its result after one of its two steps; the same command resumes it from the
    # checkpoint and reproduces every number; the other runs are loaded, not trained
    lost = configs["head"][0]  # two steps whatever length the tuning stage chose
    path = result_path(lost, folder)
    before = json.loads(path.read_text())["metrics"]
    path.unlink()
    checkpoint = folder / "checkpoints" / f"{path.stem}.pt"
    checkpoint.unlink()
    monkeypatch.setenv("ZS_DATA", str(data))  # the command sets its data folder only while it runs
    partial = run(lost, folder, device="cpu", progress=False, max_steps=1, checkpoint_every=1)
    assert partial.provenance == {"complete": False} and checkpoint.is_file() and not path.exists()
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert "(1 run(s) trained by this call" in second
    assert json.loads(path.read_text())["metrics"] == before
    assert load_manifest(folder / "campaign" / "flowers102.json")["rows"] == manifest["rows"]

    # the chapter's sentences say what the tuning stage chose and what the head alone reached, from these runs
    from zslib.campaign.report import campaign_sentences
    from zslib.campaign.run import run_campaign

    camp = run_campaign("flowers102", smoke=True, methods=SMOKE_METHODS, results_dir=results, out=lambda line: None)
    assert camp.trained == 0 and camp.tuning_choice.chosen == manifest["tuning_choice"]["chosen"]
    text = campaign_sentences(camp)
    head = next(r for r in manifest["rows"] if r["row"].startswith("no fine-tuning"))
    assert "chosen on validation classes" in text and "A head trained on the frozen network" in text
    assert f"{100 * head['vs floor']['diff'][0]:+.1f} [" in text


def test_help_names_the_stages_and_labels_what_is_measured_and_what_is_estimated():
    out = subprocess.run([sys.executable, "-m", "zslib", "finetune", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for number, stage in enumerate(("floor", "tuning", "validation", "test", "table"), start=1):
        assert f"  {number} {stage}" in out
    text = " ".join(out.split())
    assert "2,560 images/s on an NVIDIA H200 with 16 CPU cores (measured" in text  # the bench row of the README
    assert "(estimated at 2,500 images/s" in text and "(estimated at 500 images/s" in text
    assert "the T4 was not measured" in text and "(estimated at 103 images/s on two cores)" in text
    assert "--smoke" in out
    # the measured rate is the one the README's throughput table reports
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "| 2,560 (loader alone: 2,770) |" in readme
    assert "| same | on | 103 |" in readme  # the two-core loader rate the T4 estimate uses


def test_the_help_estimate_is_the_plan_s():
    from zslib.__main__ import _FINETUNE_ESTIMATE
    from zslib.campaign.run import ASSUMED_RATES, estimate_minutes

    gpu, t4 = ASSUMED_RATES.values()
    assert _FINETUNE_ESTIMATE == {"gpu": round(estimate_minutes("flowers102", gpu)),
                                  "t4": round(estimate_minutes("flowers102", t4)),
                                  "t4 cml": round(estimate_minutes("flowers102", t4, ("cml",)))}


def test_a_bad_methods_argument_is_one_line_before_torch():
    probe = ("import sys\nfrom zslib.__main__ import main\ncode = main(['finetune', '--methods', 'cml,nosuch'])\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO_TORCH', code)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "unknown method(s) ['nosuch']" in out.stderr and out.stdout.split() == ["NO_TORCH", "2"]


def test_off_is_the_same_run_with_the_method_switched_off():
    from zslib.campaign.run import campaign_configs

    c = campaign_configs("flowers102", smoke=True)
    for m in METHODS:
        for stage in ("validation", "test"):
            runs = c[stage][m]
            for key, seeds in runs.items():
                for off, other in zip(runs["off"], seeds):
                    a, b = off.as_dict(), other.as_dict()
                    differ = {k for k in a if a[k] != b[k]} - {"name"}
                    assert differ <= {"method", "method_params"}, (m, key, differ)
                    assert off.seed == other.seed and off.method == "baseline"
        assert all(x.validation_fraction == 0.3 for s in c["validation"][m].values() for x in s)
        assert all(x.validation_fraction == 0.0 for s in c["test"][m].values() for x in s)


# ---- each dataset on a fabricated folder in the official layout ----------------------------------------------------

def _sop(root):
    import data_fixtures as fx

    # Recall@1000 needs more than 1,000 unseen images: 101 test classes of 10 images each
    fx.SOP_TEST = [(11319 + i, 1 + i % 3, 10) for i in range(101)]
    return build_sop(root)


def _inshop(root):
    import data_fixtures as fx

    # Recall@50 needs more than 50 gallery images
    fx.INSHOP_ROWS = ([("id_00000002", "train")] * 3 + [("id_00000005", "train")] * 3
                      + [(f"id_{i:08d}", s) for i in range(100, 112) for s in ("query", "gallery", "gallery",
                                                                                 "gallery", "gallery", "gallery")])
    return build_inshop(root)


def _cars(root):
    import data_fixtures as fx

    fx.CARS_SPEC = [(1, 4), (2, 4), (98, 3), (99, 5), (150, 5)]  # Recall@8 needs more than 8 images per split
    return build_cars_annos(root)


BUILDERS = {"cub200": lambda r: build_cub(r, classes={1: 3, 2: 3, 3: 3, 101: 5, 102: 5}),
            "cars196": _cars, "sop": _sop, "inshop": _inshop, "flowers102": _flowers}
BACKBONES = {"cub200": {"googlenet", "bninception"}, "cars196": {"googlenet", "bninception"},
             "sop": {"googlenet", "bninception"}, "inshop": {"googlenet", "bninception"},
             "flowers102": {"tf_efficientnet_lite0"}}


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(BUILDERS))
def test_each_dataset_trains_its_plan_on_a_fabricated_folder(dataset, tmp_path, monkeypatch):
    """The test stage of every method the dataset runs, at its first candidate setting, on the papers' backbones
    (one seed, two steps), and the untrained floor of each backbone: the splits, the image cache and every
    method on every backbone. (The validation stage of the smoke test above runs on Flowers-102.)"""
    import data_fixtures as fx

    from zslib.campaign.plan import RECIPES, skipped_methods
    from zslib.campaign.run import campaign_configs
    from zslib.engine.runner import run

    monkeypatch.setattr(fx, "SOP_TEST", fx.SOP_TEST)
    monkeypatch.setattr(fx, "INSHOP_ROWS", fx.INSHOP_ROWS)
    monkeypatch.setattr(fx, "CARS_SPEC", fx.CARS_SPEC)
    BUILDERS[dataset](tmp_path / "data")
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    c = campaign_configs(dataset, smoke=True, test_seeds=(0, 1))
    assert set(c["floor"]) == BACKBONES[dataset]
    assert set(c["test"]) == set(METHODS) - set(skipped_methods(RECIPES[dataset]))
    if dataset in ("sop", "inshop"):
        assert "zsml" not in c["test"]
    for floor in c["floor"].values():
        r = run(floor[0], tmp_path / "results", device="cpu", progress=False)
        assert 0 <= r.metric("R@1") <= 1 and r.config.pretrained is False
    for m, runs in c["test"].items():
        first = next(k for k in runs if k != "off")
        r = run(runs[first][0], tmp_path / "results", device="cpu", progress=False)
        assert r.history.losses[-1]["step"] == 2 and r.provenance["images_per_second"] > 0
        assert r.config.dataset == dataset and r.config.image_cache is True
        if dataset != "flowers102":  # the papers' backbones: JRD's BN-Inception, GoogLeNet for the others
            assert r.config.backbone == ("bninception" if m == "jrd" else "googlenet")


# ---- chapters find fine-tuned records ---------------------------------------------------------------------------

def test_finetuned_runs_finds_the_fine_tuned_records_with_their_hardware(tmp_path):
    from types import SimpleNamespace

    from zslib.campaign.records import REGIMES, finetuned_runs, hardware, regime, regime_label
    from zslib.engine.config import Config
    from zslib.engine.store import Result
    from zslib.engine.train import History
    from zslib.experiment import finetuned_runs as front_door

    gpu = {"complete": True, "device": "cuda (NVIDIA H100 80GB HBM3)", "precision": "bfloat16",
           "images_per_second": 2512.3, "data_wait_share": 0.03}
    cpu = {"complete": True, "device": "cpu (x86_64, 2 cores)", "precision": "float32"}
    metrics = {"unseen": {"R@1": 0.9}}
    made = {
        "fine-tuned": Config.from_profile("full", dataset="flowers102", backbone="efficientnet_lite0", method="cml",
                                          method_params={"lambda1": 0.01}, seed=3),
        "frozen": Config.from_profile("real", method="cml", method_params={"lambda1": 0.01}, seed=3),
        "quick": Config.from_profile("quick", method="cml", method_params={"lambda1": 0.01}, seed=3),
    }
    for name, c in made.items():
        folder = tmp_path / "recorded" if name == "fine-tuned" else tmp_path
        Result(c, metrics, History(), gpu if name == "fine-tuned" else cpu).save(folder / f"{name}-{c.hash}.json")
    found = finetuned_runs(tmp_path)
    assert [r.config.hash for r in found] == [made["fine-tuned"].hash]
    assert finetuned_runs(tmp_path, recorded_only=True)[0].config.hash == made["fine-tuned"].hash
    assert finetuned_runs(tmp_path, method="jrd") == [] and len(front_door(tmp_path, dataset="flowers102")) == 1
    assert hardware(found[0]) == "cuda (NVIDIA H100 80GB HBM3), bfloat16"
    assert regime_label(found[0]) == "fine-tuned on cuda (NVIDIA H100 80GB HBM3), bfloat16"
    assert {regime(r) for r in [*found, *(Result(c, metrics, History(), cpu) for c in made.values())]} == \
        {"fine-tuned", "frozen", "quick"}
    # the adapted regime (cached maps, some stages training) is told apart by its config's train_stages
    adapted = SimpleNamespace(config=SimpleNamespace(dataset="flowers102", feature_stages=["block5"],
                                                     train_stages=["block6", "head"]), provenance={})
    assert regime(adapted) == "adapted" and hardware(adapted) == "unknown device" and set(REGIMES) >= {"adapted"}


def test_record_copies_real_campaign_files_and_never_smoke_ones(tmp_path):
    from zslib.campaign.run import record_campaigns

    folder = tmp_path / "campaign"
    folder.mkdir()
    for name, smoke in (("flowers102", False), ("cub200", True)):
        (folder / f"{name}.json").write_text(json.dumps({"format": "zslib-campaign", "smoke": smoke}))
        (folder / f"{name}.md").write_text("| row |\n")
    assert record_campaigns(tmp_path, dry_run=True) == [tmp_path / "recorded" / "campaign" / f"flowers102.{e}"
                                                         for e in ("json", "md")]
    assert not (tmp_path / "recorded").exists()
    record_campaigns(tmp_path)
    assert sorted(p.name for p in (tmp_path / "recorded" / "campaign").iterdir()) == ["flowers102.json", "flowers102.md"]


def test_the_fabricated_flowers_are_read_by_the_real_loader_with_the_zero_shot_split(tmp_path):
    from zslib.campaign.fabricate import fabricate_flowers
    from zslib.engine.data import Flowers102

    root = fabricate_flowers(tmp_path, seen=3, unseen=2, per_class=4)
    train, test = Flowers102(root, "train"), Flowers102(root, "test")
    assert (len(train), len(test)) == (12, 8)
    assert sorted(set(train.labels + 1)) == [1, 2, 3] and sorted(set(test.labels + 1)) == [52, 53]
    assert train[0][0].size == (24, 18)


@pytest.mark.parametrize("gib, batch", [(14.7, "32 x 4"), (8.0, "16 x 4")])
def test_the_device_picks_batch_workers_and_precision(gib, batch, monkeypatch):
    """On a (simulated) GPU: the recipe's 32 x 4 batch, halved below 12 GiB (a T4 has 15 GB, 14.7 GiB); float16
    where the GPU has no native bfloat16; the images cropped on the GPU; 8 loader processes asked for, at most one
    per CPU core started (used where a set's pixels fit neither the GPU nor pinned memory)."""
    import os
    from types import SimpleNamespace

    import torch

    from zslib.campaign.plan import RECIPES
    from zslib.campaign.run import device_settings

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=gib * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # amp_dtype then takes float16, the T4's
    overrides, d = device_settings(torch.device("cuda"), RECIPES["flowers102"], methods=METHODS)
    assert d["device"] == "cuda (Tesla T4)" and d["precision"] == "float16" and d["batch"] == batch
    assert overrides == {"device_images": True, **({} if gib >= 12 else {"batch_classes": 16})}
    assert d["batch_changed"] == (gib < 12) and d["device_images"]
    assert d["loader_workers"] == min(8, len(os.sched_getaffinity(0)))
    # DeML at J = 8 peaked at 15.9 GiB at 32 x 4 (measured on an H200): on 15 GiB its classes per batch are halved
    assert d["method_batches"] == ({"deml": 16} if gib >= 12 else {"deml": 8})
    # the CPU path sets none of these: the CPU campaign's hashes stay as they are
    assert device_settings(torch.device("cpu"), RECIPES["flowers102"], methods=METHODS)[0] == {}


def test_the_recorded_campaign_is_recomputed_from_its_run_files():
    """The comparison chapter's fine-tuned section: rows and choices rebuilt from the recorded run files agree
    with an independent numpy computation, and every sentence number is one of them."""
    from zslib.campaign.report import campaign_frame, campaign_sentences, recorded_campaign
    from zslib.engine.store import load_result, recorded_dir

    camp = recorded_campaign("flowers102")
    if camp is None:
        pytest.skip("no fine-tuned campaign is recorded")
    manifest = json.loads((recorded_dir() / "campaign" / "flowers102.json").read_text())
    folder = recorded_dir()
    for m, t in manifest["test"].items():
        off = np.array([load_result(folder / n).metrics["unseen"]["R@1"] for n in t["off"]])
        runs = np.array([load_result(folder / n).metrics["unseen"]["R@1"] for n in t["method"]])
        row = next(r for r in camp.rows if r["row"] == m)
        assert row["vs baseline"]["diff"][0] == pytest.approx((runs - off).mean())
        assert f"{100 * (runs - off).mean():+.1f} [" in campaign_sentences(camp)
        # the choice: recomputed from the validation files, the same as the campaign recorded
        assert camp.choices[m].chosen == manifest["choices"][m]["chosen"]
    assert len(campaign_frame(camp)) == len(manifest["rows"])
    hardware = {h for r in manifest["rows"] for h in r["hardware"]}
    assert all(h in " ".join(campaign_frame(camp)["hardware"]) for h in hardware)


def test_without_a_recorded_campaign_the_chapter_says_how_to_make_one(tmp_path):
    from zslib.campaign.report import campaign_frame, campaign_sentences, recorded_campaign

    (tmp_path / "recorded").mkdir()
    camp = recorded_campaign("flowers102", tmp_path)
    assert camp is None and campaign_frame(camp).empty
    assert "python -m zslib finetune" in campaign_sentences(camp)


# ---- the fine-tuning recipe: frozen BatchNorm, "off" a candidate, the length chosen on validation classes -------------

def test_campaign_configs_freeze_batchnorm_statistics_by_default_and_batch_statistics_is_an_ablation():
    from zslib.campaign.plan import RECIPES, tuning_configs
    from zslib.campaign.run import campaign_configs

    for smoke in (False, True):
        c = campaign_configs("flowers102", smoke=smoke)
        trained = [x for m in (*c["validation"].values(), *c["test"].values()) for s in m.values() for x in s]
        trained += c["head"]
        assert trained and all(x.freeze_bn for x in trained)
        tuning = tuning_configs(RECIPES["flowers102"], smoke=smoke, seeds=(0, 1))
        batch = [k for k, runs in tuning.items() if runs[0].method != "pretrained" and not runs[0].freeze_bn]
        assert batch == ["batch BN lr=1e-05"]  # the one candidate with batch statistics
    # the papers' datasets too (JRD's preset freezes them anyway)
    c = campaign_configs("cub200", smoke=True, methods=("cml", "jrd"))
    assert all(x.freeze_bn for m in c["test"].values() for s in m.values() for x in s)
    # DeML trains with its paper's loss, as in the frozen and adapted regimes
    assert {x.loss for s in campaign_configs("flowers102")["validation"]["deml"].values() for x in s} == \
        {"binomial_deml"}


def test_no_fine_tuning_is_a_candidate_untrained_and_head_only_and_the_head_only_run_leaves_the_backbone_as_is(
        tmp_path, monkeypatch):
    import torch

    from zslib.campaign.plan import RECIPES, tuning_configs
    from zslib.engine.runner import build_model, build_method
    from zslib.engine.train import TrainSpec, train

    tuning = tuning_configs(RECIPES["flowers102"], seeds=(0, 1, 2))
    assert list(tuning)[:2] == ["untrained", "off"]
    assert tuning["untrained"][0].method == "pretrained" and tuning["off"][0].method == "baseline"
    assert {k for k in tuning if k.startswith("lr=")} == {"lr=5e-06", "lr=1e-05", "lr=2e-05"}
    assert tuning["LP-FT lr=1e-05"][0].schedule == {"name": "head_first", "head_steps": 50}
    assert all(x.validation_fraction == 0.3 and x.eval_every == 50 for runs in tuning.values() for x in runs)
    # "off" trains the head alone: after its steps the backbone's tensors are bitwise those it started from, while
    # LP-FT's backbone moves once its head steps are over
    data = _flowers(tmp_path / "data")
    monkeypatch.setenv("ZS_DATA", str(data))
    small = {"image_size": 32, "resize_size": 36, "batch_classes": 2, "batch_per_class": 2, "pretrained": False,
             "embedding_dim": 8, "num_workers": 0, "amp": False, "iterations": 3, "eval_every": 3}
    smoke = tuning_configs(RECIPES["flowers102"], overrides=small, seeds=(0,))
    from zslib.campaign.plan import head_only

    for key, moves in (("off", False), ("LP-FT lr=1e-05", True)):
        config = smoke[key][0].replace(schedule=head_only(3 if key == "off" else 1))
        from zslib.engine.runner import build_data

        d = build_data(config)
        torch.manual_seed(0)
        model = build_model(config)
        method = build_method(config, model, sorted(set(d["train"].labels)))
        before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
        head = model.head.state_dict()["linear.weight"].clone() if "linear.weight" in model.head.state_dict() else None
        train(model, method, d["train"], TrainSpec(iterations=3, batch_classes=2, batch_per_class=2, lr=1e-3,
                                                   schedule=config.schedule, seed=0, progress=False))
        after = model.backbone.state_dict()
        same = all(torch.equal(before[k], after[k]) for k in before)
        assert same != moves, key
        if head is not None:
            assert not torch.equal(head, model.head.state_dict()["linear.weight"])


def test_the_length_is_chosen_on_validation_classes_by_the_rule_against_brute_force():
    """Fabricated runs evaluated every 50 steps: :func:`length_candidates` and the rule pick the (recipe, length)
    that a brute-force search over every evaluation finds, paired against "off" with a Student-t interval."""
    from types import SimpleNamespace

    from zslib.campaign.plan import length_candidates
    from zslib.campaign.run import tuning_to_use
    from zslib.engine.choice import choose

    rng = np.random.default_rng(5)
    seeds, steps = (0, 1, 2), (0, 50, 100, 150)

    def result(seed, curve):
        evals = [{"step": s, "val": {"R@1": float(v)}} for s, v in zip(steps, curve)]
        return SimpleNamespace(config=SimpleNamespace(seed=seed, name=f"s{seed}"), diverged=None,
                               history=SimpleNamespace(evals=evals), metrics={"val": {"R@1": float(curve[-1])}},
                               metric=lambda name="R@1", split="val", c=curve: float(c[-1]))

    for trial in range(20):
        base = 0.80 + rng.normal(0, 0.01, size=len(seeds))
        runs = {"untrained": [result(s, [b] * 4) for s, b in zip(seeds, base - 0.02)],
                "off": [result(s, [b] * 4) for s, b in zip(seeds, base)]}
        for label in ("lr=5e-06", "lr=1e-05", "lr=2e-05"):
            shape = rng.normal(0, 0.02, size=4).cumsum()
            runs[label] = [result(s, b + shape + rng.normal(0, 0.003, size=4)) for s, b in zip(seeds, base)]
        choice = choose(length_candidates(runs), off="off", metric="R@1", split="val")
        # brute force: every candidate at every evaluated step after 0
        table = {"untrained": [r.metric() for r in runs["untrained"]], "off": [r.metric() for r in runs["off"]]}
        for label in ("lr=5e-06", "lr=1e-05", "lr=2e-05"):
            for i, step in enumerate(steps[1:], start=1):
                table[f"{label} @ {step}"] = [r.history.evals[i]["val"]["R@1"] for r in runs[label]]
        leader = max(table, key=lambda k: np.mean(table[k]))
        assert choice.leader == leader
        low = _t_interval(np.subtract(table[leader], table["off"]))[1] if leader != "off" else -1
        assert choice.chosen == (leader if low > 0 else "off")
        used = tuning_to_use(choice)
        fine = {k: np.mean(v) for k, v in table.items() if k not in ("off", "untrained")}
        assert used == (choice.chosen if choice.chosen not in ("off", "untrained") else max(fine, key=fine.get))


def test_the_plan_estimates_what_it_prints_smoke_included():
    from zslib.campaign.run import ASSUMED_RATES, campaign_configs, estimate_minutes, plan_lines

    full, smoke = plan_lines("flowers102"), plan_lines("flowers102", smoke=True)
    assert "smoke" in smoke[0] and "smoke" not in full[0]
    gpu = next(iter(ASSUMED_RATES.values()))
    whole = estimate_minutes("flowers102", gpu)
    assert f"about {whole:.0f} min" in " ".join(full)
    tiny = estimate_minutes("flowers102", gpu, smoke=True, configs=campaign_configs("flowers102", smoke=True))
    assert tiny < 0.05 * whole and f"about {whole:.0f} min" not in " ".join(smoke)
    one = plan_lines("flowers102", methods=("deml",))
    assert "deml" in " ".join(one) and "cml:" not in " ".join(one)


def test_the_methods_help_gives_each_method_s_t4_estimate():
    from zslib.campaign.run import ASSUMED_RATES, estimate_minutes

    t4 = list(ASSUMED_RATES.values())[1]
    out = subprocess.run([sys.executable, "-m", "zslib", "finetune", "--help"], capture_output=True, text=True,
                         check=True).stdout
    text = " ".join(out.split())
    assert "Colab T4" in text and "estimated" in text.lower()
    for m in METHODS:  # every paper's method, each with the estimate of its own plan
        assert f"{m} about {round(estimate_minutes('flowers102', t4, (m,)))} min" in text
        assert m in text.split("Fine-tune")[1].split("Stages")[0]  # named in the description too


def test_one_method_on_a_t4_is_planned_within_an_hour_and_says_what_it_assumes(capsys):
    """``finetune --plan --methods cml``: the T4 figure is at most 60 minutes, computed from the stated throughput
    (recomputed here from the plan's own runs: training images plus evaluated images at a third of the cost), with
    the seeds and what the estimate assumes."""
    from zslib.__main__ import main
    from zslib.campaign.plan import estimated_images
    from zslib.campaign.run import (ASSUMED_RATES, DATASET_IMAGES, SEEN_IMAGES, _evaluations, _planned,
                                    campaign_configs)

    assert main(["finetune", "--plan", "--methods", "cml"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "Colab T4" in x)
    minutes = int(line.split("about ")[1].split(" min")[0])
    rate = ASSUMED_RATES[next(k for k in ASSUMED_RATES if "T4" in k)]
    runs = _planned(campaign_configs("flowers102", methods=("cml",)))
    embedded = sum(_evaluations(x) * (SEEN_IMAGES["flowers102"] if x.validation_fraction else
                                      DATASET_IMAGES["flowers102"]) for x in runs)
    assert minutes == round((estimated_images(runs) + embedded / 3) / rate / 60) <= 60
    assert f"at {rate:,.0f} images/s" in line and "not measured" in line and "V100" in line
    assert "validation seeds 0, 1, 2, test seeds 0, 1, 2, 3, 4" in out
    assert "the estimates assume" in out and "a validation run embedding the seen classes' images only" in out


def test_a_step_that_does_not_fit_names_the_options_of_finetune(tmp_path, monkeypatch, capsys):
    """An allocation failure in a campaign run says what to change in ``finetune``'s own options (it has no
    --batch-per-class), and that the finished runs are kept."""
    import zslib.engine.runner as runner
    from zslib.__main__ import main

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 14.75 GiB total capacity)")

    monkeypatch.setattr(runner, "train", out_of_memory)
    data = _flowers(tmp_path / "data")
    code = main(["finetune", "--smoke", "--methods", "cml", "--data-root", str(data), "--results-dir",
                 str(tmp_path / "results")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "does not fit in memory" in err
    assert "run the same command with --batch-classes" in err and "--batch-per-class" not in err
    # the option it names exists, and changes every run's batch (and so its hash)
    from zslib.campaign.run import campaign_configs

    assert main(["finetune", "--smoke", "--methods", "cml", "--batch-classes", "1", "--plan"]) == 2
    small = campaign_configs("flowers102", smoke=True, methods=("cml",), overrides={"batch_classes": 3})
    assert {x.batch_classes for s in small["validation"]["cml"].values() for x in s} == {3}


def test_torchvision_s_flowers_folder_is_read_as_it_is(tmp_path):
    """``torchvision.datasets.Flowers102(root, download=True)`` leaves the official files in ``root/flowers-102``:
    that folder is found, so a reader who has it does not download the dataset again."""
    from zslib.campaign.fabricate import fabricate_flowers
    from zslib.engine.data import Flowers102

    made = fabricate_flowers(tmp_path / "made", seen=3, unseen=2, per_class=4) / "flowers102"
    made.rename(tmp_path / "flowers-102")
    train = Flowers102(tmp_path, "train")
    assert train.root == tmp_path / "flowers-102" and len(train) == 12


@pytest.mark.slow  # a whole smoke run (campaign, session, class grading, two processes): in `make test`
def test_a_smoke_campaign_on_fabricated_in_shop_runs_through_validation_and_test(tmp_path, monkeypatch, capsys):
    """In-Shop in its official layout (``list_eval_partition.txt``): its validation classes, held out of the training
    split, have no query/gallery split and are scored leave-one-out with In-Shop's row (every item against the
    others; checked against brute force in tests/test_evaluate.py); the test stage queries the gallery. JRD runs
    the preset the book states for In-Shop (the paper's SOP settings: proxies' rate 0.1, margin 0.1), not CUB's."""
    import data_fixtures as fx

    from zslib.__main__ import main
    from zslib.campaign.run import load_manifest

    # 30 training items of 6 images (the validation split holds 9 of them: 54 images, enough for Recall@50 leave-one-
    # out) and 12 test items of one query and 5 gallery images (60 gallery images)
    monkeypatch.setattr(fx, "INSHOP_ROWS", [(f"id_{i:08d}", "train") for i in range(1, 31) for _ in range(6)]
                        + [(f"id_{i:08d}", s) for i in range(100, 112)
                           for s in ("query", "gallery", "gallery", "gallery", "gallery", "gallery")])
    fx.build_inshop(tmp_path / "data")
    results = tmp_path / "results"
    assert main(["finetune", "--smoke", "--dataset", "inshop", "--methods", "cml,jrd", "--data-root",
                 str(tmp_path / "data"), "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert "stage 5/5 table" in out and "| cml |" in out and "| jrd |" in out
    folder = results / "smoke-campaign"
    manifest = load_manifest(folder / "campaign" / "inshop.json")
    row = ["R@1", "R@10", "R@20", "R@30", "R@40", "R@50"]
    for m in ("cml", "jrd"):
        for files in manifest["validation"][m].values():
            for f in files:
                stored = json.loads((folder / f).read_text())
                assert list(stored["metrics"]["val"])[:6] == row and "unseen" not in stored["metrics"]
        for f in manifest["test"][m]["off"] + manifest["test"][m]["method"]:
            stored = json.loads((folder / f).read_text())
            assert list(stored["metrics"]["unseen"])[:6] == row
    jrd = json.loads((folder / manifest["test"]["jrd"]["method"][0]).read_text())["config"]
    assert jrd["backbone"] == "bninception" and jrd["objective_lr"] == 0.1 and jrd["loss_params"]["margin"] == 0.1

