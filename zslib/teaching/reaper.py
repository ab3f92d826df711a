"""Every process a same-user grading started, found and ended before the grader writes its results.

A submission graded as the grader's own user (``--same-user``) can start a process that leaves its process
group (``setsid``) and clears its environment, so neither the process-group kill nor the environment token of
:mod:`zslib.teaching.grading` finds it; before this module, such a process rewrote ``gradebook.csv`` after
``grade-all`` had exited. Linux's child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, see ``man 2 prctl``) makes
the grader adopt every orphaned descendant instead of ``init``: however a process detaches, it stays a
descendant of the grader, which :func:`sweep` kills and reaps until none is left.

What stays open in same-user mode (the module docstring of :mod:`zslib.teaching.grading` says it too): a process
started *by another program on the submission's request* is no descendant (a ``systemd-run --user`` unit, an
``at`` or ``cron`` job, a login over ``ssh`` to the same machine, a container engine's daemon) and survives;
and until :func:`sweep` runs, a running submission can read and write whatever the grader's user can, other
students' folders included.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

__all__ = ["adopt_orphans", "descendants", "sweep"]

_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans(on: bool = True) -> bool:
    """Make this process the subreaper of its descendants (``on``) or stop being one; ``False`` where the
    platform has no such call (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        if len(fields) >= 2 and fields[0] != "Z":
            out[int(entry)] = int(fields[1])
    return out


def descendants(root: int | None = None, spare: frozenset = frozenset()) -> list[int]:
    """The live descendants of ``root`` (this process by default), leaving out the subtrees of ``spare``."""
    root = os.getpid() if root is None else root
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [p for p in children.get(root, []) if p not in spare]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += [p for p in children.get(pid, []) if p not in spare]
    return out


def _reap(pids) -> None:
    for pid in pids:  # only these: a spared child's exit status stays for its owner
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not a child of this process: its own parent reaps it


def sweep(spare: frozenset = frozenset(), seconds: float = 10.0) -> list[int]:
    """SIGKILL and reap every descendant of this process but the subtrees of ``spare`` (children that were here
    before grading began), until none is left or ``seconds`` have passed; the pids still alive then."""
    deadline = time.monotonic() + seconds
    while True:
        left = descendants(spare=spare)
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
        _reap(left)
