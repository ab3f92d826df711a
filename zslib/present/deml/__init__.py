"""What the DeML chapters show (Chen and Deng, CVPR 2019; ``chen2019deml``), on the presentation floor's pair
(:mod:`zslib.present.base`): the recorded real-profile runs as :class:`DemlStudy`, and the tables, figures and
generated sentences of ``book/deml.ipynb`` and ``book/deml_experiments.ipynb``, each a function that returns a
:class:`~zslib.present.base.Section`. The runs themselves are named by :mod:`zslib.methods.deml.recipes`.

* ``study.py`` -- :class:`DemlStudy`, the real-profile grids;
* ``figures.py`` -- the walk's mass over images (the derivation's figure);
* ``quick.py`` -- the random walk's mixing, the quick experiment, the paper's gains, the learners' similarity;
* ``attention.py`` -- the object attention scored on SynthParts, its crops, the attribute probes;
* ``real.py`` -- the real-profile tables, the validation check of lambda0, the extra arms, the retrieval figure;
* ``photos.py`` -- Fig. 4 (a) and (b) on the photographs, the attention explorer;
* ``sentences.py`` -- the key findings, the "What we found" lists, the full-profile runs.
"""
from zslib.present.deml.attention import (LOC_VARIANTS, attention_section, hard_attribute_probe, localization,
                                          localization_section, probe_section)
from zslib.present.deml.figures import walk_figure
from zslib.present.deml.photos import attention_explorer, cam_figures, cam_section, oam_on_photographs
from zslib.present.deml.quick import (comparison_section, learner_similarities, paper_gains, quick_section,
                                      quick_table, reported_section, similarity_section, walk_map, walk_section)
from zslib.present.deml.real import (arms_section, lambda0_check, photo_figures, real_runs_table, real_section,
                                     real_table)
from zslib.present.deml.sentences import experiments_found, full_profile_section, key_findings, main_found
from zslib.present.deml.study import DemlStudy

__all__ = ["DemlStudy", "LOC_VARIANTS", "walk_map", "walk_section", "walk_figure", "quick_table", "quick_section", "paper_gains",
           "comparison_section", "reported_section", "learner_similarities", "similarity_section", "localization",
           "localization_section", "attention_section", "hard_attribute_probe", "probe_section", "real_table",
           "real_section", "real_runs_table", "lambda0_check", "arms_section", "photo_figures", "oam_on_photographs",
           "attention_explorer", "cam_section", "cam_figures", "key_findings", "main_found", "experiments_found",
           "full_profile_section"]
