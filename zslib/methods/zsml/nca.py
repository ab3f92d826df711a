"""NCA: neighbourhood components analysis (Goldberger, Roweis, Hinton and Salakhutdinov, NIPS 2004;
``goldberger2004nca``), the classic Mahalanobis metric learner ZSML is compared with (Sec. 1).

NCA learns a linear map ``L`` of fixed feature vectors so that a soft nearest-neighbour rule is right
as often as possible on the training set::

    p_ij = exp(-||L x_i - L x_j||^2) / sum_{k != i} exp(-||L x_i - L x_k||^2),   maximize  sum_i sum_{j: y_j = y_i} p_ij

which is a Mahalanobis distance with ``M = L^T L``. Here scikit-learn's
``NeighborhoodComponentsAnalysis`` fits ``L`` once, on the fixed features of the training set
(:meth:`NCA.prepare`; ``random_state`` = the run's seed), with ``components`` rows (``None``: as many as
the feature has). Nothing is trained by the trainer (``trains = False``). Evaluation is ZSML's pairwise
protocol (:func:`zslib.methods.zsml.pairwise.pairwise_metrics`) with the Euclidean distance of ``L x``, on the same
class-stratified sample that a ZSML run with the same seed and ``eval_per_class`` scores, so the two are
paired image for image.

:func:`zslib.engine.runner.load_model` rebuilds the network without the fit (``L`` is not checkpointed, as
nothing is trained); call ``prepare`` again to refit it.
"""
from __future__ import annotations

import numpy as np
from sklearn.neighbors import NeighborhoodComponentsAnalysis
import torch
from torch import nn

from zslib.methods.zsml.pairwise import euclidean_scorer, pairwise_metrics
from zslib.engine.threads import one_thread
from zslib.engine.data.splits import labels_of
from zslib.engine.train.embed import embed
from zslib.engine.registry import register
from zslib.engine.method import Method, Param, number

__all__ = ["NCA", "LinearMap"]


def _optional_count(value, name="value"):
    return None if value is None else number(low=1, integer=True)(value, name)


_optional_count.spec = {**number(low=1, integer=True).spec, "optional": True}  # for zslib.engine.catalog


def _optional_size(value, name="value"):
    return None if value is None else number(low=2, integer=True)(value, name)


_optional_size.spec = {**number(low=2, integer=True).spec, "optional": True}


class LinearMap(nn.Module):
    """``x -> L u(x)``, ``u`` the network's pooled feature; ``L`` (a buffer) starts as the identity's first
    ``components`` rows and is set by the fit."""

    def __init__(self, net: nn.Module, components: int | None):
        super().__init__()
        d = net.feature_dim
        out = d if components is None else min(int(components), d)
        self.net = net
        self.register_buffer("L", torch.eye(d)[:out].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.pooled(x) @ self.L.T


@register
class NCA(Method):
    name = "nca"
    title = "neighbourhood components analysis (scikit-learn) on the fixed features, evaluated pairwise"
    paper = "goldberger2004nca"
    equations = "p_ij = softmax over j != i of -||L x_i - L x_j||^2; maximize the expected correct neighbours"
    trains = False
    params = {
        "components": Param(64, "rows of L (the dimension it projects to); None: the feature's dimension",
                            _optional_count),
        "max_iter": Param(50, "iterations of scikit-learn's L-BFGS fit", number(low=1, integer=True)),
        "eval_per_class": Param(10, "images per class scored pairwise at evaluation (as zsml); None: all",
                                _optional_size),
        "neighbors": Param(10, "neighbours per image in the graph that spectral clustering cuts (as zsml)",
                           number(low=1, integer=True)),
    }

    def __init__(self, config=None, model: nn.Module | None = None, num_classes: int | None = None):
        super().__init__(config, model, num_classes)
        self.seed = int(getattr(config, "seed", 0))

    @classmethod
    def attach(cls, model, params):
        return LinearMap(model, cls.validate(params)["components"])

    @one_thread()
    def prepare(self, model: LinearMap, train_set) -> None:
        """Fit ``L`` by scikit-learn's NCA on the pooled features of ``train_set``."""
        y = np.asarray(labels_of(train_set), dtype=np.int64)
        net = model.net
        x, _ = embed(_Pooled(net), train_set, device=model.L.device)
        fit = NeighborhoodComponentsAnalysis(n_components=model.L.shape[0], max_iter=self.p["max_iter"],
                                             random_state=self.seed).fit(x.double().numpy(), y)
        model.L.copy_(torch.from_numpy(fit.components_).to(model.L))

    def terms(self, phase, model, images, labels):
        raise RuntimeError("nca is fitted by scikit-learn in prepare(); the runner only evaluates it")

    def pair_evaluator(self, model):
        p = self.p

        def evaluate(features, labels, seed=0, split=None):
            return pairwise_metrics(euclidean_scorer, features, labels, per_class=p["eval_per_class"], seed=seed,
                                    neighbors=p["neighbors"])

        return evaluate


class _Pooled(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net.pooled(x)
