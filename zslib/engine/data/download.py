"""Resumable, checksum-verified downloads and archive extraction.

Nothing in zslib downloads implicitly: only the ``download()`` class methods of the real datasets
(and :func:`download_url` called by hand) touch the network. A download goes to ``<file>.part`` and
resumes from its size with an HTTP ``Range`` request when re-run; the finished file is checked
against its MD5 or SHA-256 before it is renamed into place.

``$ZS_DATA_MIRROR`` (a base address, ``https://...`` or ``file:///...``) replaces the published folder of
every dataset file: ``download()`` then fetches ``<mirror>/<file name>`` (:func:`mirrored`), checked against
the same published checksum. It serves a local copy of the archives (a lab server, a shared drive mounted
on Colab) and the tests, which stand a local folder in for the network.
"""
from __future__ import annotations

import hashlib
import os
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path

from tqdm.auto import tqdm

from zslib.engine.data.errors import ChecksumError, CorruptFileError, DataError

__all__ = ["file_checksum", "verify_checksum", "download_url", "extract_archive", "mirrored", "DATA_MIRROR_ENV"]

_CHUNK = 1 << 20
DATA_MIRROR_ENV = "ZS_DATA_MIRROR"


def mirrored(url: str) -> str:
    """``url``, or ``$ZS_DATA_MIRROR/<the file name of url>`` when that variable is set."""
    mirror = os.environ.get(DATA_MIRROR_ENV, "").strip()
    if not mirror:
        return url
    name = Path(urllib.parse.urlparse(url).path).name
    return f"{mirror.rstrip('/')}/{name}"


def file_checksum(path: str | os.PathLike, algorithm: str = "md5") -> str:
    """Hex digest of a file (``algorithm`` is any name :func:`hashlib.new` accepts)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def verify_checksum(path: str | os.PathLike, md5: str | None = None, sha256: str | None = None) -> None:
    """Raise :class:`ChecksumError` (naming the file) unless it has the given MD5 / SHA-256."""
    path = Path(path)
    for algorithm, want in (("md5", md5), ("sha256", sha256)):
        if want is None:
            continue
        got = file_checksum(path, algorithm)
        if got.lower() != want.lower():
            raise ChecksumError(
                f"{path} has {algorithm} {got}, expected {want}: the file is incomplete, damaged or a "
                f"different version. Delete {path} and download it again.")


def download_url(url: str, dest: str | os.PathLike, *, md5: str | None = None,
                 sha256: str | None = None, progress: bool = True, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (a file path), resuming a previous partial download.

    * If ``dest`` already exists it is only verified (no network access).
    * Bytes go to ``dest + '.part'``; a re-run asks the server for the rest (``Range`` header) and
      starts over if the server ignores it.
    * When complete the file is verified; on a mismatch it is moved to ``dest + '.corrupt'`` and a
      :class:`ChecksumError` says what to do.
    """
    dest = Path(dest)
    if dest.exists():
        verify_checksum(dest, md5, sha256)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "zslib"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the partial file is already complete
            response = None
        else:
            raise DataError(f"downloading {url} failed with HTTP {e.code} ({e.reason}). Check the "
                            f"address in a browser; you can also download it by hand to {dest}.") from e
    except (urllib.error.URLError, OSError) as e:
        raise DataError(f"cannot reach {url} ({e}). Check your internet connection, or download the "
                        f"file by hand to {dest}; a partial download in {part} is resumed.") from e
    if response is not None:
        with response:
            status = getattr(response, "status", 200)
            if have and status != 206:  # server ignored the range: start over
                have = 0
            length = response.headers.get("Content-Length")
            total = have + int(length) if length is not None else None
            mode = "ab" if have else "wb"
            bar = None
            if progress:
                bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                           desc=dest.name)
            try:
                with open(part, mode) as f:
                    for block in iter(lambda: response.read(_CHUNK), b""):
                        f.write(block)
                        if bar is not None:
                            bar.update(len(block))
            finally:
                if bar is not None:
                    bar.close()
    try:
        verify_checksum(part, md5, sha256)
    except ChecksumError as e:
        bad = dest.with_name(dest.name + ".corrupt")
        part.replace(bad)
        raise ChecksumError(
            f"the download of {url} does not match its checksum ({e}). It was moved to {bad}; "
            f"delete it and run the download again. If it fails twice the server's copy changed: "
            f"get the file elsewhere and place it at {dest}.") from None
    part.replace(dest)
    return dest


def extract_archive(archive: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Unpack a ``.tar``/``.tgz``/``.tar.gz``/``.zip`` archive into ``dest``.

    A truncated or damaged archive raises :class:`CorruptFileError` naming it, never a silently
    partial dataset.
    """
    archive, dest = Path(archive), Path(dest)
    if not archive.is_file():
        raise CorruptFileError(f"archive {archive} does not exist or is not a file")
    dest.mkdir(parents=True, exist_ok=True)
    advice = (f"The archive {archive} is truncated or damaged. Delete it and download it again "
              "(an interrupted download resumes; a finished one is checksum-verified).")
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                bad = z.testzip()
                if bad is not None:
                    raise CorruptFileError(f"{advice} (member {bad} fails its CRC check)")
                z.extractall(dest)
        else:
            with tarfile.open(archive, "r:*") as t:
                if hasattr(tarfile, "data_filter"):
                    t.extractall(dest, filter="data")
                else:  # pragma: no cover - Python < 3.11.4
                    for member in t.getmembers():
                        target = (dest / member.name).resolve()
                        if not str(target).startswith(str(dest.resolve())):
                            raise CorruptFileError(f"{archive} contains an unsafe path {member.name}")
                    t.extractall(dest)
    except CorruptFileError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError) as e:
        raise CorruptFileError(f"{advice} ({type(e).__name__}: {e})") from e
    return dest

