"""The ZSML chapters' protocol (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``): the named configs,
seeds and grids that the chapters, the comparison across methods, the deviations table and the fine-tuning
campaign read from here.

* :func:`real_configs`: the recorded real-profile rows, by name; :func:`every_image_config`: the headline runs;
* :func:`real_zsml`: ZSML at the real profile's settings (:data:`REAL_ZSML`) on any base config;
* :func:`quick_grid`: the chapter's quick-profile rows (ZSML and the linear relation on a frozen triplet embedding);
* the seeds and grids of the choices on validation classes, of the ablations, of the Table 9 and 6 analogues and of
  the transfer (``*_grid``), each ``{label: Config}`` as :meth:`zslib.present.base.Study.grid` reads it;
* :data:`COMPARISON` and :func:`campaign_plan`: ZSML in the comparison across methods and in the fine-tuning
  campaign.
"""
from __future__ import annotations

from zslib.analysis.entry import Entry
from zslib.campaign.plan import MethodPlan, Recipe
from zslib.engine.config import Config
from zslib.engine.profile import Profile
from zslib.methods.cml.method import cml_method
from zslib.methods.zsml.method import EVERY_UNSEEN_IMAGE
from zslib.methods.zsml.relation import ZSML_ARCHITECTURE
from zslib.engine.choice import VALIDATION_FRACTION

__all__ = ["FLOOR", "ZSML", "EVERY", "HEAD", "REAL_ZSML", "ABL_SEEDS", "ALPHAS",
           "POS_FRACTIONS", "KS", "CAMPAIGN_ALPHAS", "MR", "LR", "QUICK_ZSML", "LR_200",
           "LR_1000", "S_PAPER", "LIFTED", "real_zsml", "real_configs", "every_image_config", "quick_grid",
           "comparison_grid", "floor_grid", "validation_config", "alpha_choice_grid", "chosen_alpha_grid",
           "share_choice_grid", "share_test_grid", "alpha_ablation_grid", "k_ablation_grid", "nca_grid", "arm_grid",
           "synthparts_grid", "settings_config", "transfer_configs", "COMPARISON",
           "campaign_plan"]

#: The names of the real-profile rows (:func:`real_configs`) and of the headline runs (:func:`every_image_config`).
FLOOR, ZSML, EVERY, HEAD = "pretrained", "ZSML", "ZSML every image", "trained head (binomial deviance)"

#: The real profile's ZSML: the paper's relation kernels, a smaller S, 4 sampled images per class in evaluation.
REAL_ZSML = {"hidden": [256, 256], "eval_per_class": 4}

#: The seeds of the descriptive Table 7 and 8 analogues.
ABL_SEEDS = (0, 1, 2)

#: The label ranges alpha of Eq. 3 compared on validation classes.
ALPHAS = (0.1, 0.3, 0.5)

#: The shares of same-class pairs compared on validation classes (``None``: uniform pairs).
POS_FRACTIONS = (None, 0.1, 0.25, 0.5)

#: The kernel counts k of the Table 7 analogue.
KS = (16, 64, 96, 128)

#: The label ranges alpha the fine-tuning campaign (:mod:`zslib.campaign.plan`) compares; 0.3 is the paper's.
CAMPAIGN_ALPHAS = (0.1, 0.3)

#: The quick profile's rows: ZSML's relation kernels (MR) and the linear relation of Table 9 (LR + Reloss).
MR, LR = "Triplet + ZSML (MR)", "Triplet + LR + Reloss"

#: The quick profile's ZSML: Table 6's setting (the triplet embedding trained first, then frozen), a smaller S,
#: 5 sampled images per class in evaluation.
QUICK_ZSML = {"features": "embedding", "metric_steps": 200, "hidden": [256, 256], "pairs": 20_000,
              "batch_pairs": 128, "eval_per_class": 5}

#: The rows of the Table 9 and 6 analogues (:func:`arm_grid`).
LR_200, LR_1000 = "LR + Reloss, 200 steps", "LR + Reloss, 1,000 steps"
S_PAPER, LIFTED = "ZSML (MR), S (1,000, 1,000)", "Lifted + ZSML"


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


def quick_grid(profile: Profile) -> dict[str, Config]:
    """The chapter's quick rows on ``profile`` (evaluated once, at the end): :data:`MR` and :data:`LR` at
    :data:`QUICK_ZSML`; on the full profile with the paper's S (1,000, 1,000)."""
    params = dict(QUICK_ZSML)
    if profile.name == "full":  # the paper's S sizes; everything else as the quick rows
        params["hidden"] = list(ZSML_ARCHITECTURE["hidden"])
    base = Config.from_profile(profile, eval_every=profile.iterations)
    return {MR: base.replace(method="zsml", method_params=params),
            LR: base.replace(method="zsml", method_params={**params, "relation": "linear"})}


def comparison_grid() -> dict[str, Config]:
    """The chapter's real-profile comparison (seeds :data:`~zslib.engine.choice.TEST_SEEDS`): ZSML on the 4-per-class sample, ZSML
    ranking every unseen image and the trained head."""
    c = real_configs()
    return {ZSML: c[ZSML], EVERY: every_image_config(), HEAD: c[HEAD]}


def floor_grid() -> dict[str, Config]:
    """The untrained pretrained features (one run, seed 0: nothing in it is random)."""
    return {FLOOR: real_configs()[FLOOR]}


def validation_config() -> Config:
    """The real profile with :data:`VALIDATION_FRACTION` of the seen classes held out as validation classes."""
    return Config.from_profile("real").replace(validation_fraction=VALIDATION_FRACTION)


def alpha_choice_grid() -> dict[float, Config]:
    """alpha in :data:`ALPHAS` on validation classes (seeds :data:`~zslib.engine.choice.VALIDATION_SEEDS`)."""
    val = validation_config()
    return {a: real_zsml(val, alpha=a) for a in ALPHAS}


def chosen_alpha_grid(alpha: float) -> dict[float, Config]:
    """ZSML at ``alpha`` on the test classes (seeds :data:`~zslib.engine.choice.TEST_SEEDS`)."""
    return {alpha: real_zsml(alpha=alpha)}


def share_choice_grid(alpha: float) -> dict:
    """The shares of positive pairs :data:`POS_FRACTIONS` at ``alpha`` on validation classes (seeds
    :data:`~zslib.engine.choice.VALIDATION_SEEDS`)."""
    val = validation_config()
    return {f: real_zsml(val, alpha=alpha, positive_fraction=f) for f in POS_FRACTIONS}


def share_test_grid(alpha: float, fraction: float) -> dict:
    """ZSML at ``alpha`` and the share ``fraction`` on the test classes (seeds :data:`~zslib.engine.choice.TEST_SEEDS`)."""
    return {fraction: real_zsml(alpha=alpha, positive_fraction=fraction)}


def alpha_ablation_grid() -> dict[float, Config]:
    """Table 8 analogue: each alpha of :data:`ALPHAS` trained on all seen classes (seeds :data:`ABL_SEEDS`)."""
    return {a: real_zsml(alpha=a) for a in ALPHAS}


def k_ablation_grid() -> dict[int, Config]:
    """Table 7 analogue: the number of relation kernels k in :data:`KS` at alpha 0.3 (seeds :data:`ABL_SEEDS`)."""
    return {k: real_zsml(k=k) for k in KS}


def nca_grid() -> dict[str, Config]:
    """NCA on the same features, scored on the same sample as ZSML (seeds :data:`~zslib.engine.choice.TEST_SEEDS`)."""
    nca = Config.from_profile("real").replace(method="nca",
                                              method_params={"eval_per_class": REAL_ZSML["eval_per_class"]})
    return {"NCA": nca}


def settings_config(alpha: float, positive_fraction: float | None, config: Config | None = None) -> Config:
    """ZSML at the settings of the experiments page's later sections (the best validation alpha and share) on
    ``config`` (default: the real profile)."""
    return real_zsml(config, alpha=alpha, positive_fraction=positive_fraction)


def arm_grid(alpha: float, positive_fraction: float | None) -> dict[str, Config]:
    """Tables 9 and 6 analogues at ``alpha`` and ``positive_fraction`` (seeds :data:`~zslib.engine.choice.TEST_SEEDS`): the linear
    relation for 200 and 1,000 steps, the paper's S (1,000, 1,000), and ZSML after a frozen lifted-structure
    embedding."""
    real, base = Config.from_profile("real"), dict(alpha=alpha, positive_fraction=positive_fraction)
    return {LR_200: real_zsml(relation="linear", **base),
            LR_1000: real_zsml(real.replace(iterations=1000), relation="linear", **base),
            S_PAPER: real_zsml(hidden=[1000, 1000], **base),
            LIFTED: real_zsml(real.replace(loss="lifted_structure", iterations=400), features="embedding",
                              metric_steps=200, **base)}


def synthparts_grid(alpha: float, positive_fraction: float | None) -> dict[str, Config]:
    """ZSML on SynthParts through the same frozen pretrained features (seeds :data:`TEST_SEEDS`), the other side
    of the transfer."""
    on_synth = Config.from_profile("real").replace(dataset="synthparts")
    return {"SynthParts": settings_config(alpha, positive_fraction, on_synth)}


def transfer_configs(alpha: float, positive_fraction: float | None) -> tuple[Config, Config]:
    """The runs whose transfer records Tables 4-5's analogue reads: ZSML on Flowers-102 and on SynthParts."""
    return (settings_config(alpha, positive_fraction),
            synthparts_grid(alpha, positive_fraction)["SynthParts"])


# ---- beyond the chapters: the comparison across methods and the fine-tuning campaign -----------------------------

def _compared(base: Config, alpha: float | None = None) -> Config:
    """ZSML at ``alpha``; its "off" is the same run's own input features on the same images (the ``input`` metrics
    every ZSML result carries), so ``alpha=None`` returns the ZSML run whose input metrics stand for "off". The
    choice (a config with a validation split) reads its recorded validation runs, each scoring a 4-per-class sample
    of the validation classes; a test run ranks every unseen image (:data:`EVERY_UNSEEN_IMAGE`), its "off" being
    the cosine of the input features."""
    scoring = {} if base.validation_fraction else EVERY_UNSEEN_IMAGE
    return real_zsml(base, alpha=0.5 if alpha is None else alpha, **scoring)


#: ZSML in the one-protocol comparison (:mod:`zslib.analysis.compare`): the label range alpha over :data:`ALPHAS`,
#: "off" read from the same runs' input features.
COMPARISON = Entry(
    "triplet", "continuous-label weight alpha", _compared, {f"alpha {a:g}": a for a in ALPHAS},
    claims=lambda label: ("no like-for-like row (the paper's one seen-to-unseen retrieval row puts ZSML on a "
                          "Lifted embedding, Table 6; here it learns a relation on the frozen features)"),
    parts=lambda label: f"learned relation, {label.replace(' ', ' = ')}", off_metrics_prefix="input ",
    quick=("alpha 0.5",), adapted=("alpha 0.5",), val_seeds={"real frozen": 10, "real adapted": 10})


#: Steps of the relation network per step of the embedding before it, in the fine-tuning campaign. The network
#: trains at the campaign's rate for new layers (10 x 1e-5, the real regime's 1e-4); the real regime trains it for
#: 200 steps, and on the CPU campaign 50 steps after 50 of the embedding left every validation run at chance.
NETWORK_STEPS_PER_METRIC_STEP = 2


def _after_the_baseline(values: dict) -> dict:
    """A campaign ZSML run: its embedding trained exactly as long as its baseline (``metric_steps``: the run's
    length), then the relation network for :data:`NETWORK_STEPS_PER_METRIC_STEP` times as many steps."""
    steps = int(values["iterations"])
    return {"iterations": steps * (1 + NETWORK_STEPS_PER_METRIC_STEP), "method_params": {"metric_steps": steps}}


def campaign_plan(recipe: Recipe) -> MethodPlan:
    """ZSML in the fine-tuning campaign: its pair network on top of an embedding fine-tuned with the triplet loss
    exactly as its baseline is (the paper's Table 6, "metric loss + ZSML"; ``follow`` adds the network's steps after
    the baseline's length, whatever it is, so that "off" is the very embedding ZSML starts from). The pair network
    and the scoring are the other regimes': the book's smaller
    S (:data:`REAL_ZSML`'s hidden layers; the paper's 1,000 x 1,000 scores the test pairs fast on a GPU, slowly on
    one CPU core), 10 query images per unseen class ranked against every unseen image (:data:`EVERY_UNSEEN_IMAGE`).
    """
    steps = int(recipe.settings["iterations"])
    base = {"loss": "triplet", "method": "zsml",
            "method_params": {"features": "embedding", "metric_steps": steps, "hidden": list(REAL_ZSML["hidden"]),
                              **EVERY_UNSEEN_IMAGE}}
    return MethodPlan("zsml", base, "alpha (label range, Eq. 3)",
                      {f"alpha={v:g}": {"alpha": v} for v in CAMPAIGN_ALPHAS},
                      smoke_params={"k": 4, "hidden": [16, 16], "pairs": 64, "batch_pairs": 16, "metric_steps": 1,
                                    "stride": 2, "height": 4},
                      datasets=("flowers102", "cub200", "cars196"),
                      why_not="ZSML scores pairs through its network: 10 queries of each of SOP's 11,316 unseen "
                              "classes against its 60,502 unseen images are 6.8e9 pairs; and it has no query/gallery "
                              "evaluation (In-Shop)",
                      follow=_after_the_baseline,
                      claims=lambda label: ("no like-for-like row (the paper's one seen-to-unseen retrieval row puts "
                                            "ZSML on a Lifted embedding on CUB-200 and Cars196, Table 6)"),
                      parts=lambda label: f"learned relation on a triplet embedding trained first, {label}")
