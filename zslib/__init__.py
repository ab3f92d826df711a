"""zslib: the helper package of the book *Zero-Shot Metric Learning, Executable*.

Submodules are named after the concept they hold: ``data``, ``models``, ``losses``,
``regularizers``, ``evaluate``, ``train``, ``experiment``, ``theory``, ``viz``. Importing
``zslib`` itself is cheap; each submodule is imported on first use (``zslib.evaluate`` etc.).
"""
from __future__ import annotations

import importlib

from .threads import prefer_short_spin

prefer_short_spin()  # before PyTorch is imported: see zslib.threads

from .profile import PROFILES, Profile, device, get_profile, set_profile

__version__ = "0.1.0"

__all__ = ["PROFILES", "Profile", "device", "get_profile", "set_profile", "__version__"]

_SUBMODULES = {
    "data", "models", "losses", "regularizers", "evaluate", "train", "experiment", "theory", "viz", "cache",
    "config", "store", "runner", "grid", "methods", "progress",
    "checks", "stats", "threads",
    "saliency", "pairwise", "cross_update", "diversification", "class_adversary",
    "object_attention", "attention_crop", "localization", "decoupled_losses", "features",
}


def __getattr__(name):  # PEP 562: lazy submodules keep `import zslib` fast
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'zslib' has no attribute {name!r}")
