"""A user of its own for each graded submission: a pool of numeric user ids that no account and no process
holds, handed out one per running submission by a root grader (:mod:`zslib.teaching.grading`).

Why: in process mode a submission's only wall against another is its user. With one shared user (``nobody``)
a process that leaves its process group and clears its environment survives its submission's cleanup and can
rewrite the next student's notebook or answers. Here a submission runs as a uid that nothing else on the
machine uses; when it ends, every process of that uid is killed (``kill(-1)`` sent *as* that uid reaches all
of them at once, whatever their session or environment) before the uid goes back to the pool, and its folder
belongs to that uid alone (mode 700), so a running submission cannot reach another's files either.

The default pool, :data:`DEFAULT_UIDS`, lies in the range the systemd documentation ("Users, Groups, UIDs and
GIDs on systemd Systems") leaves to no one: above the container range that ends at 1879048191 and below
2147483647. A pool uid that has an account (``/etc/passwd``) or a running process is refused, with the reason.
"""
from __future__ import annotations

import os
import pwd
import signal
import subprocess
import threading
import time

__all__ = ["DEFAULT_UIDS", "UidPool", "parse_uids", "processes_of", "kill_user"]

#: first uid and number of uids of the default pool (``--uids 1990000000-1990000063``)
DEFAULT_UIDS = (1_990_000_000, 64)


def parse_uids(text: str) -> tuple[int, int]:
    """``"FIRST-LAST"`` -> ``(first, count)``; a ``ValueError`` saying what is wrong otherwise."""
    try:
        first, last = (int(part) for part in str(text).split("-"))
    except ValueError:
        raise ValueError(f"--uids takes FIRST-LAST, two user ids such as 1990000000-1990000063; got {text!r}") from None
    if not 1000 <= first <= last < 2 ** 31 - 1:
        raise ValueError(f"--uids {text}: the range must lie between 1000 and 2147483646, first <= last")
    return first, last - first + 1


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes whose real or effective user id is ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8") as fh:
                status = fh.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        ids = fields.get("Uid", "").split()
        if len(ids) >= 2 and str(uid) in ids[:2] and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(entry))
    return found


def kill_user(uid: int, gid: int, seconds: float = 10.0) -> list[int]:
    """SIGKILL every process of ``uid``: ``kill -KILL -1`` run as that user (it reaches all of its processes in one
    sweep of the kernel's process list, so none can fork away), repeated until none is left; returns the pids
    still alive after ``seconds`` (none, unless a process is stuck in the kernel)."""
    deadline = time.monotonic() + seconds
    while True:
        left = processes_of(uid)
        if not left or time.monotonic() > deadline:
            return left
        try:
            subprocess.run(["kill", "-KILL", "-1"], user=uid, group=gid, extra_groups=[], capture_output=True,
                           timeout=10, env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.SubprocessError):
            for pid in left:  # no kill(1) here: one process at a time, from the grader
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.05)


class UidPool:
    """User ids lent to one running submission each (:meth:`lend`, :meth:`take_back`): ``count`` uids from ``first``
    without accounts (group id = user id), or, with ``account``, that one named user (one submission at a time)."""

    def __init__(self, first: int = DEFAULT_UIDS[0], count: int = DEFAULT_UIDS[1], account: str | None = None):
        self.account = account
        if account is not None:
            entry = pwd.getpwnam(account)  # KeyError: the caller says which user is missing
            self.ids = [(entry.pw_uid, entry.pw_gid)]
        else:
            self.ids = [(uid, uid) for uid in range(int(first), int(first) + int(count))]
        self._free = list(self.ids)
        self._lent = 0
        self._lock = threading.Condition()

    def describe(self) -> str:
        return (f"the user {self.account}" if self.account else
                f"uids {self.ids[0][0]}-{self.ids[-1][0]} (one per submission)")

    def problem(self) -> str:
        """Why this pool cannot be used here, or ``""``."""
        if self.account is None:
            for uid, _ in self.ids:
                try:
                    name = pwd.getpwuid(uid).pw_name
                    return f"uid {uid} of the pool belongs to the account {name!r}; give --uids a range no account uses"
                except KeyError:
                    pass
        for uid, _ in self.ids:
            busy = processes_of(uid)
            if busy:
                who = f"the user {self.account}" if self.account else f"uid {uid} of the pool"
                return (f"{who} has running processes (e.g. pid {busy[0]}), which grading would kill; run submissions "
                        "as uids nothing else uses (the default pool, --uids)")
        return ""

    def lend(self) -> tuple[int, int]:
        """A ``(uid, gid)`` with no process, waiting while every one is lent."""
        with self._lock:
            while not self._free:
                if not self._lent:
                    raise RuntimeError("every uid of the pool still has processes that could not be killed")
                self._lock.wait()
            self._lent += 1
            return self._free.pop(0)

    def take_back(self, ids: tuple[int, int]) -> list[int]:
        """Kill every process of ``ids`` and return it to the pool; the pids that could not be killed (the uid is
        then kept out of the pool)."""
        left = kill_user(*ids)
        with self._lock:
            self._lent -= 1
            if not left:
                self._free.append(ids)
            self._lock.notify_all()
        return left
