"""Adapt-Adv: general discriminative feature learning and an adaptive class adversary (Al-Kaabi, Monsefi and
Zabihzadeh, Applied Intelligence 2022; ``alkaabi2022adaptadv``).

* ``spatial_attention.py`` -- attention over an intermediate map (multiplicative, additive, multi-dimensional:
  Eqs. 9-12);
* ``gdfl.py`` -- :class:`~zslib.methods.adapt_adv.gdfl.GDFLNet`, the attended maps fused into the embedding;
* ``class_adversary.py`` -- the class adversarial classifier and its adaptive lambda (Eqs. 19-22);
* ``method.py`` -- the registered method ``adapt_adv``;
* ``analyses.py`` -- ``cached_map_gradcam``: Grad-CAM of a trained model on the cached maps;
* ``recipes.py`` -- the protocol: the named configs, seeds, grids and choice rules every page reads;
* ``explore.py`` -- ``adapt_adv_lambda``: the interactive explorer of Eq. 22 along a run;
* ``paper.py`` -- ``PAPER``, the paper's record in :data:`zslib.engine.registry.PAPERS`.

Chapters: ``book/adapt_adv.ipynb`` (derivation, ablation, main result) and ``book/adapt_adv_experiments.ipynb``
(the sweeps, the choices on validation classes, three losses, attention and Grad-CAM maps); their tables, figures
and generated sentences are :mod:`zslib.present.adapt_adv`.
"""
from zslib.methods.adapt_adv import method, paper  # noqa: F401  (register the method and the paper)
