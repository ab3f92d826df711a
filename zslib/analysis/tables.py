"""Long tables a reader can search, sort and page through in the static book.

:func:`searchable` shows a ``pandas.DataFrame`` with `itables <https://mwouts.github.io/itables/>`_ (DataTables)
in its *offline* mode: the DataTables code is written into the page once, so the built page asks the network
for nothing (the browser tests forbid that) and the table works without a connection. Every row is kept
(no down-sampling). Without itables installed (it is in the ``book`` extra) the whole table is shown as a plain
HTML table, with a line saying so.
"""
from __future__ import annotations

__all__ = ["searchable"]

_READY = False


def searchable(frame, caption: str | None = None, page_length: int = 10):
    """Display ``frame`` as a searchable, sortable, paged table (all rows; see the module docstring)."""
    global _READY
    from IPython.display import Markdown, display

    try:
        import itables
    except ImportError:
        import pandas as pd

        display(Markdown("*A plain table: install `itables` (the `book` extra of zslib) to search and sort it.*"))
        with pd.option_context("display.max_rows", None, "display.max_columns", None):
            display(frame)
        return
    if not _READY:
        itables.init_notebook_mode(all_interactive=False, connected=False)
        _READY = True
    itables.show(frame, caption=caption, maxBytes=0, pageLength=page_length, scrollX=True,
                 classes="display nowrap compact", showIndex=False)
