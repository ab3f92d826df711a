"""The JRD experiments page's figures (Chu et al., ICML 2020, Figs. 4-6 analogues on Flowers-102), each a
matplotlib figure returned to the section that shows it (:mod:`zslib.present.jrd.tables`).

matplotlib is imported inside the functions: the chapters' other sections, and the index page's findings, do not
need it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from zslib.analysis import viz
from zslib.engine.stats import format_interval, summarize
from zslib.methods.jrd.recipes import (AM_SOFTMAX, GRID_SEEDS, GRID_SIZES, MIXTURE_SEEDS, MIXTURES,
                                       REGULARIZER_NAMES, SWEEP_ALPHAS, SWEEP_SEEDS)
from zslib.methods.jrd import diversification as D
from zslib.present.base import Section

__all__ = ["sweep_figure", "mixture_figure", "grid_heatmap", "kernel_figure"]


def sweep_figure(study):
    """The Figs. 4-5 analogue: unseen Recall@1 of JRS, JMMD and JIntra at every swept weight, and its paired
    difference from AM-Softmax, with 95% bands over seeds."""
    base = study.sweep[AM_SOFTMAX]
    series, diffs = {}, {}
    for reg, label in REGULARIZER_NAMES.items():
        stats = [summarize(base)] + [summarize(study.sweep[reg, a]) for a in SWEEP_ALPHAS]
        series[label] = tuple([100 * s[k] for s in stats] for k in range(3))
        # at alpha = 0 every model is AM-Softmax itself
        diffs[label] = tuple([0.0] + [100 * study.sweep_pairs[reg, a].diff[k] for a in SWEEP_ALPHAS] for k in range(3))
    x = (0.0,) + SWEEP_ALPHAS
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    fig.suptitle(f"Figs. 4-5 analogue on the Flowers-102 test classes: a descriptive sweep, {len(SWEEP_SEEDS)} seeds")
    viz.band_plot(x, series, ax=axes[0], xlabel=r"weight $\alpha$ of the regularizer", ylabel="unseen Recall@1 (%)",
                  xscale="symlog", title="unseen Recall@1, 95% bands over seeds")
    m, lo, hi = (100 * v for v in summarize(base))
    axes[0].axhline(m, color="gray", linestyle="--", label=r"AM-Softmax ($\alpha = 0$)")
    axes[0].axhspan(lo, hi, color="gray", alpha=0.1)
    viz.band_plot(x, diffs, ax=axes[1], xlabel=r"weight $\alpha$ of the regularizer",
                  ylabel="minus AM-Softmax, same seed (points)", xscale="symlog",
                  title="minus AM-Softmax, paired by seed, 95% bands")
    axes[1].axhline(0.0, color="gray", linestyle="--", label="AM-Softmax")
    for ax in axes:
        # 0.4 to 0.8: ticks without labels
        ax.set_xticks(x, [f"{a:g}" if a in (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0) else "" for a in x])
        ax.legend(loc="lower left")
    fig.tight_layout()
    return fig


def mixture_figure(study):
    """The Fig. 6 analogue on the diagonal K = K': unseen Recall@1 of JRD at alpha = 1 and its paired difference
    from one Gaussian per layer, with 95% bands over seeds."""
    sizes = [m[0] for m in MIXTURES]  # K = K' on the diagonal
    stats = [summarize(study.mixtures[m]) for m in MIXTURES]
    diffs = [(0.0, 0.0, 0.0)] + [study.mixture_pairs[m].diff for m in MIXTURES[1:]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    fig.suptitle(f"Fig. 6 analogue on the Flowers-102 test classes: JRD, alpha = 1, {len(MIXTURE_SEEDS)} seeds")
    viz.band_plot(sizes, {"JRD": tuple([100 * s[i] for s in stats] for i in range(3))}, ax=axes[0],
                  xlabel="Gaussians per layer, K = K'", ylabel="unseen Recall@1 (%)",
                  title="unseen Recall@1, 95% bands")
    viz.band_plot(sizes, {"JRD": tuple([100 * d[i] for d in diffs] for i in range(3))}, ax=axes[1],
                  xlabel="Gaussians per layer, K = K'", ylabel="minus (1, 1), same seed (points)",
                  title="minus (K, K') = (1, 1), paired by seed, 95% bands")
    axes[1].axhline(0.0, color="gray", linestyle="--", label="(1, 1)")
    for ax in axes:
        ax.set_xticks(sizes, [str(m) for m in MIXTURES])
        ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def grid_heatmap(study) -> tuple[object, np.ndarray]:
    """The whole Fig. 6 grid as a heatmap of the mean unseen Recall@1, each cell with its paired difference from
    (1, 1); returns ``(figure, the cell means in percent)``."""
    means = np.array([[100 * summarize(study.mixture_grid[k, kk])[0] for kk in GRID_SIZES] for k in GRID_SIZES])
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    im = ax.imshow(means, cmap="viridis")
    for i, k in enumerate(GRID_SIZES):
        for j, kk in enumerate(GRID_SIZES):
            p = study.grid_pairs.get((k, kk))
            note = "reference" if p is None else f"{format_interval(p.diff, digits=2, signed=True)}\n{p.verdict}"
            ax.text(j, i, f"{means[i, j]:.2f}%\n{note}", ha="center", va="center", fontsize=8,
                    color="white" if means[i, j] < means.mean() else "black")
    ax.set_xticks(range(len(GRID_SIZES)), [str(k) for k in GRID_SIZES])
    ax.set_yticks(range(len(GRID_SIZES)), [str(k) for k in GRID_SIZES])
    ax.set_xlabel("K': Gaussians of the embedding layer")
    ax.set_ylabel("K: Gaussians of the pooling layer")
    ax.set_title(f"mean unseen Recall@1; minus (1, 1), paired, {len(GRID_SEEDS)} seeds (points)")
    fig.colorbar(im, ax=ax, label="mean unseen Recall@1 (%)")
    fig.tight_layout()
    return fig, means


# ------------------------------------------------------------------------------- the derivation's figure

def kernel_figure(seed: int = 0):
    """The main chapter's figure at the derivation, a :class:`~zslib.present.base.Section`: left, the kernels of JRD
    against the squared distance in units of the bandwidth tau (each computed by the library's kernel on points at
    those distances: the Gaussian at tau/2, tau and 2 tau, their mixture, and the Laplace kernel); right, five
    classes in 2-D and their joint similarities ``S_JRS(I, J)`` (Eq. 8, :func:`kernel_mean_embeddings` with the
    mixture at the batch's own tau), whose mean over the pairs of different classes is the JRS term (Eq. 11,
    :func:`jrs_regularizer`)."""
    d2 = torch.linspace(0.0, 4.0, 81, dtype=torch.float64)
    line = torch.stack([d2.sqrt(), torch.zeros_like(d2)], 1)  # points at squared distance d2 from the first
    curves = {f"Gaussian, σ² = {s:g}τ": D.gaussian_kernel(line, scales=(s,), tau=1.0)[0] for s in (0.5, 1.0, 2.0)}
    curves["mixture of the three (pooling, embedding)"] = D.gaussian_kernel(line, tau=1.0)[0]
    curves["Laplace, σ = 1"] = D.laplace_kernel(line, sigma=1.0)[0]
    gen = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.0, 0.0], [0.8, 0.3], [3.0, 0.0], [3.0, 2.5], [-2.5, -1.0]], dtype=torch.float64)
    labels = torch.arange(5).repeat_interleave(12)
    points = centres[labels] + 0.5 * torch.randn(len(labels), 2, generator=gen, dtype=torch.float64)
    means = D.kernel_mean_embeddings([points], labels, [D.GAUSSIAN_SCALES])
    jrs = float(D.jrs_regularizer([points], labels, [D.GAUSSIAN_SCALES]))

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3), gridspec_kw={"width_ratios": [1.3, 1, 1]})
    for (name, k), style in zip(curves.items(), (":", ":", ":", "-", "--")):
        axes[0].plot(d2, k, style, label=name, lw=2 if style == "-" else 1.2)
    axes[0].set_xlabel("squared distance ‖x − x′‖² / τ"); axes[0].set_ylabel("k(x, x′)")
    axes[0].legend(fontsize=7); axes[0].set_title("JRD's kernels against distance", fontsize=9)
    for c in range(5):
        p = points[labels == c]
        axes[1].scatter(p[:, 0], p[:, 1], s=9, label=f"class {c}")
    axes[1].set_aspect("equal"); axes[1].set_title("five classes of a batch", fontsize=9)
    axes[1].legend(fontsize=6, loc="upper left")
    image = axes[2].imshow(means.inner.numpy(), cmap="viridis", vmin=0)
    axes[2].set_xticks(range(5)); axes[2].set_yticks(range(5))
    axes[2].set_xlabel("class J"); axes[2].set_ylabel("class I")
    axes[2].set_title("joint similarity S(I, J), Eq. 8", fontsize=9)
    fig.colorbar(image, ax=axes[2], fraction=0.046)
    fig.tight_layout()
    inner = means.inner.numpy()
    off = ~np.eye(5, dtype=bool)
    i, j = np.unravel_index(np.where(off, inner, -1).argmax(), inner.shape)
    far = np.unravel_index(np.where(off, inner, 2).argmin(), inner.shape)
    return Section(figure=fig, notes=[
        f"Off the diagonal, the most similar pair of classes is ({i}, {j}), S = {inner[i, j]:.3f}, the least similar "
        f"({far[0]}, {far[1]}), S = {inner[far]:.2g}; the diagonal holds each class's ‖μ̂_I‖², between "
        f"{inner.diagonal().min():.2f} and {inner.diagonal().max():.2f}. The JRS term of this batch, the mean of S over "
        f"its ordered pairs of different classes weighted by n_I n_J, is {jrs:.4f}: minimizing it pushes the classes "
        "that are close at the scale τ apart, and hardly moves those already far."])
