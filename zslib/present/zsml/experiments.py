"""The ZSML experiments page (Xu et al., IJCAI 2019) in one call: every section's runs read from the study and the
numbers drawn from them, in the order in which each section builds on the last."""
from __future__ import annotations

from zslib.present.zsml import ablations, choices
from zslib.present.zsml.outcomes import Experiments
from zslib.present.zsml.real import RealComparison
from zslib.present.zsml.study import ZSMLStudy

__all__ = ["real_experiments"]


def real_experiments(real: RealComparison | None, study: ZSMLStudy) -> Experiments:
    """Every recorded run of the experiments page and the numbers drawn from them, section by section: alpha chosen
    on validation classes (and trained on the test classes if it is not the paper's 0.3), the share of positive
    pairs chosen the same way, the Table 8 and 7 analogues, NCA, the Table 9 and 6 analogues at the best validation
    settings, every pair of the unseen images, and the transfer between Flowers-102 and SynthParts. On the study's
    own profile missing runs and analyses are made."""
    ex = Experiments(real)
    for step in (choices.alpha_choice, choices.chosen_alpha_test, choices.share_choice, choices.chosen_share_test,
                 ablations.alpha_ablation, ablations.k_ablation, ablations.nca, ablations.arms, ablations.every_pair,
                 ablations.transfer):
        step(ex, study)
    return ex
