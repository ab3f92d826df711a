"""Saliency maps: where a trained embedding network "looks".

The channel-averaged last convolutional map (CML Figs. 6-7, ``chen2022cml``, Sec. IV-E).

CML visualizes where a trained embedding network "looks" by averaging the output maps of the last
convolutional layer over the channels and showing the result over the image. No gradient is involved
(unlike Grad-CAM): the map is a property of the forward pass alone. :func:`activation_map` computes it
for any :class:`zslib.models.EmbeddingNet` (or any module with ``stage_names`` and ``features``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["activation_map", "last_conv_stage"]


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
