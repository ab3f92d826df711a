"""zslib: the helper package of the book *Zero-Shot Metric Learning, Executable*.

The package is organized as the book is:

=====================  ========================================================================================
``zslib.engine``       what every chapter shares: profiles, the run's configuration, the runner and grids of
                       runs, the result store, data, backbones, the standard losses, evaluation, the trainer
``zslib.methods``      one folder per paper (``cml``, ``deml``, ``adapt_adv``, ``zsml``, ``jrd``): its math, its
                       method, its analyses; plus the baseline and the untrained network
``zslib.analysis``     looking at trained models: probes, saliency, localization, figures, analysis records,
                       the reproduction check
``zslib.teaching``     the exercises and the assignment pack (student and instructor notebooks, grading)
``zslib.experiment``   the front door the chapters use: configure, train or load, compare
``zslib.reported``     the papers' reported numbers, as data
=====================  ========================================================================================

Importing ``zslib`` itself is cheap; each subpackage is imported on first use (``zslib.engine`` etc.).
"""
from __future__ import annotations

import importlib

from zslib.engine.threads import prefer_short_spin

prefer_short_spin()  # before PyTorch is imported: see zslib.engine.threads

from zslib.engine.profile import PROFILES, Profile, device, get_profile, set_profile  # noqa: E402

__version__ = "0.1.0"

__all__ = ["PROFILES", "Profile", "device", "get_profile", "set_profile", "__version__"]

_SUBMODULES = {"engine", "methods", "analysis", "teaching", "experiment", "reported"}


def __getattr__(name):  # PEP 562: lazy submodules keep `import zslib` fast
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'zslib' has no attribute {name!r}")
