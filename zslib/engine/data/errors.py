"""Errors raised by the data layer.

Every error names the file it is about and says what to do next. They subclass the built-in
exception a caller would naturally catch (``FileNotFoundError`` for a missing file, ``ValueError``
for contents that are wrong), so ``except FileNotFoundError`` keeps working.
"""
from __future__ import annotations

__all__ = ["DataError", "MissingDataError", "ChecksumError", "CorruptFileError", "CountMismatchError",
           "ManualDownloadError"]


class DataError(RuntimeError):
    """Base class: something is wrong with a dataset on disk."""


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
