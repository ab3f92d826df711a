"""The command line: bad arguments answered in one line with exit status 2, before PyTorch is imported (so at
once), from a catalog of the registries that must equal the registries themselves."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zslib.engine import catalog

BAD = [
    (["--loss", "nosuch"], "unknown loss 'nosuch'"),
    (["--lr", "-1"], "--lr must be > 0.0"),
    (["--lr", "nan"], "--lr must be a finite number"),
    (["--schedule", "step:abc"], "EVERY must be a whole number"),
    (["--method", "cmll"], "unknown method 'cmll'"),
    (["--method", "cml", "--method-param", "lambda3=1"], "has no parameter 'lambda3'; it accepts"),
    (["--method", "cml", "--method-param", "lambda1=-2"], "lambda1 must be >= 0.0"),
    (["--method", "cml", "--method-param", "ec_pairs=some"], "ec_pairs must be one of"),
    (["--loss", "triplet", "--loss-param", "margn=0.2"], "has no parameter(s) ['margn']"),
    (["--iterations", "0"], "--iterations must be >= 1"),
    (["--dataset", "cubb"], "unknown dataset 'cubb'"),
    (["--validation-fraction", "1.5"], "--validation-fraction must be below 1"),
    (["--method-param", "lambda1"], "expects KEY=VALUE"),
    (["--batch-classes", "1"], "--batch-classes must be at least 2"),  # issue 32: trained and stored a run
]


def test_the_catalog_equals_the_registries():
    assert catalog.load() == json.loads(json.dumps(catalog.build(), sort_keys=True)), \
        "zslib/catalog.json is out of date: run `python -m zslib.engine.catalog` to rewrite it from the registries"


def test_the_catalog_checks_agree_with_the_methods_own_checks():
    from zslib.engine.registry import METHODS

    samples = [-1, 0, 0.5, 1, 3, 2.5, float("nan"), float("inf"), True, "random", "paper", "x", None]
    for name, params in catalog.load()["methods"].items():
        for key, entry in params.items():
            real = METHODS[name].params[key].check
            for value in samples:
                try:
                    real(value, key)
                    real_ok = True
                except (TypeError, ValueError):
                    real_ok = False
                try:
                    catalog.check_param(entry["check"], value, key)
                    cat_ok = True
                except ValueError:
                    cat_ok = False
                assert real_ok == cat_ok, f"{name}.{key} = {value!r}: method says {real_ok}, catalog says {cat_ok}"


_PROBE = """
import sys
from zslib.__main__ import main
code = main(["train"] + sys.argv[1:])
print("TORCH_IMPORTED" if "torch" in sys.modules else "NO_TORCH", code)
"""


@pytest.mark.parametrize("args, words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_argument_is_one_line_exit_2_before_torch(args, words):
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True)
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) <= 2 and words in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout.split() == ["NO_TORCH", "2"], (out.stdout, out.stderr)


def test_a_cuda_device_without_a_driver_is_refused_at_once(monkeypatch):
    from pathlib import Path

    if Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver")
    out = subprocess.run([sys.executable, "-c", _PROBE, "--device", "cuda:1"], capture_output=True, text=True)
    assert "no NVIDIA GPU driver" in out.stderr and out.stdout.split() == ["NO_TORCH", "2"]


def test_methods_lists_every_registered_method():
    out = subprocess.run([sys.executable, "-m", "zslib", "methods"], capture_output=True, text=True, check=True)
    for name in catalog.load()["methods"]:
        assert f"{name}: " in out.stdout


# ---------------------------------------------------------------- issue 32: unclear errors, one line, exit 2
TINY_ARGS = ["--iterations", "4", "--eval-every", "4", "--batch-classes", "4", "--batch-per-class", "2",
             "--synth-images-per-class", "8", "--image-size", "32", "--resize-size", "36", "--embedding-dim", "16",
             "--progress", "none"]


def _main(capsys, *argv):
    from zslib.__main__ import main

    code = main(list(argv))
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and lines and len(lines) <= 2 and "Traceback" not in err, (code, err)
    return lines[0]


def test_disk_full_during_a_checkpoint_is_one_line(capsys, tmp_path, monkeypatch):
    import torch

    def full_disk(obj, f, *a, **k):
        f.write(b"PK")  # what torch's zip writer does before the disk runs out
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 3456 vs 3344")

    monkeypatch.setattr(torch, "save", full_disk)
    line = _main(capsys, "train", *TINY_ARGS, "--results-dir", str(tmp_path))
    assert "disk is full" in line and "ZS_RESULTS" in line and "inline_container" not in line
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]  # no half file left


def test_grade_of_a_notebook_without_cells_is_one_line(capsys, tmp_path):
    nb = tmp_path / "sub.ipynb"
    nb.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}}))
    line = _main(capsys, "grade", str(nb))  # before: a jsonschema ValidationError traceback
    assert "no 'cells' list" in line and "Jupyter" in line


def test_weights_path_on_a_file_that_is_not_a_checkpoint(capsys, tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("these are not weights\n")
    line = _main(capsys, "train", *TINY_ARGS, "--weights-path", str(bad), "--results-dir", str(tmp_path))
    assert "is not a PyTorch weights file" in line and "weights_only" not in line  # before: a 34-line UnpicklingError


def test_another_backbone_on_quick_does_not_get_smallcnns_widths(capsys, tmp_path, monkeypatch):
    import zslib.experiment
    from zslib.engine.models.embedding import build_backbone

    seen = []

    def fake_run(config, **kwargs):
        seen.append(config)
        raise KeyboardInterrupt  # stop before training

    monkeypatch.setattr(zslib.experiment, "run", fake_run)
    from zslib.__main__ import main

    assert main(["train", "--backbone", "resnet50", "--results-dir", str(tmp_path)]) == 130
    assert seen[0].backbone == "resnet50" and seen[0].backbone_params == {}  # before: {'widths': [...]}
    with pytest.raises(TypeError, match="backbone 'resnet50' takes no parameter.*widths"):
        build_backbone("resnet50", widths=[16, 32])


def test_a_loss_parameter_of_the_wrong_kind(capsys, tmp_path):
    line = _main(capsys, "train", *TINY_ARGS, "--loss-param", "margin=abc", "--results-dir", str(tmp_path))
    assert "margin must be a number" in line  # before: "unsupported operand type(s) for +: 'Tensor' and 'str'"
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").iterdir())


def test_an_unknown_zs_device(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_DEVICE", "gpu")
    line = _main(capsys, "train", *TINY_ARGS, "--results-dir", str(tmp_path))
    assert "ZS_DEVICE='gpu' is not a device" in line and "cpu" in line  # before: torch's list of 20 device types


def test_a_result_whose_history_has_the_wrong_type(capsys, tmp_path):
    from zslib.engine.config import Config
    from zslib.engine.store import Result
    from zslib.engine.train.history import History

    config = Config()
    path = Result(config, {"unseen": {"R@1": 0.2}}, History(), {"complete": True}).save(
        tmp_path / f"run-{config.hash}.json")
    d = json.loads(path.read_text())
    d["history"]["losses"] = 5
    path.write_text(json.dumps(d))
    line = _main(capsys, "evaluate", "--result", str(path))
    assert "history/losses must be a list" in line and str(path) in line  # before: "'int' object is not iterable"


def test_record_from_a_missing_folder_fails(capsys, tmp_path):
    line = _main(capsys, "record", "--profile", "real", "--results-dir", str(tmp_path / "nonexistent"))
    assert "no results folder" in line  # before: "copied 0 run(s)" and exit status 0


# ---------------------------------------------------------------- the options of `train` are Config's fields
def _subparsers(parser):
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _train_help(config_cls=None) -> str:
    from zslib.__main__ import _parser

    return " ".join(_subparsers(_parser(config_cls))["train"].format_help().split())


def test_a_field_added_to_the_config_is_an_option_of_train_with_no_other_change():
    import dataclasses

    from zslib.__main__ import _parser, config_overrides
    from zslib.engine.config import Config

    @dataclasses.dataclass(frozen=True)
    class Extended(Config):
        warmup_steps: int | None = dataclasses.field(default=None, metadata={"help": "steps of linear warm-up"})
        label_smoothing: float = 0.0  # no metadata: the option is named after the field

    text = _train_help(Extended)
    assert "--warmup-steps WARMUP_STEPS steps of linear warm-up" in text
    assert "--label-smoothing LABEL_SMOOTHING Extended.label_smoothing (default 0.0)" in text
    assert "--warmup-steps" not in _train_help()
    args = _parser(Extended).parse_args(["train", "--warmup-steps", "50", "--label-smoothing", "0.1", "--seed", "2"])
    overrides = config_overrides(args, Extended)
    assert overrides == {"warmup_steps": 50, "label_smoothing": 0.1, "seed": 2}
    config = Extended.from_profile("quick", **overrides)
    assert (config.warmup_steps, config.label_smoothing, config.seed) == (50, 0.1, 2)


def test_every_config_field_is_an_option_with_its_help():
    import dataclasses

    from zslib.__main__ import _flag
    from zslib.engine.config import Config

    text = _train_help()
    squeezed = "".join(text.split())  # argparse wraps lines, also after a hyphen
    for field in dataclasses.fields(Config):
        assert field.metadata.get("help"), f"Config.{field.name} has no help"
        assert f"{_flag(field)} " in text and "".join(field.metadata["help"].split()) in squeezed, field.name


def test_the_options_give_the_config_the_values_typed():
    from zslib.__main__ import _parser, config_overrides
    from zslib.engine.config import Config

    argv = ["train", "--profile", "real", "--method", "cml", "--method-param", "lambda1=0.02", "--method-param",
            "lambda2=0.01", "--loss-param", "margin=0.2", "--no-normalize", "--dropout", "0.1", "--schedule",
            "step:10:0.5", "--train-stages", "block6,head", "--train-bn", "batch", "--objective-lr", "0.003"]
    overrides = config_overrides(_parser().parse_args(argv))
    assert overrides == {"profile": "real", "method": "cml", "method_params": {"lambda1": 0.02, "lambda2": 0.01},
                         "loss_params": {"margin": 0.2}, "normalize": False, "dropout": 0.1,
                         "schedule": {"name": "step", "every": 10, "gamma": 0.5}, "train_stages": ["block6", "head"],
                         "train_bn": "batch", "objective_lr": 0.003}
    profile = overrides.pop("profile")
    config = Config.from_profile(profile, **overrides)
    assert config.train_stages == ("block6", "head") and config.method_params["lambda1"] == 0.02
    assert config_overrides(_parser().parse_args(["train"])) == {}  # nothing typed: the profile decides


# ---------------------------------------------------------------- the command line as a user meets it
def test_every_command_is_described_and_progress_offers_the_same_choices_everywhere():
    from zslib.__main__ import PROGRESS, _parser

    commands = _subparsers(_parser())
    for name, parser in commands.items():
        assert parser.description and len(parser.description) > 40, name
    for name in ("train", "finetune"):
        option = next(a for a in commands[name]._actions if "--progress" in a.option_strings)
        assert tuple(option.choices) == PROGRESS, name


def test_grade_all_shows_its_rubric_as_required(capsys):
    from zslib.__main__ import _parser

    parser = _subparsers(_parser())["grade-all"]
    usage = parser.format_usage()
    assert " --rubric RUBRIC" in usage and "[--rubric RUBRIC]" not in usage
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["submissions", "--out", "grades"])
    assert stop.value.code == 2 and "--rubric" in capsys.readouterr().err


def test_the_runs_header_comes_before_its_progress_lines(capsys, tmp_path):
    from zslib.__main__ import main

    argv = [a for a in TINY_ARGS if a not in ("--progress", "none")]
    assert main(["train", *argv, "--eval-every", "2", "--progress", "text", "--results-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    steps = [i for i, line in enumerate(lines) if line.startswith("step ")]
    assert steps and header < steps[0], lines
