"""Long tables a reader can search, sort and page through in the static book.

:func:`searchable` makes a ``pandas.DataFrame`` a table that displays with
`itables <https://mwouts.github.io/itables/>`_ (DataTables) in its *offline* mode: the DataTables code is written
into the page once, so the built page asks the network for nothing (the browser tests forbid that) and the table
works without a connection. Every row is kept (no down-sampling). Without itables installed (it is in the ``book``
extra) the whole table is shown as a plain HTML table, with a line saying so.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["searchable", "SearchableTable"]

_READY = False


class SearchableTable:
    """A table shown searchable, sortable and paged when it is displayed (the last expression of a cell, or the
    ``table`` of a :class:`zslib.present.base.Section`); ``frame`` is the DataFrame it shows, whole."""

    def __init__(self, frame, caption: str | None = None, page_length: int = 10):
        self.frame, self.caption, self.page_length = frame, caption, page_length

    def __repr__(self) -> str:
        return f"{self.caption or 'table'}\n{self.frame.to_string()}"

    def _ipython_display_(self):
        global _READY
        from IPython.display import Markdown, display

        try:
            import itables
        except ImportError:
            display(Markdown("*A plain table: install `itables` (the `book` extra of zslib) to search and sort it.*"))
            with pd.option_context("display.max_rows", None, "display.max_columns", None):
                display(self.frame)
            return
        if not _READY:
            itables.init_notebook_mode(all_interactive=False, connected=False)
            _READY = True
        itables.show(self.frame, caption=self.caption, maxBytes=0, pageLength=self.page_length, scrollX=True,
                     classes="display nowrap compact", showIndex=False)


def searchable(frame, caption: str | None = None, page_length: int = 10) -> SearchableTable:
    """``frame`` as a searchable, sortable, paged table (all rows; see the module docstring), shown when displayed."""
    return SearchableTable(frame, caption, page_length)
