"""Fixes to the book's HTML that the browser tests (tests/test_browser.py) found; a local Sphinx
extension, listed under ``sphinx.local_extensions`` in ``_config.yml``.

* **An inline script written twice.** sphinx-thebe registers its configuration (``const THEBE_JS_URL =
  ...``) as an inline script after the HTML builder has started. Sphinx 7.4 then adds it to the page
  twice (once as it is registered, with no file name, and again when writing starts, with an empty file
  name, which its duplicate check treats as different), and the second copy throws "Identifier
  'THEBE_JS_URL' has already been declared" on every page. Each page keeps the first of identical scripts.
* **Printed lines cut at the box's edge.** A text output (``print``) is a ``<pre>`` that keeps every line on
  one line, so a sentence longer than the column (about 90 characters) ran out of its box. Text outputs wrap
  at spaces (:data:`WRAP_OUTPUT_CSS`); a token longer than the column still overflows, and the browser check
  reports it.
* **Wide tables cut at the column's edge.** A table output (a DataFrame's HTML) wider than the text column was
  clipped, its last columns out of reach. Every HTML output scrolls sideways inside its own box
  (:data:`SCROLL_TABLES_CSS`), so a wide table stays whole and the page keeps its column; the browser check
  (``scripts/browse_book.py``, ``table``) reports a table that is still cut.
"""
from __future__ import annotations


def _script_key(js) -> tuple:
    attributes = getattr(js, "attributes", {}) or {}
    return (getattr(js, "filename", js) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        key = _script_key(js)
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"] = kept


WRAP_OUTPUT_CSS = ("<style>.cell_output .output.stream pre, .cell_output .output.text_plain pre "
                   "{white-space: pre-wrap;}</style>")


SCROLL_TABLES_CSS = ("<style>.cell_output .output.text_html {overflow-x: auto; max-width: 100%;}"
                     ".cell_output .output.text_html table {max-width: none;}</style>")


def wrap_text_outputs(app, pagename, templatename, context, doctree) -> None:
    context["metatags"] = context.get("metatags", "") + WRAP_OUTPUT_CSS + SCROLL_TABLES_CSS


def setup(app):
    app.connect("html-page-context", drop_duplicate_scripts)
    app.connect("html-page-context", wrap_text_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
