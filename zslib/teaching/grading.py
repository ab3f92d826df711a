"""Grading that a submission cannot reach: the grader runs each notebook in a separate, limited process and
scores the answers it hands over, in the grader's own process, against references and hidden inputs.

How a submission is graded (:func:`grade_submission`, :func:`grade_all`):

1. The notebook is read without following a link (:func:`read_submission`: a symbolic link, a hard link or
   anything but a regular file is refused, with the reason), copied into a fresh temporary folder with its
   own ``HOME``, ``ZS_RESULTS``, ``ZS_CACHE`` and ``TMPDIR``, and executed by :mod:`zslib.teaching.sandbox` in a
   child process: a new process group (session), an address-space limit, a file-size limit and a total time
   limit; when the grader is root, as a uid of its own (:mod:`zslib.teaching.uidpool`) and, where Linux allows
   it, inside a container of our own (:mod:`zslib.teaching.jail`: new mount, PID, network, IPC and UTS
   namespaces, every mount read-only but the submission's folder). In that process ``check(name, answer)``
   decides nothing: it writes the answer as JSON on a pipe the grader reads, at the moment it is called. A cell
   that raises is reported on the same pipe (counted in the gradebook, listed in the feedback); the next
   cells still run.
   Every line the submission's process writes on that pipe is checked against the protocol's schema
   (:mod:`zslib.teaching.protocol`) before the grader uses it: a line that does not fit costs the exercise it
   names its points (the feedback says what was wrong), nothing else, and the class's grading goes on.
2. The grader scores each exercise's last answer: a number against the exercise's expected value, a function
   by its outputs (and gradients) on the published inputs *and* on hidden inputs (the published ones moved by
   noise from a secret seed: the pack's ``grader/hidden.json`` or a fresh one per grading), compared with the
   zslib reference computed here; an untouched ``...`` stub is "not attempted". A question decided by the
   chapter's numbers (a choice, ``ex.context``) is decided by the grader's own run of the instructor notebook
   (the key, run once per chapter like a submission), and the numbers the submission handed to its check must
   be the ones that run computed (:data:`CONTEXT_RTOL`): numbers a submission types in decide nothing. The
   inputs reach the child only when its ``check`` asks for them; no expected value ever does.
3. When the notebook ends, overruns its time or dies, the grader kills the process group, every process that
   still carries the grading run's token in its environment and, under a root grader, every process of the
   submission's uid (in the namespace jail, every process of its PID namespace), and deletes the folder. In
   same-user mode a root grader runs each notebook in a PID namespace of its own (all its processes die with
   it, however they detached), and every grader adopts every orphaned descendant
   (:mod:`zslib.teaching.reaper`) and kills them all before ``grade`` or ``grade-all`` writes anything.

Which chapter a notebook answers, and so its rubric entry and its key, comes from the pack, never from the
submission: its file name when it names one of the pack's chapters (``metrics.ipynb``, ``alice_metrics.ipynb``,
``metrics_v2.ipynb``), else its metadata's ``chapter`` when that is one of them, else the pack's only chapter; the
key is the pack's ``instructor/<chapter>.ipynb`` of that chapter. A notebook whose metadata names another chapter
than the one it is graded as, or whose checks answer another chapter's exercises, is flagged in the gradebook's
``note`` column and its feedback. A student's notebooks of one chapter count once: the one nearest the top of
their folder (``metrics.ipynb`` before ``metrics_v2.ipynb`` before ``old/metrics.ipynb``) is graded, the others are
listed with a note and not run. The output folder is made by the grader (mode 700) and written without following a
link (:mod:`zslib.teaching.output`).

So a forged ``ZS_GRADE_LOG`` line, a monkeypatched ``check``, a read of ``REGISTRY[name].expected()`` or of
the caller's frame, or numbers typed into a choice check give nothing: the grade never comes from the
submission's process, and the registry the submission sees has no references in it. What crosses the pipe is
data (JSON, never pickle), so a hostile answer cannot run code in the grader. A notebook that loops or dies
keeps the answers it handed over before, because each is sent when its check runs. Rubric items carry points
and partial credit: a function earns the share of inputs it gets right, a tuple of numbers the share of its
numbers. ``grade_all(..., jobs=N)`` runs N notebooks at once (each with its own uid under a root grader); the
scores do not depend on N.

**Why not otter-grader.** Otter's ``assign`` splits a master notebook into student and autograder versions
with hidden tests, and ``grade`` runs each submission in its own Docker container, executes the notebook
there and runs the tests against the notebook's global variables inside that container, collecting the
scores into ``final_grades.csv``. Its safety comes from the container: the tests share the process with
the submission's objects, so without one a submission could reach them. A container engine (a Docker
daemon) is not available on the machines this book targets (a shared 2-core CPU box, Colab), and its tests are
OK-format doctests, whereas this book's checks are its own (function vs reference with gradients, numbers with
tolerances, choices decided by the run's printed numbers) and already drive every chapter. Keeping our
own grader reuses those checks, needs no daemon, and scores outside the submission's process; otter is
still the better choice where Docker is available and a course already uses it: :mod:`zslib.teaching.export`
writes the pack as otter master notebooks (or nbgrader source notebooks) whose tests call the same checks.
nbgrader says in its FAQ that it does not protect against unsafe code; neither does a same-user run here
(see below).

**What each mode protects against** (``isolation``, :func:`resolve_isolation`; ``"auto"`` takes the first that
works here):

* ``"namespaces"`` (grader is root, util-linux's ``unshare`` and ``mount``): all of the next item, and the
  network is unreachable, nothing outside the submission's folder can be written (not even ``/tmp`` or
  ``/dev/shm``), the submission sees only its own processes, and every process it started dies when its first
  one ends, however it detached. Not closed: the kernel is shared (as in any container), world-readable files
  stay readable, CPU share is bounded only by the time limits.
* ``"process"`` with a root grader (each submission as a uid of its own, ``uids``; or ``user=NAME``, one
  submission at a time): the submission cannot write the grader's files, the shared results or cache, another
  submission's folder, nor read files only root can read (keep ``instructor/`` and ``grader/`` of the pack mode
  700); it cannot signal the grader or another submission, and a process it leaves behind, even outside its
  process group with a cleared environment, is killed with its uid before the uid runs anything else. It can
  read world-readable files (the book's chapters with their solutions among them) and use the network.
* as the grader's own user (``user=None``, ``--same-user``): only the process group, the limits and the
  temporary folders protect; the submission can read and write everything the grader can, by absolute path,
  other submissions' folders included while they run. What it leaves behind is found through the child
  subreaper and killed before the gradebook is written (as root also by the PID namespace, when its notebook
  ends); with ``-j N`` (N > 1) and no root a process that left its notebook's process group lives until the
  class's grading ends, not only its own notebook. What stays open is a process started *through another
  program* (``systemd-run --user``, ``at``/``cron``, ``ssh`` to the same machine, a container daemon), which is
  no descendant of the grader and survives it. Use this mode for trusted code or inside a throwaway machine or
  container.
* in every mode: no limit on network (but in the jail), CPU share or the number of open files beyond the
  defaults. And the references are zslib's own functions, which the course hands out: a submission that wraps
  the function an exercise asks to re-implement, copies the book's solution, or undoes the sandbox's module
  replacement (removes its import guard and re-imports the exercise bank from zslib's source) gets the points,
  as it would with any autograder; that is copying, found by reading the code, not a way to make the grader
  report a check it did not run. A submission that copies the chapter's printed numbers into its choice check
  earns the point if its answer fits them: those are the true numbers.
"""
from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import math
import os
import pwd
import re
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

import zslib
from zslib.teaching import gradebook, reaper
from zslib.teaching.exercises import REGISTRY
from zslib.teaching.exercises.kinds import (NOT_ATTEMPTED, Case, FunctionExercise, NumberExercise, Outcome, _as_tensor,
                                           _fresh)
from zslib.teaching.jail import UNSHARE, command
from zslib.teaching.output import OutputFolder
from zslib.teaching.protocol import BadMessage, check_message
from zslib.teaching.sandbox import code_sources, decode, encode
from zslib.teaching.uidpool import DEFAULT_UIDS, UidPool, kill_user

__all__ = ["RubricItem", "Graded", "load_rubric", "grade_submission", "grade_all", "hidden_cases",
           "score_answer", "write_gradebook", "exercise_names", "DEFAULT_TIMEOUT", "DEFAULT_MEMORY_MB", "RefusedUser",
           "RefusedSubmission", "read_submission", "parallel_jobs", "POOL", "CONTEXT_RTOL", "choose_chapter"]


DEFAULT_TIMEOUT = 1800  # seconds for a whole submission
DEFAULT_MEMORY_MB = 8192  # address space; torch needs a few GB of it just to start its threads
HIDDEN_VARIANTS = 1  # hidden inputs per published input of a function exercise
_FILE_LIMIT = 4 * 2 ** 30
_CHECK_CALL = re.compile(r"""check\(\s*["']([\w.]+)["']""")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")  # a chapter: a file name without folders or dots


class RefusedUser(RuntimeError):
    """The unprivileged user cannot run the grader's Python: say what to do instead."""


@dataclass
class RubricItem:
    name: str
    points: float
    partial: bool = True  # a function: share of inputs right; a tuple of numbers: share of numbers


@dataclass
class Graded:
    """One submission's grade. ``exercises``: name -> {points, max, fraction, checked, message}. ``note``: what the
    teacher should know beyond the points (a notebook graded as another chapter than its metadata names, a copy
    not counted); ``counted``: whether its points count (a student's other notebooks of a chapter do not)."""

    student: str
    notebook: str
    chapter: str
    status: str
    points: float
    total: float
    exercises: dict = field(default_factory=dict)
    log_tail: str = ""
    errors: list = field(default_factory=list)  # [{"cell": number from 1, "error": "RuntimeError: ..."}]
    note: str = ""
    counted: bool = True

    def report(self) -> str:
        rows = [f"{self.notebook}: {self.points:g} / {self.total:g} points ({self.status})"]
        rows += [f"  note: {self.note}"] if self.note else []
        rows += [f"  cell {e['cell']} raised {e['error'].splitlines()[0][:150]}" for e in self.errors]
        for name, r in self.exercises.items():
            rows.append(f"  {name:<55s} {r['points']:g} / {r['max']:g}  {r['message'].splitlines()[0]}")
        return "\n".join(rows)


# ----------------------------------------------------------------------------------------------------
# The rubric


def exercise_names(nb: dict) -> list[str]:
    """The exercises a notebook checks, in order of first appearance."""
    return list(dict.fromkeys(n for src in code_sources(nb) for n in _CHECK_CALL.findall(src)))


def check_cells(nb: dict | None) -> dict[str, list[int]]:
    """``{exercise: [code cells (numbered from 1) whose source calls check on it]}``."""
    out: dict[str, list[int]] = {}
    for number, src in enumerate(code_sources(nb or {}), 1):
        for name in dict.fromkeys(_CHECK_CALL.findall(src)):
            out.setdefault(name, []).append(number)
    return out


def _registry():
    return REGISTRY


def _kind(ex) -> str:
    return "function" if isinstance(ex, FunctionExercise) else "number" if isinstance(ex, NumberExercise) else "choice"


def _items(entry: dict) -> dict:
    registry, items = _registry(), {}
    for name, spec in entry.items():
        if name not in registry:
            raise ValueError(f"the rubric names an unknown exercise {name!r}")
        spec = {"points": spec} if isinstance(spec, (int, float)) else dict(spec)
        points = spec.get("points", registry[name].points)
        if not isinstance(points, (int, float)) or points < 0:
            raise ValueError(f"the rubric's points for {name!r} must be a number >= 0, got {points!r}")
        partial = spec.get("partial", _kind(registry[name]) != "choice")
        items[name] = RubricItem(name, float(points), bool(partial))
    return items


def _read_rubric(path: Path) -> dict:
    """A pack's ``rubric.json``; an error naming the file when it is missing or not one JSON object (e.g. something
    was appended to it)."""
    if not path.is_file():
        raise FileNotFoundError(f"no such rubric: {path}")
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"the rubric {path} is not valid JSON ({err}): restore the pack's rubric.json (was "
                         "something appended to it? keep the pack where submissions cannot write)") from None
    if not isinstance(table, dict):
        raise ValueError(f"the rubric {path} is not a JSON object {{chapter: {{exercise: points}}}}; restore the "
                         "pack's rubric.json")
    return table


def load_rubric(rubric, chapter: str | None = None) -> dict:
    """``{name: RubricItem}`` from a ``{name: points | {"points", "partial"}}`` dict, or the entry ``chapter`` of a
    pack's ``rubric.json`` (a path or the loaded ``{chapter: {...}}`` dict)."""
    if isinstance(rubric, (str, os.PathLike)):
        path = Path(rubric)
        rubric = _read_rubric(path)
    if not isinstance(rubric, dict):
        raise ValueError("a rubric is a JSON object {chapter: {exercise: points}}")
    registry = _registry()
    if rubric and all(k in registry for k in rubric):
        return _items(rubric)
    if chapter not in rubric:
        raise ValueError(f"the rubric has no entry for {chapter!r} (it has {', '.join(rubric) or 'none'})")
    return _items(rubric[chapter])


# ----------------------------------------------------------------------------------------------------
# Hidden inputs and scoring (in the grader's process only)


def hidden_cases(ex, seed: int) -> list:
    """The published cases of a function exercise followed by hidden ones: each float tensor of a published
    case plus noise (half its spread) from a generator seeded by ``seed`` and the exercise (folded back to its
    absolute value where the published tensor has no negative entry: an attention map stays one); labels and
    integers stay, except in a case made of integer vectors only (labels against clusters), whose vectors are
    each shuffled. Every hidden case is as valid an input as the published one it comes from."""
    public = list(ex.cases())
    out = list(public)
    for variant in range(HIDDEN_VARIANTS):
        for k, case in enumerate(public):
            digest = hashlib.sha256(f"{seed}:{ex.name}:{variant}:{k}".encode()).digest()
            g = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2 ** 63 - 1))
            only_integers = not any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in case.args)
            args = []
            for a in case.args:
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    spread = float(a.std()) if a.numel() > 1 and float(a.std()) > 0 else 1.0
                    noisy = a + 0.5 * spread * torch.randn(a.shape, generator=g, dtype=a.dtype)
                    a = noisy.abs() if bool((a >= 0).all()) else noisy  # a non-negative input stays non-negative
                elif isinstance(a, torch.Tensor) and only_integers and a.dim() == 1:
                    a = a[torch.randperm(a.numel(), generator=g)]  # e.g. labels against clusters: shuffled apart
                args.append(a)
            out.append(Case(f"hidden input {len(out) - len(public) + 1}", tuple(args), dict(case.kwargs), case.grad))
    return out


def _encoded_cases(cases) -> list:
    return [{"args": [encode(a) for a in c.args], "kwargs": encode(dict(c.kwargs))["mapping"], "grad": c.grad}
            for c in cases]


def _identity(fn) -> str:
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}"


def _score_function(ex, cases, record) -> tuple[float, str]:
    if record.get("identity") in {_identity(f) for f in (ex.reference, *ex.forbidden)}:
        return 0.0, "that is the zslib reference itself; write the computation yourself."
    results = record.get("results") or []
    if results and all(isinstance(r, dict) and r.get("unanswered") for r in results):
        return 0.0, NOT_ATTEMPTED + "."
    if len(results) != len(cases):
        return 0.0, f"the function was run on {len(results)} of the {len(cases)} inputs."
    right, first = 0, None
    for number, (case, res) in enumerate(zip(cases, results), 1):
        where = case.description if case.description.startswith("hidden") else f"input {number} ({case.description})"
        problem = None
        if res.get("unanswered"):
            problem = "not attempted (the `...` of the student version is still there)"
        elif "error" in res:
            problem = f"your function {res['error']}"
        else:
            try:
                got = decode(res["value"])
                ref_args = _fresh(case.args, case.grad)
                expected = ex.reference(*ref_args, **case.kwargs)
                exp_t = _as_tensor(expected)
                got_t = torch.as_tensor(got, dtype=torch.float64)
                if got_t.shape != exp_t.shape and not got_t.numel() == exp_t.numel() == 1:
                    problem = f"expected shape {tuple(exp_t.shape)}, got {tuple(got_t.shape)}"
                elif not torch.allclose(got_t.reshape(exp_t.shape), exp_t.detach().double(), rtol=ex.rtol,
                                        atol=ex.atol, equal_nan=True):
                    problem = "the value does not match the reference"
                elif case.grad is not None:
                    w = torch.linspace(0.5, 1.5, max(exp_t.numel(), 1), dtype=torch.float64).reshape(exp_t.shape)
                    (g_ref,) = torch.autograd.grad((exp_t.double() * w).sum(), ref_args[case.grad], allow_unused=True)
                    g_ref = torch.zeros_like(ref_args[case.grad]) if g_ref is None else g_ref
                    if not res.get("requires_grad") or "grad" not in res:
                        problem = "the value is right but carries no gradient (keep it in torch operations)"
                    elif not torch.allclose(decode(res["grad"]).double().reshape(g_ref.shape), g_ref.double(),
                                            rtol=1e-4, atol=1e-7):
                        problem = "the value matches but the gradient does not"
            except Exception as err:  # noqa: BLE001  (whatever the student's numbers are, the grade is computed)
                problem = f"the result could not be compared ({type(err).__name__}: {err})"
        if problem is None:
            right += 1
        elif first is None:
            first = f"{where}: {problem}"
    if right == len(cases):
        return 1.0, f"passed on all {len(cases)} inputs (published and hidden)."
    return right / len(cases), f"right on {right} of {len(cases)} inputs; first failure on {first}.\nHint: {ex.hint}"


#: how far a value the submission hands to ``check`` may be from the grader's own run of the instructor notebook
CONTEXT_RTOL, CONTEXT_ATOL = 1e-4, 1e-8


def _differs(mine, key) -> bool:
    """Whether a value the submission handed over differs from the key run's (numbers within the tolerances)."""
    if isinstance(key, bool) or isinstance(mine, bool):
        return mine is not key and mine != key
    if isinstance(key, (int, float)) and isinstance(mine, (int, float)):
        return not math.isclose(float(mine), float(key), rel_tol=CONTEXT_RTOL, abs_tol=CONTEXT_ATOL)
    if isinstance(key, torch.Tensor) or isinstance(mine, torch.Tensor):
        try:
            m, k = torch.as_tensor(mine, dtype=torch.float64), torch.as_tensor(key, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return True
        return m.shape != k.shape or not torch.allclose(m, k, rtol=CONTEXT_RTOL, atol=CONTEXT_ATOL, equal_nan=True)
    if isinstance(key, dict) and isinstance(mine, dict):
        return set(key) != set(mine) or any(_differs(mine[k], key[k]) for k in key)
    if isinstance(key, (tuple, list)) and isinstance(mine, (tuple, list)):
        return len(key) != len(mine) or any(_differs(m, k) for m, k in zip(mine, key))
    return mine != key


def _context(record) -> dict:
    context = decode((record or {}).get("context", {"mapping": []}))
    return context if isinstance(context, dict) else {}


def score_answer(ex, record: dict | None, cases=None, key=None, unchecked: str | None = None) -> tuple[float, str]:
    """The fraction in [0, 1] of exercise ``ex`` an answer record earns, and the feedback line; the record is
    what the submission's ``check`` handed over (``None``: no check of it handed an answer over, ``unchecked``
    then says why).

    An exercise decided by the chapter's numbers (``ex.context``: a choice, or a number of the run) is decided by
    the grader's own run of the instructor notebook, ``key`` (that run's answer records by exercise), never by
    numbers the submission hands over: those must be the ones the key run computed (within
    :data:`CONTEXT_RTOL`), else the answer earns nothing. Without ``key`` such an exercise is not scored."""
    if record is None:
        return 0.0, unchecked or "not checked: no check of it handed an answer to the grader."
    if "invalid" in record:
        return 0.0, (f"the answer handed to the grader does not have the form of one ({record['invalid']}), so "
                     "nothing of it was scored.")
    if record.get("unanswered"):
        return 0.0, NOT_ATTEMPTED + "."
    if "error" in record:
        return 0.0, record["error"] + "."
    kind = _kind(ex)
    if kind == "function":
        return _score_function(ex, cases if cases is not None else hidden_cases(ex, 0), record)
    context = {}
    if getattr(ex, "context", ()):
        if key is None:
            return 0.0, ("not scored: it is decided by the chapter's numbers, and no instructor notebook was run to "
                         "compute them (grade with the pack's rubric beside instructor/, or name the key notebook).")
        if key.get(ex.name) is None:
            return 0.0, "not scored: the instructor notebook's run did not reach this check (see the key's status)."
        context, mine = _context(key[ex.name]), _context(record)
        off = [k for k in ex.context if k not in mine or _differs(mine[k], context.get(k))]
        if off:
            return 0.0, (f"the chapter's {', '.join(off)} handed to check are not what the chapter's cells compute "
                         "(the grader runs them itself): run the cells above unchanged and answer from what they "
                         "print.")
    answer = decode(record.get("answer"))
    if kind == "number":
        truth = ex._decided(ex.expected, context)
        if isinstance(truth, Outcome):
            return 0.0, truth.message
        truths = truth if isinstance(truth, tuple) else (truth,)
        answers = answer if isinstance(answer, (tuple, list)) else (answer,)
        if len(answers) != len(truths):
            return 0.0, f"expected {len(truths)} number(s), got {len(answers)}."
        right = 0
        for a, t in zip(answers, truths):
            try:
                a = float(a)
            except (TypeError, ValueError, OverflowError):
                continue
            tol = ex.tol * abs(t) if ex.relative else ex.tol
            right += abs(a - t) <= tol
        if right == len(truths):
            return 1.0, "passed."
        return right / len(truths), f"{right} of {len(truths)} number(s) within the tolerance.\nHint: {ex.hint}"
    options = tuple(str(o).lower() for o in (ex.options or tuple(context.get("table", {}))))
    text = str(answer).strip().lower()
    if text not in options:
        return 0.0, f"answer one of {', '.join(map(repr, options))}; got {str(answer)[:80]!r}."
    truth = ex._decided(ex.decide, context)
    if isinstance(truth, Outcome):
        return 0.0, truth.message
    if text != str(truth).lower():
        return 0.0, f"{text!r} is not what the run's numbers show.\nHint: {ex.hint}"
    return 1.0, "passed."


# ----------------------------------------------------------------------------------------------------
# Running one submission


def _public(names) -> dict:
    registry = _registry()
    out = {}
    for n in names:
        ex = registry[n]
        out[n] = {"kind": _kind(ex), "title": ex.title, "hint": ex.hint, "points": ex.points,
                  "options": list(getattr(ex, "options", ())), "context": list(getattr(ex, "context", ()))}
    return out


def _zslib_root() -> str:
    return str(Path(zslib.__file__).resolve().parents[1])


#: ``user`` value for "each submission as a uid of its own" (:mod:`zslib.teaching.uidpool`): a root grader's default
POOL = "uid pool"


def _user_ids(user, uids=DEFAULT_UIDS):
    """The ``(uid, gid)`` a submission runs as (the pool's first for :data:`POOL`), or ``None`` for the grader's own."""
    if user is None:
        return None
    if user == POOL:
        return int(uids[0]), int(uids[0])

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise RefusedUser(f"no such user {user!r} to run submissions as; name an existing unprivileged user "
                          "(--user), or leave --user out for a uid of its own per submission") from None
    return entry.pw_uid, entry.pw_gid


def resolve_user(user="auto"):
    """``"auto"``: :data:`POOL` (a uid of its own per submission) when the grader is root, else the grader's own
    user (``None``); a user name or ``None`` as given."""
    if user == "auto":
        return POOL if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    return user


_PROBED = set()


def _pool(user, uids=DEFAULT_UIDS):
    if user is None:
        return None
    return UidPool(*uids) if user == POOL else UidPool(account=user)


def probe_user(user, uids=DEFAULT_UIDS) -> None:
    """Refuse, with what to do, when submissions cannot run as ``user`` here: a grader that is not root, a pool
    uid that an account or a process holds, a named user with running processes (grading kills every process of
    the user it runs a submission as), or a user that cannot start the grader's Python with zslib."""
    ids = _user_ids(user, uids)
    if ids is None:
        return
    who = f"uids {uids[0]}-{uids[0] + uids[1] - 1}" if user == POOL else repr(user)
    if os.geteuid() != 0:
        raise RefusedUser(f"running submissions as {who} needs the grader to run as root; pass --same-user "
                          "to run them as yourself")
    problem = _pool(user, uids).problem()
    if problem:
        raise RefusedUser(f"cannot run each submission as a user of its own: {problem}")
    if (ids, sys.executable) in _PROBED:
        return
    uid, gid = ids

    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    try:
        out = subprocess.run([sys.executable, "-c", "import zslib.teaching.sandbox"], preexec_fn=drop,
                             capture_output=True, text=True, timeout=120, cwd="/",
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": _zslib_root(),
                                  "HOME": "/tmp", "USER": f"zs-grade-{uid}", "LOGNAME": f"zs-grade-{uid}"})
        problem = out.stderr.strip().splitlines()[-1] if out.returncode else ""
    except OSError as err:
        problem = str(err)
    finally:
        kill_user(uid, gid)
    if problem:
        raise RefusedUser(f"the grader runs as root, so submissions run as {who}, but uid {uid} cannot run "
                          f"{sys.executable} with zslib ({problem}). Install Python and zslib where other users "
                          "can read them (e.g. a venv under /opt), or pass --same-user to run submissions as "
                          "root (then a submission can read and write everything root can).")
    _PROBED.add((ids, sys.executable))


ISOLATIONS = ("auto", "namespaces", "process")
_ISOLATED: dict = {}


def _namespaces_problem(ids) -> str:
    """Why the namespace jail (:mod:`zslib.teaching.jail`) cannot be used here, or ``""`` when its probe held."""
    if ids is None:
        return "it needs a grader running as root that runs submissions as another user"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "the util-linux commands unshare and mount are not installed"
    if (ids, sys.executable) in _ISOLATED:
        return _ISOLATED[ids, sys.executable]
    folder = tempfile.mkdtemp(prefix="zs-jail-probe-")
    try:
        os.chown(folder, *ids)
        out = subprocess.run([*UNSHARE, sys.executable, "-m", "zslib.teaching.jail", "--probe", folder],
                             capture_output=True, text=True, timeout=120,
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": _zslib_root()})
        said = (out.stdout.strip().splitlines() or [""])[-1]
        problem = "" if out.returncode == 0 and said == "isolated" else (
            said or (out.stderr.strip().splitlines() or ["the probe failed"])[-1])
    except (OSError, subprocess.TimeoutExpired) as err:
        problem = str(err)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _ISOLATED[ids, sys.executable] = problem
    return problem


def resolve_isolation(isolation="auto", user=None, uids=DEFAULT_UIDS) -> str:
    """``"namespaces"`` (each submission in the jail of :mod:`zslib.teaching.jail`: no network, its own process
    namespace, nothing writable but its folder) or ``"process"`` (its own process group and folders only).
    ``"auto"``: namespaces where the probe holds (a root grader with another user and util-linux), else process;
    ``"namespaces"`` asked for where the probe fails raises :class:`RefusedUser` with the reason."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {list(ISOLATIONS)}, got {isolation!r}")
    if isolation == "process":
        return "process"
    problem = _namespaces_problem(_user_ids(user, uids))
    if not problem:
        return "namespaces"
    if isolation == "namespaces":
        raise RefusedUser(f"cannot grade in the namespace jail: {problem}. Run the grader as root with util-linux "
                          "installed (submissions then run as uids of their own), or pass --isolation process.")
    return "process"


def _limits(memory_mb, ids, timeout):
    cpu = int((os.cpu_count() or 1) * timeout + 60)  # a backstop should the grader itself die

    def apply():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        mem = int(memory_mb) * 2 ** 20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (_FILE_LIMIT, _FILE_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if ids is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (512, 512))
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
    return apply


def _kill_tagged(token: str) -> int:
    """SIGKILL every process whose environment carries ``token`` (children that left the process group)."""
    killed, mark = 0, f"ZS_GRADE_TOKEN={token}".encode()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if mark in fh.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
                    killed += 1
        except OSError:
            continue
    return killed


class RefusedSubmission(ValueError):
    """A submission the grader does not open: a link, not a regular file, too large."""


_MAX_NOTEBOOK = 64 * 2 ** 20  # bytes; a chapter with its outputs is a few MB


def read_submission(path) -> bytes:
    """The bytes of a submitted notebook, refused (:class:`RefusedSubmission`, one line) when it is a symbolic
    link (a root grader would follow it to any file, the instructor's solutions among them), not a regular file
    (a FIFO blocks, a device never ends), a hard link to another file, or larger than 64 MB. The file is opened
    without following a link and checked on the open descriptor, so it cannot be swapped in between."""
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            raise RefusedSubmission(f"{path.name} is a symbolic link (to {os.readlink(path)}); the grader opens only "
                                    "regular files: put the notebook itself in the folder") from None
        raise RefusedSubmission(f"{path.name} cannot be read ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedSubmission(f"{path.name} is not a regular file (a folder, FIFO, socket or device); submit "
                                    "the .ipynb file itself")
        if info.st_nlink > 1:
            raise RefusedSubmission(f"{path.name} is a hard link shared with {info.st_nlink - 1} other name(s); the "
                                    "grader opens only a file of its own: copy the notebook into the folder")
        if info.st_size > _MAX_NOTEBOOK:
            raise RefusedSubmission(f"{path.name} is {info.st_size / 2 ** 20:.0f} MB, more than the "
                                    f"{_MAX_NOTEBOOK // 2 ** 20} MB a notebook may have; clear its outputs")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _prepare(root: Path, ids) -> dict:
    """The submission's folders under ``root``: its own (mode 700, owned by ``ids``) inside a folder the grader
    keeps (root's, mode 711), so that neither another submission nor this one can replace the grader's log."""
    dirs = {k: root / k for k in ("home", "results", "cache", "tmp", "work")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
        if ids is not None:
            os.chown(d, *ids)
    os.chmod(root, 0o711 if ids is not None else 0o700)
    return dirs




def _environment(dirs: dict, token: str, ids, threads: int | None) -> dict:
    """The environment of a graded notebook: its own folders, no secret of the grader's."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8"),
           "HOME": str(dirs["home"]), "TMPDIR": str(dirs["tmp"]), "ZS_RESULTS": str(dirs["results"]),
           "ZS_CACHE": str(dirs["cache"]), "XDG_CACHE_HOME": str(dirs["cache"] / "xdg"),
           "MPLCONFIGDIR": str(dirs["tmp"]), "IPYTHONDIR": str(dirs["home"] / ".ipython"), "MPLBACKEND": "Agg",
           "ZS_PROGRESS": "none", "ZS_WORKERS": "1", "PYTHONPATH": _zslib_root(), "ZS_GRADE_TOKEN": token,
           "PYTHONDONTWRITEBYTECODE": "1"}
    if ids is not None:  # a pool uid has no account: name it for getpass and friends
        env["USER"] = env["LOGNAME"] = f"zs-grade-{ids[0]}"
    for key in ("ZS_PROFILE", "ZS_DEVICE", "ZS_DATA", "ZS_WEIGHTS", "OMP_NUM_THREADS"):
        if key in os.environ:
            env[key] = os.environ[key]
    if threads and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


#: A PID namespace of its own for a notebook run as the grader's own user by a root grader: when its first process
#: (a shell that waits for the notebook and exits with its status) ends, the kernel kills every process of the
#: namespace, however it detached (``--kill-child``: also when ``unshare`` itself is killed). The notebook is not the
#: namespace's first process because that one ignores the signals it sends itself (``os.kill(os.getpid(), 9)``).
PID_NAMESPACE = ("unshare", "--pid", "--fork", "--kill-child", "--", "/bin/sh", "-c", '"$@"; exit $?', "zs-init")
_PID_NS_WORKS: list[bool] = []


def _pid_namespace_works() -> bool:
    """Whether :data:`PID_NAMESPACE` can be used here (root, util-linux, a kernel that allows it); probed once."""
    if not _PID_NS_WORKS:
        ok = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare") is not None
        if ok:
            try:
                ok = subprocess.run([*PID_NAMESPACE, "true"], capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
        _PID_NS_WORKS.append(ok)
    return _PID_NS_WORKS[0]


def _command(copy: Path, out_w: int, in_r: int, root: Path, ids, isolation: str) -> list[str]:
    argv = [sys.executable, "-m", "zslib.teaching.sandbox", str(copy), str(out_w), str(in_r)]
    if isolation == "namespaces" and ids is not None:  # the jail drops to the user itself, after its mounts
        return command(str(root), ids[0], ids[1], argv)
    if ids is None and _pid_namespace_works():
        return [*PID_NAMESPACE, *argv]
    return argv


class _Listener(threading.Thread):
    """Reads the graded notebook's messages as they come, checks each against the protocol
    (:func:`zslib.teaching.protocol.check_message`) and keeps what it says: the last answer of each exercise (a
    malformed one as ``{"invalid": why}``), the cells that raised, the cell reached; and answers a function check's
    request for its inputs."""

    def __init__(self, reader_fd: int, writer, names, seed: int):
        super().__init__(daemon=True)
        self._fd, self._writer, self._seed = reader_fd, writer, seed
        self.kinds = {n: _kind(_registry()[n]) for n in names}
        self.answers, self.errors, self.cases, self.malformed = {}, [], {}, 0
        self.state = {"cell": None, "of": None, "done": False}

    def run(self) -> None:
        with os.fdopen(self._fd, "r", encoding="utf-8", errors="replace") as reader:
            while True:
                line = reader.readline(8_000_000)
                if not line or not self._take(line):
                    return

    def _take(self, line: str) -> bool:
        """Use one line; ``False`` when the pipe back to the notebook is gone."""
        try:
            raw = json.loads(line)
        except ValueError:
            return True  # not a message (a forged or cut line): nothing to use
        try:
            msg = check_message(raw, self.kinds, {n: len(c) for n, c in self.cases.items()})
        except BadMessage as err:
            self.malformed += 1
            name = raw.get("name") if isinstance(raw, dict) else None
            if isinstance(name, str) and name in self.kinds and raw.get("op") == "answer":
                self.answers[name] = {"invalid": str(err)[:300]}
            return True
        op = msg["op"]
        if op == "cell":
            self.state["cell"], self.state["of"] = msg["index"], msg.get("of")
        elif op == "error" and len(self.errors) < 100:
            self.errors.append({"cell": msg["index"] + 1, "error": msg["error"][:300]})
        elif op == "done":
            self.state["done"] = True
        elif op == "answer":
            self.answers[msg["name"]] = msg
        elif op == "inputs":
            return self._send_inputs(msg["name"])
        return True

    def _send_inputs(self, name: str) -> bool:
        payload = {}
        if self.kinds[name] == "function":
            if name not in self.cases:
                self.cases[name] = hidden_cases(_registry()[name], self._seed)
            payload = {"cases": _encoded_cases(self.cases[name])}
        try:
            self._writer.write(json.dumps(payload) + "\n")
            self._writer.flush()
        except (OSError, ValueError):
            return False
        return True

    def where(self) -> str:
        return f"in cell {(self.state['cell'] or 0) + 1} of {self.state['of']}"


def _status(proc, timeout: float, listener: _Listener) -> str:
    """Wait for the notebook (at most ``timeout`` seconds) and say how its run ended."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"time limit of {timeout:g} s reached {listener.where()}"
    listener.join(2)
    if code == 0 and listener.state["done"]:
        return "completed"
    if code < 0 or code > 128:  # in a PID namespace the status comes from a shell: 128 + the signal
        return f"died (signal {-code if code < 0 else code - 128}, e.g. the memory limit or a killed kernel) " \
               f"{listener.where()}"
    return f"stopped (exit status {code}) {listener.where()}"


def _end(proc, token: str, fds, log) -> str:
    """Kill what is left of the notebook's processes, close the pipes; the log's tail."""
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    _kill_tagged(token)
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    try:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 4000))
        tail = log.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    log.close()
    return tail


def _execute(source: bytes, names, seed: int, timeout: float, memory_mb: int, ids,
             isolation: str = "process", threads: int | None = None) -> dict:
    """Run the notebook ``source`` in the sandbox, as ``ids`` (``None``: the grader's own user), in the namespace
    jail when ``isolation`` is ``"namespaces"``. Returns ``{"answers", "cases", "status", "tail", "errors",
    "seconds", "malformed"}``: the answer records by exercise, the status, the log's tail, the cells that raised
    and the number of messages that did not fit the protocol."""
    token = secrets.token_hex(16)
    root = Path(tempfile.mkdtemp(prefix="zs-grade-"))
    dirs = _prepare(root, ids)
    copy = dirs["work"] / "submission.ipynb"
    copy.write_bytes(source)
    if ids is not None:
        os.chown(copy, *ids)
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    proc, started, listener, status = None, time.monotonic(), None, "not started"
    log = tempfile.TemporaryFile()  # the grader's: no path the submission could replace
    try:
        jailed = isolation == "namespaces" and ids is not None
        proc = subprocess.Popen(_command(copy, out_w, in_r, root, ids, isolation), cwd=dirs["work"],
                                env=_environment(dirs, token, ids, threads), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, pass_fds=(out_w, in_r), start_new_session=True,
                                preexec_fn=_limits(memory_mb, None if jailed else ids, timeout))
        os.close(out_w)
        os.close(in_r)
        out_w = in_r = None
        writer = os.fdopen(in_w, "w", encoding="utf-8", buffering=1)
        in_w = None
        listener = _Listener(out_r, writer, names, seed)
        out_r = None  # the listener closes it
        try:
            writer.write(json.dumps({"public": _public(names)}) + "\n")
            writer.flush()
        except OSError:
            pass  # the child is already gone: its status says why
        listener.start()
        status = _status(proc, timeout, listener)
        try:
            writer.close()
        except OSError:
            pass
    finally:
        tail = _end(proc, token, (out_r, out_w, in_r, in_w), log)
        shutil.rmtree(root, ignore_errors=True)
    errors = list(listener.errors) if listener else []
    if errors:
        status += (f"; {len(errors)} cell(s) raised an error (first: cell {errors[0]['cell']}, "
                   f"{errors[0]['error'].splitlines()[0][:120]})")
    return {"answers": dict(listener.answers) if listener else {}, "cases": dict(listener.cases) if listener else {},
            "status": status, "tail": tail, "errors": errors, "seconds": time.monotonic() - started,
            "reached": (listener.state["cell"] or 0) + 1 if listener and listener.state["cell"] is not None else 0,
            "done": bool(listener and listener.state["done"]), "malformed": listener.malformed if listener else 0}


class _Runner:
    """Runs submissions as the users and in the isolation the grading was given: one pool uid per running
    submission (every process of it killed before the uid is lent again), a named user, or the grader's own."""

    def __init__(self, user, isolation: str, uids=DEFAULT_UIDS, threads: int | None = None):
        self.user, self.isolation, self.threads = user, isolation, threads
        self.pool = _pool(user, uids)

    def run(self, source: bytes, names, seed: int, timeout: float, memory_mb: int) -> dict:
        if self.pool is None:
            return _execute(source, names, seed, timeout, memory_mb, None, self.isolation, self.threads)
        ids = self.pool.lend()
        try:
            return _execute(source, names, seed, timeout, memory_mb, ids, self.isolation, self.threads)
        finally:
            self.pool.take_back(ids)


@contextmanager
def _reaping(same_user: bool):
    """In same-user mode: adopt every orphaned descendant while grading, and kill all of them at the end
    (:mod:`zslib.teaching.reaper`); yields a list that then holds the pids that could not be killed."""
    left: list[int] = []
    if not same_user:
        yield left
        return
    reaper.adopt_orphans(True)
    spare = frozenset(reaper.descendants())
    try:
        yield left
    finally:
        left += reaper.sweep(spare)
        reaper.adopt_orphans(False)


def _parse_notebook(source: bytes):
    """``(notebook dict, None)`` or ``(None, a one-line reason the file cannot be graded)``."""
    try:
        nb = json.loads(source.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        return None, f"not a readable notebook ({type(err).__name__}: {str(err)[:100]})"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None, "not a notebook: it has no list of 'cells' (was it saved by Jupyter?)"
    return nb, None


def _meta(nb) -> dict:
    meta = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    meta = meta.get("zslib_assignment", {}) if isinstance(meta, dict) else {}
    return meta if isinstance(meta, dict) else {}


def choose_chapter(notebook: Path, chapters, nb: dict | None = None, items_of: dict | None = None
                   ) -> tuple[str | None, str]:
    """``(chapter, note)``: the chapter of the pack (``chapters``: its names) that ``notebook`` is graded as, and a
    note for the teacher when something disagrees (see the module docstring). The notebook's file name decides
    when it names a chapter, else its metadata when that names one, else the pack's only chapter; ``None`` when
    nothing does. ``items_of``: each chapter's rubric exercises, to flag a notebook that answers another chapter's.
    Without chapters (no pack) the metadata's plain name or the file name is used, and never as a path."""
    chapters = list(chapters)
    stem = notebook.stem
    said = _meta(nb).get("chapter")
    said = said if isinstance(said, str) else None
    if not chapters:
        plain = said if said is not None and _PLAIN_NAME.fullmatch(said) else None
        return plain or stem, ""
    named = [c for c in chapters if stem == c] or sorted(
        (c for c in chapters if stem.startswith(f"{c}_") or stem.endswith(f"_{c}")), key=len)[-1:]
    chapter = named[0] if named else said if said in chapters else chapters[0] if len(chapters) == 1 else None
    if chapter is None:
        return None, ""
    notes = []
    if said is not None and said != chapter:
        shown = said if len(said) <= 40 else said[:40] + "..."
        notes.append(f"its metadata names chapter {shown!r}, but it is graded as {chapter!r} "
                     f"({'its file name' if named else 'the pack has only that chapter'})")
    if items_of and nb is not None:
        checks = set(exercise_names(nb))
        if checks and not checks & set(items_of.get(chapter, ())):
            other = [c for c, items in items_of.items() if c != chapter and checks & set(items)]
            if other:
                notes.append(f"its checks answer chapter {other[0]!r}'s exercises, not {chapter!r}'s")
    return chapter, "; ".join(notes)


def _needs_key(items) -> bool:
    registry = _registry()
    return any(getattr(registry[n], "context", ()) for n in items)


def _unchecked(name: str, run: dict) -> str:
    """Why exercise ``name`` has no answer, from the notebook's cells and its run: no cell calls its check, the check
    cell ran and raised (which error), the run stopped before it, or it ran without handing an answer over."""
    if "check_cells" not in run:  # the notebook was not run
        return f"not checked: {run['status']}."
    cells = run["check_cells"].get(name)
    if not cells:
        return f"not checked: no cell of the notebook calls check('{name}', ...) (was its check cell deleted?)."
    raised = {e["cell"]: e["error"] for e in run.get("errors", [])}
    for cell in cells:
        if cell in raised:
            return f"not checked: its check cell (cell {cell}) ran and raised {raised[cell].splitlines()[0][:160]}."
    if run.get("reached", 0) < cells[0] and not run.get("done"):
        return f"not checked: the notebook stopped before its check cell (cell {cells[0]}): {run['status']}."
    return (f"not checked: its check cell (cell {cells[0]}) ran but handed no answer over (is the check call inside a "
            "branch that did not run, or was `check` redefined?).")


def _score(student: str, notebook: str, chapter: str, items: dict, run: dict, seed: int, key) -> Graded:
    """The :class:`Graded` of a finished run: each rubric item scored in this process (``key``: the answer records
    of the instructor notebook's run, which decide the exercises that depend on the chapter's numbers). An answer
    that cannot be scored costs its exercise the points, never the other exercises."""
    registry, exercises = _registry(), {}
    for name, item in items.items():
        ex = registry[name]
        record = run["answers"].get(name)
        try:
            cases = run["cases"].get(name)
            if cases is None and _kind(ex) == "function":
                cases = hidden_cases(ex, seed)
            unchecked = _unchecked(name, run) if record is None else None
            fraction, message = score_answer(ex, record, cases, key, unchecked)
        except Exception as err:  # noqa: BLE001  (whatever the answer holds, the class's grading goes on)
            fraction, message = 0.0, f"the answer could not be scored ({type(err).__name__}: {str(err)[:150]})."
        earned = item.points * fraction if (item.partial or fraction == 1.0) else 0.0
        exercises[name] = {"points": round(earned, 2), "max": item.points, "fraction": round(fraction, 4),
                           "checked": record is not None, "message": message}
    return Graded(student, notebook, chapter, run["status"], round(sum(r["points"] for r in exercises.values()), 2),
                  sum(i.points for i in items.values()), exercises, run.get("tail", ""), list(run.get("errors", [])))


def _not_run(status: str) -> dict:
    return {"answers": {}, "cases": {}, "status": status, "tail": "", "errors": [], "done": False, "reached": 0}


def _table(rubric):
    """The ``{chapter: {exercise: points}}`` of a pack's rubric (a path or the loaded dict); ``None`` for a dict of
    exercises (one notebook's rubric)."""
    if isinstance(rubric, (str, os.PathLike)):
        return _read_rubric(Path(rubric))
    if isinstance(rubric, dict) and not all(k in _registry() for k in rubric):
        return rubric
    return None


def _instructor_folder(rubric, instructor=None) -> Path | None:
    """Where the keys are: ``instructor`` when it is a folder, else the pack's ``instructor/`` beside a rubric file."""
    if instructor is not None:
        return Path(instructor) if Path(instructor).is_dir() else None
    if isinstance(rubric, (str, os.PathLike)):
        return Path(rubric).parent / "instructor"
    return None


def _pack_chapters(table, rubric, instructor=None) -> list[str]:
    """The chapters of the pack: the rubric's, else the instructor notebooks' names, else none."""
    if table is not None:
        return list(table)
    if instructor is not None and not Path(instructor).is_dir():
        return [Path(instructor).stem]
    folder = _instructor_folder(rubric, instructor)
    if folder is None or not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.ipynb") if _PLAIN_NAME.fullmatch(p.stem))


def _key_path(rubric, chapter: str | None, instructor=None) -> Path | None:
    """The instructor notebook of ``chapter`` (a chapter of the pack, never a path a submission names): the notebook
    ``instructor`` itself, or ``<chapter>.ipynb`` in ``instructor`` (a folder) or in the pack's ``instructor/``."""
    if instructor is not None and not Path(instructor).is_dir():
        return Path(instructor)
    folder = _instructor_folder(rubric, instructor)
    if folder is None or chapter is None or not _PLAIN_NAME.fullmatch(chapter):
        return None
    path = folder / f"{chapter}.ipynb"
    return path if path.exists() or path.is_symlink() else None


def _rubric_items(rubric, table, chapter, nb, key_nb) -> tuple[dict, str]:
    """The rubric items of one notebook and a note: the pack's entry for ``chapter``; with no rubric, the exercises
    the key checks (else those the notebook itself names, which the note says)."""
    if rubric is not None:
        return load_rubric(table if table is not None else rubric, chapter), ""
    registry = _registry()
    if key_nb is not None:
        names, note = exercise_names(key_nb), ""
    else:
        names = _meta(nb).get("exercises") or exercise_names(nb or {"cells": []})
        names = names if isinstance(names, list) else []
        note = "no rubric and no key: graded on the exercises the notebook itself names"
    items = {n: RubricItem(n, float(registry[n].points), _kind(registry[n]) != "choice")
             for n in names if isinstance(n, str) and n in registry}
    return items, note


def _read_notebook(path: Path) -> tuple[bytes, dict | None, str | None]:
    """``(bytes, parsed notebook or None, why it cannot be graded or None)``."""
    try:
        source = read_submission(path)
    except RefusedSubmission as err:
        return b"", None, f"not graded: {err}"
    nb, problem = _parse_notebook(source)
    return source, nb, problem


def grade_submission(notebook, rubric=None, *, student: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                     memory_mb: int = DEFAULT_MEMORY_MB, user="auto", seed: int | None = None,
                     isolation: str = "auto", as_key: bool = False, instructor=None,
                     uids=DEFAULT_UIDS) -> Graded:
    """Grade one notebook (see the module docstring). ``rubric``: a pack's ``rubric.json``, a dict, or ``None``
    (the exercises of the chapter's instructor notebook when there is one, else those the notebook names, at their
    registered points). ``timeout``: seconds for the whole notebook. ``user``: ``"auto"`` (a uid of its own from
    ``uids`` when root), a user name, or ``None`` (the grader's own user). ``isolation``: see
    :func:`resolve_isolation`.

    The chapter is the pack's (:func:`choose_chapter`), and exercises decided by the chapter's numbers are decided by
    a run of its instructor notebook: ``instructor`` (the notebook, or a folder of them), else the pack's
    ``instructor/<chapter>.ipynb`` beside ``rubric``. ``as_key``: ``notebook`` is the instructor notebook itself,
    graded against its own run (it should earn every point)."""
    path = Path(notebook)
    user = resolve_user(user)
    probe_user(user, uids)
    isolation = resolve_isolation(isolation, user, uids)
    table = _table(rubric)
    source, nb, problem = _read_notebook(path)
    chapters = _pack_chapters(table, rubric, instructor)
    chapter, note = choose_chapter(path, chapters, nb,
                                   {c: list(e) for c, e in table.items() if isinstance(e, dict)} if table else None)
    if chapter is None:
        problem = problem or (f"not graded: neither its name nor its metadata names a chapter of the pack "
                              f"({', '.join(chapters)}); name it after its chapter, e.g. {chapters[0]}.ipynb")
    key_file = _key_path(rubric, chapter, instructor) if chapter is not None else None
    key_nb = _read_notebook(key_file)[1] if key_file is not None else None
    items, items_note = _rubric_items(rubric, table, chapter, nb, key_nb) if chapter is not None else ({}, "")
    seed = secrets.randbits(62) if seed is None else seed
    runner = _Runner(user, isolation, uids)
    key = None
    with _reaping(user is None):
        if problem is None and _needs_key(items) and not as_key and key_file is not None:
            if key_file.exists() and os.path.samefile(key_file, path):
                as_key = True  # the pack's key itself: one run, graded against itself
            else:
                key = runner.run(read_submission(key_file), list(items), seed, timeout, memory_mb)["answers"]
        run = _not_run(problem) if problem else runner.run(source, list(items), seed, timeout, memory_mb)
    if not problem:
        run["check_cells"] = check_cells(nb)
    graded = _score(student or path.stem, path.name, chapter or path.stem, items, run, seed,
                    run["answers"] if as_key else key)
    graded.note = "; ".join(n for n in (note, items_note) if n)
    return graded


# ----------------------------------------------------------------------------------------------------
# A class


def _submissions(folder: Path) -> list[tuple[str, Path, str | None]]:
    """``(student, notebook, why it is refused or None)``: ``FOLDER/alice.ipynb`` is alice's; ``FOLDER/alice/*.ipynb``
    are alice's too. Links are not followed: a linked notebook or folder is listed as refused."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_symlink():
            if p.suffix == ".ipynb" or p.is_dir():
                out.append((p.stem if p.suffix == ".ipynb" else p.name, p,
                            f"{p.name} is a symbolic link (to {os.readlink(p)}); the grader opens only regular files"))
        elif p.suffix == ".ipynb" and not p.is_dir():
            out.append((p.stem, p, None))
        elif p.is_dir():
            for here, dirs, files in os.walk(p):  # does not descend into linked folders
                dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints" and not d.startswith("."))
                for d in dirs:
                    if os.path.islink(os.path.join(here, d)):
                        q = Path(here) / d
                        out.append((p.name, q, f"{q.relative_to(folder)} is a symbolic link to a folder; the grader "
                                               "opens only regular files"))
                for f in sorted(files):
                    if f.endswith(".ipynb"):
                        out.append((p.name, Path(here) / f, None))
    return out


@dataclass
class _Entry:
    """One notebook of the class: whose, where (``shown``: relative to the submissions), its chapter of the pack and
    why it is not run (``problem``), with what it holds."""

    student: str
    path: Path
    shown: str
    problem: str | None
    chapter: str | None = None
    note: str = ""
    source: bytes = b""
    nb: dict | None = None
    counted: bool = True


def _entries(folder: Path, table: dict, items_of: dict) -> list[_Entry]:
    """Every notebook under ``folder``, read (never through a link), given its chapter of the pack, one per chapter
    and student counted (:func:`_one_per_chapter`)."""
    entries = []
    for student, path, why in _submissions(folder):
        shown = path.relative_to(folder).as_posix()
        if why is not None:
            entries.append(_Entry(student, path, shown, f"not graded: {why}"))
            continue
        source, nb, problem = _read_notebook(path)
        chapter, note = choose_chapter(path, list(table), nb, {c: list(i) for c, i in items_of.items()})
        if problem is None and chapter is None:
            problem = (f"not graded: neither its name nor its metadata names a chapter of the rubric "
                       f"({', '.join(table)}); name it after its chapter (e.g. {student}_{next(iter(table))}.ipynb)")
        entries.append(_Entry(student, path, shown, problem, chapter, note, source, nb))
    _one_per_chapter(entries)
    return entries


def _one_per_chapter(entries: list[_Entry]) -> None:
    """A student's notebooks of one chapter count once: the one nearest the top of their folder, then the one named
    exactly after the chapter, then by name; the others are marked not counted (and are not run)."""
    groups: dict = {}
    for e in entries:
        if e.problem is None:
            groups.setdefault((e.student, e.chapter), []).append(e)
    for (student, chapter), group in groups.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda e: (e.shown.count("/"), e.path.stem != chapter, e.shown))
        kept = group[0]
        for other in group[1:]:
            other.problem = (f"not graded: {student} handed in {len(group)} notebooks of chapter {chapter}; one "
                             f"counts, {kept.shown}")
            other.counted = False
        ignored = ", ".join(e.shown for e in group[1:])
        kept.note = "; ".join(n for n in (kept.note, f"counted for chapter {chapter}; not counted: {ignored}") if n)


def gradebook_text(grades: list) -> str:
    """The CSV of :func:`write_gradebook`."""
    columns = []
    for g in grades:
        columns += [n for n in g.exercises if n not in columns]
    fh = io.StringIO()
    w = csv.writer(fh)
    w.writerow(["student", "notebook", "chapter", "status", "points", "total", "cell errors", "counted", "note",
                *columns])
    for g in grades:
        w.writerow([g.student, g.notebook, g.chapter, g.status, f"{g.points:g}", f"{g.total:g}", len(g.errors),
                    "yes" if g.counted else "no", g.note,
                    *(f"{g.exercises[c]['points']:g}" if c in g.exercises else "" for c in columns)])
    return fh.getvalue()


def write_gradebook(grades: list, path) -> Path:
    """A CSV: one row per notebook (student, notebook, chapter, status, points, total, the number of cells that
    raised an error, whether it counts, the note, then each exercise's points, empty where a notebook does not
    have that exercise)."""
    path = Path(path)
    path.write_text(gradebook_text(grades), encoding="utf-8", newline="")
    return path


def _feedback(student: str, grades: list) -> str:
    lines = [f"# Feedback for {student}", ""]
    for g in grades:
        lines += [f"## {g.notebook} ({g.chapter}): {g.points:g} / {g.total:g} points", "",
                  f"Run: {g.status}.", ""]
        if g.note:
            lines += [f"Note: {g.note}.", ""]
        if g.errors:
            lines += [f"Cells that raised an error ({len(g.errors)}; the cells after each still ran):", ""]
            lines += [f"- cell {e['cell']}: `{e['error'].splitlines()[0][:200]}`" for e in g.errors] + [""]
        if g.exercises:
            lines += ["| exercise | points | feedback |", "|---|---|---|"]
        for name, r in g.exercises.items():
            text = r["message"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{name}` | {r['points']:g} / {r['max']:g} | {text} |")
        lines.append("")
    return "\n".join(lines)


def _memory_total_mb() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def parallel_jobs(jobs: int, memory_mb: int) -> tuple[int, str]:
    """How many notebooks to run at once for ``-j jobs``: at most one per CPU this process may use, and no more
    than the machine's memory holds at ``memory_mb`` each; with the reason when fewer than asked."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    total = _memory_total_mb()
    fit = max(1, total // max(1, int(memory_mb))) if total else jobs
    allowed = max(1, min(int(jobs), cpus, fit))
    if allowed == jobs:
        return allowed, ""
    why = (f"{cpus} CPU(s)" if allowed == cpus else
           f"{total} MB of memory holds {fit} notebook(s) at --memory {memory_mb}")
    return allowed, f"-j {jobs} lowered to {allowed}: {why}"


def _class_keys(entries: list[_Entry], items_of: dict, rubric_path: Path, instructor) -> dict[str, tuple[Path, bytes]]:
    """``{chapter: (key notebook, its bytes)}`` for every chapter graded whose exercises depend on the chapter's
    numbers (read like a submission: a linked key is refused)."""
    keys = {}
    for chapter in sorted({e.chapter for e in entries if e.problem is None}):
        if _needs_key(items_of[chapter]):
            path = _key_path(rubric_path, chapter, instructor)
            if path is None:
                raise FileNotFoundError(
                    f"the rubric's {chapter!r} has questions decided by the chapter's numbers, which the grader "
                    f"computes by running the instructor notebook, and there is no "
                    f"{rubric_path.parent / 'instructor' / (chapter + '.ipynb')}; give --instructor DIR")
            keys[chapter] = (path, read_submission(path))
    return keys


def _run_keys(pool, run_one, keys: dict, items_of: dict, seed: int, say) -> dict:
    """Run each chapter's key, say what it earns against itself; ``{chapter: its run}``."""
    jobs = {c: pool.submit(run_one, source, list(items_of[c])) for c, (_, source) in keys.items()}
    runs = {}
    for chapter, job in jobs.items():
        path = keys[chapter][0]
        try:
            runs[chapter] = dict(job.result(), check_cells=check_cells(_parse_notebook(keys[chapter][1])[0]))
        except Exception as err:  # noqa: BLE001  (said, and its chapter's questions are then not scored)
            runs[chapter] = _not_run(f"the key could not be run ({type(err).__name__}: {err})")
        g = _score("(instructor)", path.name, chapter, items_of[chapter], runs[chapter], seed, runs[chapter]["answers"])
        note = "" if g.points == g.total else " (the key should earn every point: check its notebook)"
        say(f"instructor {path.name}: {g.points:g} / {g.total:g} ({g.status}){note}")
    return runs


def _graded_entry(e: _Entry, job, started: float, key_runs: dict, items_of: dict, seed: int) -> tuple[Graded, float]:
    """The :class:`Graded` of one notebook of the class, whatever happened to it, and the seconds it took."""
    items = items_of.get(e.chapter, {})
    if job is None:
        if e.chapter in items_of and e.counted and not e.problem.startswith("not graded"):
            g = _score(e.student, e.shown, e.chapter, items, _not_run(e.problem), seed, None)
        else:
            g = Graded(e.student, e.shown, e.chapter or "", e.problem, 0.0,
                       sum(i.points for i in items.values()) if e.chapter in items_of else 0.0)
        seconds = time.monotonic() - started
    else:
        try:
            run = dict(job.result(), check_cells=check_cells(e.nb))
        except Exception as err:  # noqa: BLE001  (one notebook's failure is its own row, not the class's end)
            run = _not_run(f"not graded: the grader could not run it ({type(err).__name__}: {err})")
        key = key_runs[e.chapter]["answers"] if e.chapter in key_runs else None
        g = _score(e.student, e.shown, e.chapter, items, run, seed, key)
        seconds = run.get("seconds", 0.0)
    g.note, g.counted = e.note, e.counted
    return g, seconds


def _grade_entries(entries: list[_Entry], keys: dict, items_of: dict, runner: _Runner, seed: int, timeout: float,
                   memory_mb: int, jobs: int, progress) -> list[Graded]:
    """Run the keys and every notebook to grade (``jobs`` at a time) and score them, in the order of ``entries``."""
    lock = threading.Lock()

    def say(line):
        with lock:
            progress(line)

    def run_one(source, names):
        return runner.run(source, names, seed, timeout, memory_mb)

    grades = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        key_runs = _run_keys(pool, run_one, keys, items_of, seed, say) if keys else {}
        work = [(e, None if e.problem else pool.submit(run_one, e.source, list(items_of[e.chapter])), time.monotonic())
                for e in entries]
        for e, job, started in work:
            g, seconds = _graded_entry(e, job, started, key_runs, items_of, seed)
            say(f"{e.shown}: {g.points:g} / {g.total:g} ({g.status}, {seconds:.0f} s)")
            grades.append(g)
    return grades


def _write_class(folder: OutputFolder, grades: list, table: dict, roster, info: dict, progress) -> None:
    """``gradebook.csv``, ``canvas.csv``, ``feedback/<student>.md`` and ``grading.json``, written through
    :class:`~zslib.teaching.output.OutputFolder` (never through a link)."""
    folder.write_text("gradebook.csv", gradebook_text(grades))
    text, unmatched = gradebook.canvas_text(grades, roster, chapters=list(table))
    folder.write_text("canvas.csv", text)
    if unmatched:
        progress(f"canvas.csv: no roster row for {', '.join(unmatched[:10])}{' ...' if len(unmatched) > 10 else ''}")
    for student in dict.fromkeys(g.student for g in grades):
        folder.write_text(f"feedback/{student}.md", _feedback(student, [g for g in grades if g.student == student]))
    folder.write_text("grading.json", json.dumps(info) + "\n")


def _class_mode(user, uids, isolation: str, jobs: int, memory_mb: int, progress) -> tuple:
    """``(user, isolation, jobs)`` the class is graded with, refused with what to do where they cannot be."""
    user = resolve_user(user)
    probe_user(user, uids)
    isolation = resolve_isolation(isolation, user, uids)
    if user is not None and user != POOL and jobs > 1:
        raise RefusedUser(f"-j {jobs} runs several notebooks at once, each as a user of its own; one named user "
                          f"({user!r}) cannot: leave --user out (a pool of uids) or use -j 1")
    jobs, lowered = parallel_jobs(jobs, memory_mb)
    if lowered:
        progress(lowered)
    return user, isolation, jobs


def grade_all(submissions, rubric, out, *, timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB,
              user="auto", seed: int | None = None, progress=print, isolation: str = "auto", jobs: int = 1,
              instructor=None, uids=DEFAULT_UIDS, roster=None) -> list:
    """Grade every notebook under ``submissions`` with the pack's ``rubric`` (a ``rubric.json``); write
    ``out/gradebook.csv`` (one row per notebook, whatever happened to it), ``out/canvas.csv``
    (:mod:`zslib.teaching.gradebook`), ``out/feedback/<student>.md`` and ``out/grading.json``; return the
    :class:`Graded` list, in the order of the submissions.

    The hidden inputs' seed is ``seed``, else the pack's ``grader/hidden.json`` beside the rubric, else a fresh
    one (written to ``out/grading.json`` either way, so the grading can be repeated). ``jobs`` notebooks run at
    once (:func:`parallel_jobs` lowers it to the CPUs and memory there are; each then gets its share of the CPU
    threads). The instructor notebook of each chapter whose exercises depend on the chapter's numbers runs too
    (``instructor``: their folder, default the pack's ``instructor/``) and decides them. ``out`` is made (mode 700)
    before any notebook runs, or refused unless it is the grader's and writable by no one else
    (:mod:`zslib.teaching.output`). In same-user mode every process the grading started is killed before
    anything is written (:mod:`zslib.teaching.reaper`)."""
    submissions, rubric_path = Path(submissions), Path(rubric)
    if not submissions.is_dir():
        raise FileNotFoundError(f"no such folder of submissions: {submissions}")
    table = _read_rubric(rubric_path)
    items_of = {chapter: _items(entry) for chapter, entry in table.items()}  # bad entries fail before anything runs
    entries = _entries(submissions, table, items_of)
    if not entries:
        raise FileNotFoundError(f"no .ipynb under {submissions}")
    user, isolation, jobs = _class_mode(user, uids, isolation, jobs, memory_mb, progress)
    if seed is None:
        secret = rubric_path.parent / "grader" / "hidden.json"
        seed = json.loads(secret.read_text())["seed"] if secret.is_file() else secrets.randbits(62)
    keys = _class_keys(entries, items_of, rubric_path, instructor)
    threads = max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1) // jobs)
    with OutputFolder.open(out) as folder:  # made before any submission runs: none can plant a link in it first
        with _reaping(user is None) as left:
            grades = _grade_entries(entries, keys, items_of, _Runner(user, isolation, uids, threads), seed, timeout,
                                    memory_mb, jobs, progress)
        if left:
            progress(f"warning: processes of the submissions could not be killed (pids {left[:5]}, stuck in the "
                     "kernel); end them before trusting what is written")
        _write_class(folder, grades, table, roster, {
            "seed": seed, "rubric": str(rubric_path.resolve()), "timeout_s": timeout, "memory_mb": memory_mb,
            "user": user, "uids": list(uids) if user == POOL else None, "isolation": isolation, "jobs": jobs,
            "instructor": {c: str(p) for c, (p, _) in keys.items()}, "processes_left": left}, progress)
    return grades
