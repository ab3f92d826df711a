"""The CML chapters' protocol (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): the named configs, seeds,
grids that the chapters, the comparison across methods, the deviations table and the
fine-tuning campaign read from here.

* :func:`real_cml`: the paper's loss, and CML with weights, on any base config;
* :func:`real_sweep_grid`: the weights searched on validation classes (:data:`REAL_WEIGHTS`,
  :func:`validation_seeds`), chosen by the book's one rule (:func:`rule_choices`, :func:`choose_weights`,
  :func:`ablations`);
* :func:`real_test_grid`: the test rows at the chosen weights; :func:`floor_config`: the untrained features;
  :func:`chapter_config`: the run the deviations table describes;
* :func:`quick_grid`: the chapter's grid of losses and variants on the active profile.
"""
from __future__ import annotations

from collections.abc import Mapping

from zslib.engine.choice import OFF, choose
from zslib.engine.config import Config
from zslib.engine.profile import PROFILES
from zslib.methods.cml.method import cml_method, cml_preset

__all__ = ["REAL_LOSSES", "REAL_WEIGHTS", "VARIANT_TERMS", "VARIANTS", "VALIDATION", "GREEK", "real_cml",
           "validation_seeds", "real_sweep_grid", "real_test_grid", "floor_config", "chapter_config", "rule_choices",
           "choose_weights", "ablations", "quick_grid"]

#: The paper's three metric losses (Eqs. 12-14) in the order of its tables.
REAL_LOSSES = ("triplet", "npair", "binomial")

#: The weights searched on validation classes for the real profile: lambda1 (CML-e, Eq. 3) and lambda2 (CML-d,
#: Eq. 10) of Eq. 11, each a decade grid.
REAL_WEIGHTS = {"lambda1": (0.2, 2.0, 20.0), "lambda2": (0.1, 1.0, 10.0)}

#: Which weights each CML variant uses (Eq. 11): CML-e only lambda1, CML-d only lambda2, CML both.
VARIANT_TERMS = {"cml-e": ("lambda1",), "cml-d": ("lambda2",), "cml": ("lambda1", "lambda2")}

#: The share of the seen classes held out as validation classes (class-disjoint) when the weights are chosen.
VALIDATION = 0.3

#: The four rows of each loss (Tables II-V): the loss alone, CML-e (Eq. 3), CML-d (Eq. 10) and CML (Eq. 11).
VARIANTS = ("baseline", "cml-e", "cml-d", "cml")

#: The weights of Eq. 11 as a sentence names them.
GREEK = {"lambda1": "λ1", "lambda2": "λ2"}


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


def floor_config(base: Config | None = None) -> Config:
    """The untrained pretrained features on ``base`` (default: the real profile): the floor every row is read
    against."""
    return (base or Config.from_profile("real")).replace(method="pretrained")


def rule_choices(sweep: Mapping) -> dict:
    """``{(loss, term): Choice}``: the book's one choice rule (:func:`zslib.engine.choice.choose`) applied to each
    loss and confusion term of the validation sweep (the runs of :func:`real_sweep_grid`), with the loss alone
    (weight 0) as "off": a weight is chosen only if its validation Recall@1 is clearly above the loss alone, paired
    by seed."""
    out = {}
    for loss in REAL_LOSSES:
        for term in REAL_WEIGHTS:
            candidates = {OFF: sweep[loss, "none", 0.0]}
            candidates.update({w: rs for (l, t, w), rs in sweep.items() if l == loss and t == term})
            out[loss, term] = choose(candidates)
    return out


def choose_weights(sweep: Mapping) -> dict:
    """``{(loss, term): weight}``: the weight each loss's CML rows train with, through the book's one rule
    (:func:`rule_choices`): the weight the rule chose when it chose one; where the rule keeps the loss alone
    ("off"), the candidate weight with the best mean validation Recall@1, so that the test rows show what the
    method would have done, as ablations (:func:`ablations`). ``sweep``: the runs of :func:`real_sweep_grid`."""
    chosen = {}
    for key, choice in rule_choices(sweep).items():
        if not choice.off_won:
            chosen[key] = choice.chosen
        else:  # "off" kept: the best weight other than 0, tested as an ablation (the first listed wins a tie)
            weights = [k for k in choice.means if k != choice.off]
            chosen[key] = max(weights, key=lambda w: choice.means[w].mean)
    return chosen


def ablations(sweep: Mapping) -> set:
    """The ``(loss, term)`` pairs whose weight the rule did not choose (it kept the loss alone): the CML rows that
    use that term are ablations."""
    return {key for key, choice in rule_choices(sweep).items() if choice.off_won}


def quick_grid(profile) -> dict:
    """``{(loss, variant): Config}``: the chapter's grid on ``profile``, each row the paper's loss with its CUB
    weights (Table IV caption) zeroed as the variant says (:func:`zslib.methods.cml.method.cml_method`). The quick
    profile trains every variant of the triplet loss and the baseline and CML of the other two losses, on its own
    recipe with one evaluation at the end; the real profile every variant of every loss; the full profile the
    same on its dataset with the paper's training settings (Sec. IV-A, binomial)."""
    if profile.name != "full":  # the profile's recipe; one evaluation at the end of each run
        base = Config.from_profile(profile, eval_every=profile.iterations)
        keys = [(l, v) for l in REAL_LOSSES for v in VARIANTS
                if profile.name != "quick" or l == "triplet" or v in ("baseline", "cml")]
    else:  # the paper's training settings (Sec. IV-A) on the full profile's dataset
        base = Config.from_profile(profile, **cml_preset(profile.dataset, "binomial"))
        keys = [(l, v) for l in REAL_LOSSES for v in VARIANTS]
    return {(loss, variant): base.replace(**cml_method("cub200", loss, variant)) for loss, variant in keys}
