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
]


def test_the_catalog_equals_the_registries():
    assert catalog.load() == json.loads(json.dumps(catalog.build(), sort_keys=True)), \
        "zslib/catalog.json is out of date: run `python -m zslib.engine.catalog` to rewrite it from the registries"


def test_the_catalog_checks_agree_with_the_methods_own_checks():
    from zslib.methods import METHODS

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
