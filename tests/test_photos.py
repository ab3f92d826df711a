"""zslib.analysis.photos: the figures on real photographs, checked on small generated images (no data needed)."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from zslib.analysis import photos as P
from zslib.present.zsml.real import _pair_ranker


class FakePhotos:
    """A dataset of coloured squares: items (image in [0, 1], label)."""

    def __init__(self, labels, size=8):
        self.labels = np.asarray(labels)
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand(len(labels), 3, size, size, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])


def test_nearest_matches_brute_force_cosine_and_excludes_the_query():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 6)).astype(np.float32)
    rows = np.array([0, 7, 39])
    got = P.nearest(x, rows, k=5)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    for r, line in zip(rows, got):
        sims = xn @ xn[r]
        sims[r] = -np.inf
        assert list(line) == list(np.argsort(-sims, kind="stable")[:5])
        assert r not in line


def test_nearest_with_zsmls_pair_ranker_ranks_by_the_score():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4)).astype(np.float32)
    w = torch.tensor([1.0, -2.0, 0.5, 3.0])

    def scorer(a, b):  # a learned-metric stand-in: a weighted negative squared distance
        return -((a - b) ** 2 * w.abs()).sum(1)

    got = P.nearest(x, [3, 11], k=4, ranker=_pair_ranker(SimpleNamespace(pair=scorer)))  # as the ZSML page ranks
    for r, line in zip([3, 11], got):
        d = ((x - x[r]) ** 2 * np.abs(w.numpy())).sum(1)
        d[r] = np.inf
        assert list(line) == list(np.argsort(d, kind="stable")[:4])


def test_query_rows_take_the_first_image_of_evenly_spaced_classes():
    labels = np.repeat(np.arange(51, 102), 3)[::-1]  # classes in reverse order: "first" is dataset order
    rows = P.query_rows(labels, n=6)
    assert len(rows) == 6
    assert sorted(labels[rows].tolist()) == [51, 61, 71, 81, 91, 101]
    for r in rows:
        assert r == np.flatnonzero(labels == labels[r])[0]


def test_retrieval_grid_caption_counts_the_correct_neighbours():
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    photos = FakePhotos(labels)
    rows = np.array([0, 3])
    good = np.array([[1, 2], [4, 5]])  # all same class
    bad = np.array([[3, 6], [4, 0]])  # one of four correct
    fig, caption = P.retrieval_grid(photos, labels, rows, {"a": good, "b": bad})
    assert "a 4, b 1" in caption and "out of 4" in caption
    frames = {ax.spines["top"].get_edgecolor() for ax in fig.axes if ax.spines["top"].get_visible()}
    assert len(frames) == 3  # black (query), green, red
    with pytest.raises(ValueError, match="shape"):
        P.retrieval_grid(photos, labels, rows, {"a": good, "c": good[:1]})


def test_overlay_maps_draws_one_row_per_map_and_checks_counts():
    photos = FakePhotos([0, 1, 2])
    fig, caption = P.overlay_maps(photos, [0, 2], {"m": np.ones((2, 3, 3))}, titles=["x", "y"])
    assert len(fig.axes) == 4 and "over its photograph" in caption
    with pytest.raises(ValueError, match="3 maps for 2"):
        P.overlay_maps(photos, [0, 2], {"m": np.ones((3, 3, 3))})


def test_missing_photos_are_a_note_or_an_error_when_the_data_was_declared(monkeypatch):
    monkeypatch.delenv(P.REQUIRE_DATA_ENV, raising=False)
    note = P.photos_unavailable("The figure", FileNotFoundError("no flowers102"))
    assert "ZS_DATA" in note.data and "/" not in note.data.split("`")[0]
    monkeypatch.setenv(P.REQUIRE_DATA_ENV, "1")
    with pytest.raises(P.PhotosRequiredError, match="ZS_REQUIRE_DATA=1"):
        P.photos_unavailable("The figure", FileNotFoundError("no flowers102"))


def test_flower_photos_without_the_data_raise_missing_data(monkeypatch, tmp_path):
    from zslib.engine.config import Config
    from zslib.engine.data import MissingDataError

    monkeypatch.setenv("ZS_DATA", str(tmp_path))
    monkeypatch.delenv("ZS_DOWNLOAD", raising=False)
    with pytest.raises(MissingDataError):
        P.flower_photos(Config.from_profile("real"))
