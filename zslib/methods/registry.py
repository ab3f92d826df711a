"""The registry of methods: :data:`METHODS` maps a name (``Config.method``) to its class.

A method registers itself with the :func:`register` decorator in its own module (each paper's
``method.py``); this module imports nothing of zslib, so a method module, the configuration and the runner
can all import it without a cycle. :mod:`zslib.methods` imports every paper's folder once, which fills it.
"""
from __future__ import annotations

__all__ = ["METHODS", "register", "get_method", "describe_methods"]

#: Every registered method class, by name.
METHODS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: add a method to :data:`METHODS` under ``cls.name``."""
    if not cls.name or not cls.paper:
        raise ValueError(f"{cls.__name__} needs a name and a paper to be registered")
    if cls.name in METHODS and METHODS[cls.name] is not cls:
        raise ValueError(f"a method named {cls.name!r} is registered already ({METHODS[cls.name].__name__})")
    METHODS[cls.name] = cls
    return cls


def get_method(name: str) -> type:
    """The method class registered as ``name``; an unknown name lists the registered ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)} (python -m zslib methods "
                         "describes them)")
    return METHODS[name]


def describe_methods() -> str:
    """Every registered method with its paper, equations and parameters (what ``python -m zslib methods`` prints)."""
    return "\n\n".join(METHODS[name].describe() for name in sorted(METHODS))
