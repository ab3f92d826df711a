"""An assignment pack from the book's own notebooks, and a small autograder for it.

The chapters are the single source. A solution lives in a code cell tagged ``solution`` (and ``hide-cell``,
so that the rendered page shows it collapsed), inside markers the student version replaces by ``...``:

* a block between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` lines (the block is replaced by one ``...``
  line at its indentation: a function body then returns ``None``, which the check reports as unanswered);
* a single line ending in ``# SOLUTION``, e.g. ``answer = 0.64  # SOLUTION``, which becomes
  ``answer = ...``.

:func:`build_pack` writes ``student/`` (solutions stripped, outputs cleared), ``instructor/`` (the chapters
as they are), ``rubric.json`` (each notebook's exercises and points) and a teacher's ``README.md``.
:func:`grade` executes a submitted notebook in a fresh kernel with ``ZS_GRADE_LOG`` set, so that every
``zslib.teaching.exercises.check`` call records its verdict, and scores the last verdict of each exercise of the
rubric. ``python -m zslib assignments --out DIR`` and ``python -m zslib grade NOTEBOOK`` are the commands.
"""
from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SOLUTION_TAG", "HIDE_TAG", "strip_solutions", "solution_text", "exercise_names", "build_pack", "grade", "Score",
           "BOOK_DIR", "chapters_with_exercises"]

SOLUTION_TAG = "solution"
HIDE_TAG = "hide-cell"
BEGIN, END, LINE = "# BEGIN SOLUTION", "# END SOLUTION", "# SOLUTION"
BOOK_DIR = Path(__file__).resolve().parents[2] / "book"
_CHECK_CALL = re.compile(r"""check\(\s*["']([\w.]+)["']""")

# Seconds each chapter took on the quick profile in the book build of 2026-11-23 on the project's 2-core
# reference machine (its _build/execution_times.json; cml and deep_metric_learning_compare were not timed in
# that build). A pack built after a book build takes that build's times instead.
RECORDED_SECONDS = {"how_to_use": 5.8, "zero_shot_problem": 48.1, "datasets": 20.0, "metrics": 12.0,
                    "deep_metric_learning": 12.0, "generalization_gap": 128.1, "cml_experiments": 245.2,
                    "cml_ablations": 248.2}


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _strip_code(text: str) -> str:
    out, inside = [], False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"a '{BEGIN}' inside another solution block:\n{text}")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + "...  # your code here")
        elif stripped == END:
            if not inside:
                raise ValueError(f"'{END}' without '{BEGIN}':\n{text}")
            inside = False
        elif inside:
            continue
        elif stripped.endswith(LINE) and "=" in line:
            target = line.split("=", 1)[0]
            out.append(f"{target}= ...  # your answer")
        else:
            out.append(line)
    if inside:
        raise ValueError(f"'{BEGIN}' without '{END}':\n{text}")
    return "\n".join(out)


def solution_text(text: str) -> list[str]:
    """The lines of ``text`` a student version must not contain (inside the markers, without them)."""
    lines, inside = [], False
    for line in text.split("\n"):
        s = line.strip()
        if s == BEGIN:
            inside = True
        elif s == END:
            inside = False
        elif inside and s and not s.startswith("#"):
            lines.append(s)
        elif s.endswith(LINE) and "=" in s:
            lines.append(s[: -len(LINE)].strip())  # the whole assignment, e.g. prediction = "seen"
    return lines


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def strip_solutions(nb: dict) -> dict:
    """The student version of a notebook (a dict in nbformat 4): solutions replaced by ``...``, the
    ``hide-cell`` tag dropped from the solution cells (students must see the stub), outputs cleared."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb["cells"]:
        tags = _tags(cell)
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            text = _source(cell)
            if SOLUTION_TAG in tags or BEGIN in text or LINE in text:
                cell["source"] = _strip_code(text)
                cell.setdefault("metadata", {})["tags"] = [t for t in tags if t not in (HIDE_TAG, SOLUTION_TAG)]
        elif SOLUTION_TAG in tags:
            continue  # a markdown solution has no stub
        cells.append(cell)
    nb["cells"] = cells
    return nb


def exercise_names(nb: dict) -> list[str]:
    """The exercises a notebook checks, in order of first appearance."""
    names = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            for name in _CHECK_CALL.findall(_source(cell)):
                if name not in names:
                    names.append(name)
    return names


def chapters_with_exercises(book_dir: Path = BOOK_DIR) -> list[Path]:
    return sorted(p for p in Path(book_dir).glob("*.ipynb") if exercise_names(json.loads(p.read_text())))


def _times(root: Path) -> dict:
    path = root / "_build" / "execution_times.json"
    try:
        return {Path(k).stem: v for k, v in json.loads(path.read_text()).items() if v}
    except (OSError, ValueError):
        return {}


def _readme(rubric: dict, titles: dict, times: dict) -> str:
    from zslib.teaching.exercises import REGISTRY

    lines = ["# Assignment pack: Zero-Shot Metric Learning, Executable", "",
             "Generated by `python -m zslib assignments --out DIR` (or `make assignments`) from the book's "
             "chapters, which hold the exercises, their checks and their solutions.", "",
             "* `student/`: one notebook per chapter, solutions replaced by `...`. Hand these out.",
             "* `instructor/`: the same notebooks with the solutions (collapsed on the book's pages).",
             "* `rubric.json`: the exercises each notebook is scored on, and their points.", "",
             "## Grading", "",
             "Collect the students' notebooks and run, for each one,", "",
             "    python -m zslib grade SUBMISSION.ipynb --rubric rubric.json", "",
             "It executes the notebook from the top in a fresh kernel, in the notebook's folder (the runs it trains "
             "are stored under `ZS_RESULTS`, default `results/`, so a class grading the same chapter reuses them), "
             "records every `check(...)` a cell makes, and gives each exercise its points when the *last* check "
             "of it passed. A cell that raises does not stop the notebook. `--json` prints the score as JSON "
             "for a spreadsheet. The checks compare against zslib's own functions on inputs the student does "
             "not choose, so a notebook that prints the right words without computing them does not pass; a "
             "check also refuses the zslib function itself as an answer (a wrapper that calls it is not detected: "
             "skim the submitted code). Read the notebooks for the derivation "
             "and the written answers: the grader scores only what a check can test.", "",
             "Experiment questions (a predicted sign or ordering) are decided by the numbers the student's own "
             "run printed, so every student is graded against their own run.", "",
             "## What each assignment covers", "",
             "| notebook | exercises | points | run time, quick profile, 2 CPU cores |", "|---|---|---|---|"]
    for stem, names in rubric.items():
        t = times.get(stem, RECORDED_SECONDS.get(stem))
        when = (f"{t:.0f} s" if t < 90 else f"about {t / 60:.0f} min") if t else "not timed (budget: 3 min)"
        lines.append(f"| `{stem}` ({titles.get(stem, stem)}) | " + "; ".join(
            f"{i}. {REGISTRY[n].title}" for i, n in enumerate(names, 1)) +
            f" | {sum(REGISTRY[n].points for n in names)} | {when} |")
    lines += ["", "**Time.** The run time is the chapter executed from top to bottom on the quick profile (the "
              "book's default) on the project's 2-core reference machine, from the latest book build's timing "
              "report when the pack was built after one, else from the build of 2026-11-23. Runs are stored, so "
              "a second execution (e.g. grading after the student ran it) is much faster. On Colab we have not "
              "timed the chapters: a free Colab CPU session also has 2 cores, so expect the same order there, "
              "plus the first cell's install of zslib (a minute or two); on a Colab GPU session the training "
              "runs are faster. Add the students' own time for the exercises themselves.", ""]
    return "\n".join(lines)


def build_pack(out: str | os.PathLike, chapters=None, book_dir: str | os.PathLike = BOOK_DIR) -> Path:
    """Write the pack (student/, instructor/, rubric.json, README.md) to ``out``; returns ``out``."""
    out, book_dir = Path(out), Path(book_dir)
    paths = [book_dir / f"{c}.ipynb" for c in chapters] if chapters else chapters_with_exercises(book_dir)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"no such chapter: {', '.join(missing)}")
    (out / "student").mkdir(parents=True, exist_ok=True)
    (out / "instructor").mkdir(parents=True, exist_ok=True)
    rubric, titles = {}, {}
    from zslib.teaching.exercises import REGISTRY

    for path in paths:
        nb = json.loads(path.read_text())
        names = exercise_names(nb)
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            raise ValueError(f"{path.name} checks unknown exercises {unknown}")
        rubric[path.stem] = names
        first_md = next((_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"), path.stem)
        titles[path.stem] = first_md.strip().split("\n")[0].lstrip("# ").strip()
        student = strip_solutions(nb)
        student.setdefault("metadata", {})["zslib_assignment"] = {"chapter": path.stem, "exercises": names}
        (out / "student" / path.name).write_text(json.dumps(student, indent=1, ensure_ascii=False) + "\n")
        (out / "instructor" / path.name).write_text(path.read_text())
    (out / "rubric.json").write_text(json.dumps(
        {stem: {n: REGISTRY[n].points for n in names} for stem, names in rubric.items()}, indent=1) + "\n")
    (out / "README.md").write_text(_readme(rubric, titles, _times(book_dir.parent)))
    return out


@dataclass
class Score:
    notebook: str
    points: int
    total: int
    exercises: dict  # name -> {"points": ..., "passed": ..., "checked": ...}

    def report(self) -> str:
        rows = [f"{self.notebook}: {self.points} / {self.total} points"]
        for name, r in self.exercises.items():
            state = "passed" if r["passed"] else ("failed" if r["checked"] else "not checked (cell missing or failed)")
            rows.append(f"  {name:<55s} {state}")
        return "\n".join(rows)


def grade(notebook: str | os.PathLike, rubric: dict | str | os.PathLike | None = None,
          timeout: int = 1800) -> Score:
    """Execute ``notebook`` in a fresh kernel and score its checks against ``rubric``.

    ``rubric``: a ``{name: points}`` dict, a ``rubric.json`` of a pack (the notebook's stem picks its entry),
    or ``None``: the exercises recorded in the notebook's metadata by :func:`build_pack`, else those its
    cells check. ``timeout`` is per cell (seconds).
    """
    import nbformat
    from nbclient import NotebookClient

    from zslib.teaching.exercises import REGISTRY

    path = Path(notebook)
    nb = nbformat.read(str(path), as_version=4)
    if isinstance(rubric, (str, os.PathLike)):
        table = json.loads(Path(rubric).read_text())
        stem = nb.metadata.get("zslib_assignment", {}).get("chapter", path.stem)
        if stem not in table:
            raise ValueError(f"{rubric} has no entry for {stem!r} (it has {', '.join(table)})")
        rubric = table[stem]
    if rubric is None:
        names = nb.metadata.get("zslib_assignment", {}).get("exercises") or exercise_names(nb)
        rubric = {n: REGISTRY[n].points for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        old = os.environ.get("ZS_GRADE_LOG")
        os.environ["ZS_GRADE_LOG"] = str(log)
        try:
            client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.resolve().parent)}})
            client.execute()
        finally:
            if old is None:
                os.environ.pop("ZS_GRADE_LOG", None)
            else:
                os.environ["ZS_GRADE_LOG"] = old
        last = {}
        if log.exists():
            for line in log.read_text().splitlines():
                entry = json.loads(line)
                last[entry["name"]] = bool(entry["passed"])
    exercises = {n: {"points": p if last.get(n) else 0, "passed": bool(last.get(n)), "checked": n in last}
                 for n, p in rubric.items()}
    return Score(path.name, sum(r["points"] for r in exercises.values()), sum(rubric.values()), exercises)
