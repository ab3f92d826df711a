"""Figures shared by the chapters: one style, image grids, retrieval strips.

Plotting helpers return the matplotlib ``Figure`` so a chapter can save or adjust it. Images are
accepted as tensors or arrays in channel-first (C, H, W) or channel-last (H, W, C) layout, with
values in [0, 1]; pass ``mean``/``std`` to undo a normalization first.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.offsetbox import AnnotationBbox, OffsetImage
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE

from zslib.engine.threads import one_thread

__all__ = ["set_style", "to_display", "image_grid", "show_retrievals", "CORRECT", "WRONG",
           "project_2d", "embedding_scatter", "plot_curves", "probe_bars", "band_plot", "attention_panels"]

CORRECT = "#2ca02c"
WRONG = "#d62728"


def set_style(context: str = "notebook") -> None:
    """The seaborn look every chapter shares (white grid, colour-blind palette, modest size)."""
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


def _image_at(images, i: int):
    """Item ``i`` of a sequence of images, or the image of a dataset item ``(image, label, ...)``."""
    item = images[i]
    return item[0] if isinstance(item, (tuple, list)) else item


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


def attention_panels(panels: dict, boxes: dict | None = None, *, mean=None, std=None, cmap: str = "magma",
                     panels_as: str = "columns", size: float = 1.6, titles: Sequence[str] | None = None):
    """Images and attention maps of the same examples side by side, e.g. DeML's Fig. 4: one grid cell per
    (example, panel); returns the figure.

    ``panels``: ``{label: batch}`` in display order, every batch holding the same ``B`` examples: a 4-D
    batch is images (``(B, C, H, W)`` or ``(B, H, W, C)``, shown with :func:`to_display` and ``mean``/``std``),
    a 3-D batch ``(B, H, W)`` is maps (shown with ``cmap``, each scaled to its own range). ``boxes``:
    ``{label: [(boxes, colour), ...]}``, rectangles ``(B, 4)`` ``(x_min, y_min, x_max, y_max)`` in the pixels
    of that panel, drawn on it. ``panels_as``: ``"columns"`` (one row per example, one column per
    label) or ``"rows"``. ``titles``: one per example (e.g. the class), shown next to its first panel.
    """
    if not panels:
        raise ValueError("attention_panels needs at least one panel")
    if panels_as not in ("columns", "rows"):
        raise ValueError(f"panels_as must be 'columns' or 'rows', got {panels_as!r}")
    counts = {label: len(batch) for label, batch in panels.items()}
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise ValueError(f"every panel needs the same, positive number of examples; got {counts}")
    unknown = set(boxes or {}) - set(panels)
    if unknown:
        raise ValueError(f"boxes are given for {sorted(unknown)}, which are not panels ({list(panels)})")
    n, k = next(iter(counts.values())), len(panels)
    if titles is not None and len(titles) != n:
        raise ValueError(f"titles needs one entry per example ({n}), got {len(titles)}")
    rows, cols = (n, k) if panels_as == "columns" else (k, n)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for p, (label, batch) in enumerate(panels.items()):
        for i in range(n):
            ax = axes[i, p] if panels_as == "columns" else axes[p, i]
            item = batch[i]
            arr = item.detach().cpu().numpy() if hasattr(item, "detach") else np.asarray(item)
            if arr.ndim == 2:
                ax.imshow(arr, cmap=cmap)
            else:
                ax.imshow(to_display(arr, mean, std))
            for bxs, colour in (boxes or {}).get(label, []):
                x0, y0, x1, y1 = (float(v) for v in bxs[i])
                ax.add_patch(plt.Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, color=colour, lw=1.5))
            _frame(ax, None)
            # the panel's label heads its column (or starts its row); an example's title starts its row
            # (or heads its column)
            if panels_as == "columns":
                if i == 0:
                    ax.set_title(label, fontsize=8, pad=2)
                if p == 0 and titles is not None:
                    ax.set_ylabel(str(titles[i]), fontsize=8)
            else:
                if i == 0:
                    ax.set_ylabel(label, fontsize=8)
                if p == 0 and titles is not None:
                    ax.set_title(str(titles[i]), fontsize=8, pad=2)
    fig.tight_layout()
    return fig


def show_retrievals(query_images, query_labels, gallery_images, gallery_labels, neighbours,
                    k: int = 5, size: float = 1.1, mean=None, std=None, title: str | None = None):
    """One row per query: the query, then its ``k`` nearest gallery images framed green when they
    share the query's label and red when they do not. ``neighbours[i]`` lists gallery indices in
    rank order (for example the indices returned by :func:`zslib.engine.evaluate.knn`). ``gallery_images``
    may be a dataset whose items are ``(image, label)``: only the images shown are read."""
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
            ax.imshow(to_display(_image_at(gallery_images, j), mean, std))
            hit = int(gallery_labels[j]) == int(query_labels[row])
            _frame(ax, CORRECT if hit else WRONG)
            if row == 0:
                ax.set_title(f"rank {col + 1}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------------------------------
# Embeddings in two dimensions (CML Figs. 4-5), training curves, probes, bands


def _as_numpy(x, name: str, ndim: int) -> np.ndarray:
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr


@one_thread()
def project_2d(embeddings, method: str = "tsne", seed: int = 0, **kwargs) -> np.ndarray:
    """Two-dimensional coordinates of ``embeddings`` (n, d) for a scatter plot.

    ``method``: ``"tsne"`` (scikit-learn's ``TSNE``, PCA initialization, perplexity 30 unless given),
    ``"umap"`` (umap-learn's ``UMAP``; its first call in a process compiles code with numba and takes
    several seconds), or ``"pca"`` (the two leading principal components). ``kwargs`` go to the
    estimator. Deterministic in ``seed``.
    """
    x = _as_numpy(embeddings, "embeddings", 2).astype(np.float32)
    if x.shape[0] < 3:
        raise ValueError(f"need at least 3 embeddings to project, got {x.shape[0]}")
    if method == "tsne":
        opts = {"perplexity": min(30.0, (x.shape[0] - 1) / 3.0), "init": "pca", "random_state": seed}
        opts.update(kwargs)
        return TSNE(n_components=2, **opts).fit_transform(x)
    if method == "umap":
        import umap  # optional (zslib[notebook]): only this projection uses it

        opts = {"random_state": seed, "n_neighbors": min(15, x.shape[0] - 1)}
        opts.update(kwargs)
        with warnings.catch_warnings():  # a seeded UMAP runs single-threaded and says so every call
            warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
            return umap.UMAP(n_components=2, **opts).fit_transform(x)
    if method == "pca":
        return PCA(n_components=2, random_state=seed, **kwargs).fit_transform(x)
    raise ValueError(f"unknown projection method {method!r}; use 'tsne', 'umap' or 'pca'")


def _spread_out(coords: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Indices of up to ``count`` points chosen greedily far from each other (farthest-point sampling),
    so thumbnails overlap as little as possible."""
    rng = np.random.default_rng(seed)
    span = coords.max(0) - coords.min(0)
    c = (coords - coords.min(0)) / np.where(span > 0, span, 1.0)
    chosen = [int(rng.integers(len(c)))]
    dist = np.linalg.norm(c - c[chosen[0]], axis=1)
    for _ in range(min(count, len(c)) - 1):
        nxt = int(dist.argmax())
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(c - c[nxt], axis=1))
    return np.array(chosen, dtype=np.int64)


def embedding_scatter(embeddings, labels, method: str = "tsne", images=None, *, coords=None,
                      n_thumbnails: int = 40, thumbnail_zoom: float = 0.5, mean=None, std=None,
                      seed: int = 0, ax=None, title: str | None = None, point_size: float = 12.0,
                      legend: bool = False, **projection_kwargs):
    """Scatter plot of embeddings projected to 2-D, coloured by label, optionally with image thumbnails
    (the style of CML Figs. 4-5).

    ``coords`` (n, 2) skips the projection (e.g. to reuse a t-SNE); otherwise :func:`project_2d` with
    ``method``. With ``images`` (n images, any layout :func:`to_display` accepts), ``n_thumbnails``
    images at well-spread points are drawn over the scatter, framed in their point's colour. Returns the
    figure; the coordinates used are attached to it as ``fig.coords``.
    """
    labels = _as_numpy(labels, "labels", 1)
    if coords is None:
        x = _as_numpy(embeddings, "embeddings", 2)
        if x.shape[0] != labels.shape[0]:
            raise ValueError(f"{x.shape[0]} embeddings but {labels.shape[0]} labels; give one label per row")
        coords = project_2d(x, method=method, seed=seed, **projection_kwargs)
    coords = _as_numpy(coords, "coords", 2)
    if coords.shape != (labels.shape[0], 2):
        raise ValueError(f"coords must have shape ({labels.shape[0]}, 2), got {coords.shape}")
    if images is not None and len(images) != labels.shape[0]:
        raise ValueError(f"{len(images)} images for {labels.shape[0]} points; give one image per embedding")
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 7.0))
    else:
        fig = ax.figure
    classes, inverse = np.unique(labels, return_inverse=True)
    cmap = plt.get_cmap("tab20" if classes.size <= 20 else "gist_ncar")
    colours = cmap(inverse / max(1, classes.size - 1) if classes.size > 20 else inverse % 20)
    ax.scatter(coords[:, 0], coords[:, 1], c=colours, s=point_size, linewidths=0, alpha=0.8)
    if legend and classes.size <= 20:
        for k, c in enumerate(classes):
            ax.scatter([], [], color=cmap(k % 20), label=str(c))
        ax.legend(fontsize=7, ncol=2, loc="best")
    if images is not None and n_thumbnails > 0:
        for i in _spread_out(coords, n_thumbnails, seed):
            box = OffsetImage(to_display(images[int(i)], mean, std), zoom=thumbnail_zoom)
            ab = AnnotationBbox(box, coords[i], frameon=True, pad=0.1,
                                bboxprops={"edgecolor": colours[i], "linewidth": 2.0})
            ax.add_artist(ab)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"{method.upper()} of {labels.shape[0]} embeddings, {classes.size} classes")
    fig.coords = coords
    return fig


def plot_curves(history, metric: str = "R@1", splits=("seen", "unseen"), ax=None, title: str | None = None,
                labels: dict | None = None):
    """Retrieval metric against training step for each evaluation set: the seen-vs-unseen curves of
    CML Fig. 3 and DeML Fig. 5.

    ``history`` is a :class:`zslib.engine.train.History`, an object with a ``.history`` (a
    :class:`zslib.experiment.Result`), or a list of them (several seeds: the mean is drawn with a band
    from the minimum to the maximum over runs, which must share their evaluation steps).
    """
    runs = list(history) if isinstance(history, (list, tuple)) else [history]
    runs = [getattr(h, "history", h) for h in runs]
    if not runs:
        raise ValueError("plot_curves needs at least one history")
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for split in splits:
        curves = [h.metric_curve(split, metric) for h in runs]
        steps = curves[0][0]
        if any(list(c[0]) != list(steps) for c in curves):
            raise ValueError(f"the runs evaluated {split!r} at different steps; plot them one by one")
        values = np.array([c[1] for c in curves], dtype=float)
        name = (labels or {}).get(split, split)
        line, = ax.plot(steps, values.mean(0), marker="o", markersize=3, label=name)
        if len(runs) > 1:
            ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.legend()
    if title:
        ax.set_title(title)
    return fig


def probe_bars(reports: dict, names: Sequence[str] | None = None, shortcut: Sequence[str] = (), ax=None,
               title: str | None = None):
    """Grouped bars of linear-probe accuracy per attribute, one bar per report, with the chance level
    of each attribute drawn as a black tick across its group and ±1 standard error as error bars.

    ``reports`` maps a legend label (e.g. ``"untrained"``, ``"trained, unseen"``) to a
    :class:`zslib.analysis.probe.ProbeReport` (anything with ``names``, ``accuracy``, ``chance``, ``stderr``
    dicts). Attributes listed in ``shortcut`` get a ``*`` in their tick label.
    """
    if not reports:
        raise ValueError("probe_bars needs at least one report")
    first = next(iter(reports.values()))
    names = list(first.names if names is None else names)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names) + 1.5), 4.0))
    else:
        fig = ax.figure
    width = 0.8 / len(reports)
    base = np.arange(len(names))
    for k, (label, rep) in enumerate(reports.items()):
        missing = [n for n in names if n not in rep.accuracy]
        if missing:
            raise KeyError(f"report {label!r} has no attribute(s) {missing}")
        ax.bar(base - 0.4 + width * (k + 0.5), [rep.accuracy[n] for n in names], width,
               yerr=[rep.stderr[n] for n in names], capsize=2, label=label)
    for i, n in enumerate(names):
        ch = float(np.mean([rep.chance[n] for rep in reports.values()]))
        ax.hlines(ch, i - 0.45, i + 0.45, colors="black", linewidth=2.0,
                  label="chance" if i == 0 else None)
    ax.set_xticks(base)
    ax.set_xticklabels([f"{n}*" if n in shortcut else n for n in names], rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("held-out probe accuracy")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def band_plot(x, series: dict, ax=None, xlabel: str = "", ylabel: str = "", title: str | None = None,
              xscale: str = "linear", marker: str = "o"):
    """Lines with confidence bands: ``series`` maps a label to ``(values, low, high)`` over ``x`` (e.g.
    the H-divergence and λ against the weight α, as in JRD Fig. 2). ``xscale="symlog"`` spreads out
    weights that include 0."""
    x = np.asarray(x, dtype=float)
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for label, (values, low, high) in series.items():
        values, low, high = (np.asarray(v, dtype=float) for v in (values, low, high))
        if not values.shape == low.shape == high.shape == x.shape:
            raise ValueError(f"series {label!r}: values, low and high must each have shape {x.shape}")
        line, = ax.plot(x, values, marker=marker, label=label)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    if xscale == "symlog":
        positive = x[x > 0]
        ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0)
    else:
        ax.set_xscale(xscale)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    if title:
        ax.set_title(title)
    return fig
