"""DeML: hybrid-attention decoupled metric learning (Chen and Deng, CVPR 2019; ``chen2019deml``).

* ``object_attention.py`` -- the random-walk object attention (OAM, Eqs. 1-2);
* ``attention_crop.py`` -- the crop and zoom that follow the attention map;
* ``channel_attention.py`` -- one channel-attention module (CAM, Eq. 3);
* ``learner_adversary.py`` -- the adversary ``F`` of Eq. 4 and the released code's hinge;
* ``decoupled_losses.py`` -- the decoupled binomial loss (Eq. 5) and the activation decay and non-trivial
  terms (Eq. 6);
* ``network.py`` -- :class:`~zslib.methods.deml.network.DeMLNet`, the I x J learners on one backbone;
* ``method.py`` -- the registered method ``deml``;
* ``analyses.py`` -- ``learner_attention``: the CAMs of a trained model, recorded beside its run;
* ``recipes.py`` -- the protocol: the named configs, seeds, grids and choice rules every page reads;
* ``explore.py`` -- the explorer of the object attention as the random walk runs longer;
* ``paper.py`` -- ``PAPER``, the paper's record in :data:`zslib.engine.registry.PAPERS`.

What the chapters show (tables, figures, generated sentences) is in :mod:`zslib.present.deml`.

Chapter: ``book/deml.ipynb`` (derivation, main results), ``book/deml_experiments.ipynb`` (the paper's tables,
the object attention scored, probes, more arms, Fig. 4 on photographs).
"""
from zslib.methods.deml import method, paper  # noqa: F401  (register the method and the paper)
