"""The Adapt-Adv chapters' presentation (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): ``book/adapt_adv.ipynb`` and ``book/adapt_adv_experiments.ipynb`` call these in a line or
two.

* ``study.py`` -- :class:`AdaptAdvStudy`, the recorded real-profile grids, read once (named by
  :mod:`zslib.methods.adapt_adv.recipes`);
* ``tables.py`` -- the tables (``*_table``: a DataFrame; ``*_section``: what a cell shows);
* ``figures.py`` -- the figures, each a section with the table or sentences it goes with;
* ``photos.py`` -- retrieval, t-SNE and Grad-CAM on Flowers-102 photographs;
* ``sentences.py`` -- the generated sentences; ``findings.py`` -- the pages' findings and the full profile's runs.
"""
from zslib.present.adapt_adv.figures import (attention_section, lambda0_choice_section, lambda_schedule_section,
                                             lambda_sweep_section, late_changes_section, stopping_section)
from zslib.present.adapt_adv.findings import experiments_findings, full_profile_section, key_findings, main_findings
from zslib.present.adapt_adv.photos import gradcam_photos_section, photo_sections, real_gradcam_section
from zslib.present.adapt_adv.sentences import (ablation_findings, attention_sentence, choice_sentences,
                                               real_pair_sentences, stopping_rule_sentence, stopping_sentence,
                                               table5_sentences)
from zslib.present.adapt_adv.study import AdaptAdvStudy
from zslib.present.adapt_adv.tables import (ablation_section, ablation_table, gradcam_parts_section, provenance_section,
                                            real_pairs_section, real_section, real_table, table5_choices_section,
                                            table5_section, table5_table)

__all__ = ["AdaptAdvStudy", "ablation_table", "ablation_section", "ablation_findings", "lambda_sweep_section",
           "lambda_schedule_section", "attention_section", "attention_sentence", "gradcam_parts_section",
           "real_table", "real_section", "real_pairs_section", "real_pair_sentences", "provenance_section",
           "late_changes_section", "stopping_section", "stopping_rule_sentence", "stopping_sentence",
           "lambda0_choice_section", "table5_choices_section", "choice_sentences", "table5_table", "table5_section",
           "table5_sentences", "real_gradcam_section", "gradcam_photos_section", "photo_sections",
           "full_profile_section", "key_findings", "main_findings", "experiments_findings"]
