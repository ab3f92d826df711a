"""The export to otter-grader (and nbgrader): every exercise becomes one question at the rubric's points, the
student-facing cells hold no solution, and the generated tests pass on the instructor's answer and fail on
``...``, on a wrong answer and, for the hidden ones, on an answer fitted to the published inputs only."""
import ast
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from zslib.__main__ import main
from zslib.teaching.assignments import build_pack, chapters_with_exercises, solution_text, strip_solutions
from zslib.teaching.exercises import REGISTRY
from zslib.teaching.export import assert_passes, plan_chapter, to_nbgrader, to_otter
from zslib.teaching.grading import RubricItem, _kind, exercise_names, load_rubric

pytestmark = pytest.mark.slow

CHAPTERS = [p.stem for p in chapters_with_exercises()]


def _text(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _questions(master) -> list[dict]:
    """Each question of an otter master notebook: its config, solution cells, cells after the solution, and
    tests as ``(hidden, code)``."""
    questions, q, part = [], None, None
    for cell in master["cells"]:
        text = _text(cell)
        first = text.split("\n")[0].strip()
        if cell["cell_type"] == "raw":
            if first == "# BEGIN QUESTION":
                assert q is None, "a question inside another"
                config = dict(line.split(": ", 1) for line in text.split("\n")[1:])
                q = {k: json.loads(v) for k, v in config.items()} | {"solution": [], "after": [], "tests": []}
                part = "after"
            elif first in ("# BEGIN SOLUTION", "# BEGIN TESTS"):
                assert q is not None and part == "after", f"{first} outside a question or inside a block"
                part = "solution" if "SOLUTION" in first else "tests"
            elif first in ("# END SOLUTION", "# END TESTS"):
                assert part in first.lower(), f"{first} closes a {part} block"
                part = "after"
            elif first == "# END QUESTION":
                assert part == "after"
                questions.append(q)
                q = part = None
            continue
        if part == "tests":
            q["tests"].append((first == "# HIDDEN", text))
        elif q is not None:
            q[part].append(cell)
    assert q is None, "a question is not closed"
    return questions


def _walk(master):
    """``(block, cell)`` for each non-raw cell: ``block`` is "solution", "tests" or ``None``."""
    block = None
    for cell in master["cells"]:
        first = _text(cell).split("\n")[0].strip()
        if cell["cell_type"] == "raw":
            block = {"# BEGIN SOLUTION": "solution", "# BEGIN TESTS": "tests"}.get(
                first, None if first in ("# END SOLUTION", "# END TESTS") else block)
            continue
        yield block, cell


def _student_text(master) -> str:
    """What otter hands to students: solution blocks stripped (the book's rules, which otter's match), the
    public tests, every other cell as it is."""
    out = []
    for block, cell in _walk(master):
        if block == "solution":
            out += [_text(c) for c in strip_solutions({"cells": [cell]})["cells"]]
        elif block != "tests" or not _text(cell).startswith("# HIDDEN"):
            out.append(_text(cell))
    return "\n".join(out)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A pack of every chapter whose rubric a teacher changed, exported to otter."""
    pack = build_pack(tmp_path_factory.mktemp("pack"))
    rubric = json.loads((pack / "rubric.json").read_text())
    rubric["cml"]["cml.energy_confusion"] = 3
    rubric["metrics"]["metrics.purity"] = {"points": 2, "partial": False}
    (pack / "rubric.json").write_text(json.dumps(rubric))
    masters = {p.stem: json.loads(p.read_text()) for p in to_otter(pack, pack / "otter")}
    seed = json.loads((pack / "grader" / "hidden.json").read_text())["seed"]
    return pack, masters, seed


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_exercise_is_exactly_one_question_at_the_rubrics_points(exported, chapter):
    import nbformat

    pack, masters, seed = exported
    master = masters[chapter]
    nbformat.validate(nbformat.from_dict(master))
    config = _text(master["cells"][0]).split("\n")
    assert master["cells"][0]["cell_type"] == "raw" and config[:2] == ["# ASSIGNMENT CONFIG", f'name: "{chapter}"']
    questions = _questions(master)
    instructor = json.loads((pack / "instructor" / f"{chapter}.ipynb").read_text())
    assert [q["name"] for q in questions] == exercise_names(instructor)
    rubric = load_rubric(pack / "rubric.json", chapter)
    assert {q["name"]: q["points"] for q in questions} == {n: item.points for n, item in rubric.items()}
    for q in questions:
        assert q["tests"] and all("assert_passes(" in code for _, code in q["tests"])
        assert q["solution"], f"{q['name']} has no solution block"
        assert any(solution_text(_text(c)) for c in q["solution"]), f"{q['name']}: its solution is not in its block"
        hidden = [code for is_hidden, code in q["tests"] if is_hidden]
        assert bool(hidden) == (_kind(REGISTRY[q["name"]]) == "function")
        assert all(f"hidden_seed={seed}" in code for code in hidden)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_student_facing_cells_hold_no_solution_and_no_seed(exported, chapter):
    pack, masters, seed = exported
    instructor = json.loads((pack / "instructor" / f"{chapter}.ipynb").read_text())
    student = _student_text(masters[chapter])
    for cell in instructor["cells"]:
        for line in solution_text(_text(cell)):
            assert line not in student, f"{chapter}: students would see {line!r}"
    assert str(seed) not in student
    # otter strips markers only inside solution blocks: none may be left outside one
    outside = [_text(c) for block, c in _walk(masters[chapter]) if block != "solution"]
    assert not any("# SOLUTION" in t for t in outside)


def _run(code: str, namespace: dict):
    """Run one generated test in a copy of the notebook's namespace, as otter's doctest does; what it prints
    would fail an otter test."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, dict(namespace))
    assert out.getvalue() == "", f"a test printed {out.getvalue()!r}"


def _fails(code: str, namespace: dict) -> str:
    with pytest.raises(AssertionError) as err:
        _run(code, namespace)
    return str(err.value)


def _solved(questions, kinds) -> dict:
    """The namespace after the solution blocks of a chapter's questions of the given kinds, run in order."""
    ns = {"torch": torch, "math": math, "np": np, "zslib": __import__("zslib")}
    for q in questions:
        if _kind(REGISTRY[q["name"]]) in kinds:
            for cell in q["solution"]:
                exec(_text(cell), ns)
    return ns


def _answer_call(q) -> ast.Call:
    return next(n for n in ast.walk(ast.parse(q["tests"][0][1])) if isinstance(n, ast.Call))


def _answer_names(q) -> list[str]:
    """The names the chapter's answer is made of (``(jrs_two, ec_two)``: both), read from a generated test."""
    return [n.id for n in ast.walk(_answer_call(q).args[1]) if isinstance(n, ast.Name)]


def test_function_tests_pass_on_the_solution_and_fail_on_stub_wrong_and_fitted_answers(exported):
    """Every function exercise of the book: its solution passes every public and hidden test; ``...`` and a
    wrong function fail every one; a function that is right on the published inputs only passes the public
    tests and fails the hidden ones."""
    _, masters, _ = exported
    checked = 0
    for chapter, master in masters.items():
        questions = _questions(master)
        ns = _solved(questions, {"function"})
        for q in (q for q in questions if _kind(REGISTRY[q["name"]]) == "function"):
            (name,) = _answer_names(q)
            for _, code in q["tests"]:
                _run(code, ns)
            for _, code in q["tests"]:
                assert "not answered" in _fails(code, ns | {name: ...})
                _fails(code, ns | {name: lambda *args, **kwargs: torch.tensor(-7.0, requires_grad=True)})
            ex, solution = REGISTRY[q["name"]], ns[name]
            published = [case.args for case in ex.cases()]

            def fitted(*args, _published=published, _solution=solution, **kwargs):
                seen = any(all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
                               for a, b in zip(args, p)) for p in _published)
                value = _solution(*args, **kwargs)
                return value if seen else value + 1.0

            for hidden, code in q["tests"]:
                if hidden:
                    assert "hidden input" in _fails(code, ns | {name: fitted})
                else:
                    _run(code, ns | {name: fitted})
            checked += 1
    assert checked == sum(_kind(e) == "function" for e in REGISTRY.values())


def test_number_tests_pass_on_the_solution_fail_on_stub_and_wrong_and_split_a_tuple(exported):
    _, masters, _ = exported
    checked = 0
    for master in masters.values():
        questions = _questions(master)
        ns = _solved(questions, {"function", "number"})
        for q in (q for q in questions if _kind(REGISTRY[q["name"]]) == "number"):
            names = _answer_names(q)
            for _, code in q["tests"]:
                _run(code, ns)
                assert "not answered" in _fails(code, ns | {n: ... for n in names})
            answer = eval(compile(ast.Expression(_answer_call(q).args[1]), "answer", "eval"), dict(ns))
            if len(q["tests"]) == 1:
                for n in names:
                    _fails(q["tests"][0][1], ns | {n: ns[n] * 1.5 + 1})
            else:  # one test per number: a wrong number fails its own test only
                assert len(q["tests"]) == len(answer) == len(REGISTRY[q["name"]].expected())
                for k in range(len(answer)):
                    if len(names) == 1:  # answer = (5.0, 1.0)
                        wrong = ns | {names[0]: tuple(v * 1.5 + 1 if j == k else v for j, v in enumerate(answer))}
                    else:  # (jrs_two, ec_two)
                        wrong = ns | {names[k]: ns[names[k]] * 1.5 + 1}
                    for j, (_, code) in enumerate(q["tests"]):
                        if j == k:
                            assert f"number {k + 1} of {len(answer)}" in _fails(code, wrong)
                        else:
                            _run(code, wrong)
            checked += 1
    assert checked == sum(_kind(e) == "number" for e in REGISTRY.values())


def test_a_chapter_run_as_otter_runs_it_passes_its_tests_at_each_question(exported):
    """how_to_use, run cell by cell as otter's autograder runs it: at the end of each question its tests pass on
    the notebook's state; with the answer replaced by ``...`` or by another answer they fail."""
    _, masters, _ = exported
    master, ns, done, block, current = masters["how_to_use"], {}, 0, None, None
    questions = {q["name"]: q for q in _questions(master)}
    for cell in master["cells"]:
        text = _text(cell)
        if cell["cell_type"] == "raw":
            first = text.split("\n")[0]
            block = {"# BEGIN TESTS": "tests", "# END TESTS": None}.get(first, block)
            if first == "# BEGIN QUESTION":
                current = questions[json.loads(text.split("\n")[1].split(": ", 1)[1])]
            elif first == "# END QUESTION":
                names = _answer_names(current)
                other = {n: ("changed" if ns[n] == "unchanged" else "unchanged") if isinstance(ns[n], str)
                         else ns[n] + 1 for n in names}
                for _, code in current["tests"]:
                    _run(code, ns)
                    _fails(code, ns | {n: ... for n in names})
                    _fails(code, ns | other)
                done += 1
        elif cell["cell_type"] == "code" and block != "tests":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(text, ns)
    assert done == 3


def test_shared_cells_are_split_and_unchecked_solutions_stubbed(exported):
    pack, masters, _ = exported
    cml = {q["name"]: q for q in _questions(masters["cml"])}
    # one solution cell and one check cell serve two exercises in the chapter: each question gets its half
    diversity = "\n".join(_text(c) for c in cml["cml.diversity_confusion"]["solution"])
    hoeffding = "\n".join(_text(c) for c in cml["cml.hoeffding"]["solution"])
    assert "def my_diversity_confusion" in diversity and "bound =" not in diversity
    assert "bound =" in hoeffding and "def my_diversity_confusion" not in hoeffding
    assert [_text(c) for c in cml["cml.hoeffding"]["after"]] == ['check("cml.hoeffding", bound)']
    assert cml["cml.energy_confusion"]["points"] == 3 and len(cml["cml.energy_confusion"]["tests"]) == 6
    assert not cml["cml.energy_confusion"].get("all_or_nothing")
    purity = {q["name"]: q for q in _questions(masters["metrics"])}["metrics.purity"]
    assert purity["points"] == 2 and purity["all_or_nothing"] is True
    # the comparison chapter's solution cell holds its own check: it is the solution, the stub before stays
    compare = {q["name"]: q for q in _questions(masters["compare"])}["compare.selection_bias"]
    assert "check(" in _text(compare["solution"][0]) and not compare["after"]


def test_a_solution_no_check_grades_is_stubbed_in_the_master():
    """A solution cell after the last check (an exercise without a check) keeps its stub only; a checked
    exercise before it becomes a question with its solution."""
    def cell(kind, text):
        return {"cell_type": kind, "id": f"c{abs(hash(text)) % 10**8}", "metadata": {}, "source": text,
                **({"outputs": [], "execution_count": None} if kind == "code" else {})}

    nb = {"cells": [cell("markdown", "Exercise: purity"),
                    cell("code", "# BEGIN SOLUTION\nanswer = 1.0\n# END SOLUTION"),
                    cell("code", 'check("metrics.purity", answer)'),
                    cell("markdown", "More exercise: no check"),
                    cell("code", "x = 2\n# BEGIN SOLUTION\nsecret_step = 3\n# END SOLUTION")],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    plan = plan_chapter(nb, {"metrics.purity": RubricItem("metrics.purity", 2)}, seed=0)
    text = "\n".join(_text(c) for c in plan if isinstance(c, dict))
    question = next(c for c in plan if not isinstance(c, dict))
    assert question.name == "metrics.purity" and "answer = 1.0" in "\n".join(_text(c) for c in question.solution)
    assert "x = 2" in text and "More exercise: no check" in text and "secret_step" not in text


def test_assert_passes_names_the_failing_input_and_swallows_what_the_answer_prints():
    def noisy(labels, clusters):
        print("debugging", labels.shape)
        return 0.0

    with pytest.raises(AssertionError, match="input 1 of 1"):
        assert_passes("metrics.purity", noisy, case=1)
    with pytest.raises(AssertionError, match="hidden input"):
        assert_passes("metrics.purity", noisy, case=0, hidden_seed=5)
    with pytest.raises(AssertionError, match="expected 2 numbers, got 3"):
        assert_passes("jrd.two_samples", (1.0, 2.0, 3.0), number=0)


def test_the_cli_exports_beside_the_pack_and_refuses_in_one_line(tmp_path, capsys):
    assert main(["assignments", "--out", str(tmp_path / "p"), "--chapter", "how_to_use", "--format", "otter"]) == 0
    master = tmp_path / "p" / "otter" / "how_to_use" / "how_to_use.ipynb"
    assert [q["name"] for q in _questions(json.loads(master.read_text()))] == [
        "how_to_use.batch_size", "how_to_use.iteration_factor", "how_to_use.variant_leaves_profile"]
    assert os.stat(tmp_path / "p" / "otter").st_mode & 0o077 == 0
    readme = (tmp_path / "p" / "README.md").read_text()
    assert "--format otter" in readme and "otter assign <chapter>.ipynb dist/" in readme
    capsys.readouterr()
    assert main(["assignments", "--out", str(tmp_path / "q"), "--chapter", "nope", "--format", "otter"]) == 2
    err = capsys.readouterr().err
    assert "no such chapter" in err and len(err.strip().splitlines()) == 2  # the message and the --debug hint
    with pytest.raises(FileNotFoundError, match="not an assignment pack"):
        to_otter(tmp_path / "elsewhere", tmp_path / "out")


def test_nbgrader_cells_carry_its_metadata_and_the_same_tests(tmp_path):
    (path,) = to_nbgrader(["cml"], tmp_path, seed=11)
    assert path == tmp_path / "source" / "cml" / "cml.ipynb"
    nb = json.loads(path.read_text())
    meta = [c["metadata"]["nbgrader"] for c in nb["cells"] if "nbgrader" in c.get("metadata", {})]
    assert len({m["grade_id"] for m in meta}) == len(meta) and all(m["schema_version"] == 3 for m in meta)
    points = {}
    for cell in nb["cells"]:
        m, text = cell.get("metadata", {}).get("nbgrader"), _text(cell)
        assert "# SOLUTION" not in text.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")
        if m and m["solution"]:
            assert text.count("### BEGIN SOLUTION") == text.count("### END SOLUTION") >= 1
        if m and m["grade"]:
            assert m["locked"] and not m["solution"]
            name = text.split("assert_passes('", 1)[1].split("'", 1)[0]
            points[name] = points.get(name, 0) + m["points"]
            assert ("### BEGIN HIDDEN TESTS" in text) == ("hidden_seed=11" in text)
    assert points == {n: REGISTRY[n].points for n in exercise_names(nb)}  # the shares add up exactly


def test_otter_assign_accepts_the_master_and_its_autograder_gives_the_solutions_full_points(tmp_path):
    """Otter itself (skipped where otter-grader is not installed): `otter assign` splits the master, then runs
    the solutions notebook through the autograder it made and stops unless every test passes."""
    pytest.importorskip("otter")
    seed = 271828182845
    (master,) = to_otter(["metrics"], tmp_path, seed=seed)
    root = str(Path(__import__("zslib").__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
           "ZS_RESULTS": str(tmp_path / "results")}
    run = subprocess.run([sys.executable, "-m", "otter", "assign", "-v", master.name, "dist"], cwd=master.parent,
                         env=env, capture_output=True, text=True, timeout=600)
    log = run.stdout + run.stderr
    assert run.returncode == 0 and "All autograder tests passed" in log, log[-4000:]
    dist = master.parent / "dist"
    student = "\n".join(_text(c) for c in json.loads((dist / "student" / "metrics.ipynb").read_text())["cells"])
    instructor = json.loads((Path(root) / "book" / "metrics.ipynb").read_text())
    lines = [line for cell in instructor["cells"] for line in solution_text(_text(cell))]
    assert lines and not [line for line in lines if line in student]
    assert 'grader.check("metrics.purity")' in student
    assert str(seed) not in (dist / "student" / "metrics.ipynb").read_text()  # cells and metadata (the public tests)
    (archive,) = (dist / "autograder").glob("*.zip")
    with zipfile.ZipFile(archive) as z:
        tests = z.read("tests/metrics.purity.py").decode()
    assert tests.count(f"hidden_seed={seed}") == 3 and tests.count("'hidden': True") == 3
