"""Errors raised by the data layer.

Every error names the file it is about and says what to do next. They subclass the built-in
exception a caller would naturally catch (``FileNotFoundError`` for a missing file, ``ValueError``
for contents that are wrong), so ``except FileNotFoundError`` keeps working.
"""
from __future__ import annotations

__all__ = ["DataError", "MissingDataError", "ChecksumError", "CorruptFileError", "CountMismatchError",
           "ManualDownloadError"]


class DataError(RuntimeError):
    """Base class: something is wrong with a dataset on disk.

    Raised in a ``DataLoader`` worker process, the error is rebuilt in the training process by PyTorch from one
    text, "Caught CorruptFileError in DataLoader worker process 0. Original Traceback ...", whose first line
    names no file. That text is turned around here: the original message (which names the file) first, then
    where it was raised, then the worker's traceback."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            args = (_original_first(args[0], type(self).__name__),)
        super().__init__(*args)


def _original_first(text: str, name: str) -> str:
    """A worker's re-raised text with the original error's message as its first line (see :class:`DataError`)."""
    if not text.startswith(f"Caught {name} ") or "\nOriginal Traceback" not in text:
        return text
    where = text.split("\n", 1)[0][len(f"Caught {name} "):].rstrip(".")
    marker = f"{name}: "
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if marker in line and not line.startswith(" ")]
    if not starts:
        return text
    first = lines[starts[-1]].split(marker, 1)[1]
    return f"{first} (raised {where})\n" + text


class MissingDataError(DataError, FileNotFoundError):
    """A file or folder the dataset needs is not there."""


class ChecksumError(DataError, ValueError):
    """A downloaded or supplied file does not have the expected checksum."""


class CorruptFileError(DataError, ValueError):
    """A file exists but cannot be read: a truncated archive, an unreadable image, a broken list."""


class CountMismatchError(DataError, ValueError):
    """A dataset has a different number of images or classes than the official release."""


class ManualDownloadError(DataError):
    """The dataset has no stable public download address; the message says where to get it."""
