"""CML: confusion-based metric learning (Chen, Deng, Wang and Zhang, IEEE TNNLS 2022; ``chen2022cml``).

* ``confusion.py`` -- the energy confusion and diversity confusion terms (Eqs. 7-11) and the facts of
  Lemmas 1-5 (mixture moments, the generalized energy distance, the Hoeffding bound);
* ``method.py`` -- :class:`~zslib.methods.cml.method.CML`, registered as ``cml``;
* ``recipes.py`` -- the protocol: the named configs, seeds, grids and choice rules every page reads;
* ``explore.py`` -- the explorer of the energy-confusion weight over the unseen embedding;
* ``paper.py`` -- ``PAPER``, the paper's record in :data:`zslib.engine.registry.PAPERS`.

What the chapter shows (tables, generated sentences) is in :mod:`zslib.present.cml`.

Chapters: ``book/cml.ipynb`` (derivation), ``cml_experiments`` and ``cml_ablations`` (grids, ablations).
"""
from zslib.methods.cml import method, paper  # noqa: F401  (register the method and the paper)
