"""A small class graded end to end, once one notebook at a time and once two at a time: a cell that raises is
counted and shown, an untouched stub reads "not attempted", the instructor notebook (the key) earns every point
and decides the questions that depend on the chapter's numbers, so numbers a submission hands over earn
nothing; a linked submission is refused; a process left behind in same-user mode is gone before the gradebook
is written; ``-j 2`` writes the same gradebook as ``-j 1``; and in process mode, as root, each submission runs as
a uid of its own, so one student's leftover process cannot touch the next student's notebook."""
import csv
import json
import os
import subprocess
import time
import sys
import tempfile
from pathlib import Path

import pytest

from zslib.teaching import gradebook, grading
from zslib.teaching.exercises.kinds import NOT_ATTEMPTED

from grading_cells import IMPORT, NORMS, PREDICTION, PURITY
from grading_cells import notebook as _nb

pytestmark = pytest.mark.slow

HERE = str(Path(grading.__file__).resolve().parents[2])  # this checkout's zslib, from any folder
STUB = "def purity(labels, clusters):\n    ...  # your code here\ncheck('metrics.purity', purity)"
CHOICE = "check('" + PREDICTION + "', '{}', interval=effect)"
RUBRIC = {"tiny": {"metrics.duplicated_r1": 1, "metrics.purity": 2, PREDICTION: 1}}
KEY = [IMPORT, "check('metrics.duplicated_r1', 1.0)", PURITY, NORMS, CHOICE.format("up")]


def _class(root: Path) -> tuple[Path, Path]:
    subs, pack = root / "subs", root / "pack"
    (pack / "instructor").mkdir(parents=True)
    subs.mkdir()
    (pack / "rubric.json").write_text(json.dumps(RUBRIC))
    (pack / "instructor" / "tiny.ipynb").write_text(json.dumps(_nb(KEY, chapter=None)))  # no metadata: by its name
    notebooks = {
        "honest": KEY,
        "erroring": [IMPORT, "raise RuntimeError('boom in cell 2')", *KEY[1:]],
        # untouched stubs, and the chapter's numbers forged: an interval typed in, the answer made to fit it
        "forger": [IMPORT, "check('metrics.duplicated_r1', ...)", STUB,
                   "check('" + PREDICTION + "', 'up', interval=(1.0, 0.5, 1.5))"],
        # the other answer, with numbers made to fit it; and a process that leaves the session and clears its
        # environment, left to rewrite the gradebook after grading
        "forger2": [IMPORT, "check('" + PREDICTION + "', 'down', interval=(-1.0, -1.5, -0.5))",
                    "import subprocess\n"
                    f"p = subprocess.Popen(['setsid', 'env', '-i', 'sh', '-c', 'sleep 300; echo forged > "
                    f"{root}/grades_j1/gradebook.csv'])\n"
                    "check('metrics.duplicated_r1', 1.0)"],
    }
    for name, cells in notebooks.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(_nb(cells)))
    (subs / "mallory.ipynb").symlink_to(pack / "instructor" / "tiny.ipynb")  # the solutions, by a link
    return subs, pack


def _running(line: str) -> list[int]:
    """The live processes whose command line holds ``line``."""
    found = []
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            text = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if line in text and _alive(int(entry)):
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class44")
    subs, pack = _class(root)
    leftover = f"{root}/grades_j1/gradebook.csv"  # in the command line of forger2's detached shell
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    runs = {}
    for jobs in (1, 2):
        out = subprocess.run([sys.executable, "-m", "zslib", "grade-all", str(subs), "--rubric",
                              str(pack / "rubric.json"), "--out", str(root / f"grades_j{jobs}"), "--timeout", "120",
                              "--same-user", "-j", str(jobs)], capture_output=True, text=True, env=env, cwd=str(subs))
        assert out.returncode == 0, out.stdout + out.stderr
        runs[jobs] = out.stdout
        if jobs == 1:
            survivors = _running(leftover)  # found by its command line: a pid it saw may be a PID namespace's
            leftover_alive = bool(survivors)
            for pid in survivors:  # clean up before the test fails
                os.kill(pid, 9)
    with open(root / "grades_j1" / "gradebook.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    return {"root": root, "rows": rows, "stdout": runs, "leftover_alive": leftover_alive, "pack": pack}


def test_each_submission_earns_what_its_own_run_shows(graded):
    rows = graded["rows"]
    assert {s: (r["points"], r["total"]) for s, r in rows.items()} == {
        "honest": ("4", "4"), "erroring": ("4", "4"), "forger": ("0", "4"),
        "forger2": ("1", "4"), "mallory": ("0", "0")}, graded["stdout"][1]


def test_a_cell_that_raises_is_counted_and_shown(graded):
    row = graded["rows"]["erroring"]
    assert row["cell errors"] == "1" and graded["rows"]["honest"]["cell errors"] == "0"
    assert "1 cell(s) raised an error (first: cell 2, RuntimeError: boom in cell 2)" in row["status"]
    feedback = (graded["root"] / "grades_j1" / "feedback" / "erroring.md").read_text()
    assert "- cell 2: `RuntimeError: boom in cell 2`" in feedback


def test_an_untouched_stub_reads_not_attempted(graded):
    feedback = (graded["root"] / "grades_j1" / "feedback" / "forger.md").read_text()
    assert f"| `metrics.purity` | 0 / 2 | {NOT_ATTEMPTED}. |" in feedback
    assert f"| `metrics.duplicated_r1` | 0 / 1 | {NOT_ATTEMPTED}. |" in feedback
    assert "did you forget" not in feedback


def test_numbers_handed_to_a_choice_check_decide_nothing(graded):
    """The key (the instructor notebook, run by the grader) computes the chapter's numbers; numbers the
    submission types in earn nothing, whichever answer they were made to fit."""
    for who in ("forger", "forger2"):
        assert graded["rows"][who][PREDICTION] == "0"
    assert graded["rows"]["honest"][PREDICTION] == "1"
    feedback = (graded["root"] / "grades_j1" / "feedback" / "forger.md").read_text()
    assert "interval handed to check are not what the chapter's cells compute" in feedback
    assert "instructor tiny.ipynb: 4 / 4 (completed)" in graded["stdout"][1]


def test_a_linked_submission_is_refused(graded):
    row = graded["rows"]["mallory"]
    assert row["status"].startswith("not graded: mallory.ipynb is a symbolic link")
    with pytest.raises(grading.RefusedSubmission, match="symbolic link"):
        grading.read_submission(graded["root"] / "subs" / "mallory.ipynb")
    fifo = graded["root"] / "fifo.ipynb"
    os.mkfifo(fifo)
    with pytest.raises(grading.RefusedSubmission, match="not a regular file"):
        grading.read_submission(fifo)  # opened without blocking, refused on its type


def test_same_user_grading_ends_every_process_before_writing(graded):
    assert not graded["leftover_alive"], "a process of the submission outlived grade-all"
    assert "forged" not in (graded["root"] / "grades_j1" / "gradebook.csv").read_text()


def test_two_at_a_time_writes_the_same_gradebook(graded):
    assert grading.parallel_jobs(2, grading.DEFAULT_MEMORY_MB)[0] == 2 or os.cpu_count() < 2
    for name in ("gradebook.csv", "canvas.csv"):
        assert (graded["root"] / "grades_j2" / name).read_text() == (graded["root"] / "grades_j1" / name).read_text()


def test_the_canvas_csv_has_canvas_identity_columns_and_one_column_per_chapter(graded, tmp_path):
    with open(graded["root"] / "grades_j1" / "canvas.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == [*gradebook.CANVAS_IDENTITY, "tiny (zslib)"]
    assert ["honest", "", "", "honest", "", "4"] in rows
    roster = tmp_path / "export.csv"  # as Canvas exports a Gradebook: a "Points Possible" row first
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (101)\n"
                      "    Points Possible,,,,,10\n\"Honest, Harriet\",4711,S-1,honest,Sec A,7\n")
    graded_rows = [grading.Graded("honest", "honest.ipynb", "tiny", "completed", 4.0, 4.0),
                   grading.Graded("zoe", "zoe.ipynb", "tiny", "completed", 1.0, 4.0)]
    assert gradebook.write_canvas(graded_rows, tmp_path / "c.csv", roster) == ["zoe"]
    lines = list(csv.reader(open(tmp_path / "c.csv", newline="")))
    assert lines[1] == ["Honest, Harriet", "4711", "S-1", "honest", "Sec A", "4"]


def test_the_instructor_notebook_grades_as_the_key_with_full_marks(graded):
    key = graded["pack"] / "instructor" / "tiny.ipynb"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "zslib", "grade", str(key), "--rubric",
                          str(graded["pack"] / "rubric.json"), "--key", "--same-user", "--timeout", "120"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tiny.ipynb: 4 / 4 points (completed)" in out.stdout


# ----------------------------------------------------------------------------------------------------
# Process mode as root: two students, each as a uid of its own

FAKE_PYTHON = """#!/bin/bash
# Stands for the grader's Python: the probe (-c) passes; a graded run (-m zslib.teaching.sandbox NB OUT IN) acts as
# the submission does, without needing a Python that other users can run.
[ "$1" = "-c" ] && exit 0
nb="$3"; out="$4"
if grep -q MALLORY "$nb"; then
  setsid env -i bash -c 'for i in $(seq 150); do for f in {tmp}/zs-grade-*/work/submission.ipynb; do
    [ -w "$f" ] && echo swapped > "$f"; done; sleep 0.1; done' < /dev/null > /dev/null 2>&1 &
  sleep 0.5
else
  sleep 2
  answer='{{"op": "answer", "name": "metrics.duplicated_r1", "kind": "number", "answer": 1.0}}'
  grep -q HONEST "$nb" && echo "$answer" >&$out
fi
echo '{{"op": "done"}}' >&$out
"""


def test_in_process_mode_a_leftover_process_cannot_reach_the_next_student(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("submissions run as other users only under a root grader")
    tools = Path(tempfile.mkdtemp(prefix="zs-fake-python-"))  # readable by every uid, as an installed Python is
    try:
        os.chmod(tools, 0o755)
        fake = tools / "python"
        fake.write_text(FAKE_PYTHON.format(tmp=tempfile.gettempdir()))
        os.chmod(fake, 0o755)
        subs = tmp_path / "subs"
        subs.mkdir()
        (subs / "a_mallory.ipynb").write_text(json.dumps(_nb([IMPORT, "# MALLORY"])))
        (subs / "b_honest.ipynb").write_text(json.dumps(_nb([IMPORT, "# HONEST"])))
        rubric = tmp_path / "rubric.json"
        rubric.write_text(json.dumps({"tiny": {"metrics.duplicated_r1": 1}}))
        monkeypatch.setattr(sys, "executable", str(fake))
        grades = grading.grade_all(subs, rubric, tmp_path / "out", isolation="process", timeout=60,
                                   progress=lambda line: None)
        assert [(g.student, g.points) for g in grades] == [("a_mallory", 0), ("b_honest", 1)]
    finally:  # (a leftover of the shared-user grader ends by itself after 15 s)
        subprocess.run(["rm", "-rf", str(tools)])


# ----------------------------------------------------------------------------------------------------
# The pieces: the uid pool refuses uids that are in use, and the reaper finds a process that detached


def test_the_uid_pool_refuses_uids_with_an_account_or_a_process():
    from zslib.teaching.uidpool import UidPool, parse_uids, processes_of

    assert parse_uids("1990000000-1990000003") == (1990000000, 4)
    for bad in ("12-3", "0-10", "abc", "5000-4000"):
        with pytest.raises(ValueError, match="--uids"):
            parse_uids(bad)
    import pwd

    account = pwd.getpwnam("root").pw_uid  # uid 0 has an account everywhere
    assert "belongs to the account 'root'" in UidPool(account, 1).problem()
    assert os.getpid() in processes_of(os.getuid())
    assert "has running processes" in UidPool(account=pwd.getpwuid(os.getuid()).pw_name).problem()
    assert UidPool(1990000000, 2).problem() == ""


def test_the_reaper_finds_a_process_that_left_its_session_and_environment():
    from zslib.teaching import reaper

    if not reaper.adopt_orphans(True):
        pytest.skip("no child subreaper on this platform")
    try:
        spare = frozenset(reaper.descendants())
        subprocess.run(["sh", "-c", "setsid env -i sleep 123.4 </dev/null >/dev/null 2>&1 &"], check=True)
        orphans = reaper.descendants(spare=spare)
        assert len(orphans) == 1
        deadline = time.monotonic() + 30  # on a busy machine the orphan may still be between fork and exec
        while "sleep" not in Path(f"/proc/{orphans[0]}/cmdline").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "sleep" in Path(f"/proc/{orphans[0]}/cmdline").read_text()
        assert reaper.sweep(spare) == [] and not _alive(orphans[0])
    finally:
        reaper.adopt_orphans(False)


def test_a_function_check_leaves_the_notebooks_random_numbers_as_they_were():
    """The chapter's numbers must match the key's run, where the reference ran instead of the student's function:
    running the function on the grader's inputs draws nothing from the notebook's random streams."""
    import random

    import numpy as np
    import torch

    from zslib.teaching.sandbox import run_function, same_random_state

    def noisy(x, labels):
        random.random(), np.random.rand(), torch.rand(3)
        return x.sum()

    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    with same_random_state():
        run_function(noisy, [{"args": [{"tensor": "double", "shape": [2], "data": [1.0, 2.0]},
                                       {"tensor": "long", "shape": [2], "data": [0, 1]}], "grad": None}])
    after = (random.random(), float(np.random.rand()), torch.rand(1).item())
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    assert after == (random.random(), float(np.random.rand()), torch.rand(1).item())
