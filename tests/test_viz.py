import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from zslib.analysis import viz


def test_to_display_undoes_normalization_and_layout():
    rng = np.random.default_rng(0)
    img = rng.random((3, 5, 4)).astype(np.float32)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    normed = (torch.from_numpy(img) - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    back = viz.to_display(normed, mean, std)
    assert back.shape == (5, 4, 3)
    np.testing.assert_allclose(back, img.transpose(1, 2, 0), atol=1e-6)
    assert viz.to_display(np.full((4, 4, 1), 2.0)).max() == 1.0  # clipped, grey to RGB
    with pytest.raises(ValueError, match="3 dimensions"):
        viz.to_display(np.zeros((4, 4)))


def test_show_retrievals_frames_hits_green_and_misses_red():
    imgs = torch.rand(6, 3, 8, 8)
    gallery_labels = np.array([0, 0, 1, 1, 2, 2])
    fig = viz.show_retrievals(imgs[:2], [0, 1], imgs, gallery_labels, [[1, 2, 0], [3, 4, 2]], k=3)
    axes = np.array(fig.axes).reshape(2, 4)
    def colour(ax):
        return matplotlib.colors.to_hex(ax.spines["top"].get_edgecolor())
    assert [colour(a) for a in axes[0, 1:]] == [viz.CORRECT, viz.WRONG, viz.CORRECT]
    assert [colour(a) for a in axes[1, 1:]] == [viz.CORRECT, viz.WRONG, viz.CORRECT]
    with pytest.raises(ValueError, match="neighbours must have shape"):
        viz.show_retrievals(imgs[:2], [0, 1], imgs, gallery_labels, [[1, 2]], k=3)
    matplotlib.pyplot.close("all")


def test_image_grid_lays_out_and_refuses_empty():
    fig = viz.image_grid(torch.rand(5, 3, 8, 8), titles=list("abcde"), ncols=3)
    assert len(fig.axes) == 6 and fig.axes[4].get_title() == "e" and not fig.axes[5].axison
    with pytest.raises(ValueError):
        viz.image_grid([])
    matplotlib.pyplot.close("all")


def test_show_retrievals_reads_images_from_a_dataset():
    data = [(torch.full((3, 4, 4), 0.1 * i), i % 2) for i in range(4)]
    fig = viz.show_retrievals([data[0][0]], [0], data, [0, 1, 0, 1], [[2, 1]], k=2)
    shown = fig.axes[1].images[0].get_array()
    np.testing.assert_allclose(np.asarray(shown), 0.2, atol=1e-6)  # gallery item 2 is the one drawn
    matplotlib.pyplot.close("all")


def test_attention_panels_lays_out_images_maps_and_boxes():
    imgs, maps = torch.rand(3, 3, 10, 10), torch.rand(3, 10, 10)
    boxes = torch.tensor([[1.0, 2.0, 6.0, 7.0]] * 3)
    fig = viz.attention_panels({"image": imgs, "map": maps}, {"image": [(boxes, "yellow"), (boxes + 1, "cyan")]},
                               titles=["a", "b", "c"])
    axes = np.array(fig.axes).reshape(3, 2)  # one row per example, one column per panel
    assert [ax.get_title() for ax in axes[0]] == ["image", "map"] and axes[2, 0].get_ylabel() == "c"
    assert len(axes[1, 0].patches) == 2 and len(axes[1, 1].patches) == 0
    assert axes[0, 0].patches[0].get_xy() == (0.5, 1.5) and axes[0, 0].patches[0].get_width() == 5.0
    assert axes[0, 1].images[0].get_array().shape == (10, 10)  # a map is drawn as it is, with the colour map
    rows = viz.attention_panels({"image": imgs, "map": maps}, panels_as="rows", titles=["a", "b", "c"])
    axes = np.array(rows.axes).reshape(2, 3)
    assert axes[1, 0].get_ylabel() == "map" and axes[0, 2].get_title() == "c"
    with pytest.raises(ValueError, match="same, positive number"):
        viz.attention_panels({"image": imgs, "map": maps[:2]})
    with pytest.raises(ValueError, match="not panels"):
        viz.attention_panels({"image": imgs}, {"map": [(boxes, "red")]})
    with pytest.raises(ValueError, match="titles"):
        viz.attention_panels({"image": imgs}, titles=["a"])
    with pytest.raises(ValueError, match="panels_as"):
        viz.attention_panels({"image": imgs}, panels_as="diagonal")
    matplotlib.pyplot.close("all")
