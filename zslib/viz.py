"""Figures shared by the chapters: one style, image grids, retrieval strips.

Plotting helpers return the matplotlib ``Figure`` so a chapter can save or adjust it. Images are
accepted as tensors or arrays in channel-first (C, H, W) or channel-last (H, W, C) layout, with
values in [0, 1]; pass ``mean``/``std`` to undo a normalization first.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["set_style", "to_display", "image_grid", "show_retrievals", "CORRECT", "WRONG"]

CORRECT = "#2ca02c"
WRONG = "#d62728"


def set_style(context: str = "notebook") -> None:
    """The seaborn look every chapter shares (white grid, colour-blind palette, modest size)."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette="colorblind")
    mpl.rcParams.update({"figure.figsize": (7.0, 4.0), "figure.dpi": 100, "axes.titlesize": "medium",
                         "image.interpolation": "nearest"})


def to_display(image, mean: Sequence[float] | None = None, std: Sequence[float] | None = None) -> np.ndarray:
    """One image as an (H, W, 3) float array in [0, 1], ready for ``imshow``."""
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    arr = arr.astype(np.float32, copy=True)
    if arr.ndim != 3:
        raise ValueError(f"expected one image with 3 dimensions, got shape {arr.shape}")
    if arr.shape[0] in (1, 3) and arr.shape[-1] not in (1, 3):
        arr = arr.transpose(1, 2, 0)
    if std is not None:
        arr = arr * np.asarray(std, dtype=np.float32)
    if mean is not None:
        arr = arr + np.asarray(mean, dtype=np.float32)
    if arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    return np.clip(arr, 0.0, 1.0)


def _frame(ax, color: str | None, width: float = 4.0) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(color is not None)
        if color is not None:
            spine.set_edgecolor(color)
            spine.set_linewidth(width)


def image_grid(images, titles: Sequence[str] | None = None, ncols: int = 8,
               colors: Sequence[str | None] | None = None, size: float = 1.2,
               mean=None, std=None, suptitle: str | None = None):
    """A grid of images with optional titles and coloured frames; returns the figure."""
    import matplotlib.pyplot as plt

    n = len(images)
    if n == 0:
        raise ValueError("image_grid needs at least one image")
    ncols = max(1, min(ncols, n))
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows + (0.3 if suptitle else 0)),
                             squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.axis("off")
            continue
        ax.imshow(to_display(images[i], mean, std))
        _frame(ax, colors[i] if colors is not None else None)
        if titles is not None:
            ax.set_title(str(titles[i]), fontsize=8, pad=2)
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def show_retrievals(query_images, query_labels, gallery_images, gallery_labels, neighbours,
                    k: int = 5, size: float = 1.1, mean=None, std=None, title: str | None = None):
    """One row per query: the query, then its ``k`` nearest gallery images framed green when they
    share the query's label and red when they do not. ``neighbours[i]`` lists gallery indices in
    rank order (for example the indices returned by :func:`zslib.evaluate.knn`)."""
    import matplotlib.pyplot as plt

    neighbours = np.asarray(neighbours)
    nq = len(query_images)
    if neighbours.shape[0] != nq or neighbours.shape[1] < k:
        raise ValueError(f"neighbours must have shape ({nq}, >= {k}), got {neighbours.shape}")
    fig, axes = plt.subplots(nq, k + 1, figsize=(size * (k + 1) + 0.4, size * nq), squeeze=False)
    for row in range(nq):
        ax = axes[row, 0]
        ax.imshow(to_display(query_images[row], mean, std))
        _frame(ax, "black")
        if row == 0:
            ax.set_title("query", fontsize=9)
        for col in range(k):
            j = int(neighbours[row, col])
            ax = axes[row, col + 1]
            ax.imshow(to_display(gallery_images[j], mean, std))
            hit = int(gallery_labels[j]) == int(query_labels[row])
            _frame(ax, CORRECT if hit else WRONG)
            if row == 0:
                ax.set_title(f"rank {col + 1}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
