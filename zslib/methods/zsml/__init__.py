"""ZSML: zero-shot metric learning (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``).

* ``relation.py`` -- the multi-nonlinear relation kernels and the similarity head (Sec. 3.1);
* ``cross_update.py`` -- continuous labels and the cross-update regression loss (Sec. 3.2);
* ``pairwise.py`` -- retrieval and clustering from a pair scorer, in bounded memory;
* ``method.py`` -- the registered method ``zsml``; ``nca.py`` -- NCA, the metric learner ZSML is compared with;
* ``analyses.py`` -- ``every_pair`` (every ordered pair of a split) and the inter-dataset ``transfer``;
* ``recipes.py`` -- the protocol: the named configs, seeds, grids and choice rules every page reads;
* ``explore.py`` -- the chapter's explorer: Eq. 3's continuous labels as alpha moves;
* ``paper.py`` -- ``PAPER``, the paper's record in :data:`zslib.engine.registry.PAPERS`.

Chapters: ``book/zsml.ipynb`` (derivation, main result), ``book/zsml_experiments.ipynb`` (choices on validation
classes, ablations, NCA, every pair, transfer); their tables, figures and sentences are :mod:`zslib.present.zsml`.
"""
from zslib.methods.zsml import method, nca, paper  # noqa: F401  (register the methods and the paper)
