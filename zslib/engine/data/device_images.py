"""Images held on the training device, cropped, flipped and normalized there, each image of a batch on its own.

A GPU that fine-tunes EfficientNet-Lite0 on 128-image batches trains several thousand images per second; loader
processes that decode, crop, convert and normalize every image on the CPU deliver fewer (the pre-resized image
cache, :mod:`zslib.engine.data.image_cache`, removes the decoding but not the rest). :class:`DeviceImages` moves the
pre-resized pixels once to the device -- as uint8, end to end in one flat buffer with each image's offset and
shape, as the cache stores them -- and makes every batch there: one gather reads each image's own crop window
(its own random offset and its own flip) straight into a ``B x H x W x 3`` block, which viewed as ``B x 3 x H x W``
is already in channels-last order; then the conversion to float and the normalization, as torchvision does them.
(Batched torchvision v2 transforms on a ``B x 3 x H x W`` tensor would draw one crop for the whole batch.)

The batches are *the same numbers* as the loader's. The dataset reads the parameters of the source's transform
(``Resize``, ``RandomCrop``/``CenterCrop``, ``RandomHorizontalFlip``, ``ToImage``, ``ToDtype``, ``Normalize``: the
full profile's :func:`~zslib.engine.data.train_transform` and :func:`~zslib.engine.data.test_transform`) and
refuses any other step. For training step ``t`` it draws the crop offsets and flips in the order, and from the
generator state, that the loader's per-step seeding (:func:`zslib.engine.train.batches.step_seed`) gives
torchvision (``RandomCrop`` draws the top, then the left offset; ``RandomHorizontalFlip`` one uniform number; image
after image); crops are exact index ranges, and the conversion (``x * (1/255)``, then ``(x - mean) / std`` in
float32) uses the same elementwise operations. So a run with ``Config.device_images`` trains on bitwise the same
batches as without it and the switch stays out of the config hash, like the image cache
(``tests/test_device_images.py`` compares whole batches).

Where the pixels go (``placement``): ``"device"`` when they take at most :data:`DEVICE_SHARE` of the device's free
memory divided among the runs sharing it (``$ZS_CONCURRENT_RUNS``), else ``"host"``: pinned host memory (on CUDA),
where the same gather runs on the CPU and only the crops are copied over (Stanford Online Products at 256 px
is about 25 GB), when they take at most :data:`HOST_SHARE` of the host memory available (pinned pages cannot be
swapped out: a Colab VM has about 12 GB), else ``"loader"``: the set stays with the loader processes, as without
this module (:func:`on_device` leaves it as it is). Flowers-102 at 256 px takes about 2.1 GB. Training sets yield
whole batches through :meth:`DeviceImages.step_batch` (used by :class:`zslib.engine.train.batches.BatchStream`);
evaluation sets give their centre crops through :meth:`DeviceImages.tensors` (used by :func:`zslib.engine.train.embed`,
under autocast on CUDA). An item read one at a time (``ds[i]``) comes from the source dataset on the CPU, as before.
"""
from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision.transforms import v2

from zslib.engine.data.image_cache import PreResizedCache
from zslib.engine.data.splits import LabeledSubset
from zslib.engine.train.batches import step_seed

__all__ = ["DeviceImages", "on_device", "crop_plan", "placement_of", "data_path", "DEVICE_SHARE", "HOST_SHARE"]

#: Largest share of the device's free memory (divided among the runs sharing the device) the pixels may take.
DEVICE_SHARE = 0.5
#: Largest share of the host memory available (``MemAvailable``, divided among the runs sharing the device) the
#: pixels may take as pinned host memory; beyond it a set stays with the loader.
HOST_SHARE = 0.5

_CHUNK = 1 << 28  # bytes copied to the device at a time


def crop_plan(transform) -> dict:
    """What a source transform does, as the device reproduces it: ``{"resize", "size", "random", "flip", "mean",
    "std"}``. ``ValueError`` (naming the step) for a transform with any other step."""
    steps = list(transform.transforms) if isinstance(transform, v2.Compose) else [transform]
    plan = {"resize": None, "size": None, "random": None, "flip": 0.0, "mean": None, "std": None}
    kinds = []
    for s in steps:
        if isinstance(s, v2.Resize) and isinstance(s.size, (list, tuple)) and len(s.size) == 1 and s.max_size is None:
            plan["resize"] = int(s.size[0])
        elif isinstance(s, v2.RandomCrop) and s.padding is None and not s.pad_if_needed:
            plan["size"], plan["random"] = tuple(int(v) for v in s.size), True
        elif isinstance(s, v2.CenterCrop):
            plan["size"], plan["random"] = tuple(int(v) for v in s.size), False
        elif isinstance(s, v2.RandomHorizontalFlip):
            plan["flip"] = float(s.p)
        elif isinstance(s, v2.Normalize) and not s.inplace:
            plan["mean"], plan["std"] = [float(v) for v in s.mean], [float(v) for v in s.std]
        elif isinstance(s, v2.ToDtype) and s.dtype is torch.float32 and s.scale:
            pass  # x * (1 / 255)
        elif isinstance(s, v2.ToImage):
            pass
        else:
            raise ValueError(f"the device images cannot reproduce the transform step {s!r}; use the loader "
                             "(device_images=False) for this transform")
        kinds.append(type(s).__name__)
    order = [k for k in kinds if k in ("Resize", "RandomCrop", "CenterCrop", "RandomHorizontalFlip", "ToDtype",
                                       "Normalize")]
    expected = ["Resize", "RandomCrop" if plan["random"] else "CenterCrop"]
    expected += ["RandomHorizontalFlip"] * (plan["flip"] > 0) + ["ToDtype"] + ["Normalize"] * (plan["mean"] is not None)
    if plan["size"] is None or plan["resize"] is None or order != expected:
        raise ValueError(f"the device images reproduce Resize, a crop, an optional flip, ToDtype and Normalize in that "
                         f"order; this transform has {kinds}: use the loader (device_images=False)")
    return plan


def _sharing_runs() -> int:
    shared = os.environ.get("ZS_CONCURRENT_RUNS", "").strip()
    return int(shared) if shared.isdigit() and int(shared) > 0 else 1


def host_memory_available() -> int | None:
    """Bytes of host memory available to new allocations (``MemAvailable`` of ``/proc/meminfo``); ``None`` where
    that is not known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def placement_of(nbytes: int, device, placement: str = "auto") -> str:
    """Where ``nbytes`` of pixels go for training on ``device`` (see the module docstring): ``"device"``, ``"host"``
    (pinned, CUDA only) or ``"loader"``; ``placement`` other than ``"auto"`` is taken as given."""
    device = torch.device(device)
    if placement not in ("auto", "device", "host", "loader"):
        raise ValueError(f"placement must be 'auto', 'device', 'host' or 'loader', got {placement!r}")
    if placement != "auto":
        return placement
    if device.type != "cuda":
        return "device"  # the CPU holds them either way
    free, _ = torch.cuda.mem_get_info(device)
    if nbytes <= DEVICE_SHARE * free / _sharing_runs():
        return "device"
    host = host_memory_available()
    return "host" if host is None or nbytes <= HOST_SHARE * host / _sharing_runs() else "loader"


class _Pixels:
    """The pre-resized pixels of a cache (:class:`~zslib.engine.data.image_cache.PreResizedCache`) in one place: a flat
    ``uint8`` tensor viewed as ``(pixels, 3)``, each image's first pixel and ``(height, width)``."""

    def __init__(self, arrays: dict, device: torch.device, placement: str):
        flat = arrays["pixels"]
        self.offsets = torch.from_numpy(np.asarray(arrays["offsets"], dtype=np.int64)[:-1] // 3)
        self.shapes_host = np.array(arrays["shapes"], dtype=np.int64)  # read per step: never a device sync
        self.shapes = torch.from_numpy(self.shapes_host)
        self.placement = placement_of(int(flat.shape[0]), device, placement)
        if self.placement == "loader":
            raise ValueError("these pixels stay with the loader (they fit neither the device nor pinned host memory); "
                             "zslib.engine.data.device_images.on_device leaves such a set as it is")
        where = device if self.placement == "device" else torch.device("cpu")
        pin = self.placement == "host" and device.type == "cuda"
        store = torch.empty(int(flat.shape[0]), dtype=torch.uint8, device=where, pin_memory=pin)
        for a in range(0, int(flat.shape[0]), _CHUNK):
            b = min(a + _CHUNK, int(flat.shape[0]))
            store[a:b].copy_(torch.from_numpy(np.array(flat[a:b])))
        self.store = store.view(-1, 3)
        self.where = where
        self.offsets, self.shapes = self.offsets.to(where), self.shapes.to(where)

    def crops(self, index: torch.Tensor, top: torch.Tensor, left: torch.Tensor, flip: torch.Tensor,
              size: tuple[int, int]) -> torch.Tensor:
        """``uint8 B x H x W x 3``: image ``index[b]``'s window at ``(top[b], left[b])``, mirrored where ``flip[b]``."""
        h, w = size
        index, top, left, flip = (t.to(self.where) for t in (index, top, left, flip))
        width = self.shapes[index, 1]
        rows = top[:, None] + torch.arange(h, device=self.where)[None]  # B x H
        cols = torch.arange(w, device=self.where)[None].expand(len(index), w)
        cols = left[:, None] + torch.where(flip[:, None], w - 1 - cols, cols)  # B x W
        at = self.offsets[index][:, None, None] + rows[:, :, None] * width[:, None, None] + cols[:, None, :]
        return self.store[at]


class DeviceImages(Dataset):
    """``source`` (a :class:`~zslib.engine.data.image_cache.PreResizedCache` with the full profile's transform) with its
    pixels on ``device`` (see the module docstring). ``pixels``: a :class:`DeviceImages` whose pixels this one shares
    (the same cache under another transform, e.g. the training and the evaluation view of the seen classes)."""

    def __init__(self, source, device, *, placement: str = "auto", pixels: "DeviceImages | None" = None):
        if not isinstance(source, PreResizedCache):
            raise TypeError(f"device images are made from the pre-resized image cache, not {type(source).__name__}; "
                            "set image_cache=True (and ZS_CACHE to a writable folder)")
        self.source, self.device = source, torch.device(device)
        self.plan = crop_plan(source.transform)
        self.labels = np.array(source.labels, dtype=np.int64)  # a writable copy (the cache maps its file)
        self.paths = source.paths
        self.transform = None  # what embed() and the batch stream see: nothing left to apply per item
        self._pixels = pixels._pixels if pixels is not None else _Pixels(source.arrays, self.device, placement)
        shapes = self._pixels.shapes_host
        small = (shapes[:, 0] < self.plan["size"][0]) | (shapes[:, 1] < self.plan["size"][1])
        if small.any():
            raise ValueError(f"{int(small.sum())} image(s) are smaller than the {self.plan['size']} crop; the loader "
                             "pads them, the device images do not: use device_images=False")
        self._mean = self._std = None
        if self.plan["mean"] is not None:
            self._mean = torch.tensor(self.plan["mean"], dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
            self._std = torch.tensor(self.plan["std"], dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        if not self.plan["random"]:
            self.tensors = self._tensors  # evaluation: centre crops, read in slices by embed()

    @property
    def placement(self) -> str:
        return self._pixels.placement

    def __getattr__(self, name):  # what this view does not hold comes from the source dataset
        if name.startswith("_") or name in ("source", "device", "plan", "labels", "paths", "transform"):
            raise AttributeError(name)
        return getattr(self.source, name)

    def __getstate__(self):  # a loader process gets the source alone (items are read from it on the CPU)
        raise TypeError("DeviceImages holds device memory and is not sent to loader processes; read batches with "
                        "step_batch() or tensors(), or use the source dataset")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return self.source[i]

    def _finish(self, crops: torch.Tensor) -> torch.Tensor:
        """``uint8 B x H x W x 3`` -> ``float32 B x 3 x H x W`` (channels-last) on the device, as ToDtype and
        Normalize compute it."""
        if crops.device != self.device and self.device.type == "cuda":
            crops = crops.pin_memory()  # host placement: only the crops cross, asynchronously
        x = crops.to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        x = x.to(torch.float32).mul_(1.0 / 255)
        if self._mean is not None:
            x = x.sub_(self._mean).div_(self._std)
        return x

    def draws(self, indices, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Crop offsets and flips of a training batch, drawn from ``generator`` as torchvision's ``RandomCrop`` and
        ``RandomHorizontalFlip`` draw them from the global generator, image after image."""
        h, w = self.plan["size"]
        shapes = self._pixels.shapes_host
        top, left, flip = [], [], []
        for i in indices:
            ih, iw = (int(v) for v in shapes[int(i)])
            top.append(int(torch.randint(0, ih - h + 1, size=(), generator=generator)) if ih > h else 0)
            left.append(int(torch.randint(0, iw - w + 1, size=(), generator=generator)) if iw > w else 0)
            flip.append(bool(torch.rand(1, generator=generator) < self.plan["flip"]) if self.plan["flip"] > 0
                        else False)
        return torch.tensor(top), torch.tensor(left), torch.tensor(flip)

    def crops(self, indices, top, left, flip) -> torch.Tensor:
        """The normalized crops of images ``indices`` at the given offsets and flips (the batch of
        :meth:`step_batch` for given draws): ``float32 B x 3 x H x W``, channels-last, on the device."""
        index = torch.as_tensor(np.asarray(indices, dtype=np.int64))
        return self._finish(self._pixels.crops(index, torch.as_tensor(top), torch.as_tensor(left),
                                               torch.as_tensor(flip, dtype=torch.bool), self.plan["size"]))

    def step_batch(self, step: int, indices, seed: int, rank: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of training step ``step``: ``(images on the device, labels)``, equal to the loader's batch."""
        if not self.plan["random"]:
            top, left = self._centre(indices)
            flip = torch.zeros(len(top), dtype=torch.bool)
        else:
            top, left, flip = self.draws(indices, torch.Generator().manual_seed(step_seed(seed, step, rank)))
        labels = torch.as_tensor(np.asarray(self.labels)[np.asarray(indices, dtype=np.int64)], dtype=torch.long)
        return self.crops(indices, top, left, flip), labels

    def _centre(self, indices) -> tuple[torch.Tensor, torch.Tensor]:
        h, w = self.plan["size"]
        shapes = self._pixels.shapes_host[np.asarray(indices, dtype=np.int64)]
        # torchvision's CenterCrop: int(round((H - h) / 2.0)), Python's rounding (half to even)
        top = [int(round((int(s) - h) / 2.0)) for s in shapes[:, 0]]
        left = [int(round((int(s) - w) / 2.0)) for s in shapes[:, 1]]
        return torch.tensor(top, dtype=torch.long), torch.tensor(left, dtype=torch.long)

    def _tensors(self):
        return _CentreCrops(self, np.arange(len(self))), np.asarray(self.labels)

    def __repr__(self) -> str:
        return f"DeviceImages({self.source!r}, {self.placement} of {self.device})"


class _CentreCrops:
    """The centre crops of some images of a :class:`DeviceImages`, made when sliced (``crops[a:b]`` is a batch on
    the device); indexed by an array it narrows to those images."""

    def __init__(self, images: DeviceImages, index: np.ndarray):
        self.images, self.index = images, np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key):
        if isinstance(key, slice):
            idx = self.index[key]
            top, left = self.images._centre(idx)
            return self.images.crops(idx, top, left, torch.zeros(len(idx), dtype=torch.bool))
        key = key.cpu().numpy() if torch.is_tensor(key) else np.asarray(key)
        return _CentreCrops(self.images, self.index[key])


def on_device(data: dict, device, *, placement: str = "auto") -> dict:
    """The datasets of a run (:func:`zslib.engine.runner.build_data`'s dict) with every pre-resized image set moved to
    ``device`` as :class:`DeviceImages`; class-disjoint subsets (:class:`~zslib.engine.data.LabeledSubset`) keep
    their indices. Views of one cache share its pixels. A set whose pixels fit neither the device nor pinned host
    memory (:func:`placement_of`: ``"loader"``) is left as it is. ``TypeError`` when a set is not read through the
    cache."""
    shared: dict = {}

    def move(ds):
        if isinstance(ds, tuple):
            return tuple(move(d) for d in ds)
        if isinstance(ds, LabeledSubset):
            return LabeledSubset(move(ds.dataset), ds.indices)
        if isinstance(ds, DeviceImages):
            return ds
        key = getattr(getattr(ds, "arrays", {}).get("pixels"), "filename", None) or id(ds)
        if key not in shared:
            if isinstance(ds, PreResizedCache) and placement_of(
                    int(ds.arrays["pixels"].shape[0]), device, placement) == "loader":
                return ds
            shared[key] = DeviceImages(ds, device, placement=placement)
            return shared[key]
        return DeviceImages(ds, device, placement=placement, pixels=shared[key])

    return {name: move(ds) for name, ds in data.items()}


def data_path(data: dict) -> str:
    """How a run's training batches are made: ``"device images (<placement>)"`` or ``"loader"`` (recorded in a
    result's provenance)."""
    train = data["train"]
    while isinstance(train, LabeledSubset):
        train = train.dataset
    return f"device images ({train.placement})" if isinstance(train, DeviceImages) else "loader"
