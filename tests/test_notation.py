"""The book speaks one notation and to its readers: every chapter links the notation page (which promises that a
clash is announced where it happens), the pages carry no words about how the book was made, and a checked answer is
read in the words its question uses."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("*.ipynb"))

#: Phrases that speak of the book's making rather than to its reader.
PROCESS_WORDS = (r"\bfirst try\b", r"plain-text copy", r"\bissue \d+", r"this session")


def _markdown(path: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_links_the_notation_page(path):
    assert "](notation.md)" in _markdown(path), f"{path.name} does not link the notation page"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_speaks_of_how_it_was_made(path):
    text = _markdown(path)
    found = [m.group(0) for pattern in PROCESS_WORDS for m in re.finditer(pattern, text, flags=re.IGNORECASE)]
    assert not found, f"{path.name}: {found}"


def test_the_seen_and_unseen_classes_are_written_as_the_notation_page_writes_them():
    assert "\\mathcal C_s" in (BOOK / "notation.md").read_text()
    for path in CHAPTERS:
        assert "\\mathcal{Y}_s" not in _markdown(path) and "\\mathcal Y_s" not in _markdown(path), path.name

