"""Grading that a submission cannot reach: the grader runs each notebook in a separate, limited process and
scores the answers it hands over, in the grader's own process, against references and hidden inputs.

How a submission is graded (:func:`grade_submission`, :func:`grade_all`):

1. The notebook is copied into a fresh temporary folder with its own ``HOME``, ``ZS_RESULTS``, ``ZS_CACHE``
   and ``TMPDIR``, and executed by :mod:`zslib.teaching.sandbox` in a child process: a new process group
   (session), an address-space limit, a file-size limit and a total time limit; as the user ``nobody``
   when the grader is root, and then, where Linux allows it, inside a container of our own
   (:mod:`zslib.teaching.jail`: new mount, PID, network, IPC and UTS namespaces, every mount read-only but
   the submission's folder). In that process ``check(name, answer)`` decides nothing: it writes the answer
   as JSON on a pipe the grader reads, at the moment it is called.
2. The grader scores each exercise's last answer: a number against the exercise's expected value, a
   choice against the decision of the values the chapter printed, a function by its outputs (and
   gradients) on the published inputs *and* on hidden inputs (the published ones moved by noise from a
   secret seed: the pack's ``grader/hidden.json`` or a fresh one per grading), compared with the zslib
   reference computed here. The inputs reach the child only when its ``check`` asks for them; no expected
   value ever does.
3. When the notebook ends, overruns its time or dies, the grader kills the process group and every
   process that still carries the grading run's token in its environment, and deletes the folder.

So a forged ``ZS_GRADE_LOG`` line, a monkeypatched ``check``, a read of ``REGISTRY[name].expected()`` or of
the caller's frame give nothing: the grade never comes from the submission's process, and the registry the
submission sees has no references in it. What crosses the pipe is data (JSON, never pickle), so a hostile
answer cannot run code in the grader. A notebook that loops or dies keeps the answers it handed over
before, because each is sent when its check runs. Rubric items carry points and partial credit: a
function earns the share of inputs it gets right, a tuple of numbers the share of its numbers.

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

* ``"namespaces"`` (grader is root, submission as ``nobody``, util-linux's ``unshare`` and ``mount``): all of
  the next item, and the network is unreachable, nothing outside the submission's folder can be written (not
  even ``/tmp`` or ``/dev/shm``), the submission sees only its own processes, and every process it started
  dies when its first one ends, however it detached. Not closed: the kernel is shared (as in any container),
  world-readable files stay readable, CPU share is bounded only by the time limits.
* as ``nobody`` (grader is root), ``"process"``: the submission cannot write the grader's files, other students'
  folders, the shared results or cache, nor read files only root can read (keep ``instructor/`` and
  ``grader/`` of the pack mode 700); it cannot signal the grader. It can read world-readable files (the
  book's chapters with their solutions among them) and use the network.
* as the grader's own user (``user=None``, ``--same-user``): only the process group, the limits and the
  temporary folders protect; the submission can read and write everything the grader can, by absolute
  path. Use it for trusted code or inside a throwaway machine or container.
* in both ``"process"`` cases: a process that leaves the process group *and* clears its environment survives the
  cleanup; no limit on network, CPU share or the number of open files beyond the defaults. The namespace jail
  closes the first two; a disposable VM closes all of them. And the references are zslib's own functions, which the course hands
  out: a submission that wraps the function an exercise asks to re-implement, copies the book's solution,
  or undoes the sandbox's module replacement (removes its import guard and re-imports the exercise bank
  from zslib's source) gets the points, as it would with any autograder; that is copying, found by
  reading the code, not a way to make the grader report a check it did not run.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RubricItem", "Graded", "load_rubric", "grade_submission", "grade_all", "hidden_cases",
           "score_answer", "write_gradebook", "exercise_names", "DEFAULT_TIMEOUT", "DEFAULT_MEMORY_MB", "RefusedUser"]

DEFAULT_TIMEOUT = 1800  # seconds for a whole submission
DEFAULT_MEMORY_MB = 8192  # address space; torch needs a few GB of it just to start its threads
HIDDEN_VARIANTS = 1  # hidden inputs per published input of a function exercise
_FILE_LIMIT = 4 * 2 ** 30
_CHECK_CALL = re.compile(r"""check\(\s*["']([\w.]+)["']""")


class RefusedUser(RuntimeError):
    """The unprivileged user cannot run the grader's Python: say what to do instead."""


@dataclass
class RubricItem:
    name: str
    points: float
    partial: bool = True  # a function: share of inputs right; a tuple of numbers: share of numbers


@dataclass
class Graded:
    """One submission's grade. ``exercises``: name -> {points, max, fraction, checked, message}."""

    student: str
    notebook: str
    chapter: str
    status: str
    points: float
    total: float
    exercises: dict = field(default_factory=dict)
    log_tail: str = ""

    def report(self) -> str:
        rows = [f"{self.notebook}: {self.points:g} / {self.total:g} points ({self.status})"]
        for name, r in self.exercises.items():
            rows.append(f"  {name:<55s} {r['points']:g} / {r['max']:g}  {r['message'].splitlines()[0]}")
        return "\n".join(rows)


# ----------------------------------------------------------------------------------------------------
# The rubric


def exercise_names(nb: dict) -> list[str]:
    """The exercises a notebook checks, in order of first appearance."""
    names = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell.get("source", "")
            for name in _CHECK_CALL.findall("".join(src) if isinstance(src, list) else src):
                if name not in names:
                    names.append(name)
    return names


def _registry():
    from zslib.teaching.exercises import REGISTRY

    return REGISTRY


def _kind(ex) -> str:
    from zslib.teaching.exercises.kinds import FunctionExercise, NumberExercise

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


def load_rubric(rubric, chapter: str | None = None) -> dict:
    """``{name: RubricItem}`` from a ``{name: points | {"points", "partial"}}`` dict, or the entry ``chapter`` of a
    pack's ``rubric.json`` (a path or the loaded ``{chapter: {...}}`` dict)."""
    if isinstance(rubric, (str, os.PathLike)):
        path = Path(rubric)
        if not path.is_file():
            raise FileNotFoundError(f"no such rubric: {path}")
        try:
            rubric = json.loads(path.read_text())
        except ValueError as err:
            raise ValueError(f"{path} is not JSON ({err}); give the pack's rubric.json") from None
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
    import torch

    from zslib.teaching.exercises.kinds import Case

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
    from zslib.teaching.sandbox import encode

    return [{"args": [encode(a) for a in c.args], "kwargs": encode(dict(c.kwargs))["mapping"], "grad": c.grad}
            for c in cases]


def _identity(fn) -> str:
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}"


def _score_function(ex, cases, record) -> tuple[float, str]:
    import torch

    from zslib.teaching.exercises.kinds import _as_tensor, _fresh
    from zslib.teaching.sandbox import decode

    if record.get("identity") in {_identity(f) for f in (ex.reference, *ex.forbidden)}:
        return 0.0, "that is the zslib reference itself; write the computation yourself."
    results = record.get("results") or []
    if len(results) != len(cases):
        return 0.0, f"the function was run on {len(results)} of the {len(cases)} inputs."
    right, first = 0, None
    for number, (case, res) in enumerate(zip(cases, results), 1):
        where = case.description if case.description.startswith("hidden") else f"input {number} ({case.description})"
        problem = None
        if res.get("unanswered"):
            problem = "not answered (NotImplementedError)"
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


def score_answer(ex, record: dict | None, cases=None) -> tuple[float, str]:
    """The fraction in [0, 1] of exercise ``ex`` an answer record earns, and the feedback line; the record is
    what the submission's ``check`` handed over (``None``: no check of it ran)."""
    from zslib.teaching.exercises.kinds import NOT_ANSWERED, Outcome
    from zslib.teaching.sandbox import decode

    if record is None:
        return 0.0, "not checked: the check cell did not run (the notebook stopped before it, or it is missing)."
    if record.get("unanswered"):
        return 0.0, NOT_ANSWERED.split(":")[0] + "."
    if "error" in record:
        return 0.0, record["error"] + "."
    kind = _kind(ex)
    if kind == "function":
        return _score_function(ex, cases if cases is not None else hidden_cases(ex, 0), record)
    context = decode(record.get("context", {"mapping": []}))
    context = context if isinstance(context, dict) else {}
    missing = [k for k in ex.context if k not in context]
    if missing:
        return 0.0, f"the check did not pass the chapter's {', '.join(missing)}."
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
    options = ex.options or tuple(str(k).lower() for k in context.get("table", {}))
    text = str(answer).strip().lower()
    if text not in options:
        return 0.0, f"answer one of {', '.join(map(repr, options))}; got {str(answer)[:80]!r}."
    truth = ex._decided(ex.decide, context)
    if isinstance(truth, Outcome):
        return 0.0, truth.message
    if text != truth:
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
    import zslib

    return str(Path(zslib.__file__).resolve().parents[1])


def _user_ids(user):
    if user is None:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise RefusedUser(f"no such user {user!r} to run submissions as; name an existing unprivileged user "
                          "(--user) or pass --same-user") from None
    return entry.pw_uid, entry.pw_gid


def resolve_user(user="auto"):
    """``"auto"``: ``nobody`` when the grader is root, else the grader's own user (``None``)."""
    if user == "auto":
        return "nobody" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    return user


_PROBED = set()


def probe_user(user) -> None:
    """Refuse, with what to do, when ``user`` cannot start the grader's Python with zslib."""
    ids = _user_ids(user)
    if ids is None or user in _PROBED:
        return
    if os.geteuid() != 0:
        raise RefusedUser(f"running submissions as {user!r} needs the grader to run as root; pass --same-user "
                          "to run them as yourself")
    uid, gid = ids

    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    try:
        out = subprocess.run([sys.executable, "-c", "import zslib.teaching.sandbox"], preexec_fn=drop,
                             capture_output=True, text=True, timeout=120, cwd="/",
                             env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": _zslib_root(),
                                  "HOME": "/tmp"})
        problem = out.stderr.strip().splitlines()[-1] if out.returncode else ""
    except OSError as err:
        problem = str(err)
    if problem:
        raise RefusedUser(f"the grader runs as root, so submissions run as {user!r}, but {user!r} cannot run "
                          f"{sys.executable} with zslib ({problem}). Install Python and zslib where other users "
                          "can read them (e.g. a venv under /opt), or pass --same-user to run submissions as "
                          "root (then a submission can read and write everything root can).")
    _PROBED.add(user)


ISOLATIONS = ("auto", "namespaces", "process")
_ISOLATED: dict = {}


def _namespaces_problem(ids) -> str:
    """Why the namespace jail (:mod:`zslib.teaching.jail`) cannot be used here, or ``""`` when its probe held."""
    if ids is None:
        return "it needs a grader running as root that runs submissions as another user"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "the util-linux commands unshare and mount are not installed"
    if ids in _ISOLATED:
        return _ISOLATED[ids]
    from zslib.teaching.jail import UNSHARE

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
    _ISOLATED[ids] = problem
    return problem


def resolve_isolation(isolation="auto", user=None) -> str:
    """``"namespaces"`` (each submission in the jail of :mod:`zslib.teaching.jail`: no network, its own process
    namespace, nothing writable but its folder) or ``"process"`` (its own process group and folders only).
    ``"auto"``: namespaces where the probe holds (a root grader with another user and util-linux), else process;
    ``"namespaces"`` asked for where the probe fails raises :class:`RefusedUser` with the reason."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {list(ISOLATIONS)}, got {isolation!r}")
    if isolation == "process":
        return "process"
    problem = _namespaces_problem(_user_ids(user))
    if not problem:
        return "namespaces"
    if isolation == "namespaces":
        raise RefusedUser(f"cannot grade in the namespace jail: {problem}. Run the grader as root with util-linux "
                          "installed (submissions then run as nobody), or pass --isolation process.")
    return "process"


def _limits(memory_mb, ids, timeout):
    import resource

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


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.chown(dirpath, uid, gid)
        for f in filenames:
            os.chown(os.path.join(dirpath, f), uid, gid)


def _execute(notebook: Path, names, seed: int, timeout: float, memory_mb: int, user,
             isolation: str = "process") -> tuple[dict, str, str]:
    """Run ``notebook`` in the sandbox (in the namespace jail when ``isolation`` is ``"namespaces"``); the answer
    records by exercise, the status and the log's tail."""
    registry, ids = _registry(), _user_ids(user)
    token = secrets.token_hex(16)
    root = Path(tempfile.mkdtemp(prefix="zs-grade-"))
    dirs = {k: root / k for k in ("home", "results", "cache", "tmp", "work")}
    for d in dirs.values():
        d.mkdir()
    copy = dirs["work"] / "submission.ipynb"
    shutil.copyfile(notebook, copy)
    if ids is not None:
        _chown_tree(root, *ids)
    os.chmod(root, 0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8"),
           "HOME": str(dirs["home"]), "TMPDIR": str(dirs["tmp"]), "ZS_RESULTS": str(dirs["results"]),
           "ZS_CACHE": str(dirs["cache"]), "XDG_CACHE_HOME": str(dirs["cache"] / "xdg"),
           "MPLCONFIGDIR": str(dirs["tmp"]), "IPYTHONDIR": str(dirs["home"] / ".ipython"), "MPLBACKEND": "Agg",
           "ZS_PROGRESS": "none", "ZS_WORKERS": "1", "PYTHONPATH": _zslib_root(), "ZS_GRADE_TOKEN": token,
           "PYTHONDONTWRITEBYTECODE": "1"}
    for key in ("ZS_PROFILE", "ZS_DEVICE", "ZS_DATA", "ZS_WEIGHTS", "OMP_NUM_THREADS"):
        if key in os.environ:
            env[key] = os.environ[key]
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    log_path = root / "log.txt"
    answers, state = {}, {"cell": None, "of": None, "done": False}
    cases = {}
    proc = None
    try:
        with open(log_path, "wb") as log:
            argv = [sys.executable, "-m", "zslib.teaching.sandbox", str(copy), str(out_w), str(in_r)]
            jailed = isolation == "namespaces" and ids is not None
            if jailed:  # the jail drops to the user itself, after its mounts
                from zslib.teaching.jail import command

                argv = command(str(root), ids[0], ids[1], argv)
            proc = subprocess.Popen(argv, cwd=dirs["work"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, pass_fds=(out_w, in_r), start_new_session=True,
                                    preexec_fn=_limits(memory_mb, None if jailed else ids, timeout))
        os.close(out_w)
        os.close(in_r)
        out_w = in_r = None
        writer = os.fdopen(in_w, "w", encoding="utf-8", buffering=1)
        in_w = None
        try:
            writer.write(json.dumps({"public": _public(names)}) + "\n")
            writer.flush()
        except OSError:
            pass  # the child is already gone: its status says why

        def read():
            with os.fdopen(out_r, "r", encoding="utf-8", errors="replace") as reader:
                while True:
                    line = reader.readline(8_000_000)
                    if not line:
                        return
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue  # not a message of ours: ignore
                    if not isinstance(msg, dict):
                        continue
                    op, name = msg.get("op"), msg.get("name")
                    if op == "cell":
                        state["cell"], state["of"] = msg.get("index"), msg.get("of")
                    elif op == "done":
                        state["done"] = True
                    elif op == "answer" and name in names:
                        answers[name] = msg
                    elif op == "inputs" and name in names and _kind(registry[name]) == "function":
                        if name not in cases:
                            cases[name] = hidden_cases(registry[name], seed)
                        try:
                            writer.write(json.dumps({"cases": _encoded_cases(cases[name])}) + "\n")
                            writer.flush()
                        except (OSError, ValueError):
                            return
                    elif op == "inputs":
                        try:
                            writer.write("{}\n")
                            writer.flush()
                        except (OSError, ValueError):
                            return

        reader_thread = threading.Thread(target=read, daemon=True)
        reader_thread.start()
        try:
            code = proc.wait(timeout=timeout)
            if code == 0 and state["done"]:
                status = "completed"
            elif code < 0:
                status = (f"died (signal {-code}, e.g. the memory limit or a killed kernel) in cell "
                          f"{(state['cell'] or 0) + 1} of {state['of']}")
            else:
                status = f"stopped (exit status {code}) in cell {(state['cell'] or 0) + 1} of {state['of']}"
        except subprocess.TimeoutExpired:
            status = f"time limit of {timeout:g} s reached in cell {(state['cell'] or 0) + 1} of {state['of']}"
        reader_thread.join(2)
        try:
            writer.close()
        except OSError:
            pass
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        _kill_tagged(token)
        for fd in (out_w, in_r, in_w):
            if fd is not None:
                os.close(fd)
        try:
            tail = log_path.read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError:
            tail = ""
        shutil.rmtree(root, ignore_errors=True)
    return {"answers": answers, "cases": cases}, status, tail


def _chapter_of(notebook: Path, table: dict | None) -> str:
    try:
        meta = json.loads(notebook.read_text()).get("metadata", {}).get("zslib_assignment", {})
    except (OSError, ValueError, AttributeError):
        meta = {}
    chapter = meta.get("chapter") if isinstance(meta, dict) else None
    if table is None:
        return chapter or notebook.stem
    for candidate in (chapter, notebook.stem):
        if candidate in table:
            return candidate
    named = sorted((k for k in table if notebook.stem.endswith(f"_{k}") or notebook.stem.startswith(f"{k}_")),
                   key=len)  # alice_cml.ipynb, cml_alice.ipynb
    if named:
        return named[-1]
    if len(table) == 1:
        return next(iter(table))
    return chapter or notebook.stem


def _check_notebook(path: Path) -> str | None:
    """A one-line reason the file cannot be graded, or ``None``."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"not a readable notebook ({type(err).__name__}: {str(err)[:100]})"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return "not a notebook: it has no list of 'cells' (was it saved by Jupyter?)"
    return None


def grade_submission(notebook, rubric=None, *, student: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                     memory_mb: int = DEFAULT_MEMORY_MB, user="auto", seed: int | None = None,
                     isolation: str = "auto") -> Graded:
    """Grade one notebook (see the module docstring). ``rubric``: a pack's ``rubric.json``, a dict, or ``None``
    (the exercises the notebook's metadata or check calls name, at their registered points). ``timeout``:
    seconds for the whole notebook. ``user``: ``"auto"`` (``nobody`` when root), a user name, or ``None``
    (the grader's own user). ``isolation``: see :func:`resolve_isolation`."""
    path = Path(notebook)
    user = resolve_user(user)
    probe_user(user)
    isolation = resolve_isolation(isolation, user)
    table = None
    if isinstance(rubric, (str, os.PathLike)):
        table = json.loads(Path(rubric).read_text()) if Path(rubric).is_file() else None
        if table is None:
            raise FileNotFoundError(f"no such rubric: {rubric}")
    elif isinstance(rubric, dict) and not all(k in _registry() for k in rubric):
        table = rubric
    chapter = _chapter_of(path, table)
    problem = _check_notebook(path)
    if rubric is None:
        nb = json.loads(path.read_text()) if problem is None else {"cells": [], "metadata": {}}
        names = nb.get("metadata", {}).get("zslib_assignment", {}).get("exercises") or exercise_names(nb)
        items = {n: RubricItem(n, float(_registry()[n].points), _kind(_registry()[n]) != "choice")
                 for n in names if n in _registry()}
    else:
        items = load_rubric(table if table is not None else rubric, chapter)
    if seed is None:
        seed = secrets.randbits(62)
    if problem:
        run, status, tail = {"answers": {}, "cases": {}}, problem, ""
    else:
        run, status, tail = _execute(path, list(items), seed, timeout, memory_mb, user, isolation)
    registry, exercises = _registry(), {}
    for name, item in items.items():
        ex = registry[name]
        cases = run["cases"].get(name)
        if cases is None and _kind(ex) == "function":
            cases = hidden_cases(ex, seed)
        fraction, message = score_answer(ex, run["answers"].get(name), cases)
        earned = item.points * fraction if (item.partial or fraction == 1.0) else 0.0
        exercises[name] = {"points": round(earned, 2), "max": item.points, "fraction": round(fraction, 4),
                           "checked": name in run["answers"], "message": message}
    return Graded(student or path.stem, path.name, chapter, status,
                  round(sum(r["points"] for r in exercises.values()), 2), sum(i.points for i in items.values()),
                  exercises, tail)


# ----------------------------------------------------------------------------------------------------
# A class


def _submissions(folder: Path) -> list[tuple[str, Path]]:
    """``(student, notebook)``: ``FOLDER/alice.ipynb`` is alice's; ``FOLDER/alice/*.ipynb`` are alice's too."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix == ".ipynb":
            out.append((p.stem, p))
        elif p.is_dir() and not p.name.startswith("."):
            out += [(p.name, q) for q in sorted(p.rglob("*.ipynb")) if ".ipynb_checkpoints" not in q.parts]
    return out


def write_gradebook(grades: list, path) -> Path:
    """A CSV: one row per notebook (student, notebook, chapter, status, points, total, then each exercise's
    points, empty where a notebook does not have that exercise)."""
    columns = []
    for g in grades:
        columns += [n for n in g.exercises if n not in columns]
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "notebook", "chapter", "status", "points", "total", *columns])
        for g in grades:
            w.writerow([g.student, g.notebook, g.chapter, g.status, f"{g.points:g}", f"{g.total:g}",
                        *(f"{g.exercises[c]['points']:g}" if c in g.exercises else "" for c in columns)])
    return path


def _feedback(student: str, grades: list) -> str:
    lines = [f"# Feedback for {student}", ""]
    for g in grades:
        lines += [f"## {g.notebook} ({g.chapter}): {g.points:g} / {g.total:g} points", "",
                  f"Run: {g.status}.", "", "| exercise | points | feedback |", "|---|---|---|"]
        for name, r in g.exercises.items():
            text = r["message"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{name}` | {r['points']:g} / {r['max']:g} | {text} |")
        lines.append("")
    return "\n".join(lines)


def grade_all(submissions, rubric, out, *, timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB,
              user="auto", seed: int | None = None, progress=print, isolation: str = "auto") -> list:
    """Grade every notebook under ``submissions`` with the pack's ``rubric`` (a ``rubric.json``); write
    ``out/gradebook.csv`` and ``out/feedback/<student>.md``; return the :class:`Graded` list. The hidden
    inputs' seed is ``seed``, else the pack's ``grader/hidden.json`` beside the rubric, else a fresh one
    (written to ``out/grading.json`` either way, so the grading can be repeated)."""
    submissions, out = Path(submissions), Path(out)
    if not submissions.is_dir():
        raise FileNotFoundError(f"no such folder of submissions: {submissions}")
    found = _submissions(submissions)
    if not found:
        raise FileNotFoundError(f"no .ipynb under {submissions}")
    rubric_path = Path(rubric)
    if not rubric_path.is_file():
        raise FileNotFoundError(f"no such rubric: {rubric_path}")
    table = json.loads(rubric_path.read_text())
    for entry in table.values():
        _items(entry)  # an unknown exercise or bad points fail before anything runs
    user = resolve_user(user)
    probe_user(user)
    isolation = resolve_isolation(isolation, user)
    if seed is None:
        secret = rubric_path.parent / "grader" / "hidden.json"
        seed = json.loads(secret.read_text())["seed"] if secret.is_file() else secrets.randbits(62)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    grades = []
    for student, nb in found:
        start = time.monotonic()
        chapter = _chapter_of(nb, table)
        try:
            if chapter not in table:
                raise ValueError(f"no rubric entry for chapter {chapter!r}: keep the pack's notebook metadata, or "
                                 f"name the file after its chapter (e.g. {student}_cml.ipynb)")
            g = grade_submission(nb, table, student=student, timeout=timeout, memory_mb=memory_mb, user=user,
                                 seed=seed, isolation=isolation)
        except (ValueError, OSError, RuntimeError) as err:  # one bad file must not stop the class's grading
            g = Graded(student, nb.name, chapter, f"not graded: {err}", 0.0, 0.0)
        progress(f"{student}/{nb.name}: {g.points:g} / {g.total:g} ({g.status}, {time.monotonic() - start:.0f} s)")
        grades.append(g)
    write_gradebook(grades, out / "gradebook.csv")
    for student in dict.fromkeys(g.student for g in grades):
        (out / "feedback" / f"{student}.md").write_text(_feedback(student, [g for g in grades if g.student == student]))
    (out / "grading.json").write_text(json.dumps({"seed": seed, "rubric": str(rubric_path.resolve()),
                                                  "timeout_s": timeout, "memory_mb": memory_mb, "user": user,
                                                  "isolation": isolation}) + "\n")
    return grades
