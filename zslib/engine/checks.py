"""Input checks shared by every module that takes feature matrices and class labels.

Losses, regularizers, evaluation, the theory estimators and the probes all receive the same two kinds
of input: an ``(n, d)`` matrix of feature vectors (one row per sample) and ``n`` integer class ids. The
checks live here once, so a bad input gets the same clear message wherever it enters: what was wrong,
and what to do about it.

* :func:`features` -- a torch tensor, autograd kept (for losses and regularizers);
* :func:`feature_array` -- a float64 NumPy array (for the estimators that run in NumPy);
* :func:`class_ids` / :func:`class_id_array` -- labels as an int64 torch tensor / NumPy array;
* :func:`same_dimension`, :func:`finite_number` -- small checks that several modules repeat.
"""
from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["features", "feature_array", "class_ids", "class_id_array", "same_dimension", "finite_number"]


def _first_bad_row(finite_rows) -> int:
    return int(np.flatnonzero(~np.asarray(finite_rows))[0])


def features(x, name: str = "x", *, min_rows: int = 1, float32: bool = False, detach: bool = False,
             ) -> torch.Tensor:
    """``x`` as an ``(n, d)`` floating tensor with finite values and ``n >= min_rows``.

    A torch tensor keeps its device and its autograd graph (unless ``detach``); half precision becomes
    float32 (sums of squares overflow in float16). Anything else (a NumPy array, nested lists) is
    converted. ``float32=True`` also casts float64 down (evaluation works in float32).
    """
    if x is None:
        raise TypeError(f"{name} is None; pass an (n, d) array or tensor of feature vectors, one row per sample")
    if torch.is_tensor(x):
        t = x.detach() if detach else x
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}; call .float() on it first")
    else:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be an (n, d) array of numbers; got {type(x).__name__}") from err
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers; got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32 if float32 else None))
        if not t.is_floating_point():
            t = t.to(torch.float32)
    if t.dim() != 2:
        raise ValueError(f"{name} must have shape (n, d) -- one feature vector per row -- got shape {tuple(t.shape)}; "
                         "flatten the features first (x.flatten(1))")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}); it needs at least one sample and one dimension")
    if t.shape[0] < min_rows:
        raise ValueError(f"{name} has {t.shape[0]} row(s); at least {min_rows} are needed")
    finite = torch.isfinite(t.detach()).all(dim=1)
    if not bool(finite.all()):
        raise ValueError(f"{name} contains NaN or infinite values in {int((~finite).sum())} row(s) (first: row "
                         f"{_first_bad_row(finite.cpu().numpy())}); check the network output and the learning rate")
    if t.dtype in (torch.float16, torch.bfloat16) or (float32 and t.dtype != torch.float32):
        t = t.float()
    return t


def feature_array(x, name: str = "x", *, min_rows: int = 1) -> np.ndarray:
    """``x`` as a float64 NumPy ``(n, d)`` array with finite values and ``n >= min_rows``."""
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a 2-D array of numbers (n_samples, dim); got {type(x).__name__}") from err
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, dim); got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); it needs at least one sample and one dimension")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} has {arr.shape[0]} row(s); at least {min_rows} are needed")
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise ValueError(f"{name} contains NaN or infinite values in {int((~finite).sum())} row(s) (first: row "
                         f"{_first_bad_row(finite)}); remove or repair those rows first")
    return arr


def class_id_array(y, n: int | None = None, name: str = "labels", of: str = "x") -> np.ndarray:
    """``y`` as a 1-D int64 NumPy array of class ids (``n`` of them when given).

    Integer-valued floats (1.0, 2.0) are accepted; fractional values, NaN, booleans and strings are not.
    """
    if torch.is_tensor(y):
        y = y.detach().cpu().numpy()
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one class id per row of {of}); got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{of} has {n} rows but {name} has {arr.shape[0]} entries; they must match one to one")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or not np.all(arr == np.round(arr)):
            raise TypeError(f"{name} must hold integer class ids; got non-integer values such as "
                            f"{arr[~(np.isfinite(arr) & (arr == np.round(arr)))][0]!r}")
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def class_ids(y, n: int | None = None, device=None, name: str = "labels", of: str = "x") -> torch.Tensor:
    """``y`` as a 1-D int64 torch tensor of class ids on ``device`` (``n`` of them when given).

    Unlike :func:`class_id_array` a floating tensor is refused outright: inside a training step a float
    label tensor is a bug, not a file format.
    """
    t = y if torch.is_tensor(y) else torch.as_tensor(np.asarray(y))
    if t.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor of class ids (one per row of {of}), got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class ids, got dtype {t.dtype}; convert them with .long()")
    if n is not None and t.shape[0] != n:
        raise ValueError(f"{of} has {n} rows but {name} has {t.shape[0]} entries; they must match one to one")
    return t.to(device=device if device is not None else t.device, dtype=torch.long)


def same_dimension(x, y, names: tuple[str, str] = ("x", "y")) -> None:
    """Both matrices have the same number of columns."""
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"{names[0]} and {names[1]} must have the same feature dimension, got "
                         f"{x.shape[1]} and {y.shape[1]}")


def finite_number(value, name: str, *, low: float | None = None, high: float | None = None,
                  low_open: bool = False, integer: bool = False):
    """``value`` as a float (or int when ``integer``) that is finite and within ``[low, high]``
    (``(low, high]`` with ``low_open``); booleans and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(float(value)):  # before int(): int(inf) raises OverflowError, not a clear message
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if integer and float(value) != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    v = int(value) if integer else float(value)
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return v
