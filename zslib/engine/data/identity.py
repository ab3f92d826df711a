"""The identity of a dataset: which images a result or a cache was made from.

A stored result, a pre-resized image cache and a feature cache are only as good as the images they were made
from. File names and labels do not say which images those were: a tree with the same names and labels and other
pixels (a fabricated copy, a re-encoded one, a subset padded out) looks the same to them. So every dataset folder
gets an *identity* computed from its contents, and the identity is part of every cache key and of every result's
provenance (``provenance["data_identity"]``); a stored result or cache made from other data is not reused.

* A real dataset's folder (:func:`folder_identity`): 16 hex digits of a SHA-256 over every file under the folder
  (names starting with ``.`` left out), in sorted order: its path relative to the folder, its size, and the
  SHA-256 of its contents. A file larger than :data:`LARGE_FILE` (a dataset archive left beside its images) is
  read only in its first and last :data:`EDGE_BYTES`. Reading every image is what makes two trees with the
  same names, sizes and labels differ as soon as one pixel does; it is done once per folder: the identity is kept
  in the cache folder (``$ZS_CACHE/data-identity/``) with a stamp of every file's size and modification time, and
  computed again only when one of them changes (or a file comes or goes). Its cost on Flowers-102: see
  the README. That size-and-time shortcut serves everyday loading; it misses a file rewritten in
  place whose size and time were restored. ``train --force`` (:func:`zslib.engine.runner.run` with ``force``) and
  ``record`` never take it: they hash every file again (``fresh=True``), and the identity they find replaces the
  kept one, so a feature or image cache made from the old contents is rebuilt.
* SynthParts, generated in memory (:func:`zslib.engine.data.synthparts.generator_identity`): a digest of its
  generator's parameters and of the source that renders it.

:func:`data_identity` gives the identity of what a profile (or config) reads: ``"<dataset>-<16 hex>"``, or
``None`` when the dataset is not on disk (a stored result is then read without the check: it cannot be trained
again here anyway).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from zslib.engine.cache import cache_dir
from zslib.engine.data.datasets import get_dataset_class
from zslib.engine.data.errors import MissingDataError
from zslib.engine.data.images import check_file_name
from zslib.engine.data.synthparts import generator_identity

__all__ = ["LARGE_FILE", "EDGE_BYTES", "folder_identity", "data_identity", "identity_mismatch"]

#: Files above this size (bytes) are identified by their size and their first and last :data:`EDGE_BYTES` only.
LARGE_FILE = 64 << 20
EDGE_BYTES = 1 << 20
_VERSION = 1  # of the recipe above; part of the stamp, so a new recipe recomputes every stored identity

_MEMO: dict[str, tuple[str, str]] = {}  # folder -> (stamp, identity), in this process


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    """``(relative path, size, mtime in ns)`` of every file under ``folder``, sorted; hidden entries left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            check_file_name(path)  # a name that is not UTF-8 can be neither hashed nor printed: refused, named
            st = os.stat(path)
            out.append((os.path.relpath(path, folder), st.st_size, st.st_mtime_ns))
    out.sort()
    return out


def _file_digest(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= LARGE_FILE:
            h.update(f.read())
        else:
            h.update(f.read(EDGE_BYTES))
            f.seek(size - EDGE_BYTES)
            h.update(f.read(EDGE_BYTES))
    return h.hexdigest()


def _compute(folder: Path, listing) -> str:
    h = hashlib.sha256(f"zslib-data-identity-{_VERSION}".encode())
    for rel, size, _ in listing:
        h.update(f"{rel}\0{size}\0{_file_digest(folder / rel, size)}\n".encode())
    return h.hexdigest()[:16]


def _stamp(listing) -> str:
    return hashlib.sha256(json.dumps([_VERSION, listing]).encode()).hexdigest()


def _record_path(folder: Path) -> Path | None:
    root = cache_dir()
    if root is None:
        return None
    return root / "data-identity" / (hashlib.sha256(str(folder).encode()).hexdigest()[:16] + ".json")


def folder_identity(folder: str | os.PathLike, fresh: bool = False) -> str:
    """16 hex digits identifying the contents of ``folder`` (see the module docstring), computed once and then
    read back while no file's size or modification time changed. That shortcut is for everyday loading: a file
    rewritten in place with its size and time restored keeps the old identity. ``fresh``: every file is read and
    hashed now (what ``train --force`` and ``record`` use), and the kept identity replaced by the result, so that
    the caches keyed by it are rebuilt (its cost on Flowers-102: the README)."""
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"no dataset folder at {folder}")
    listing = _listing(folder)
    stamp = _stamp(listing)
    memo = _MEMO.get(str(folder))
    if memo is not None and memo[0] == stamp and not fresh:
        return memo[1]
    record = _record_path(folder)
    identity = None
    if record is not None and record.is_file() and not fresh:
        try:
            stored = json.loads(record.read_text())
            if stored.get("folder") == str(folder) and stored.get("stamp") == stamp:
                identity = str(stored["identity"])
        except (OSError, ValueError, KeyError, TypeError):
            identity = None
    if identity is None:
        started = time.perf_counter()
        identity = _compute(folder, listing)
        if record is not None:
            _store(record, {"folder": str(folder), "stamp": stamp, "identity": identity, "files": len(listing),
                            "bytes": sum(s for _, s, _ in listing),
                            "seconds": round(time.perf_counter() - started, 3)})
    _MEMO[str(folder)] = (stamp, identity)
    return identity


def _store(path: Path, data: dict) -> None:
    """Keep the identity for the next process; a cache that cannot be written only costs the next one its time."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def data_identity(profile, root=None, fresh: bool = False) -> str | None:
    """The identity of the data ``profile`` (a :class:`~zslib.engine.profile.Profile` or a
    :class:`~zslib.engine.config.Config`) reads: ``"synthparts-<16 hex>"`` from SynthParts' generator, else
    ``"<dataset>-<16 hex>"`` of the dataset's folder under ``root`` (default :func:`~zslib.engine.data.data_root`);
    ``None`` when that folder is not on disk. ``fresh``: hash every file now (:func:`folder_identity`)."""
    if hasattr(profile, "to_profile"):
        profile = profile.to_profile()
    if str(profile.dataset).lower() == "synthparts":
        return "synthparts-" + generator_identity(profile.image_size, profile.synth_images_per_class)
    cls = get_dataset_class(profile.dataset)
    try:
        folder = cls.locate(root)
    except MissingDataError:
        return None
    return f"{cls.name}-{folder_identity(folder, fresh)}"


def identity_mismatch(what: str, stored: str | None, current: str | None) -> str | None:
    """One line saying that ``what`` was made from other data than the current one, or ``None`` when it was not
    (or when either identity is unknown: something made before identities were recorded, or data not on disk)."""
    if stored is None or current is None or stored == current:
        return None
    return f"{what} was made from other data (data identity {stored}; the data now is {current})"
