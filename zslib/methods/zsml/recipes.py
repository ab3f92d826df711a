"""The ZSML chapters' protocol (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``): the named configs,
seeds and grids that the chapters, the comparison across methods, the deviations table and the fine-tuning
campaign read from here.

* :func:`real_configs`: the recorded real-profile rows, by name; :func:`every_image_config`: the headline runs;
* :func:`real_zsml`: ZSML at the real profile's settings (:data:`REAL_ZSML`) on any base config;
* the seeds and grids of the choices on validation classes and of the ablations.
"""
from __future__ import annotations

from zslib.engine.config import Config
from zslib.methods.cml.method import cml_method
from zslib.methods.zsml.method import EVERY_UNSEEN_IMAGE

__all__ = ["FLOOR", "ZSML", "EVERY", "HEAD", "REAL_ZSML", "REAL_SEEDS", "VAL_SEEDS", "ABL_SEEDS", "ALPHAS",
           "POS_FRACTIONS", "KS", "VALIDATION_FRACTION", "real_zsml", "real_configs", "every_image_config"]

#: The names of the real-profile rows (:func:`real_configs`) and of the headline runs (:func:`every_image_config`).
FLOOR, ZSML, EVERY, HEAD = "pretrained", "ZSML", "ZSML every image", "trained head (binomial deviance)"

#: The real profile's ZSML: the paper's relation kernels, a smaller S, 4 sampled images per class in evaluation.
REAL_ZSML = {"hidden": [256, 256], "eval_per_class": 4}

#: The seeds of the test rows.
REAL_SEEDS = (0, 1, 2, 3, 4)

#: The seeds of the validation grids (alpha, the share of positive pairs).
VAL_SEEDS = (0, 1, 2)

#: The seeds of the descriptive Table 7 and 8 analogues.
ABL_SEEDS = (0, 1, 2)

#: The label ranges alpha of Eq. 3 compared on validation classes.
ALPHAS = (0.1, 0.3, 0.5)

#: The shares of same-class pairs compared on validation classes (``None``: uniform pairs).
POS_FRACTIONS = (None, 0.1, 0.25, 0.5)

#: The kernel counts k of the Table 7 analogue.
KS = (16, 64, 96, 128)

#: The share of the seen classes held out as validation classes (class-disjoint).
VALIDATION_FRACTION = 0.3


def real_zsml(config: Config | None = None, **changes) -> Config:
    """A real-profile ZSML config (:data:`REAL_ZSML` with ``changes``) on ``config`` (default: the real profile)."""
    return (config or Config.from_profile("real")).replace(method="zsml", method_params={**REAL_ZSML, **changes})


def real_configs() -> dict[str, Config]:
    """The recorded real-profile rows of the ZSML chapter, by name: the untrained features (:data:`FLOOR`), ZSML with
    the profile's pair network (:data:`ZSML`: scored on a 4-per-class sample of each split, the runs the experiments
    page builds on), and the trained head with the binomial deviance loss (:data:`HEAD`)."""
    real = Config.from_profile("real")
    return {FLOOR: real.replace(method="pretrained"), ZSML: real_zsml(real),
            HEAD: real.replace(**cml_method("cub200", "binomial", "baseline"))}


def every_image_config() -> Config:
    """The chapter's headline ZSML runs (:data:`EVERY`): the same training as the :data:`ZSML` row, scored by ranking
    every unseen image (:data:`zslib.methods.zsml.method.EVERY_UNSEEN_IMAGE`), beside the cosine of its input
    features."""
    return real_zsml(**EVERY_UNSEEN_IMAGE)
