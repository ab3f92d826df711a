"""A path through the book: what each chapter needs first, how long it reads, how long it computes.

:func:`chapter_card` is the line under each chapter's title. The prerequisites are the book's structure
(:func:`prerequisites`); the numbers are measured, never typed: the reading time is counted from the chapter's own
notebook (words of its text at 200 a minute, lines of its visible code at 20 a minute), the quick profile's compute
time is the chapter's execution time in the last book build (``_build/build_report.json``) or, where this copy has
not built the book (a clean clone, a pip install), the last measured time recorded with zslib
(:data:`COMPUTE_RECORD`, written by ``scripts/build_book.py``, with its date), and the real profile's compute time is
the training time the recorded runs of the chapter's methods took (their provenance).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from zslib.engine import profile as engine_profile  # repository_root() read when called, as zslib.engine.store does
from zslib.engine.registry import PAPERS
from zslib.engine.store import recorded_runs
from zslib.teaching.assignments import default_book_dir

__all__ = ["PREREQUISITES", "prerequisites", "SHARED_METHODS", "chapter_methods", "reading_minutes", "quick_seconds",
           "COMPUTE_RECORD", "recorded_quick_seconds", "real_seconds", "title", "chapter_card"]

#: The chapters' quick-profile execution times as last measured, with the date and how: ``{"measured": date,
#: "how": ..., "chapters": {stem: seconds}}``. ``scripts/build_book.py`` rewrites it after every quick-profile build
#: in which every chapter has a time and none failed; it is committed and installed with zslib, so that the cards of
#: a book built from a clean clone (whose own times exist only once its build has ended) show a measured number.
COMPUTE_RECORD = Path(__file__).with_name("compute_times.json")

#: chapter -> the chapters a reader should have read first (their titles are read from the notebooks), for the
#: chapters that belong to no paper; a paper's chapters declare theirs on its record
#: (:attr:`zslib.engine.paper.Paper.prerequisites`) and the comparison's are every paper's main chapter, both added by
#: :func:`prerequisites`
PREREQUISITES: dict[str, tuple[str, ...]] = {
    "how_to_use": (), "zero_shot_problem": ("how_to_use",), "datasets": ("zero_shot_problem",),
    "metrics": ("zero_shot_problem",), "deep_metric_learning": ("metrics",),
    "deep_metric_learning_compare": ("deep_metric_learning",),
    "deep_metric_learning_compare_proxies": ("deep_metric_learning_compare",),
    "generalization_gap": ("deep_metric_learning",), "compare": (), "recorded_runs": (),
}


def prerequisites(chapter: str) -> tuple[str, ...]:
    """The chapters a reader should have read before ``chapter``: :data:`PREREQUISITES`, a paper's own
    (:attr:`zslib.engine.paper.Paper.prerequisites`), and for the comparison the main chapter of every paper of
    :data:`zslib.engine.registry.PAPERS`."""
    if chapter == "compare":
        return (*PREREQUISITES["compare"], *(paper.chapter for paper in PAPERS.values()))
    for paper in PAPERS.values():
        if chapter in paper.prerequisites:
            return tuple(paper.prerequisites[chapter])
    return PREREQUISITES.get(chapter, ())


#: chapter -> the methods, beside its paper's own (:attr:`zslib.engine.paper.Paper.methods`), whose recorded
#: real-profile runs it shows: the comparison shows every paper's method beside the baseline head and the untrained
#: floor; a paper's chapters declare theirs on its record (:attr:`zslib.engine.paper.Paper.shared_methods`).
SHARED_METHODS = {"compare": ("baseline", "pretrained")}


def chapter_methods(chapter: str) -> tuple[str, ...]:
    """The methods whose recorded real-profile runs ``chapter`` shows: its paper's methods and those it shares
    (:data:`zslib.engine.registry.PAPERS`), every paper's own method for the comparison, and
    :data:`SHARED_METHODS`."""
    own = [m for paper in PAPERS.values() if chapter in paper.chapters
           for m in (*paper.methods, *paper.shared_methods.get(chapter, ()))]
    if chapter == "compare":
        own = [paper.method for paper in PAPERS.values()]
    return tuple(dict.fromkeys([*own, *SHARED_METHODS.get(chapter, ())]))


def _root() -> Path | None:
    return engine_profile.repository_root()


def reading_minutes(notebook: str | Path) -> int:
    """Minutes to read a notebook: its Markdown words at 200 a minute plus its visible code lines at 20 a minute."""
    nb = json.loads(Path(notebook).read_text())
    words, code = 0, 0
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            words += len(re.findall(r"\w+", text))
        elif cell["cell_type"] == "code" and not tags & {"hide-input", "remove-input", "hide-cell", "remove-cell"}:
            code += len(text.splitlines())
    return max(1, round(words / 200 + code / 20))


def quick_seconds(chapter: str, report: str | Path | None = None) -> float | None:
    """The chapter's execution time in the last book build (``_build/build_report.json``), if there was one."""
    root = _root()
    path = Path(report) if report else (root / "_build" / "build_report.json" if root else None)
    if path is None or not path.is_file():
        return None
    entry = json.loads(path.read_text()).get("chapters", {}).get(f"book/{chapter}.ipynb", {})
    return entry.get("seconds")


def recorded_quick_seconds(chapter: str, record: str | Path | None = None) -> tuple[float, str] | None:
    """(seconds, date measured) of the chapter in the committed record (:data:`COMPUTE_RECORD`), if it is there."""
    path = Path(record) if record else COMPUTE_RECORD
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    seconds = data.get("chapters", {}).get(chapter)
    return None if seconds is None else (float(seconds), str(data.get("measured", "an unknown date")))


def real_seconds(chapter: str, runs=None) -> tuple[float, int] | None:
    """(seconds of training, number of runs) of the recorded real-profile runs of the chapter's methods."""
    methods = chapter_methods(chapter)
    if not methods:
        return None
    chosen = [r for r in (recorded_runs() if runs is None else runs)
              if r.config.profile == "real" and r.config.method in methods]
    if not chosen:
        return None
    return sum(float(r.provenance.get("train_seconds") or 0.0) for r in chosen), len(chosen)


def _chapter_file(chapter: str) -> Path:
    """A chapter's notebook: in the checkout's ``book/``, else among the chapters installed with zslib."""
    return default_book_dir() / f"{chapter}.ipynb"


def title(chapter: str) -> str:
    """The first heading of a chapter's notebook (its name when the notebook is not here)."""
    path = _chapter_file(chapter)
    if path.is_file():
        for cell in json.loads(path.read_text())["cells"]:
            m = re.match(r"#\s+(.+)", "".join(cell["source"]).strip()) if cell["cell_type"] == "markdown" else None
            if m:
                return m.group(1).strip()
    return chapter


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def chapter_card(chapter: str):
    """The line under a chapter's title: prerequisites, reading time, compute time (quick and real profiles)."""
    from IPython.display import Markdown  # optional: the 'notebook' extra

    pre = prerequisites(chapter)
    parts = ["**Before this chapter:** " + ("; ".join(f"*{title(c)}*" for c in pre) if pre else "nothing")]
    notebook = _chapter_file(chapter)
    if notebook.is_file():
        parts.append(f"**Reading:** about {reading_minutes(notebook)} min")
    quick, recorded = quick_seconds(chapter), recorded_quick_seconds(chapter)
    if quick is not None:
        compute = f"{_duration(quick)} in the last book build"
    elif recorded is not None:
        compute = f"{_duration(recorded[0])} when last measured ({recorded[1]})"
    else:
        compute = "not measured yet"
    parts.append("**Compute, quick profile:** " + compute)
    real = real_seconds(chapter)
    if real is not None:
        parts.append(f"**real profile:** {_duration(real[0])} of training in its {real[1]} recorded runs (one core each)")
    return Markdown(" · ".join(parts))
