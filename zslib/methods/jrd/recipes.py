"""The JRD chapters' protocol (Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020; ``chu2020jrd``): the named
configs, seeds, grids and choice rules that the chapters, the comparison across methods, the deviations table and
the fine-tuning campaign read from here.

* :func:`jrd`: AM-Softmax with JRD's regularizer (Eq. 11) on any base config;
* :func:`quick_grid`: the main chapter's arms on the active profile (Table 2 and the JMMD half of Table 3);
* :func:`real_configs`: the headline rows on the real profile, by name (AM-Softmax alone and JRD at the paper's
  alpha = 1); the deviations table describes :data:`JRD`;
* the real-profile grids of the experiments page (Tables 2-4, Figs. 4-6), each a ``{label: Config}``;
* the seeds and weights of the sweeps and of the choices on validation classes, and the choice rules themselves
  (:func:`alpha_rule`, :func:`kernel_rules`, :func:`leading_alphas`);
* :data:`COMPARISON` and :func:`campaign_plan`: JRD in the comparison across methods and in the fine-tuning
  campaign.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from zslib.analysis.entry import Entry
from zslib.campaign.plan import MethodPlan, Recipe
from zslib.engine.choice import OFF, VALIDATION_FRACTION, VALIDATION_SEEDS, choose
from zslib.engine.config import Config
from zslib.engine.stats import summarize
from zslib.methods.jrd.diversification import KERNELS
from zslib.methods.jrd.method import JRD_PRESETS, jrd_method, jrd_preset

__all__ = ["AM_SOFTMAX", "JRD", "SWEEP_SEEDS", "SWEEP_ALPHAS", "KERNEL_SEEDS", "KERNEL_ALPHAS",
           "MIXTURE_SEEDS", "MIXTURES", "GRID_SIZES", "GRID_SEEDS", "BOUND_SEEDS", "VALIDATION_ALPHAS",
           "COMPARISON_ALPHAS", "CAMPAIGN_ALPHAS",
           "QUICK_THEORY", "REGULARIZER_NAMES", "BOUND_OTHERS", "jrd", "quick_grid", "real_base", "validation_base",
           "real_configs", "floor_grid", "validation_grid", "validation_off_grid", "variant_grid", "sweep_grid",
           "kernel_grid", "kernel_validation_grid", "kernels_at", "mixture_config", "mixture_grid",
           "full_mixture_grid", "bound_grid", "alpha_rule", "kernel_rules", "validation_means", "leading_alphas",
           "COMPARISON", "campaign_plan"]

#: The names of the headline rows (:func:`real_configs`).
AM_SOFTMAX, JRD = "AM-Softmax", "JRD"

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
#: The weights the comparison across methods offers its choice rule (``zslib.analysis.compare``): the kernels'
#: search (:data:`KERNEL_ALPHAS`) and the larger validation candidate.
COMPARISON_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 4.0)
#: The weights the fine-tuning campaign searches on validation classes (``zslib.campaign.plan``).
CAMPAIGN_ALPHAS = (0.4, 1.0)

#: The arms of the Table 3 analogue on the quick profile (Sec. 3 of the paper: JMMD and JRD, with AM-Softmax added).
QUICK_THEORY = (AM_SOFTMAX, "JMMD", JRD)
#: The three regularizers of Sec. 5.3 (Fig. 5): the ``regularizer=`` of :func:`zslib.methods.jrd.method.jrd_method`.
REGULARIZER_NAMES = {"jrs": "JRD (JRS)", "jmmd": "JMMD", "jintra": "JIntra"}
#: The arms JRD is paired with in the Table 3 analogues.
BOUND_OTHERS = ("JMMD", AM_SOFTMAX)


def jrd(config: Config, **params) -> Config:
    """``config`` with AM-Softmax and JRD's regularizer at the paper's CUB settings (:func:`jrd_method`), ``params``
    (``alpha``, ``variant``, ``kernel``, ...) changed."""
    return config.replace(**jrd_method("cub200", **params))


# ------------------------------------------------------------------------------------ the main chapter's grid

def quick_grid(profile) -> dict[str, Config]:
    """The main chapter's arms on ``profile`` (Table 2 and the JMMD half of Table 3): AM-Softmax alone, JRD at the
    paper's alpha = 1, its variants MRD and JRD-C, and JMMD at the paper's 0.1. On the quick and real profiles the
    profile's recipe with one evaluation at the end of each run; on the full profile the paper's CUB setting
    (Sec. 5.1 and the released code, :func:`jrd_preset`)."""
    if profile.name != "full":
        base = Config.from_profile(profile, eval_every=profile.iterations)
    else:
        base = Config.from_profile(profile, **jrd_preset("cub200"))
    return {AM_SOFTMAX: jrd(base, alpha=0.0), JRD: jrd(base, alpha=1.0),
            "MRD": jrd(base, alpha=1.0, variant="mrd"), "JRD-C": jrd(base, alpha=1.0, variant="jrd_c"),
            "JMMD": jrd(base, alpha=0.1, regularizer="jmmd")}


# ------------------------------------------------------------------------------- the real-profile grids

def real_base() -> Config:
    """The real profile's config (Flowers-102, a frozen ImageNet EfficientNet-Lite0, a trained 512-d head)."""
    return Config.from_profile("real")


def validation_base() -> Config:
    """:func:`real_base` with :data:`VALIDATION_FRACTION` of the seen classes held out as validation classes."""
    return real_base().replace(validation_fraction=VALIDATION_FRACTION)


def real_configs() -> dict[str, Config]:
    """The headline rows on the real profile, by name: AM-Softmax alone (:data:`AM_SOFTMAX`, alpha = 0) and JRD at
    the paper's alpha = 1 (:data:`JRD`)."""
    real = real_base()
    return {AM_SOFTMAX: jrd(real, alpha=0.0), JRD: jrd(real, alpha=1.0)}


def floor_grid() -> dict[str, Config]:
    """The untrained pretrained features (one run, seed 0: it has no randomness)."""
    return {"pretrained": real_base().replace(method="pretrained")}


def validation_grid() -> dict[float, Config]:
    """JRD at each of :data:`VALIDATION_ALPHAS` on the class-disjoint validation split."""
    return {a: jrd(validation_base(), alpha=a) for a in VALIDATION_ALPHAS}


def validation_off_grid() -> dict[str, Config]:
    """The "off" of every choice made on validation classes in these chapters: JRD switched off (alpha = 0 in
    Eq. 11, i.e. AM-Softmax alone) on the same validation split. At alpha = 0 the kernel computes nothing, so this
    one arm is the "off" of the alpha choice and of each kernel's weight choice alike."""
    return {OFF: jrd(validation_base(), alpha=0.0)}


def variant_grid() -> dict[str, Config]:
    """The variants of Table 2 at the paper's alpha = 1."""
    real = real_base()
    return {"MRD": jrd(real, alpha=1.0, variant="mrd"), "JRD-C": jrd(real, alpha=1.0, variant="jrd_c"),
            "JRD-pooling": jrd(real, alpha=1.0, variant="jrd_pooling")}


def sweep_grid() -> dict:
    """``{"AM-Softmax": config, (regularizer, alpha): config}`` of the Figs. 4-5 sweep (seeds :data:`SWEEP_SEEDS`)."""
    real = real_base()
    grid = {AM_SOFTMAX: real_configs()[AM_SOFTMAX]}
    grid.update({(reg, a): jrd(real, alpha=a, regularizer=reg) for reg in REGULARIZER_NAMES for a in SWEEP_ALPHAS})
    return grid


def kernel_grid() -> dict[str, Config]:
    """Every kernel of Table 4 at alpha = 1 (``gaussian_mixture`` is the chapter's JRD; seeds :data:`KERNEL_SEEDS`)."""
    real = real_base()
    return {k: jrd(real, alpha=1.0, kernel=k) for k in KERNELS}


def kernel_validation_grid() -> dict:
    """``{(kernel, alpha): config}`` on the validation split, alpha among :data:`KERNEL_ALPHAS`."""
    val = validation_base()
    return {(k, a): jrd(val, alpha=a, kernel=k) for k in KERNELS for a in KERNEL_ALPHAS}


def kernels_at(alphas: Mapping[str, float]) -> dict[str, Config]:
    """Each kernel at its weight ``alphas[kernel]`` on all the seen classes."""
    real = real_base()
    return {k: jrd(real, alpha=a, kernel=k) for k, a in alphas.items()}


def mixture_config(sizes) -> Config:
    """JRD at alpha = 1 with ``sizes = (K, K')`` Gaussians on the pooling and the embedding layer."""
    return jrd(real_base(), alpha=1.0, mixture=list(sizes))


def mixture_grid() -> dict:
    """``{(K, K): config}`` on the diagonal of Fig. 6 (:data:`MIXTURES`, seeds :data:`MIXTURE_SEEDS`)."""
    return {m: mixture_config(m) for m in MIXTURES}


def full_mixture_grid() -> dict:
    """``{(K, K'): config}`` for K, K' in :data:`GRID_SIZES` (seeds :data:`GRID_SEEDS`)."""
    return {(k, kk): mixture_config((k, kk)) for k in GRID_SIZES for kk in GRID_SIZES}


def bound_grid() -> dict[str, Config]:
    """The three arms of the real Table 3 analogue: AM-Softmax, JMMD at the paper's 0.1 and JRD at 1."""
    main = real_configs()
    return {AM_SOFTMAX: main[AM_SOFTMAX], "JMMD": jrd(real_base(), alpha=0.1, regularizer="jmmd"), JRD: main[JRD]}


# ------------------------------------------------------------------------------------------- the choice rules

def alpha_rule(off: Sequence, validation: Mapping[float, Sequence]):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over the validation alphas with alpha = 0
    (AM-Softmax alone, JRD switched off; the runs ``off``) as "off", on the seeds :data:`VALIDATION_SEEDS` (the
    comparison chapter's choice seeds, on which "off" is recorded)."""
    return choose({OFF: off, **{a: [r for r in rs if r.config.seed in VALIDATION_SEEDS] for a, rs in validation.items()}})


def kernel_rules(off: Sequence, kernel_validation: Mapping) -> dict:
    """``{kernel: Choice}``: the book's one choice rule over each kernel's weights :data:`KERNEL_ALPHAS` (Table 4 of
    Chu et al., ICML 2020, which searched alpha per kernel), with JRD switched off (``off``: alpha = 0, AM-Softmax
    alone on the validation split) as "off", on the validation classes and the seeds :data:`KERNEL_SEEDS`. "off" is
    listed first and the weights in increasing order, so a tie goes to the simpler setting."""
    return {k: choose({OFF: off, **{a: kernel_validation[k, a] for a in KERNEL_ALPHAS}}) for k in KERNELS}


def validation_means(kernel_validation: Mapping) -> dict:
    """``{(kernel, alpha): mean validation Recall@1}``."""
    return {key: summarize(rs, "R@1", "val")[0] for key, rs in kernel_validation.items()}


def leading_alphas(means: Mapping) -> dict[str, float]:
    """``{kernel: alpha}``: the leading weight of each kernel, the one of :data:`KERNEL_ALPHAS` with the highest mean
    validation Recall@1 in ``means`` (``{(kernel, alpha): mean}``; a tie goes to the smaller weight). Whether the
    rule takes it or keeps JRD off is :func:`kernel_rules`; where it keeps JRD off, the runs at this weight are an
    ablation."""
    return {k: max(KERNEL_ALPHAS, key=lambda a: means[k, a]) for k in KERNELS}  # max keeps the first of ties


# ---- beyond the chapters: the comparison across methods and the fine-tuning campaign -----------------------------

def _compared(base: Config, alpha: float | None) -> Config:
    """The comparison's JRD: AM-Softmax alone (``None``: JRD's weight 0) or JRD at ``alpha``."""
    return jrd(base, alpha=0.0 if alpha is None else alpha)


#: JRD in the one-protocol comparison (:mod:`zslib.analysis.compare`): the JRS weight over
#: :data:`COMPARISON_ALPHAS` with the Gaussian mixture kernel.
COMPARISON = Entry(
    "am_softmax", "JRS weight alpha (Gaussian mixture kernel)", _compared,
    {f"alpha {v:g}": v for v in COMPARISON_ALPHAS},
    claims=lambda label: "no like-for-like row (the paper's tables give no row of the same loss without JRD)",
    parts=lambda label: f"joint representation diversification, {label.replace(' ', ' = ')}",
    quick=("alpha 1",), adapted=("alpha 0.001", "alpha 1"), val_seeds={"real frozen": 10, "real adapted": 10})


def campaign_plan(recipe: Recipe) -> MethodPlan:
    """JRD in the fine-tuning campaign: the paper's own settings on its datasets (:func:`jrd_preset`: BN-Inception
    with frozen BatchNorm, AM-Softmax), else the recipe's network and rates with JRD's loss and the paper's rate
    for the class proxies; alpha over :data:`CAMPAIGN_ALPHAS`."""
    d = recipe.dataset if recipe.dataset in JRD_PRESETS else "cub200"
    if recipe.papers_presets:
        base = jrd_preset(d)
    else:
        base = {**jrd_method(d), "objective_lr": JRD_PRESETS[d]["proxy_lr"]}
    return MethodPlan("jrd", base, "alpha (Eq. 11)", {f"alpha={v:g}": {"alpha": v} for v in CAMPAIGN_ALPHAS},
                      smoke_params={"mixture": [1, 1]},
                      claims=lambda label: ("no like-for-like row (the paper's tables give no row of the same loss "
                                            "without JRD)"),
                      parts=lambda label: f"joint representation diversification, {label}")
