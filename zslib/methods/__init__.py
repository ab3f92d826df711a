"""The methods of the book, one file each, behind one registry.

:data:`METHODS` maps a name (``Config.method``) to its class; every class names the paper and the
equations it implements and declares its hyperparameters (``Config.method_params``). The base class and
the hooks a method may define are in :mod:`zslib.methods.base`. ``python -m zslib methods`` lists them.
"""
from __future__ import annotations

from .base import Method, ObjectiveMethod, Param, boolean, number, objective_method, one_of

__all__ = ["METHODS", "register", "get_method", "Method", "Param", "number", "one_of", "boolean",
           "ObjectiveMethod", "objective_method", "describe_methods"]

METHODS: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: add a method to :data:`METHODS` under ``cls.name``."""
    if not cls.name or not cls.paper:
        raise ValueError(f"{cls.__name__} needs a name and a paper to be registered")
    if cls.name in METHODS and METHODS[cls.name] is not cls:
        raise ValueError(f"a method named {cls.name!r} is registered already ({METHODS[cls.name].__name__})")
    METHODS[cls.name] = cls
    return cls


def get_method(name: str) -> type[Method]:
    """The method class registered as ``name``; an unknown name lists the registered ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)} (python -m zslib methods "
                         "describes them)")
    return METHODS[name]


def describe_methods() -> str:
    """Every registered method with its paper, equations and parameters (what ``python -m zslib methods`` prints)."""
    return "\n\n".join(METHODS[name].describe() for name in sorted(METHODS))


# The methods register themselves on import.
from . import adapt_adv, baseline, cml, deml, jrd, nca, pretrained, zsml  # noqa: E402,F401
