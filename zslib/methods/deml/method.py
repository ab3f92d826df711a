"""DeML: hybrid-attention decoupled metric learning (Chen and Deng, CVPR 2019; ``chen2019deml``).

DeML replaces the one embedding layer of a metric network by ``I x J`` small learners and trains each of
them with the metric loss. Learner ``(i, j)`` sees scale ``i`` of the image -- the image itself for
``i = 1``, then crops zoomed to where the random-walk object attention of the previous scale is high
(OAM, Eqs. 2-3) -- through its own channel-attention module (CAM, Sec. 3.2), and the ``J`` learners of a
scale are pushed apart by an adversary (Eq. 4). The objective of one step is

    L = L_metric (Eq. 5, averaged over the I J learners)
        + lambda1 / (2 I J N) sum ||CA_ij[x_n]||^2 + lambda2 sum tr[(w w^T - I) o (w w^T - I)]  (Eq. 6)
        + lambda0 sum_i sum_{j, j'} ||F^i(CA_ij) - F^i(CA_ij')||^2                               (Eq. 4)

The pieces live elsewhere, one function or module each: the network :class:`zslib.methods.deml.network.DeMLNet`
(FNet, the CAMs, GNet shared by the ``J`` branches, the learners, the crop and zoom), the object
attention :mod:`zslib.methods.deml.object_attention` and :mod:`zslib.methods.deml.attention_crop`, the adversary and the released
code's hinge :mod:`zslib.methods.deml.learner_adversary`, Eqs. 5-6 :mod:`zslib.methods.deml.decoupled_losses`. This file
composes them as the registered method ``deml``.

Choices, each an argument
-------------------------
* **The metric loss of every learner** is ``Config.loss`` applied to that learner's output, averaged over
  the ``I J`` learners. With ``loss="binomial_deml"`` (alpha 2, beta 0.5, negative cost 35, each pair
  weighted by one over the number of positive or negative pairs) this is exactly Eq. 5
  (:func:`zslib.methods.deml.decoupled_losses.decoupled_binomial_loss`; a test checks the equality). Losses with a
  vector per class (proxies) are refused: they would need one set per learner.
* **The adversary is one phase with a gradient reversal layer**, as the paper trains it (Sec. 3.2: the GRL
  makes Eq. 4 "equivalent to min_F L_adv and min_(f, g, CAMs) -L_adv"). In one backward pass ``F`` gets
  the gradient of ``L_adv`` and everything before the layer its negative; a second phase would need a
  second optimizer step on stored, detached learner outputs and would update ``F`` after the learners
  instead of with them (alternating rather than simultaneous play), which is not what the paper does.
  ``F`` (one per scale, :class:`zslib.methods.deml.learner_adversary.LearnerAdversary`) is an attribute of the method: only
  training needs it. It learns at ``Config.objective_lr`` (default ``new_layer_mult * lr``). The logged
  term ``adversary`` is ``L_adv`` itself, the quantity ``F`` lowers and the learners raise.
* ``adversary="hinge"`` is the released code's replacement for ``F`` (a contrastive hinge that pushes the
  unit-length outputs of the ``J`` learners of an image apart, margin 2), weighted by ``lambda0``; the
  released code uses 0.2 per pair of learners. ``adversary="none"`` is Table 4's "without L_adv".
* **Ablation switches** (Tables 2 and 4 analogues): ``cam=False`` removes the CAMs (the ``J`` learners
  read the same map), ``oam=False`` removes the object attention (every scale sees the whole image, so
  ``I`` scales are ``I`` networks side by side). DeML(1, 1) with ``cam=False`` and ``lambda1 = lambda2 =
  0`` is the unified metric ``U_d`` of the paper in this network (no bias, Xavier-initialized layer).

The real profile (frozen, cached maps)
--------------------------------------
On the ``real`` profile the backbone is a :class:`zslib.engine.models.CachedBackbone`: the frozen
EfficientNet-Lite0's maps ``block4``, ``block5`` and ``head`` come from a disk cache and nothing below or
between them can run again. The closest faithful DeML there puts the ``J`` CAMs on the last cached map
(``head``, 1280 x 7 x 7), and GNet is the global pooling that follows it: learner ``(1, j)`` reads the
pooled ``head`` map reweighted by CAM ``j``. Only ``I = 1`` is possible: a second scale needs the frozen
network's maps of the zoomed crop, which the cache does not hold (the chapter computes such crops on a
few flowers with the real network, for the pictures). The OAM therefore takes no part in real-profile
training, the CAMs and the adversary do.
"""
from __future__ import annotations

import math


import torch
import torch.nn.functional as F
from torch import nn

from zslib.engine.checks import finite_number
from zslib.engine.losses import LOSSES
from zslib.engine.method import Method, Param, boolean, number, one_of
from zslib.engine.models import CachedBackbone
from zslib.engine.models.adapted import AdaptedBackbone
from zslib.engine.registry import register
from zslib.methods.deml.decoupled_losses import NONTRIVIAL_FORMS, activation_decay, nontrivial_term
from zslib.methods.deml.learner_adversary import LearnerAdversary, adversary_loss, learner_hinge_loss
from zslib.methods.deml.network import DeMLNet

__all__ = ["DeML", "ADVERSARIES", "split_learners", "DEML_TRAINING"]

ADVERSARIES = ("grl", "hinge", "none")

#: The paper's training settings (Sec. 4, implementation details and training) as Config overrides:
#: GoogLeNet V1 pretrained on ImageNet, Adam at 1e-5 with weight decay 2e-4, ten times the rate for the
#: learners, 512-d holistic embedding, Eq. 5's binomial deviance. CUB trains 15k iterations. The batch is
#: not given in the paper; we keep the full profile's 64 classes x 2 images (CML's, the same authors').
DEML_TRAINING: dict = {"backbone": "googlenet", "pretrained": True, "embedding_dim": 512, "lr": 1e-5,
                       "weight_decay": 2e-4, "new_layer_mult": 10.0, "loss": "binomial_deml",
                       "iterations": 15_000}


def _stages_or_none(value, name="value"):
    """A check: ``None`` (the backbone's role) or one or more stage names."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be None (the backbone's 'object_attention' role) or a list of stage names, "
                        f"got {value!r}")
    return list(value)


def _sigma_or_none(value, name="value"):
    """A check: ``None`` (the paper's plain Eq. 2) or a positive width (0.15 in the released code)."""
    if value is None:
        return None
    return finite_number(value, name, low=0.0, low_open=True)


def _whole(value, name="value"):
    """A check: a whole number >= 1, returned as an ``int``."""
    return int(finite_number(value, name, low=1, integer=True))


# what the catalog (zslib.engine.catalog, read without importing torch) knows of these checks
_stages_or_none.spec = {"kind": "names", "optional": True}
_sigma_or_none.spec = {"kind": "optional", "of": number(low=0.0, low_open=True).spec}
_whole.spec = number(low=1, integer=True).spec


@register
class DeML(Method):
    name = "deml"
    title = "decoupled metric learning: I object-attention scales x J channel-attention learners, an adversary " \
            "between the learners, activation decay"
    paper = "chen2019deml"
    equations = "Eqs. 2-3 (OAM), CAM (Sec. 3.2), Eq. 4 (adversary with GRL), Eq. 5 (metric over I J learners), " \
                "Eq. 6 (activation decay and non-trivial term)"
    uses_maps = True
    params = {
        "scales": Param(1, "I, the object-attention scales (scale i + 1 is scale i cropped and zoomed to its attention)",
                        _whole),
        "learners": Param(1, "J, the channel-attention learners per scale; the embedding is split into I J parts",
                          _whole),
        "oam": Param(True, "object attention: crop and zoom each next scale (False: every scale sees the whole image)",
                     boolean),
        "oam_stages": Param(None, "the maps the object attention reads (None: the backbone's 'object_attention' role, "
                                  "Incep4e and Incep5b of GoogLeNet)", _stages_or_none),
        "spatial_sigma": Param(None, "the released code's spatial Gaussian on the OAM graph (width as a fraction of "
                                     "the map side, 0.15 there); None: the paper's plain Eq. 2", _sigma_or_none),
        "cam": Param(True, "J channel-attention modules after the 'channel_attention' stage (pool3; the last cached "
                           "map on the real profile); False: the J learners read the same map", boolean),
        "adversary": Param("grl", "'grl': Eq. 4's adversary through a gradient reversal layer; 'hinge': the released "
                                  "code's pairwise hinge; 'none': no diversity term", one_of(*ADVERSARIES)),
        "adversary_input": Param("unit", "what F compares: 'unit', the learners' L2-normalized outputs (what the metric "
                                         "and the evaluation see); 'raw', their raw outputs as Eq. 4 is printed",
                                 one_of("unit", "raw")),
        "learner_lr_mult": Param(1.0, "the learners' (embedding heads') learning rate as a multiple of the rate of "
                                      "the other parameters of their group (CAMs; the new layers); DeML Sec. 4 "
                                      "trains the learners at 10 times the rate", number(low=0.0, low_open=True),
                                 omit_default=True),
        "lambda0": Param(1.0, "weight of the adversary (or hinge) term; the paper's lambda0 = 1", number(low=0.0)),
        "lambda1": Param(0.014, "weight of the activation decay (Eq. 6); the paper's 0.014", number(low=0.0)),
        "lambda2": Param(0.25, "weight of the non-trivial-solution term (Eq. 6); the paper's 0.25", number(low=0.0)),
        "nontrivial": Param("hadamard", "reading of Eq. 6's trace: 'hadamard' as printed (unit rows), 'frobenius' "
                                        "(orthonormal rows)", one_of(*NONTRIVIAL_FORMS)),
        "hinge_margin": Param(2.0, "margin of the released code's hinge (unit vectors are at most 2 apart)",
                              number(low=0.0, low_open=True)),
    }

    def __init__(self, config, model, num_classes):
        super().__init__(config, model, num_classes)
        if LOSSES[config.loss].parametric:
            raise ValueError(f"DeML trains every learner with the metric loss; {config.loss!r} learns a vector per "
                             "class and would need one set per learner. Use a pair loss, e.g. loss='binomial_deml' "
                             "(the paper's Eq. 5)")
        if not isinstance(model, DeMLNet):
            raise TypeError(f"the deml method trains a zslib.methods.deml.network.DeMLNet (built by DeML.attach), got "
                            f"{type(model).__name__}")
        self.num_scales, self.num_learners = model.num_scales, model.num_learners
        play = self.num_learners > 1 and self.p["lambda0"] > 0
        self.adversaries = nn.ModuleList(
            [LearnerAdversary(model.learner_dim) for _ in range(self.num_scales)]
            if play and self.p["adversary"] == "grl" else [])

    @classmethod
    def attach(cls, model, params):
        """:class:`~zslib.methods.deml.network.DeMLNet` over ``model``'s backbone, with ``model.embedding_dim`` dimensions
        split among the ``I J`` learners (the standard embedding head is not used)."""
        p = cls.validate(params)
        backbone = model.backbone
        stages = [s for s in backbone.stage_names if s != "pool"]
        if isinstance(backbone, AdaptedBackbone) and p["scales"] > 1:
            raise ValueError(f"DeML with I = {p['scales']} scales needs the backbone's maps of zoomed crops, but "
                             f"{backbone.name} starts from cached maps of the whole images; use scales=1")
        if isinstance(backbone, CachedBackbone):
            if p["scales"] > 1:
                raise ValueError(
                    f"DeML with I = {p['scales']} scales needs the backbone's maps of zoomed crops, but "
                    f"{backbone.name} only holds the cached maps of the whole images; on the real profile use "
                    "scales=1 (the CAMs sit on the last cached map, see zslib.methods.deml.method)")
            cam_stage = stages[-1]
        else:
            cam_stage = backbone.roles["channel_attention"][0]
        oam_stages = p["oam_stages"] if p["oam_stages"] is not None else backbone.roles.get("object_attention", ())
        return DeMLNet(backbone, model.embedding_dim, p["scales"], p["learners"], cam_stage=cam_stage,
                       oam_stages=oam_stages, spatial_sigma=p["spatial_sigma"], cam=p["cam"], oam=p["oam"])

    def param_groups(self, phase, model, settings):
        """The default groups, with the learners (``model.heads``) split off at ``learner_lr_mult`` times
        their group's rate when that is not 1."""
        groups = super().param_groups(phase, model, settings)
        mult = self.p["learner_lr_mult"]
        if mult == 1.0:
            return groups
        heads = {id(p) for p in model.heads.parameters()}
        out = []
        for g in groups:
            rest = [p for p in g["params"] if id(p) not in heads]
            learners = [p for p in g["params"] if id(p) in heads]
            if rest:
                out.append({**g, "params": rest})
            if learners:
                out.append({**g, "params": learners, "lr": g["lr"] * mult, "name": "learners"})
        return out

    def terms(self, phase, model, images, labels):
        out = model.forward_train(images)
        z = out.embeddings  # (I J, B, d_l), raw learner outputs
        metric = torch.stack([self.loss(z[k], labels) for k in range(z.shape[0])]).mean()
        terms = {self.loss_name: metric}
        p = self.p
        if p["lambda1"] > 0:
            terms["activation_decay"] = activation_decay(z, None, lambda1=p["lambda1"])
        if p["lambda2"] > 0:
            terms["nontrivial"] = nontrivial_term(out.weights, p["lambda2"], p["nontrivial"])
        if self.num_learners > 1 and p["lambda0"] > 0:
            if p["adversary"] == "grl":
                by_scale = out.by_scale if p["adversary_input"] == "raw" else F.normalize(out.by_scale, dim=-1)
                terms["adversary"] = sum(adversary_loss(zs, f, p["lambda0"])
                                         for zs, f in zip(by_scale, self.adversaries))
            elif p["adversary"] == "hinge":
                terms["hinge"] = p["lambda0"] * sum(learner_hinge_loss(zs, p["hinge_margin"]) for zs in out.by_scale)
        return terms


def split_learners(embeddings: torch.Tensor, scales: int, learners: int) -> torch.Tensor:
    """The evaluation embedding of a DeML(I, J) network, ``(n, d)``, as its learners' unit vectors
    ``(n, I, J, d / (I J))`` (DeMLNet concatenates them scale-major and divides by ``sqrt(I J)``)."""
    if not torch.is_tensor(embeddings) or embeddings.dim() != 2:
        raise ValueError(f"embeddings must be (n, d), got {tuple(getattr(embeddings, 'shape', ()))}")
    count = int(scales) * int(learners)
    if count < 1 or embeddings.shape[1] % count:
        raise ValueError(f"an embedding of {embeddings.shape[1]} dimensions is not I J = {scales} x {learners} "
                         "equal parts")
    n = embeddings.shape[0]
    return embeddings.reshape(n, scales, learners, -1) * math.sqrt(count)


# ----------------------------------------------------------------------------------------------------
# What the learners attend to (DeML Fig. 4 (b) analogue): an analysis of a trained DeMLNet
