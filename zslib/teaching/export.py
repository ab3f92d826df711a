"""The assignment pack as otter-grader master notebooks (and nbgrader source notebooks), for a course that
already grades with one of them.

How to use it::

    python -m zslib assignments --out pack --format otter      # the pack, plus pack/otter/<chapter>/<chapter>.ipynb
    cd pack/otter/cml && otter assign cml.ipynb dist/           # dist/student/, dist/autograder/ (the zip)

or, from Python, ``to_otter("pack", "pack/otter")`` for a pack already written (its ``rubric.json``, its
instructor notebooks and the seed of its hidden inputs are used), or ``to_otter(["cml"], "out")`` straight
from the book's chapters (the registered points, a fresh seed). ``to_nbgrader`` writes
``<out>/source/<chapter>/<chapter>.ipynb`` for ``nbgrader generate_assignment <chapter>``.

**What carries over.** Each master notebook is the chapter's instructor notebook in otter's notebook format:

* every checked exercise the rubric lists becomes one question, named after the exercise
  (``cml.energy_confusion``), worth the rubric's points;
* its solution cell becomes the question's solution. The book marks solutions the way otter does
  (``# BEGIN SOLUTION`` / ``# END SOLUTION`` lines, a line ending in ``# SOLUTION``), so ``otter assign``
  strips the same lines the book's own student version strips. A cell that solves two exercises is split
  between the two questions, and so is a check cell that checks both;
* its tests call the book's own check (:func:`assert_passes`, which raises with the check's message),
  with the answer and the chapter's values written exactly as the chapter's ``check(...)`` call writes
  them, and run where otter runs a question's tests: right after the chapter's check cell;
* a function is tested on each published input by a public test and on each hidden input by a
  ``# HIDDEN`` test. The hidden inputs are those of :func:`zslib.teaching.grading.hidden_cases` for the
  pack's seed (``grader/hidden.json``), so the book's grader and otter test the same inputs. The seed
  is written only into the hidden tests, which ``otter assign`` puts in the autograder and never in the
  student's notebook or test files. Otter splits a question's points evenly over its tests, which gives
  the book's partial credit: the share of inputs a function gets right. A tuple of numbers gets one test
  per number (the share of its numbers); an entry ``"partial": false`` of the rubric makes the question
  ``all_or_nothing`` (that key needs otter 6 or later);
* a choice is decided, as in the book, by the numbers of the run that is graded: its test passes the
  same expressions the chapter's check cell passes, evaluated in the graded notebook.

**What does not carry over.**

* A solution cell that no check grades (an exercise without a check) and the solution of an
  exercise the rubric leaves out: otter strips solutions only inside questions, so the master holds their
  stubs already; the solutions stay in the pack's ``instructor/`` notebooks. The written answers and the
  derivations are not graded by either grader.
* The tests run in the submission's own kernel, as every otter test does. They only ask, they do not
  protect: a submission that redefines :func:`assert_passes` or patches ``zslib`` or torch can make them
  pass.
* A test prints nothing when it passes, and otter's tests fail on unexpected output; what the student's
  function prints is therefore swallowed during the test. Anything else that prints inside a test cell
  fails it.
* Otter needs ``zslib`` (and torch) in its grading image: the assignment config cell asks for
  ``zslib[notebook]`` from the book's repository; edit it if your course installs zslib another way. Each
  graded notebook runs from the top, as with the book's grader (the chapters' run times are in the pack's
  README); ``otter assign`` also runs the solutions once to check that they earn every point
  (``--no-run-tests`` skips that).

**Why the book keeps its own grader as the default.** They protect against different things.

* ``otter grade`` runs each submission in its own Docker container: the submission cannot touch the
  teacher's machine, the other submissions or (if the container is set up so) the network. But its tests run
  inside that container, in the same kernel as the submission's code, so the grade is only as
  trustworthy as that kernel: a submission can patch what the tests call.
* ``python -m zslib grade-all`` (:mod:`zslib.teaching.grading`) runs each submission in its own process
  with time, memory and file-size limits, in a temporary folder, as ``nobody`` when started as root, and
  scores the answers in the grader's own process against references and hidden inputs the submission
  never holds: a patched check or a forged message earns nothing. It needs no container engine, which a
  shared 2-core machine or Colab does not have; but it does not wall the machine off as a container does
  (the network, world-readable files, a process that leaves its group).

So the book's grader is the one that needs nothing beyond zslib and keeps the grade out of the
submission's reach; otter is the export for a course that already has Docker or Gradescope and otter's
workflow. The two can be combined: run the book's grader inside a container or a throwaway virtual
machine.

**nbgrader.** :func:`to_nbgrader` writes the same questions with nbgrader's cell metadata (schema
version 3): solution cells with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (a ``# SOLUTION`` line
becomes such a block: nbgrader has no one-line marker, and its stub raises ``NotImplementedError`` where the
book's sets ``...``), one locked grade cell per test (one for all of a question's tests where the rubric
says ``"partial": false``), the hidden ones between ``### BEGIN HIDDEN TESTS``
and ``### END HIDDEN TESTS``. nbgrader runs the tests in the submission's kernel too, and its
documentation says it does not protect against unsafe code.

Tried with otter-grader 7.0.0: ``otter assign`` accepts every chapter's master notebook; with its tests run
(how_to_use, metrics) the solutions earn every point, the student versions none, and a function that is right
on the published inputs only earns half its points. And with nbgrader 0.9.6: ``generate_assignment`` and
``autograde`` of metrics give the solutions every point and the released version none.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import io
import json
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

from zslib.teaching.assignments import (BEGIN, BOOK_DIR, END, HIDE_TAG, LINE, SOLUTION_TAG, _source, _strip_code,
                                        chapters_with_exercises)
from zslib.teaching.exercises.kinds import Outcome
from zslib.teaching.grading import HIDDEN_VARIANTS, _kind, _registry, exercise_names, hidden_cases, load_rubric

__all__ = ["to_otter", "to_nbgrader", "assert_passes", "plan_chapter", "Question", "REQUIREMENT"]

#: What otter's grading image installs (the assignment config cell's ``requirements``).
REQUIREMENT = "zslib[notebook] @ git+https://github.com/zslib-book/zero-shot-metric-learning"
_IMPORT = "from zslib.teaching.export import assert_passes"


# ----------------------------------------------------------------------------------------------------
# The test the exported notebooks call


def assert_passes(exercise: str, answer, /, *, case: int | None = None, hidden_seed: int | None = None,
                  number: int | None = None, **context) -> None:
    """Raise ``AssertionError`` with the book's message unless ``answer`` passes the check of ``exercise``.

    ``case``: only that published input of a function exercise, or, with ``hidden_seed``, that hidden
    input (:func:`zslib.teaching.grading.hidden_cases`). ``number``: only that number of a tuple answer.
    ``context``: the chapter's values, as its ``check(...)`` call passes them. Nothing is printed: what
    the answer prints while it is checked is swallowed (otter's tests fail on unexpected output)."""
    ex = _registry()[exercise]
    with contextlib.redirect_stdout(io.StringIO()):
        outcome = _outcome(ex, answer, case, hidden_seed, number, context)
    if not outcome.passed:
        raise AssertionError(outcome.message)


def _outcome(ex, answer, case, hidden_seed, number, context):
    if case is not None:
        cases = list(ex.cases())
        if hidden_seed is not None:
            cases = hidden_cases(ex, hidden_seed)[len(cases):]
        return replace(ex, cases=lambda: [cases[case]]).run(answer, **context)
    if number is None or answer is None or answer is Ellipsis:
        return ex.run(answer, **context)
    truth = ex._decided(ex.expected, context)
    if isinstance(truth, Outcome):
        return truth
    answers = answer if isinstance(answer, (tuple, list)) else (answer,)
    if len(answers) != len(truth):
        return Outcome(ex.name, False, f"{ex.header()}: expected {len(truth)} numbers, got {len(answers)}.")
    one = replace(ex, expected=lambda **_: truth[number]).run(answers[number], **context)
    return Outcome(ex.name, one.passed, f"number {number + 1} of {len(truth)}: {one.message}")


# ----------------------------------------------------------------------------------------------------
# Which cells make which question


@dataclass
class Question:
    """One exercise as a question: its solution cells, the cells up to its check, and its tests
    (``(hidden, code)`` pairs)."""

    name: str
    points: float
    all_or_nothing: bool
    solution: list = field(default_factory=list)
    after: list = field(default_factory=list)
    tests: list = field(default_factory=list)


def _is_solution(cell) -> bool:
    text = _source(cell)
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", []) or (
        cell["cell_type"] == "code" and (BEGIN in text or LINE in text))


def _checks(node) -> list[tuple[str, ast.Call]]:
    """The ``check("name", ...)`` calls under ``node``, in the order they are written."""
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and \
                isinstance(n.args[0].value, str) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "check":
            found.append((n.lineno, n.col_offset, n.args[0].value, n))
    return [(name, call) for *_, name, call in sorted(found, key=lambda f: f[:2])]


def _tree(cell):
    if cell["cell_type"] != "code":
        return None
    try:
        return ast.parse(_source(cell))
    except SyntaxError:
        return None


def _bound(stmt) -> set:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _balanced(text: str) -> bool:
    depth = 0
    for line in text.split("\n"):
        depth += (line.strip() == BEGIN) - (line.strip() == END)
        if depth not in (0, 1):
            return False
    return depth == 0


def _pieces(text: str, owner_of) -> list[tuple]:
    """``text`` cut between its top-level statements into ``(owner, text)`` pieces, one per run of
    statements ``owner_of`` gives to one owner; statements of no owner (imports, comments) go with the next
    owned one. A cell of one owner, or one whose markers a cut would break, stays whole."""
    tree = ast.parse(text)
    owned = [(owner_of(s), s) for s in tree.body]
    owned = [(o, s) for o, s in owned if o is not None]
    if len({o for o, _ in owned}) < 2:
        return [(owned[0][0] if owned else None, text)]
    lines, pieces, start = text.split("\n"), [], 0
    for (o, s), (nxt, _) in zip(owned, owned[1:] + [(None, None)]):
        if nxt is None or nxt == o:
            continue
        cut = s.end_lineno
        for j in range(s.end_lineno, len(lines)):  # the body's trailing indented comments (# END SOLUTION)
            if lines[j][:1] in " \t" and lines[j].lstrip().startswith("#"):
                cut = j + 1
            elif lines[j].strip():
                break
        pieces.append((o, "\n".join(lines[start:cut]).strip("\n")))
        start = cut
    pieces.append((owned[-1][0], "\n".join(lines[start:]).strip("\n")))
    if not all(_balanced(t) for _, t in pieces):
        return [(owned[0][0], text)]
    return [(o, t) for o, t in pieces if t.strip()]


def _new_cell(cell, text=None):
    """A copy of ``cell`` (with ``text``, if given) without the book's solution tags and without outputs."""
    cell = copy.deepcopy(cell)
    if text is not None:
        cell["source"] = text
    tags = [t for t in cell.get("metadata", {}).get("tags", []) if t not in (SOLUTION_TAG, HIDE_TAG)]
    if "tags" in cell.get("metadata", {}):
        cell["metadata"]["tags"] = tags
        if not tags:
            del cell["metadata"]["tags"]
    if cell["cell_type"] == "code":
        cell["outputs"], cell["execution_count"] = [], None
    return cell


def _stub(cell):
    """A solution cell outside every question, as the book's student version has it (``None``: dropped)."""
    if cell["cell_type"] != "code":
        return None
    return _new_cell(cell, _strip_code(_source(cell)))


def _tests(ex, call: ast.Call, seed: int, partial: bool) -> list[tuple[bool, str]]:
    """``(hidden, code)`` for each test of exercise ``ex`` from the chapter's ``check(...)`` call."""
    if len(call.args) < 2:
        raise ValueError(f"check({ex.name!r}, ...) passes no answer")

    def code(**extra):
        node = ast.Call(ast.Name("assert_passes", ast.Load()), [ast.Constant(ex.name), call.args[1]],
                        list(call.keywords) + [ast.keyword(k, ast.Constant(v)) for k, v in extra.items()])
        return f"{_IMPORT}\n{ast.unparse(ast.fix_missing_locations(node))}"

    kind = _kind(ex)
    if kind == "function":
        n = len(list(ex.cases()))
        return [(False, code(case=k)) for k in range(n)] + [
            (True, "# HIDDEN\n" + code(case=k, hidden_seed=seed)) for k in range(n * HIDDEN_VARIANTS)]
    if kind == "number" and partial and not ex.context:
        truth = ex.expected()
        if isinstance(truth, tuple) and len(truth) > 1:
            return [(False, code(number=k)) for k in range(len(truth))]
    return [(False, code())]


def plan_chapter(nb: dict, rubric: dict, seed: int) -> list:
    """The chapter ``nb`` (an instructor notebook) as a list of cells and :class:`Question` objects, in order.

    ``rubric``: ``{name: RubricItem}`` (:func:`zslib.teaching.grading.load_rubric`); the exercises it leaves
    out are not questions. ``seed``: the seed of the hidden inputs. A question's solution is made of the
    solution cells since the previous question up to the first cell that checks the exercise (a solution
    cell that checks it, as in the comparison chapter, included)."""
    cells, registry = nb["cells"], _registry()
    missing = [n for n in rubric if n not in exercise_names(nb)]
    if missing:
        raise ValueError(f"the rubric lists {', '.join(missing)}, which this chapter does not check")
    trees = [_tree(c) for c in cells]
    calls = [_checks(t) if t is not None else [] for t in trees]
    regions, pending, assigned = [], [], set()
    for i, cell in enumerate(cells):
        if _is_solution(cell):
            pending.append(i)
        new = [n for n in dict.fromkeys(name for name, _ in calls[i]) if n not in assigned]
        if new and pending:
            regions.append((pending[0], i, [n for n in new if n in rubric]))
            assigned.update(new)
            pending = []
    unsolved = [n for n in rubric if n not in {n for *_, names in regions for n in names}]
    if unsolved:
        raise ValueError(f"no solution cell comes before the check of {', '.join(unsolved)}")
    out, at = [], 0
    for first, check_at, names in regions:
        for cell in cells[at:first]:
            out.append(_stub(cell) if _is_solution(cell) else _new_cell(cell))
        at = check_at + 1
        if not names:  # exercises the rubric leaves out: their solutions are stripped here
            out += [_stub(c) if _is_solution(c) else _new_cell(c) for c in cells[first:at]]
            continue
        call_of = {n: next(c for name, c in calls[check_at] if name == n) for n in names}
        answer_of = {v.id: n for n in names for v in ast.walk(call_of[n].args[1])
                     if isinstance(v, ast.Name)} if all(len(call_of[n].args) > 1 for n in names) else {}

        def owner(stmt, sol):
            checked = [name for name, _ in _checks(stmt) if name in names]
            if checked:
                return checked[-1]
            return next((answer_of[b] for b in _bound(stmt) if b in answer_of), None) if sol else None

        questions = {n: Question(n, rubric[n].points, not rubric[n].partial) for n in names}
        last = names[0]
        for index in range(first, at):
            cell, sol = cells[index], _is_solution(cells[index])
            if trees[index] is not None and (sol or index == check_at):
                parts = _pieces(_source(cell), lambda s, sol=sol: owner(s, sol))
            else:
                parts = [(None, None)]
            for k, (o, text) in enumerate(parts):
                last = o or last
                piece = _new_cell(cell, text)
                if len(parts) > 1 and piece.get("id"):
                    piece["id"] = f"{piece['id'][:56]}-part{k}"
                q = questions[last]
                (q.solution if sol or index != check_at else q.after).append(piece)
        for n, q in questions.items():
            q.tests = _tests(registry[n], call_of[n], seed, rubric[n].partial)
            q.all_or_nothing = q.all_or_nothing and len(q.tests) > 1
            out.append(q)
    for cell in cells[at:]:
        out.append(_stub(cell) if _is_solution(cell) else _new_cell(cell))
    return [c for c in out if c is not None]


# ----------------------------------------------------------------------------------------------------
# Writing the notebooks


def _raw(text: str, ident: str) -> dict:
    return {"cell_type": "raw", "id": ident, "metadata": {}, "source": text}


def _code(text: str, ident: str, metadata=None) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": ident, "metadata": metadata or {}, "outputs": [],
            "source": text}


def _otter_cells(chapter: str, plan: list) -> list:
    config = ["# ASSIGNMENT CONFIG", f"name: {json.dumps(chapter)}", "requirements:", f"- {json.dumps(REQUIREMENT)}",
              "export_cell:", "  pdf: false"]
    cells, count = [_raw("\n".join(config), "otter-config")], 0
    for item in plan:
        if not isinstance(item, Question):
            cells.append(item)
            continue
        count += 1
        tag = f"otter-q{count}"
        head = ["# BEGIN QUESTION", f"name: {json.dumps(item.name)}", f"points: {item.points:g}"]
        cells.append(_raw("\n".join(head + ["all_or_nothing: true"] * item.all_or_nothing), f"{tag}-begin"))
        if item.solution:
            cells.append(_raw("# BEGIN SOLUTION", f"{tag}-solution"))
            for cell in item.solution:  # a Markdown cell here is the chapter's text: keep it for students
                if cell["cell_type"] == "markdown":
                    cell.setdefault("metadata", {}).setdefault("tags", []).append("otter_include")
                cells.append(cell)
            cells.append(_raw("# END SOLUTION", f"{tag}-solution-end"))
        cells += item.after
        cells.append(_raw("# BEGIN TESTS", f"{tag}-tests"))
        cells += [_code(text, f"{tag}-test{k}") for k, (_, text) in enumerate(item.tests)]
        cells += [_raw("# END TESTS", f"{tag}-tests-end"), _raw("# END QUESTION", f"{tag}-end")]
    return cells


def _nbgrader_markers(text: str) -> str:
    out = []
    for line in text.split("\n"):
        indent, stripped = line[: len(line) - len(line.lstrip())], line.strip()
        if stripped in (BEGIN, END):
            out.append(f"{indent}##{stripped}")
        elif stripped.endswith(LINE) and "=" in line:
            body = line.rstrip()[: -len(LINE)].rstrip()
            out += [f"{indent}### BEGIN SOLUTION", body, f"{indent}### END SOLUTION"]
        else:
            out.append(line)
    return "\n".join(out)


def _nbgrader_meta(grade_id: str, *, solution=False, grade=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _nbgrader_cells(plan: list) -> list:
    cells = []
    for item in plan:
        if not isinstance(item, Question):
            cells.append(item)
            continue
        stem = item.name.replace(".", "-")
        for k, cell in enumerate(item.solution):
            if cell["cell_type"] == "code" and (BEGIN in _source(cell) or LINE in _source(cell)):
                cell["source"] = _nbgrader_markers(_source(cell))
                cell.setdefault("metadata", {}).update(_nbgrader_meta(f"{stem}-solution{k}", solution=True))
            cells.append(cell)
        cells += item.after
        groups = [item.tests] if item.all_or_nothing else [[t] for t in item.tests]
        share = round(item.points / len(groups), 6)  # the last cell takes what rounding left: the sum is exact
        for k, group in enumerate(groups):
            public = [text for hidden, text in group if not hidden]
            hidden = [text.split("\n", 1)[1] for is_hidden, text in group if is_hidden]
            text = "\n".join(public + (["### BEGIN HIDDEN TESTS", *hidden, "### END HIDDEN TESTS"] if hidden else []))
            points = share if k < len(groups) - 1 else round(item.points - share * (len(groups) - 1), 6)
            cells.append(_code(text, f"{stem}-test{k}", _nbgrader_meta(f"{stem}-test{k}", grade=True, points=points)))
    return cells


def _sources(source, book_dir: Path, seed):
    """``[(chapter, notebook, {name: RubricItem})]`` and the seed, from a pack folder or chapter names."""
    if isinstance(source, (str, os.PathLike)):
        pack = Path(source)
        if not (pack / "rubric.json").is_file():
            raise FileNotFoundError(f"{pack} is not an assignment pack (no rubric.json); write one with "
                                    "'python -m zslib assignments --out DIR', or pass a list of chapters")
        table = json.loads((pack / "rubric.json").read_text())
        secret = pack / "grader" / "hidden.json"
        if seed is None and secret.is_file():
            seed = json.loads(secret.read_text())["seed"]
        found = [(c, pack / "instructor" / f"{c}.ipynb", load_rubric(table, c)) for c in table]
    else:
        paths = [book_dir / f"{c}.ipynb" for c in source] if source else chapters_with_exercises(book_dir)
        found = []
        for p in paths:
            nb = json.loads(p.read_text()) if p.is_file() else None
            names = exercise_names(nb) if nb else []
            found.append((p.stem, p, load_rubric({n: _registry()[n].points for n in names}) if names else {}))
    for chapter, path, _ in found:
        if not path.is_file():
            raise FileNotFoundError(f"no such chapter notebook: {path}")
    return found, seed if seed is not None else secrets.randbits(62)


def _export(source, out_dir, render, where, book_dir, seed) -> list[Path]:
    found, seed = _sources(source, Path(book_dir), seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter, path, rubric in found:
        if not rubric:
            continue
        nb = json.loads(path.read_text())
        master = copy.deepcopy(nb)
        master["cells"] = render(chapter, plan_chapter(nb, rubric, seed))
        if (master.get("nbformat"), master.get("nbformat_minor", 0)) >= (4, 5):  # nbformat 4.5: every cell an id
            for k, cell in enumerate(c for c in master["cells"] if not c.get("id")):
                cell["id"] = f"zs-export-{k}"
        master.setdefault("metadata", {}).pop("zslib_assignment", None)
        target = out_dir / where(chapter)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(master, indent=1, ensure_ascii=False) + "\n")
        written.append(target)
    os.chmod(out_dir, 0o700)  # solutions and the hidden inputs' seed: the teacher's only
    return written


def to_otter(source, out_dir, *, seed: int | None = None, book_dir=BOOK_DIR) -> list[Path]:
    """Write one otter master notebook per chapter with exercises, ``out_dir/<chapter>/<chapter>.ipynb``;
    return their paths. ``source``: a pack folder (its ``rubric.json``, ``instructor/`` notebooks and
    ``grader/hidden.json`` seed), or a list of chapter names (``None``: every chapter with exercises) read
    from ``book_dir`` at their registered points. ``seed``: the hidden inputs' seed (default: the pack's,
    else a fresh one). Run ``otter assign <chapter>.ipynb dist/`` in each folder."""
    return _export(source, out_dir, _otter_cells, lambda c: Path(c) / f"{c}.ipynb", book_dir, seed)


def to_nbgrader(source, out_dir, *, seed: int | None = None, book_dir=BOOK_DIR) -> list[Path]:
    """Like :func:`to_otter`, for nbgrader: ``out_dir/source/<chapter>/<chapter>.ipynb`` with nbgrader's
    cell metadata (schema version 3). Copy ``source/`` into the course folder and run
    ``nbgrader generate_assignment <chapter>``."""
    return _export(source, out_dir, lambda chapter, plan: _nbgrader_cells(plan),
                   lambda c: Path("source") / c / f"{c}.ipynb", book_dir, seed)
