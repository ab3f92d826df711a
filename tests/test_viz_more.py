"""Tests of the zslib.analysis.viz additions: 2-D projections, scatter with thumbnails, curves, probe bars, bands."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.offsetbox import AnnotationBbox

from zslib.analysis import viz
from zslib.analysis.probe import ProbeReport
from zslib.engine.train import History


def _two_clusters(n=60, d=10, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat([0, 1], n // 2)
    x = rng.normal(size=(n, d)) * 0.3
    x[labels == 1] += 8.0
    return x, labels


@pytest.mark.parametrize("method", ["tsne", "pca"])
def test_projection_keeps_well_separated_clusters_apart(method):
    x, y = _two_clusters()
    kw = {"max_iter": 250} if method == "tsne" else {}  # the fewest t-SNE iterations sklearn allows
    c = viz.project_2d(x, method=method, seed=0, **kw)
    assert c.shape == (60, 2)
    c0, c1 = c[y == 0], c[y == 1]
    between = np.linalg.norm(c0.mean(0) - c1.mean(0))
    within = max(np.linalg.norm(c0 - c0.mean(0), axis=1).max(), np.linalg.norm(c1 - c1.mean(0), axis=1).max())
    assert between > within  # every point is nearer its own cluster's centre than the centres are apart
    np.testing.assert_allclose(c, viz.project_2d(x, method=method, seed=0, **kw))  # deterministic
    with pytest.raises(ValueError, match="unknown projection"):
        viz.project_2d(x, method="mds")


def test_embedding_scatter_draws_points_and_spread_out_thumbnails():
    x, y = _two_clusters()
    coords = viz.project_2d(x, "pca")
    images = torch.rand(60, 3, 8, 8)
    fig = viz.embedding_scatter(None, y, coords=coords, images=images, n_thumbnails=5)
    ax = fig.axes[0]
    boxes = [a for a in ax.artists if isinstance(a, AnnotationBbox)]
    assert len(boxes) == 5
    offsets = ax.collections[0].get_offsets()
    np.testing.assert_allclose(np.asarray(offsets), coords)
    placed = np.array([b.xy for b in boxes])
    assert len({tuple(p) for p in placed.round(6)}) == 5  # five different points
    # farthest-point choice reaches both clusters
    chosen_labels = {int(y[np.argmin(np.linalg.norm(coords - p, axis=1))]) for p in placed}
    assert chosen_labels == {0, 1}
    np.testing.assert_allclose(fig.coords, coords)
    with pytest.raises(ValueError, match="one image per embedding"):
        viz.embedding_scatter(None, y, coords=coords, images=images[:3])
    with pytest.raises(ValueError, match="coords must have shape"):
        viz.embedding_scatter(None, y, coords=coords[:10])
    plt.close("all")


def test_plot_curves_draws_the_recorded_values_and_a_band_over_runs():
    def hist(offset):
        return History(evals=[{"step": s, "seen": {"R@1": 0.1 * i + offset}, "unseen": {"R@1": 0.05 * i}}
                              for i, s in enumerate((0, 10, 20))])
    fig = viz.plot_curves(hist(0.0))
    lines = fig.axes[0].get_lines()
    assert [l.get_label() for l in lines] == ["seen", "unseen"]
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 10, 20])
    np.testing.assert_allclose(lines[0].get_ydata(), [0.0, 0.1, 0.2])
    fig = viz.plot_curves([hist(0.0), hist(0.2)])
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), [0.1, 0.2, 0.3])  # mean of runs
    assert len(fig.axes[0].collections) == 2  # one band per split
    with pytest.raises(KeyError):
        viz.plot_curves(hist(0.0), splits=("val",))
    plt.close("all")


def _report(acc, chance):
    names = tuple(acc)
    return ProbeReport(names=names, accuracy=acc, chance=chance, stderr={n: 0.01 for n in names},
                       n_values={n: 4 for n in names}, n_test=100, folds=5, grouped=True)


def test_probe_bars_heights_are_the_accuracies_and_chance_is_marked():
    a = _report({"x": 0.9, "y": 0.3}, {"x": 0.25, "y": 0.25})
    b = _report({"x": 0.5, "y": 0.6}, {"x": 0.25, "y": 0.35})
    fig = viz.probe_bars({"trained": a, "untrained": b}, shortcut=["x"])
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.9, 0.3, 0.5, 0.6])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x*", "y"]
    chance_lines = [c for c in ax.collections if c.get_label() == "chance"]
    segs = [s for c in ax.collections if hasattr(c, "get_segments") for s in c.get_segments()
            if len(s) == 2 and s[0][1] == s[1][1] and abs(s[1][0] - s[0][0] - 0.9) < 1e-9]
    assert chance_lines and sorted(s[0][1] for s in segs) == pytest.approx([0.25, 0.30])
    with pytest.raises(KeyError, match="no attribute"):
        viz.probe_bars({"a": a, "c": _report({"x": 0.5}, {"x": 0.2})})
    plt.close("all")


def test_band_plot_lines_and_bands():
    x = [0, 0.1, 1.0]
    fig = viz.band_plot(x, {"d": ([0.5, 0.4, 0.3], [0.4, 0.3, 0.2], [0.6, 0.5, 0.4])}, xscale="symlog")
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.5, 0.4, 0.3])
    assert ax.get_xscale() == "symlog" and len(ax.collections) == 1
    with pytest.raises(ValueError, match="shape"):
        viz.band_plot(x, {"d": ([0.5], [0.4], [0.6])})
    plt.close("all")
