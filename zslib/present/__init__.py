"""The presentation floor: what the chapters show, built on one pair (:mod:`zslib.present.base`).

A :class:`~zslib.present.base.Study` reads a chapter's recorded grids lazily; a
:class:`~zslib.present.base.Section` (caption, figure, table, notes, the paper's own tables) displays itself
the same way in every chapter. The per-paper modules of this package hold the figures, tables and generated
sentences of one paper's chapters; the runs they read are named by the paper's ``recipes`` (under
:mod:`zslib.methods`), never here.
"""
from zslib.present.base import Section, Sections, Study

__all__ = ["Section", "Sections", "Study"]
