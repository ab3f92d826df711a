"""BN-Inception: Inception-v2 with Batch Normalization (Ioffe & Szegedy 2015, Fig. 5 of that paper).

This is the network most deep-metric-learning code starts from (Adapt-Adv Sec. 4.3 uses it and reads
its ``inception_4d``, ``4e`` and ``5a`` outputs, 608x14x14, 1056x7x7 and 1024x7x7 at 224 px). Its
ImageNet weights are the Caffe model converted to PyTorch and published in Cadene's
``pretrainedmodels`` as ``bn_inception-52deb4733.pth``. :class:`BNInception` registers its layers
under exactly that file's parameter names (``conv1_7x7_s2``, ``conv1_7x7_s2_bn``,
``inception_3a_double_3x3_reduce``, ..., ``last_linear``) so the file loads without renaming.

Every convolution has a bias and is followed by BatchNorm and ReLU. Inside a module the branches
are 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3 ("double 3x3"); pool -> 1x1 ("pool_proj"), concatenated in
that order. Modules 3c and 4e reduce resolution: their 3x3 convs have stride 2, they have no 1x1
branch, and their pool branch is a bare 3x3/2 max pool.

Input convention. The converted weights expect Caffe input: BGR channel order, range 0-255, the
per-channel mean (104, 117, 128) in BGR order subtracted, no division. zslib applies it in two
places: the data transform normalizes RGB images in [0, 1] with ``mean = (128, 117, 104) / 255``
and ``std = 1 / 255`` (what :func:`zslib.engine.models.normalization` returns for ``"bninception"``),
giving RGB values in Caffe's range with the mean removed, and the model itself reverses the
channels to BGR as its first operation. Readers therefore feed RGB like for every other backbone.
"""
from __future__ import annotations

import torch
from torch import nn

from zslib.engine.models.backbones import Backbone

__all__ = ["BNInception", "BNInceptionBackbone", "INCEPTION_SPECS"]

# name: (in, 1x1, 3x3 reduce, 3x3, double-3x3 reduce, double 3x3, pool kind, pool proj, stride)
# pool proj 0 and 1x1 0 mean "no such branch" (the stride-2 modules 3c and 4e).
INCEPTION_SPECS: dict[str, tuple] = {
    "3a": (192, 64, 64, 64, 64, 96, "avg", 32, 1),
    "3b": (256, 64, 64, 96, 64, 96, "avg", 64, 1),
    "3c": (320, 0, 128, 160, 64, 96, "max", 0, 2),
    "4a": (576, 224, 64, 96, 96, 128, "avg", 128, 1),
    "4b": (576, 192, 96, 128, 96, 128, "avg", 128, 1),
    "4c": (576, 160, 128, 160, 128, 160, "avg", 128, 1),
    "4d": (608, 96, 128, 192, 160, 192, "avg", 128, 1),
    "4e": (608, 0, 128, 192, 192, 256, "max", 0, 2),
    "5a": (1056, 352, 192, 320, 160, 224, "avg", 128, 1),
    "5b": (1024, 352, 192, 320, 192, 224, "max", 128, 1),
}


def _out_channels(spec: tuple) -> int:
    c_in, c1, _, c3, _, cd, _, cp, stride = spec
    return c1 + c3 + cd + (cp if cp else c_in)


class BNInception(nn.Module):
    """The BN-Inception network with the converted Caffe file's parameter names.

    ``forward`` returns ImageNet logits for BGR 0-255 mean-subtracted input (the Caffe convention;
    :class:`BNInceptionBackbone` adds the RGB -> BGR flip). Batch statistics use PyTorch's default
    momentum; the converted file's ``momentum=0.9`` was a Caffe-to-PyTorch slip and is not copied.
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self._unit("conv1_7x7_s2", 3, 64, 7, stride=2, padding=3)
        self.pool1_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self._unit("conv2_3x3_reduce", 64, 64, 1)
        self._unit("conv2_3x3", 64, 192, 3, padding=1)
        self.pool2_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        for name, spec in INCEPTION_SPECS.items():
            self._inception_module(name, spec)
        self.last_linear = nn.Linear(1024, num_classes)

    def _unit(self, prefix: str, c_in: int, c_out: int, kernel: int, stride: int = 1, padding: int = 0) -> None:
        """Register conv ``prefix`` and its BatchNorm ``prefix_bn`` (ReLU follows in forward)."""
        setattr(self, prefix, nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding))
        setattr(self, prefix + "_bn", nn.BatchNorm2d(c_out, eps=1e-5))

    def _inception_module(self, name: str, spec: tuple) -> None:
        c_in, c1, c3r, c3, cdr, cd, pool, cp, stride = spec
        p = f"inception_{name}_"
        if c1:
            self._unit(p + "1x1", c_in, c1, 1)
        self._unit(p + "3x3_reduce", c_in, c3r, 1)
        self._unit(p + "3x3", c3r, c3, 3, stride=stride, padding=1)
        self._unit(p + "double_3x3_reduce", c_in, cdr, 1)
        self._unit(p + "double_3x3_1", cdr, cd, 3, padding=1)
        self._unit(p + "double_3x3_2", cd, cd, 3, stride=stride, padding=1)
        if stride == 2:
            setattr(self, p + "pool", nn.MaxPool2d(3, stride=2, ceil_mode=True))
        elif pool == "avg":
            setattr(self, p + "pool", nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=True))
        else:
            setattr(self, p + "pool", nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True))
        if cp:
            self._unit(p + "pool_proj", c_in, cp, 1)

    def unit(self, prefix: str, x: torch.Tensor) -> torch.Tensor:
        """conv -> BatchNorm -> ReLU of the unit named ``prefix``."""
        return torch.relu(getattr(self, prefix + "_bn")(getattr(self, prefix)(x)))

    def stem1(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool1_3x3_s2(self.unit("conv1_7x7_s2", x))

    def stem2(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool2_3x3_s2(self.unit("conv2_3x3", self.unit("conv2_3x3_reduce", x)))

    def inception(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The output of inception module ``name`` (``"3a"`` .. ``"5b"``)."""
        p = f"inception_{name}_"
        c_in, c1, _, _, _, _, _, cp, _ = INCEPTION_SPECS[name]
        branches = []
        if c1:
            branches.append(self.unit(p + "1x1", x))
        branches.append(self.unit(p + "3x3", self.unit(p + "3x3_reduce", x)))
        double = self.unit(p + "double_3x3_reduce", x)
        branches.append(self.unit(p + "double_3x3_2", self.unit(p + "double_3x3_1", double)))
        pooled = getattr(self, p + "pool")(x)
        branches.append(self.unit(p + "pool_proj", pooled) if cp else pooled)
        return torch.cat(branches, dim=1)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem2(self.stem1(x))
        for name in INCEPTION_SPECS:
            x = self.inception(name, x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_linear(self.forward_features(x).mean(dim=(2, 3)))


class BNInceptionBackbone(Backbone):
    """:class:`BNInception` as a backbone (reads ``bn_inception-52deb4733.pth``).

    Input: RGB images normalized with ``mean = (128, 117, 104) / 255`` and ``std = 1 / 255``; the
    first stage reverses the channels to BGR (see the module docstring). Maps: ``stem1`` (stride 4),
    ``stem2`` (stride 8), ``inception3a`` .. ``inception5b`` and ``pool``.
    """

    name = "bninception"
    input_mean = (128 / 255, 117 / 255, 104 / 255)
    input_std = (1 / 255, 1 / 255, 1 / 255)
    classifier_attr = "last_linear"
    classifier_prefix = "last_linear."
    stage_channels = {"stem1": 64, "stem2": 192, **{f"inception{n}": _out_channels(s) for n, s in INCEPTION_SPECS.items()}}
    stage_strides = {
        "stem1": 4, "stem2": 8, "inception3a": 8, "inception3b": 8, "inception3c": 16,
        "inception4a": 16, "inception4b": 16, "inception4c": 16, "inception4d": 16, "inception4e": 32,
        "inception5a": 32, "inception5b": 32,
    }
    roles = {
        "object_attention": ("inception4e", "inception5b"),
        "intermediate": ("inception4d", "inception4e", "inception5a"),
        "channel_attention": ("inception3c",),
    }

    def __init__(self, pooling: str = "avg"):
        super().__init__(pooling)
        self.net = BNInception()

    def _stages(self):
        net = self.net
        stages = [("stem1", lambda x: net.stem1(x.flip(1))), ("stem2", net.stem2)]
        for name in INCEPTION_SPECS:
            stages.append((f"inception{name}", lambda x, name=name: net.inception(name, x)))
        return stages
