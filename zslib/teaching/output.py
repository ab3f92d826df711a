"""The grader's output folder, written without ever following a link a submission could have planted.

A submission runs while the grader's output folder may already exist: as the grader's own user (``--same-user``) it
can write there, and in a world-writable parent (``/tmp/grades``) another user could have made the folder first and
filled it with symbolic links (``feedback/alice.md -> /etc/passwd``) that a root grader would then write through.
So :meth:`OutputFolder.open` creates the folder itself (mode 700) or accepts an existing one only when it is a real
folder (not a link), owned by the grader's user and writable by no one else, and keeps it open: every later write
goes through that descriptor (``openat``), into a temporary file created with ``O_EXCL | O_NOFOLLOW`` and renamed
over the name (a link planted there is replaced, never followed), with mode 600. The same holds for the
``feedback/`` sub-folder.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["OutputFolder", "UnsafeOutput"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeOutput(OSError):
    """The output folder cannot be written safely: one line saying why and what to do."""


def _checked(fd: int, where: str) -> int:
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to uid {info.st_uid}, not to the grader (uid {os.geteuid()})"
    elif info.st_mode & 0o022:
        problem = f"is writable by other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        os.close(fd)
        raise UnsafeOutput(f"the output folder {where} {problem}: a submission could have planted links in it; "
                           "give --out a new folder (the grader creates it, mode 700)")
    return fd


def _open_dir(name, where: str, dir_fd: int | None = None) -> int:
    """Create the folder ``name`` (mode 700) or open the existing one, refusing a link or an unsafe folder."""
    try:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        raise UnsafeOutput(f"the output folder {where} cannot be opened as a folder ({err.strerror}; a symbolic "
                           "link is refused): give --out a new folder") from None
    return _checked(fd, where)


class OutputFolder:
    """A folder the grader writes its files into (see the module docstring); close it when done."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd, self._subs = path, fd, {}

    @classmethod
    def open(cls, path, subfolders=("feedback",)) -> "OutputFolder":
        """Make (or check) the folder and its ``subfolders`` now, and keep them open: what happens to their names
        later (a folder renamed, replaced by a link) does not change where the writes go."""
        path = Path(path)
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
        folder = cls(path, _open_dir(str(path), str(path)))
        try:
            for name in subfolders:
                folder._folder(name)
        except OSError:
            folder.close()
            raise
        return folder

    def _folder(self, name: str) -> int:
        if not name:
            return self._fd
        if name not in self._subs:
            self._subs[name] = _open_dir(name, str(self.path / name), self._fd)
        return self._subs[name]

    def write_text(self, relative: str, text: str) -> Path:
        """Write ``text`` to ``relative`` (``name`` or ``sub/name``) inside the folder: a temporary file made with
        ``O_EXCL | O_NOFOLLOW`` (mode 600), renamed over the name."""
        sub, _, name = relative.rpartition("/")
        if not name or name.startswith(".") or "/" in sub or sub.startswith("."):
            raise ValueError(f"not a plain file name inside the output folder: {relative!r}")
        fd_dir = self._folder(sub)
        tmp = f".{name}.tmp-{os.getpid()}"
        try:
            os.unlink(tmp, dir_fd=fd_dir)
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600, dir_fd=fd_dir)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, name, src_dir_fd=fd_dir, dst_dir_fd=fd_dir)
        return self.path / relative

    def close(self) -> None:
        for fd in [*self._subs.values(), self._fd]:
            try:
                os.close(fd)
            except OSError:
                pass
        self._subs = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
