"""The registry of methods: :data:`METHODS` maps a name (``Config.method``) to its :class:`~zslib.engine.method.Method`.

The engine owns the interface (:mod:`zslib.engine.method`) and this registry; the methods live upstairs, one
folder per paper under the plug-in package :data:`PLUGINS`, and register themselves with :func:`register` when
their module is imported. The engine never imports a paper by name: a lookup of a name that is not registered
yet imports the plug-in package's modules one at a time until the name appears (so ``get_method("cml")`` loads
the papers before ``cml`` in the package's order, not all five), and iterating :data:`METHODS` imports them all.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, MutableMapping

__all__ = ["METHODS", "PLUGINS", "register", "get_method", "describe_methods"]

#: The package whose modules and folders hold the registered methods (one folder per paper).
PLUGINS = "zslib.methods"


class _Methods(MutableMapping):
    """Every registered method class by name; filled lazily from :data:`PLUGINS`."""

    def __init__(self) -> None:
        self._classes: dict[str, type] = {}
        self._pending: list[str] | None = None  # plug-in modules not imported yet, in package order

    def _next_plugins(self) -> Iterator[None]:
        if self._pending is None:
            package = importlib.import_module(PLUGINS)
            self._pending = [f"{PLUGINS}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
                             if not info.name.startswith("_")]
        while self._pending:
            importlib.import_module(self._pending.pop(0))
            yield

    def _add(self, cls: type) -> None:
        self._classes[cls.name] = cls

    def __getitem__(self, name: str) -> type:
        if name not in self._classes:
            for _ in self._next_plugins():
                if name in self._classes:
                    break
        return self._classes[name]

    def __setitem__(self, name: str, cls: type) -> None:  # a test's stand-in method; register() checks names
        self._classes[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._classes[name]

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def _load_all(self) -> dict[str, type]:
        for _ in self._next_plugins():
            pass
        return self._classes

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._load_all()))

    def __len__(self) -> int:
        return len(self._load_all())


#: Every registered method class, by name (iterating it imports every plug-in module).
METHODS = _Methods()


def register(cls: type) -> type:
    """Class decorator: add a method to :data:`METHODS` under ``cls.name``."""
    if not cls.name or not cls.paper:
        raise ValueError(f"{cls.__name__} needs a name and a paper to be registered")
    known = METHODS._classes.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"a method named {cls.name!r} is registered already ({known.__name__})")
    METHODS._add(cls)
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
