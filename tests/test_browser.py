"""The rendered book as a reader meets it: every page in headless Chromium (scripts/browse_book.py).

The check runs on the real ``_build/html`` after the book build (``built_book``), and on a tiny book
built here with the book's own ``_config.yml``: it must pass on the tiny book as built, and fail on a copy
of it in which one page is broken (a missing image, raw TeX, a wrong Colab link, a dead link or anchor, a
script error, a TeX error, an undefined macro, an interactive explorer that does not respond). The tiny
book's second page carries two explorers (a slider; a menu over dots to point at), which the check operates.

Needs Chromium, the Python package playwright and a local copy of MathJax 3 (``make mathjax``); without
them the tests skip with one line saying what to install (``.ci/run`` installs them when it can, and sets
``ZS_BROWSER_TESTS=required`` so that CI fails rather than skips).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "scripts" / "build_book.py"

pytestmark = pytest.mark.book

_spec = importlib.util.spec_from_file_location("browse_book", REPO / "scripts" / "browse_book.py")
browse = sys.modules.setdefault("browse_book", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(browse)


MISSING = browse.missing_requirements()
WHAT_TO_INSTALL = "browser tests need " + "; ".join(MISSING)
if MISSING and os.environ.get("ZS_BROWSER_TESTS") != "required":
    pytest.skip(WHAT_TO_INSTALL, allow_module_level=True)  # one line in the summary


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium for the whole session (where CI installed what it needs, a missing piece is an
    error, not a skip)."""
    if MISSING:
        pytest.fail(WHAT_TO_INSTALL, pytrace=False)
    with browse.open_chromium() as browser:
        yield browser


def _report(problems) -> str:
    return "\n".join(str(p) for p in problems)


# ---------------------------------------------------------------- the real book

def test_every_page_of_the_built_book_reads_well_in_a_browser(chromium, built_book):
    timings = {}
    problems = browse.check_book(REPO, built_book, browser=chromium, timings=timings)
    assert not problems, f"{len(problems)} problem(s) a reader meets in the built book:\n" + _report(problems)
    assert set(timings) == set(browse.toc_pages(REPO))
    for page in timings:
        assert (REPO / "_build" / "screenshots" / f"{page}.png").stat().st_size > 0


# ---------------------------------------------------------------- a tiny book, sound and broken

FIRST = [  # book/first.ipynb: (cell type, source)
    ("markdown", "# First chapter"),
    ("markdown", textwrap.dedent(r"""
        Inline math $\|x\|_2$, a macro of `_config.yml` $x \in \R^d$, and a display formula

        $$
        d(x, y) = \|f(x) - f(y)\|_2^2 .
        $$

        The [second chapter](second.ipynb) has {ref}`its details <sec-details>`; the method comes from
        {cite}`chen2022cml`.
        """)),
    ("code", "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(3, 2))\n"
             "ax.plot([0, 1, 2], [1, 0, 1])\nplt.show()"),
]
SECOND = [
    ("markdown", "# Second chapter"),
    ("markdown", "(sec-details)=\n## Details\n\nA sum $\\sum_i a_i^2$ and back to the [first](first.ipynb)."),
    ("code", "print('a printed $5 is not math')"),
    # two interactive explorers (zslib.analysis.explorers): a slider, and a menu over dots to point at
    ("code", "from zslib.analysis import explorers\nfrom zslib.methods.zsml.explore import zsml_labels\n"
             "zsml_labels(alphas=(0.1, 0.3, 0.5), pairs=60)"),
    ("code", "import numpy as np\nrng = np.random.default_rng(0)\n"
             "explorers.embedding({'A': rng.normal(size=(12, 4)), 'B': rng.normal(size=(12, 4))},\n"
             "                    labels=np.repeat(np.arange(3), 4), images=rng.random((12, 8, 8, 3)), max_iter=250)"),
]


def browser_tiny_book(folder: Path) -> Path:
    """A book of a markdown root and two notebooks (math with the configured macros, a figure, a
    citation, links and a cross-reference) with the real ``_config.yml``, its local extensions and the
    references."""
    shutil.copy(REPO / "_config.yml", folder / "_config.yml")
    shutil.copy(REPO / "references.bib", folder / "references.bib")
    shutil.copytree(REPO / "_ext", folder / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - caption: Chapters
            chapters:
              - file: book/first
              - file: book/second
        """))
    (folder / "book").mkdir()
    (folder / "book" / "intro.md").write_text(
        "# Tiny book\n\nStart with [the first chapter](first.ipynb).\n\n## References\n\n```{bibliography}\n```\n")
    for name, cells in (("first", FIRST), ("second", SECOND)):
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell(src.strip()) if kind == "markdown" else nbformat.v4.new_code_cell(src)
            for kind, src in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / "book" / f"{name}.ipynb")
    return folder


@pytest.fixture(scope="module")
def tiny_book(chromium, tmp_path_factory):
    root = browser_tiny_book(tmp_path_factory.mktemp("browser_book"))
    proc = subprocess.run([sys.executable, str(BUILD_SCRIPT), "--root", str(root), "--no-calibration"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return root


def test_the_tiny_book_carries_its_explorers_static_view_only(tiny_book):
    """myst-nb shows the explorers' static view and loads no widget JavaScript (``_config.yml``)."""
    page = (tiny_book / "_build" / "html" / "book" / "second.html").read_text()
    assert page.count('class="zs-explorer"') == 2
    assert "html-manager" not in page and "require.min.js" not in page
    assert "Error displaying widget" not in page
    assert "widget-state+json" not in page  # the build asks for the static view only (ZS_EXPLORERS=static)


def test_the_tiny_book_as_built_has_no_problem(chromium, tiny_book):
    start = time.perf_counter()
    problems = browse.check_book(tiny_book, browser=chromium)
    seconds = time.perf_counter() - start
    assert not problems, _report(problems)
    pages = browse.toc_pages(tiny_book)
    assert pages == ["book/intro", "book/first", "book/second"]
    for page in pages:
        assert (tiny_book / "_build" / "screenshots" / f"{page}.png").stat().st_size > 1000
    print(f"browser check of {len(pages)} tiny pages: {seconds:.1f} s")


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path.name}: the tiny book changed, update the breakage"
    path.write_text(text.replace(old, new, count))


def _remove_first_image(html: Path) -> None:
    src = re.search(r'<img [^>]*src="\.\./(_images/[^"]+\.png)"', (html / "book/first.html").read_text()).group(1)
    (html / src).unlink()


def _first_formula(page: Path) -> str:
    return re.search(r'<span class="math notranslate nohighlight">(.*?)</span>', page.read_text()).group(1)


OUTPUT_LINE = "</span>a printed $5 is not math"  # the output of the second chapter's code cell (not its source)

BREAKAGES = {  # name: (how to break the copy, the page, the kind of problem, a piece of its message)
    "missing image": (_remove_first_image, "book/first", "image", "_images/"),
    "raw dollar math": (lambda h: _edit(h / "book/first.html", "<h1>First chapter",
                                        "<p>a distance $d(x, y)$ left raw</p><h1>First chapter"),
                        "book/first", "math", "$d(x, y)$"),
    "unrendered TeX delimiters": (lambda h: _edit(h / "book/second.html", "<h2>Details",
                                                  "<p>see \\(a + b\\) here</p><h2>Details"),
                                  "book/second", "math", "\\(a + b\\)"),
    "TeX error": (lambda h: _edit(h / "book/second.html", "\\sum_i a_i^2", "\\sum_i a_i^2^3"),
                  "book/second", "math", "TeX error"),
    "undefined macro": (lambda h: _edit(h / "book/first.html", "\\R^d", "\\Rnotdefined^d"),
                        "book/first", "math", "undefined macro"),
    "wrong Colab link": (lambda h: _edit(h / "book/second.html", "/blob/main/book/second.ipynb",
                                         "/blob/main/second.ipynb"), "book/second", "colab", "should be"),
    "no Colab link": (lambda h: _edit(h / "book/first.html", "https://colab.research.google.com/github/",
                                      "https://example.org/github/", count=-1), "book/first", "colab",
                      "no Colab launch link"),
    "dead anchor": (lambda h: _edit(h / "book/first.html", 'href="second.html#sec-details"',
                                    'href="second.html#no-such-section"'), "book/first", "link", "#no-such-section"),
    "missing page": (lambda h: (h / "book/second.html").unlink(), "book/second", "load", "no page"),
    "link to a missing file": (lambda h: _edit(h / "book/intro.html", 'href="first.html"><span',
                                                                   'href="frist.html"><span'),
                               "book/intro", "link", "frist.html"),
    "script error": (lambda h: _edit(h / "book/second.html", "</body>", "<script>notDefinedAnywhere()</script></body>"),
                     "book/second", "console", "notDefinedAnywhere"),
    "missing stylesheet": (lambda h: (h / "_static" / "pygments.css").unlink(), "book/intro", "console",
                           "_static/pygments.css"),
    "an explorer that does not respond": (lambda h: _edit(h / "book/second.html", "view.innerHTML = spec.states[key];",
                                                          "void key;", count=-1),
                                          "book/second", "explorer", "did not change what it shows"),
    "an explorer whose dots show no photo": (lambda h: _edit(h / "book/second.html", ":hover .zs-photo,#zs-explorer",
                                                              ":hover .zs-none,#zs-explorer"),
                                             "book/second", "explorer", "pointing at a dot showed no photo"),
    "an explorer whose view asks the network": (lambda h: _edit(h / "book/second.html", "view.innerHTML = spec.states[key];",
                                                                "view.innerHTML = spec.states[key] + '<img src=\"https://example.org/e.png\">';"),
                                                "book/second", "network", "https://example.org/e.png"),
    "a request to the network": (lambda h: _edit(h / "book/intro.html", "</body>",
                                                 '<img src="https://example.org/x.png"></body>'),
                                 "book/intro", "network", "https://example.org/x.png"),
    "an output line wider than its box": (lambda h: _edit(h / "book/second.html", OUTPUT_LINE,
                                                           "</span>a_printed_token_" + "that_does_not_break_" * 30),
                                          "book/second", "output", "wider than its box"),
    "a progress bar": (lambda h: _edit(h / "book/second.html", OUTPUT_LINE,
                                       "</span>train:  45%|\u2588\u2588\u2588\u2588      | 9/20 [00:01<00:02, 4.1it/s]"),
                       "book/second", "output", "progress bar"),
    "a local path": (lambda h: _edit(h / "book/second.html", OUTPUT_LINE,
                                     "</span>results in /work/main/results/run.json"),
                     "book/second", "output", "/work/main/results/run.json"),
    "a skipped section with the data declared": (
        lambda h: _edit(h / "book/first.html", "<h1>First chapter<a", "<p>The figure is skipped here.</p><h1>First chapter<a"),
        "book/first", "data", "skipped", {"require_data": True}),
    "a photo section without an image": (
        lambda h: _edit(h / "book/second.html", "<h2>Details",
                        '<section id="photos"><h2>On the photographs</h2><p>no figure</p></section><h2>Details'),
        "book/second", "data", "On the photographs", {"require_data": True}),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_a_broken_page_in_a_copy_of_the_tiny_book_is_caught(chromium, tiny_book, tmp_path, name):
    breakage, page, kind, words, *options = BREAKAGES[name]
    copy = tmp_path / "book"
    shutil.copytree(tiny_book, copy, ignore=shutil.ignore_patterns(".jupyter_cache", "screenshots"))
    breakage(copy / "_build" / "html")
    problems = browse.check_book(copy, browser=chromium, pages=[page],  # the sound pages: the test above
                                 **(options[0] if options else {}))
    hits = [p for p in problems if p.page == page and p.kind == kind and words in p.detail]
    assert hits, f"{name}: expected a {kind} problem on {page} mentioning {words!r}; found:\n" + _report(problems)
