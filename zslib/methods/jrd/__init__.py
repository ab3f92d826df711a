"""JRD: distance metric learning with joint representation diversification (Chu, Lin, Wang, Wang, Yu, Gao and
Tong, ICML 2020; ``chu2020jrd``).

* ``diversification.py`` -- joint representation similarity (JRS) over pooling, embedding and class-level
  representations, and the JMMD / JIntra comparisons;
* ``intra.py`` -- the explicit intra-class distance penalty of Sec. 2 (Eq. 4), in two readings;
* ``theory.py`` -- the H-divergence and the ideal joint error lambda of Ben-David's bound, estimated;
* ``method.py`` -- the registered methods ``jrd`` and ``intra``;
* ``analyses.py`` -- ``bound_terms``: Table 3's lambda and d_H of a trained model;
* ``recipes.py`` -- the protocol: the named configs, seeds, grids and choice rules every page reads;
* ``explore.py`` -- ``jrd_bound``, the interactive explorer of the bound terms of recorded runs;
* ``paper.py`` -- ``PAPER``, the paper's record in :data:`zslib.engine.registry.PAPERS`.

Chapters: ``book/jrd.ipynb`` (derivation, quick experiments, headline on photographs) and
``book/jrd_experiments.ipynb`` (the real-photograph analogues of Tables 2-4 and Figs. 4-6); their tables, figures
and generated sentences are in :mod:`zslib.present.jrd`.
"""
from zslib.methods.jrd import method, paper  # noqa: F401  (register the methods and the paper)
