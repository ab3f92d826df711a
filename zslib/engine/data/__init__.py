"""Data: the SynthParts image set, the five real benchmarks, batch sampling, transforms, caching.

Public names (used by the book and by the other zslib modules):

* :func:`data_root` - where real datasets live (argument, ``$ZS_DATA``, the checkout's ``data/``,
  ``~/zslib_data``).
* :class:`SynthParts`, :func:`shortcut_probe` - the procedurally rendered default image set with a
  designed shortcut (quick profile), and the linear probe that measures the shortcut.
* :class:`CUB200`, :class:`Cars196`, :class:`SOP`, :class:`InShop`, :class:`Flowers102` - the real
  datasets with the papers' zero-shot splits; each has ``download(root)`` (or a message saying where
  to get the files). Nothing downloads implicitly.
* :class:`ClassBalancedSampler` - P classes x K images per batch, deterministic, exactly resumable;
  :func:`split_batch` - one process's share of a batch when several train together.
* :func:`split_classes`, :class:`LabeledSubset` - a class-disjoint validation split and its views.
* :func:`train_transform`, :func:`test_transform` - resize / crop / flip / normalize.
* :func:`build_dataset` - the dataset a profile asks for.
* :class:`PreResizedCache`, :func:`cached` - decode every image once, keep its resized pixels (the same
  tensors as decoding each time, faster).
"""
from __future__ import annotations

from zslib.engine.data.build import build_dataset
from zslib.engine.data.image_cache import PreResizedCache, cached
from zslib.engine.data.datasets import (CUB200, DATASETS, SOP, Cars196, Flowers102, InShop, RealImageDataset,
                                        get_dataset_class)
from zslib.engine.data.download import download_url, extract_archive, verify_checksum
from zslib.engine.data.errors import (ChecksumError, CorruptFileError, CountMismatchError, DataError,
                                      ManualDownloadError, MissingDataError)
from zslib.engine.data.root import data_root
from zslib.engine.data.sampler import ClassBalancedSampler, split_batch
from zslib.engine.data.splits import LabeledSubset, labels_of, split_classes
from zslib.engine.data.synthparts import (ATTRIBUTE_NAMES, PART_NAMES, SHORTCUT_ATTRIBUTES, ProbeResult, SynthParts,
                                          design_classes, shortcut_probe)
from zslib.engine.data.transforms import IMAGENET_MEAN, IMAGENET_STD, test_transform, train_transform

__all__ = [
    "data_root", "SynthParts", "shortcut_probe", "ProbeResult", "design_classes", "PART_NAMES",
    "ATTRIBUTE_NAMES", "SHORTCUT_ATTRIBUTES", "CUB200", "Cars196", "SOP", "InShop", "Flowers102",
    "RealImageDataset", "DATASETS", "get_dataset_class", "download", "download_url", "extract_archive",
    "verify_checksum", "ClassBalancedSampler", "split_batch", "split_classes", "LabeledSubset", "labels_of",
    "train_transform", "test_transform", "IMAGENET_MEAN",
    "IMAGENET_STD", "build_dataset", "PreResizedCache", "cached", "DataError", "MissingDataError",
    "ChecksumError", "CorruptFileError", "CountMismatchError", "ManualDownloadError",
]


def download(name: str, root=None):
    """Download a real dataset by name (``'cub200'``, ``'sop'``, ``'flowers102'``; ``'cars196'`` and
    ``'inshop'`` raise :class:`ManualDownloadError` explaining where to get them)."""
    return get_dataset_class(name).download(root)
