"""An optional pre-resized image cache: decode every JPEG once, keep a small uint8 copy.

A GPU eats a batch faster than a few CPU cores decode 128 full-size JPEGs. :meth:`PreResizedCache.build`
decodes each image of a real dataset once, resizes its shorter side to ``size`` and keeps the central
``size x size`` square, and stores all of them in one uint8 ``.npy`` file read as a memory map
(``N x size x size x 3``; 256 px CUB is about 2.3 GB, 64 px about 145 MB). Training then reads
slices of that file: the random crop and flip of :func:`~zslib.data.train_transform` still happen
per batch (choose ``size`` = the profile's ``resize_size``).

Layout of a cache folder: ``images.npy``, ``labels.npy``, ``meta.json`` (size, count, source).
The folder is written under a temporary name and renamed when complete, so an interrupted build is
never mistaken for a cache.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from .errors import CorruptFileError, MissingDataError
from .root import data_root

__all__ = ["PreResizedCache", "cached", "resize_center_square"]


def resize_center_square(image, size: int) -> np.ndarray:
    """PIL image -> uint8 array ``size x size x 3``: shorter side resized to ``size``, centre kept."""
    from PIL import Image

    image = image.convert("RGB")
    w, h = image.size
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    image = image.resize((nw, nh), Image.BILINEAR, reducing_gap=3.0)
    left, top = (nw - size) // 2, (nh - size) // 2
    return np.array(image.crop((left, top, left + size, top + size)), dtype=np.uint8)


class PreResizedCache(Dataset):
    """A built cache, read as a dataset: ``cache[i] -> (image, label)``.

    The image is a uint8 tensor ``3 x size x size`` passed to ``transform`` (the
    :func:`~zslib.data.train_transform` / :func:`~zslib.data.test_transform` accept it), or a float
    tensor in ``[0, 1]`` without a transform. ``labels`` (int64 numpy) and ``paths`` (the source files)
    match the source dataset.
    """

    def __init__(self, path, transform=None):
        self.path = Path(path)
        meta_file = self.path / "meta.json"
        if not meta_file.is_file():
            raise MissingDataError(f"no pre-resized cache at {self.path} ({meta_file} is missing); build "
                                   "one with PreResizedCache.build(dataset, path, size).")
        self.meta = json.loads(meta_file.read_text())
        try:
            self.images = np.load(self.path / "images.npy", mmap_mode="r")
            self.labels = np.load(self.path / "labels.npy").astype(np.int64)
        except (OSError, ValueError) as e:
            raise CorruptFileError(f"the cache in {self.path} is damaged ({e}); delete the folder and "
                                   "build it again.") from e
        n, s = int(self.meta["count"]), int(self.meta["size"])
        if self.images.shape != (n, s, s, 3) or self.labels.shape != (n,):
            raise CorruptFileError(f"the cache in {self.path} holds {self.images.shape} images and "
                                   f"{self.labels.shape} labels but meta.json says {n} of {s} px; "
                                   "delete the folder and build it again.")
        self.paths = [Path(p) for p in self.meta.get("paths", [])]
        self.size = s
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return int(len(np.unique(self.labels)))

    def __getitem__(self, i):
        img = torch.from_numpy(np.array(self.images[i])).permute(2, 0, 1).contiguous()
        img = self.transform(img) if self.transform is not None else img.float().div_(255.0)
        return img, int(self.labels[i])

    @classmethod
    def build(cls, dataset, path, size: int, *, overwrite: bool = False, progress: bool = True,
              transform=None) -> "PreResizedCache":
        """Decode every image of ``dataset`` (which needs ``load_image(i)`` and ``labels``) once."""
        path = Path(path)
        if path.exists():
            if not overwrite:
                return cls(path, transform)
            shutil.rmtree(path)
        if not hasattr(dataset, "load_image"):
            raise TypeError(f"{type(dataset).__name__} has no load_image(i); the cache is for the real "
                            "datasets (SynthParts is already rendered in memory)")
        size = int(size)
        tmp = path.with_name(path.name + ".building")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        n = len(dataset)
        arr = np.lib.format.open_memmap(tmp / "images.npy", mode="w+", dtype=np.uint8, shape=(n, size, size, 3))
        it = range(n)
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc=f"caching {n} images at {size} px", unit="img")
        for i in it:
            arr[i] = resize_center_square(dataset.load_image(i), size)
        arr.flush()
        del arr
        np.save(tmp / "labels.npy", np.asarray(dataset.labels, dtype=np.int64))
        meta = {"size": size, "count": n, "source": repr(dataset),
                "paths": [str(p) for p in getattr(dataset, "paths", [])]}
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.replace(tmp, path)
        return cls(path, transform)


def cached(dataset, size: int, cache_dir=None, transform=None, **kwargs) -> PreResizedCache:
    """The cache of ``dataset`` at ``size`` px under ``<data root>/cache/``, built on first use."""
    name = f"{type(dataset).__name__.lower()}-{getattr(dataset, 'split', 'all')}-{int(size)}"
    folder = Path(cache_dir) if cache_dir is not None else data_root() / "cache"
    return PreResizedCache.build(dataset, folder / name, size, transform=transform, **kwargs)
