"""A pre-resized image cache: decode every JPEG once, keep its resized pixels on local disk.

A GPU trains on a batch of 128 images faster than two CPU cores decode 128 full-size JPEGs (CUB's photos
are about 500 x 375 px: decoding and resizing one takes a few milliseconds). The papers' preprocessing
starts by resizing the shorter side of every image to 256 px; :func:`cached` does that step *once* per
image, with the very transform the pipeline would apply (torchvision's ``Resize`` on the PIL image), and
stores the resulting uint8 pixels. Training then reads the stored pixels and applies the *whole* transform
as before (random crop and flip, or the centre crop; conversion; normalization). torchvision's ``Resize``
returns an image that already has the requested size unchanged, so a cached dataset gives bitwise the
same tensors as the uncached one, random augmentation included (``tests/test_image_cache.py`` checks it
on a fixture tree). The switch (``Profile.image_cache``, ``Config.image_cache``; on in the full profile)
therefore changes the speed of a run and never its numbers, and it is not part of a run's config hash.

The cache is an :class:`~zslib.engine.cache.ArrayCache` entry (folder ``$ZS_CACHE``, else ``data/cache`` of the
book's checkout, else ``~/.cache/zslib``; ``ZS_CACHE=off`` disables it), keyed by the dataset, the split,
its image files (paths relative to the dataset folder) and labels, the identity of the folder's contents
(:mod:`zslib.engine.data.identity`: the same names and labels with other pixels are another entry), the size,
the versions of Pillow and torchvision (their resampling makes the pixels) and the source of this module; every
array is verified against its SHA-256 once per process. Images keep their aspect ratio, so the pixels of all images are
stored end to end in one flat array with their offsets and shapes: CUB-200-2011 at 256 px takes about
3 GB, Stanford Online Products about 25 GB (its images are small JPEGs; caching them gains less).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import Dataset
from torchvision.transforms import v2

from zslib.engine.cache import ArrayCache, source_fingerprint
from zslib.engine.data import images
from zslib.engine.data.errors import CorruptFileError, MissingDataError
from zslib.engine.data.identity import folder_identity
from zslib.engine.data.images import image_size
from zslib.engine.progress import progress_bar

__all__ = ["PreResizedCache", "cached", "resized_shape", "resize_center_square"]


def resize_center_square(image, size: int) -> np.ndarray:
    """PIL image -> uint8 array ``size x size x 3``: shorter side resized to ``size``, centre kept."""
    image = image.convert("RGB")
    w, h = image.size
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    image = image.resize((nw, nh), Image.BILINEAR, reducing_gap=3.0)
    left, top = (nw - size) // 2, (nh - size) // 2
    return np.array(image.crop((left, top, left + size, top + size)), dtype=np.uint8)


def resized_shape(height: int, width: int, size: int) -> tuple[int, int]:
    """``(height, width)`` of an image after ``torchvision.transforms.v2.Resize(size)``: the shorter side
    becomes ``size``, the longer one ``int(size * long / short)`` (torchvision's rule, truncated)."""
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(size * long / short)
    return (new_long, size) if width <= height else (size, new_long)


class PreResizedCache(Dataset):
    """A dataset read from the cache: ``cache[i] -> (transform(pixels of image i), label)``.

    Made by :func:`cached`. ``labels`` and ``paths`` are those of the source dataset; any other attribute
    (``split``, ``class_names``, ``root``, SOP's ``super_labels``...) is read from it. Without a transform an
    item is a uint8 tensor ``3 x H x W`` (the stored pixels).
    """

    def __init__(self, arrays: dict, source, transform=None):
        self.arrays, self.source, self.transform = arrays, source, transform
        self.labels = np.asarray(arrays["labels"], dtype=np.int64)
        self.paths = list(getattr(source, "paths", []))

    def __getattr__(self, name):  # what the cache does not hold comes from the source dataset
        if name.startswith("__") or name in ("arrays", "source", "transform", "labels", "paths"):
            raise AttributeError(name)
        return getattr(self.source, name)

    def __len__(self) -> int:
        return len(self.labels)

    def pixels(self, i: int) -> torch.Tensor:
        """The stored uint8 pixels of image ``i`` as a ``3 x H x W`` tensor."""
        start, stop = int(self.arrays["offsets"][i]), int(self.arrays["offsets"][i + 1])
        h, w = (int(v) for v in self.arrays["shapes"][i])
        hwc = np.array(self.arrays["pixels"][start:stop]).reshape(h, w, 3)
        return torch.from_numpy(hwc).permute(2, 0, 1)

    def load_image(self, i: int):
        """Image ``i`` as a PIL image (the stored, resized one)."""
        return Image.fromarray(self.pixels(i).permute(1, 2, 0).numpy())

    def __getitem__(self, i):
        img = self.pixels(int(i))
        return (self.transform(img) if self.transform is not None else img), int(self.labels[i])

    def __repr__(self) -> str:
        return f"PreResizedCache({self.source!r}, images={len(self)})"


class _Resized(Dataset):
    """Image ``i`` of ``dataset`` after ``Resize(size)``, as a uint8 ``H x W x 3`` array (the build's workers)."""

    def __init__(self, dataset, size: int):
        self.dataset, self.resize = dataset, v2.Resize(int(size), antialias=True)

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            return np.array(self.resize(self.dataset.load_image(i)), dtype=np.uint8)
        except Exception as err:  # handed to the build as text: a worker's error would lose the file's name
            return f"{type(err).__name__}: {err}"


def _key(dataset, size: int) -> dict:
    root = Path(getattr(dataset, "root", "/"))
    h = hashlib.sha256()
    for p in dataset.paths:
        h.update(os.path.relpath(p, root).encode() + b"\0")
    h.update(np.asarray(dataset.labels, dtype=np.int64).tobytes())
    return {"dataset": type(dataset).__name__.lower(), "split": str(getattr(dataset, "split", "all")),
            "images": h.hexdigest()[:16], "count": len(dataset), "data": folder_identity(root), "size": int(size),
            "pillow": PIL.__version__, "torchvision": torchvision.__version__,
            "code": source_fingerprint(__file__, images.__file__)}


def _shapes(dataset, size: int) -> np.ndarray:
    """The resized ``(height, width)`` of every image, from the file headers (nothing is decoded)."""
    out = np.empty((len(dataset), 2), dtype=np.int64)
    for i, p in enumerate(dataset.paths):
        w, h = image_size(p)  # a file it cannot read (damaged, oversized, badly named) is refused naming it
        out[i] = resized_shape(h, w, size)
    return out


def _unreadable(path, error: str) -> Exception:
    """The error of an image that could not be decoded while the cache was built: one line naming the file."""
    if error.startswith(("CorruptFileError: ", "MissingDataError: ")):  # the reader's own message names the file
        kind, message = error.split(": ", 1)
        return (CorruptFileError if kind == "CorruptFileError" else MissingDataError)(message.split("\n")[0])
    return CorruptFileError(f"image {path} cannot be read ({error.splitlines()[0]}); it is truncated or damaged. "
                            "Replace it from the dataset archive (or run the dataset's download() again), or set "
                            "image_cache=False to leave the cache out.")


def _build(entry, dataset, size: int, num_workers: int, progress) -> None:
    """Decode and resize every image of ``dataset`` into a scratch folder of ``entry``, then adopt it."""
    shapes = _shapes(dataset, size)
    offsets = np.zeros(len(dataset) + 1, dtype=np.int64)
    np.cumsum(shapes[:, 0] * shapes[:, 1] * 3, out=offsets[1:])
    tmp = entry.scratch()
    try:
        pixels = np.lib.format.open_memmap(tmp / "pixels.npy", mode="w+", dtype=np.uint8, shape=(int(offsets[-1]),))
        loader = torch.utils.data.DataLoader(_Resized(dataset, size), batch_size=None, num_workers=num_workers)
        bar = progress_bar(progress, len(dataset), 0, desc=f"resizing images to {size} px")
        for i, arr in enumerate(loader):
            if isinstance(arr, str):
                raise _unreadable(dataset.paths[i], arr)
            arr = np.asarray(arr)
            if arr.shape != (shapes[i, 0], shapes[i, 1], 3):
                raise RuntimeError(f"image {dataset.paths[i]} resized to {arr.shape}, not the {tuple(shapes[i])} "
                                   "its header announced; the image cache cannot hold it (set image_cache=False)")
            pixels[offsets[i]:offsets[i + 1]] = arr.reshape(-1)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        pixels.flush()
        del pixels
        np.save(tmp / "offsets.npy", offsets)
        np.save(tmp / "shapes.npy", shapes)
        np.save(tmp / "labels.npy", np.asarray(dataset.labels, dtype=np.int64))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    entry.adopt(tmp)


def cached(dataset, size: int, cache_dir=None, transform="source", *, num_workers: int | None = None,
           progress="auto"):
    """``dataset`` read through the pre-resized cache at ``size`` px (built on first use), as a
    :class:`PreResizedCache`; or ``dataset`` itself when caching is off (``ZS_CACHE=off``) or the cache
    cannot be written (a warning says why).

    ``dataset`` is a real dataset (``load_image(i)``, ``paths``, ``labels``); ``size`` should be the
    ``resize_size`` of its transform, which is what makes the cache transparent. ``transform`` defaults to
    the dataset's own. ``cache_dir``: the cache folder (default: see :mod:`zslib.engine.cache`). ``num_workers``
    decoding processes for the one-off build (default: one per CPU core, at most 8).
    """
    if not hasattr(dataset, "load_image") or not hasattr(dataset, "paths"):
        raise TypeError(f"{type(dataset).__name__} has no load_image(i) and paths; the image cache is for the real "
                        "datasets (SynthParts is already rendered in memory)")
    if transform == "source":
        transform = getattr(dataset, "transform", None)
    entry = ArrayCache("preresized", _key(dataset, size), folder=cache_dir)
    if not entry.enabled:
        return dataset
    arrays = entry.load(mmap=True)
    if arrays is None:
        for folder, key in entry.siblings("data"):
            if "data" in key:
                warnings.warn(f"the image cache at {folder} was made from other data (data identity {key['data']}; "
                              f"the data now is {entry.key['data']}): resized again for this data", stacklevel=2)
        if num_workers is None:
            # here, not at the top: zslib.engine.train.batches imports this package (data.sampler, data.splits)
            from zslib.engine.train.batches import loader_workers

            num_workers = loader_workers(8)
        try:
            _build(entry, dataset, int(size), num_workers, progress)
        except OSError as err:
            warnings.warn(f"could not write the image cache to {entry.path} ({err}); reading the JPEG files instead. "
                          "Set ZS_CACHE to a writable folder with room for it (or image_cache=False).", stacklevel=2)
            return dataset
        arrays = entry.load(mmap=True)
        if arrays is None:  # pragma: no cover - written and damaged at once
            return dataset
    return PreResizedCache(arrays, dataset, transform)
