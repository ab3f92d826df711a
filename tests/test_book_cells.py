"""Every code cell a reader sees is short enough to read: at most 25 lines (the house rule).

Longer cells are plumbing: they move into zslib (a chapter calls a report function in a line or two) or are
collapsed on the page with a ``hide-input``, ``remove-input``, ``hide-cell`` or ``remove-cell`` tag.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((REPO / "book").glob("*.ipynb"))
MAX_LINES = 25
HIDDEN = {"hide-input", "remove-input", "hide-cell", "remove-cell"}


def long_visible_cells(path: Path, limit: int = MAX_LINES) -> list[tuple[int, int, str]]:
    """(number among the code cells from 1, lines, first line) of each visible code cell over ``limit`` lines."""
    out = []
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    for i, cell in enumerate(code, start=1):
        lines = cell.source.rstrip("\n").splitlines()
        if len(lines) > limit and not HIDDEN & set(cell.metadata.get("tags", [])):
            out.append((i, len(lines), lines[0][:70]))
    return out


def test_the_rule_sees_a_long_cell_and_its_tag(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("\n".join(["x = 1"] * 26)),
                                         nbformat.v4.new_code_cell("\n".join(["y = 2"] * 25))])
    nbformat.write(nb, tmp_path / "a.ipynb")
    assert long_visible_cells(tmp_path / "a.ipynb") == [(1, 26, "x = 1")]
    nb.cells[0].metadata["tags"] = ["hide-input"]
    nbformat.write(nb, tmp_path / "a.ipynb")
    assert long_visible_cells(tmp_path / "a.ipynb") == []


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_visible_code_cell_is_longer_than_25_lines(path):
    long = long_visible_cells(path)
    assert not long, (f"{path.name}: visible code cells over {MAX_LINES} lines (move the plumbing into zslib, or tag "
                      "the cell hide-input): " + "; ".join(f"code cell {i} ({n} lines: {first!r})" for i, n, first in long))
