"""Crop and zoom: from an object-attention map to the next, finer scale (DeML Sec. 3, the operation
drawn as a circled dot in Fig. 2).

DeML feeds scale ``i + 1`` with the image of scale ``i`` cropped to where its object attention is
high and resized back to the input size ("cropped and zoomed", Sec. 3). The paper gives no further
detail; the released Caffe code thresholds the attention map (resized to the image) at its mean,
keeps the largest connected region above it, takes that region's bounding box, makes it square and
resizes the crop to the input size. We follow that recipe, batched over images, with three choices
of our own, each an argument:

* ``component``: ``"largest"`` (the released code) keeps the connected region of largest area,
  ``"peak"`` the region that contains the attention maximum, ``"all"`` every pixel above the threshold;
* ``square=True`` replaces the box by the smallest enclosing square, *shifted* into the image (the
  released code takes the mean of width and height as the side, which cuts the longer side, and
  intersects the square with the image, which can make it non-square again); a square crop is zoomed
  without changing the aspect ratio;
* ``min_size``: the box side is at least this fraction of the image side (a box around a one-pixel
  spike would zoom noise; the released code has no lower bound).

A map with nothing above the threshold (a constant map: uniform attention) gives the whole image.
Boxes are ``(x_min, y_min, x_max, y_max)`` in pixels with the maximum exclusive (the convention of
``SynthParts.boxes``), whole numbers, never empty and never outside the image. Nothing here is
differentiable with respect to the attention: the attention is parameter-free (DeML Sec. 3.1).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torchvision.ops import roi_align

from zslib.engine.checks import finite_number

__all__ = ["COMPONENTS", "attention_boxes", "crop_and_zoom", "zoom_to_attention"]

COMPONENTS = ("largest", "peak", "all")


def _check_attention(attention) -> torch.Tensor:
    if not torch.is_tensor(attention) or attention.dim() != 3:
        shape = tuple(attention.shape) if torch.is_tensor(attention) else type(attention).__name__
        raise ValueError(f"attention must be a batch of maps shaped (B, H, W), got {shape}")
    if not attention.is_floating_point() or not bool(torch.isfinite(attention).all()):
        raise ValueError("attention must be a finite floating-point tensor")
    return attention.detach().float()


def _run_max(labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Give every horizontal run of mask pixels the largest label in it (batched segment maximum)."""
    b, h, w = mask.shape
    starts = mask & ~F.pad(mask, (1, 0))[:, :, :w]
    run = starts.to(torch.int32).cumsum(-1) * mask  # run number within its row (1-based), 0 off the mask
    row = torch.arange(b * h, device=mask.device, dtype=torch.int64).reshape(b, h, 1)
    seg = (row * (w + 1) + run).reshape(-1)
    best = torch.zeros(b * h * (w + 1), dtype=labels.dtype, device=labels.device)
    best.scatter_reduce_(0, seg, labels.reshape(-1), reduce="amax")  # off-mask pixels carry label 0
    return best[seg].reshape(b, h, w) * mask


def _connected_labels(mask: torch.Tensor) -> torch.Tensor:
    """4-connected component labels of a boolean batch ``(B, H, W)``: every pixel of a component gets
    the largest pixel number (1-based, row-major) in it; background 0.

    Batched label propagation along runs: each round every horizontal run of mask pixels, then every
    vertical run, takes the largest label in it, until nothing changes. A blob-shaped region needs a
    few rounds (a round crosses the whole region along a row or column, not one pixel)."""
    b, h, w = mask.shape
    ids = torch.arange(1, h * w + 1, device=mask.device, dtype=torch.float32 if h * w < 2 ** 24 else torch.float64)
    ids = ids.reshape(1, h, w)
    labels = torch.where(mask, ids, torch.zeros((), dtype=ids.dtype, device=mask.device))
    mask_t = mask.transpose(1, 2).contiguous()
    while True:
        nxt = _run_max(labels, mask)
        nxt = _run_max(nxt.transpose(1, 2).contiguous(), mask_t).transpose(1, 2)
        if torch.equal(nxt, labels):
            return labels.long()
        labels = nxt.contiguous()


def attention_boxes(attention: torch.Tensor, *, threshold="mean", component: str = "largest",
                    square: bool = True, min_size: float = 0.25, image_size=None) -> torch.Tensor:
    """Boxes around the high-attention region of each map, batched: ``(B, 4)`` float, whole pixels.

    ``attention``: ``(B, H, W)`` (e.g. :func:`zslib.methods.deml.object_attention.object_attention_map` at the image
    size). ``threshold``: ``"mean"`` (the released code: pixels above the map's mean) or a number ``t``
    in [0, 1): pixels above ``min + t (max - min)``. ``component``, ``square`` and ``min_size`` as in
    the module docstring. ``image_size``: ``(H_img, W_img)`` to express the boxes in the pixels of an
    image of another size than the map (the map is taken to cover the image); default the map's size.
    """
    att = _check_attention(attention)
    if component not in COMPONENTS:
        raise ValueError(f"component must be one of {COMPONENTS}, got {component!r}")
    finite_number(min_size, "min_size (a fraction of the image side)", low=0, high=1)
    b, h, w = att.shape
    flat = att.reshape(b, -1)
    lo, hi = flat.min(1).values, flat.max(1).values
    if threshold == "mean":
        cut = flat.mean(1)
    elif isinstance(threshold, str):
        raise ValueError(f"threshold must be 'mean' or a fraction in [0, 1), got {threshold!r}")
    else:
        t = finite_number(threshold, "threshold (a fraction in [0, 1) between the map's minimum and maximum)",
                          low=0, high=1)
        if t >= 1:
            raise ValueError(f"threshold must be 'mean' or a fraction in [0, 1), got {threshold!r}")
        cut = lo + t * (hi - lo)
    mask = att > cut[:, None, None]
    if component != "all":
        labels = _connected_labels(mask).reshape(b, -1)
        if component == "largest":
            counts = torch.zeros(b, h * w + 1, device=att.device).scatter_add_(
                1, labels, torch.ones_like(labels, dtype=torch.float32))
            counts[:, 0] = 0
            chosen = counts.argmax(1)  # ties: the smallest label, i.e. a deterministic choice
        else:
            chosen = labels.gather(1, flat.argmax(1, keepdim=True))[:, 0]
        mask = (labels == chosen[:, None]) & (chosen[:, None] > 0)
        mask = mask.reshape(b, h, w)
    rows, cols = mask.any(2), mask.any(1)
    empty = ~rows.any(1)
    ar_h = torch.arange(h, device=att.device)
    ar_w = torch.arange(w, device=att.device)
    y0 = torch.where(rows, ar_h, h).min(1).values
    y1 = torch.where(rows, ar_h + 1, 0).max(1).values
    x0 = torch.where(cols, ar_w, w).min(1).values
    x1 = torch.where(cols, ar_w + 1, 0).max(1).values
    boxes = torch.stack([x0, y0, x1, y1], 1).double()
    boxes[empty] = torch.tensor([0.0, 0.0, float(w), float(h)], dtype=boxes.dtype, device=boxes.device)
    if image_size is not None:
        ih, iw = (int(image_size), int(image_size)) if isinstance(image_size, int) else map(int, image_size)
        scale = torch.tensor([iw / w, ih / h, iw / w, ih / h], dtype=boxes.dtype, device=boxes.device)
        boxes = boxes * scale
        boxes[:, :2] = boxes[:, :2].floor()
        boxes[:, 2:] = boxes[:, 2:].ceil()
        h, w = ih, iw
    return _fit(boxes, h, w, square, min_size).float()


def _fit(boxes: torch.Tensor, h: int, w: int, square: bool, min_size: float) -> torch.Tensor:
    """Enlarge to ``min_size`` (and to a square), keep the centre, shift inside the image, clip."""
    cx = (boxes[:, 0] + boxes[:, 2]) / 2
    cy = (boxes[:, 1] + boxes[:, 3]) / 2
    bw = boxes[:, 2] - boxes[:, 0]
    bh = boxes[:, 3] - boxes[:, 1]
    floor_w = max(1, math.ceil(min_size * w))
    floor_h = max(1, math.ceil(min_size * h))
    if square:
        side = torch.maximum(bw, bh).clamp_min(max(floor_w, floor_h))
        bw, bh = side.clamp_max(w), side.clamp_max(h)
    else:
        bw, bh = bw.clamp(floor_w, w), bh.clamp(floor_h, h)
    x0 = (cx - bw / 2).round().clamp(min=0)
    y0 = (cy - bh / 2).round().clamp(min=0)
    x0 = torch.minimum(x0, w - bw) + 0.0  # + 0.0 turns a -0.0 from rounding into 0.0
    y0 = torch.minimum(y0, h - bh) + 0.0
    return torch.stack([x0, y0, x0 + bw, y0 + bh], 1)


def crop_and_zoom(images: torch.Tensor, boxes: torch.Tensor, size=None) -> torch.Tensor:
    """Crop each image to its box and resize the crop to ``size`` (default: the images' size), batched.

    ``images``: ``(B, C, H, W)``; ``boxes``: ``(B, 4)`` pixels ``(x_min, y_min, x_max, y_max)``,
    maximum exclusive. Uses ``torchvision.ops.roi_align`` with ``aligned=True`` (pixel ``i`` covers
    ``[i, i + 1)``): bilinear sampling when the crop is enlarged, averaging over several samples per
    output pixel when it is shrunk. The whole-image box at the same size returns the image itself.
    """
    if not torch.is_tensor(images) or images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got {tuple(getattr(images, 'shape', ()))}")
    if not torch.is_tensor(boxes) or boxes.shape != (images.shape[0], 4):
        raise ValueError(f"boxes must be (B, 4) with B = {images.shape[0]} images, got "
                         f"{tuple(getattr(boxes, 'shape', ()))}")
    size = tuple(images.shape[-2:]) if size is None else \
        ((int(size), int(size)) if isinstance(size, int) else tuple(int(s) for s in size))
    rois = torch.cat([torch.arange(len(boxes), device=images.device, dtype=images.dtype)[:, None],
                      boxes.to(device=images.device, dtype=images.dtype)], 1)
    return roi_align(images.contiguous(), rois, output_size=size, spatial_scale=1.0, sampling_ratio=-1,
                     aligned=True)


def zoom_to_attention(images: torch.Tensor, attention: torch.Tensor, size=None, **box_options):
    """:func:`attention_boxes` then :func:`crop_and_zoom`: the next scale's input and the boxes used.

    ``attention`` may have another resolution than ``images``; its boxes are expressed in image pixels.
    Returns ``(crops (B, C, size), boxes (B, 4))``.
    """
    boxes = attention_boxes(attention, image_size=tuple(images.shape[-2:]), **box_options)
    return crop_and_zoom(images, boxes, size), boxes
