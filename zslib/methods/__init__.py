"""The methods of the book: one folder per paper, behind one registry.

=====================  =====================================================================================
``base.py``            :class:`Method` (the hooks the trainer calls: phases, parameter groups, terms),
                       :class:`Param` and the parameter checks
``registry.py``        :data:`METHODS`, :func:`register`, :func:`get_method`
``baseline.py``        the metric loss alone; ``pretrained.py``: no training at all (the untrained floor)
``cml/``               CML (Chen et al., TNNLS 2022): energy and diversity confusion
``deml/``              DeML (Chen and Deng, CVPR 2019): object attention, channel attention, the adversary
``adapt_adv/``         Adapt-Adv (Al-Kaabi et al., Appl. Intell. 2022): GDFL attention, the class adversary
``zsml/``              ZSML (Xu et al., IJCAI 2019): relation kernels, cross-update regression; NCA beside it
``jrd/``               JRD (Chu et al., ICML 2020): joint representation similarity, the H-divergence bound
=====================  =====================================================================================

Each paper's folder holds what its chapter teaches: the paper's math (one function per equation), its
:class:`Method` subclass in ``method.py`` (registered on import), and, where the chapter needs a trained
model, ``analyses.py`` (registered with :func:`zslib.analysis.records.register_analysis`, found by name
when a record is made; the method itself never imports the engine's runner). ``python -m zslib methods``
lists every method with its paper, equations, parameters and folder.
"""
from __future__ import annotations

from zslib.methods.base import Method, ObjectiveMethod, Param, boolean, number, objective_method, one_of
from zslib.methods.registry import METHODS, describe_methods, get_method, register

__all__ = ["METHODS", "register", "get_method", "Method", "Param", "number", "one_of", "boolean",
           "ObjectiveMethod", "objective_method", "describe_methods"]

# Importing each folder registers its method(s).
from zslib.methods import adapt_adv, baseline, cml, deml, jrd, pretrained, zsml  # noqa: E402,F401
