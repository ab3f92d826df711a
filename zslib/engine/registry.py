"""The registries: :data:`METHODS` maps a name (``Config.method``) to its :class:`~zslib.engine.method.Method`, and
:data:`PAPERS` maps a paper's key to its :class:`~zslib.engine.paper.Paper` record.

The engine owns the interfaces (:mod:`zslib.engine.method`, :mod:`zslib.engine.paper`) and these registries; the
methods and papers live upstairs, one folder per paper under the plug-in package :data:`PLUGINS`, and register
themselves (:func:`register`, :func:`register_paper`) when their module is imported. The engine never imports a
paper by name: a lookup of a name that is not registered yet imports the plug-in package's modules one at a time
until the name appears (so ``get_method("cml")`` loads the papers before ``cml`` in the package's order, not all
five), and iterating a registry imports them all. :data:`PAPERS` iterates in the order of the book
(:attr:`Paper.position <zslib.engine.paper.Paper.position>`).
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, MutableMapping

from zslib.engine.paper import Paper

__all__ = ["METHODS", "PAPERS", "PLUGINS", "register", "register_paper", "get_method", "get_paper",
           "describe_methods"]

#: The package whose modules and folders hold the registered methods and papers (one folder per paper).
PLUGINS = "zslib.methods"


class _Registry(MutableMapping):
    """Every registered item of one kind by name; filled lazily from :data:`PLUGINS`. ``order`` sorts the names
    when the registry is iterated (default: the order of registration)."""

    def __init__(self, kind: str, order: Callable[[object], object] | None = None) -> None:
        self.kind = kind
        self._items: dict[str, object] = {}
        self._order = order
        self._pending: list[str] | None = None  # plug-in modules not imported yet, in package order

    def _next_plugins(self) -> Iterator[None]:
        if self._pending is None:
            package = importlib.import_module(PLUGINS)
            self._pending = [f"{PLUGINS}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
                             if not info.name.startswith("_")]
        while self._pending:
            importlib.import_module(self._pending.pop(0))
            yield

    def _add(self, name: str, item: object) -> None:
        known = self._items.get(name)
        if known is not None and known is not item:
            raise ValueError(f"a {self.kind} named {name!r} is registered already ({known!r:.80})")
        self._items[name] = item

    def __getitem__(self, name: str):
        if name not in self._items:
            for _ in self._next_plugins():
                if name in self._items:
                    break
        return self._items[name]

    def __setitem__(self, name: str, item: object) -> None:  # a test's stand-in; register() checks names
        self._items[name] = item

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def _load_all(self) -> dict[str, object]:
        for _ in self._next_plugins():
            pass
        if self._order is None:
            return dict(self._items)
        return dict(sorted(self._items.items(), key=lambda kv: self._order(kv[1])))

    def __iter__(self) -> Iterator[str]:
        return iter(self._load_all())

    def __len__(self) -> int:
        return len(self._load_all())


#: Every registered method class, by name (iterating it imports every plug-in module).
METHODS = _Registry("method")

#: Every paper of the book (:class:`~zslib.engine.paper.Paper`), by key, in the order of the book.
PAPERS = _Registry("paper", order=lambda paper: paper.position)


def register(cls: type) -> type:
    """Class decorator: add a method to :data:`METHODS` under ``cls.name``."""
    if not cls.name or not cls.paper:
        raise ValueError(f"{cls.__name__} needs a name and a paper to be registered")
    known = METHODS._items.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"a method named {cls.name!r} is registered already ({known.__name__})")
    METHODS._add(cls.name, cls)
    return cls


def register_paper(paper):
    """Add a :class:`~zslib.engine.paper.Paper` to :data:`PAPERS` under ``paper.key`` and return it."""
    if not isinstance(paper, Paper):
        raise TypeError(f"register_paper takes a zslib.engine.paper.Paper, got {type(paper).__name__}")
    PAPERS._add(paper.key, paper)
    return paper


def get_method(name: str) -> type:
    """The method class registered as ``name``; an unknown name lists the registered ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)} (python -m zslib methods "
                         "describes them)")
    return METHODS[name]


def get_paper(key: str):
    """The :class:`~zslib.engine.paper.Paper` of ``key`` (a folder of :data:`PLUGINS`, e.g. ``"deml"``); an unknown
    key lists the papers."""
    if key not in PAPERS:
        raise KeyError(f"no paper {key!r}; the papers are {list(PAPERS)}")
    return PAPERS[key]


def describe_methods() -> str:
    """Every registered method with its paper, equations and parameters (what ``python -m zslib methods`` prints)."""
    return "\n\n".join(METHODS[name].describe() for name in sorted(METHODS))
