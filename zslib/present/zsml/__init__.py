"""What the ZSML chapters show (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``): ``book/zsml.ipynb`` and
``book/zsml_experiments.ipynb`` call these in a line or two, each returning a :class:`~zslib.present.base.Section`
or an object holding its sections. The runs are named by :mod:`zslib.methods.zsml.recipes`; the math stays in
:mod:`zslib.methods.zsml`.

* ``study.py`` -- :class:`ZSMLStudy`, the recorded real-profile grids of both pages;
* ``figures.py`` -- the labels of Eq. 3 against the distance (the derivation's figure);
* ``quick.py`` -- the quick profile's table and verdicts, the paper's tables, Fig. 5;
* ``real.py`` -- ZSML on frozen Flowers-102 features against the same features' cosine and Euclidean distance, the
  photographs, the full-profile runs;
* ``outcomes.py``, ``choices.py``, ``ablations.py``, ``experiments.py`` -- the experiments page: alpha and the share
  of positive pairs chosen on validation classes, the Table 4-9 analogues, NCA, every pair;
* ``sentences.py`` -- the generated "What we found" sentences and the "Key findings" box;
* ``numbers.py`` -- metrics by seed, paired differences, table cells.
"""
from zslib.present.zsml.experiments import real_experiments
from zslib.present.zsml.figures import labels_figure
from zslib.present.zsml.outcomes import Experiments
from zslib.present.zsml.quick import Fig5, QuickComparison, fig5, paper_section, quick_comparison
from zslib.present.zsml.real import (RealComparison, full_profile_section, not_recorded, photo_figures,
                                     real_comparison)
from zslib.present.zsml.sentences import chapter_findings, experiment_findings, key_findings
from zslib.present.zsml.study import ZSMLStudy

__all__ = ["ZSMLStudy", "QuickComparison", "quick_comparison", "paper_section", "Fig5", "fig5", "RealComparison",
           "real_comparison", "not_recorded", "photo_figures", "full_profile_section", "Experiments",
           "real_experiments", "chapter_findings", "experiment_findings", "key_findings", "labels_figure"]
