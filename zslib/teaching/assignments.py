"""An assignment pack from the book's own notebooks, and a small autograder for it.

The chapters are the single source. A solution lives in a code cell tagged ``solution`` (and ``hide-cell``,
so that the rendered page shows it collapsed), inside markers the student version replaces by ``...``:

* a block between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` lines (the block is replaced by one ``...``
  line at its indentation: a function body then returns ``None``, which the check reports as unanswered);
* a single line ending in ``# SOLUTION``, e.g. ``answer = 0.64  # SOLUTION``, which becomes
  ``answer = ...``.

:func:`build_pack` writes ``student/`` (solutions stripped, outputs cleared), ``instructor/`` (the chapters
as they are), ``rubric.json`` (each notebook's exercises and points), ``grader/hidden.json`` (the seed of the
hidden inputs) and a teacher's ``README.md``. :func:`grade` grades one submission with
:mod:`zslib.teaching.grading` (its own process, folders and limits; the grade computed by the grader from
the answers, never from anything the submission writes). ``python -m zslib assignments --out DIR``,
``python -m zslib grade NOTEBOOK`` and ``python -m zslib grade-all FOLDER --rubric R --out DIR`` are the commands.
"""
from __future__ import annotations

import copy
import json
import os
import secrets
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from zslib.engine import profile as engine_profile  # repository_root() read when called, as zslib.engine.store does
from zslib.teaching.exercises import REGISTRY
from zslib.teaching.grading import exercise_names  # noqa: F401  (part of this module's interface)
__all__ = ["SOLUTION_TAG", "HIDE_TAG", "strip_solutions", "solution_text", "exercise_names", "build_pack", "grade", "Score",
           "BOOK_DIR", "chapters_with_exercises", "default_book_dir", "installed_book_dir"]

SOLUTION_TAG = "solution"
HIDE_TAG = "hide-cell"
BEGIN, END, LINE = "# BEGIN SOLUTION", "# END SOLUTION", "# SOLUTION"


def installed_book_dir() -> Path:
    """Where a pip install of zslib keeps the chapters: ``<prefix>/share/zslib/book`` (the ``data-files`` of
    pyproject.toml, copied from ``book/`` when the wheel is built); for a ``--user`` install, under the user's
    prefix."""
    schemes = [sysconfig.get_default_scheme(), f"{os.name}_user"]
    folders = [Path(sysconfig.get_path("data", scheme)) / "share" / "zslib" / "book"
               for scheme in schemes if scheme in sysconfig.get_scheme_names()]
    return next((f for f in folders if f.is_dir()), folders[0])


def default_book_dir() -> Path:
    """The chapters an assignment pack is made from: ``book/`` of the checkout zslib runs from, else the copy
    installed with zslib (:func:`installed_book_dir`)."""
    root = engine_profile.repository_root()
    return root / "book" if root is not None else installed_book_dir()


BOOK_DIR = default_book_dir()

# Seconds each chapter took on the quick profile in the book build of 2026-11-23 on the project's 2-core
# reference machine (its _build/execution_times.json; cml and deep_metric_learning_compare were not timed in
# that build). A pack built after a book build takes that build's times instead.
# Seconds each student notebook took here (scripts/time_pack.py): executed from the top on the quick profile with
# fresh cache and home folders and a results folder holding only the recorded runs (as an installed zslib ships
# them) on the project's 2-core machine, with the load average during the run; the first seven on 2026-11-25
# (then without the recorded runs linked in), the others and cml again on 2026-11-26.
MEASURED_ON = "2026-11-25 and 2026-11-26"
MEASURED_SECONDS = {"how_to_use": (13.4, 6.2), "metrics": (20.2, 6.9), "datasets": (32.7, 7.5),
                    "zero_shot_problem": (40.2, 7.8), "deep_metric_learning": (15.6, 7.8),
                    "generalization_gap": (285.4, 11.5), "cml": (34.6, 1.0), "cml_experiments": (108.3, 1.3),
                    "cml_ablations": (92.8, 1.2), "compare": (11.9, 1.2), "adapt_adv": (88.7, 1.3),
                    "adapt_adv_experiments": (109.0, 1.5), "deml": (83.1, 1.5), "deml_experiments": (86.0, 1.5),
                    "jrd": (74.9, 1.4), "jrd_experiments": (9.6, 1.4), "zsml": (33.4, 1.3),
                    "zsml_experiments": (8.6, 1.3), "deep_metric_learning_compare": (80.9, 1.5),
                    "deep_metric_learning_compare_proxies": (142.9, 1.6)}
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


def chapters_with_exercises(book_dir: Path = BOOK_DIR) -> list[Path]:
    return sorted(p for p in Path(book_dir).glob("*.ipynb") if exercise_names(json.loads(p.read_text())))


def _times(root: Path) -> dict:
    path = root / "_build" / "execution_times.json"
    try:
        return {Path(k).stem: v for k, v in json.loads(path.read_text()).items() if v}
    except (OSError, ValueError):
        return {}


def _when(t) -> str:
    return (f"{t:.0f} s" if t < 90 else f"about {t / 60:.0f} min") if t else ""


def _readme(rubric: dict, titles: dict, times: dict) -> str:
    """The pack's ``README.md``: what the pack holds, how to grade, how to export, what each assignment covers."""
    return "\n".join([*_readme_pack(), *_readme_grading(), *_readme_export(), *_readme_coverage(rubric, titles, times)])


def _readme_pack() -> list[str]:
    return ["# Assignment pack: Zero-Shot Metric Learning, Executable", "",
            "Generated by `python -m zslib assignments --out DIR` (or `make assignments`) from the book's "
            "chapters, which hold the exercises, their checks and their solutions.", "",
            "* `student/`: one notebook per chapter, solutions replaced by `...`. Hand these out (only these: "
            "they hold no solution and no expected answer).",
            "* `instructor/`: the same notebooks with the solutions (collapsed on the book's pages): the key. "
            "The grader runs the key of each chapter to decide the questions that depend on the chapter's "
            "numbers: keep `instructor/` beside `rubric.json` (or name it with `--instructor`).",
            "* `rubric.json`: the exercises each notebook is scored on and their points. An entry may be "
            "`{\"points\": 3, \"partial\": false}`: partial credit (the default for functions and tuples of "
            "numbers) gives a function the share of inputs it gets right, a tuple the share of its numbers.",
            "* `grader/hidden.json`: the seed of the hidden inputs. Keep `instructor/` and `grader/` to "
            "yourself (`chmod 700` them on a shared machine).", ""]


def _readme_grading() -> list[str]:
    return ["## Grading", "",
            "Put the students' notebooks in one folder (`alice.ipynb`, or `alice/cml.ipynb` for several per "
            "student) and run", "",
            "    python -m zslib grade-all SUBMISSIONS/ --rubric rubric.json --out grades/", "",
            "It writes `grades/gradebook.csv` (one row per notebook: status, points, the number of cells that "
            "raised an error, each exercise's points), `grades/canvas.csv` (for Canvas: Grades > Import; one "
            "column per chapter, the student identified by Canvas's columns `Student`, `ID`, `SIS User ID`, "
            "`SIS Login ID`, `Section`: give `--roster` the course's Gradebook export, and each submission is "
            "matched to its student by login, SIS id, id or name; set the new assignment's points possible in "
            "Canvas), `grades/feedback/<student>.md` (what passed, what failed and why, and every cell that "
            "raised) and `grades/grading.json` (the settings and the seed, to repeat the grading). "
            "`-j N` grades N notebooks at once (no more than the CPUs, nor than the memory holds at `--memory` "
            "each); the gradebook is the same as with `-j 1`. "
            "`python -m zslib grade NOTEBOOK --rubric rubric.json` grades one notebook; `python -m zslib grade "
            "instructor/<chapter>.ipynb --rubric rubric.json --key` checks that the key earns every point.", "",
            "How a notebook is graded (`zslib.teaching.grading`): it runs from the top in a separate process, "
            "in a new temporary folder with its own `HOME`, `ZS_RESULTS`, `ZS_CACHE` and `TMPDIR` (deleted "
            "afterwards), in its own process group, with a total time limit (`--timeout`, default 1800 s) and "
            "an address-space limit (`--memory`, default 8192 MB). There `check(...)` does not decide "
            "anything: it hands the answer to the grader as it runs. The grader scores the last answer of each "
            "exercise in its own process: a number against the expected value, a function by its outputs and "
            "gradients on the published inputs and on hidden ones the notebook never sees, against the zslib "
            "reference. A question decided by the chapter's numbers (a predicted sign or ordering) is decided "
            "by the grader's own run of `instructor/<chapter>.ipynb` (once per chapter, beside the students'); "
            "the numbers a submission hands to its check must be the ones that run computed, so numbers typed "
            "in earn nothing. Forged log lines, a patched `check`, reading the registry or the caller's frame "
            "earn nothing either. A cell that raises is counted and shown, and the next cells still run; an "
            "untouched `...` reads \"not attempted\". A notebook that hangs or dies keeps the points of the "
            "answers it gave before; the gradebook's status says where it stopped. A submission that is a "
            "symbolic link, a hard link or not a regular file is refused (a root grader would otherwise open "
            "whatever it points to). When a notebook is done, every process it started is killed.", "",
            "**Which user, which isolation, and what that protects.** No container engine (Docker) is needed. "
            "Run as root, the grader runs each notebook as a user id of its own (`--uids`, by default "
            "1990000000-1990000063, a range no account uses), kills every process of that uid when the "
            "notebook ends, and only then lends the uid to another notebook; each notebook's folder belongs to "
            "its uid alone. Where util-linux (`unshare`, `mount`) is there too, each notebook also runs in a "
            "container of the grader's own (`--isolation namespaces`, the default there; `zslib.teaching.jail`): "
            "its own mount, process and network namespaces, the network unreachable, every file outside its "
            "temporary folder read-only (`/tmp` and `/dev/shm` included). It shares the kernel (as any container "
            "does) and can read world-readable files. `grading.json` records which user and isolation were used; "
            "`--isolation process` turns the jail off.", "",
            "* Grader running as root: a submission cannot write your files, the shared results or cache, "
            "another student's folder or notebook (also not by a process it leaves behind: that dies with its "
            "uid), nor read files only you can read (hence `chmod 700` on `instructor/` and `grader/`); it can "
            "still read world-readable files (the public book with its solutions among them) and, without the "
            "jail, use the network. This needs a Python and zslib that other users can run (e.g. a venv under "
            "`/opt`); if they cannot, the grader stops and says so. `--user NAME` runs every notebook as that "
            "user instead, one at a time (every process of the user is killed after each, so name a user that "
            "nothing else uses).",
            "* `--same-user` (or a grader that is not root): only the time and memory limits, the process group "
            "and the temporary folders protect. A submission can read and write anything you can, by absolute "
            "path (e.g. execute the instructor notebooks, or change another student's notebook while it runs). "
            "The grader adopts every process a submission leaves behind (Linux's child subreaper) and kills them "
            "all before it writes the gradebook; a process started through another program (a `systemd-run "
            "--user` unit, an `at` or `cron` job, `ssh` to the same machine) is not its descendant and survives. "
            "Use it for trusted code, or inside a throwaway virtual machine or container.",
            "* No mode limits the CPU share or the number of open files beyond the defaults, and no mode detects "
            "a student who copied the book's solution, wraps the zslib function the exercise asks to "
            "re-implement, or re-imports the exercise bank from zslib's source: skim the submitted code, and read "
            "the notebooks for the derivations and written answers, which no check tests.", ""]


def _readme_export() -> list[str]:
    return ["## Exporting to otter-grader or nbgrader", "",
            "For a course that already grades with otter-grader:", "",
            "    python -m zslib assignments --out DIR --format otter", "",
            "writes, beside the pack, `otter/<chapter>/<chapter>.ipynb`: one otter master notebook per chapter, "
            "made from `instructor/`. In each of those folders run", "",
            "    otter assign <chapter>.ipynb dist/", "",
            "and hand out `dist/student/`; grade with the zip in `dist/autograder/` (`otter grade`, which needs "
            "Docker, or Gradescope). `otter assign` first runs the solutions to check that they earn every point, "
            "which takes the chapter's run time below (`--no-run-tests` skips it).", "",
            "What carries over: each exercise is one question worth its rubric points; its solution cell is the "
            "question's solution; its tests call the book's own check, on the published inputs (public tests) "
            "and on the same hidden inputs as `grade-all` (hidden tests made from `grader/hidden.json`, which "
            "`otter assign` puts in the autograder only); otter's share of passed tests is the partial credit. "
            "What does not: the tests run inside the student's kernel, so a submission that patches what they "
            "call can pass them (the book's grader scores outside the submission's process); a solution that no "
            "check grades stays in `instructor/` only; the grading image needs zslib, which each notebook's "
            "config cell asks for from the book's repository. `--format nbgrader` writes "
            "`nbgrader/source/<chapter>/<chapter>.ipynb` for `nbgrader generate_assignment <chapter>`. Keep "
            "`otter/` and `nbgrader/` to yourself, like `instructor/`: they hold the solutions and the hidden "
            "inputs' seed. The details are in `zslib/teaching/export.py`.", ""]


def _readme_coverage(rubric: dict, titles: dict, times: dict) -> list[str]:
    """The table of the assignments (exercises, points, run times) and how the times were measured."""
    lines = ["## What each assignment covers", "",
             "| notebook | exercises | points | run time, quick profile, measured on a 2-core CPU | on a GPU |",
             "|---|---|---|---|---|"]
    for stem, names in rubric.items():
        if stem in MEASURED_SECONDS:
            t, load = MEASURED_SECONDS[stem]
            when = f"{_when(t)} (load {load:.0f})"
        elif times.get(stem) or RECORDED_SECONDS.get(stem):
            when = f"{_when(times.get(stem) or RECORDED_SECONDS[stem])} (book build)"
        else:
            when = "not measured yet (budget: 3 min)"
        lines.append(f"| `{stem}` ({titles.get(stem, stem)}) | " + "; ".join(
            f"{i}. {REGISTRY[n].title}" for i, n in enumerate(names, 1)) +
            f" | {sum(REGISTRY[n].points for n in names)} | {when} | not measured yet |")
    measured = ", ".join(f"`{k}`" for k in MEASURED_SECONDS)
    lines += ["", f"**Time, measured on a 2-core CPU** (the project's machine, an AMD EPYC with 2 cores; Colab's free "
              f"CPU runtime also has 2). Measured for {measured}: the student notebook executed from the top on the "
              f"quick profile, with empty cache folders and only the recorded runs in the results folder, as a student's first "
              f"run is "
              f"(`scripts/time_pack.py`, {MEASURED_ON}). The machine was shared while we measured; the number in "
              "brackets is its load average at the end of the run (2 = both cores busy), so these times are upper "
              "bounds: an idle machine is faster. The other chapters show the time of the book build (an executed "
              "chapter, results reused where the build had them), or 'not measured yet'. On Colab add "
              "the first cell's install of zslib (a minute or two). Grading a notebook runs it again, plus about "
              "10 s to start its process; `grade-all` also runs each chapter's instructor notebook once. "
              "Nothing has been measured on a GPU yet.", ""]
    return lines


def build_pack(out: str | os.PathLike, chapters=None, book_dir: str | os.PathLike | None = None) -> Path:
    """Write the pack (student/, instructor/, rubric.json, README.md, grader/hidden.json) to ``out`` from the
    chapters in ``book_dir`` (default :data:`BOOK_DIR`: the checkout's ``book/``, else the chapters installed with
    zslib); returns ``out``. Refuses, before writing anything, a folder without chapters with exercises."""
    out, book_dir = Path(out), Path(BOOK_DIR if book_dir is None else book_dir)
    paths = [book_dir / f"{c}.ipynb" for c in chapters] if chapters else chapters_with_exercises(book_dir)
    if not paths:
        raise FileNotFoundError(f"no chapter with exercises in {book_dir}: give the book's chapters with --book DIR "
                                "(the book/ folder of a checkout of the book's repository)")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"no such chapter: {', '.join(missing)}")
    (out / "student").mkdir(parents=True, exist_ok=True)
    (out / "instructor").mkdir(parents=True, exist_ok=True)
    rubric, titles = {}, {}

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
        key = copy.deepcopy(nb)  # the same metadata: the key is graded as its chapter whatever its file is called
        key.setdefault("metadata", {})["zslib_assignment"] = {"chapter": path.stem, "exercises": names}
        (out / "instructor" / path.name).write_text(json.dumps(key, indent=1, ensure_ascii=False) + "\n")
    (out / "rubric.json").write_text(json.dumps(
        {stem: {n: REGISTRY[n].points for n in names} for stem, names in rubric.items()}, indent=1) + "\n")
    (out / "README.md").write_text(_readme(rubric, titles, _times(book_dir.parent)))
    secret = out / "grader" / "hidden.json"
    if not secret.exists():  # kept across rebuilds: grades stay repeatable
        secret.parent.mkdir(exist_ok=True)
        secret.write_text(json.dumps({"seed": secrets.randbits(62)}) + "\n")
        os.chmod(secret.parent, 0o700)
    os.chmod(out / "instructor", 0o700)  # the solutions: the teacher's only (a graded notebook runs as nobody)
    return out


@dataclass
class Score:
    notebook: str
    points: float
    total: float
    exercises: dict  # name -> {"points": ..., "passed": ..., "checked": ..., "message": ...}
    status: str = "completed"

    def report(self) -> str:
        rows = [f"{self.notebook}: {self.points:g} / {self.total:g} points ({self.status})"]
        for name, r in self.exercises.items():
            state = "passed" if r["passed"] else ("failed" if r["checked"] else "not checked (cell missing or failed)")
            note = r.get("message", "").split("\n")[0]
            rows.append(f"  {name:<55s} {state}" + (f": {note}" if note and not r["passed"] else ""))
        return "\n".join(rows)


def grade(notebook: str | os.PathLike, rubric: dict | str | os.PathLike | None = None,
          timeout: float = 1800, *, user="auto", memory_mb: int | None = None) -> Score:
    """Grade ``notebook`` with :func:`zslib.teaching.grading.grade_submission` (its own process, folders and
    limits; answers scored by the grader against references and hidden inputs) and return a :class:`Score`.

    ``rubric``: a ``{name: points}`` dict, a ``rubric.json`` of a pack (the notebook's chapter picks its entry),
    or ``None``: the exercises recorded in the notebook's metadata by :func:`build_pack`, else those its
    cells check. ``timeout``: seconds for the whole notebook. ``user``: see ``grade_submission``.
    """
    # here, not at the top: in a graded notebook zslib.teaching.grading is a stub that holds exercise_names only
    # (zslib.teaching.sandbox), and the chapter card imports this module there
    from zslib.teaching.grading import DEFAULT_MEMORY_MB, grade_submission

    g = grade_submission(notebook, rubric, timeout=timeout, user=user, memory_mb=memory_mb or DEFAULT_MEMORY_MB)
    exercises = {n: {"points": r["points"], "passed": r["fraction"] == 1.0, "checked": r["checked"],
                     "message": r["message"]} for n, r in g.exercises.items()}
    return Score(g.notebook, g.points, g.total, exercises, g.status)
