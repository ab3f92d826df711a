"""Random state and checkpoints: what an exact resume needs, written so that a disconnect never corrupts it.

A checkpoint holds the model, the method (its own networks, class proxies and extra state), every
phase's optimizer, scheduler and gradient scaler, the sampler position, every random state (Python,
NumPy, torch CPU and CUDA), the step and the history. It is written to a temporary file in the same
folder, flushed to disk and renamed over the old one (``os.replace``), so a killed process leaves either
the previous checkpoint or the new one, never half of one. It is read with ``weights_only=True`` (no
pickled code runs on loading); NumPy values are stored as tensors for that reason (:func:`to_safe`). It is read
into host memory, whichever device wrote it and whichever resumes it: a run saved on a GPU resumes on the CPU, and a
run saved on the CPU (or on a GPU) resumes on a GPU, its random states restored as the CPU tensors they are.
"""
from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

__all__ = ["CHECKPOINT_VERSION", "set_seed", "rng_state", "set_rng_state", "preserved_rng", "to_safe",
           "from_safe", "save_checkpoint", "load_checkpoint"]

#: 2: one optimizer, scheduler and scaler per phase of the method (zslib.methods); 1 had one of each.
CHECKPOINT_VERSION = 2


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(cuda: bool = True) -> dict:
    """Every global random state, in a form :func:`save_checkpoint` can store."""
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]),
        "torch": torch.get_rng_state(),
    }
    if cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the states of :func:`rng_state`. Each is read as a CPU tensor, wherever it was loaded (the
    generators' states are bytes in host memory, CUDA's included: :func:`torch.cuda.set_rng_state_all` takes them
    so); the CUDA states are skipped where there is no GPU."""
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), *rest))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


class preserved_rng:
    """Context manager: whatever runs inside leaves the global random states as it found them
    (Python, NumPy, torch CPU, and CUDA unless ``cuda=False``)."""

    def __init__(self, cuda: bool = True):
        self.cuda = cuda

    def __enter__(self):
        self.state = rng_state(self.cuda)

    def __exit__(self, *exc):
        set_rng_state(self.state)
        return False


def to_safe(obj):
    """Recursively replace NumPy arrays and scalars so ``torch.load(weights_only=True)`` can read it."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj)).clone(), "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_safe(v) for v in obj)
    return obj


def from_safe(obj):
    """The inverse of :func:`to_safe`."""
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__", "dtype"}:
            return obj["__ndarray__"].numpy().astype(obj["dtype"])
        return {k: from_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_safe(v) for v in obj)
    return obj


def atomic_write(path: str | os.PathLike, write, mode: str = "wb") -> Path:
    """Call ``write(f)`` on a temporary file beside ``path`` (opened with ``mode``), flush it to disk and rename it
    over ``path``, creating the folder: a crash leaves the old file or none, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode) as f:
            try:
                write(f)
            except RuntimeError as e:  # torch.save on a full disk: "[enforce fail at inline_container.cc:...]"
                if "inline_container" not in str(e) and "write failed" not in str(e):
                    raise
                raise _write_failed(path, e, _size(tmp)) from None
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) and not getattr(e, "zslib_message", False):
            raise _write_failed(path, e, _size(tmp)) from None
        raise
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``, ``RLIMIT_FSIZE``), in bytes; ``None``: unlimited."""
    try:
        import resource  # Unix only

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _write_failed(path: Path, err: Exception, written: int | None = None) -> OSError:
    """One line for a write that failed for lack of space: which file, how much room is left, what to do. A write
    stopped by the process's file-size limit (``ulimit -f``) says so instead: the disk may have plenty of room."""
    limit = _file_size_limit()
    if getattr(err, "errno", None) == errno.EFBIG or (limit is not None and (written or 0) >= limit):
        shown = f"at most {limit:,} bytes" if limit is not None else "only files below a size limit"
        out = OSError(errno.EFBIG, f"could not write {path}: this process may write {shown} (the file-size limit, "
                                   f"ulimit -f; not a full disk); raise it (ulimit -f unlimited) "
                                   "and run again (a run resumes from its last complete checkpoint)")
        out.zslib_message = True
        return out

    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:.0f} MB free there"
    except OSError:
        free = "free space unknown"
    out = OSError(errno.ENOSPC, f"could not write {path}: the disk is full or the write failed ({free}; "
                                f"{type(err).__name__}); free some space or set ZS_RESULTS to a folder on another "
                                "disk, then run again (a run resumes from its last complete checkpoint)")
    out.zslib_message = True
    return out


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` atomically (:func:`atomic_write`): a temporary file in the same folder, flushed to disk,
    then ``os.replace``."""
    atomic_write(path, lambda f: torch.save(state, f))


def _unreadable(err: Exception) -> str:
    """Why torch could not read a file, without torch's advice to load it with ``weights_only=False`` (which would
    run whatever code a damaged or foreign file holds: never the remedy for a checkpoint zslib wrote)."""
    text = str(err)
    if "weights_only" in text:
        detail = text.split("WeightsUnpickler error:", 1)[-1].strip().split("\n")[0].strip() if (
            "WeightsUnpickler error:" in text) else ""
        return ("its contents are not the tensors and plain values a zslib checkpoint holds"
                + (f": {detail}" if detail else ""))
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def load_checkpoint(path: str | os.PathLike, map_location="cpu") -> dict:
    """Read a checkpoint written by :func:`zslib.engine.train.train` (safely: ``weights_only=True``), by default
    into host memory whatever device wrote it: the trainer copies the model's and optimizers' tensors to its device
    itself, and the random states must stay CPU tensors (:func:`set_rng_state`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise RuntimeError(f"could not read checkpoint {path} ({_unreadable(e)}); it is damaged or not "
                           "a zslib checkpoint -- delete it to start the run afresh") from None
    if not isinstance(state, dict) or state.get("format") != "zslib-checkpoint":
        raise RuntimeError(f"{path} is not a zslib training checkpoint")
    if state.get("version") != CHECKPOINT_VERSION:
        raise RuntimeError(f"{path} was written by another version of zslib's trainer (checkpoint format "
                           f"{state.get('version')}, this one reads {CHECKPOINT_VERSION}); delete it to train the "
                           "run afresh")
    return state
