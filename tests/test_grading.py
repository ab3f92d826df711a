"""The grader scores answers it collects itself, in its own process, against references and hidden inputs
the submission never sees: forged logs, a patched checker, the registry's expected values or the caller's
frame earn nothing; a looping or dying notebook keeps the points of what it answered before; a folder of
submissions becomes a gradebook CSV and one feedback file per student."""
import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from zslib.engine.profile import PROFILES
from zslib.teaching import grading
from zslib.teaching.exercises import REGISTRY, check, verdict
from zslib.teaching.exercises import kinds
from zslib.teaching.exercises.kinds import FunctionExercise
from zslib.teaching.sandbox import run_function

from grading_cells import notebook as _nb

FUNCTIONS = [e for e in REGISTRY.values() if isinstance(e, FunctionExercise)]


def _roundtrip(value):
    return json.loads(json.dumps(value))


def _graded_in_process(ex, fn, seed=5):
    """What the grader gives ``fn`` for exercise ``ex``: the sandbox's half (run on encoded inputs, encode
    the outputs) and the grader's half (score), with the JSON pipe between them."""
    cases = grading.hidden_cases(ex, seed)
    results = run_function(fn, _roundtrip(grading._encoded_cases(cases)))
    return grading.score_answer(ex, _roundtrip({"results": results, "identity": "student.fn"}), cases)


@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.name)
def test_the_reference_passes_the_published_and_the_hidden_inputs(ex):
    fraction, message = _graded_in_process(ex, lambda *a, **k: ex.reference(*a, **k))
    assert fraction == 1.0, message
    cases = grading.hidden_cases(ex, 5)
    published = list(ex.cases())
    hidden = cases[len(published):]
    assert len(hidden) == len(published)
    moved = [any(isinstance(a, torch.Tensor) and a.is_floating_point() and not torch.equal(a, b)
                 for a, b in zip(h.args, p.args)) for h, p in zip(hidden, published)]
    floats = [any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in p.args) for p in published]
    assert all(moved[i] or not floats[i] for i in range(len(published)))
    # every case has a hidden variant the student never saw (real values moved, or integer vectors shuffled)
    assert all(any(not torch.equal(a, b) for a, b in zip(h.args, p.args) if isinstance(a, torch.Tensor))
               for h, p in zip(hidden, published))
    other = grading.hidden_cases(ex, 6)[len(published):]  # another seed, other hidden inputs
    assert any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for h, o in zip(hidden, other)
               for a, b in zip(h.args, o.args))


def test_answers_copied_from_the_published_inputs_get_only_partial_credit():
    """A lookup table of the published inputs' outputs (what a student could copy from the check's
    messages) is right on those and wrong on the hidden ones: half the points, not all."""
    ex = REGISTRY["metrics.map_at_r"]
    table = [(c.args[0], ex.reference(*c.args)) for c in ex.cases()]

    def lookup(x, labels):
        for inp, out in table:
            if inp.shape == x.shape and torch.allclose(inp, x):
                return out
        return 0.5

    fraction, message = _graded_in_process(ex, lookup)
    assert fraction == 0.5, message
    assert "hidden input" in message


def test_the_zslib_reference_itself_earns_nothing():
    ex = REGISTRY["metrics.map_at_r"]
    cases = grading.hidden_cases(ex, 1)
    record = {"identity": grading._identity(ex.forbidden[0]), "results": run_function(ex.forbidden[0], [])}
    assert grading.score_answer(ex, record, cases)[0] == 0.0


def test_a_tuple_of_numbers_earns_the_share_it_gets_right():
    ex = REGISTRY["cml_experiments.dc_and_diversity"]
    assert grading.score_answer(ex, {"answer": {"sequence": [5.0, 1.0]}})[0] == 1.0
    assert grading.score_answer(ex, {"answer": {"sequence": [5.0, 2.0]}})[0] == 0.5
    items = grading.load_rubric({"cml_experiments.dc_and_diversity": {"points": 4, "partial": False}})
    item = items["cml_experiments.dc_and_diversity"]
    assert item.points == 4 and not item.partial


# ----------------------------------------------------------------------------------------------------
# check() itself: a function that never returns, numbers too large for a float, odd contexts and names


def test_a_function_that_never_returns_fails_the_check_within_the_time_limit(monkeypatch):
    monkeypatch.setattr(kinds, "CALL_SECONDS", 0.5)

    def forever(*args):
        while True:
            pass

    start = time.monotonic()
    out = verdict("metrics.purity", forever)
    assert not out.passed and "did not return within 0.5 s" in out.message
    assert time.monotonic() - start < 10


def test_the_time_limit_counts_computing_so_a_busy_machine_cannot_fail_a_check(monkeypatch):
    """A function that waits on the wall clock for longer than the limit (as a fast function does on a machine too
    busy to run it) uses almost no processor time: it is not stopped until the wall-clock backstop; a function that
    waits past the backstop, or computes past the limit, is stopped, in the main thread and in another."""
    stop = threading.Event()  # ends the computing loop that the thread version abandons

    def waits(t):
        time.sleep(t)
        return "done"

    def computes():
        while not stop.is_set():
            pass

    monkeypatch.setattr(kinds, "WALL_FACTOR", 8)
    try:
        for call in (lambda f, a: kinds.call_limited(f, a, {}, 0.25), _in_thread):
            assert call(waits, (1.0,)) == "done"  # 1 s on the wall, 4 times the limit: not computing
            start = time.monotonic()
            with pytest.raises(kinds.TimeLimit):
                call(waits, (30.0,))  # past the backstop of 8 x 0.25 s
            assert time.monotonic() - start < 10
            with pytest.raises(kinds.TimeLimit):
                call(computes, ())
            assert time.monotonic() - start < 20
    finally:
        stop.set()


def _in_thread(fn, args):
    """``call_limited(fn, args)`` with a limit of 0.25 s, called from a thread other than the main one."""
    box = {}

    def run():
        try:
            box["value"] = kinds.call_limited(fn, args, {}, 0.25)
        except BaseException as err:  # handed to the caller
            box["error"] = err

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_the_grader_stops_an_endless_function_once_and_fails_every_input():
    ex = REGISTRY["metrics.purity"]
    cases = grading.hidden_cases(ex, 2)

    def forever(*args):
        while True:
            pass

    start = time.monotonic()
    results = run_function(forever, _roundtrip(grading._encoded_cases(cases)), seconds=0.5)
    assert time.monotonic() - start < 5  # one time limit, not one per input
    fraction, message = grading.score_answer(ex, _roundtrip({"results": results}), cases)
    assert fraction == 0.0 and "did not return within the time limit" in message


def test_numbers_beyond_a_float_fail_the_check_with_a_message():
    out = verdict("metrics.duplicated_r1", 10 ** 400)
    assert not out.passed and "too large" in out.message
    out = verdict("cml_experiments.dc_and_diversity", (5.0, 10 ** 400))
    assert not out.passed and "number 2" in out.message
    out = verdict("metrics.purity", lambda labels, clusters: 10 ** 400)
    assert not out.passed and "expected a number or tensor" in out.message


def test_a_string_context_and_an_int_name_fail_the_check_with_a_message(capsys):
    out = verdict("cml.confusion_effect", "raised", interval="abc")
    assert not out.passed and "could not be read as numbers" in out.message and "interval='abc'" in out.message
    out = check(3, 1.0)
    assert not out.passed and "must be the exercise's name as a string" in out.message
    assert "✘" in capsys.readouterr().out
    with pytest.raises(KeyError, match="metrics.map_at_r"):
        check("metrics.nope", 1)


# ----------------------------------------------------------------------------------------------------
# A class: solved, unsolved, forged, looping and dying notebooks graded in their own processes

RUBRIC = {"tiny": {"metrics.duplicated_r1": 1, "metrics.purity": 2, "cml.confusion_effect": 1,
                   "deep_metric_learning.proxy_nca_floor": 1, "cml.diversity_confusion": 1,
                   "zero_shot_problem.unit_distance": 1, "how_to_use.batch_size": 1}}

PURITY = ("def purity(labels, clusters):\n    return sum(max(int(((clusters == c) & (labels == k)).sum())"
          " for k in labels.unique()) for c in clusters.unique()) / len(labels)")
SOLUTIONS = ["check('metrics.duplicated_r1', 1.0)",
             PURITY + "\ncheck('metrics.purity', purity)",
             "check('cml.confusion_effect', 'raised', interval=(0.02, 0.01, 0.03))",
             "import math\ncheck('deep_metric_learning.proxy_nca_floor', math.log(1 + 49 * math.exp(-4)))",
             "check('cml.diversity_confusion', lambda x: (x ** 2).sum(1).mean())",
             "check('zero_shot_problem.unit_distance', (2 - 2 * 0.6) ** 0.5)",
             f"check('how_to_use.batch_size', {PROFILES['quick'].batch_classes * PROFILES['quick'].batch_per_class})"]


IMPORT = "from zslib.teaching.exercises import check"

FORGED = [  # each forgery aims at its own exercises; the grader before this one gave every one of them its points
    IMPORT,
    # 1. verdict lines written into the old grader's log: metrics.duplicated_r1, cml.confusion_effect
    "import json, os\nfor n in ['metrics.duplicated_r1', 'cml.confusion_effect']:\n"
    "    if os.environ.get('ZS_GRADE_LOG'):\n"
    "        open(os.environ['ZS_GRADE_LOG'], 'a').write(json.dumps({'name': n, 'passed': True}) + '\\n')",
    # 2. the reference read from the caller's frame: metrics.purity
    "import sys\ndef peek(*args):\n    frame = sys._getframe(1)\n    while frame is not None:\n"
    "        if 'expected' in frame.f_locals:\n            return frame.f_locals['expected']\n"
    "        frame = frame.f_back\ncheck('metrics.purity', peek)",
    # 3. the registry's expected value: deep_metric_learning.proxy_nca_floor
    "from zslib.teaching.exercises import REGISTRY\n"
    "check('deep_metric_learning.proxy_nca_floor', REGISTRY['deep_metric_learning.proxy_nca_floor'].expected())",
    # 4. the instructor notebook, executed: how_to_use.batch_size
    "import json, os\nnb = json.load(open(os.path.join('..', 'pack', 'instructor', 'tiny.ipynb')))\n"
    "for cell in nb['cells']:\n    exec(cell['source'])",
    # 5. a checker patched to pass anything: zero_shot_problem.unit_distance, cml.diversity_confusion
    "import zslib.teaching.exercises.kinds as K\npatched = lambda self, a, **c: K.Outcome(self.name, True, 'ok')\n"
    "K.NumberExercise.run = K.FunctionExercise.run = patched\n"
    "check('zero_shot_problem.unit_distance', 0.0)\ncheck('cml.diversity_confusion', 0.0)",
]


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    subs, pack = root / "subs", root / "pack"
    (pack / "instructor").mkdir(parents=True)
    subs.mkdir()
    (pack / "rubric.json").write_text(json.dumps(RUBRIC))
    (pack / "instructor" / "tiny.ipynb").write_text(json.dumps(_nb([IMPORT, *SOLUTIONS])))  # the key
    mark, shared = f"600.{os.getpid()}{time.time_ns() % 10**6}", root / "shared_results"  # a sleep found by its line
    shared.mkdir()
    notebooks = {
        "solved": [IMPORT, *SOLUTIONS],
        "unsolved": [IMPORT, "answer = ...", "check('metrics.duplicated_r1', answer)",
                     "def purity(labels, clusters):\n    ...\ncheck('metrics.purity', purity)"],
        "forged": FORGED,
        "looping": [IMPORT, SOLUTIONS[0],
                    f"import os, subprocess\np = subprocess.Popen(['sleep', '{mark}'], start_new_session=True)\n"
                    "open(os.path.join(os.environ['ZS_RESULTS'], 'forged_result.json'), 'w').write('{}')",
                    "while True:\n    pass", *SOLUTIONS[1:]],
        # the memory limit (8 GB of address space) refuses 16 GB: only then is the answer right
        "dying": [IMPORT, SOLUTIONS[0],
                  "try:\n    bytearray(16 * 2 ** 30)\n    limited = False\nexcept MemoryError:\n    limited = True\n"
                  "check('zero_shot_problem.unit_distance', (2 - 2 * 0.6) ** 0.5 if limited else 0.0)",
                  "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", *SOLUTIONS[1:5]],
    }
    for name, cells in notebooks.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(_nb(cells)))
    here = str(Path(grading.__file__).resolve().parents[2])  # this checkout's zslib, from any folder
    env = dict(os.environ, ZS_RESULTS=str(shared), ZS_GRADE_LOG=str(root / "grade_log.jsonl"),
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "zslib", "grade-all", str(subs), "--rubric", str(pack / "rubric.json"),
                          "--out", str(root / "grades"), "--timeout", "60", "--same-user"],
                         capture_output=True, text=True, env=env, cwd=str(subs))
    assert out.returncode == 0, out.stdout + out.stderr
    with open(root / "grades" / "gradebook.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    return {"rows": rows, "root": root, "mark": mark, "shared": shared, "stdout": out.stdout}


@pytest.mark.slow  # a whole smoke run (campaign, session, class grading, two processes): in `make test`
def test_the_gradebook_scores_solved_unsolved_forged_looping_and_dying(graded_class):
    rows = graded_class["rows"]
    assert {s: (r["points"], r["total"]) for s, r in rows.items()} == {
        "solved": ("8", "8"), "unsolved": ("0", "8"), "forged": ("0", "8"), "looping": ("1", "8"),
        "dying": ("2", "8")}, graded_class["stdout"]
    assert rows["solved"]["status"] == "completed"
    assert rows["looping"]["status"].startswith("time limit of 60 s reached in cell 4 of 10")
    assert rows["dying"]["status"].startswith("died (signal 9")
    assert rows["looping"]["metrics.duplicated_r1"] == "1" and rows["looping"]["metrics.purity"] == "0"
    assert rows["dying"]["zero_shot_problem.unit_distance"] == "1"


@pytest.mark.slow  # grades a whole class (the graded_class fixture): in `make test`
def test_each_forgery_gets_zero_for_the_check_it_forged(graded_class):
    forged = graded_class["rows"]["forged"]
    for name in RUBRIC["tiny"]:
        assert forged[name] == "0", name
    feedback = (graded_class["root"] / "grades" / "feedback" / "forged.md").read_text()
    assert "0 / 8 points" in feedback
    assert "`metrics.purity` | 0 / 2 | right on 0 of 6 inputs" in feedback


@pytest.mark.slow  # grades a whole class (the graded_class fixture): in `make test`
def test_one_feedback_file_per_student_and_the_seed_is_kept(graded_class):
    grades = graded_class["root"] / "grades"
    students = sorted(p.stem for p in (grades / "feedback").iterdir())
    assert students == ["dying", "forged", "looping", "solved", "unsolved"]
    assert "8 / 8 points" in (grades / "feedback" / "solved.md").read_text()
    assert "not checked" in (grades / "feedback" / "looping.md").read_text()
    assert isinstance(json.loads((grades / "grading.json").read_text())["seed"], int)


def _running(line: str) -> list[int]:
    """The live processes whose command line holds ``line``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if line in text and state != "Z":
            found.append(int(entry))
    return found


@pytest.mark.slow  # grades a whole class (the graded_class fixture): in `make test`
def test_leftover_processes_are_killed_and_the_shared_results_untouched(graded_class):
    alive = _running(f"sleep {graded_class['mark']}")  # by its command line: the pid it saw may be a namespace's
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the submission's sleep 600 survived the grading"
    assert list(graded_class["shared"].iterdir()) == []  # the submission wrote its own ZS_RESULTS, not the grader's


def test_a_notebook_without_cells_is_a_one_line_status_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text(json.dumps({"metadata": {}}))
    g = grading.grade_submission(bad, {"metrics.duplicated_r1": 1}, user=None)
    assert (g.points, g.total) == (0, 1) and "no list of 'cells'" in g.status


def test_as_root_submissions_run_as_uids_of_their_own_or_the_grader_says_what_to_do():
    if os.geteuid() != 0:
        pytest.skip("the unprivileged mode needs a root grader")
    assert grading.resolve_user("auto") == grading.POOL  # a uid of its own per submission
    try:
        grading.probe_user(grading.POOL)
    except grading.RefusedUser as err:
        assert "--same-user" in str(err) and sys.executable in str(err)
        return
    # nobody can run this Python: a real run as nobody cannot write outside its folder
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        target = Path(d) / "written_by_submission"
        nb = Path(d) / "nb.ipynb"
        nb.write_text(json.dumps(_nb([IMPORT, f"open({str(target)!r}, 'w').write('x')", SOLUTIONS[0]])))
        g = grading.grade_submission(nb, {"metrics.duplicated_r1": 1}, user=grading.POOL, timeout=120)
        assert g.points == 1 and not target.exists()


def test_the_cli_as_root_says_in_one_line_what_to_do_when_nobody_cannot_run_python(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the unprivileged mode needs a root grader")
    try:
        grading.probe_user(grading.POOL)
        pytest.skip("the pool's uids can run this Python here: nothing to refuse")
    except grading.RefusedUser:
        pass
    nb = tmp_path / "tiny.ipynb"
    nb.write_text(json.dumps(_nb([IMPORT, SOLUTIONS[0]])))
    here = str(Path(grading.__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-m", "zslib", "grade", str(nb)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=here))
    assert out.returncode == 2 and "--same-user" in out.stderr and "Traceback" not in out.stderr
