"""A container of our own for one graded submission: Linux namespaces, no image, no daemon.

The grader (:mod:`zslib.teaching.grading`, running as root) starts a submission as::

    unshare --mount --pid --net --ipc --uts --fork --kill-child --propagation private -- \
        python -m zslib.teaching.jail FOLDER UID GID -- python -m zslib.teaching.sandbox ...

``unshare`` (util-linux) gives the child new namespaces; this module, still root inside them, then

1. mounts a fresh ``/proc``, so the submission sees only its own processes;
2. remounts every mount point read-only (a per-mount flag: the host's mounts are untouched), so the
   world-writable places (``/tmp``, ``/var/tmp``, ``/dev/shm``) are closed as well as everything else;
3. binds ``FOLDER`` (the submission's temporary home, results, cache and notebook) back read-write;
4. drops to ``UID``/``GID`` with no supplementary groups and a process limit, and executes the command.

What this adds to the unprivileged user: the network namespace has only a loopback that is down (no
connection anywhere), the PID namespace ends every process the submission started when its first
process exits (no ``setsid``-and-clear-the-environment escape), and no file outside ``FOLDER`` can be
written, even where ``nobody`` could. What it does not do: the kernel is the host's (a kernel bug is a
way out, as for any container), world-readable files stay readable (the book's chapters with their
solutions among them), and CPU share is limited only by the grader's CPU-time limit.

``python -m zslib.teaching.jail --probe FOLDER`` (inside the same ``unshare``; ``FOLDER`` an empty folder that
``nobody`` owns) checks all of it and prints one word, ``isolated``, when every step held;
:func:`zslib.teaching.grading.resolve_isolation` uses it to decide
whether this mode can be used on this machine.
"""
from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys

__all__ = ["UNSHARE", "command", "mount_points"]

#: The namespaces a submission gets (``unshare`` flags).
UNSHARE = ("unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child",
           "--propagation", "private", "--")

_NPROC = 512  # processes the submission's user may have


def command(folder: str, uid: int, gid: int, argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` in the jail with ``folder`` writable, as ``uid``/``gid``."""
    return [*UNSHARE, sys.executable, "-m", "zslib.teaching.jail", str(folder), str(int(uid)), str(int(gid)), "--",
            *argv]


def mount_points(mountinfo: str) -> list[str]:
    """The mount points listed in a ``/proc/self/mountinfo`` text (field 5, octal escapes such as ``\\040``
    decoded), each once, parents before children."""
    seen = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
        if point not in seen:
            seen.append(point)
    return sorted(seen, key=lambda p: (p.rstrip("/").count("/"), p))


def _mount(*args: str) -> str:
    """Run ``mount`` with ``args``; the error line, or ``""``."""
    out = subprocess.run(["mount", *args], capture_output=True, text=True)
    return out.stderr.strip() if out.returncode else ""


def _enclose(folder: str) -> None:
    """Steps 1-3 of the module docstring; raises ``RuntimeError`` naming what could not be done."""
    problem = _mount("-t", "proc", "proc", "/proc")
    if problem:
        raise RuntimeError(f"could not mount a private /proc ({problem})")
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = mount_points(fh.read())
    stuck = []
    for point in points:
        problem = _mount("-o", "remount,bind,ro", point)
        if problem:
            stuck.append(point)
    writable = [p for p in stuck if os.access(p, os.W_OK) and not p.startswith(("/proc/", "/sys/"))]
    if "/" in stuck or writable:
        raise RuntimeError(f"could not make these mounts read-only: {', '.join(writable or ['/'])}")
    for args in (("--bind", folder, folder), ("-o", "remount,bind,rw", folder)):
        problem = _mount(*args)
        if problem:
            raise RuntimeError(f"could not give the submission its folder {folder} ({problem})")
    # the working directory was entered before the bind: enter it again by its path, through the new mount, or
    # a relative path would still write into the read-only one
    try:
        here = os.getcwd()
    except OSError:
        here = folder
    os.chdir(here)


def _drop(uid: int, gid: int) -> None:
    resource.setrlimit(resource.RLIMIT_NPROC, (_NPROC, _NPROC))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _probe(folder: str) -> int:
    """Inside the namespaces: enclose ``folder``, drop to its owner and check every promise."""
    info = os.stat(folder)
    _enclose(folder)
    _drop(info.st_uid, info.st_gid)
    failures = []
    try:
        with open(os.path.join(folder, "ok"), "w") as fh:
            fh.write("ok")
    except OSError as err:
        failures.append(f"its folder is not writable ({err})")
    for place in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(place):
            try:
                with open(os.path.join(place, f"zs-jail-probe-{os.getpid()}"), "w"):
                    failures.append(f"{place} is writable")
            except OSError:
                pass
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # an address, not a name: no resolver, no imports
    sock.settimeout(2)
    try:
        sock.connect(("1.1.1.1", 53))
        failures.append("the network is reachable")
    except OSError:
        pass
    finally:
        sock.close()
    if os.getpid() != 1:
        failures.append("not in a new PID namespace")
    print("isolated" if not failures else "not isolated: " + "; ".join(failures))
    return 0 if not failures else 1


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--probe":
        try:
            return _probe(argv[1])
        except (RuntimeError, OSError, KeyError) as err:
            print(f"not isolated: {err}")
            return 1
    if len(argv) < 5 or argv[3] != "--":
        print("usage: python -m zslib.teaching.jail FOLDER UID GID -- COMMAND ...  (or --probe FOLDER)", file=sys.stderr)
        return 2
    folder, uid, gid, command_line = argv[0], int(argv[1]), int(argv[2]), argv[4:]
    try:
        _enclose(folder)
        _drop(uid, gid)
    except (RuntimeError, OSError) as err:
        print(f"the grading jail could not be set up: {err}", file=sys.stderr)
        return 70
    os.execvp(command_line[0], command_line)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
