"""Where the DeML chapter's runs depart from DeML (Chen and Deng, CVPR 2019; ``chen2019deml``).

``DEVIATIONS``: the rows of the chapter's table (:func:`zslib.analysis.deviations.deviation_table`), the common rows
first. The chapter's config is its recorded real-profile DeML(1, 4) run (``DEML4`` of
:func:`zslib.methods.deml.recipes.real_configs`); its book-default cells are read from it when the table is drawn.
"""
from __future__ import annotations

from zslib.analysis.deviations import Deviation, Switch, common_rows, for_config, recipe_row
from zslib.methods.deml import recipes

__all__ = ["DEVIATIONS", "chapter_config"]

#: The config the rows describe: the chapter's real-profile DeML(1, 4) with the paper's weights.
chapter_config = recipe_row(recipes, recipes.DEML4)


DEVIATIONS = common_rows({
    "network": "GoogLeNet V1 pretrained on ImageNet, fine-tuned end to end: FNet up to pool3, where the CAMs sit, and "
               "GNet from Inception 4 to pool5, one copy per scale (Secs. 3 and 4)",
    "data": "CUB-200-2011, CARS196, Stanford Online Products and In-Shop, no class shared by training and test "
            "(Sec. 4)",
    "augmentation": "the data preprocessing of the released codes it follows (ECAML and lifted structure, Sec. 4)",
    "budget": "15k (CUB), 25k (CARS) and 100k (SOP, In-Shop) iterations (Sec. 4); the batch is not given",
}, chapter_config) + for_config(
    chapter_config,
    Deviation(
        "Scales and learners",
        "DeML(3, 3) for the headline: three scales, each next one a crop zoomed to the object attention of the last, "
        "times three channel-attention learners (Table 3; DeML(2, 4) on SOP)",
        "DeML({p[scales]}, {p[learners]}) (`scales={p[scales]}`, `learners={p[learners]}`): one scale, so the object "
        "attention and its crops take no part in training, and the CAMs sit on the last cached map",
        "A second scale needs the network's maps of the zoomed crop, which a cache of the whole images cannot hold.",
        no_switch="none on the real profile (`scales` > 1 runs on the quick and full profiles)"),
    Deviation(
        "What the adversary compares",
        "F reads the learners' outputs CA_(i,j)[x] as they are (Eq. 4, Sec. 3.2)",
        "F reads the learners' L2-normalized outputs, what the cosine of Eq. 5 and the evaluation (Sec. 4) see",
        "On raw outputs the learners can look different to F by their lengths alone; on unit vectors only their "
        "directions count, which is what retrieval compares. The recorded runs were made so.",
        switch=Switch({"method_params.adversary_input": "raw"})),
    Deviation(
        "The learners' learning rate",
        "the learners at ten times the rate of the rest: Adam at 1e-5, learners at 1e-4 (Sec. 4)",
        "the learners at the rate of the CAMs and the other new layers, {head_lr:g}",
        "The head's rate is the real profile's recipe, and it equals the paper's absolute rate for the learners; the "
        "switch gives the paper's ratio instead (learners ten times faster than the CAMs).",
        switch=Switch({"method_params.learner_lr_mult": 10.0})),
    Deviation(
        "Weight decay",
        "2e-4 with Adam (Sec. 4)",
        "no weight decay, the real profile's recipe",
        "Every chapter's head trains with the real profile's one recipe, so the chapters share their floors and "
        "baselines; DeML and its baseline get the same optimizer.",
        switch=Switch({"weight_decay": 2e-4})),
)
