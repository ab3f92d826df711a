"""A hostile class, built here, graded in every mode this machine allows: one notebook cannot stop the class's
grading, choose its own key, count three times, make the grader write through its links or outlive the grade; and
the feedback says what happened.

Each case failed before: malformed lines on the grader's channel ended ``grade-all`` with a traceback and no
gradebook; metadata ``"chapter": "../<itself>"`` made ``grade --instructor DIR`` take the submission as its own key;
three copies of a chapter earned three times its points in canvas.csv; links planted in the output folder were
written through; a double-forked ``setsid`` child outlived ``grade`` in same-user mode; the chapter card raised
ImportError in every notebook; a NotImplementedError read "not attempted" and a check cell that raised NameError
"did not run"; a rubric with text appended failed without naming the file.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from zslib.teaching import grading
from zslib.teaching.output import OutputFolder, UnsafeOutput
from zslib.teaching.protocol import BadMessage, check_message

from grading_cells import IMPORT, NORMS, PREDICTION, PURITY
from grading_cells import notebook as _nb

pytestmark = pytest.mark.slow

CARD = "from zslib.teaching.path import chapter_card\nchapter_card('metrics')"
CHOICE = "check('" + PREDICTION + "', 'up', interval=effect)"
UNIT = "check('zero_shot_problem.unit_distance', (2 - 2 * 0.6) ** 0.5)"
KEY = [IMPORT, CARD, "check('metrics.duplicated_r1', 1.0)", PURITY, UNIT, NORMS, CHOICE]
RUBRIC = {"tiny": {"metrics.duplicated_r1": 1, "metrics.purity": 2, "zero_shot_problem.unit_distance": 1,
                   PREDICTION: 1},
          "other": {"metrics.duplicated_r1": 1}}
MALFORMED = [  # what a submission can write on the grader's channel instead of what check() writes
    {"op": "answer", "name": "metrics.purity", "kind": "function", "identity": "x.f", "results": [1, 2, 3, 4, 5, 6]},
    {"op": "answer", "name": "zero_shot_problem.unit_distance", "kind": "number",
     "answer": {"tensor": "double", "shape": [3, 3], "data": [1.0, 2.0]}},
    {"op": "answer", "name": PREDICTION, "kind": "choice", "answer": "up",
     "context": 7},
]
CHANNEL = ("import json, os, sys\nfd = int(sys.argv[2])  # the grader's channel, as the sandbox was started\n"
           f"for msg in {MALFORMED!r}:\n    os.write(fd, (json.dumps(msg) + '\\n').encode())\n"
           "os.write(fd, b'not json\\n[1, 2]\\n')")


def _write(path: Path, cells, chapter="tiny") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_nb(cells, chapter)))
    return path


def _alive(mark: str) -> list[int]:
    """Live processes whose command line holds ``mark``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if mark in text and state != "Z" and int(entry) != os.getpid():
                found.append(int(entry))
    return found


def _gone(mark: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(mark)
    for pid in left:  # clean up before the test fails
        os.kill(pid, 9)
    return not left


def _double_fork(mark: str) -> str:
    return ("import subprocess\nsubprocess.run(['sh', '-c', "
            f"'(setsid env -i sleep {mark} </dev/null >/dev/null 2>&1 &) ; exit 0'], check=True)")


def _rows(out: Path) -> list[dict]:
    with open(out / "gradebook.csv", newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------------------------------
# The pieces


def test_each_malformed_message_is_refused_with_its_reason():
    kinds = {"metrics.purity": "function", "zero_shot_problem.unit_distance": "number",
             PREDICTION: "choice"}
    reasons = ["results[0] is a JSON int", "needs 9 numbers, got 2", "'context' must be an encoded mapping"]
    for msg, reason in zip(MALFORMED, reasons):
        with pytest.raises(BadMessage, match=reason.replace("[", r"\[").replace("]", r"\]")):
            check_message(json.loads(json.dumps(msg)), kinds, {"metrics.purity": 6})
    with pytest.raises(BadMessage, match="'results' must be a list"):
        check_message({"op": "answer", "name": "metrics.purity", "kind": "function", "results": 5}, kinds)
    with pytest.raises(BadMessage, match="not an exercise graded here"):
        check_message({"op": "answer", "name": "../x", "kind": "number", "answer": 1}, kinds)
    ok = {"op": "answer", "name": "zero_shot_problem.unit_distance", "kind": "number", "answer": 0.89,
          "context": {"mapping": []}}
    assert check_message(dict(ok), kinds) == ok


def test_the_output_folder_is_the_graders_and_no_link_is_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    os.chmod(open_folder, 0o777)
    with pytest.raises(UnsafeOutput, match="writable by other users"):
        OutputFolder.open(open_folder)
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(UnsafeOutput, match="cannot be opened as a folder"):
        OutputFolder.open(tmp_path / "linked")
    with OutputFolder.open(tmp_path / "grades") as out:
        assert stat.S_IMODE(os.stat(tmp_path / "grades").st_mode) == 0o700
        (tmp_path / "grades" / "feedback" / "alice.md").symlink_to(victim)  # planted while grading
        (tmp_path / "grades" / "gradebook.csv").symlink_to(victim)
        out.write_text("feedback/alice.md", "feedback")
        out.write_text("gradebook.csv", "rows")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "grades" / "gradebook.csv").is_symlink()
    assert stat.S_IMODE(os.stat(tmp_path / "grades" / "gradebook.csv").st_mode) == 0o600


def test_the_chapter_comes_from_the_pack_and_a_disagreement_is_flagged():
    chapters = ["metrics", "cml"]
    assert grading.choose_chapter(Path("metrics.ipynb"), chapters, _nb([], "cml"))[0] == "metrics"
    assert "its metadata names chapter 'cml'" in grading.choose_chapter(Path("metrics.ipynb"), chapters,
                                                                        _nb([], "cml"))[1]
    assert grading.choose_chapter(Path("alice.ipynb"), chapters, _nb([], "cml")) == ("cml", "")
    assert grading.choose_chapter(Path("alice.ipynb"), chapters, _nb([], "../../x"))[0] is None
    items = {"metrics": ["metrics.purity"], "cml": ["cml.diversity_confusion"]}
    chapter, note = grading.choose_chapter(Path("metrics_v2.ipynb"), chapters,
                                           _nb(["check('cml.diversity_confusion', f)"], None), items)
    assert chapter == "metrics" and "answer chapter 'cml'" in note


def test_a_rubric_with_text_appended_is_named_in_the_error(tmp_path):
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(RUBRIC, indent=1) + "\n{\"forged\": 1}\n")
    _write(tmp_path / "subs" / "tiny.ipynb", [IMPORT])
    with pytest.raises(ValueError, match="the rubric .*rubric.json is not valid JSON \\(Extra data"):
        grading.grade_all(tmp_path / "subs", rubric, tmp_path / "out", user=None, progress=lambda line: None)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------------
# A class graded as the grader's own user (as root here: each notebook in a PID namespace of its own)


@pytest.fixture(scope="module")
def same_user_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    subs, pack, out, mark = root / "subs", root / "pack", root / "grades", f"31{uuid.uuid4().int % 10**6}.5"
    (pack / "instructor").mkdir(parents=True)
    (pack / "rubric.json").write_text(json.dumps(RUBRIC))
    _write(pack / "instructor" / "tiny.ipynb", KEY)
    victims = [root / "victim_feedback.txt", root / "victim_canvas.txt"]
    for v in victims:
        v.write_text("precious")
    _write(subs / "honest.ipynb", KEY)
    _write(subs / "badchannel.ipynb", [IMPORT, CHANNEL, "check('metrics.duplicated_r1', 1.0)"])
    for copy in ("alice/tiny.ipynb", "alice/tiny_v2.ipynb", "alice/old/tiny.ipynb"):
        _write(subs / copy, KEY)
    _write(subs / "bob" / "tiny.ipynb", KEY[:3], chapter="other")
    _write(subs / "planter.ipynb", [IMPORT, "import os\n"
                                    f"os.makedirs({str(out / 'feedback')!r}, exist_ok=True)\n"
                                    f"os.symlink({str(victims[0])!r}, {str(out / 'feedback' / 'honest.md')!r})\n"
                                    f"os.symlink({str(victims[1])!r}, {str(out / 'canvas.csv')!r})"])
    _write(subs / "mistakes.ipynb", [IMPORT, CARD, "def purity(labels, clusters):\n    raise NotImplementedError\n"
                                     "check('metrics.purity', purity)", "check('zero_shot_problem.unit_distance', d)"])
    _write(subs / "dfork.ipynb", [IMPORT, _double_fork(mark), "check('metrics.duplicated_r1', 1.0)"])
    lines = []
    grades = grading.grade_all(subs, pack / "rubric.json", out, user=None, timeout=180, progress=lines.append)
    return {"root": root, "out": out, "rows": {r["notebook"]: r for r in _rows(out)}, "grades": grades,
            "victims": victims, "mark": mark, "lines": lines}


def test_malformed_messages_cost_their_exercises_and_the_class_is_graded(same_user_class):
    rows = same_user_class["rows"]
    assert len(rows) == 9  # every notebook a row
    bad = rows["badchannel.ipynb"]
    assert bad["metrics.duplicated_r1"] == "1" and bad["points"] == "1"
    assert all(bad[m["name"]] == "0" for m in MALFORMED)
    feedback = (same_user_class["out"] / "feedback" / "badchannel.md").read_text()
    assert "does not have the form of one (results[0] is a JSON int" in feedback
    assert rows["honest.ipynb"]["points"] == "5" and rows["honest.ipynb"]["status"] == "completed"


def test_the_chapter_card_raises_nothing_while_graded(same_user_class):
    assert same_user_class["rows"]["honest.ipynb"]["cell errors"] == "0"  # before: ImportError in cell 2
    assert "instructor tiny.ipynb: 5 / 5 (completed)" in same_user_class["lines"]


def test_three_copies_of_a_chapter_count_once(same_user_class):
    rows = same_user_class["rows"]
    assert rows["alice/tiny.ipynb"]["counted"] == "yes" and rows["alice/tiny.ipynb"]["points"] == "5"
    for copy in ("alice/tiny_v2.ipynb", "alice/old/tiny.ipynb"):
        assert rows[copy]["counted"] == "no" and rows[copy]["points"] == "0"
        assert rows[copy]["status"] == "not graded: alice handed in 3 notebooks of chapter tiny; one counts, " \
                                       "alice/tiny.ipynb"
    with open(same_user_class["out"] / "canvas.csv", newline="") as fh:
        canvas = {r["Student"]: r for r in csv.DictReader(fh)}
    assert canvas["alice"]["tiny (zslib)"] == "5"  # before: 15


def test_a_notebook_whose_metadata_names_another_chapter_is_flagged(same_user_class):
    bob = same_user_class["rows"]["bob/tiny.ipynb"]
    assert bob["chapter"] == "tiny" and "its metadata names chapter 'other'" in bob["note"]


def test_links_planted_in_the_output_folder_are_not_written_through(same_user_class):
    assert all(v.read_text() == "precious" for v in same_user_class["victims"])  # before: overwritten
    out = same_user_class["out"]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    assert not (out / "feedback" / "honest.md").is_symlink()
    assert "5 / 5 points" in (out / "feedback" / "honest.md").read_text()


def test_feedback_names_what_happened(same_user_class):
    feedback = (same_user_class["out"] / "feedback" / "mistakes.md").read_text()
    assert "your function raised NotImplementedError" in feedback  # before: "not attempted"
    assert "its check cell (cell 4) ran and raised NameError: name 'd' is not defined" in feedback  # "did not run"
    assert f"no cell of the notebook calls check('{PREDICTION}'" in feedback


def test_a_double_forked_child_does_not_outlive_grade_all(same_user_class):
    assert _gone(same_user_class["mark"])


# ----------------------------------------------------------------------------------------------------
# One notebook: its key is the pack's, and nothing it started outlives the grade


def test_the_key_comes_from_the_pack_not_from_a_path_the_submission_names(tmp_path):
    instructor, subs = tmp_path / "pack" / "instructor", tmp_path / "subs"
    _write(instructor / "tiny.ipynb", [IMPORT, NORMS, CHOICE])
    forged = "check('" + PREDICTION + "', 'up', interval=(1.0, 0.5, 1.5))"
    me = _write(subs / "forger.ipynb", [IMPORT, forged], chapter=os.path.relpath(subs / "forger", instructor))
    g = grading.grade_submission(me, None, instructor=instructor, user=None, timeout=180)
    assert g.exercises[PREDICTION]["points"] == 0  # before: its own key, 1 point
    assert g.chapter == "tiny" and "its metadata names chapter '../../subs/forger'" in g.note


@pytest.mark.parametrize("pid_namespace", [True, False], ids=["root-pid-namespace", "reaper-as-without-root"])
def test_grade_kills_a_double_forked_setsid_child(tmp_path, monkeypatch, pid_namespace):
    if pid_namespace and not grading._pid_namespace_works():
        pytest.skip("no PID namespace here (it needs root and util-linux)")
    monkeypatch.setattr(grading, "_PID_NS_WORKS", [pid_namespace])
    mark = f"32{uuid.uuid4().int % 10**6}.5"
    nb = _write(tmp_path / "tiny.ipynb", [IMPORT, _double_fork(mark), "check('metrics.duplicated_r1', 1.0)"])
    g = grading.grade_submission(nb, {"metrics.duplicated_r1": 1}, user=None, timeout=120)
    assert g.points == 1 and _gone(mark)  # before: `sleep` lived on with parent 1


# ----------------------------------------------------------------------------------------------------
# As root, each submission as a uid of its own (process mode, and the namespace jail): a shell stands for the
# grader's Python (the uids cannot run this checkout's), acting as the submission does

FAKE_PYTHON = """#!/bin/bash
# the probe (-c) passes; the jail's own module runs in the real Python (as root, before it drops to the uid)
[ "$1" = "-c" ] && exit 0
[ "$2" = "zslib.teaching.jail" ] && exec {real} "$@"
nb="$3"; out="$4"
if grep -q MALLORY "$nb"; then
  (setsid env -i sleep {mark} </dev/null >/dev/null 2>&1 &)
  mkdir -p {grades}/feedback 2>/dev/null && chmod 777 {grades} {grades}/feedback 2>/dev/null
  ln -s {victim} {grades}/feedback/b_honest.md 2>/dev/null
  ln -s {victim} {grades}/gradebook.csv 2>/dev/null
  tensor='{{"tensor": "double", "shape": [3, 3], "data": [1.0]}}'
  echo '{{"op": "answer", "name": "metrics.duplicated_r1", "kind": "number", "answer": '"$tensor"'}}' >&$out
  echo '[1, 2, 3]' >&$out
  sleep 1
else
  sleep 1
  echo '{{"op": "answer", "name": "metrics.duplicated_r1", "kind": "number", "answer": 1.0}}' >&$out
fi
echo '{{"op": "done"}}' >&$out
"""


@pytest.mark.parametrize("isolation", ["process", "namespaces"])
def test_as_root_a_hostile_submission_cannot_reach_the_output_or_outlive_its_grade(tmp_path, monkeypatch, isolation):
    if os.geteuid() != 0:
        pytest.skip("submissions run as other users only under a root grader")
    if isolation == "namespaces" and (shutil.which("unshare") is None or
                                      grading._namespaces_problem(grading._user_ids(grading.POOL))):
        pytest.skip("the namespace jail is not available here")
    shared = Path(tempfile.mkdtemp(prefix="zs-hostile-"))  # world-writable, as /tmp is: where the output goes
    try:
        os.chmod(shared, 0o1777)
        victim, grades, mark = shared / "victim.txt", shared / "grades", f"33{uuid.uuid4().int % 10**6}.5"
        victim.write_text("precious")
        fake = shared / "python"
        fake.write_text(FAKE_PYTHON.format(real=sys.executable, mark=mark, grades=grades, victim=victim))
        os.chmod(fake, 0o755)
        subs = tmp_path / "subs"
        _write(subs / "a_mallory.ipynb", [IMPORT, "# MALLORY"])
        _write(subs / "b_honest.ipynb", [IMPORT, "# HONEST"])
        rubric = tmp_path / "rubric.json"
        rubric.write_text(json.dumps({"tiny": {"metrics.duplicated_r1": 1}}))
        monkeypatch.setattr(sys, "executable", str(fake))
        monkeypatch.setenv("PYTHONPATH", str(Path(grading.__file__).resolve().parents[2]))
        result = grading.grade_all(subs, rubric, grades, isolation=isolation, timeout=60, progress=lambda line: None)
        assert [(g.student, g.points) for g in result] == [("a_mallory", 0), ("b_honest", 1)]
        assert victim.read_text() == "precious"  # before (process mode): the gradebook was written through the link
        info = os.stat(grades)
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o700
        assert "does not have the form" in (grades / "feedback" / "a_mallory.md").read_text()
        assert _gone(mark)
    finally:
        subprocess.run(["rm", "-rf", str(shared)])
