"""The Adapt-Adv chapters' protocol (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): the named configs, seeds, grids and choice sets that the chapters, the comparison across
methods, the deviations table and the fine-tuning campaign all read from here.

* :func:`real_configs`: the recorded real-profile rows of the paper's Table 6 analogue, by name;
* :func:`adapt_adv`: Adapt-Adv on any base config at the real profile's settings (:data:`REAL_ADAPT`);
* :data:`LAMBDA0S`: the adversary weights the paper searches (Sec. 5.4.2, Fig. 14); :data:`VALIDATION_SEEDS` and
  :data:`VALIDATION_FRACTION`: every choice on validation classes; :data:`EC_CHOICES`, :data:`PROXY_LRS`: the Table 5 grids;
* :func:`quick_adapt`, :func:`quick_ablation`, :func:`quick_lambda0`: the quick profile's Table 6 rows and its
  one more lambda0;
* :func:`stopping_grid`, :func:`lambda0_grid`, :func:`table5_bases`, :func:`proxy_rate_grid`, :func:`energy_grid`,
  :func:`table5_adapt_adv`: the real profile's choices on validation classes and the Table 5 rows;
* :func:`step_rule`, :func:`lambda0_rule`, :func:`choice_on_validation`, :func:`shown_setting`: the book's one
  choice rule (:func:`zslib.engine.choice.choose`) as each of those choices applies it;
* :func:`full_config`: the full profile's Adapt-Adv; :data:`COMPARISON` (built on :func:`compared`): the comparison
  across methods; :func:`campaign_plan`: the fine-tuning campaign.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace

from zslib.analysis.entry import Claim, Entry
from zslib.campaign.plan import MethodPlan, Recipe
from zslib.engine.choice import OFF, VALIDATION_FRACTION, Choice, choose
from zslib.engine.config import Config
from zslib.engine.profile import PROFILES
from zslib.methods.adapt_adv.method import PAPER_TRIPLET
from zslib.methods.cml.method import cml_method

__all__ = ["FLOOR", "BASE", "GDFL", "METHOD", "REAL_ADAPT", "LAMBDA0S", "EC_CHOICES",
           "PROXY_LRS", "FLOOR_SEEDS", "TABLE5_LOSSES", "GRADCAM_LOSSES", "COMPARED", "COMPARISON",
           "adapt_adv", "triplet_base", "real_configs", "quick_adapt", "quick_ablation",
           "quick_lambda0", "stopping_grid", "stopped", "lambda0_grid", "at_lambda0", "table5_bases",
           "proxy_rate_grid", "energy_grid", "table5_adapt_adv", "on_validation", "step_rule", "lambda0_rule",
           "choice_on_validation", "shown_setting", "full_config", "compared", "campaign_plan"]

#: The names of the real-profile rows (:func:`real_configs`), as the chapter's tables print them.
FLOOR, BASE, GDFL, METHOD = ("pretrained features, no training", "triplet base", "triplet +GDFL",
                             "triplet Adapt-Adv")

#: Adapt-Adv's two settings on the real profile that the paper does not give (not chosen on validation classes).
REAL_ADAPT = {"classifier_lr": 1e-3, "epoch_steps": 20}

#: The adversary's weights lambda0 of Eq. 22 that the paper searches (Sec. 5.4.2, Fig. 14).
LAMBDA0S = (0.1, 0.5, 1.0)

#: Table 5: the candidates of the Energy weight lambda1 per loss and CML's scaling of it.
EC_CHOICES = {"Triplet": ((0.2, 2.0, 20.0), "paper"), "Angular": ((0.01, 0.1, 1.0), "mean"),
              "Proxy-NCA": ((0.01, 0.1, 1.0), "mean")}

#: Proxy-NCA's proxies' learning rate, Table 2's {0.01, 0.15, 0.02} read as 0.015.
PROXY_LRS = (0.01, 0.015, 0.02)

#: The seeds of the untrained features' row: one run, nothing in it is random.
FLOOR_SEEDS = (0,)

#: The losses of the Table 5 rows, in the paper's order.
TABLE5_LOSSES = ("Triplet", "Angular", "Proxy-NCA")

#: The losses whose base and Adapt-Adv Grad-CAM explains on real flowers: the records' short name -> its Table 5 rows.
GRADCAM_LOSSES = {"angular": "Angular", "triplet": "Triplet"}

#: The comparison across methods (:mod:`zslib.analysis.compare`): its candidates as ``(lambda0, adversary)``, the
#: attention alone (+GDFL) first.
COMPARED = {"+GDFL (no adversary)": (0.5, False), **{f"lambda0 {v:g}": (v, True) for v in LAMBDA0S}}



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


def quick_lambda0() -> dict[str, Config]:
    """The quick profile's one more :math:`\\lambda_0` of the Fig. 14 analogue: 0.1 (0 is +GDFL and 0.5 Adapt-Adv
    of :func:`quick_ablation`; 1 would cost three more runs)."""
    return {"lambda0 0.1": quick_adapt(lambda0=0.1)}


def full_config() -> Config:
    """The full profile's Adapt-Adv, the nearest to the paper's setting: the paper's triplet loss
    (:data:`~zslib.methods.adapt_adv.method.PAPER_TRIPLET`), lambda0 0.5 and additive attention (Eq. 11)."""
    return Config.from_profile("full", method="adapt_adv", loss="triplet", loss_params=PAPER_TRIPLET,
                               method_params={"lambda0": 0.5, "form": "additive"})


# ------------------------------------------------------------------------ the real profile's choices and Table 5


def on_validation(config: Config) -> Config:
    """``config`` with :data:`VALIDATION_FRACTION` of the seen classes held out: the runs every choice reads."""
    return config.replace(validation_fraction=VALIDATION_FRACTION)


def stopping_grid() -> dict[str, Config]:
    """The training length's choice on validation classes: the triplet base and Adapt-Adv, over :data:`VALIDATION_SEEDS`."""
    configs = real_configs()
    return {name: on_validation(configs[name]) for name in (BASE, METHOD)}


def stopped(length: int) -> Config:
    """Adapt-Adv (:data:`METHOD`) trained for ``length`` steps on all seen classes."""
    return real_configs()[METHOD].replace(iterations=length)


def lambda0_grid() -> dict[float, Config]:
    """The :math:`\\lambda_0` choice on validation classes: 0.0 is +GDFL (the adversary off), then every value of
    :data:`LAMBDA0S`."""
    configs = real_configs()
    val_aa = on_validation(configs[METHOD])
    grid = {0.0: on_validation(configs[GDFL])}
    grid.update({lam: val_aa.replace(method_params={**REAL_ADAPT, "lambda0": lam}) for lam in LAMBDA0S})
    return grid


def at_lambda0(length: int, lambda0: float) -> Config:
    """Adapt-Adv trained for ``length`` steps at ``lambda0`` on all seen classes."""
    return real_configs()[METHOD].replace(iterations=length, method_params={**REAL_ADAPT, "lambda0": lambda0})


def table5_bases() -> dict[str, Config]:
    """The three losses of Table 5 on the triplet base's recipe: Triplet, Angular (alpha 45 degrees) and Proxy-NCA
    (its proxies at the head's rate until :func:`proxy_rate_grid`'s choice sets their own)."""
    base = real_configs()[BASE]
    return {"Triplet": base, "Angular": base.replace(loss="angular", loss_params={"alpha": 45.0}),
            "Proxy-NCA": base.replace(loss="proxy_nca", loss_params={})}


def proxy_rate_grid(proxy_nca: Config) -> dict[float, Config]:
    """Proxy-NCA's proxies' own learning rate over :data:`PROXY_LRS` ("off": ``proxy_nca``, no rate of their own)."""
    return {lr: proxy_nca.replace(objective_lr=lr) for lr in PROXY_LRS}


def energy_grid(loss_base: Config, loss: str) -> dict[float, Config]:
    """CML's Energy term (lambda1 of its Eq. 11, lambda2 0) on ``loss_base`` over the candidates of
    :data:`EC_CHOICES` for ``loss``, at its scaling ("off": ``loss_base``, lambda1 = 0)."""
    values, scale = EC_CHOICES[loss]
    return {v: loss_base.replace(method="cml", method_params={"lambda1": v, "lambda2": 0.0, "scale": scale})
            for v in values}


def table5_adapt_adv(loss_base: Config, length: int) -> Config:
    """The Table 5 Adapt-Adv row of a loss: ``loss_base`` with Adapt-Adv at :data:`REAL_ADAPT`, trained ``length``
    steps (the length chosen on the triplet loss's validation runs)."""
    return loss_base.replace(method="adapt_adv", method_params=REAL_ADAPT, iterations=length)


def _val_curve(run) -> dict:
    return dict(zip(*run.history.metric_curve("val", "R@1")))


def _read_as(runs: Sequence, value_of: Callable) -> list:
    """``runs`` as candidates of :func:`zslib.engine.choice.choose` whose metric is ``value_of(run)`` (a value read
    off each run, e.g. at one step of its validation curve); seeds and divergence are the runs' own."""
    return [SimpleNamespace(config=r.config, diverged=getattr(r, "diverged", None),
                            metric=lambda name, split, v=value_of(r): v) for r in runs]


def step_rule(val_runs: Sequence) -> Choice:
    """The book's one choice rule applied to a training length: every evaluated step of the validation curves is a
    candidate, scored by the validation Recall@1 each seed had there, and step 0 (no training: the head at
    initialisation, as the runs evaluated it before the first update) is "off"."""
    steps = sorted(_val_curve(val_runs[0]))
    if not steps or steps[0] != 0:
        raise ValueError("the validation curves do not record step 0 (no training), the 'off' of a length choice")
    return choose({s: _read_as(val_runs, lambda r, s=s: _val_curve(r)[s]) for s in steps}, off=0)


def lambda0_rule(at: Mapping, lam_runs: Mapping) -> Choice:
    """The book's one choice rule over the lambda0 values (Eq. 22), read at the length the chapter reads Adapt-Adv at
    (``at``: lambda0 -> {seed: validation R@1}), with lambda0 = 0 (+GDFL, the adversary off) as "off"."""
    def at_step(lam):
        return _read_as(lam_runs[lam], lambda r: at[lam][r.config.seed])

    return choose({OFF: at_step(0.0), **{lam: at_step(lam) for lam in LAMBDA0S}})


def choice_on_validation(runs: Mapping) -> Choice:
    """The book's one choice rule over a validation grid's runs (``{OFF: runs, setting: runs, ...}``)."""
    return choose(dict(runs))


def shown_setting(choice: Choice):
    """The setting the Table 5 rows are trained at: the rule's choice, or, when the rule keeps "off", the best other
    candidate by mean (its rows are then an ablation)."""
    if not choice.off_won:
        return choice.chosen
    others = [k for k in choice.means if k != choice.off and k not in choice.diverged]
    return max(others, key=lambda k: choice.means[k].mean)


# ------------------------------------------------------------------------ the comparison and the campaign


def compared(base: Config, setting: tuple | None = None) -> Config:
    """The comparison's Adapt-Adv on ``base`` (a regime's config): its triplet base with no ``setting``, else the
    candidate ``(lambda0, adversary)`` of :data:`COMPARED`."""
    if setting is None:
        return triplet_base(base)
    lambda0, adversary = setting
    return adapt_adv(base, adversary=adversary, lambda0=lambda0)


#: The parts each row of the paper's Table 6 runs, and the parameters it does not state for that row (the paper picks
#: lambda0 from {0.1, 0.5, 1} without saying which one a row used).
_TABLE6 = {"Triplet / +GDFL": ({"use_gdfl": True, "use_adversary": False}, ()),
           "Triplet / +Adv": ({"use_gdfl": False, "use_adversary": True}, ("lambda0",)),
           "Triplet / Adapt-Adv": ({"use_gdfl": True, "use_adversary": True}, ("lambda0",))}


def _table6(row: str) -> Claim:
    setting, unstated = _TABLE6[row]
    return Claim("alkaabi2022adaptadv", ("6", row, "R@1"), ("6", "Triplet / Base", "R@1"), "Flowers-102", setting,
                 unstated)


def _claim(label: str) -> Claim:
    return _table6("Triplet / +GDFL" if label.startswith("+GDFL") else "Triplet / Adapt-Adv")


def _parts(label: str) -> str:
    if label.startswith("+GDFL"):
        return "GDFL attention, adversary off"
    return f"GDFL attention and class adversary, {label.replace(' ', ' = ')}"


#: Adapt-Adv in the one-protocol comparison (:mod:`zslib.analysis.compare`): the attention alone, or with the
#: adversary at each lambda0 of :data:`LAMBDA0S` (:data:`COMPARED`), against the paper's Table 6.
COMPARISON = Entry("triplet", "attention alone, or with the adversary at lambda0", compared, dict(COMPARED),
                   claims=_claim, parts=_parts, quick=("lambda0 0.5",),
                   adapted=("+GDFL (no adversary)", "lambda0 0.1"))


def campaign_plan(recipe: Recipe) -> MethodPlan:
    """The fine-tuning campaign's Adapt-Adv on its recipe: the triplet loss and the method's declared settings;
    the candidates are the attention alone (GDFL), the class adversary alone, and both (the method), the adversary
    at the method's default lambda0 0.5, the middle of the paper's {0.1, 0.5, 1}. Its smoke run shrinks the
    classifier's hidden layer."""
    base = {"loss": "triplet", "method": "adapt_adv", "method_params": {}}
    candidates = {"+GDFL (no adversary)": {"use_gdfl": True, "use_adversary": False},
                  "+adversary (no GDFL)": {"use_gdfl": False, "use_adversary": True},
                  "GDFL + adversary": {"use_gdfl": True, "use_adversary": True}}
    rows = {"+GDFL (no adversary)": ("Triplet / +GDFL", "GDFL attention, adversary off"),
            "+adversary (no GDFL)": ("Triplet / +Adv", "class adversary (lambda0 = 0.5), attention off"),
            "GDFL + adversary": ("Triplet / Adapt-Adv", "GDFL attention and class adversary (lambda0 = 0.5)")}

    def claims(label):  # Table 6: each part on Flowers-102 with the triplet loss, against its Base row
        return _table6(rows[label][0])

    return MethodPlan("adapt_adv", base, "the parts (GDFL attention, Sec. 3.1; the class adversary at lambda0 0.5, "
                      "Eq. 22)", candidates, smoke_params={"hidden": 16}, claims=claims,
                      parts=lambda label: rows[label][1])
