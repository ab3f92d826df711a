"""The engine: what every chapter and every method shares, and nothing of one paper.

=====================  ========================================================================================
``profile``            the three sizes (quick, real, full) and the device
``fields``             the fields a profile sets and the loop reads, declared once (Config, Profile, TrainSpec)
``config``             :class:`Config`, everything a run depends on, and the hash that names it
``runner``             one run: data, model, method, training, final metrics, result
``grid``               many runs in parallel, and the recorded grids the chapters read
``store``              results on disk with their provenance; whether a stored result may stand for a config
``kept_weights``       a recorded run's trained parameters, used once they give its recorded metrics again
``stats``              seeds, 95% intervals, paired differences
``losses``             the standard metric losses (triplet, N-pair, binomial, proxies, ...)
``evaluate``           retrieval and clustering metrics from one neighbour search
``data/``              SynthParts, the five real datasets, sampling, transforms, the image and feature caches
``models/``            backbones and the embedding head (a method's own networks live in its paper's folder)
``train/``             the loop (phases, not methods), checkpoints, precision, several processes
``checks``             input checks with one clear message each; ``cache``, ``threads``, ``progress``,
                       ``memory``, ``catalog``: plumbing
=====================  ========================================================================================
"""
import importlib

_SUBMODULES = {"profile", "fields", "config", "runner", "grid", "store", "kept_weights", "stats", "losses", "evaluate", "data",
               "models", "train", "checks", "cache", "threads", "progress", "memory", "catalog"}


def __getattr__(name):  # PEP 562: zslib.engine.evaluate etc. import on first use
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'zslib.engine' has no attribute {name!r}")
