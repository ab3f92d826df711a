"""ZSML: zero-shot metric learning (Xu, Cao, Yang, Yang and Deng, IJCAI 2019; ``xu2019zsml``).

ZSML learns no embedding. On *fixed* feature vectors it learns a similarity of two of them,
``s_ij = S(R(x_i, x_j))`` (Eq. 1-2, :mod:`zslib.methods.zsml.relation`), by regressing ``s_ij`` onto a
continuous label ``y_ij`` that is itself updated (Eq. 3-8, :mod:`zslib.methods.zsml.cross_update`). This file puts the
pieces together as a method of the trainer, following Algorithm 1:

* **The pair set P and its labels are the method's state.** :meth:`ZSML.prepare` computes the fixed
  feature of every training image once and draws ``N = pairs`` pairs of them
  (:func:`~zslib.methods.zsml.cross_update.random_pairs`, seeded by the run's seed). The first step labels them by Eq. 3
  (normalized by the largest squared distance in ``P``). Pair ids, positive flags, the labels ``y`` and
  their Eq. 3 start are buffers, saved in every checkpoint, so a resumed run continues with the labels
  where they were.
* **Phases** (one training step = one iteration of Algorithm 1, on one mini-batch of ``batch_pairs``
  pairs of ``P`` drawn without replacement): ``"network"`` computes ``s`` for the batch and minimizes
  Eq. 7 over the pair network with ``y`` fixed (steps 5-6); ``"labels"`` takes Eq. 8's gradient step on
  the labels of the same pairs with ``s`` fixed, ``y <- y - label_lr * lambda * dL_y/dy`` (step 4). Both
  use the same forward pass, as steps 3-6 do. Only the label phase writes the labels; it has no
  optimizer (its step is plain gradient descent, as Algorithm 1 writes it, not Adam).
* **Fixed features.** ``features="pooled"``: the backbone's pooled feature. On the ``real`` profile it is
  the frozen ImageNet EfficientNet-Lite0 feature (1,280-d), the analogue of the paper's HOG/GIST/LBP
  descriptors; on the ``quick`` profile it is the pooled feature of the small CNN *as initialized* from
  the run's seed (a fixed random-convolution feature: nothing below the pair network ever trains).
  ``features="embedding"`` with ``metric_steps = T`` is Table 6's "Lifted + ZSML": for the first ``T``
  steps only the ``"metric"`` phase runs and trains the embedding network with ``Config.loss`` (for
  instance ``lifted_structure``) exactly as the baseline method would; then the embedding is frozen,
  the fixed features are its outputs, and ZSML trains on top. The trainer's class-balanced image
  batch is used only by that phase: ZSML's unit of data is a pair of ``P``.
* **Evaluation** (:meth:`ZSML.pair_evaluator`): :func:`zslib.methods.zsml.pairwise.pairwise_metrics` scores every
  pair of a class-stratified sample of each split (``eval_per_class`` images per class; ``None``: all)
  and reports Recall@K and ACC / NMI / purity of spectral clustering. The same sample is also evaluated
  with the Euclidean distance of the input features (keys ``"input R@1"``, ``"input ACC"``, ...): the
  paper's "Euclidean" row, paired with ZSML on the very same images (``input_metric="normalized"``: of
  the L2-normalized features, which rank as the cosine does). In the splits named by ``gallery_splits`` the
  sample is only the queries, each ranked against every image of the split, so Recall@K is that of every
  image (:func:`~zslib.methods.zsml.pairwise.pairwise_metrics` with ``full_gallery``).

The defaults are the paper's (Sec. 5.1 and Table 1): ``k = 96`` kernels 8 tall, 2 wide, stride 10; S with
1,000 and 1,000 hidden units; ``lambda = 0.1``; ``alpha = 0.3`` (``beta = 1 - alpha``); label step rate
0.002 (Caffe's base learning rate, which Algorithm 1 also uses for the labels). What the paper does not
give is ours and said so: ``N`` (``pairs``), the share of positive pairs, the mini-batch of pairs, and the
optimizer of the network (the book's Adam, at ``Config.objective_lr``; default ``new_layer_mult * lr``).
Intermediate evaluations during training (``eval_every < iterations``) see only the input features:
evaluate at the end.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from zslib.methods.zsml import cross_update as cu
from zslib.methods.zsml.relation import ZSML_ARCHITECTURE, pair_similarity
from zslib.methods.zsml.pairwise import euclidean_scorer, normalized_euclidean_scorer, pairwise_metrics
from zslib.engine.train.optim import model_groups, own_parameters_group
from zslib.engine.data.splits import labels_of
from zslib.engine.train.embed import embed
from zslib.engine.registry import register
from zslib.engine.method import Method, Param, boolean, number, one_of

__all__ = ["ZSML", "ZSMLNet", "EVERY_UNSEEN_IMAGE"]

#: The evaluation of a ZSML test row in the book's headline tables: 10 query images per unseen class, each ranked
#: against every unseen image (Recall@K of every image, estimated without bias from the sampled queries), and the
#: fixed comparator on L2-normalized features, which ranks as the cosine of the untrained-feature floor does. A
#: sample scored only against itself (4 images per class: 3 right answers among 203) is a different, much easier
#: retrieval task, and its raw-feature Euclidean distance ranks worse than the cosine.
EVERY_UNSEEN_IMAGE = {"eval_per_class": 10, "gallery_splits": ["unseen"], "input_metric": "normalized"}


def _sizes(value, name="value"):
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise TypeError(f"{name} must be a non-empty list of layer widths, e.g. [1000, 1000], got {value!r}")
    return [number(low=1, integer=True)(v, f"{name} entry") for v in value]


_sizes.spec = {"kind": "sizes"}  # for zslib.engine.catalog


_SPLITS = ("seen", "val", "unseen")


def _splits(value, name="value"):
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not value:
        raise TypeError(f"{name} must be None or a non-empty list of split names from {list(_SPLITS)}, got {value!r}")
    if any(v not in _SPLITS for v in value) or len(set(value)) != len(value):
        raise ValueError(f"{name} must list distinct split names from {list(_SPLITS)}, got {value!r}")
    return list(value)


_splits.spec = {"kind": "names", "optional": True, "options": list(_SPLITS)}  # for zslib.engine.catalog


def _optional(check):
    def optional(value, name="value"):
        return None if value is None else check(value, name)
    optional.spec = {**check.spec, "optional": True}  # for zslib.engine.catalog
    return optional


class ZSMLNet(nn.Module):
    """What ZSML trains and evaluates: the fixed features of an image and the pair network over them.

    ``forward(x)`` gives the fixed feature vector ZSML compares (the backbone's pooled feature, or the
    embedding network's output with ``features="embedding"``); ``pair`` is the
    :class:`~zslib.methods.zsml.relation.PairSimilarity` ``s(x_i, x_j)`` of two such vectors; ``net`` is the
    standard embedding network it was built from.
    """

    def __init__(self, net: nn.Module, pair: nn.Module, features: str):
        super().__init__()
        if features not in ("pooled", "embedding"):
            raise ValueError(f"features must be 'pooled' or 'embedding', got {features!r}")
        self.net, self.pair, self.features = net, pair, features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.pooled(x) if self.features == "pooled" else self.net(x)


@register
class ZSML(Method):
    name = "zsml"
    title = "zero-shot metric learning: relation kernels and a cross-update regression on continuous labels"
    paper = "xu2019zsml"
    equations = ("Eq. 1 (relation R), Eq. 2 (similarity S), Eq. 3 (continuous labels), Eq. 7-8 (hinge forms of "
                 "Eq. 4-5), Algorithm 1 (cross-update)")
    phases = ("metric", "network", "labels")
    params = {
        "k": Param(ZSML_ARCHITECTURE["k"], "number of relation kernels (Eq. 1; Table 7 varies it)",
                   number(low=1, integer=True)),
        "height": Param(ZSML_ARCHITECTURE["height"], "kernel height along the feature axis (Table 1: 8)",
                        number(low=1, integer=True)),
        "stride": Param(ZSML_ARCHITECTURE["stride"], "kernel stride along the feature axis (Table 1: 10)",
                        number(low=1, integer=True)),
        "hidden": Param(list(ZSML_ARCHITECTURE["hidden"]), "widths of S's hidden layers (Table 1: 1000, 1000)",
                        _sizes),
        "relation": Param("kernels", "'kernels': R of Eq. 1 (MR); 'linear': x_i - x_j (Table 9's LR)",
                          one_of("kernels", "linear")),
        "norm": Param(None, "Table 1's 'Norm' after the convolution: None (Eq. 1), 'lrn' or 'batch'",
                      one_of(None, "lrn", "batch")),
        "alpha": Param(0.3, "label range of negative pairs (0, alpha); positives (1 - alpha, 1) (Eq. 3; Table 8)",
                       number(low=0.0, high=0.5, low_open=True)),
        "lambda": Param(0.1, "weight of the label loss L_y (Eq. 6); scales the label step", number(low=0.0)),
        "label_lr": Param(0.002, "step size mu of the label update (Algorithm 1 step 4; the paper's base rate)",
                          number(low=0.0)),
        "pairs": Param(100_000, "N, the size of the fixed pair set P (not given by the paper)",
                       number(low=1, integer=True)),
        "positive_fraction": Param(None, "share of same-class pairs in P; None: uniform over all pairs, the "
                                         "paper's 'randomly built up'", _optional(number(low=0.0, high=1.0))),
        "batch_pairs": Param(128, "pairs of P per training step (not given by the paper)",
                             number(low=1, integer=True)),
        "features": Param("pooled", "'pooled': the backbone's pooled feature; 'embedding': the embedding "
                                    "network's output (trained first for metric_steps with Config.loss)",
                          one_of("pooled", "embedding")),
        "metric_steps": Param(0, "steps that train the embedding with Config.loss before ZSML starts "
                                 "(Table 6, Lifted + ZSML); needs features='embedding'",
                              number(low=0, integer=True)),
        "symmetric": Param(False, "evaluate with (s_ij + s_ji) / 2 instead of s_ij as printed", boolean),
        "eval_per_class": Param(10, "images per class scored pairwise at evaluation; None: all",
                                _optional(number(low=2, integer=True))),
        "neighbors": Param(10, "neighbours per image in the graph that spectral clustering cuts",
                           number(low=1, integer=True)),
        "gallery_splits": Param(None, "splits ('seen', 'val', 'unseen') where the sample is only the queries, "
                                      "ranked against every image of the split; None: none",
                                _splits, omit_default=True),
        "input_metric": Param("euclidean", "the fixed comparator on the input features: 'euclidean' (the "
                                           "paper's row) or 'normalized' (Euclidean of L2-normalized features)",
                              one_of("euclidean", "normalized"), omit_default=True),
    }

    def __init__(self, config=None, model: nn.Module | None = None, num_classes: int | None = None):
        super().__init__(config, model, num_classes)
        p = self.p
        if p["metric_steps"] and p["features"] != "embedding":
            raise ValueError("zsml: metric_steps > 0 trains the embedding first, so it needs features='embedding'")
        self.seed = int(getattr(config, "seed", 0))
        self.phases = ("metric", "network", "labels") if p["metric_steps"] else ("network", "labels")
        n = p["pairs"]
        # the pair set P and its continuous labels: state, saved in checkpoints
        self.register_buffer("first", torch.zeros(n, dtype=torch.long))
        self.register_buffer("second", torch.zeros(n, dtype=torch.long))
        self.register_buffer("positive", torch.zeros(n, dtype=torch.bool))
        self.register_buffer("pair_labels", torch.zeros(n))  # y^c, moved by the label phase only
        self.register_buffer("initial_labels", torch.zeros(n))  # y^c as Eq. 3 set it
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.long))
        self.register_buffer("labeled", torch.zeros((), dtype=torch.bool))
        self._train_set = None
        self._x = None  # the fixed features of the training set (recomputed, never saved)
        self._y = None
        self._pending = None  # (pair ids, s) of the network phase, for the label phase of the same step

    # ----- the network --------------------------------------------------------------------------------
    @classmethod
    def attach(cls, model: nn.Module, params) -> ZSMLNet:
        p = cls.validate(params)
        dim = model.feature_dim if p["features"] == "pooled" else model.embedding_dim
        pair = pair_similarity(dim, p["relation"], k=p["k"], height=p["height"], stride=p["stride"], norm=p["norm"],
                               hidden=tuple(p["hidden"]))
        return ZSMLNet(model, pair, p["features"])

    # ----- the pair set -------------------------------------------------------------------------------
    def prepare(self, model: ZSMLNet, train_set) -> None:
        """Draw the pair set ``P`` over ``train_set`` (deterministic in the run's seed) and, for fixed pooled
        features, compute them now. Labels are set by Eq. 3 at the first ZSML step."""
        y = np.asarray(labels_of(train_set), dtype=np.int64)
        first, second = cu.random_pairs(y, self.p["pairs"], positive_fraction=self.p["positive_fraction"],
                                        seed=self.seed)
        device = self.first.device
        self.first.copy_(torch.from_numpy(first))
        self.second.copy_(torch.from_numpy(second))
        self.positive.copy_(torch.from_numpy(y[first] == y[second]))
        self._train_set, self._y, self._x = train_set, torch.from_numpy(y).to(device), None
        if self.p["features"] == "pooled":
            self._x = self._fixed_features(model)

    def _fixed_features(self, model: ZSMLNet) -> torch.Tensor:
        if self._train_set is None:
            raise RuntimeError("zsml needs its pair set: call prepare(model, train_set) first (the trainer does)")
        x, _ = embed(model, self._train_set, device=self.pair_labels.device)
        return x.to(self.pair_labels.device)

    def _start_labels(self) -> None:
        """Eq. 3 on the pair set, from the squared distances of the fixed features normalized by their largest
        value over ``P`` (in chunks of pairs: ``N`` pairs of 1,280-d vectors would not fit in memory at once)."""
        chunks = torch.arange(self.p["pairs"], device=self.first.device).split(8192)
        pairs = [(self._x[self.first[c]], self._x[self.second[c]]) for c in chunks]
        scale = max(float((a - b).pow(2).sum(1).max()) for a, b in pairs) or 1.0
        d2 = torch.cat([cu.normalized_sq_distances(a, b, scale=scale) for a, b in pairs])
        y = cu.continuous_labels(d2, self.positive, alpha=self.p["alpha"])
        self.pair_labels.copy_(y)
        self.initial_labels.copy_(y)
        self.labeled.fill_(True)

    @property
    def zsml_started(self) -> bool:
        return int(self.steps_done) >= self.p["metric_steps"]

    # ----- a training step ----------------------------------------------------------------------------
    def param_groups(self, phase, model, settings):
        if phase == "metric":  # what the baseline method would train: the embedding network
            return model_groups(model.net, settings)
        if phase == "network":  # the pair network R and S: the method's own module
            return own_parameters_group(model.pair, settings, name="pair")
        return []  # "labels": updated by Algorithm 1 step 4 itself, no optimizer

    def terms(self, phase, model, images, labels):
        if phase == "metric":
            if self.zsml_started:
                return {}
            return {self.loss_name: self.loss(model.net(images), labels)}
        if phase == "network":
            if not self.zsml_started:
                return {}
            if self._x is None:  # fixed features of the frozen embedding (also after a resume)
                self._x = self._fixed_features(model)
            if not bool(self.labeled):
                self._start_labels()
            ids = torch.randperm(self.p["pairs"])[:self.p["batch_pairs"]].to(self.pair_labels.device)
            s = model.pair(self._x[self.first[ids]], self._x[self.second[ids]])
            self._pending = (ids, s.detach())
            y = self.pair_labels[ids]
            return {"similarity": cu.similarity_loss(s, y, self.positive[ids], alpha=self.p["alpha"])}
        # "labels": Algorithm 1 step 4 on the pairs of this step's network phase, then count the step
        if self._pending is not None:
            ids, s = self._pending
            self._pending = None
            y = self.pair_labels[ids]
            self.pair_labels[ids] = cu.label_step(y, s.to(y.dtype), self.positive[ids], lr=self.p["label_lr"],
                                                  lam=self.p["lambda"], alpha=self.p["alpha"])
        self.steps_done += 1
        return {}

    # ----- what the cross-update did ------------------------------------------------------------------
    @torch.no_grad()
    def pair_predictions(self, model: ZSMLNet, count: int | None = None) -> dict[str, torch.Tensor]:
        """For the first ``count`` pairs of ``P`` (all by default): the prediction ``s`` of the trained network
        (eval mode), the current labels ``y``, their Eq. 3 start and the positive flags (Fig. 5)."""
        if self._x is None:
            self._x = self._fixed_features(model)
        idx = torch.arange(self.p["pairs"] if count is None else min(int(count), self.p["pairs"]))
        was = model.pair.training
        model.pair.eval()
        try:
            s = torch.cat([model.pair(self._x[self.first[c]], self._x[self.second[c]]) for c in idx.split(4096)])
        finally:
            model.pair.train(was)
        return {"s": s.cpu(), "y": self.pair_labels[idx].cpu(), "y0": self.initial_labels[idx].cpu(),
                "positive": self.positive[idx].cpu()}

    # ----- evaluation -----------------------------------------------------------------------------------
    def pair_evaluator(self, model: ZSMLNet):
        p, pair = self.p, model.pair

        def evaluate(features, labels, seed=0, split=None):
            device = next(pair.parameters()).device
            full = split in (p["gallery_splits"] or ())
            was = pair.training
            pair.eval()
            try:
                row = pairwise_metrics(pair, features, labels, per_class=p["eval_per_class"], seed=seed,
                                       symmetric=p["symmetric"], neighbors=p["neighbors"], device=device,
                                       full_gallery=full)
            finally:
                pair.train(was)
            fixed = normalized_euclidean_scorer if p["input_metric"] == "normalized" else euclidean_scorer
            base = pairwise_metrics(fixed, features, labels, per_class=p["eval_per_class"], seed=seed,
                                    neighbors=p["neighbors"], full_gallery=full)
            return {**row, **{f"input {k}": v for k, v in base.items()}}

        return evaluate
