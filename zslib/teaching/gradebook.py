"""The grades in a CSV that Canvas's Gradebook imports (Grades > Import), one column per chapter.

Canvas reads a gradebook CSV whose first row names the columns: the student, by one of ``Student`` (the name),
``ID`` (Canvas's user id) or ``SIS User ID``, then ``SIS Login ID`` and ``Section``, then one column per
assignment holding the points; a column whose name is no assignment of the course becomes a new assignment on
import, and a score in the file replaces the one in the Gradebook (Canvas's guide "How do I import grades in the
Gradebook?", summarized with the required columns in Ohio State's "Import CSV File for Carmen Grades",
teaching.resources.osu.edu). The safest identity is the one Canvas itself wrote: export the course's Gradebook
(Actions > Export) and give that file as ``roster``; each submission (``alice.ipynb`` or ``alice/``) is then
matched to the roster row whose ``SIS Login ID``, ``SIS User ID``, ``ID`` or ``Student`` is its name
(case and the characters ``_``, ``-``, ``.`` and spaces ignored), and the row's identity columns are copied.
Without a roster the name goes into ``Student`` and ``SIS Login ID``, which Canvas matches when the
submissions are named after the students' logins.

Each chapter's column is ``<chapter> (zslib)``, its value the points the student's notebook of that chapter
earned: one notebook per chapter counts (a grade whose ``counted`` is false, another copy the grader listed and
ignored, adds nothing). Set the points possible of a new column's assignment in Canvas after the import (the
rubric's totals are in ``gradebook.csv``).
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

__all__ = ["CANVAS_IDENTITY", "write_canvas", "canvas_text", "read_roster"]

#: the identity columns of a Canvas Gradebook CSV, in Canvas's order
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def _plain(text: str) -> str:
    return re.sub(r"[\s_.\-]+", "", str(text)).lower()


def read_roster(path) -> list[dict]:
    """The student rows of a Canvas Gradebook export (its "Points Possible" and test-student rows left out)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    missing = [c for c in ("Student", "SIS Login ID") if rows and c not in rows[0]]
    if not rows or missing:
        raise ValueError(f"{path} is not a Canvas Gradebook export (no {', '.join(missing) or 'rows'}); export it from "
                         "the course's Gradebook (Actions > Export)")
    return [r for r in rows if (r.get("Student") or "").strip() and "points possible" not in r["Student"].lower()
            and (r.get("Student") or "").strip().lower() != "student, test"]


def _match(name: str, roster: list[dict]) -> dict | None:
    want = _plain(name)
    for column in ("SIS Login ID", "SIS User ID", "ID", "Student"):
        hits = [r for r in roster if want and _plain(r.get(column) or "") == want]
        if len(hits) == 1:
            return hits[0]
    return None


def canvas_text(grades: list, roster=None, chapters=None) -> tuple[str, list[str]]:
    """The CSV text of :func:`write_canvas` and the students no roster row matched."""
    rows = read_roster(roster) if roster is not None else None
    counted = [g for g in grades if getattr(g, "counted", True)]
    chapters = [c for c in dict.fromkeys(g.chapter for g in counted) if chapters is None or c in chapters]
    points: dict = {}
    for g in grades:
        points.setdefault(g.student, {})
    for g in counted:
        points[g.student][g.chapter] = points[g.student].get(g.chapter, 0.0) + float(g.points)
    unmatched = []
    fh = io.StringIO()
    w = csv.writer(fh)
    w.writerow([*CANVAS_IDENTITY, *(f"{c} (zslib)" for c in chapters)])
    for student, earned in points.items():
        row = _match(student, rows) if rows is not None else None
        if rows is not None and row is None:
            unmatched.append(student)
        identity = ([row.get(c, "") for c in CANVAS_IDENTITY] if row is not None
                    else [student, "", "", student, ""])
        w.writerow([*identity, *(f"{earned[c]:g}" if c in earned else "" for c in chapters)])
    return fh.getvalue(), unmatched


def write_canvas(grades: list, path, roster=None, chapters=None) -> list[str]:
    """Write ``path``: one row per student, Canvas's identity columns, then one column per chapter (``chapters``,
    default those of ``grades``; a notebook of another chapter, e.g. a refused file, gives no column). ``grades``:
    :class:`zslib.teaching.grading.Graded` objects (those not ``counted`` add nothing); ``roster``: a Canvas
    Gradebook export (path), or ``None``. Returns the students that no roster row matched (their rows keep the
    submission's name)."""
    text, unmatched = canvas_text(grades, roster, chapters)
    Path(path).write_text(text, encoding="utf-8", newline="")
    return unmatched
