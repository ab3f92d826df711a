"""Frozen pretrained features, computed once and read from disk: how the ``real`` profile trains on a laptop.

Fine-tuning an ImageNet network on a 2-core CPU takes minutes per hundred steps. The ``real`` profile keeps
the pretrained network frozen instead: every image passes through it *once*, the maps of the chosen stages
(EfficientNet-Lite0's ``block4`` 14x14, ``block5`` and ``head`` 7x7 at 224 px) are stored on disk in half
precision, and training reads them back. What trains is what sits on top: the embedding head and each
method's own modules (attention over the maps, channel attention, adversaries). A run then takes seconds.

The cache (:mod:`zslib.engine.cache`) is keyed by everything the numbers depend on: the dataset's image list and
labels, the identity of the images' contents (:mod:`zslib.engine.data.identity`: the same file names and labels
with other pixels are other data), the backbone and the SHA-256 of its weights file, the image and resize sizes,
the stages, and the source of the code that computes them. A changed input can never be answered by a stale cache
(a warning says when the same names and labels were cached from other data); a damaged file is detected by its
checksum and rebuilt. An entry written before the data identity was part of the key (whatever code fingerprint it
carries) is still used for the same data: the maps of a few of its images (:data:`CHECK_IMAGES`) are computed again
by this code and must match its rows (:data:`CHECK_TOLERANCE`), and it is then linked under the new key (hard
links, no copy), so the shared 1.5 GB cache of Flowers-102 is not built again.

* :func:`feature_cache` -- build (once) or load the cached maps of a dataset: one row per image, the maps of
  every stage flattened and concatenated, float16, read as a memory map;
* :class:`FeatureDataset` -- one split of it as a dataset ``ds[i] -> (packed maps, label)``;
* the names and shapes of the packed maps are :func:`zslib.engine.models.registry.layout` (what
  :class:`zslib.engine.models.CachedBackbone` unpacks).
"""
from __future__ import annotations

import hashlib
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torchvision.transforms import v2

from zslib.engine.cache import ArrayCache, source_fingerprint
from zslib.engine.data.identity import folder_identity
from zslib.engine.data.splits import check_zero_shot_split
from zslib.engine.models.registry import layout
from zslib.engine.data import synthparts, datasets, images, transforms
from zslib.engine.data.datasets import get_dataset_class, open_dataset
from zslib.engine.data.transforms import test_transform
from zslib.engine.models import build_model, normalization
from zslib.engine.models.backbones import Backbone
from zslib.engine.models.embedding import default_weights_path, BACKBONES, canonical_backbone
from zslib.engine.models.weights import sha256_of, missing_weights_message
from zslib.engine.profile import PROFILES
from zslib.engine.progress import progress_bar

__all__ = ["feature_cache", "FeatureDataset", "CacheInfo", "describe"]


class CacheInfo(dict):
    """What :func:`feature_cache` built or found: folder, seconds, images, size in MB, and whether it was built."""


def _identity(ds_train, ds_test) -> str:
    """A digest of the image list (file names) and labels of both splits: the dataset the cache describes."""
    h = hashlib.sha256()
    for ds in (ds_train, ds_test):
        for p in ds.paths:
            h.update(Path(p).name.encode())
        h.update(np.asarray(ds.labels, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def _weights_digest(backbone: str) -> str:
    path = default_weights_path(backbone)
    if not path.is_file():
        raise FileNotFoundError(missing_weights_message(path, backbone))
    return sha256_of(path)


def _synthparts_splits(image_size: int, images_per_class: int | None, mean, std):
    """SynthParts' seen and unseen splits rendered at ``image_size`` and normalized for the backbone, and a digest
    of what they are: the splits' arguments and the source of the module that renders them."""
    norm = v2.Normalize(list(mean), list(std))
    kw = dict(image_size=int(image_size), images_per_class=int(images_per_class or 40), transform=norm)
    train, test = synthparts.SynthParts("seen", **kw), synthparts.SynthParts("unseen", **kw)
    h = hashlib.sha256(repr((train._cache_key, test._cache_key)).encode())
    h.update(source_fingerprint(synthparts).encode())
    return train, test, h.hexdigest()[:16]


def feature_cache(dataset: str, backbone: str, stages, image_size: int, resize_size: int, *, root=None,
                  batch_size: int = 64, num_workers: int = 1, progress="auto",
                  images_per_class: int | None = None, only_if_cached: bool = False) -> tuple[dict, CacheInfo]:
    """The cached maps of every image of ``dataset`` (its train split, then its test split), built if needed.

    ``dataset`` may also be ``"synthparts"``: its seen and unseen classes rendered at ``image_size`` with
    ``images_per_class`` images each (``resize_size`` unused), so that a pretrained network's features of the
    synthetic images can be compared with, or transferred to and from, those of a photograph dataset.

    Returns ``(arrays, info)``: ``arrays["features"]`` (N, F) float16 (a read-only memory map),
    ``arrays["pooled"]`` (N, C) float32, the global average of the last stage's cached map (exactly what a
    model would compute from it, stored so that methods that read only the pooled feature need not read the
    maps), ``arrays["labels"]`` (N,) and ``arrays["split"]`` (N,) with 0 for train and 1 for test images;
    ``info`` says where the cache is, whether it was built now, and how long that took.
    """
    stages = list(stages)
    shapes = layout(backbone, stages, image_size)
    mean, std = normalization(backbone)
    if str(dataset).lower() == "synthparts":
        train, test, identity = _synthparts_splits(image_size, images_per_class, mean, std)
        name = "synthparts"
    else:
        cls = get_dataset_class(dataset)
        transform = test_transform(image_size, resize_size, mean, std)
        train = open_dataset(cls, root=root, split="train", transform=transform)
        test = open_dataset(cls, root=root, split="test", transform=transform)
        check_zero_shot_split(train, "train"), check_zero_shot_split(test, "test")  # before the cache is built
        identity, name = _identity(train, test), cls.name
    key = {"dataset": name, "images": identity, "backbone": backbone,
           "weights_sha256": _weights_digest(backbone), "image_size": int(image_size), "resize_size": int(resize_size),
           "stages": stages, "code": _code_fingerprint(backbone)}
    if name != "synthparts":  # SynthParts' "images" digest is its generator's identity already
        key["data"] = folder_identity(train.root)
    entry = ArrayCache("features", key)
    started = time.perf_counter()
    arrays = entry.load(mmap=True)
    n = len(train) + len(test)
    if arrays is None and "data" in key:
        arrays = _entry_before_identity(entry, lambda idx: _rows(_inference_network(
            build_model(backbone, 8, pretrained=True).backbone.eval(), stages, image_size), [train, test], idx))
    if arrays is not None:
        arrays["pooled"] = _pooled(entry, arrays["features"], shapes)
        return arrays, CacheInfo(folder=str(entry.path), built=False, seconds=round(time.perf_counter() - started, 2),
                                 images=n, megabytes=round(arrays["features"].nbytes / 2**20, 1))

    if only_if_cached:
        raise LookupError(f"no feature cache of {name} {stages} at {entry.path}")
    net = _inference_network(build_model(backbone, 8, pretrained=True).backbone.eval(), stages, image_size)
    width = sum(c * h * w for _, c, h, w in shapes)
    loader = torch.utils.data.DataLoader(torch.utils.data.ConcatDataset([train, test]), batch_size=batch_size,
                                         shuffle=False, num_workers=num_workers)
    bar = progress_bar(progress, n, 0, desc="caching features")
    features = _extract(net, loader, n, width, bar)
    labels = np.concatenate([train.labels, test.labels]).astype(np.int64)
    split = np.concatenate([np.zeros(len(train), np.int8), np.ones(len(test), np.int8)])
    if not np.isfinite(features).all():
        raise FloatingPointError(f"the frozen {backbone} produced values that do not fit in float16; "
                                 "the cache would be wrong")
    entry.save({"features": features, "labels": labels, "split": split})
    built = time.perf_counter() - started
    arrays = entry.load(mmap=True) if entry.enabled else {"features": features, "labels": labels, "split": split}
    arrays["pooled"] = _pooled(entry, arrays["features"], shapes)
    return arrays, CacheInfo(folder=str(entry.path), built=True, seconds=round(built, 1), images=n,
                             megabytes=round(features.nbytes / 2**20, 1))


#: Images recomputed to check that a cache entry written before data identities were part of its key holds the
#: maps of the images on disk now (spread over the rows), and the relative difference allowed between the rows
#: (the norm of the difference over the norm of the stored rows): float16 rounding (at most 2^-11 of each value) and
#: another batch composition stay below it; the maps of other pixels, or of other preprocessing, are far above it.
CHECK_IMAGES, CHECK_TOLERANCE = 6, 2e-3


def _rows(net, parts, idx, flipped: bool = False) -> np.ndarray:
    """The packed maps (float16, as cached) of the images ``idx`` of the datasets ``parts`` read end to end, and with
    ``flipped`` their mirror images' maps beside them (a view cache's row)."""
    both = torch.utils.data.ConcatDataset(list(parts))
    images = torch.stack([both[int(i)][0] for i in idx])
    views = [images, torch.flip(images, dims=[-1])] if flipped else [images]
    out = []
    with torch.no_grad():
        for batch in views:
            maps = net(batch.contiguous(memory_format=torch.channels_last))
            out.append(torch.cat([m.float().flatten(1) for m in maps], dim=1).to(torch.float16).numpy())
    return np.concatenate(out, axis=1)


def _entry_before_identity(entry: ArrayCache, recompute) -> dict | None:
    """Before ``entry`` (keyed by its data's identity) is built: an entry of the same key written before the data
    identity was part of it (by this code or the code before it, whose source fingerprint differs: the key's
    ``"code"``) is used, linked under the new key (no copy), when the maps of a few of its images computed now by
    ``recompute(indices)`` match its rows to :data:`CHECK_TOLERANCE`; otherwise, and for an entry of the same file
    names and labels made from other data, one warning says why the maps are computed again."""
    for folder, key in entry.siblings("data", "code"):
        old = ArrayCache(entry.name, key, folder=folder.parent)
        if "data" in key:
            if key.get("code") != entry.key.get("code"):
                continue  # other code: rebuilt as after any change of the code, without a word about the data
            warnings.warn(f"the cached {entry.name} at {folder} were made from other data (data identity "
                          f"{key['data']}; the data now is {entry.key['data']}): computed again for this data",
                          stacklevel=3)
            continue
        arrays = old.load(mmap=True)
        if arrays is None:
            continue
        n = arrays["features"].shape[0]
        idx = np.unique(np.linspace(0, n - 1, min(n, CHECK_IMAGES)).round().astype(int))
        got, want = recompute(idx).astype(np.float32), np.asarray(arrays["features"][idx], dtype=np.float32)
        if got.shape == want.shape and np.linalg.norm(got - want) <= CHECK_TOLERANCE * np.linalg.norm(want):
            linked = entry.link(folder)
            return entry.load(mmap=True) if linked is not None else arrays
        warnings.warn(f"the cached {entry.name} at {folder} (written before data identities were recorded) do not "
                      "hold the maps of the images on disk now: computed again for this data", stacklevel=3)
    return None


class _Stages(torch.nn.Module):
    def __init__(self, backbone, stages):
        super().__init__()
        self.backbone, self.stages = backbone, list(stages)

    def forward(self, x):
        maps = self.backbone.features(x, self.stages)
        return tuple(maps[s] for s in self.stages)


def _inference_network(backbone, stages, image_size: int):
    """The frozen backbone as a function ``images -> (map per stage)``, made fast for the CPU: channels-last
    weights, and TorchScript's inference optimizations (batch norm folded into the convolutions, oneDNN
    kernels), which run EfficientNet-Lite0 about twice as fast as eager PyTorch on the CPU. The folded network
    agrees with the eager one to about 1e-5 relative, far below the float16 rounding of the cache. Where
    TorchScript is unavailable (newer PyTorch), the eager network is used."""
    module = _Stages(backbone.to(memory_format=torch.channels_last), stages).eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            example = torch.zeros(2, 3, image_size, image_size).contiguous(memory_format=torch.channels_last)
            return torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(module, example)))
    except Exception:
        return module


def _extract(net, loader, n: int, width: int, bar) -> np.ndarray:
    """Every image of ``loader`` through ``net``: the maps flattened, concatenated and rounded to float16."""
    features = np.empty((n, width), dtype=np.float16)
    row = 0
    with torch.no_grad():
        for images, _ in loader:
            maps = net(images.contiguous(memory_format=torch.channels_last))
            packed = torch.cat([m.float().flatten(1) for m in maps], dim=1)
            features[row:row + len(images)] = packed.to(torch.float16).numpy()
            row += len(images)
            if bar is not None:
                bar.update(len(images))
    if bar is not None:
        bar.close()
    return features


def _pooled(entry: ArrayCache, features, shapes) -> np.ndarray:
    """The float32 global average of the last cached map of every row, computed once from the cache (in
    float32 from the float16 map, as :class:`zslib.engine.models.CachedBackbone` would) and cached beside it."""
    derived = ArrayCache("pooled", {"of": entry.key, "how": "float32 mean over positions of the last stage"})
    stored = derived.load()
    if stored is not None:
        return stored["pooled"]
    _, c, h, w = shapes[-1]
    start = features.shape[1] - c * h * w
    pooled = np.empty((features.shape[0], c), dtype=np.float32)
    for i in range(0, features.shape[0], 512):
        block = torch.from_numpy(np.array(features[i:i + 512, start:], dtype=np.float16)).float()
        pooled[i:i + 512] = block.reshape(len(block), c, h, w).mean(dim=(2, 3)).numpy()
    derived.save({"pooled": pooled})
    return pooled


def _code_fingerprint(backbone: str) -> str:
    """The source of everything that computes a cached value: the backbone class (and the base class that
    runs its stages), and the files of the image loading and preprocessing code -- the dataset readers that
    open and decode the images (:mod:`zslib.engine.data.datasets`, :mod:`zslib.engine.data.images`), the
    transforms, and this module -- so an edit of any of them rebuilds the cache instead of serving the maps of the
    old images."""
    return source_fingerprint(BACKBONES[canonical_backbone(backbone)], Backbone, Path(datasets.__file__),
                              Path(images.__file__), Path(transforms.__file__), Path(__file__))


class FeatureDataset(torch.utils.data.Dataset):
    """One split (``"train"`` or ``"test"``) of a feature cache: ``ds[i] -> (packed maps, label)``, or with
    ``pooled_only`` ``ds[i] -> (pooled feature, label)`` for methods that never look at the maps.

    ``tensors()`` gives the whole split at once (a tensor over the memory map: indexing it reads only the
    rows asked for), so the trainer and :func:`zslib.engine.train.embed` use their fast in-memory paths.
    """

    def __init__(self, arrays: dict, split: str, shapes, info: CacheInfo | None = None, pooled_only: bool = False):
        if split not in ("train", "test"):
            raise ValueError(f"a feature cache has the splits 'train' and 'test', not {split!r}")
        rows = np.flatnonzero(arrays["split"] == (0 if split == "train" else 1))
        self.rows = rows
        self.split = split
        self.labels = np.asarray(arrays["labels"])[rows]
        self.pooled_only = bool(pooled_only)
        self.layout = [("pool", shapes[-1][1], 1, 1)] if pooled_only else list(shapes)
        self.info = info
        self.transform = None
        self._all = arrays["pooled"] if pooled_only else arrays["features"]
        contiguous = len(rows) and rows[-1] - rows[0] + 1 == len(rows)
        self._block = self._all[rows[0]:rows[-1] + 1] if contiguous else None

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self._all[self.rows[int(i)]])), int(self.labels[i])

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        block = self._block if self._block is not None else self._all[self.rows]
        with warnings.catch_warnings():  # a read-only memory map: the tensor is only ever read, never written
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(block), torch.from_numpy(self.labels.copy())

    def __repr__(self):
        return (f"FeatureDataset({self.split}: {len(self)} images, maps "
                f"{', '.join(f'{s} {c}x{h}x{w}' for s, c, h, w in self.layout)})")


def describe(info: CacheInfo) -> str:
    """One line about a cache: built now (and how long it took) or found, where, how large."""
    what = f"built in {info['seconds']:.0f} s" if info["built"] else "found"
    return f"feature cache {what}: {info['images']} images, {info['megabytes']:.0f} MB, in {info['folder']}"



# ----------------------------------------------------------------------------------------------------
# Two views of the maps that enter the trained stages (the adapted regime, Config.train_stages)

#: The cached views of every image in the adapted regime: the 224-px centre crop and its horizontal flip.
VIEWS = ("centre", "flip")


class _Flipped(torch.utils.data.Dataset):
    """A dataset of normalized images, mirrored left-right (a per-channel normalization commutes with the
    flip, so this equals normalizing the flipped photograph)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        image, label = self.dataset[i]
        return torch.flip(image, dims=[-1]), label


def view_cache(dataset: str, backbone: str, stage: str, image_size: int, resize_size: int, *, root=None,
               batch_size: int = 64, num_workers: int = 1, progress="auto") -> tuple[dict, CacheInfo]:
    """The frozen map of ``stage`` for every image of ``dataset`` in the two :data:`VIEWS`, built if needed.

    The adapted regime (``Config.train_stages``) trains the stages after ``stage`` and reads ``stage``'s map
    from here: ``arrays["features"]`` is ``(N, 2 F)`` float16 (a read-only memory map), one row per image
    holding the centre crop's map (first ``F`` columns) and the flipped crop's map (last ``F``); ``labels``
    and ``split`` as in :func:`feature_cache`. The key holds what :func:`feature_cache`'s holds, the views and
    the source of the flip. The centre view is copied from the frozen regime's cache when it exists (the same
    network and code computed it); the flipped view is computed (about half of one cache build)."""
    shapes = layout(backbone, [stage], image_size)
    mean, std = normalization(backbone)
    cls = get_dataset_class(dataset)
    transform = test_transform(image_size, resize_size, mean, std)
    train = open_dataset(cls, root=root, split="train", transform=transform)
    test = open_dataset(cls, root=root, split="test", transform=transform)
    check_zero_shot_split(train, "train"), check_zero_shot_split(test, "test")  # before the cache is built
    key = {"dataset": cls.name, "images": _identity(train, test), "backbone": backbone,
           "weights_sha256": _weights_digest(backbone), "image_size": int(image_size),
           "resize_size": int(resize_size), "stages": [stage], "views": list(VIEWS),
           "code": _code_fingerprint(backbone) + source_fingerprint(_Flipped, _centre_from_feature_cache),
           "data": folder_identity(train.root)}
    entry = ArrayCache("views", key)
    started = time.perf_counter()
    arrays = entry.load(mmap=True)
    n = len(train) + len(test)
    if arrays is None:
        arrays = _entry_before_identity(entry, lambda idx: _rows(_inference_network(
            build_model(backbone, 8, pretrained=True).backbone.eval(), [stage], image_size), [train, test], idx,
            flipped=True))
    if arrays is None:
        width = shapes[0][1] * shapes[0][2] * shapes[0][3]
        both = torch.utils.data.ConcatDataset([train, test])
        parts = [_centre_from_feature_cache(dataset, backbone, stage, image_size, resize_size, root, width)]
        net = None
        for view in VIEWS:
            if view == "centre" and parts[0] is not None:
                continue
            net = net or _inference_network(build_model(backbone, 8, pretrained=True).backbone.eval(), [stage],
                                            image_size)
            source = both if view == "centre" else _Flipped(both)
            loader = torch.utils.data.DataLoader(source, batch_size=batch_size, shuffle=False,
                                                 num_workers=num_workers)
            parts.append(_extract(net, loader, n, width, progress_bar(progress, n, 0, desc=f"caching {view}")))
        features = np.concatenate([p for p in parts if p is not None], axis=1)
        if not np.isfinite(features).all():
            raise FloatingPointError(f"the frozen {backbone} produced values that do not fit in float16")
        labels = np.concatenate([train.labels, test.labels]).astype(np.int64)
        split = np.concatenate([np.zeros(len(train), np.int8), np.ones(len(test), np.int8)])
        entry.save({"features": features, "labels": labels, "split": split})
        arrays = entry.load(mmap=True) if entry.enabled else {"features": features, "labels": labels, "split": split}
        built, seconds = True, round(time.perf_counter() - started, 1)
    else:
        built, seconds = False, round(time.perf_counter() - started, 2)
    return arrays, CacheInfo(folder=str(entry.path), built=built, seconds=seconds, images=n,
                             megabytes=round(arrays["features"].nbytes / 2**20, 1))


def _centre_from_feature_cache(dataset, backbone, stage, image_size, resize_size, root, width):
    """The centre view of ``stage`` copied from the frozen regime's feature cache when that cache exists and
    holds ``stage`` (the same network, transforms and extraction code computed it), else ``None``."""
    stages = list(PROFILES["real"].feature_stages)
    if stage not in stages or not ArrayCache("features", {}).enabled:
        return None
    try:
        arrays, info = feature_cache(dataset, backbone, stages, image_size, resize_size, root=root, progress=False,
                                     only_if_cached=True)
    except LookupError:
        return None
    shapes = layout(backbone, stages, image_size)
    start = sum(c * h * w for s, c, h, w in shapes[:stages.index(stage)])
    out = np.empty((arrays["features"].shape[0], width), dtype=np.float16)
    for i in range(0, len(out), 512):
        out[i:i + 512] = arrays["features"][i:i + 512, start:start + width]
    return out


class RandomView:
    """The augmentation of the adapted regime: each training image is read in one of the cached
    :data:`VIEWS`, drawn uniformly from torch's generator (which the trainer seeds per step)."""

    def __call__(self, row: np.ndarray, views: int) -> np.ndarray:
        view = int(torch.randint(views, ()).item())
        width = row.shape[-1] // views
        return row[view * width:(view + 1) * width]

    def __repr__(self):
        return "RandomView()"


class ViewDataset(FeatureDataset):
    """One split of a :func:`view_cache`: ``ds[i] -> (map, label)``. With ``augment`` (training) each
    read draws a view (:class:`RandomView`); without it every read, and ``tensors()``, give the centre crop."""

    def __init__(self, arrays: dict, split: str, shapes, info: CacheInfo | None = None, augment: bool = False):
        super().__init__(arrays, split, shapes, info)
        self.views = len(VIEWS)
        self.width = arrays["features"].shape[1] // self.views
        self.transform = RandomView() if augment else None

    def __getitem__(self, i):
        row = self._all[self.rows[int(i)]]
        row = self.transform(row, self.views) if self.transform is not None else row[:self.width]
        return torch.from_numpy(np.array(row)), int(self.labels[i])

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        block, labels = super().tensors()
        return block[:, :self.width], labels
