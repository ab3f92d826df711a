"""The DeML chapters' protocol (Chen and Deng, CVPR 2019; ``chen2019deml``): the named configs, seeds and grids
that the chapters, the comparison across methods, the deviations table and the fine-tuning campaign read from here.

* :func:`real_configs`: the recorded real-profile rows, by name; :func:`real_arm_configs`: the two extra arms;
* :func:`deml` and :func:`binomial_base`: DeML(1, J) and its baseline head on any base config;
* :data:`LAMBDA0S` and :data:`~zslib.engine.choice.VALIDATION_SEEDS`: the adversary weights compared on validation classes;
* :data:`QUICK_ARMS` and :func:`quick_grid`: the quick experiment (Tables 1, 2 and 4 in miniature);
* :func:`full_config`: the paper's headline DeML(3, 3) on CUB for the full profile;
* :data:`COMPARISON` and :func:`campaign_plan`: DeML in the comparison across methods and in the fine-tuning
  campaign.
"""
from __future__ import annotations

from zslib.analysis.entry import Claim, Entry
from zslib.campaign.plan import MethodPlan, Recipe
from zslib.engine.config import Config
from zslib.methods.deml.method import DEML_TRAINING

__all__ = ["FLOOR", "BASE", "DEML4", "DEML8", "HINGE", "LAMBDA0S", "QUICK_ARMS",
           "binomial_base", "deml", "real_configs", "real_arm_configs", "quick_grid", "full_config",
           "COMPARISON", "campaign_plan"]

#: The names of the real-profile rows (:func:`real_configs`, :func:`real_arm_configs`).
FLOOR, BASE, DEML4, DEML8, HINGE = "pretrained", "baseline", "DeML(1,4)", "DeML(1,8)", "DeML(1,4), hinge"

#: The adversary's weights lambda0 of Eq. 4 compared on validation classes: the paper's 1 and a tenth of it.
LAMBDA0S = (0.1, 1.0)

#: The quick experiment's arms: ``method_params`` of ``method="deml"`` (Tables 1, 2 and 4 in miniature).
QUICK_ARMS = {
    "U_d": {"cam": False, "lambda1": 0.0, "lambda2": 0.0},
    "U_d + L_act": {"cam": False},
    "DeML(1,4)": {"learners": 4},
    "DeML(1,4) no L_adv": {"learners": 4, "adversary": "none"},
}


def binomial_base(base: Config) -> Config:
    """``base`` with the decoupled binomial loss of Eq. 5 and no method: the baseline head DeML is compared with."""
    return base.replace(loss="binomial_deml", method="baseline", method_params={})


def deml(base: Config, learners: int = 4, lambda0: float = 1.0, **params) -> Config:
    """DeML(1, ``learners``) with the loss of Eq. 5 and the adversary at ``lambda0`` (the paper's 1) on ``base``;
    ``params``: more method parameters."""
    return base.replace(loss="binomial_deml", method="deml",
                        method_params={"learners": learners, "lambda0": lambda0, **params})


def real_configs() -> dict[str, Config]:
    """The recorded real-profile rows of the DeML chapter, by name: the untrained features (:data:`FLOOR`), the
    baseline head with Eq. 5's loss (:data:`BASE`), DeML(1, 4) with the paper's weights (:data:`DEML4`, lambda0 = 1)
    and DeML(1, 8) (:data:`DEML8`)."""
    real = Config.from_profile("real")
    return {FLOOR: real.replace(method="pretrained"), BASE: binomial_base(real), DEML4: deml(real, 4),
            DEML8: deml(real, 8)}


def real_arm_configs() -> dict[str, Config]:
    """The two extra real-profile arms: DeML(1, 8) (the paper's largest J, lambda0 = 1) and DeML(1, 4) with the
    released code's hinge in place of the adversary (weight 0.2 per pair of learners)."""
    real = Config.from_profile("real")
    return {DEML8: deml(real, 8), HINGE: deml(real, 4, lambda0=0.2, adversary="hinge")}


def quick_grid(profile) -> dict[str, Config]:
    """``{arm: Config}`` of the quick experiment: the profile's network and steps with Eq. 5's loss
    (``binomial_deml``), evaluated once at the end, ``method="deml"`` with :data:`QUICK_ARMS`; on the full
    profile the paper's training settings (``DEML_TRAINING``, 504 dimensions so that nine learners get 56 each)."""
    base = Config.from_profile(profile, eval_every=profile.iterations, loss="binomial_deml", method="deml")
    if profile.name == "full":
        base = Config.from_profile(profile, **{**DEML_TRAINING, "embedding_dim": 504}, method="deml")
    return {name: base.replace(method_params=p) for name, p in QUICK_ARMS.items()}


def full_config() -> Config:
    """The paper's headline model for the full profile: DeML(3, 3) on CUB with its training settings
    (``DEML_TRAINING``, Sec. 4; 504 dimensions so that the nine learners get 56 each; Table 3)."""
    return Config.from_profile("full", **{**DEML_TRAINING, "embedding_dim": 504}, dataset="cub200",
                               method="deml", method_params={"scales": 3, "learners": 3})


# ---- beyond the chapters: the comparison across methods and the fine-tuning campaign -----------------------------

def _compared(base: Config, lambda0: float | None) -> Config:
    """The comparison's DeML: the baseline head with Eq. 5's loss (``None``) or DeML(1, 4) at ``lambda0``."""
    return binomial_base(base) if lambda0 is None else deml(base, 4, lambda0)


#: DeML in the one-protocol comparison (:mod:`zslib.analysis.compare`): DeML(1, 4) at each adversary weight of
#: :data:`LAMBDA0S`, against the paper's U512 baseline row.
COMPARISON = Entry(
    "binomial_deml", "adversary weight lambda0 of DeML(1,4)", _compared, {f"lambda0 {v:g}": v for v in LAMBDA0S},
    claims=lambda label: Claim("chen2019deml", ("2-CUB200", "DeML(1,4)", "H"), ("1", "U512", "CUB R@1"), "CUB-200",
                               {"scales": 1, "learners": 4, "lambda0": 1.0}),
    parts=lambda label: f"DeML(1,4), attention and adversarial diversification, {label.replace(' ', ' = ')}",
    quick=("lambda0 1",), adapted=("lambda0 1",))


def campaign_plan(recipe: Recipe) -> MethodPlan:
    """DeML in the fine-tuning campaign: Eq. 5's own binomial deviance (alpha 2, beta 0.5, negative cost 35), as in
    the frozen and adapted regimes, and the paper's numbers of channel-attention learners J."""
    base = {"loss": "binomial_deml", "method": "deml", "method_params": {"scales": 1}}
    def claims(label):  # Table 2 (CUB-200): DeML(1, J) against the plain 512-d embedding of Table 1
        return Claim("chen2019deml", ("2-CUB200", f"DeML(1,{label.split('=')[1]})", "H"), ("1", "U512", "CUB R@1"),
                     "CUB-200", {"scales": 1, "learners": int(label.split("=")[1]), "lambda0": 1.0})

    return MethodPlan("deml", base, "J (channel-attention learners)",
                      {"J=4": {"learners": 4}, "J=8": {"learners": 8}}, claims=claims,
                      parts=lambda label: f"DeML(1,{label.split('=')[1]}), attention and adversarial diversification")
