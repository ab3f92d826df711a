"""The papers' preprocessing, scaled by the profile.

CML, DeML and JRD resize images to 256 px, take a random 224 px crop with a random horizontal flip for
training and the central 224 px crop for testing. The profile supplies the two sizes
(``resize_size``, ``image_size``: 256 / 224 in the full profile, 72 / 64 in the quick one) and the
backbone supplies its own normalization (``mean``, ``std``; e.g. ImageNet statistics for GoogLeNet,
``(x - 127) / 128`` i.e. mean 0.498, std 0.502 for EfficientNet-Lite0).

The transforms accept PIL images and tensors (uint8 0-255 or float 0-1, ``C x H x W``) and return a
float32 tensor ``3 x image_size x image_size``.
"""
from __future__ import annotations

import torch
from torchvision.transforms import v2

__all__ = ["train_transform", "test_transform", "IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _check(image_size, resize_size, mean, std):
    if int(image_size) < 1 or int(resize_size) < int(image_size):
        raise ValueError(f"need 1 <= image_size <= resize_size, got image_size={image_size}, "
                         f"resize_size={resize_size}")
    if (mean is None) != (std is None):
        raise ValueError("give both mean and std (or neither, for no normalization)")
    if mean is not None and (len(mean) != 3 or len(std) != 3 or min(std) <= 0):
        raise ValueError(f"mean and std need 3 entries each and std > 0, got {mean}, {std}")


def _tail(mean, std):
    steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if mean is not None:
        steps.append(v2.Normalize(list(mean), list(std)))
    return steps


def train_transform(image_size: int, resize_size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """Resize the shorter side to ``resize_size``, random ``image_size`` crop, random flip, normalize."""
    _check(image_size, resize_size, mean, std)
    return v2.Compose([v2.Resize(int(resize_size), antialias=True), v2.RandomCrop(int(image_size)),
                       v2.RandomHorizontalFlip(), *_tail(mean, std)])


def test_transform(image_size: int, resize_size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """Resize the shorter side to ``resize_size``, central ``image_size`` crop, normalize."""
    _check(image_size, resize_size, mean, std)
    return v2.Compose([v2.Resize(int(resize_size), antialias=True), v2.CenterCrop(int(image_size)),
                       *_tail(mean, std)])
