"""The two shapes every chapter shows its results in: a :class:`Study` and a :class:`Section`.

A **study** is the set of recorded grids one chapter reads. Each grid (``{label: Config}``, named by the paper's
recipes) is read from the results store the first time it is asked for and kept; a grid whose runs are not all
stored is ``None`` and the reason is kept in :attr:`Study.missing` for the page to state. With ``train`` (the
default when the active profile is the study's own) missing runs are trained instead.

A **section** is what one chapter cell displays: a caption, a figure, a table, notes below it and the paper's
own tables that go with it, shown in that order when the section is the last expression of a cell. Every
chapter displays results this way, so a section looks the same on every page and its text can be tested
without a notebook (:meth:`Section.markdown`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import matplotlib.pyplot as plt

import zslib
from zslib.engine.grid import MissingRunsError, run_grid
from zslib.engine.store import results_dir
from zslib.reported import reported_frame

__all__ = ["Section", "Sections", "Study"]


@dataclass
class Section:
    """One displayed result: ``caption`` (Markdown above), ``figure`` (a matplotlib figure), ``table`` (a
    DataFrame or Styler), ``notes`` (Markdown paragraphs below) and ``paper`` (``(bibkey, table)`` pairs of the
    paper's printed tables, :func:`zslib.reported.reported_frame`, each under its citation)."""

    caption: str = ""
    table: object = None
    figure: object = None
    notes: list = field(default_factory=list)
    paper: tuple = ()

    def markdown(self) -> str:
        """The section's text (caption, then notes), as it reads on the page."""
        return "\n\n".join(t for t in (self.caption, *self.notes) if t)

    def _ipython_display_(self):
        from IPython.display import Markdown, display  # optional: the 'notebook' extra

        if self.caption:
            display(Markdown(self.caption))
        if self.figure is not None:
            display(self.figure)
            plt.close(self.figure)  # shown once: the inline backend does not show it again at the end of the cell
        if self.table is not None:
            display(self.table)
        if self.notes:
            display(Markdown("\n\n".join(self.notes)))
        for bibkey, table in self.paper:
            frame = reported_frame(table, paper=bibkey)
            display(Markdown(f"*{frame.attrs['citation']}*"))
            display(frame)


class Sections(list):
    """Sections shown one after another (a cell that shows more than one)."""

    def __init__(self, sections: Iterable[Section] = ()):
        super().__init__(s for s in sections if s is not None)

    def markdown(self) -> str:
        return "\n\n".join(s.markdown() for s in self)

    def _ipython_display_(self):
        from IPython.display import display  # optional: the 'notebook' extra

        for s in self:
            display(s)


class Study:
    """The recorded grids of one chapter, each read on first use (see the module docstring).

    ``profile`` is the profile whose runs the study reads (a subclass sets it); ``train`` defaults to whether
    that profile is the active one. :meth:`grid` is the one way a study reads runs.
    """

    profile: str = "real"

    def __init__(self, train: bool | None = None):
        self.train = zslib.get_profile().name == self.profile if train is None else bool(train)
        self.missing: dict[str, str] = {}
        self._grids: dict = {}

    def grid(self, name: str, configs: Mapping, seeds: Iterable[int] | None = None) -> dict | None:
        """``{label: [Result per seed]}`` of the grid ``configs`` (``{label: Config}``), kept under ``name``; ``None``
        when some runs are not stored and the study does not train (the reason is kept in :attr:`missing`)."""
        if name not in self._grids:
            try:
                self._grids[name] = run_grid(dict(configs), None if seeds is None else tuple(seeds),
                                             stored_only=not self.train)
            except MissingRunsError as err:
                self.missing[name] = str(err)
                self._grids[name] = None
        return self._grids[name]

    def missing_note(self, *names: str) -> str:
        """One Markdown line per grid among ``names`` (default: all) that is not stored, saying what to run."""
        lines = [f"*{n}: not shown, {why}.*" for n, why in self.missing.items() if not names or n in names]
        return "\n\n".join(lines)

    @classmethod
    def cached(cls, train: bool | None = None):
        """One study per class, training flag and results folder in a session, so the chapter's cells share
        one reading of the runs."""
        key = (cls, train, str(results_dir()))
        if key not in _STUDIES:
            _STUDIES[key] = cls(train)
        return _STUDIES[key]


_STUDIES: dict = {}
