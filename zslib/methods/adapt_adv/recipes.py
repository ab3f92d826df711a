"""The Adapt-Adv chapters' protocol (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): the named configs, seeds, grids and choice sets that the chapters, the comparison across
methods, the deviations table and the fine-tuning campaign all read from here.

* :func:`real_configs`: the recorded real-profile rows of the paper's Table 6 analogue, by name;
* :func:`adapt_adv`: Adapt-Adv on any base config at the real profile's settings (:data:`REAL_ADAPT`);
* :data:`LAMBDA0S`: the adversary weights the paper searches (Sec. 5.4.2, Fig. 14); :data:`VAL_SEEDS` and
  :data:`VALIDATION`: every choice on validation classes; :data:`EC_CHOICES`, :data:`PROXY_LRS`: the Table 5 grids;
* :func:`quick_adapt`, :func:`quick_ablation`: the quick profile's Table 6 rows.
"""
from __future__ import annotations

from zslib.engine.config import Config
from zslib.engine.profile import PROFILES
from zslib.methods.cml.method import cml_method

__all__ = ["FLOOR", "BASE", "GDFL", "METHOD", "REAL_ADAPT", "VAL_SEEDS", "VALIDATION", "LAMBDA0S", "EC_CHOICES",
           "PROXY_LRS", "adapt_adv", "triplet_base", "real_configs", "quick_adapt", "quick_ablation"]

#: The names of the real-profile rows (:func:`real_configs`), as the chapter's tables print them.
FLOOR, BASE, GDFL, METHOD = ("pretrained features, no training", "triplet base", "triplet +GDFL",
                             "triplet Adapt-Adv")

#: Adapt-Adv's two settings on the real profile that the paper does not give (not chosen on validation classes).
REAL_ADAPT = {"classifier_lr": 1e-3, "epoch_steps": 20}

#: Every validation choice of the real profile: seeds 0-2 ...
VAL_SEEDS = (0, 1, 2)

#: ... with 30% of the seen classes held out (class-disjoint).
VALIDATION = 0.3

#: The adversary's weights lambda0 of Eq. 22 that the paper searches (Sec. 5.4.2, Fig. 14).
LAMBDA0S = (0.1, 0.5, 1.0)

#: Table 5: the candidates of the Energy weight lambda1 per loss and CML's scaling of it.
EC_CHOICES = {"Triplet": ((0.2, 2.0, 20.0), "paper"), "Angular": ((0.01, 0.1, 1.0), "mean"),
              "Proxy-NCA": ((0.01, 0.1, 1.0), "mean")}

#: Proxy-NCA's proxies' learning rate, Table 2's {0.01, 0.15, 0.02} read as 0.015.
PROXY_LRS = (0.01, 0.015, 0.02)


def triplet_base(base: Config) -> Config:
    """``base`` with the triplet loss of CML's Eq. 12 and no method: the head Adapt-Adv is compared with (the CML
    chapter's real baseline)."""
    return base.replace(**cml_method("cub200", "triplet", "baseline"))


def adapt_adv(base: Config, *, adversary: bool = True, lambda0: float | None = None) -> Config:
    """Adapt-Adv on the triplet head of ``base`` with the real profile's :data:`REAL_ADAPT`: the GDFL attention and,
    with ``adversary``, the class adversary of Eq. 22 at ``lambda0`` (default: the method's declared one)."""
    params = dict(REAL_ADAPT)
    if not adversary:
        params["use_adversary"] = False
    elif lambda0 is not None:
        params["lambda0"] = lambda0
    return triplet_base(base).replace(method="adapt_adv", method_params=params)


def real_configs() -> dict[str, Config]:
    """The recorded real-profile rows of the Adapt-Adv chapter, by name: the untrained features (:data:`FLOOR`), the
    triplet base head (:data:`BASE`, the CML chapter's real baseline), +GDFL (attention without the adversary,
    :data:`GDFL`) and Adapt-Adv (:data:`METHOD`)."""
    real = Config.from_profile("real")
    return {FLOOR: real.replace(method="pretrained"), BASE: triplet_base(real),
            GDFL: adapt_adv(real, adversary=False), METHOD: adapt_adv(real)}


def quick_adapt(**params) -> Config:
    """Adapt-Adv on the quick profile's recipe (one evaluation at the end) with the method parameters ``params``
    (Sec. 4 of the paper: ``use_gdfl`` the attention over intermediate maps, ``use_adversary`` the class adversary
    of Eq. 22, ``lambda0`` its weight); with no ``params`` the method's defaults, both parts on."""
    quick = PROFILES["quick"]
    return Config.from_profile(quick, eval_every=quick.iterations).replace(method="adapt_adv", method_params=params)


def quick_ablation() -> dict[str, Config]:
    """The quick ablation's configs (the paper's Table 6 rows): the triplet base, +GDFL (attention alone), +Adv
    (the adversary alone) and Adapt-Adv (both), on the quick profile's recipe."""
    base = quick_adapt().replace(method="baseline", method_params={})
    return {"base": base, "+GDFL": quick_adapt(use_adversary=False), "+Adv": quick_adapt(use_gdfl=False),
            "Adapt-Adv": quick_adapt()}
