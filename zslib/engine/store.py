"""The result store: finished runs as JSON files with their provenance, found by their config's hash.

A run's result (:class:`Result`: config, final metrics, training history, provenance) is one JSON file
``<results>/<name>-<hash>.json``; a run whose file exists is *loaded, not repeated*. The provenance says
what made the numbers: zslib, torch and Python versions, the git commit, profile, device, thread count,
seed, wall time and date. ``results/recorded/`` holds results committed to the repository on purpose
(runs of the ``real`` and ``full`` profiles made once and shown by the book).

Every file is checked when read (:func:`load_result`): a damaged or foreign file is an error that names
the file and says what to do, never a silently missing run. The store is content-addressed: the config hash
is recomputed from the file's config and must equal the hash the file records and the hash in its name
(:func:`check_key`), so a file whose config was edited, or which was saved under another run's name, is
refused rather than served for that run. A run that collapsed (:mod:`zslib.engine.collapse`) is stored with
``"status": "diverged"`` and the reason, so that tables show it as such (:attr:`Result.diverged`).

The whole record is checked, not only its config. Every file :meth:`Result.save` writes carries
``"content_sha256"``, the SHA-256 of everything else in it (:func:`content_digest`), so an edited metric, history
or provenance, or a deleted ``"status": "diverged"``, is refused with one line naming the file; a file without a
digest is refused too unless a manifest line pins its bytes. The recorded runs (``results/recorded/``, committed,
most of them written before records carried a digest) are listed with the SHA-256 of every file in
``results/recorded/SHA256SUMS`` (:data:`MANIFEST`, the format of ``sha256sum``, so ``git diff`` shows any change and
``sha256sum -c SHA256SUMS`` checks them); a recorded run whose file differs from its line, or has none, is refused,
and so is every shipped recorded run when the manifest is missing. ``python -m zslib record`` rewrites the manifest
(``record --manifest`` does only that).

These digests catch accidents (a damaged or half-written file) and edits by hand; they are not signatures, and
whoever recomputes them after editing a number passes them. What catches that is training the run again:
``python -m zslib verify`` (:func:`zslib.analysis.reproduce.verify_run`).

Each result also records which data it was made from (``provenance["data_identity"]``,
:mod:`zslib.engine.data.identity`): :func:`zslib.engine.runner.run` trains a run again rather than reuse a result
made from other data, and :func:`record_runs` refuses to record one (it hashes every data file again, never the
size-and-time shortcut of everyday loading).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import re
import subprocess
import sysconfig
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from zslib import __version__
from zslib.engine.cache import source_fingerprint
from zslib.engine.config import Config, config_hash
from zslib.engine.data.identity import data_identity, identity_mismatch
from zslib.engine import profile as engine_profile  # repository_root() read when called: a test stands in a pip install
from zslib.engine.profile import resolve_folder
from zslib.engine.train.checkpoint import atomic_write, load_checkpoint
from zslib.engine.train.history import History

__all__ = ["Result", "ResultFileError", "check_key", "hash_in_name",
           "ResultsNotWritableError", "results_dir", "result_path", "load_result",
           "load_results", "check_writable", "code_fingerprint", "stale_code_warning",
           "record_runs", "metric_changes", "recorded_runs", "provenance_summary", "utc_minute", "short_commit",
           "git_commit", "device_name", "cpu_model", "provenance",
           "json_default", "file_slug", "write_json", "recorded_dir", "installed_recorded_dir", "recorded_runs_table",
           "DIGEST_KEY", "MANIFEST", "content_digest", "write_manifest", "manifest_differences", "check_listed",
           "Lookup", "lookup", "checkpoint_config"]


class ResultFileError(ValueError):
    """A result file that cannot be used as one (damaged, foreign, or with invalid values)."""


class ResultsNotWritableError(OSError):
    """The results folder (or its checkpoints) cannot be written: found before any work is done."""


def check_writable(directory: Path) -> None:
    """Make sure results and checkpoints can be written to ``directory`` (create it, write and remove a
    file in it and in ``checkpoints/``), so that a run never trains for nothing."""
    for folder in (directory, directory / "checkpoints"):
        probe = folder / f".write-test-{os.getpid()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError as err:
            raise ResultsNotWritableError(
                f"cannot write results to {folder} ({err.strerror or err}); set ZS_RESULTS to a writable folder "
                "(or pass results_dir=) before training") from None


_FINGERPRINT: list[str] = []


def code_fingerprint() -> str:
    """16 hex digits over zslib's source files as imported in this process: what a stored result depends on
    besides its config. Recorded in every result's provenance and compared when a result is reused."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parents[1]  # the zslib package
        _FINGERPRINT.append(source_fingerprint(*sorted(root.rglob("*.py"))))
    return _FINGERPRINT[0]


def stale_code_warning(results) -> str | None:
    """A warning naming the stored results that were computed by other zslib code than this process runs
    (another code fingerprint), or ``None``. Their numbers may not be what this code would produce."""
    now = code_fingerprint()
    stale = [r for r in results if r.provenance.get("code_fingerprint") not in (None, now)]
    if not stale:
        return None
    names = ", ".join(sorted({r.config.name for r in stale})[:5])
    commits = sorted({str(r.provenance.get("git_commit"))[:12] for r in stale})
    return (f"{len(stale)} stored result(s) were computed by other zslib code than this (e.g. {names}; commit(s) "
            f"{', '.join(commits)}). Their numbers may differ from what this code produces: delete them from the "
            "results folder (or pass force=True) to recompute; a recorded run that no longer reproduces is caught "
            "by tests/test_recorded.py.")

def results_dir(path: str | os.PathLike | None = None) -> Path:
    """The results folder: ``path`` if given, else ``$ZS_RESULTS``, else ``results/`` of the source
    checkout zslib runs from, else ``./results``. Checkpoints go to its ``checkpoints/`` sub-folder."""
    return resolve_folder(path, "ZS_RESULTS", "results", Path.cwd() / "results")


def file_slug(text: str) -> str:
    """``text`` made safe as part of a file name (runs' and analysis records' names)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


_HASH_NAME = re.compile(r"-([0-9a-f]{12})(?:-[A-Za-z0-9_.]+)?\.json$")


def hash_in_name(path: str | os.PathLike, suffix: str = "") -> str | None:
    """The config hash a store file's name carries (``<name>-<hash>.json``, or ``<name>-<hash><suffix>.json`` for an
    analysis record with ``suffix`` = ``"-<analysis>"``); ``None`` for a file named otherwise."""
    name = Path(path).name
    found = re.search(r"-([0-9a-f]{12})" + re.escape(suffix) + r"\.json$", name)
    return found.group(1) if found else None


def check_key(path: str | os.PathLike, config: Config, stored_hash, what_to_do: str, suffix: str = "") -> str:
    """The content-addressed store's check: ``config`` (read from the file at ``path``) must hash to the
    ``stored_hash`` the file records and to the hash in its name. Returns the hash; else :class:`ResultFileError`
    in one line naming the file and ``what_to_do``."""
    h = config_hash(config)
    if stored_hash != h:
        raise ResultFileError(f"{path}: its config hashes to {h}, but the file records config_hash {stored_hash!r}: "
                              f"it was edited or written by other code, so its numbers are not this config's; "
                              + what_to_do)
    named = hash_in_name(path, suffix)
    if named is not None and named != h:
        raise ResultFileError(f"{path}: its config hashes to {h}, but its name says {named}: it is another run's "
                              f"file under this run's name; " + what_to_do)
    return h


def installed_recorded_dir() -> Path:
    """Where a pip install of zslib keeps the recorded runs: ``<prefix>/share/zslib/recorded`` (the
    ``data-files`` of pyproject.toml, copied from ``results/recorded/`` when the wheel is built)."""
    return Path(sysconfig.get_path("data")) / "share" / "zslib" / "recorded"


def recorded_dir(directory: str | os.PathLike | None = None) -> Path:
    """The folder of the recorded runs: ``<results>/recorded`` when it exists or zslib runs from a checkout (whose
    own ``results/recorded/`` is the truth), else the copy installed with zslib (:func:`installed_recorded_dir`;
    e.g. on Colab), else ``<results>/recorded`` (empty)."""
    own = results_dir(directory) / "recorded"
    if own.is_dir() or engine_profile.repository_root() is not None:
        return own
    installed = installed_recorded_dir()
    return installed if installed.is_dir() else own


def result_path(config: Config, directory: Path) -> Path:
    """Where the result of ``config`` is stored: in ``directory``, else among its recorded runs
    (:func:`recorded_dir`), else where it will be written (in ``directory``)."""
    h = config_hash(config)
    found = sorted(directory.glob(f"*-{h}.json")) or sorted(recorded_dir(directory).glob(f"*-{h}.json"))
    return found[0] if found else directory / f"{file_slug(config.name)}-{h}.json"


# ----------------------------------------------------------------------------------------------------
# Provenance


def git_commit() -> str | None:
    """The commit of the checkout zslib runs from, or ``None`` (not a checkout, no git, any failure)."""
    root = engine_profile.repository_root()
    if root is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except Exception:
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        try:
            return f"cuda ({torch.cuda.get_device_name(device)})"
        except Exception:
            return "cuda"
    return f"{device.type} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`); ``""`` when unknown.
    Recorded because another CPU sums in another order: the last bits of a run, and through one k-means
    start its NMI, can differ there (:mod:`zslib.analysis.reproduce`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def provenance(config: Config, device: torch.device, **extra) -> dict:
    """What made a result: versions, commit, profile, device, threads, seed, date, plus ``extra``."""
    return {
        "complete": True,
        "zslib_version": __version__,
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "profile": config.profile,
        "device": device_name(device),
        "cpu": cpu_model(),
        "torch_threads": torch.get_num_threads(),  # CPU float sums, hence bitwise results, depend on it
        # and on the OpenMP threads the process started with (oneDNN chooses its kernels by them)
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "seed": config.seed,
        "code_fingerprint": code_fingerprint(),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


# ----------------------------------------------------------------------------------------------------
# Results


@dataclass
class Result:
    """A finished run: its config, final metrics per split, the training history and its provenance.

    ``metrics`` maps a split to its metrics: ``"unseen"`` (the test classes, the full
    :func:`zslib.engine.evaluate.evaluate` row), ``"seen"`` (Recall@K on the training classes at the end) and
    ``"val"`` when a validation split was held out.
    """

    config: Config
    metrics: dict[str, dict[str, float]]
    history: History
    provenance: dict
    path: Path | None = None
    #: why the run collapsed (:func:`zslib.engine.collapse.collapse_reason`), or ``None`` for a healthy run;
    #: stored as ``"status": "diverged"`` with ``"diverged_reason"`` (a healthy run's file has neither key)
    diverged: str | None = None

    def metric(self, name: str = "R@1", split: str = "unseen") -> float:
        if split not in self.metrics:
            raise KeyError(f"this result has no split {split!r}; it has {sorted(self.metrics)}")
        if name not in self.metrics[split]:
            raise KeyError(f"split {split!r} has no metric {name!r}; it has {sorted(self.metrics[split])}")
        return float(self.metrics[split][name])

    @property
    def checkpoint(self) -> Path | None:
        ck = self.provenance.get("checkpoint")
        if ck is None or self.path is None:
            return None
        return (self.path.parent / ck).resolve()

    @property
    def status(self) -> str:
        """``"diverged"`` for a collapsed run (see :attr:`diverged`), else ``"ok"``."""
        return "diverged" if self.diverged else "ok"

    def to_dict(self) -> dict:
        d = {"format": "zslib-result", "config": self.config.as_dict(), "config_hash": config_hash(self.config),
             "metrics": self.metrics, "history": self.history.to_dict(), "provenance": self.provenance}
        if self.diverged:
            d.update(status="diverged", diverged_reason=str(self.diverged))
        return d

    def save(self, path: str | os.PathLike) -> Path:
        """Write the result atomically and durably (temporary file, flushed to disk, renamed), with its
        :func:`content_digest`."""
        d = json.loads(json.dumps(self.to_dict(), default=json_default))  # as it will be read back
        d[DIGEST_KEY] = content_digest(d)
        self.path = write_json(path, d)
        return self.path

    def __repr__(self):
        m = self.metrics.get("unseen", {})
        head = ", ".join(f"{k}={v:.4f}" for k, v in list(m.items())[:4])
        return f"Result({self.config.name!r}, {'DIVERGED, ' if self.diverged else ''}unseen: {head})"


def write_json(path: str | os.PathLike, data) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically and durably (a temporary file beside it, flushed
    to disk, renamed over it), creating the folder; a crash leaves the old file or none, never half of one."""
    text = json.dumps(data, indent=1, default=json_default)
    return atomic_write(path, lambda f: f.write(text), "w")


def json_default(obj):
    """``json.dumps``'s ``default`` for result and record files: NumPy scalars, paths and tensors."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if torch.is_tensor(obj):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


_WHAT_TO_DO = "delete it (the run is trained again), or restore it from version control if it was recorded"

#: The key of a record's digest of its own contents (:func:`content_digest`).
DIGEST_KEY = "content_sha256"
#: The manifest of the recorded runs: one ``<sha256>  <path>`` line per file under ``results/recorded/``.
MANIFEST = "SHA256SUMS"


def content_digest(record: Mapping) -> str:
    """The SHA-256 of a record (as read from its JSON file) without its :data:`DIGEST_KEY`: keys sorted, compact."""
    body = {k: v for k, v in record.items() if k != DIGEST_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _check_digest(d: Mapping, path, pinned: bool) -> None:
    """The record's :data:`DIGEST_KEY` must match its contents (its provenance's data identity among them). Every
    file this zslib writes carries a digest; a file without one is served only where ``pinned`` (its bytes listed in
    a recorded folder's :data:`MANIFEST`: a recorded run written before records carried digests). Anywhere else it
    was written by older code or edited (the digest deleted, e.g. with the identity, to pass an edited metric as an
    old record)."""
    stored = d.get(DIGEST_KEY)
    if stored is None and not pinned:
        raise ResultFileError(f"{path} has no '{DIGEST_KEY}': every result this zslib writes carries one, so it was "
                              f"edited (the digest deleted) or written by zslib before results carried one; "
                              + _WHAT_TO_DO)
    if stored is not None and stored != content_digest(d):
        raise ResultFileError(f"{path}: its contents do not match the digest it was written with (a metric, the "
                              f"status, the history or the provenance was changed after the run wrote it); "
                              + _WHAT_TO_DO)


_MANIFESTS: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}  # manifest path -> (stat, {name: sha256})


def _manifest_entries(manifest: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of a manifest file (read once per change of the file)."""
    st = manifest.stat()
    cached = _MANIFESTS.get(str(manifest))
    if cached is not None and cached[0] == (st.st_mtime_ns, st.st_size):
        return cached[1]
    entries = {}
    for line in manifest.read_text().splitlines():
        digest, sep, name = line.partition("  ")
        if sep and len(digest) == 64:
            entries[name] = digest
    _MANIFESTS[str(manifest)] = ((st.st_mtime_ns, st.st_size), entries)
    return entries


def _shipped_recorded(folder: Path) -> bool:
    """Whether ``folder`` holds the recorded runs shipped with zslib (the checkout's ``results/recorded/`` or the
    installed copy), whose :data:`MANIFEST` must be there."""
    root = engine_profile.repository_root()
    shipped = [installed_recorded_dir()] + ([root / "results" / "recorded"] if root is not None else [])
    try:
        return any(folder.resolve() == s.resolve() for s in shipped)
    except OSError:
        return False


def _check_manifest(path: Path, data: bytes) -> bool:
    """A file in a folder with a :data:`MANIFEST` (the recorded runs) must be listed there with the SHA-256 of its
    bytes: a changed file, and a file not listed (its line deleted), are refused; so is any file of the shipped
    recorded runs when their manifest is missing. Returns whether the file is pinned by a manifest line."""
    manifest = path.parent / MANIFEST
    if not manifest.is_file():
        if _shipped_recorded(path.parent):
            raise ResultFileError(f"{path} is not checked: {manifest} is missing; restore it from version control "
                                  "(or, if the recorded runs are meant as they are, run `python -m zslib record "
                                  "--manifest` and commit it)")
        return False
    want = _manifest_entries(manifest).get(path.name)
    if want is None:
        raise ResultFileError(f"{path} is not listed in {manifest}, so it cannot be checked; restore the line from "
                              "version control, or if the file is meant to be recorded run `python -m zslib record "
                              "--manifest` and commit both")
    if want != hashlib.sha256(data).hexdigest():
        raise ResultFileError(f"{path} differs from the SHA-256 that {manifest} lists for it (it was changed after it "
                              "was recorded); restore it from version control, or if the change is meant run "
                              "`python -m zslib record --manifest` and commit both")
    return True


def check_listed(path: Path, data: bytes, folder: Path) -> None:
    """A file under ``folder`` (the recorded runs, e.g. its kept weights in ``weights/``) that must be listed in the
    folder's :data:`MANIFEST` with the SHA-256 of ``data`` (its bytes): else :class:`ResultFileError` in one line.
    Stricter than the check of result files, which carry their own digest: an unlisted file is refused too."""
    manifest = folder / MANIFEST
    rel = Path(path).resolve().relative_to(folder.resolve()).as_posix()
    if not manifest.is_file():
        raise ResultFileError(f"{path} is not checked: {manifest} is missing; run `python -m zslib record --manifest`")
    want = _manifest_entries(manifest).get(rel)
    if want is None:
        raise ResultFileError(f"{path} is not listed in {manifest}, so it cannot be checked; if it is meant to be "
                              "there run `python -m zslib record --manifest` and commit both")
    if want != hashlib.sha256(data).hexdigest():
        raise ResultFileError(f"{path} differs from the SHA-256 that {manifest} lists for it (it was changed after it "
                              "was recorded); restore it from version control, or if the change is meant run "
                              "`python -m zslib record --manifest` and commit both")


def _manifest_lines(folder: Path) -> list[str]:
    lines = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = f.relative_to(folder).as_posix()
        if rel == MANIFEST or any(part.startswith(".") for part in f.relative_to(folder).parts):
            continue
        lines.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {rel}")
    return lines


def write_manifest(directory: str | os.PathLike | None = None) -> Path:
    """Write the :data:`MANIFEST` of the recorded runs (``<results>/recorded/``): every file under it (analysis
    records, kept weights and campaign files included) with its SHA-256, sorted by path. Returns its path."""
    folder = results_dir(directory) / "recorded"
    text = "".join(line + "\n" for line in _manifest_lines(folder))
    return atomic_write(folder / MANIFEST, lambda f: f.write(text), "w")


def manifest_differences(directory: str | os.PathLike | None = None) -> list[str]:
    """What differs between the recorded runs and their :data:`MANIFEST`, one line per file (empty when they
    match): files changed, added or missing since ``python -m zslib record --manifest`` last wrote it."""
    folder = results_dir(directory) / "recorded"
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return [f"{manifest} is missing; run `python -m zslib record --manifest`"]
    want = _manifest_entries(manifest)
    have = dict(reversed(line.split("  ", 1)) for line in _manifest_lines(folder))
    out = [f"changed: {n}" for n in sorted(set(want) & set(have)) if want[n] != have[n]]
    out += [f"not in the manifest: {n}" for n in sorted(set(have) - set(want))]
    out += [f"listed but missing: {n}" for n in sorted(set(want) - set(have))]
    return out


def _check_metrics(metrics, path) -> dict:
    if not isinstance(metrics, Mapping) or not metrics:
        raise ResultFileError(f"{path}: 'metrics' must be a non-empty object of splits, got {type(metrics).__name__}; "
                              + _WHAT_TO_DO)
    for split, row in metrics.items():
        if not isinstance(row, Mapping):
            raise ResultFileError(f"{path}: metrics of split {split!r} must be an object, got {type(row).__name__}; "
                                  + _WHAT_TO_DO)
        for name, value in row.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ResultFileError(f"{path}: metric {split}/{name} is {value!r}, not a finite number; " + _WHAT_TO_DO)
    return {str(s): {str(k): float(v) for k, v in row.items()} for s, row in metrics.items()}


def _check_history(h: Mapping, path) -> History:
    for key in ("losses", "evals"):
        rows = h.get(key, [])
        if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
            raise ResultFileError(f"{path}: history/{key} must be a list of objects (one per step), got "
                                  f"{type(rows).__name__}; " + _WHAT_TO_DO)
    for key in ("elapsed", "data_seconds"):
        value = h.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ResultFileError(f"{path}: history/{key} must be a number of seconds, got {value!r}; " + _WHAT_TO_DO)
    return History.from_dict(h)


def load_result(path: str | os.PathLike) -> Result:
    """Read and check a result JSON written by :func:`zslib.engine.runner.run`. A file that is not valid JSON, not a
    zslib result, or holds invalid values raises :class:`ResultFileError` naming it and what to do."""
    path = Path(path)
    what_to_do = _WHAT_TO_DO
    try:
        data = path.read_bytes()
        d = json.loads(data)
    except FileNotFoundError:
        raise FileNotFoundError(f"no result file at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultFileError(f"{path} is not valid JSON ({e}); {what_to_do}") from e
    if not isinstance(d, Mapping) or d.get("format") != "zslib-result":
        raise ResultFileError(f"{path} is not a zslib result file (no 'format': 'zslib-result'); {what_to_do}")
    for key, kind in (("config", Mapping), ("history", Mapping), ("provenance", Mapping)):
        if not isinstance(d.get(key), kind):
            raise ResultFileError(f"{path}: '{key}' is missing or not an object; {what_to_do}")
    try:
        config = Config.from_dict(d["config"])
    except (TypeError, ValueError) as e:
        raise ResultFileError(f"{path}: its config is not valid for this zslib ({e}); {what_to_do}") from e
    check_key(path, config, d.get("config_hash"), what_to_do)
    metrics = _check_metrics(d.get("metrics"), path)
    if d["provenance"].get("complete") is not True:
        raise ResultFileError(f"{path} records an incomplete run; {what_to_do}")
    status = d.get("status", "ok")
    if status not in ("ok", "diverged") or (status == "diverged") != isinstance(d.get("diverged_reason"), str):
        raise ResultFileError(f"{path}: 'status' must be 'ok' or 'diverged' (with a 'diverged_reason'), got "
                              f"{status!r}; {what_to_do}")
    history = _check_history(d["history"], path)
    pinned = _check_manifest(path, data)  # the whole record: a valid file may still have been edited
    _check_digest(d, path, pinned)
    return Result(config, metrics, history, dict(d["provenance"]), path,
                  d.get("diverged_reason") if status == "diverged" else None)


def load_results(directory: str | os.PathLike | None = None, **match) -> list[Result]:
    """Every stored run in ``directory`` and its ``recorded/`` sub-folder whose config matches ``match`` (e.g.
    ``loss="triplet"``), each run once. A run is its config hash: a file whose name does not carry the hash it
    holds (a copy saved as ``myrun.json``) is named in a warning and skipped, and of two files of one run the one
    in ``directory`` is kept (as :func:`zslib.engine.runner.run` reuses it), with a warning when their metrics
    differ. A file that cannot be read is an error, not a silently missing run."""
    seen: dict[str, Result] = {}
    out = []
    root = results_dir(directory)
    for p in sorted(root.glob("*.json")) + sorted(recorded_dir(root).glob("*.json")):
        r = load_result(p)
        h = config_hash(r.config)
        if hash_in_name(p) != h:
            warnings.warn(f"{p} is not named by its config hash ({h}), so it is not counted as run {r.config.name}: "
                          f"rename it {file_slug(r.config.name)}-{h}.json, or delete the copy", stacklevel=2)
            continue
        if h in seen:
            kept = seen[h]
            if kept.metrics != r.metrics or kept.diverged != r.diverged:
                warnings.warn(f"{p} and {kept.path} are both run {r.config.name} ({h}) with other numbers; "
                              f"{kept.path} is counted (delete the one that is wrong)", stacklevel=2)
            continue
        seen[h] = r
        if all(getattr(r.config, k) == v for k, v in match.items()):
            out.append(r)
    return out


def record_runs(profile: str, directory: str | os.PathLike | None = None, dry_run: bool = False,
                replace: bool = False) -> list[Path]:
    """Copy the complete results of ``profile`` from ``directory`` into ``directory/recorded`` (the folder
    committed to the repository), unless a run is recorded already; returns the recorded paths. The copy
    keeps the provenance and drops the checkpoint reference (checkpoints are not committed).

    ``replace``: a run recorded already (the same file name, so the same config) is rewritten by a newer run of
    it, e.g. one trained again to measure a metric the record lacks. Its provenance keeps what it replaced
    (``replaced``: the old timestamp and commit, and :func:`metric_changes`, every metric the old record had
    against the new value; nested, when the old record had replaced one in turn), so that a replacement that no
    longer reproduces is visible, not hidden, and the first date a config was trained is kept."""
    root = results_dir(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder at {root}; pass the folder that holds the finished runs "
                                "(--results-dir, default $ZS_RESULTS or results/)")
    recorded = root / "recorded"
    have = {p.name for p in recorded.glob("*.json")}
    # every file is checked (its config against its recorded hash and its name) before anything is copied: a
    # mismatching file is refused, never rewritten with a fresh config_hash that would hide the mismatch
    todo = [(path, load_result(path)) for path in sorted(root.glob("*.json"))]
    out, fresh = [], {}
    for path, result in todo:
        if result.config.profile != profile or (path.name in have and not replace):
            continue
        _check_same_data(path, result, fresh)
        target = recorded / path.name
        old = load_result(target) if path.name in have else None
        if old is not None and old.provenance.get("timestamp", "") >= result.provenance.get("timestamp", ""):
            continue  # the record is this run, or newer than it
        out.append(target)
        if not dry_run:
            provenance = {k: v for k, v in result.provenance.items() if k != "checkpoint"}
            provenance["recorded_from"] = str(path.name)
            if old is not None:
                provenance["replaced"] = {"timestamp": old.provenance.get("timestamp"),
                                          "git_commit": old.provenance.get("git_commit"),
                                          "metric_changes": metric_changes(old, result)}
                if isinstance(old.provenance.get("replaced"), dict):  # what the old record replaced, in turn
                    provenance["replaced"]["replaced"] = old.provenance["replaced"]
            Result(result.config, result.metrics, result.history, provenance, diverged=result.diverged).save(target)
    if out and not dry_run:
        write_manifest(root)  # a recorded file is served only when its manifest lists it
    return out


def _check_same_data(path: Path, result: Result, fresh: dict) -> None:
    """Refuse to record a run unless its data identity holds when computed again from the contents of the dataset
    on disk now (``$ZS_DATA``; every file read, never the size-and-time shortcut of
    :func:`zslib.engine.data.identity.folder_identity`): a run made from other data (a subset, a fabricated tree,
    photographs rewritten in place), a run whose provenance records no identity, and a run whose dataset is not on
    disk here, where it cannot be checked. ``fresh``: the identities hashed so far in this call, by dataset."""
    stored = result.provenance.get("data_identity")
    if not stored:
        raise ResultFileError(f"{path} records no data identity, so the data it was made from cannot be checked: not "
                              "recorded; train it again with this zslib")
    c = result.config
    which = (c.dataset, c.image_size, c.synth_images_per_class)  # what data_identity reads of a config
    if which not in fresh:
        fresh[which] = data_identity(c, fresh=True)
    current = fresh[which]
    if current is None:
        raise ResultFileError(f"{path}: its dataset ({result.config.dataset}) is not on disk here, so its data "
                              "identity cannot be checked: not recorded; point ZS_DATA at the data it was trained on")
    other = identity_mismatch(f"{path}", stored, current)
    if other:
        raise ResultFileError(f"{other}: not recorded; train it again on this data, or point ZS_DATA at the data it "
                              "was trained on")


def metric_changes(old: Result, new: Result) -> dict[str, float]:
    """``{"split metric": new - old}`` for every metric ``old`` has (``nan`` where ``new`` lacks it)."""
    return {f"{split} {name}": float(new.metrics.get(split, {}).get(name, float("nan")) - value)
            for split, row in old.metrics.items() for name, value in row.items()}


# ----------------------------------------------------------------------------------------------------
# Reuse and resume: may a stored result (or checkpoint) stand for this config on this data?


@dataclass(frozen=True)
class Lookup:
    """The store's one answer for a config (:func:`lookup`): ``result``, the stored result that stands for it (else
    ``None``: the run is trained); ``path``, that result's file or the file a run trained now writes (always in
    ``directory``, never over a recorded run); ``checkpoint``, ``<directory>/checkpoints/<path stem>.pt``, and
    ``resume``, whether it is continued (else a checkpoint there is deleted before training by
    :meth:`discard_checkpoint`, with ``checkpoint_note`` saying why, or silently under ``force``); ``identity``,
    the identity of the data on disk now (:mod:`zslib.engine.data.identity`), which a new result and checkpoint
    record; ``reason``, the answer in words."""

    path: Path
    checkpoint: Path
    directory: Path
    identity: str | None
    result: Result | None
    resume: bool
    reason: str
    checkpoint_note: str | None = None

    def discard_checkpoint(self) -> None:
        """Delete a checkpoint that is not to be resumed (warning why, unless the run was forced); called by the
        process that writes (:func:`zslib.engine.runner.run`: process 0)."""
        if self.resume or not self.checkpoint.exists():
            return
        self.checkpoint.unlink()
        if self.checkpoint_note:
            warnings.warn(f"{self.checkpoint_note}: not resumed, the run starts over from step 0", stacklevel=3)


def lookup(config: Config, directory: str | os.PathLike | None = None, force: bool = False) -> Lookup:
    """May a stored result, or else a checkpoint, stand for ``config`` on the data on disk now? Asked once per call
    of :func:`zslib.engine.runner.run`; every check of the store answers here:

    * the result stored under the config's hash (in ``directory``, else among the recorded runs; the file, its
      name, digest and manifest line checked by :func:`load_result`) is **reused**, unless ``force``, or unless it
      was made from other data than the data on disk now (its provenance's data identity): then the run is trained
      again, with one warning, into ``directory`` (never over a recorded run), from step 0. A result reused from
      ``directory`` that other zslib code made is reused with a warning (:func:`stale_code_warning`);
    * a run to train **resumes** its checkpoint when it belongs to this config (:func:`checkpoint_config`; another
      run's checkpoint under this run's name is refused), this code and this data; otherwise the checkpoint is to be
      deleted (:meth:`Lookup.discard_checkpoint`).

    ``force``: every data file is hashed again (:func:`zslib.engine.data.identity.data_identity` with ``fresh``), no
    stored result is reused and no checkpoint resumed."""
    directory = results_dir(directory)
    identity = data_identity(config, fresh=force)
    path = result_path(config, directory)
    if force:
        reason = "forced: trained again"
    elif not path.exists():
        reason = "no stored result: trained"
    else:
        stored = load_result(path)
        other = identity_mismatch(f"the stored result {path}", stored.provenance.get("data_identity"), identity)
        if other is None:
            stale = stale_code_warning([stored]) if path.parent == directory else None
            if stale:
                warnings.warn(stale, stacklevel=3)
            return Lookup(path, directory / "checkpoints" / f"{path.stem}.pt", directory, identity, stored, False,
                          f"reused: {path}")
        warnings.warn(f"{other}: not reused, the run is trained again", stacklevel=3)
        reason, force = f"{other}: trained again from step 0", True
    if path.parent != directory:  # a run trained again never writes over a recorded run
        path = directory / f"{file_slug(config.name)}-{config_hash(config)}.json"
    checkpoint = directory / "checkpoints" / f"{path.stem}.pt"
    if force or not checkpoint.exists():
        return Lookup(path, checkpoint, directory, identity, None, False, reason)
    note = _stale_checkpoint(checkpoint, config, identity)
    return Lookup(path, checkpoint, directory, identity, None, note is None,
                  reason if note else f"resumed from {checkpoint}", note)


def _stale_checkpoint(path: Path, config: Config, identity: str | None) -> str | None:
    """Why the checkpoint at ``path`` must not be resumed (written by other zslib code, whose half-trained state this
    code would finish and store under its own fingerprint, or trained on other data than ``identity``), or
    ``None``; another run's checkpoint under this run's name is refused (:func:`checkpoint_config`)."""
    state = load_checkpoint(path, map_location="cpu")
    checkpoint_config(path, state, config)
    meta = state.get("meta") or {}
    other = identity_mismatch(f"the checkpoint {path}", meta.get("data_identity"), identity)
    if other:
        return other
    written_by = meta.get("code_fingerprint")
    if written_by != code_fingerprint():
        return (f"the checkpoint {path} was written by other zslib code (code fingerprint {written_by}, this code "
                f"{code_fingerprint()})")
    return None


def checkpoint_config(path, state: dict, config: Config | None = None) -> Config:
    """The config a training checkpoint (``state``, read from ``path``) was written for, checked as the result
    store checks its files: its config must hash to the hash in the checkpoint's name and, when ``config`` is
    given, be that config (same :func:`~zslib.engine.config.config_hash`); else :class:`ResultFileError` in one
    line saying which run the checkpoint belongs to."""
    meta = state.get("meta") or {}
    if "config" not in meta:
        if config is None:
            raise ValueError(f"{path} does not record its config (it was not written by zslib.engine.runner.run); "
                             "pass config=")
        raise ResultFileError(f"{path} does not record its config, so it cannot be checked to belong to run "
                              f"{config.name} ({config_hash(config)}); train the run again (--force)")
    try:
        own = Config.from_dict(meta["config"])
    except (TypeError, ValueError) as e:
        raise ResultFileError(f"{path}: its config is not valid for this zslib ({e}); train the run again") from None
    h = config_hash(own)
    named = hash_in_name(Path(path).with_suffix(".json"))
    if named is not None and named != h:
        raise ResultFileError(f"{path}: the checkpoint holds run {own.name} ({h}), not the run its name says "
                              f"({named}); delete it (the run is trained again)")
    if config is not None and config_hash(config) != h:
        raise ResultFileError(f"{path} is the checkpoint of run {own.name} ({h}), not of {config.name} "
                              f"({config_hash(config)}); delete it, or train the run again (--force)")
    return own


# ----------------------------------------------------------------------------------------------------
# The recorded runs, as the book's "Recorded runs" page lists them


def recorded_runs(directory: str | os.PathLike | None = None) -> list[Result]:
    """The runs committed under ``<results>/recorded/`` (only those: not the runs this checkout made), in
    file-name order; each file is checked by :func:`load_result`."""
    return [load_result(p) for p in sorted(recorded_dir(directory).glob("*.json"))]


def utc_minute(timestamp) -> str | None:
    """A provenance timestamp (ISO 8601) as ``YYYY-MM-DD HH:MM UTC``; the text itself if it is not ISO 8601,
    ``None`` if empty."""
    if not timestamp:
        return None
    try:
        return _dt.datetime.fromisoformat(timestamp).astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError):
        return str(timestamp)


def short_commit(commit) -> str | None:
    """The first 12 hex digits of a provenance's commit; ``None`` where it has none."""
    return commit[:12] if isinstance(commit, str) else None


def provenance_summary(result: Result) -> dict:
    """What made ``result``, one value per field: its file name; the run's name, profile, dataset,
    backbone, method, loss and seed (from its config); the device, commit (12 hex digits), date (UTC, to
    the minute), wall time in seconds, zslib and torch versions (from its provenance; ``None`` where the
    file does not say)."""
    c, p = result.config, result.provenance
    commit, wall = p.get("git_commit"), p.get("wall_seconds")
    return {"file": result.path.name if result.path is not None else None, "run": c.name,
            "profile": c.profile, "dataset": c.dataset, "backbone": c.backbone, "method": c.method,
            "loss": c.loss, "seed": c.seed, "device": p.get("device"),
            "commit": short_commit(commit), "date": utc_minute(p.get("timestamp")),
            "wall seconds": round(float(wall), 1) if isinstance(wall, (int, float)) else None,
            "zslib": p.get("zslib_version"), "torch": p.get("torch_version")}


#: The metrics of the unseen classes that the table of every recorded run shows beside its provenance.
TABLE_METRICS = ("R@1", "MAP@R", "NMI")


def recorded_runs_table(runs: list[Result] | None = None):
    """One row per recorded run (``runs``, default :func:`recorded_runs`): its :func:`provenance_summary`, the
    method's parameters as text, whether it held out validation classes, and its unseen-class metrics
    :data:`TABLE_METRICS` in %. A ``pandas.DataFrame`` for a searchable table (the "Recorded runs" page)."""
    runs = recorded_runs() if runs is None else runs
    rows = []
    for r in runs:
        row = provenance_summary(r)
        params = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in sorted(r.config.method_params.items()))
        row["params"] = params if len(params) <= 70 else params[:69] + "\u2026"  # the file holds them all
        row["val. split"] = r.config.validation_fraction or 0.0
        for m in TABLE_METRICS:  # a validation run's unseen metrics (stored by older code) are not shown
            value = None if r.config.validation_fraction else r.metrics.get("unseen", {}).get(m)
            row[f"unseen {m} %"] = round(100 * value, 2) if value is not None else None
        rows.append(row)
    order = ["run", "profile", "method", "loss", "seed", *[f"unseen {m} %" for m in TABLE_METRICS], "params",
             "val. split", "dataset", "backbone", "device", "commit", "date", "wall seconds", "zslib", "torch", "file"]
    return pd.DataFrame(rows, columns=order)
