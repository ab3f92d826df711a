"""The JRD chapters' presentation (Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020; ``chu2020jrd``).

``book/jrd.ipynb`` (the derivation, the quick-profile experiments and the headline on Flowers-102 photographs) and
``book/jrd_experiments.ipynb`` (the real-photograph analogues of the paper's Tables 2-4 and Figs. 4-6) call these
in a line or two; the runs they read are named by :mod:`zslib.methods.jrd.recipes` and the paper's math stays in
:mod:`zslib.methods.jrd`.

* ``study.py`` -- :class:`JRDStudy`, the recorded real-profile grids and the paired comparisons made from them;
* ``quick.py`` -- the quick profile's sections (Tables 2 and 3, how lambda is scaled);
* ``tables.py`` -- the headline, the full profile and the experiments page's Table 2, Figs. 4-6 and Table 4;
* ``bound.py``, ``bound_tables.py`` -- Table 3's rows and paired differences, and its real-profile sections;
* ``figures.py`` -- the derivation's kernels and joint similarities; the sweep, mixture and (K, K') figures;
* ``photos.py`` -- the retrieval grid and t-SNE of AM-Softmax and JRD on the photographs;
* ``sentences.py`` -- the "Key findings" box and the "What we found" lists;
* ``cells.py`` -- how a number, a row, a paper's cell and a missing section are written.

Every ``*_section`` function returns a :class:`~zslib.present.base.Section` (or ``Sections``) that displays itself.
"""
from zslib.present.jrd.bound import bound_rows, bound_table, lambda_scale, paired_values, quick_bound
from zslib.present.jrd.bound_tables import (bound_variants_kernels_section, moved_5nn_section, real_bound_5nn_section,
                                            real_bound_section)
from zslib.present.jrd.figures import kernel_figure
from zslib.present.jrd.photos import photo_section
from zslib.present.jrd.quick import (bound_verdicts_section, lambda_scale_section, quick_bound_section, quick_table,
                                     quick_table_section, quick_variants_section)
from zslib.present.jrd.sentences import found_experiments, found_main, key_findings
from zslib.present.jrd.study import JRDStudy
from zslib.present.jrd.tables import (alpha_sweep_section, full_profile_section, headline_section, kernel_rule_note,
                                      kernels_chosen_section, kernels_chosen_table, kernels_section,
                                      mixture_grid_section, mixtures_section, rule_words, variants_section)

__all__ = ["photo_section", "kernel_figure",
           "JRDStudy", "quick_bound", "bound_rows", "bound_table", "paired_values", "lambda_scale", "quick_table",
           "quick_table_section", "quick_variants_section", "quick_bound_section", "bound_verdicts_section",
           "lambda_scale_section", "headline_section", "rule_words", "full_profile_section", "variants_section",
           "alpha_sweep_section", "kernels_section", "kernel_rule_note", "kernels_chosen_table",
           "kernels_chosen_section", "mixtures_section", "mixture_grid_section", "real_bound_section",
           "real_bound_5nn_section", "bound_variants_kernels_section", "moved_5nn_section", "found_main",
           "found_experiments", "key_findings"]
