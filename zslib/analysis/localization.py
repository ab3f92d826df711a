"""How well an attention map finds the object: scores against known object masks and boxes.

DeML shows its object attention only as pictures (Fig. 4). On SynthParts the object's pixels and its
tight box are known (``SynthParts.object_masks()``, ``SynthParts.boxes``), so localization becomes a
number. Three scores, each per image:

* **mass on object** -- the share of the attention mass that falls on object pixels,
  ``sum(A * mask) / sum(A)``. Uniform attention scores the object's area share, so the *lift*
  (mass share over area share) is 1 for a map that knows nothing and above 1 for one that helps;
* **peak on object** -- whether the attention maximum lies on the object (the "pointing game");
* **box IoU** -- intersection over union of the crop box (:func:`zslib.methods.deml.attention_crop.attention_boxes`)
  with the object's box. The whole-image box scores the object box's area share.

:func:`localization_scores` returns the means over images together with the two chance levels.

Photographs without masks (Flowers-102 as stored here) allow only a weaker number,
:func:`central_mass`: the share of the mass in the central region of the frame. It says where the
attention sits relative to the *frame*, not whether it sits on the *object*: a photograph with its
object in the centre and a method that prefers the centre whatever the image both raise it.
"""
from __future__ import annotations

import torch

from zslib.engine.checks import finite_number

__all__ = ["mass_on_object", "peak_on_object", "box_iou", "localization_scores", "central_mask", "central_mass"]


def _check_pair(attention, masks):
    if not torch.is_tensor(attention) or attention.dim() != 3:
        raise ValueError(f"attention must be (B, H, W), got {tuple(getattr(attention, 'shape', ()))}")
    if not torch.is_tensor(masks) or masks.shape != attention.shape:
        raise ValueError(f"masks must have the attention's shape {tuple(attention.shape)}, got "
                         f"{tuple(getattr(masks, 'shape', ()))}; resize the attention to the image size first")
    att = attention.detach().float()
    if bool((att < 0).any()) or not bool(torch.isfinite(att).all()):
        raise ValueError("attention must be finite and non-negative (an attention map, not a logit map)")
    return att, masks.to(device=att.device, dtype=torch.bool)


def mass_on_object(attention: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Share of each map's mass on the object, ``(B,)``. A map with no mass counts as uniform."""
    att, masks = _check_pair(attention, masks)
    total = att.flatten(1).sum(1)
    on = (att * masks).flatten(1).sum(1)
    area = masks.flatten(1).float().mean(1)
    return torch.where(total > 0, on / torch.where(total > 0, total, torch.ones_like(total)), area)


def peak_on_object(attention: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Whether each map's maximum (the first one in row-major order on ties) is an object pixel, ``(B,)``."""
    att, masks = _check_pair(attention, masks)
    idx = att.flatten(1).argmax(1, keepdim=True)
    return masks.flatten(1).gather(1, idx)[:, 0]


def box_iou(boxes: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """Intersection over union of matching boxes ``(x_min, y_min, x_max, y_max)`` (max exclusive), ``(B,)``.

    Two empty boxes have IoU 0.
    """
    a, b = torch.as_tensor(boxes, dtype=torch.float64), torch.as_tensor(other, dtype=torch.float64)
    if a.dim() != 2 or a.shape[1] != 4 or a.shape != b.shape:
        raise ValueError(f"boxes must be two (B, 4) tensors of the same shape, got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    b = b.to(a.device)
    iw = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp_min(0)
    ih = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp_min(0)
    inter = iw * ih
    area = lambda x: (x[:, 2] - x[:, 0]).clamp_min(0) * (x[:, 3] - x[:, 1]).clamp_min(0)  # noqa: E731
    union = area(a) + area(b) - inter
    return torch.where(union > 0, inter / torch.where(union > 0, union, torch.ones_like(union)),
                       torch.zeros_like(union))


def localization_scores(attention: torch.Tensor, masks: torch.Tensor, object_boxes: torch.Tensor,
                        boxes: torch.Tensor) -> dict[str, float]:
    """Mean localization scores of attention maps against the objects' masks and boxes.

    ``attention`` and ``masks``: ``(B, H, W)`` at the image size; ``object_boxes``: ``(B, 4)`` (e.g.
    ``SynthParts.boxes``). ``boxes``: ``(B, 4)``, the crop boxes a method draws from ``attention`` (DeML's
    :func:`zslib.methods.deml.attention_crop.attention_boxes`), scored against ``object_boxes``.

    Returns ``mass_on_object``, ``area_share`` (its chance level: uniform attention), ``lift`` (the mean
    per-image ratio of the two), ``peak_on_object``, ``box_iou`` and ``box_iou_full_image`` (its chance
    level: no crop), all floats.
    """
    att, masks = _check_pair(attention, masks)
    obj = torch.as_tensor(object_boxes, dtype=torch.float64, device=att.device)
    if obj.shape != (att.shape[0], 4):
        raise ValueError(f"object_boxes must be ({att.shape[0]}, 4), got {tuple(obj.shape)}")
    mass = mass_on_object(att, masks)
    area = masks.flatten(1).float().mean(1)
    h, w = att.shape[-2:]
    full = torch.tensor([[0.0, 0.0, float(w), float(h)]], dtype=torch.float64, device=att.device).expand_as(obj)
    return {
        "mass_on_object": float(mass.mean()),
        "area_share": float(area.mean()),
        "lift": float((mass / area.clamp_min(1e-12)).mean()),
        "peak_on_object": float(peak_on_object(att, masks).float().mean()),
        "box_iou": float(box_iou(boxes, obj).mean()),
        "box_iou_full_image": float(box_iou(full, obj).mean()),
    }


def central_mask(height: int, width: int, fraction: float = 0.5) -> torch.Tensor:
    """Boolean ``(height, width)`` mask of the central box whose sides are ``fraction`` of the image's.

    The box is centred, its sides are ``round(fraction * side)`` pixels (at least one), so it covers
    about ``fraction ** 2`` of the image (a quarter for the default 0.5).
    """
    fraction = finite_number(fraction, "fraction (the central box's side over the image side)", low=0, high=1, low_open=True)
    if int(height) < 1 or int(width) < 1:
        raise ValueError(f"height and width must be positive, got {height} x {width}")
    mask = torch.zeros(int(height), int(width), dtype=torch.bool)
    bh, bw = (max(1, round(fraction * s)) for s in (int(height), int(width)))
    y0, x0 = (int(height) - bh) // 2, (int(width) - bw) // 2
    mask[y0:y0 + bh, x0:x0 + bw] = True
    return mask


def central_mass(attention: torch.Tensor, fraction: float = 0.5) -> torch.Tensor:
    """Share of each map's mass in the central box of :func:`central_mask`, ``(B,)``.

    A scale-free number for images without object masks. Uniform attention scores the box's area
    share (``central_mask(...).float().mean()``, about ``fraction ** 2``). What it measures: how much of
    the attention the frame's centre receives. What it does not: localization. A centred object
    and a centre-biased method look the same to it; compare methods on the same images, and with a
    null (e.g. maps whose positions are shuffled) to see how much of a shift the method makes by itself.
    """
    if not torch.is_tensor(attention) or attention.dim() != 3:
        raise ValueError(f"attention must be (B, H, W), got {tuple(getattr(attention, 'shape', ()))}")
    mask = central_mask(attention.shape[1], attention.shape[2], fraction).to(attention.device)
    return mass_on_object(attention, mask.expand_as(attention))
