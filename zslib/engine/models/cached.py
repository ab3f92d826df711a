"""A backbone whose maps come from a feature cache (:mod:`zslib.engine.data.features`) instead of being computed.

The ``real`` profile runs a pretrained network once over every image and stores the maps of a few stages.
:class:`CachedBackbone` stands in for that frozen network during training and evaluation: its input is
one row of the cache per image (the stages' maps, flattened and concatenated), and it hands the maps back
by name, with the same names, channel counts and roles as the network it replaces. Everything built on a
:class:`~zslib.engine.models.Backbone` -- the embedding head, attention over intermediate maps, object attention
-- therefore works on it unchanged. It has no parameters: nothing below the cached stages trains.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from zslib.engine.models.backbones import Backbone
from zslib.engine.models.registry import BACKBONES, canonical_backbone, layout

__all__ = ["CachedBackbone"]


class CachedBackbone(Backbone):
    """The maps of ``stages`` of ``backbone`` (a key of :data:`zslib.engine.models.BACKBONES`) at ``image_size``
    px, read from packed cache rows ``(B, F)``. ``"pool"`` pools the last cached stage. With ``pooled_only``
    the rows hold only that pooled feature (methods that never look at the maps read 50x less)."""

    def __init__(self, backbone: str, stages: Sequence[str], image_size: int, pooling: str = "avg",
                 pooled_only: bool = False):
        super().__init__(pooling)

        source = BACKBONES[canonical_backbone(backbone)]
        self.pooled_only = bool(pooled_only)
        self.layout = layout(backbone, stages, image_size)
        if self.pooled_only:
            if pooling != "avg":
                raise ValueError("the cache pools by averaging; pooling must be 'avg' with pooled_only")
            self.layout = []
            self.pooled_width = layout(backbone, stages, image_size)[-1][1]
        self.name = f"{source.name} (cached)"
        self.source = source.name
        self.input_mean, self.input_std = source.input_mean, source.input_std
        self.stage_channels = {s: c for s, c, _, _ in self.layout}
        self.stage_strides = {s: source.stage_strides[s] for s, *_ in self.layout}
        self.roles = {role: tuple(s for s in names if s in self.stage_channels)
                      for role, names in source.roles.items()}
        self.roles = {role: names for role, names in self.roles.items() if names}
        self.width = self.pooled_width if self.pooled_only else sum(c * h * w for _, c, h, w in self.layout)

    def _stages(self):
        raise NotImplementedError("a cached backbone has no stages to run; its maps are read with features()")

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.width:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{self.name} expects rows of the feature cache shaped (B, {self.width}), got {shape}; "
                             "feed it a zslib.engine.data.features.FeatureDataset, not images")

    def maps(self, x: torch.Tensor, names: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
        """The cached maps of the batch (all, or those named), by stage name, as float32 ``(B, C, H, W)``."""
        self._check_input(x)
        wanted = None if names is None else set(names)
        out, start = {}, 0
        for name, c, h, w in self.layout:
            size = c * h * w
            if wanted is None or name in wanted:
                out[name] = x[:, start:start + size].float().reshape(len(x), c, h, w)
            start += size
        return out

    @property
    def feature_dim(self) -> int:
        return self.pooled_width if self.pooled_only else self.layout[-1][1]

    def features(self, x: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        names = self._check_names(names, self.stage_names)
        if self.pooled_only:
            self._check_input(x)
            return {"pool": x.float()}
        last = self.layout[-1][0]
        maps = self.maps(x, [n for n in names if n != "pool"] + ([last] if "pool" in names else []))
        if "pool" in names:
            maps["pool"] = self.pool(maps[last])
        return {n: maps[n] for n in names}

    def run(self, x: torch.Tensor, start_after: str | None = None, until: str | None = None) -> torch.Tensor:
        """The cached map ``until`` (default: the last). Nothing runs between cached stages; continuing
        from the last stage (``start_after`` = the last, ``until`` None or the last) runs nothing and returns
        ``x``, the map given."""
        last = self.layout[-1][0] if self.layout else None
        if start_after is not None and start_after == last and until in (None, last):
            return x
        if start_after is not None:
            raise ValueError(f"{self.name} cannot continue from a modified map: the stages after "
                             f"{start_after!r} are frozen and were computed once, when the cache was built")
        if self.pooled_only:
            raise ValueError(f"{self.name} holds only the pooled feature: this method reads no maps")
        until = until or self.layout[-1][0]
        return self.maps(x, [until])[until]

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        if self.pooled_only:
            self._check_input(x)
            return x.float()
        return self.pool(self.run(x))

    def extra_repr(self) -> str:
        if self.pooled_only:
            return f"pooled {self.pooled_width}"
        return ", ".join(f"{s} {c}x{h}x{w}" for s, c, h, w in self.layout)
