"""JRD: distance metric learning with joint representation diversification (Chu et al., ICML 2020;
``chu2020jrd``).

Section 2 of the paper motivates JRD with an experiment on the *explicit* penalty on intra-class
distances (its Eq. 4) added to a classification loss: the stronger the penalty, the more compact the seen
classes, the worse the unseen ones (its Fig. 2). :class:`IntraClassPenalty` is that objective,
``AM-Softmax + alpha * D_intra`` with :func:`zslib.regularizers.intra_class_distance`.
"""
from __future__ import annotations

from ..regularizers import intra_class_distance
from . import register
from .base import Method, Param, number, one_of

__all__ = ["IntraClassPenalty"]


@register
class IntraClassPenalty(Method):
    name = "intra"
    title = "a metric loss plus an explicit penalty on intra-class distances (JRD's motivating experiment)"
    paper = "chu2020jrd"
    equations = "Sec. 2, Eq. 4 and Fig. 2: L = L_m + alpha * D_intra"
    params = {
        "alpha": Param(0.0, "weight of the intra-class distance penalty", number(low=0.0)),
        "reduction": Param("mean", "'mean' or 'sum' over the classes of the batch (the extracted text of Eq. 4 "
                                   "lost its summation sign)", one_of("mean", "sum")),
    }

    def terms(self, phase, model, images, labels):
        emb = model(images)
        return {self.loss_name: self.loss(emb, labels),
                "intra": self.p["alpha"] * intra_class_distance(emb, labels, reduction=self.p["reduction"])}
