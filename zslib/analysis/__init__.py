"""Looking at trained models, on every method alike.

=====================  ========================================================================================
``records``            analysis records: numbers that need a run's trained model, stored beside the run (each
                       paper registers its own analyses in ``zslib/methods/<paper>/analyses.py``)
``reproduce``          does a retrained run give its recorded numbers?
``probe``              linear attribute probes of an embedding
``saliency``           activation maps, Grad-CAM for embeddings, the share of a map on each part
``localization``       how well an attention map finds the object
``viz``                the book's figures
=====================  ========================================================================================
"""
import importlib

_SUBMODULES = {"records", "reproduce", "probe", "saliency", "localization", "viz"}


def __getattr__(name):  # PEP 562: zslib.analysis.viz etc. import on first use
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'zslib.analysis' has no attribute {name!r}")
