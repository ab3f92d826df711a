"""The JRD experiments page's figures (Chu et al., ICML 2020, Figs. 4-6 analogues on Flowers-102), each a
matplotlib figure returned to the section that shows it (:mod:`zslib.present.jrd.tables`).

matplotlib is imported inside the functions: the chapters' other sections, and the index page's findings, do not
need it.
"""
from __future__ import annotations

import numpy as np

from zslib.analysis import viz
from zslib.engine.stats import format_interval, summarize
from zslib.methods.jrd.recipes import (AM_SOFTMAX, GRID_SEEDS, GRID_SIZES, MIXTURE_SEEDS, MIXTURES,
                                       REGULARIZER_NAMES, SWEEP_ALPHAS, SWEEP_SEEDS)

__all__ = ["sweep_figure", "mixture_figure", "grid_heatmap"]


def sweep_figure(study):
    """The Figs. 4-5 analogue: unseen Recall@1 of JRS, JMMD and JIntra at every swept weight, and its paired
    difference from AM-Softmax, with 95% bands over seeds."""
    import matplotlib.pyplot as plt

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
    import matplotlib.pyplot as plt

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
    import matplotlib.pyplot as plt

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
