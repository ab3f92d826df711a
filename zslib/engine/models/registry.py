"""The backbones by name, and the shapes of the maps each one can cache (no network is built here).

Kept apart from :mod:`zslib.engine.models.embedding` so that the weight files, the cached backbone and the feature
cache can look a backbone up without importing the module that builds networks from them.
"""
from __future__ import annotations

import math

from zslib.engine.models.backbones import (Backbone, EfficientNetLite0Backbone, GoogLeNetBackbone, ResNet50Backbone,
                                           SmallCNNBackbone, TFEfficientNetLite0Backbone)
from zslib.engine.models.bninception import BNInceptionBackbone

__all__ = ["BACKBONES", "canonical_backbone", "layout"]

BACKBONES: dict[str, type[Backbone]] = {
    "smallcnn": SmallCNNBackbone,
    "googlenet": GoogLeNetBackbone,
    "resnet50": ResNet50Backbone,
    "bninception": BNInceptionBackbone,
    "efficientnet_lite0": EfficientNetLite0Backbone,
    "tf_efficientnet_lite0": TFEfficientNetLite0Backbone,  # the same weights in TensorFlow's padding and epsilon
}

_ALIASES = {key.replace("_", ""): key for key in BACKBONES}


def canonical_backbone(name: str) -> str:
    """The key of :data:`BACKBONES` for ``name`` (case, ``-`` and ``_`` do not matter)."""
    if not isinstance(name, str):
        raise TypeError(f"backbone must be a name (str), got {type(name).__name__}")
    key = name.strip().lower().replace("-", "").replace("_", "")
    if key not in _ALIASES:
        raise ValueError(f"unknown backbone {name!r}; choose one of {sorted(BACKBONES)}")
    return _ALIASES[key]


def layout(backbone: str, stages, image_size: int) -> list[tuple[str, int, int, int]]:
    """``[(stage, channels, height, width), ...]`` of the cached maps of ``backbone`` at ``image_size`` px."""
    cls = BACKBONES[canonical_backbone(backbone)]
    out = []
    for s in stages:
        if s not in cls.stage_channels:
            raise ValueError(f"{backbone} has no stage {s!r} to cache; choose from {list(cls.stage_channels)}")
        side = math.ceil(image_size / cls.stage_strides[s])
        out.append((s, cls.stage_channels[s], side, side))
    return out
