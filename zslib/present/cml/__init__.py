"""What the CML chapters show (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``), on the presentation floor's
pair (:mod:`zslib.present.base`): the recorded real-profile runs as :class:`CmlStudy`, the runs the experiments and
ablations pages train on the active profile (:class:`CmlExperiments`, :class:`CmlAblations`), and the tables,
figures and generated sentences of ``book/cml.ipynb``, ``book/cml_experiments.ipynb`` and
``book/cml_ablations.ipynb``, each a function that returns a :class:`~zslib.present.base.Section` (or the findings
box and list). The runs themselves and the choice rule are named by :mod:`zslib.methods.cml.recipes`.

* ``study.py`` -- :class:`CmlStudy`, the validation sweep, the test rows and the untrained features;
* ``tables.py`` -- the quick grid beside Table IV, its verdicts, the sweep, the real-photograph table, Lemmas 1-5;
* ``photos.py`` -- the retrieval grid and t-SNE of the untrained features, the baseline and CML on photographs;
* ``sentences.py`` -- the captions, verdicts, key findings and "What we found", written from the numbers;
* ``pages.py`` -- :class:`CmlExperiments` and :class:`CmlAblations`, the runs of the two further pages;
* ``sweep.py`` -- the experiments page's lambda sweep and what the book's rule chose from it (Tables VII-VIII);
* ``experiments.py`` -- diversity (Table X), the curves (Fig. 3), the attention maps (Figs. 6-7), the probes;
* ``ablations.py`` -- dropout (Table VI), the embedding size (Table IX), the t-SNE maps (Figs. 4-5);
* ``figures.py`` -- what each confusion term does to two Gaussian classes in 2-D (the derivation's figure).
"""
from zslib.present.cml.ablations import (dropout_figure, dropout_section, full_profile_section, setting_section,
                                         size_section, size_verdicts, tsne_section)
from zslib.present.cml.experiments import (attention_figure, curves_figure, diversity_section, diversity_table,
                                           probe_section)
from zslib.present.cml.figures import confusion_figure
from zslib.present.cml.pages import CmlAblations, CmlExperiments
from zslib.present.cml.photos import photo_section
from zslib.present.cml.sentences import (LOSS_NAMES, full_runs_section, key_findings, real_verdict_section,
                                         what_we_found)
from zslib.present.cml.study import CmlStudy
from zslib.present.cml.sweep import lambda_sweep_figure, lambda_sweep_section
from zslib.present.cml.tables import (grid_section, hoeffding_section, lemma_bounds_section, mixture_section,
                                      quick_section, real_section, sweep_section, verdict_section)

__all__ = ["CmlStudy", "LOSS_NAMES", "grid_section", "quick_section", "verdict_section", "sweep_section",
           "real_section", "real_verdict_section", "lemma_bounds_section", "mixture_section", "hoeffding_section",
           "full_runs_section", "key_findings", "what_we_found", "photo_section", "CmlExperiments", "CmlAblations",
           "lambda_sweep_section", "lambda_sweep_figure", "diversity_table", "diversity_section", "curves_figure",
           "attention_figure", "probe_section", "setting_section", "dropout_section", "dropout_figure",
           "size_section", "size_verdicts", "tsne_section", "full_profile_section", "confusion_figure"]
