"""DeML's explorer (Chen and Deng, CVPR 2019; ``chen2019deml``): the object attention map of one photograph as
the random walk of Eqs. 2-3 runs longer, built on the book's explorer framework (:mod:`zslib.analysis.explorers`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from zslib.analysis.explorers import Control, Explorer, Frame, figure_uri
from zslib.analysis.viz import to_display
from zslib.methods.deml.object_attention import object_attention_map

__all__ = ["deml_attention"]


def deml_attention(image, fmaps, *, steps: Sequence[int] = (0, 1, 2, 3, 5, 10, 20, 50), mean=None, std=None,
                   spatial_sigma: float | None = None, size: int = 160) -> Explorer:
    """DeML's object attention map (OAM) of one photograph after T random-walk steps (DeML Eq. 2-3).

    ``image``: the photograph (C, H, W), normalized with ``mean``/``std``; ``fmaps``: its feature maps
    ``[(1, C_k, h_k, w_k), ...]`` (or a dict). Each step calls
    :func:`zslib.methods.deml.object_attention.object_attention_map` with ``steps=T`` (T = 0 is the uniform
    start of the walk); the frame shows the photo, the map and the map over the photo, with how far the
    map still is from the walk's stationary distribution (the map at T = 200).
    """
    photo = to_display(image, mean, std)
    hw = photo.shape[:2]
    maps = list(fmaps.values()) if isinstance(fmaps, Mapping) else list(fmaps)
    maps = [m.detach().double() if torch.is_tensor(m) else torch.as_tensor(m, dtype=torch.float64) for m in maps]

    def oam(t):
        with torch.no_grad():
            return object_attention_map(maps, hw, steps=t, spatial_sigma=spatial_sigma)[0].float().numpy()

    limit = oam(200)

    def render(T):
        t = T
        m = oam(t)
        gap = float(np.abs(m - limit).mean())
        fig, axes = plt.subplots(1, 3, figsize=(7.5, 2.6))
        axes[0].imshow(photo)
        axes[0].set_title("photograph")
        axes[1].imshow(m, cmap="magma", vmin=0, vmax=1)
        axes[1].set_title(f"OAM after T = {t}")
        axes[2].imshow(photo)
        axes[2].imshow(m, cmap="magma", alpha=0.55, vmin=0, vmax=1)
        axes[2].set_title("map over the photograph")
        for a in axes:
            a.set_xticks([])
            a.set_yticks([])
        fig.tight_layout()
        text = f"T = {t}: mean |map - map at T = 200| = {gap:.4f}"
        picture = f'<img alt="object attention after {t} steps" src="{figure_uri(fig, fmt="jpeg")}">'
        return Frame(f"{picture}<div>{text}</div>", {"steps": t, "map": m, "gap": gap})

    steps = [int(t) for t in steps]
    control = Control("T", [(str(t), t) for t in steps], "slider", label="random-walk steps T",
                      default=steps.index(10) if 10 in steps else 0)  # the paper's T = 10 first
    return Explorer("DeML: the object attention map over T random-walk steps", [control], render)
