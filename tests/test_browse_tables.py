"""The browser check of wide tables (scripts/browse_book.py, ``table``) and the CSS that keeps a table output whole
(_ext/html_fixes.py): a wide table cut by a clipping box or by the page's column is reported; the same table in a box
that scrolls, or in a notebook's HTML output with the book's CSS, is not."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("browse_book", REPO / "scripts" / "browse_book.py")
browse = sys.modules.setdefault("browse_book", importlib.util.module_from_spec(_spec))
if not hasattr(browse, "TABLES_JS"):
    _spec.loader.exec_module(browse)
sys.path.insert(0, str(REPO / "_ext"))
import html_fixes  # noqa: E402

ROW = "<tr>" + "".join(f"<td>column {i} hardware: NVIDIA H100 80GB HBM3</td>" for i in range(12)) + "</tr>"
TABLE = f"<table style='white-space: nowrap'>{ROW}</table>"


def _page(body: str, css: str = "") -> str:
    return (f"<html><head>{css}<style>main {{width: 600px; margin: 0 auto;}} "
            f".cell_output .output {{overflow: hidden;}}</style></head><body><main>{body}</main></body></html>")


def _problems(tmp_path, html: str) -> list[str]:
    missing = [m for m in browse.missing_requirements() if "MathJax" not in m]
    if missing:
        pytest.skip("; ".join(missing))
    path = tmp_path / "page.html"
    path.write_text(html)
    found = []
    with browse.open_chromium() as browser:
        tab = browser.new_page(viewport={"width": 1000, "height": 800})
        tab.goto(path.as_uri())
        browse.check_tables(tab.evaluate(browse.TABLES_JS), lambda kind, detail: found.append(f"{kind}: {detail}"))
    return found


def test_a_table_cut_by_a_box_or_the_column_is_reported_and_one_that_scrolls_is_not(tmp_path):
    clipped = _problems(tmp_path, _page(f"<div style='overflow: hidden; width: 600px'>{TABLE}</div>"))
    assert len(clipped) == 1 and "cut off by a box" in clipped[0] and "column 0" in clipped[0]
    loose = _problems(tmp_path, _page(TABLE))
    assert len(loose) == 1 and "wider than the page column" in loose[0]
    assert _problems(tmp_path, _page(f"<div style='overflow-x: auto'>{TABLE}</div>")) == []
    cell = "<table><tr><td style='overflow: hidden; max-width: 80px; white-space: nowrap'>a long hardware name " \
           "that the cell hides</td></tr></table>"
    assert "cell(s) cut inside the table" in _problems(tmp_path, _page(cell))[0]
    assert _problems(tmp_path, _page("<table><tr><td>narrow</td></tr></table>")) == []


def test_the_books_css_lets_a_wide_output_table_scroll_inside_its_box(tmp_path):
    output = f"<div class='cell_output'><div class='output text_html'>{TABLE}</div></div>"
    assert _problems(tmp_path, _page(output))  # the theme's clipping box cuts it ...
    assert _problems(tmp_path, _page(output, html_fixes.SCROLL_TABLES_CSS)) == []  # ... the book's CSS scrolls it
