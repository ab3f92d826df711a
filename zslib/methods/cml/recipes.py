"""The CML chapters' protocol (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): the named configs, seeds,
grids that the chapters, the comparison across methods, the deviations table and the
fine-tuning campaign read from here.

* :func:`real_cml`: the paper's loss, and CML with weights, on any base config;
* :func:`real_sweep_grid`: the weights searched on validation classes (:data:`REAL_WEIGHTS`,
  :func:`validation_seeds`), chosen by the book's one rule (:func:`rule_choices`, :func:`choose_weights`,
  :func:`ablations`);
* :func:`real_test_grid`: the test rows at the chosen weights; :func:`floor_config`: the untrained features;
  :func:`chapter_config`: the run the deviations table describes;
* :func:`quick_grid`: the chapter's grid of losses and variants on the active profile;
* the experiments page (``book/cml_experiments.ipynb``): :func:`experiments_base`, the validation sweep of the
  weights :func:`sweep_grid` (:data:`SWEEP_WEIGHTS`) chosen by the same rule (:func:`sweep_choices`,
  :func:`tested_weight`), the curve runs :func:`curve_grid`, the probes' settings :data:`PROBE`;
* the ablations page (``book/cml_ablations.ipynb``): :func:`ablation_setting`, :func:`ablation_variant`,
  :func:`dropout_grid` (:data:`DROPOUT_RATES`), :func:`size_grid` and the t-SNE's subset :data:`TSNE`;
* beyond its chapters: :data:`COMPARISON`, CML in the comparison across methods, and :func:`campaign_plan`, CML in
  the fine-tuning campaign.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from zslib.analysis.entry import Claim, Entry
from zslib.campaign.plan import MethodPlan, Recipe
from zslib.engine.choice import OFF, VALIDATION_FRACTION, choose
from zslib.engine.config import Config
from zslib.methods.cml.method import CML_PRESETS, cml_method, cml_preset, with_confusion

__all__ = ["REAL_LOSSES", "REAL_WEIGHTS", "VARIANT_TERMS", "VARIANTS", "GREEK", "real_cml",
           "real_sweep_grid", "real_test_grid", "floor_config", "chapter_config", "rule_choices",
           "choose_weights", "ablations", "quick_grid", "tested_weight", "SWEEP_WEIGHTS", "SWEEP_OFF", "CURVE_EVALS",
           "PROBE", "DROPOUT_RATES", "TSNE", "experiments_base", "sweep_grid", "sweep_choices", "curve_base",
           "curve_grid", "AblationSetting", "ablation_setting", "ablation_variant", "dropout_grid", "size_grid",
           "COMPARISON", "campaign_plan"]

#: The paper's three metric losses (Eqs. 12-14) in the order of its tables.
REAL_LOSSES = ("triplet", "npair", "binomial")

#: The weights searched on validation classes for the real profile: lambda1 (CML-e, Eq. 3) and lambda2 (CML-d,
#: Eq. 10) of Eq. 11, each a decade grid.
REAL_WEIGHTS = {"lambda1": (0.2, 2.0, 20.0), "lambda2": (0.1, 1.0, 10.0)}

#: Which weights each CML variant uses (Eq. 11): CML-e only lambda1, CML-d only lambda2, CML both.
VARIANT_TERMS = {"cml-e": ("lambda1",), "cml-d": ("lambda2",), "cml": ("lambda1", "lambda2")}

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


def real_sweep_grid(base: Config | None = None) -> dict:
    """``{(loss, term, weight): config}``: for every loss the loss alone (``term`` ``"none"``, weight 0) and CML-e
    and CML-d at each weight of :data:`REAL_WEIGHTS`, on ``base`` (default: the real profile) with
    :data:`~zslib.engine.choice.VALIDATION_FRACTION` of the seen classes held out as validation classes."""
    val = (base or Config.from_profile("real")).replace(validation_fraction=VALIDATION_FRACTION)
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
    return {key: tested_weight(choice) for key, choice in rule_choices(sweep).items()}


def tested_weight(choice) -> float:
    """The weight a page trains after the rule's ``choice`` (:class:`zslib.engine.choice.Choice`): the chosen one,
    or where the rule kept "off", the candidate other than "off" with the best mean validation score (the first
    listed wins a tie), whose runs are then an ablation."""
    if not choice.off_won:
        return choice.chosen
    weights = [k for k in choice.means if k != choice.off]
    return max(weights, key=lambda w: choice.means[w].mean)


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


# ------------------------------------------------------------------------------- the experiments page (quick, full)

#: The experiments page's validation sweep (Tables VII-VIII analogue, triplet loss): ``{term: weights}`` on the
#: paper's scale. ``lambda1 = 0`` is "off", the triplet loss alone; 0.02 and 0.01 are the paper's CUB weights for the
#: triplet loss (Table IV caption), and the grid goes up by 100 for lambda1 and by ten for lambda2.
SWEEP_WEIGHTS = {"lambda1": (0.0, 0.02, 2.0), "lambda2": (0.01, 0.1, 1.0)}

#: The key of the sweep's switched-off run (no confusion): the candidate "off" of both choices.
SWEEP_OFF = ("lambda1", 0.0)

#: How many evaluations along training the curve runs make (the paper's Fig. 3 analogue).
CURVE_EVALS = 4

#: The linear attribute probes of the experiments page: class-disjoint folds, the inverse regularization and the
#: images per class (10 are plenty for class-level attributes).
PROBE = {"folds": 5, "C": 0.1, "max_per_group": 10}


def experiments_base(profile) -> Config:
    """The experiments page's triplet run on ``profile``: the profile's own recipe with one evaluation at the end
    and the raw (not normalized) features the confusion terms see; on the full profile the paper's CUB training
    settings for the triplet loss (Sec. IV-A)."""
    if profile.name != "full":
        return Config.from_profile(profile, eval_every=profile.iterations, normalize=False, loss="triplet")
    return Config.from_profile(profile, **cml_preset(profile.dataset, "triplet", "baseline"))


def sweep_grid(profile) -> dict:
    """``{(term, weight): Config}``: :func:`experiments_base` with :data:`VALIDATION_FRACTION` of the seen classes held out,
    at each weight of :data:`SWEEP_WEIGHTS` (the other weight 0); ``SWEEP_OFF`` is the loss alone."""
    val = experiments_base(profile).replace(validation_fraction=VALIDATION_FRACTION)
    return {(term, w): with_confusion(val, **{term: w}) for term, weights in SWEEP_WEIGHTS.items() for w in weights}


def sweep_choices(sweep: Mapping) -> dict:
    """``{term: Choice}``: the book's one rule (:func:`zslib.engine.choice.choose`) for each weight of the sweep
    (the runs of :func:`sweep_grid`), with the loss alone (:data:`SWEEP_OFF`) as "off" and every other weight of
    that term as a candidate, on the validation classes."""
    out = {}
    for term in SWEEP_WEIGHTS:
        candidates = {OFF: sweep[SWEEP_OFF]}
        candidates.update({w: rs for (t, w), rs in sweep.items() if t == term and (t, w) != SWEEP_OFF})
        out[term] = choose(candidates)
    return out


def curve_base(profile) -> Config:
    """:func:`experiments_base` evaluated :data:`CURVE_EVALS` times along training (the curves of Fig. 3)."""
    base = experiments_base(profile)
    return base.replace(eval_every=max(1, base.iterations // CURVE_EVALS))


def curve_grid(profile, lambda2: float) -> dict:
    """``{"baseline": Config, "CML-d": Config}``: the curve runs, the loss alone and CML-d at ``lambda2``."""
    base = curve_base(profile)
    return {"baseline": with_confusion(base), "CML-d": with_confusion(base, lambda2=lambda2)}


# ------------------------------------------------------------------------------- the ablations page (quick, full)

#: The dropout rates before the embedding layer of Table VI.
DROPOUT_RATES = (0.1, 0.25, 0.4)

#: The t-SNE maps of Figs. 4-5: the first ``classes`` unseen classes (on SynthParts, the classes of the first
#: ``colour_pairs`` shortcut colour pairs), ``per_class`` images each, t-SNE with ``perplexity`` and ``seed``.
TSNE = {"classes": 20, "colour_pairs": 4, "per_class": 20, "perplexity": 20, "seed": 0}


class AblationSetting(NamedTuple):
    """The ablations' setting on a profile: the paper's weights of ``dataset`` and ``loss``, the ``base`` config
    and the embedding ``sizes`` of Table IX."""

    dataset: str
    loss: str
    base: Config
    sizes: tuple


def ablation_setting(profile) -> AblationSetting:
    """The quick profile keeps its recipe with the triplet loss and the paper's CUB weights, one evaluation at the
    end, sizes 16, 64 and 128; the full profile is the paper's Table VI / IX setting: CARS, the binomial loss, its
    training recipe, ten evaluations, sizes 128 to 512."""
    if profile.name != "full":
        return AblationSetting("cub200", "triplet", Config.from_profile(profile, eval_every=profile.iterations),
                               (16, 64, 128))
    base = Config.from_profile(profile, dataset="cars196", **cml_preset("cars196", "binomial", "baseline"))
    return AblationSetting("cars196", "binomial", base.replace(eval_every=base.iterations // 10),
                           (128, 256, 384, 512))


def ablation_variant(setting: AblationSetting, name: str, **changes) -> Config:
    """``baseline`` / ``cml-e`` / ``cml-d`` / ``cml`` of ``setting`` with the paper's weights, and ``changes``
    (dropout, embedding size) on top."""
    return setting.base.replace(**cml_method(setting.dataset, setting.loss, name), **changes)


def dropout_grid(setting: AblationSetting) -> dict:
    """Table VI's seven configurations: the baseline, the baseline with each of :data:`DROPOUT_RATES` before the
    embedding layer, CML-e, CML-d and CML."""
    grid = {"baseline": ablation_variant(setting, "baseline")}
    grid.update({f"dropout {p}": ablation_variant(setting, "baseline", dropout=p) for p in DROPOUT_RATES})
    grid.update({v: ablation_variant(setting, v) for v in ("cml-e", "cml-d", "cml")})
    return grid


def size_grid(setting: AblationSetting) -> dict:
    """Table IX's grid: ``{(name, size): Config}`` of the baseline and CML at each embedding size."""
    return {(name, d): ablation_variant(setting, name, embedding_dim=d) for name in ("baseline", "cml")
            for d in setting.sizes}


# ---- beyond the chapters: the comparison across methods and the fine-tuning campaign -----------------------------

#: The paper's weights of Eq. 11 with the triplet loss on CUB-200 (lambda1, lambda2), from its preset.
_PAPER_WEIGHTS = tuple(cml_preset("cub200", "triplet")["method_params"][k] for k in ("lambda1", "lambda2"))
#: The paper's rows of each confusion term alone (Eq. 11; Table IV, the triplet loss on CUB-200, at the paper's
#: weights): lambda1 alone is CML-e, lambda2 alone CML-d.
_CLAIMS = {"lambda1": Claim("chen2022cml", ("IV", "CML-e (Tri)", "R@1"), ("IV", "Triplet", "R@1"), "CUB-200",
                            {"lambda1": _PAPER_WEIGHTS[0], "lambda2": 0.0}),
           "lambda2": Claim("chen2022cml", ("IV", "CML-d (Tri)", "R@1"), ("IV", "Triplet", "R@1"), "CUB-200",
                            {"lambda1": 0.0, "lambda2": _PAPER_WEIGHTS[1]})}
_PARTS = {"lambda1": "CML-e, energy confusion alone", "lambda2": "CML-d, diversity confusion alone"}


def _compared(base: Config, weights: tuple[float, float] | None) -> Config:
    """The comparison's CML: the triplet loss of Eq. 12 alone (``None``) or with ``(lambda1, lambda2)``."""
    return real_cml(base, "triplet") if weights is None else real_cml(base, "triplet", *weights)


#: CML in the one-protocol comparison (:mod:`zslib.analysis.compare`): one confusion term at a time at each weight
#: of :data:`REAL_WEIGHTS`, with the triplet loss.
COMPARISON = Entry(
    "triplet", "confusion weights (lambda1, lambda2)", _compared,
    {f"{term} {w:g}": (w, 0.0) if term == "lambda1" else (0.0, w) for term, ws in REAL_WEIGHTS.items() for w in ws},
    claims=lambda label: _CLAIMS[label.split()[0]],
    parts=lambda label: _PARTS[label.split()[0]] + f", {label.replace(' ', ' = ')}",
    quick=("lambda1 0.2",), adapted=("lambda1 0.2",), val_seeds={"real frozen": 10})


def campaign_plan(recipe: Recipe) -> MethodPlan:
    """CML in the fine-tuning campaign: the triplet loss at the paper's settings for the dataset (CUB-200's where
    the paper has none), and the two weights of Eq. 11 one at a time (CML-e, CML-d) and together (CML), at the
    paper's values."""
    d = recipe.dataset if recipe.dataset in CML_PRESETS else "cub200"
    base = cml_preset(d, "triplet") if recipe.papers_presets else cml_method(d, "triplet")
    l1, l2 = base["method_params"]["lambda1"], base["method_params"]["lambda2"]
    cands = {f"EC lambda1={l1:g}": {"lambda1": l1, "lambda2": 0.0},
             f"DC lambda2={l2:g}": {"lambda1": 0.0, "lambda2": l2},
             f"EC+DC ({l1:g}, {l2:g})": {"lambda1": l1, "lambda2": l2}}
    rows = {f"EC lambda1={l1:g}": ("CML-e (Tri)", "CML-e, energy confusion alone"),
            f"DC lambda2={l2:g}": ("CML-d (Tri)", "CML-d, diversity confusion alone"),
            f"EC+DC ({l1:g}, {l2:g})": ("CML (Tri)", "CML, energy and diversity confusion")}

    def claims(label):  # Table IV: the triplet loss on CUB-200 at the paper's weights
        paper = {"CML-e (Tri)": (_PAPER_WEIGHTS[0], 0.0), "CML-d (Tri)": (0.0, _PAPER_WEIGHTS[1])}.get(
            rows[label][0], _PAPER_WEIGHTS)
        return Claim("chen2022cml", ("IV", rows[label][0], "R@1"), ("IV", "Triplet", "R@1"), "CUB-200",
                     {"lambda1": paper[0], "lambda2": paper[1]})

    return MethodPlan("cml", base, f"the confusion terms (lambda1, lambda2 of Eq. 11; the paper's {l1:g}, {l2:g})",
                      cands, claims=claims, parts=lambda label: f"{rows[label][1]}, {label}")
