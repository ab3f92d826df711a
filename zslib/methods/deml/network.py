"""The DeML(I, J) network (Chen & Deng, CVPR 2019, Sec. 3, Fig. 2, Eq. 1), over any zslib backbone.

At scale ``i`` (``i = 1..I``) the image ``x^i`` goes through

* FNet^i -- the backbone's stages up to the channel-attention stage (``backbone.roles["channel_attention"]``;
  pool3 of GoogLeNet in the paper);
* ``J`` parallel CAMs (:class:`zslib.methods.deml.channel_attention.ChannelAttention`), giving ``J`` reweighted
  copies of the map;
* GNet^i -- the remaining stages, *shared* by the ``J`` branches (the ``J`` copies run as one batch);
* global pooling and ``J`` linear sub-learners ``CA_(i,j)`` of ``d / (I J)`` units each.

Scale ``i + 1`` sees ``x^i`` cropped and zoomed where the object attention of scale ``i`` is high
(:func:`zslib.methods.deml.object_attention.object_attention_map` on the GNet maps named by
``backbone.roles["object_attention"]``, then :func:`zslib.methods.deml.attention_crop.zoom_to_attention`); ``x^1`` is
the input image. No gradient flows through the attention or the crop (both parameter-free).

Readings we had to choose (each an argument)
--------------------------------------------
* **What is shared.** Fig. 2 marks parameters as "shared"; the text writes ``FNet^i, GNet^i`` per
  scale and says (Sec. 3.2, Remark) that "at each scale i the params of GNet^i in different
  channel-attention branches are shared". We read the sharing as across the ``J`` branches of one
  scale, with separate networks per scale (``share_scales=False``; the released code also trains three
  separate GoogLeNets). ``share_scales=True`` uses one backbone for all scales.
* **Learner weights.** Eq. 6 gives every learner its own matrix ``omega_ij`` (default). The released
  code shares one matrix among the ``J`` learners of a scale (``share_heads=True``), so that only the
  CAMs tell them apart. Learners have no bias (as in the released code).
* **Which branch feeds the object attention.** GNet runs ``J`` times, so the attention layers exist
  ``J`` times. We average the attention maps over the branches (``oam_branches="mean"``); the
  released code reads the first branch only (``"first"``).
* **Embedding size.** ``embedding_dim`` must be divisible by ``I J`` (the paper floors ``512 / 9`` to 56).
* **Evaluation embedding.** DeML Sec. 4: the ``I J`` learner outputs are L2-normalized and concatenated.
  We also divide by ``sqrt(I J)`` so the concatenation has unit length; cosine similarities, and with
  them every retrieval result, are unchanged by that constant.

Two switches take a module out for the ablations (DeML Tables 2 and 4 analogues): ``cam=False`` gives
the ``J`` branches the unweighted map (GNet then runs once and only the ``J`` learner matrices differ),
``oam=False`` gives every scale the whole image (no attention, no crop: ``I`` networks side by side).
With ``scales=1`` the input is handed to the backbone as it is, so a
:class:`~zslib.engine.models.CachedBackbone` (rows of a feature cache, not images) works too; more scales need
images to crop.

``forward(x)`` returns that evaluation embedding ``(B, d)``; :meth:`DeMLNet.forward_train` returns what
training needs (:class:`DeMLOutput`).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from zslib.methods.deml.attention_crop import COMPONENTS, zoom_to_attention
from zslib.methods.deml.object_attention import RESCALES, object_attention_map
from zslib.engine.models.backbones import Backbone
from zslib.methods.deml.channel_attention import ChannelAttention

__all__ = ["DeMLNet", "DeMLOutput"]

OAM_BRANCHES = ("mean", "first")


@dataclass
class DeMLOutput:
    """What one training forward pass of :class:`DeMLNet` returns.

    * ``embeddings`` ``(I J, B, d_l)``: the raw (unnormalized) learner outputs, scale-major (learner
      ``(i, j)`` at ``i J + j``) -- the input of Eqs. 5 and 6;
    * ``weights`` ``(I J, d_l, d_1)``: the learners' matrices, for Eq. 6's non-trivial term;
    * ``images``: the ``I`` scales' inputs (``images[0]`` is the batch itself);
    * ``boxes``: the crop boxes ``(B, 4)`` that made scales ``2..I`` (pixels of the previous scale);
    * ``attention``: the object-attention maps ``(B, r, r')`` those boxes came from (box resolution).
    """

    embeddings: torch.Tensor
    weights: torch.Tensor
    num_scales: int
    images: list = field(default_factory=list)
    boxes: list = field(default_factory=list)
    attention: list = field(default_factory=list)

    @property
    def by_scale(self) -> torch.Tensor:
        """``(I, J, B, d_l)``: ``by_scale[i]`` is the adversary's input at scale ``i`` (Eq. 4)."""
        count, b, d = self.embeddings.shape
        return self.embeddings.reshape(self.num_scales, count // self.num_scales, b, d)


class DeMLNet(nn.Module):
    """DeML(I, J) over a zslib backbone (see the module docstring for the structure and our readings).

    Args:
        backbone: a :class:`zslib.engine.models.Backbone` (or an ``EmbeddingNet``, whose backbone is used).
            Scales after the first get deep copies unless ``share_scales``.
        embedding_dim: ``d``, divisible by ``scales * learners``; each learner has ``d / (I J)`` units.
        scales: ``I``, the number of object-attention scales.
        learners: ``J``, the channel-attention sub-learners per scale.
        cam_stage: the stage after which the CAMs sit (default ``roles["channel_attention"][0]``).
        oam_stages: the GNet stages the object attention reads (default ``roles["object_attention"]``).
        cam_hidden, cam_spatial: the CAMs' hidden width (64) and the released code's per-position variant.
        oam_steps, spatial_sigma, oam_rescale: :func:`zslib.methods.deml.object_attention.object_attention_map`.
        box_threshold, box_component, box_square, box_min_size: :func:`zslib.methods.deml.attention_crop.attention_boxes`.
        box_resolution: the attention map is computed (and thresholded) at most this many pixels on its
            longer side, boxes are scaled to the image (connected regions at full 224 px cost time and
            the map comes from 7 x 7 and 14 x 14 grids anyway).
        cam: ``False``: no channel attention, the ``J`` learners read the same map.
        oam: ``False``: no object attention, every scale sees the whole image.
    """

    def __init__(self, backbone, embedding_dim: int = 512, scales: int = 1, learners: int = 1, *,
                 cam_stage: str | None = None, oam_stages=None, cam_hidden: int = 64, cam_spatial: bool = False,
                 share_scales: bool = False, share_heads: bool = False, oam_steps: int | None = 10,
                 spatial_sigma: float | None = None, oam_rescale: str = "minmax", oam_branches: str = "mean",
                 box_threshold="mean", box_component: str = "largest", box_square: bool = True,
                 box_min_size: float = 0.25, box_resolution: int = 64, cam: bool = True, oam: bool = True):
        super().__init__()
        backbone = getattr(backbone, "backbone", backbone)
        if not isinstance(backbone, Backbone):
            raise TypeError(f"backbone must be a zslib Backbone or EmbeddingNet, got {type(backbone).__name__}")
        for name, value in (("embedding_dim", embedding_dim), ("scales", scales), ("learners", learners),
                            ("box_resolution", box_resolution)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if embedding_dim % (scales * learners):
            lower = embedding_dim // (scales * learners) * scales * learners
            raise ValueError(f"embedding_dim={embedding_dim} is not divisible by I * J = {scales} * {learners}; "
                             f"each of the {scales * learners} learners needs a whole number of dimensions "
                             f"(use e.g. {lower} or {lower + scales * learners})")
        if oam_rescale not in RESCALES:
            raise ValueError(f"oam_rescale must be one of {RESCALES}, got {oam_rescale!r}")
        if oam_branches not in OAM_BRANCHES:
            raise ValueError(f"oam_branches must be one of {OAM_BRANCHES}, got {oam_branches!r}")
        if box_component not in COMPONENTS:
            raise ValueError(f"box_component must be one of {COMPONENTS}, got {box_component!r}")
        stages = [n for n in backbone.stage_names if n != "pool"]
        cam_stage = cam_stage if cam_stage is not None else backbone.roles["channel_attention"][0]
        oam_stages = tuple(oam_stages) if oam_stages is not None else tuple(backbone.roles["object_attention"])
        if cam_stage not in stages:
            raise ValueError(f"cam_stage {cam_stage!r} is not a stage of {backbone.name}; choose from {stages}")
        late = stages[stages.index(cam_stage) + 1:]
        bad = [s for s in oam_stages if s not in late]
        if scales > 1 and oam and (bad or not oam_stages):
            raise ValueError(f"oam_stages {list(oam_stages)} must be GNet stages of {backbone.name}, i.e. after "
                             f"the channel-attention stage {cam_stage!r}: choose from {late}")
        self.embedding_dim, self.num_scales, self.num_learners = embedding_dim, scales, learners
        self.learner_dim = embedding_dim // (scales * learners)
        self.cam_stage = cam_stage
        self.oam_stages = tuple(sorted(oam_stages, key=stages.index))
        self.share_scales, self.share_heads = bool(share_scales), bool(share_heads)
        self.use_cam, self.use_oam = bool(cam), bool(oam)
        self.oam_options = {"steps": oam_steps, "spatial_sigma": spatial_sigma, "rescale": oam_rescale}
        self.oam_branches = oam_branches
        self.box_options = {"threshold": box_threshold, "component": box_component, "square": box_square,
                            "min_size": box_min_size}
        self.box_resolution = box_resolution
        copies = 1 if share_scales else scales
        self.backbones = nn.ModuleList([backbone] + [copy.deepcopy(backbone) for _ in range(copies - 1)])
        channels = backbone.stage_channels[cam_stage]
        self.cams = nn.ModuleList([ChannelAttention(channels, learners, cam_hidden, cam_spatial)
                                   for _ in range(scales if cam else 0)])
        heads = []
        for _ in range(scales):
            w = torch.empty(1 if share_heads else learners, self.learner_dim, backbone.feature_dim)
            for k in range(w.shape[0]):
                nn.init.xavier_uniform_(w[k])
            heads.append(nn.Parameter(w))
        self.heads = nn.ParameterList(heads)

    # ----- description ----------------------------------------------------------------------------
    @property
    def backbone(self) -> Backbone:
        """The first scale's backbone."""
        return self.backbones[0]

    @property
    def normalize(self) -> bool:
        return True

    def learner_weights(self) -> torch.Tensor:
        """The ``I J`` learners' matrices ``(I J, d_l, d_1)``, scale-major (shared ones repeated)."""
        return torch.cat([h.expand(self.num_learners, -1, -1) for h in self.heads])

    # ----- computation -----------------------------------------------------------------------------
    def _scale(self, i: int, x: torch.Tensor, want_attention: bool):
        bb = self.backbones[0 if self.share_scales else i]
        u = bb.run(x, None, self.cam_stage)  # FNet^i
        if self.use_cam:
            caps = self.cams[i](u)  # (J, B, C, h, w)
            j, b = caps.shape[:2]
            h = caps.reshape(j * b, *caps.shape[2:])
        else:  # the J branches would be identical: run GNet once
            j, b, h = 1, u.shape[0], u
        maps, start = [], self.cam_stage
        if want_attention:
            for stage in self.oam_stages:
                h = bb.run(h, start, stage)
                maps.append(h)
                start = stage
        if start != bb.stage_names[-2]:  # the last stage before "pool"
            h = bb.run(h, start, None)  # the rest of GNet^i, shared by the J branches
        pooled = bb.pool(h).reshape(j, b, -1).expand(self.num_learners, -1, -1)
        emb = torch.einsum("jbc,jdc->jbd", pooled, self.heads[i].expand(self.num_learners, -1, -1))
        return emb, maps

    @torch.no_grad()
    def _attention(self, maps, height: int, width: int) -> torch.Tensor:
        j = self.num_learners if self.use_cam else 1
        if self.oam_branches == "first":
            maps = [m[: m.shape[0] // j] for m in maps]
        scale = min(1.0, self.box_resolution / max(height, width))
        size = (max(1, round(height * scale)), max(1, round(width * scale)))
        att = object_attention_map(maps, size, **self.oam_options)
        if self.oam_branches == "mean":
            att = att.reshape(j, -1, *size).mean(0)
        return att

    def forward_train(self, x: torch.Tensor, *, last_attention: bool = False) -> DeMLOutput:
        """All scales: learner outputs, learner weights, scale inputs, crop boxes and attention maps.

        ``last_attention=True`` also computes the last scale's attention (for pictures; no crop follows).
        """
        crops = self.num_scales > 1 and self.use_oam
        if crops or last_attention:
            if not torch.is_tensor(x) or x.dim() != 4:
                raise ValueError(f"DeMLNet with {self.num_scales} scales and object attention needs images "
                                 f"(B, 3, H, W) to crop, got {tuple(getattr(x, 'shape', ()))}")
        height, width = (x.shape[-2:] if torch.is_tensor(x) and x.dim() == 4 else (0, 0))
        out = DeMLOutput(embeddings=None, weights=self.learner_weights(), num_scales=self.num_scales, images=[x])
        per_scale = []
        for i in range(self.num_scales):
            more = i + 1 < self.num_scales and self.use_oam
            emb, maps = self._scale(i, x, more or last_attention)
            per_scale.append(emb)
            if maps:
                att = self._attention(maps, height, width)
                out.attention.append(att)
                if more:
                    x, boxes = zoom_to_attention(x.detach(), att, size=(height, width), **self.box_options)
                    out.boxes.append(boxes)
                    out.images.append(x)
            if i + 1 < self.num_scales and not self.use_oam:
                out.images.append(x)  # no object attention: the next scale sees the same image
        out.embeddings = torch.cat(per_scale)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The holistic embedding (DeML Eq. 1, Sec. 4): per-learner L2-normalized, concatenated, / sqrt(I J)."""
        z = F.normalize(self.forward_train(x).embeddings, dim=-1)  # (L, B, d_l)
        count, b, d = z.shape
        return z.permute(1, 0, 2).reshape(b, count * d) / math.sqrt(count)

    # ----- optimization ------------------------------------------------------------------------------
    def param_groups(self, lr: float, new_layer_mult: float = 10.0, weight_decay: float = 0.0) -> list[dict]:
        """``backbone`` (every scale's backbone) at ``lr``; ``new`` (CAMs, learners and anything a method
        attaches) at ``new_layer_mult * lr`` -- DeML Sec. 4 trains the learners at ten times the rate."""
        if lr <= 0 or new_layer_mult <= 0 or weight_decay < 0:
            raise ValueError(f"need lr > 0, new_layer_mult > 0, weight_decay >= 0; got {lr}, {new_layer_mult}, "
                             f"{weight_decay}")
        backbone = list(self.backbones.parameters())
        ids = {id(p) for p in backbone}
        new = [p for p in self.parameters() if id(p) not in ids]
        return [
            {"params": backbone, "lr": lr, "weight_decay": weight_decay, "name": "backbone"},
            {"params": new, "lr": lr * new_layer_mult, "weight_decay": weight_decay, "name": "new"},
        ]
