"""One call from a profile to a dataset: ``build_dataset(profile, split, train)``.

* quick profile (``profile.dataset == "synthparts"``): :class:`~zslib.engine.data.SynthParts` at
  ``profile.image_size`` px with ``profile.synth_images_per_class`` images per class; ``"train"``
  is the seen split and ``"test"`` the unseen split. Images are rendered in memory with their random
  pose already, so no augmentation is added; ``mean``/``std`` (if given) normalize them.
* real profile (``profile.feature_stages`` not empty): the maps of those stages of the frozen pretrained
  ``profile.backbone``, read from the feature cache (:mod:`zslib.engine.data.features`; built on first use), as a
  :class:`~zslib.engine.data.features.FeatureDataset` of the split.
* full profile: the real dataset named by ``profile.dataset`` with
  :func:`~zslib.engine.data.train_transform` (``train=True``) or :func:`~zslib.engine.data.test_transform`, sized
  by ``profile.resize_size`` / ``profile.image_size`` and normalized with the backbone's
  ``mean``/``std`` (ImageNet statistics when not given). With ``profile.image_cache`` (on in the full
  profile) the images are read through the pre-resized image cache (:func:`~zslib.engine.data.cached`, built on
  first use), which gives the same tensors without decoding a JPEG per image and step.
"""
from __future__ import annotations

from torchvision.transforms import v2

from zslib.engine.data.datasets import get_dataset_class, open_dataset
from zslib.engine.data.image_cache import cached
from zslib.engine.data.splits import check_zero_shot_split
from zslib.engine.data.synthparts import SynthParts
from zslib.engine.data.transforms import IMAGENET_MEAN, IMAGENET_STD, test_transform, train_transform
from zslib.engine.models.registry import layout
from zslib.engine.profile import get_profile

__all__ = ["build_dataset"]

_TO_SYNTH = {"train": "seen", "seen": "seen", "test": "unseen", "unseen": "unseen", "all": "all"}
_TO_REAL = {"seen": "train", "unseen": "test"}


def build_dataset(profile=None, split: str = "train", train: bool | None = None, *, root=None,
                  mean=None, std=None, seed: int = 0, pooled_only: bool = False):
    """The dataset the profile asks for (see the module docstring).

    ``split``: ``"train"``/``"test"`` (or ``"seen"``/``"unseen"``; In-Shop also ``"query"``/``"gallery"``).
    ``train``: training-time augmentation; defaults to ``split`` being the training split.
    ``root``: the data root for real datasets (default :func:`~zslib.engine.data.data_root`).
    ``seed``: SynthParts' image seed (the class design never changes).
    ``pooled_only`` (real profile): the pooled feature of each image instead of its cached maps.
    """
    if profile is None:
        profile = get_profile()
    split = str(split).lower()
    if train is None:
        train = split in ("train", "seen")
    if str(profile.dataset).lower() == "synthparts" and not tuple(getattr(profile, "feature_stages", ()) or ()):
        if split not in _TO_SYNTH:
            raise ValueError(f"SynthParts splits are 'train' (= seen), 'test' (= unseen) or 'all', not {split!r}")
        transform = None
        if mean is not None or std is not None:
            transform = v2.Normalize(list(mean), list(std))
        return SynthParts(_TO_SYNTH[split], image_size=profile.image_size,
                          images_per_class=profile.synth_images_per_class, seed=seed, transform=transform)
    if tuple(getattr(profile, "feature_stages", ()) or ()):
        return _cached_split(profile, split, root, pooled_only)
    cls = get_dataset_class(profile.dataset)
    mean = IMAGENET_MEAN if mean is None else mean
    std = IMAGENET_STD if std is None else std
    make = train_transform if train else test_transform
    transform = make(profile.image_size, profile.resize_size, mean, std)
    dataset = open_dataset(cls, root=root, split=_TO_REAL.get(split, split), transform=transform)
    if split in ("train", "seen", "test", "unseen"):
        check_zero_shot_split(dataset, split)  # before an image cache is built from it
    if getattr(profile, "image_cache", False):
        return cached(dataset, profile.resize_size)
    return dataset


def _cached_split(profile, split: str, root, pooled_only: bool):
    from zslib.engine.data.features import FeatureDataset, feature_cache  # features imports the models, which import
    # this package (zslib.engine.data.download): imported when a cached-feature profile is built, not with the package

    split = _TO_REAL.get(split, split)
    if split not in ("train", "test"):
        raise ValueError(f"a feature cache holds the splits 'train' (seen) and 'test' (unseen), not {split!r}")
    stages = tuple(profile.feature_stages)
    arrays, info = feature_cache(profile.dataset, profile.backbone, stages, profile.image_size, profile.resize_size,
                                 root=root, images_per_class=getattr(profile, "synth_images_per_class", None))
    return FeatureDataset(arrays, split, layout(profile.backbone, stages, profile.image_size), info, pooled_only)
