"""The JRD chapters' protocol (Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020; ``chu2020jrd``): the named
configs, seeds and grids that the chapters, the comparison across methods, the deviations table and the
fine-tuning campaign read from here.

* :func:`jrd`: AM-Softmax with JRD's regularizer (Eq. 11) on any base config;
* :func:`real_configs`: the headline rows on the real profile, by name (AM-Softmax alone and JRD at the paper's
  alpha = 1); the deviations table describes :data:`JRD`;
* the seeds and weights of the sweeps (Figs. 4-6, Tables 2-4) and of the choices on validation classes.
"""
from __future__ import annotations

from zslib.engine.config import Config
from zslib.methods.jrd.method import jrd_method

__all__ = ["AM_SOFTMAX", "JRD", "VALIDATION", "SWEEP_SEEDS", "SWEEP_ALPHAS", "KERNEL_SEEDS", "KERNEL_ALPHAS",
           "MIXTURE_SEEDS", "MIXTURES", "GRID_SIZES", "GRID_SEEDS", "BOUND_SEEDS", "VALIDATION_ALPHAS", "RULE_SEEDS",
           "jrd", "real_configs"]

#: The names of the headline rows (:func:`real_configs`).
AM_SOFTMAX, JRD = "AM-Softmax", "JRD"

#: The share of the seen classes held out as validation classes (class-disjoint).
VALIDATION = 0.3

SWEEP_SEEDS = (0, 1, 2, 3, 4)
#: Every weight that labels a tick of Figs. 4 and 5.
SWEEP_ALPHAS = (0.05, 0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0, 2.0)
KERNEL_SEEDS = (0, 1, 2)
#: Searched on validation classes; the paper's Table 4 uses 1 and 1e-3.
KERNEL_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0)
MIXTURE_SEEDS = (0, 1, 2, 3, 4)
#: (K, K'): Gaussians of the pooling and of the embedding layer.
MIXTURES = ((1, 1), (2, 2), (3, 3), (5, 5))
#: K (pooling) and K' (embedding) of the whole Fig. 6 grid.
GRID_SIZES = (1, 3, 5)
GRID_SEEDS = (0, 1, 2, 3, 4)
BOUND_SEEDS = (0, 1, 2, 3, 4)
#: The paper's alpha and one larger candidate, compared on validation classes.
VALIDATION_ALPHAS = (1.0, 4.0)
#: The seeds of the choice rule over alpha (the first three of the real profile's, as everywhere in the book).
RULE_SEEDS = (0, 1, 2)


def jrd(config: Config, **params) -> Config:
    """``config`` with AM-Softmax and JRD's regularizer at the paper's CUB settings (:func:`jrd_method`), ``params``
    (``alpha``, ``variant``, ``kernel``, ...) changed."""
    return config.replace(**jrd_method("cub200", **params))


def real_configs() -> dict[str, Config]:
    """The headline rows on the real profile, by name: AM-Softmax alone (:data:`AM_SOFTMAX`, alpha = 0) and JRD at
    the paper's alpha = 1 (:data:`JRD`)."""
    real = Config.from_profile("real")
    return {AM_SOFTMAX: jrd(real, alpha=0.0), JRD: jrd(real, alpha=1.0)}
