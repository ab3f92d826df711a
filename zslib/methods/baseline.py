"""The baseline: a metric loss and nothing else, ``L = L_m(f(x), y)``.

Every method chapter compares against it: the same network, data, optimizer and seeds, with the method's
extra terms and modules removed. ``Config.loss`` names the loss (:data:`zslib.engine.losses.LOSSES`).
"""
from __future__ import annotations

from zslib.engine.registry import register
from zslib.engine.method import Method

__all__ = ["Baseline"]


@register
class Baseline(Method):
    name = "baseline"
    title = "the metric loss alone"
    paper = "musgrave2020realitycheck"
    equations = "L = L_m (the loss named by Config.loss)"

    def terms(self, phase, model, images, labels):
        return {self.loss_name: self.loss(model(images), labels)}
