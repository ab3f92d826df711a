"""Saliency maps: where a trained embedding network "looks", and how much of it falls on each part.

* :func:`activation_map` -- the channel-averaged last convolutional map (CML Figs. 6-7, ``chen2022cml``,
  Sec. IV-E). CML visualizes where a trained embedding network "looks" by averaging the output maps of
  the last convolutional layer over the channels and showing the result over the image. No gradient is
  involved (unlike Grad-CAM): the map is a property of the forward pass alone.
* :func:`similarity_gradcam` -- Grad-CAM (Selvaraju et al., ICCV 2017) for an embedding network, as
  Adapt-Adv shows it (Fig. 2, ``alkaabi2022adaptadv``): the explained output is the cosine similarity of a
  query's embedding to a reference embedding, not a class logit.
* :func:`part_shares` -- the share of a map's mass on each SynthParts part, on the object and on the
  background: scores any map (Grad-CAM, GDFL attention weights, activation maps) against ground truth.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["activation_map", "last_conv_stage", "similarity_gradcam", "part_shares"]


def last_conv_stage(model) -> str:
    """The name of the last convolutional stage of ``model`` (its last stage that is not ``"pool"``)."""
    names = [n for n in getattr(model, "stage_names", []) if n != "pool"]
    if not names:
        raise ValueError("the model exposes no convolutional stages (expected a zslib EmbeddingNet with "
                         "stage_names such as 'stage1'..'stage4')")
    return names[-1]


def activation_map(model, images: torch.Tensor, stage: str | None = None, *, size=None,
                   mode: str = "bilinear", normalize: bool = True) -> torch.Tensor:
    r"""Channel-averaged activation map of ``stage``, upsampled to the image size (CML Figs. 6-7).

    For the feature map :math:`A \in \mathbb{R}^{C\times h\times w}` of one image the map is
    :math:`M = \frac1C\sum_c A_c`, resized to ``size`` (default: the images' height and width) with
    ``mode`` (``"bilinear"`` or ``"nearest"``). With ``normalize`` each image's map is min-max scaled to
    ``[0, 1]`` (a constant map becomes all zeros), as heat maps are shown; otherwise the raw averages.

    ``images``: ``(B, 3, H, W)`` already normalized for the backbone. ``stage``: a name from
    ``model.stage_names`` (default: the last convolutional stage). The model runs in eval mode without
    gradients; its training mode is restored afterwards. Returns a ``(B, H, W)`` float tensor on the CPU.
    """
    if not torch.is_tensor(images) or images.dim() != 4:
        raise ValueError(f"images must be a (B, C, H, W) tensor, got "
                         f"{tuple(images.shape) if torch.is_tensor(images) else type(images).__name__}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"mode must be 'bilinear' or 'nearest', got {mode!r}")
    if stage is None:
        stage = last_conv_stage(model)
    allowed = [n for n in getattr(model, "stage_names", []) if n != "pool"]
    if stage not in allowed:
        raise ValueError(f"unknown stage {stage!r}; choose one of {allowed}")
    size = tuple(images.shape[-2:]) if size is None else tuple(int(s) for s in size)
    was_training = bool(getattr(model, "training", False))
    try:
        if hasattr(model, "eval"):
            model.eval()
        with torch.no_grad():
            fmap = model.features(images, [stage])[stage]
    finally:
        if was_training and hasattr(model, "train"):
            model.train(True)
    if fmap.dim() != 4:
        raise ValueError(f"stage {stage!r} gives a tensor of shape {tuple(fmap.shape)}, not a (B, C, h, w) map")
    mean = fmap.float().mean(1, keepdim=True)
    kwargs = {"align_corners": False} if mode == "bilinear" else {}
    up = F.interpolate(mean, size=size, mode=mode, **kwargs)[:, 0]
    if normalize:
        flat = up.flatten(1)
        lo, hi = flat.min(1).values[:, None, None], flat.max(1).values[:, None, None]
        span = hi - lo
        up = torch.where(span > 0, (up - lo) / span.clamp_min(torch.finfo(up.dtype).tiny), torch.zeros_like(up))
    return up.cpu()


# ----------------------------------------------------------------------------------------------
# Grad-CAM of a similarity
# ----------------------------------------------------------------------------------------------
def _tapped_embedding(model, x: torch.Tensor, stage: str, tap: nn.Module) -> torch.Tensor:
    """``model``'s embedding of ``x`` with ``tap`` applied to the map of ``stage`` on its way through."""
    if hasattr(model, "forward_tapped"):  # e.g. GDFLNet: the map feeds an attention module and later stages
        return model.forward_tapped(x, {stage: tap})
    if all(hasattr(model, a) for a in ("run", "embed_pooled", "backbone")):  # EmbeddingNet: one chain
        fmap = tap(model.run(x, until=stage))
        return model.embed_pooled(model.backbone.pool(model.run(fmap, start_after=stage)))
    raise TypeError(f"cannot reach stage {stage!r} inside a {type(model).__name__}: give a zslib EmbeddingNet or "
                    "GDFLNet, or pass the layer module itself as layer=")


def _upsample(maps: torch.Tensor, size, mode: str) -> torch.Tensor:
    kwargs = {"align_corners": False} if mode == "bilinear" else {}
    return F.interpolate(maps, size=size, mode=mode, **kwargs)


def similarity_gradcam(model, queries: torch.Tensor, references: torch.Tensor, stage: str | None = None, *,
                       layer: nn.Module | None = None, counterfactual: bool = False, size=None,
                       mode: str = "bilinear", normalize: bool = True) -> torch.Tensor:
    r"""Grad-CAM of the cosine similarity between each query and its reference, batched over the pairs.

    For query ``i`` with map :math:`A \in \mathbb{R}^{C\times h\times w}` at ``stage`` and target
    :math:`s_i = \cos(\phi(x_i), r_i)`, where :math:`r_i` is the reference embedding computed separately
    under ``no_grad`` (so :math:`s_i` depends on the query only), Grad-CAM is
    :math:`\mathrm{ReLU}(\sum_c \alpha_c A_c)` with :math:`\alpha_c = \frac{1}{hw}\sum_{jk}
    \partial s_i / \partial A_{cjk}` (Selvaraju et al. 2017, Eqs. 1-2, with the similarity in place of a
    class score). Computed by captum's ``LayerGradCam`` (``relu_attributions=True``) and upsampled to the
    image (``size``, default the queries' height and width) with ``mode``.

    What it shows: the parts of the query whose features push its embedding *towards* the reference.
    For a pair that differs in one part only, that is everything the two share; the differing part pulls
    the similarity down, its Grad-CAM is negative and the ReLU removes it. ``counterfactual=True`` explains
    :math:`-s_i` instead (Selvaraju et al.'s counterfactual explanation, the negated gradients): the parts
    that make the query *unlike* the reference, i.e. the differing part.

    Args:
        model: a zslib :class:`~zslib.engine.models.EmbeddingNet` or :class:`~zslib.methods.adapt_adv.gdfl.GDFLNet` (reached at
            ``stage``), or any embedding module together with ``layer``.
        queries: ``(B, 3, H, W)`` images, normalized for the backbone.
        references: ``(B, 3, H, W)`` or ``(1, 3, H, W)`` images, or their embeddings ``(B, d)`` / ``(1, d)``
            (one reference for all queries).
        stage: a map name of ``model`` (default: its last convolutional stage).
        layer: instead of ``stage``, an ``nn.Module`` inside ``model`` whose output is the map.
        normalize: divide each map by its maximum (zero stays zero; an all-zero map stays zero).

    The model runs in eval mode (BatchNorm statistics, no dropout); its mode is restored afterwards.
    Returns ``(B, H, W)`` on the CPU.
    """
    from captum.attr import LayerGradCam

    if not torch.is_tensor(queries) or queries.dim() != 4:
        raise ValueError(f"queries must be a (B, C, H, W) batch of images, got "
                         f"{tuple(queries.shape) if torch.is_tensor(queries) else type(queries).__name__}")
    if not torch.is_tensor(references) or references.dim() not in (2, 4) or references.shape[0] not in (1, len(queries)):
        raise ValueError(f"references must be images (B or 1, C, H, W) or embeddings (B or 1, d) for the "
                         f"{len(queries)} queries, got "
                         f"{tuple(references.shape) if torch.is_tensor(references) else type(references).__name__}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"mode must be 'bilinear' or 'nearest', got {mode!r}")
    if layer is not None and stage is not None:
        raise ValueError("give either stage (a map name) or layer (a module), not both")
    size = tuple(queries.shape[-2:]) if size is None else tuple(int(s) for s in size)
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        with torch.no_grad():
            ref = model(references) if references.dim() == 4 else references
        ref = ref.detach().to(queries.device)
        if layer is None:
            if stage is None:
                stage = last_conv_stage(model)
            tap = nn.Identity()

            def embed(x):
                return _tapped_embedding(model, x, stage, tap)
        else:
            if not isinstance(layer, nn.Module):
                raise TypeError(f"layer must be an nn.Module inside the model, got {type(layer).__name__}")
            tap, embed = layer, model
        sign = -1.0 if counterfactual else 1.0

        def similarity(x):
            return sign * F.cosine_similarity(embed(x), ref, dim=1)

        cam = LayerGradCam(similarity, tap).attribute(queries, relu_attributions=True)
    finally:
        model.train(was_training)
    if cam.dim() != 4:
        raise ValueError(f"the explained layer gives {tuple(cam.shape)} attributions, not a (B, 1, h, w) map; "
                         "choose a convolutional stage")
    up = _upsample(cam.detach().float(), size, mode)[:, 0]
    if normalize:
        peak = up.flatten(1).amax(1).clamp_min(torch.finfo(up.dtype).tiny)[:, None, None]
        up = up / peak
    return up.cpu()


# ----------------------------------------------------------------------------------------------
# Localization against SynthParts' part masks
# ----------------------------------------------------------------------------------------------
def part_shares(maps: torch.Tensor, part_map: torch.Tensor, part_names=None, *, relative: bool = False,
                mode: str = "bilinear") -> dict[str, np.ndarray]:
    r"""The share of each map's mass on every part, on the object and on the background.

    For a non-negative map :math:`m` and the pixels :math:`P_k` of part ``k`` (``part_map == k``, ``0``
    the background), the share is :math:`\sum_{x \in P_k} m(x) / \sum_x m(x)`; ``"object"`` sums the
    parts. ``relative=True`` divides every share by the region's area fraction: 1 is what a uniform map
    gives, above 1 the map concentrates on the region (a part that is not visible gives NaN).

    Args:
        maps: ``(B, h, w)`` non-negative maps (Grad-CAM, upsampled or not; GDFL attention weights; ...),
            resized to the part map's size with ``mode`` when the sizes differ.
        part_map: ``(B, H, W)`` integer labels, ``0`` background and ``k`` the part ``part_names[k-1]``,
            e.g. ``SynthParts.part_map[indices]``.
        part_names: the names of labels ``1..K`` (default SynthParts' ``PART_NAMES``).

    Returns a dict of ``(B,)`` float64 arrays keyed ``"background"``, ``"object"`` and each part name
    (NaN for an all-zero map). The chapter's "attention on the shortcut parts (body, head) vs the hard
    parts" is ``shares["body"] + shares["head"]`` against the rest of ``shares["object"]``.
    """
    if not torch.is_tensor(maps) or maps.dim() != 3:
        raise ValueError(f"maps must be a (B, h, w) tensor, got "
                         f"{tuple(maps.shape) if torch.is_tensor(maps) else type(maps).__name__}")
    if not torch.is_tensor(part_map) or part_map.dim() != 3 or part_map.shape[0] != maps.shape[0]:
        raise ValueError(f"part_map must be a (B, H, W) label tensor with the maps' {maps.shape[0]} images, got "
                         f"{tuple(part_map.shape) if torch.is_tensor(part_map) else type(part_map).__name__}")
    if part_map.is_floating_point() or part_map.dtype == torch.bool:
        raise TypeError(f"part_map must hold integer part labels, got dtype {part_map.dtype}")
    if part_names is None:
        from zslib.engine.data.synthparts import (PART_NAMES as part_names)  # imported here: zslib.engine.data is slow to import
    names = tuple(part_names)
    labels = part_map.long().cpu()
    if int(labels.min()) < 0 or int(labels.max()) > len(names):
        raise ValueError(f"part_map labels must lie in 0..{len(names)} (0 background, k = {names}[k-1]), "
                         f"got {int(labels.min())}..{int(labels.max())}")
    m = maps.detach().double().cpu()
    if not bool(torch.isfinite(m).all()) or bool((m < 0).any()):
        raise ValueError("maps must be finite and non-negative (ReLU'd Grad-CAM, attention weights, ...)")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"mode must be 'bilinear' or 'nearest', got {mode!r}")
    if m.shape[-2:] != labels.shape[-2:]:
        m = _upsample(m[:, None], tuple(labels.shape[-2:]), mode)[:, 0].clamp_min(0)
    onehot = F.one_hot(labels, len(names) + 1).double()  # (B, H, W, K+1)
    mass = torch.einsum("bhw,bhwk->bk", m, onehot)
    total = mass.sum(1, keepdim=True)
    share = torch.where(total > 0, mass / total.clamp_min(torch.finfo(torch.float64).tiny),
                        torch.full_like(mass, float("nan")))
    out = {"background": share[:, 0], "object": share[:, 1:].sum(1)}
    out.update({name: share[:, k] for k, name in enumerate(names, start=1)})
    if relative:
        area = onehot.mean((1, 2))
        area = {"background": area[:, 0], "object": area[:, 1:].sum(1),
                **{name: area[:, k] for k, name in enumerate(names, start=1)}}
        out = {k: torch.where(area[k] > 0, v / area[k].clamp_min(1e-300), torch.full_like(v, float("nan")))
               for k, v in out.items()}
    return {k: v.numpy() for k, v in out.items()}
