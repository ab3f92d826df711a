"""What the CML chapter shows (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``), on the presentation floor's
pair (:mod:`zslib.present.base`): the recorded real-profile runs as :class:`CmlStudy`, and the tables and generated
sentences of ``book/cml.ipynb``, each a function that returns a :class:`~zslib.present.base.Section` (or the
findings box and list). The runs themselves and the choice rule are named by :mod:`zslib.methods.cml.recipes`.

* ``study.py`` -- :class:`CmlStudy`, the validation sweep, the test rows and the untrained features;
* ``tables.py`` -- the quick grid beside Table IV, its verdicts, the sweep, the real-photograph table, Lemmas 1-5;
* ``sentences.py`` -- the captions, verdicts, key findings and "What we found", written from the numbers.
"""
from zslib.present.cml.sentences import (LOSS_NAMES, full_runs_section, key_findings, real_verdict_section,
                                         what_we_found)
from zslib.present.cml.study import CmlStudy
from zslib.present.cml.tables import (grid_section, hoeffding_section, lemma_bounds_section, mixture_section,
                                      quick_section, real_section, sweep_section, verdict_section)

__all__ = ["CmlStudy", "LOSS_NAMES", "grid_section", "quick_section", "verdict_section", "sweep_section",
           "real_section", "real_verdict_section", "lemma_bounds_section", "mixture_section", "hoeffding_section",
           "full_runs_section", "key_findings", "what_we_found"]
