"""No training at all: the pooled feature of the network as it comes, the floor every method must beat.

With an ImageNet-pretrained network (the ``real`` and ``full`` profiles) this is the honest baseline of
zero-shot retrieval: metric learning on the seen classes is worth something only where it beats the
features it started from, and on the unseen classes it can also do worse (the ``real`` profile's tables
show which). With the quick profile's randomly initialized CNN it is a random network. The embedding is
the L2-normalized global pooling of the last map; the method trains nothing (``trains = False``), so the
runner only evaluates.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from zslib.engine.registry import register
from zslib.engine.method import Method

__all__ = ["Pretrained", "PooledFeatures"]


class PooledFeatures(nn.Module):
    """A network's pooled backbone feature as its embedding (unit length): ``f(x) = u / ||u||``."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return F.normalize(self.net.pooled(x), dim=1)


@register
class Pretrained(Method):
    name = "pretrained"
    title = "the network's pooled feature as it comes, without any training"
    paper = "tan2019efficientnet"
    equations = "f(x) = u(x) / ||u(x)||, u the globally pooled last map"
    trains = False

    @classmethod
    def attach(cls, model, params):
        return PooledFeatures(model)

    def terms(self, phase, model, images, labels):
        raise RuntimeError("the pretrained method trains nothing; the runner only evaluates it")
