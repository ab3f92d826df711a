"""A paper of the book as one record: :class:`Paper`, registered in :data:`zslib.engine.registry.PAPERS`.

Each paper's folder (``zslib/methods/<key>/paper.py``) declares one record and registers it with
:func:`zslib.engine.registry.register_paper` when the folder is imported. Every list of papers in the package (the
index page's findings, the deviations tables, the chapter cards, the exercise banks) iterates over
:data:`~zslib.engine.registry.PAPERS`; none types the papers by hand and none imports a paper by a string.

What is costly to load (the reports that read recorded runs, the deviations table, the explorer, the exercises) is
held as a function that loads it when called, so that registering a paper costs no more than importing its method.
The engine names no paper: the records live upstairs, with the papers.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

__all__ = ["Paper"]


@dataclass(frozen=True)
class Paper:
    """One paper the book teaches and reproduces.

    ``key``: its folder under ``zslib/methods/`` (``"deml"``). ``name``: how the book writes the method
    (``"DeML"``). ``title``, ``bibkey`` (the entry of ``references.bib``), ``citation`` (authors, venue and year).
    ``methods``: the names it registers in :data:`~zslib.engine.registry.METHODS`, its own method first.
    ``chapters``: the stems of its notebooks under ``book/``, the main chapter first. ``position``: its place in
    the book's table of contents (``PAPERS`` iterates in this order).

    ``recipes``: the module of its protocol (named configs, seeds, grids and choice rules). ``reported()``: the
    paper's own tables as data (``{table: dict}``, :mod:`zslib.reported`). ``deviations()``: the rows of its table of
    departures from the paper (:mod:`zslib.analysis.deviations`). ``explorer()``: its interactive explorer's function
    (``zslib/methods/<paper>/explore.py``, built on :mod:`zslib.analysis.explorers`), or ``None``. ``analyses()``:
    imports the module of the analyses its chapters
    record (:mod:`zslib.analysis.records`; they register themselves), or ``None``. ``exercises()``: the checked
    exercises of its chapters. ``key_findings()``: the "Key findings" box of its main chapter, generated from the
    recorded runs (its first sentence is the paper's line on the index page).

    What the shared lists read from it: ``comparison``, its entry in the one-protocol comparison (a
    :class:`zslib.analysis.entry.Entry` built by its recipes), or ``None``; ``campaign(recipe)``, its plan in the
    fine-tuning campaign (a :class:`zslib.campaign.plan.MethodPlan` for a dataset's
    :class:`~zslib.campaign.plan.Recipe`), or ``None``; ``prerequisites``, each of its chapters' prerequisite
    chapters (the chapter cards, :mod:`zslib.teaching.path`); ``shared_methods``, the methods beside its own whose
    recorded runs a chapter of it shows (``{chapter: methods}``).
    """

    key: str
    name: str
    title: str
    bibkey: str
    citation: str
    methods: tuple[str, ...]
    chapters: tuple[str, ...]
    position: int
    recipes: ModuleType
    reported: Callable[[], Mapping[str, dict]]
    deviations: Callable[[], Sequence]
    exercises: Callable[[], Sequence]
    key_findings: Callable[[], object]
    explorer: Callable[[], Callable] | None = None
    analyses: Callable[[], object] | None = None
    comparison: object | None = None
    campaign: Callable[[object], object] | None = None
    prerequisites: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shared_methods: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self):
        if not self.key.isidentifier():
            raise ValueError(f"Paper.key must name the paper's folder (an identifier), got {self.key!r}")
        if not self.methods or not self.chapters:
            raise ValueError(f"the paper {self.key!r} needs at least one method and one chapter")
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "chapters", tuple(self.chapters))
        unknown = sorted(set(self.prerequisites) - set(self.chapters))
        if unknown:
            raise ValueError(f"the paper {self.key!r} gives prerequisites of chapters not its own: {unknown}")

    @property
    def method(self) -> str:
        """The name of the paper's own method (the first of :attr:`methods`)."""
        return self.methods[0]

    @property
    def chapter(self) -> str:
        """The stem of the paper's main chapter (the first of :attr:`chapters`)."""
        return self.chapters[0]

    def key_finding(self) -> str:
        """The paper's line on the index page: the first sentence of its "Key findings" box."""
        return self.key_findings().sentences[0]
