"""The methods of the book: one folder per paper, found by the engine's registry.

=====================  =====================================================================================
``baseline.py``        the metric loss alone; ``pretrained.py``: no training at all (the untrained floor)
``cml/``               CML (Chen et al., TNNLS 2022): energy and diversity confusion
``deml/``              DeML (Chen and Deng, CVPR 2019): object attention, channel attention, the adversary
``adapt_adv/``         Adapt-Adv (Al-Kaabi et al., Appl. Intell. 2022): GDFL attention, the class adversary
``zsml/``              ZSML (Xu et al., IJCAI 2019): relation kernels, cross-update regression; NCA beside it
``jrd/``               JRD (Chu et al., ICML 2020): joint representation similarity, the H-divergence bound
=====================  =====================================================================================

The interface every method implements (:class:`~zslib.engine.method.Method`, :class:`~zslib.engine.method.Param`)
and the registry (:data:`~zslib.engine.registry.METHODS`) live in the engine, which imports nothing from here:
this package is the engine's plug-in package (:data:`zslib.engine.registry.PLUGINS`), and a lookup of a method
name imports its modules until the name is registered. Each paper's folder holds what its chapter teaches: the
paper's math (one function per equation), its :class:`~zslib.engine.method.Method` subclass in ``method.py``
(registered on import), and, where the chapter needs a trained model, ``analyses.py``. ``python -m zslib
methods`` lists every method with its paper, equations, parameters and folder.
"""
