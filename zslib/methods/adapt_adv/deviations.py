"""Where the Adapt-Adv chapter's runs depart from Adapt-Adv (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence
2022; ``alkaabi2022adaptadv``).

``DEVIATIONS``: the rows of the chapter's table (:func:`zslib.analysis.deviations.deviation_table`), the common rows
first. The chapter's config is its recorded real-profile Adapt-Adv run (``METHOD`` of
:func:`zslib.methods.adapt_adv.recipes.real_configs`); its book-default cells are read from it when the table is
drawn.
"""
from __future__ import annotations

import math

from zslib.analysis.deviations import Deviation, Switch, common_rows, for_config, recipe_row
from zslib.engine.data.datasets import Flowers102
from zslib.engine.profile import PROFILES
from zslib.methods.adapt_adv import recipes
from zslib.methods.adapt_adv.method import PAPER_TRIPLET

__all__ = ["DEVIATIONS", "chapter_config", "EPOCH_STEPS"]

#: One pass over the seen images of the real profile's Flowers-102 at its batch size: the training steps of the
#: paper's "epoch" (Sec. 4), after which it sets lambda anew.
EPOCH_STEPS = math.ceil(Flowers102.official["train"][0] / PROFILES["real"].batch_size)

#: The config the rows describe: the chapter's real-profile Adapt-Adv (GDFL and the class adversary) with the triplet loss.
chapter_config = recipe_row(recipes, recipes.METHOD)


DEVIATIONS = common_rows({
    "network": "Inception v2 (BN-Inception) pretrained on ImageNet, fine-tuned end to end at 1e-4 (Secs. 4 and 5.3)",
    "data": "CUB-200-2011, CARS196 and Oxford Flowers-102 with the first half of the classes seen; for Flowers-102 "
            "2,807 training and 3,745 test images, 6,552 in all (Table 1)",
    "augmentation": "images resized to 256 × 256 and randomly cropped to 224 × 224 (Sec. 5.3)",
    "budget": "batches of 64 images (Sec. 5.3); the number of epochs is not in the text",
}, chapter_config, notes={"data": "none needed: Flowers-102 with the paper's split is the paper's own dataset; the "
                                  "book uses every image of the official release"}) + for_config(
    chapter_config,
    Deviation(
        "The triplet loss",
        "the triplet hinge loss with semi-hard sampling and margin 0.01 (Sec. 5.3)",
        "every valid triplet of the batch: CML's Eq. 12, as in the CML chapter's real baseline",
        "The base is the CML chapter's triplet baseline, so both chapters compare against one recorded run.",
        switch=Switch({f"loss_params.{k}": v for k, v in PAPER_TRIPLET.items()},
                      note="`PAPER_TRIPLET` in `zslib.methods.adapt_adv.method`")),
    Deviation(
        "Embedding size",
        "64 dimensions (Sec. 5.3)",
        "the real profile's {real.embedding_dim}",
        "Every chapter's head has the profile's size, so the floors and baselines are shared.",
        switch=Switch({"embedding_dim": 64})),
    Deviation(
        "The embedding layer's rate",
        "1e-3, ten times the network's 1e-4 (Sec. 5.3)",
        "the head and the attention modules at {head_lr:g}",
        "The head's rate is the real profile's recipe, chosen on validation classes.",
        switch=Switch({"new_layer_mult": 10.0}, partial=True,
                      note="the attention modules then learn at the higher rate too; the paper names only the "
                           "embedding layer")),
    Deviation(
        "The classifier and its epoch",
        "a classifier with one hidden layer and dropout 0.1; its rate is not given; λ is set once per epoch from "
        "that epoch's classification loss (Sec. 4, Eq. 22)",
        "the classifier at `classifier_lr={p[classifier_lr]:g}`; λ is set every {p[epoch_steps]} steps, "
        "{config.iterations} steps in all",
        "An epoch here would allow only a few updates of λ in the profile's length; both values were set, not "
        "chosen on validation classes.",
        switch=Switch({"method_params.epoch_steps": EPOCH_STEPS},
                      note="one pass over the seen images at the profile's batch")),
    Deviation(
        "The attended maps",
        "additive attention (Eq. 11) over inception_4d, inception_4e and inception_5a, the last hidden layer u as the "
        "query (Sec. 4)",
        "`form='{p[form]}'` over the cached maps {real.feature_stages} of the frozen network",
        "Those are the maps the cache holds, at similar depths of the network.",
        no_switch="none: the backbone differs"),
)
