"""Where the CML chapter's runs depart from CML (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``).

``DEVIATIONS``: the rows of the chapter's table (:func:`zslib.analysis.deviations.deviation_table`), the common rows
first. The chapter's config is the real-profile CML run with the triplet loss of Eq. 12
(:func:`zslib.methods.cml.recipes.chapter_config`); its book-default cells are read from it when the table is drawn.
"""
from __future__ import annotations

from zslib.analysis.deviations import Deviation, Switch, common_rows, for_config
from zslib.engine.choice import VALIDATION_SEEDS
from zslib.engine.data.datasets import Flowers102
from zslib.methods.cml import recipes
from zslib.methods.cml.recipes import GREEK, REAL_WEIGHTS, real_sweep_grid

__all__ = ["DEVIATIONS", "chapter_config"]


def chapter_config():
    """The config the rows describe (:func:`zslib.methods.cml.recipes.chapter_config`, looked up when called)."""
    return recipes.chapter_config()


def _searched(values: dict) -> str:
    """The book's side of the weights row, from the sweep the chapter trains (:mod:`zslib.methods.cml.recipes`)."""
    held = next(iter(real_sweep_grid().values())).validation_fraction
    grids = " and ".join(f"{GREEK[name]} ∈ {{{', '.join(f'{w:g}' for w in weights)}}}"
                         for name, weights in REAL_WEIGHTS.items())
    return (f"chosen per loss on validation classes ({held:.0%} of the seen classes held out, seeds "
            f"{', '.join(map(str, VALIDATION_SEEDS))}) from {grids}; the quick profile uses the paper's CUB values "
            "untuned")


DEVIATIONS = common_rows({
    "network": "GoogLeNet V1 pretrained on ImageNet with a new fully connected 512-d layer after the global pooling, "
               "fine-tuned end to end (Sec. IV-A)",
    "data": "CARS196, CUB-200-2011, Stanford Online Products and In-Shop, the first half of the classes seen "
            "(Sec. IV-B, Tables II-V)",
    "augmentation": "the preprocessing of Song et al. 2016, \"exactly the same\" (Sec. IV-A): random crops and "
                    "mirror images in training",
    "budget": "5k (CUB), 10k (CARS) and 20k (SOP, In-Shop) iterations; batches of 128 = 64 classes × 2 images "
              "(Sec. IV-A)",
}, chapter_config, notes={
    "budget": f"`Config.iterations`, `batch_classes`, `batch_per_class`; Flowers-102's "
              f"{Flowers102.official['train'][1]} seen classes cannot fill a batch of 64 classes",
}) + for_config(
    chapter_config,
    Deviation(
        "Optimizer",
        "Adam at 1e-5 for the network and ten times that (1e-4) for the new layer; weight decay 2e-4 on every run, "
        "the baselines included (Sec. IV-A, footnote 6)",
        "Adam at {head_lr:g} for the head (the paper's rate for its new layer), no weight decay",
        "Every chapter's head trains with the real profile's one recipe, so the five chapters share their floors and "
        "baselines; CML and its baselines get the same optimizer, as in the paper.",
        switch=Switch({"weight_decay": 2e-4})),
    Deviation(
        "What the energy confusion reads",
        "Eq. 3 on the features x_i; the paper does not say whether EC sees them before or after the L2 "
        "normalization of the triplet loss (Eq. 12); DC (Eq. 10) must see them unnormalized",
        "the embedding as the network outputs it (`normalize=False`): with the cosine losses EC can then also fall "
        "by shrinking the norms, not only by pulling two classes together",
        "EC reads what DC reads, and the recorded runs were made so; the unit reading is one parameter away.",
        switch=Switch({"method_params.ec_features": "unit"}, reading=True,
                      note="the paper does not say which")),
    Deviation(
        "The size of the metric loss",
        "L_m summed over the batch: Eq. 12 over the N anchors, Eq. 13 over the N samples, Eq. 14 over all pairs",
        "`scale='{p[scale]}'`: zslib averages the triplet and N-pair losses over the anchors, so λ1 and λ2 are "
        "divided by the batch size for them, which keeps the paper's ratio of L_m to the confusion terms",
        "Adam's steps do not change when the whole loss is multiplied by a constant, so only the ratio matters, and "
        "it is the paper's.",
        no_switch="none needed (`scale='mean'` would make the confusion N times stronger than the paper's)"),
    Deviation(
        "The triplets of Eq. 12",
        "one triplet per anchor (which negative is not said), summed over the N anchors, margin 0.1 on L2-normalized "
        "features (Sec. III-D, Eq. 12)",
        "every valid triplet of the batch, averaged (loss parameter `mining='{loss[mining]}'`), margin "
        "{loss[margin]:g}",
        "Without the paper's rule for the negative, every triplet is the reading that adds no choice of its own.",
        no_switch="none exact: the paper does not name its negative"),
    Deviation(
        "The confusion weights",
        "per dataset and loss from the table captions; on CUB λ1 = 0.02, 0.3, 0.13 and λ2 = 0.01, 0.02, 0.03 for "
        "triplet, N-pair and binomial (Table IV caption)",
        _searched,
        "The paper's values were set for a fine-tuned GoogLeNet, where the terms have other sizes; choosing on the "
        "unseen classes would make the test part of training.",
        no_switch="`cml_method('cub200', loss)` gives the paper's CUB weights (what the quick profile trains)"),
)
