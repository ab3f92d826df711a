"""The registries' names and parameters as data, so that the command line checks its arguments at once.

``python -m zslib train`` must answer a misspelled loss or a negative learning rate in a line, within a
second. Importing the registries themselves imports PyTorch, which alone takes seconds; so their names,
parameters and parameter checks are kept in ``catalog.json`` beside this file, generated from the live
registries by :func:`build` (``python -m zslib.engine.catalog`` rewrites it), and a test fails as soon as the two
differ. The papers (:data:`~zslib.engine.registry.PAPERS`, in the book's order) are listed too, so that the command
line offers every paper's method (``finetune --methods``) without importing one. :func:`check_train_arguments`
validates a ``train`` command's settings against it in plain Python; the configuration is validated again, in full,
when it is built.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["CATALOG", "build", "load", "check_train_arguments", "check_param"]

CATALOG = Path(__file__).with_name("catalog.json")


def build() -> dict:
    """The catalog of the live registries (imports them, hence PyTorch, here: this module must not)."""
    # here, not at the top: these import torch, and the command line reads this module before torch loads
    from zslib.engine.data.datasets import DATASETS
    from zslib.engine.losses import LOSSES
    from zslib.engine.registry import METHODS, PAPERS
    from zslib.engine.models.embedding import BACKBONES
    from zslib.engine.profile import PROFILES

    methods = {}
    for name, cls in sorted(METHODS.items()):
        if cls.name != name or name in ("objective",):
            continue
        methods[name] = {key: {"default": spec.default, "check": getattr(spec.check, "spec", None)}
                         for key, spec in cls.params.items()}
    return {"profiles": sorted(PROFILES), "datasets": sorted(["synthparts", *DATASETS]),
            "backbones": sorted(BACKBONES), "losses": {k: sorted(v.defaults) for k, v in sorted(LOSSES.items())},
            "methods": methods,
            "papers": [{"key": p.key, "name": p.name, "method": p.method, "finetune": p.campaign is not None}
                       for p in PAPERS.values()]}


def load() -> dict:
    return json.loads(CATALOG.read_text())


def check_param(spec: dict | None, value, name: str):
    """``value`` checked as ``spec`` (a number range, a choice, a boolean, a list of names, or null and an inner
    spec) says; the message names ``name``."""
    if spec is None or (value is None and spec.get("optional")):
        return value
    kind = spec["kind"]
    if kind == "optional":  # null, or a value of the inner spec
        return value if value is None else check_param(spec["of"], value, name)
    if kind == "names":  # null (when optional), a name, or a list of distinct names
        if value is None and spec.get("optional"):
            return value
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(v, str) for v in names):
            raise ValueError(f"{name} must be {'null or ' if spec.get('optional') else ''}a list of names, got {value!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"{name} must name distinct items, got {value!r}")
        if spec.get("options") and any(n not in spec["options"] for n in names):
            raise ValueError(f"{name} must name items from {spec['options']}, got {value!r}")
        return value
    if kind == "choice":
        if value not in spec["options"]:
            raise ValueError(f"{name} must be one of {spec['options']}, got {value!r}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    elif kind == "sizes":  # a non-empty list of positive whole numbers (layer widths)
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
            raise ValueError(f"{name} must be a non-empty list of positive whole numbers, got {value!r}")
        if spec.get("length") is not None and len(value) != spec["length"]:
            raise ValueError(f"{name} must list {spec['length']} positive whole numbers, got {value!r}")
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if spec["integer"] and float(value) != int(value):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        low, high = spec["low"], spec["high"]
        if low is not None and (value <= low if spec["low_open"] else value < low):
            raise ValueError(f"{name} must be {'>' if spec['low_open'] else '>='} {low}, got {value!r}")
        if high is not None and value > high:
            raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return value


_POSITIVE_INT = ("iterations", "batch_classes", "batch_per_class", "embedding_dim", "image_size", "resize_size",
                 "eval_every", "synth_images_per_class")


def check_train_arguments(settings: dict, catalog: dict | None = None) -> None:
    """Raise ``ValueError`` (one line: what is wrong, what is accepted) for settings of ``python -m zslib train``
    that the configuration would refuse: unknown names, unknown or invalid parameters, impossible numbers."""
    cat = catalog or load()
    for key, options in (("profile", cat["profiles"]), ("dataset", cat["datasets"]), ("backbone", cat["backbones"])):
        value = settings.get(key)
        if value is not None and str(value).replace("-", "_").lower() not in [o.lower() for o in options]:
            raise ValueError(f"unknown {key} {value!r}; choose one of {options}")
    loss = settings.get("loss")
    if loss is not None:
        if loss not in cat["losses"]:
            raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(cat['losses'])}")
        unknown = sorted(set(settings.get("loss_params") or {}) - set(cat["losses"][loss]))
        if unknown:
            raise ValueError(f"loss {loss!r} has no parameter(s) {unknown}; it accepts {cat['losses'][loss]}")
    method = settings.get("method") or "baseline"
    if method not in cat["methods"]:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(cat['methods'])} (python -m zslib methods)")
    params = cat["methods"][method]
    for key, value in (settings.get("method_params") or {}).items():
        if key not in params:
            accepted = ", ".join(f"{k} (default {v['default']!r})" for k, v in params.items()) or "none"
            raise ValueError(f"method {method!r} has no parameter {key!r}; it accepts: {accepted}")
        check_param(params[key]["check"], value, f"{method} parameter {key}")
    for key in _POSITIVE_INT:
        if settings.get(key) is not None:
            check_param({"kind": "number", "low": 1, "high": None, "low_open": False, "integer": True},
                        settings[key], f"--{key.replace('_', '-')}")
    if settings.get("batch_classes") is not None and settings["batch_classes"] < 2:
        raise ValueError(f"--batch-classes must be at least 2 (a batch needs two classes to hold a negative pair), "
                         f"got {settings['batch_classes']!r}")
    for key, low_open in (("lr", True), ("weight_decay", False)):
        if settings.get(key) is not None:
            check_param({"kind": "number", "low": 0.0, "high": None, "low_open": low_open, "integer": False},
                        settings[key], f"--{key.replace('_', '-')}")
    if settings.get("validation_fraction") is not None:
        v = settings["validation_fraction"]
        check_param({"kind": "number", "low": 0.0, "high": None, "low_open": False, "integer": False}, v,
                    "--validation-fraction")
        if v >= 1:
            raise ValueError(f"--validation-fraction must be below 1 (a share of the seen classes), got {v!r}")
    if settings.get("seed") is not None:
        check_param({"kind": "number", "low": 0, "high": None, "low_open": False, "integer": True}, settings["seed"],
                    "--seed")


if __name__ == "__main__":
    CATALOG.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {CATALOG}")
