"""Keyed, verified arrays on disk: compute something once, reuse it in every later process.

Two things in the book are expensive to make and cheap to keep: the rendered SynthParts images (a few
seconds per split, needed by every run of every chapter) and, for the ``real`` profile, the outputs of
a frozen pretrained network on every image. Both are stored here as plain ``.npy`` files, one folder per
*key*: a dict of everything the arrays depend on, including a fingerprint of the source code that made
them (:func:`source_fingerprint`), so a change to that code can never be answered by a stale copy.

Each folder holds the arrays and ``meta.json`` (the key, and each array's shape, dtype and SHA-256). A
folder is written under a temporary name and renamed when complete, so an interrupted write is never
read as a cache; a folder whose arrays do not match their recorded checksum is reported and rebuilt.

The folder is ``$ZS_CACHE`` if set (``ZS_CACHE=off`` disables caching), else ``data/cache`` of the
book's checkout, else ``~/.cache/zslib``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from zslib.engine.profile import resolve_folder

__all__ = ["cache_dir", "source_fingerprint", "ArrayCache"]

_VERIFIED: set[str] = set()  # folders verified in this process (a fork inherits the set)


def cache_dir(path: str | os.PathLike | None = None) -> Path | None:
    """The cache folder (see the module docstring); ``None`` when caching is off (``ZS_CACHE=off``)."""
    if path is None and os.environ.get("ZS_CACHE", "").strip().lower() in ("off", "none", "0", "false"):
        return None
    return resolve_folder(path, "ZS_CACHE", "data/cache", "~/.cache/zslib")


def source_fingerprint(*sources) -> str:
    """16 hex digits of the SHA-256 of source code: files (paths, e.g. ``module.__file__``), or functions,
    classes and modules (their source, via :func:`inspect.getsource`). Name exactly the code that computes a
    cached value, so that an edit elsewhere does not throw the cache away while an edit there always does."""
    h = hashlib.sha256()
    for src in sources:
        if isinstance(src, (str, os.PathLike)):
            h.update(Path(src).read_bytes())
        else:
            h.update(inspect.getsource(src).encode())
    return h.hexdigest()[:16]


def _sha256(arr: np.ndarray) -> str:
    h = hashlib.sha256()
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    step = 1 << 26
    for start in range(0, flat.size, step):
        h.update(flat[start:start + step])
    return h.hexdigest()


class ArrayCache:
    """The cache entry of ``name`` under ``key`` (a JSON-able dict): :meth:`load` or :meth:`save`."""

    def __init__(self, name: str, key: Mapping, folder: str | os.PathLike | None = None):
        self.name = str(name)
        self.key = json.loads(json.dumps(dict(key), sort_keys=True))
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:16]
        root = cache_dir(folder)
        self.path = None if root is None else root / f"{self.name}-{digest}"

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def exists(self) -> bool:
        return self.path is not None and (self.path / "meta.json").is_file()

    def load(self, mmap: bool = False, verify: bool = True) -> dict[str, np.ndarray] | None:
        """The stored arrays, or ``None`` when there are none (or they fail verification: the
        folder is then removed with a warning, so the caller recomputes and saves afresh).
        ``mmap`` reads the arrays as read-only memory maps. ``verify`` checks every array's
        SHA-256 (once per folder and process)."""
        if not self.exists():
            return None
        try:
            meta = json.loads((self.path / "meta.json").read_text())
            if meta.get("key") != self.key:
                raise ValueError("its key differs from the requested one")
            arrays = {}
            for name, info in meta["arrays"].items():
                arr = np.load(self.path / f"{name}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)
                if list(arr.shape) != info["shape"] or str(arr.dtype) != info["dtype"]:
                    raise ValueError(f"array {name!r} has shape {arr.shape} / {arr.dtype}, expected "
                                     f"{info['shape']} / {info['dtype']}")
                arrays[name] = arr
            if verify and str(self.path) not in _VERIFIED:
                for name, arr in arrays.items():
                    if _sha256(arr) != meta["arrays"][name]["sha256"]:
                        raise ValueError(f"array {name!r} does not match its recorded SHA-256")
                _VERIFIED.add(str(self.path))
            return arrays
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as err:
            warnings.warn(f"the cached {self.name} at {self.path} is damaged ({err}); it is removed and "
                          "computed again", stacklevel=2)
            shutil.rmtree(self.path, ignore_errors=True)
            return None

    def save(self, arrays: Mapping[str, np.ndarray]) -> Path | None:
        """Write ``arrays`` atomically; returns the folder (``None`` when caching is off). A failure to
        write (read-only disk, disk full) only warns: a cache is an optimization, never a requirement."""
        if self.path is None:
            return None
        tmp = None
        try:
            tmp = self.scratch()
            for name, arr in arrays.items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            return self.adopt(tmp)
        except OSError as err:
            warnings.warn(f"could not write the {self.name} cache to {self.path} ({err}); continuing without it. "
                          "Set ZS_CACHE to a writable folder (or ZS_CACHE=off).", stacklevel=2)
            return None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def siblings(self, *fields: str) -> list[tuple[Path, dict]]:
        """Complete entries of this name whose key equals this entry's except in ``fields`` (which they lack or hold
        with other values), as ``(folder, key)``: e.g. the same dataset cached from other data (``"data"``), or an
        entry written before a field was part of the key."""
        if self.path is None:
            return []
        mine = {k: v for k, v in self.key.items() if k not in fields}
        out = []
        for meta in sorted(self.path.parent.glob(f"{self.name}-*/meta.json")):
            if meta.parent == self.path:
                continue
            try:
                key = json.loads(meta.read_text()).get("key")
            except (OSError, ValueError):
                continue
            if isinstance(key, dict) and {k: v for k, v in key.items() if k not in fields} == mine:
                out.append((meta.parent, key))
        return out

    def link(self, folder: str | os.PathLike) -> Path | None:
        """Make this entry hold the arrays of the complete entry ``folder`` (hard links: no copy, no extra space;
        the checksums recorded there are kept), under this entry's key; ``None`` when the links cannot be made
        (another disk, a file system without them). The caller has checked that the arrays are this key's."""
        if self.path is None:
            return None
        folder = Path(folder)
        tmp = None
        try:
            meta = json.loads((folder / "meta.json").read_text())
            tmp = self.scratch()
            for name in meta["arrays"]:
                os.link(folder / f"{name}.npy", tmp / f"{name}.npy")
            meta = {"name": self.name, "key": self.key, "arrays": meta["arrays"], "linked_from": folder.name}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            try:
                tmp.rename(self.path)
            except OSError:
                if not self.exists():
                    raise
            return self.path
        except (OSError, ValueError, KeyError):
            return None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def scratch(self) -> Path | None:
        """A new empty folder beside the entry (on the same disk; ``None`` when caching is off), for arrays too
        large to build in memory: write them there as ``<name>.npy`` files (e.g. through
        ``np.lib.format.open_memmap``), then :meth:`adopt` the folder. Raises ``OSError`` if it cannot be made."""
        if self.path is None:
            return None
        tmp = self.path.with_name(f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}")
        tmp.mkdir(parents=True)
        return tmp

    def adopt(self, folder: str | os.PathLike) -> Path:
        """Make the ``.npy`` files of ``folder`` (a :meth:`scratch` folder) this entry: checksum each array,
        write ``meta.json`` and rename the folder into place, so the entry appears complete or not at all.
        If another process saved the same entry first, theirs is kept. The folder is gone afterwards either
        way; an ``OSError`` (disk full, ...) propagates to the caller."""
        folder = Path(folder)
        try:
            meta = {"name": self.name, "key": self.key, "arrays": {}}
            for f in sorted(folder.glob("*.npy")):
                big = f.stat().st_size > 1 << 26  # read large arrays as memory maps to checksum them
                arr = np.load(f, mmap_mode="r" if big else None, allow_pickle=False)
                meta["arrays"][f.stem] = {"shape": list(arr.shape), "dtype": str(arr.dtype), "sha256": _sha256(arr)}
                del arr
            (folder / "meta.json").write_text(json.dumps(meta, indent=1))
            try:
                folder.rename(self.path)
            except OSError:  # another process saved the same entry first: keep theirs
                if not self.exists():
                    raise
            _VERIFIED.add(str(self.path))
            return self.path
        finally:
            shutil.rmtree(folder, ignore_errors=True)
