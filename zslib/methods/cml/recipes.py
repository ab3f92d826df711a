"""The CML chapters' protocol (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): the named configs, seeds,
grids that the chapters, the comparison across methods, the deviations table and the
fine-tuning campaign read from here.

* :func:`real_cml`: the paper's loss, and CML with weights, on any base config;
* :func:`real_sweep_grid`: the weights searched on validation classes (:data:`REAL_WEIGHTS`,
  :func:`validation_seeds`), chosen by the book's one rule (:func:`zslib.methods.cml.reports.choose_weights`);
* :func:`real_test_grid`: the test rows at the chosen weights; :func:`chapter_config`: the run the deviations
  table describes.
"""
from __future__ import annotations

from collections.abc import Mapping

from zslib.engine.config import Config
from zslib.engine.profile import PROFILES
from zslib.methods.cml.method import cml_method

__all__ = ["REAL_LOSSES", "REAL_WEIGHTS", "VARIANT_TERMS", "VALIDATION", "real_cml", "validation_seeds",
           "real_sweep_grid", "real_test_grid", "chapter_config"]

#: The paper's three metric losses (Eqs. 12-14) in the order of its tables.
REAL_LOSSES = ("triplet", "npair", "binomial")

#: The weights searched on validation classes for the real profile: lambda1 (CML-e, Eq. 3) and lambda2 (CML-d,
#: Eq. 10) of Eq. 11, each a decade grid.
REAL_WEIGHTS = {"lambda1": (0.2, 2.0, 20.0), "lambda2": (0.1, 1.0, 10.0)}

#: Which weights each CML variant uses (Eq. 11): CML-e only lambda1, CML-d only lambda2, CML both.
VARIANT_TERMS = {"cml-e": ("lambda1",), "cml-d": ("lambda2",), "cml": ("lambda1", "lambda2")}

#: The share of the seen classes held out as validation classes (class-disjoint) when the weights are chosen.
VALIDATION = 0.3


def real_cml(base: Config, loss: str, lambda1: float = 0.0, lambda2: float = 0.0) -> Config:
    """``base`` with the paper's ``loss`` (Eqs. 12-14, ``normalize=False``) and, when a weight is not 0, CML with
    the energy- and diversity-confusion weights ``lambda1`` and ``lambda2`` of Eq. 11."""
    config = base.replace(**cml_method("cub200", loss, "baseline"))
    if lambda1 == 0 and lambda2 == 0:
        return config
    return config.replace(method="cml", method_params={"lambda1": lambda1, "lambda2": lambda2})


def validation_seeds() -> tuple[int, ...]:
    """The seeds the weights are chosen with: the first three of the real profile's."""
    return tuple(PROFILES["real"].seeds[:3])


def real_sweep_grid(base: Config | None = None) -> dict:
    """``{(loss, term, weight): config}``: for every loss the loss alone (``term`` ``"none"``, weight 0) and CML-e
    and CML-d at each weight of :data:`REAL_WEIGHTS`, on ``base`` (default: the real profile) with
    :data:`VALIDATION` of the seen classes held out as validation classes."""
    val = (base or Config.from_profile("real")).replace(validation_fraction=VALIDATION)
    grid = {}
    for loss in REAL_LOSSES:
        grid[loss, "none", 0.0] = real_cml(val, loss)
        for term, weights in REAL_WEIGHTS.items():
            grid.update({(loss, term, w): real_cml(val, loss, **{term: w}) for w in weights})
    return grid


def real_test_grid(chosen: Mapping, base: Config | None = None) -> dict:
    """``{(loss, variant): config}``: the baseline, CML-e, CML-d and CML of every loss on ``base`` (default: the
    real profile, no validation split), with the weights of :func:`choose_weights`."""
    real = base or Config.from_profile("real")
    grid = {}
    for loss in REAL_LOSSES:
        grid[loss, "baseline"] = real_cml(real, loss)
        for variant, terms in VARIANT_TERMS.items():
            grid[loss, variant] = real_cml(real, loss, **{t: chosen[loss, t] for t in terms})
    return grid


def chapter_config() -> Config:
    """The run the deviations table describes: CML (both terms, the first weights of the real sweep) with the
    triplet loss of Eq. 12 on the real profile, as the chapter builds it."""
    return real_cml(Config.from_profile("real"), "triplet", **{t: w[0] for t, w in REAL_WEIGHTS.items()})
