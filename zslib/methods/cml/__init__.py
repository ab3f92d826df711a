"""CML: confusion-based metric learning (Chen, Deng, Wang and Zhang, IEEE TNNLS 2022; ``chen2022cml``).

* ``confusion.py`` -- the energy confusion and diversity confusion terms (Eqs. 7-11) and the facts of
  Lemmas 1-5 (mixture moments, the generalized energy distance, the Hoeffding bound);
* ``method.py`` -- :class:`~zslib.methods.cml.method.CML`, registered as ``cml``.

Chapters: ``book/cml.ipynb`` (derivation), ``cml_experiments`` and ``cml_ablations`` (grids, ablations).
"""
from zslib.methods.cml import method  # noqa: F401  (registers the method)
