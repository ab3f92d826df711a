"""Figures on real photographs (Oxford Flowers-102, the ``real`` profile): what a trained model finds.

* :func:`flower_photos` -- the unseen (test) photographs as the real profile reads them (224-px centre crop
  of the image resized to 256 px), in [0, 1] for display; :func:`photos_unavailable` says what to do when
  they are missing, and fails instead when the build declared the data present (``ZS_REQUIRE_DATA=1``).
* :func:`unseen_embeddings` -- the embeddings of the unseen photographs under a recorded run. A recorded
  run keeps metrics; the runs a chapter draws also keep their trained weights (``results/recorded/weights/``,
  :mod:`zslib.engine.kept_weights`), which are used once they reproduce the run's recorded unseen retrieval metrics,
  scored from the embeddings then drawn (one pass over the unseen split). A run without them is trained again in
  a scratch folder (a head-only run of the real profile takes 5 to 10 s on one core) and must reproduce its
  recorded metrics before its embedding is shown.
* :func:`has_kept_weights`, :func:`recorded_model` -- whether a recorded run kept its weights, and its model
  from them (checked), so that a chapter can draw the method's own model beside the baseline.
* :func:`retrieval_grid` -- six unseen queries and their five nearest neighbours under each model, framed
  green (same class) or red (another class), models side by side (OML's retrieval-result style).
* :func:`overlay_maps` -- saliency or attention maps (Grad-CAM, DeML's OAM) drawn over the photograph.
* :func:`tsne_photos` -- a t-SNE of the unseen classes with thumbnails of the photographs.

Every figure function returns ``(figure, caption)``: the caption is Markdown that says what to look at,
with the counts the figure shows, so a chapter displays both in one line.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from zslib.analysis.reproduce import CLUSTER_METRICS
from zslib.analysis.viz import CORRECT, WRONG, _frame, embedding_scatter, to_display
from zslib.engine.data import DataError, data_root, get_dataset_class, test_transform
from zslib.engine.data.datasets import open_dataset
from zslib.engine.evaluate import knn
from zslib.engine.kept_weights import RETRAIN_TOLERANCE, has_kept_weights as kept, kept_embeddings, kept_model
from zslib.engine import profile as engine_profile  # repository_root() read when called (a pip install has none)
from zslib.engine.registry import get_method
from zslib.engine import runner, train as training  # called through their modules: a patch of either reaches here

__all__ = ["REQUIRE_DATA_ENV", "PhotosRequiredError", "data_required", "photos_unavailable", "missing_photos_text",
           "shown_path", "flower_photos", "query_rows", "has_kept_weights", "recorded_model", "unseen_embeddings",
           "nearest", "retrieval_grid",
           "overlay_maps", "tsne_photos", "SOURCE_NOTE", "retrieval_section"]

REQUIRE_DATA_ENV = "ZS_REQUIRE_DATA"

#: What the shared copy of Flowers-102 is, said once for every chapter that shows it.
SOURCE_NOTE = ("The photographs are Oxford Flowers-102 as this book's build reads them: a copy stored at 160 px on "
               "the short side, upsampled to 256 px and centre-cropped to 224 px, so they look softer than the "
               "originals, and the untrained features score lower on them (an estimated 1.5 points of unseen "
               "Recall@1 against full-size photographs).")


class PhotosRequiredError(RuntimeError):
    """The build declared the real data present (``ZS_REQUIRE_DATA=1``) and a photo figure cannot be drawn."""


def data_required() -> bool:
    """Whether this build declared Flowers-102 present (``ZS_REQUIRE_DATA=1``, set by ``.ci/run`` when it
    finds the shared copy): then a photo section that would be skipped fails instead."""
    return os.environ.get(REQUIRE_DATA_ENV, "").strip().lower() in ("1", "true", "yes")


def shown_path(path) -> str:
    """``path`` as a reader can use it and a page may show it: under the home folder as ``~/...``, inside the
    book's checkout as ``<checkout>/...``, else as it is."""
    path = Path(path).expanduser()
    for base, prefix in ((engine_profile.repository_root(), "<checkout>"), (Path.home(), "~")):
        if base is not None and path.is_relative_to(base):
            rel = path.relative_to(base).as_posix()
            return prefix if rel == "." else f"{prefix}/{rel}"
    return path.as_posix()


def missing_photos_text(err: BaseException | str | None = None, *, profile: str = "real",
                        dataset: str = "flowers102", markdown: bool = True) -> str:
    """What is missing, where it was looked for and the one command that fetches it, as one paragraph (inline
    code in backticks when ``markdown``): the note of a photo figure or explorer that cannot draw the ``profile``
    profile's photographs (``dataset`` under ``$ZS_DATA``, :func:`zslib.engine.data.data_root`)."""
    cls = get_dataset_class(dataset)
    root = data_root()
    code = (lambda t: f"`{t}`") if markdown else (lambda t: t)
    chosen = os.environ.get("ZS_DATA", "").strip()
    where = f"ZS_DATA={shown_path(root)} " if chosen else ""
    missing = err is None or isinstance(err, (str, FileNotFoundError))  # MissingDataError is one
    state = "are not on this machine" if missing else f"could not be read ({type(err).__name__})"
    fetch = f"{where}python -c \"import zslib.engine.data as d; d.download('{dataset}')\""
    return (f"The {profile} profile's photographs ({cls.title}) {state}: looked for in "
            f"{code(shown_path(root / cls.name))} and {code(shown_path(root))} "
            f"({'ZS_DATA' if chosen else 'the default; ZS_DATA names another folder'}). "
            f"To fetch them{' (about 330 MB)' if dataset == 'flowers102' else ''}: {code(fetch)}, or set {code('ZS_DOWNLOAD=1')} "
            "and run the chapter again (the Colab setup cell sets it).")


def photos_unavailable(what: str, err: BaseException | str | None = None, *, profile: str = "real"):
    """A short Markdown note that ``what`` cannot be drawn on this machine: which data is missing, where it was
    looked for and the command that fetches it (:func:`missing_photos_text`); with ``ZS_REQUIRE_DATA=1`` a
    :class:`PhotosRequiredError` instead (a build that promised the data must not publish a page without its
    photographs)."""
    from IPython.display import Markdown  # optional (zslib[notebook]), as in every chapter

    reason = type(err).__name__ if isinstance(err, BaseException) else (err or "missing data")
    if data_required():
        raise PhotosRequiredError(
            f"{what} needs the Flowers-102 photographs, but they could not be read ({reason}: {err}). "
            f"{REQUIRE_DATA_ENV}=1 declares them present: set ZS_DATA to the folder that holds flowers102/, "
            f"or unset {REQUIRE_DATA_ENV}.")
    return Markdown(f"*{what} is drawn on the Flowers-102 photographs. {missing_photos_text(err, profile=profile)}*")


def flower_photos(config, split: str = "test"):
    """The Flowers-102 photographs of ``split`` with the test-time transform of ``config`` (resize to
    ``config.resize_size``, centre crop ``config.image_size``) and no normalization: items ``(image in
    [0, 1], label)``, in the dataset's order, the order of the real profile's feature cache. Raises
    :class:`zslib.engine.data.errors.MissingDataError` when the files are not found; never downloads
    unless ``ZS_DOWNLOAD=1``."""
    cls = get_dataset_class(config.dataset)
    return open_dataset(cls, split=split, transform=test_transform(config.image_size, config.resize_size,
                                                                   (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)))


def query_rows(labels, n: int = 6) -> np.ndarray:
    """The fixed queries of the photo figures: the first image (in the dataset's order) of ``n`` classes
    evenly spaced over the sorted class ids. A rule, not a pick."""
    labels = np.asarray(labels)
    classes = np.unique(labels)
    chosen = classes[np.linspace(0, classes.size - 1, n).round().astype(int)]
    return np.array([int(np.flatnonzero(labels == c)[0]) for c in chosen])


def has_kept_weights(result) -> bool:
    """Whether the recorded run ``result`` (a stored :class:`~zslib.engine.store.Result`) kept its trained weights
    (``weights/<run file stem>.pt`` beside its file; :mod:`zslib.engine.kept_weights`), so that :func:`recorded_model`
    gives its model without training. A method that trains nothing needs none (its model is rebuilt)."""
    return kept(result)


def recorded_model(result, device="cpu", tolerance: float | None = None):
    """The trained model of the recorded run ``result`` from its kept weights, in eval mode, after three checks:
    the file's SHA-256 is the one ``results/recorded/SHA256SUMS`` lists, it holds this run's weights (config hash),
    and the model rebuilt from the run's config with them (float16 cast back to float32) gives the run's recorded
    retrieval metrics on every split it recorded within ``tolerance`` (default: the one the file states,
    :data:`zslib.engine.kept_weights.TOLERANCE`, 0.5 points, unless it was recorded with a wider one). A failed check raises
    :class:`zslib.engine.kept_weights.KeptWeightsError` (the figure is not drawn); a run without kept weights raises
    ``FileNotFoundError`` (see :func:`has_kept_weights`). A chapter shows "the method's own model" with it::

        if has_kept_weights(run):
            results["the method"] = run   # retrieval_section then embeds it from its kept weights, no training
    """
    return kept_model(result, torch.device(device), tolerance)


def unseen_embeddings(result, device="cpu", tolerance: float | None = None, *, with_model: bool = False):
    """``(embeddings, labels)`` of the unseen split under the model of ``result`` (a stored
    :class:`~zslib.engine.store.Result`); with ``with_model`` also the model, ``(embeddings, labels, model)``.

    A method that trains nothing is rebuilt as the run built it; a run with a checkpoint is loaded; a recorded
    run with kept weights is loaded from them (:func:`zslib.engine.kept_weights.kept_embeddings`: the checks of
    :func:`recorded_model`, with the record compared on the unseen split, the one drawn, scored from the very
    embeddings returned, so the split is embedded once) and must reproduce its recorded unseen retrieval metrics
    within ``tolerance`` (default: the file's, :data:`zslib.engine.kept_weights.TOLERANCE`, 0.5 points, or wider);
    otherwise the run is trained again in a scratch folder with the thread count of its provenance and must
    reproduce them within ``tolerance`` (default :data:`zslib.engine.kept_weights.RETRAIN_TOLERANCE`, 1 point). A run
    whose metrics score a small sample (e.g. ZSML's 4 images per class) needs a wider ``tolerance``. The
    clustering metrics, which one k-means start can move, are not compared (they are checked by
    :func:`zslib.analysis.reproduce.check_reproduced` in ``tests/test_recorded.py``; a figure needs only the
    neighbours)."""
    config, device = result.config, torch.device(device)
    if not get_method(config.method).trains or (result.checkpoint is not None and result.checkpoint.is_file()):
        model = runner.load_model(result, device)
    elif has_kept_weights(result):
        model, emb, labels = kept_embeddings(result, "unseen", device, tolerance)
        labels = np.asarray(labels)
        return (emb, labels, model) if with_model else (emb, labels)
    else:
        threads = torch.get_num_threads()
        torch.set_num_threads(int(result.provenance.get("torch_threads", 1)))
        try:
            with tempfile.TemporaryDirectory(prefix="zslib-photos-") as scratch:
                again = runner.run(config, results_dir=scratch, force=True, progress=False, device=device)
                _check_retrieval(result, again, RETRAIN_TOLERANCE if tolerance is None else tolerance)
                model = runner.load_model(again, device)
        finally:
            torch.set_num_threads(threads)
    emb, labels = _embed_unseen(model, runner.build_data(config), config, device)
    return (emb, labels, model) if with_model else (emb, labels)


def _check_retrieval(stored, again, tolerance: float) -> None:
    gaps = {(s, m): abs(again.metrics.get(s, {}).get(m, np.inf) - v) for s, row in stored.metrics.items()
            for m, v in row.items() if m not in CLUSTER_METRICS}
    (split, metric), worst = max(gaps.items(), key=lambda kv: kv[1])
    if worst > tolerance:
        raise RuntimeError(f"run {stored.config.name!r} trained again gives {split} {metric} "
                           f"{again.metrics.get(split, {}).get(metric)} against the recorded {stored.metrics[split][metric]}"
                           f" (tolerance {tolerance}): its model is not the recorded one, so it is not shown")


def _embed_unseen(model, data, config, device):
    with torch.no_grad():
        emb, labels = training.embed(model.eval(), data["unseen"], batch_size=config.eval_batch_size, device=device,
                            num_workers=0)
    return emb, np.asarray(labels)


def nearest(embeddings, rows, k: int = 5, metric: str = "cosine", ranker=None) -> np.ndarray:
    """``(len(rows), k)`` gallery indices of the ``k`` nearest neighbours of ``embeddings[rows]`` among all
    rows of ``embeddings``, the query itself excluded: by ``metric`` (:func:`zslib.engine.evaluate.knn`,
    exact), or by a learned metric's ``ranker(query, gallery, k)``, which returns the ``k`` best gallery rows of
    each query as :class:`zslib.engine.evaluate.Neighbors` (ZSML's pair scorer ranks through its
    :func:`zslib.methods.zsml.pairwise.score_topk`)."""
    x = torch.as_tensor(np.asarray(embeddings), dtype=torch.float32)
    rows = np.asarray(rows, dtype=int)
    if ranker is None:
        idx = knn(x[rows], x, k=k + 1, metric=metric, exclude_self=False).indices.numpy()
    else:
        with torch.no_grad():
            idx = ranker(x[rows], x, k + 1).indices.numpy()
    return np.array([[j for j in line if j != r][:k] for line, r in zip(idx, rows)])


def retrieval_grid(photos, labels, rows, neighbours: Mapping[str, np.ndarray], *, size: float = 0.95,
                   class_names: Sequence[str] | None = None):
    """The retrieval figure: one row per query photograph (left), then, for each model of ``neighbours``
    (name -> ``(len(rows), k)`` gallery indices, best first), its ``k`` nearest photographs, framed green when
    they share the query's class and red when not. Returns ``(figure, caption)``; the caption counts the
    green frames of each model."""
    labels, rows = np.asarray(labels), np.asarray(rows, dtype=int)
    names = list(neighbours)
    k = int(np.asarray(neighbours[names[0]]).shape[1])
    cols = 1 + len(names) * (k + 1) - 1  # a blank column between models
    fig, axes = plt.subplots(len(rows), cols, figsize=(size * cols, size * len(rows) + 0.5), squeeze=False)
    hits = {}
    for m, name in enumerate(names):
        nb = np.asarray(neighbours[name])
        if nb.shape != (len(rows), k):
            raise ValueError(f"neighbours[{name!r}] must have shape ({len(rows)}, {k}), got {nb.shape}")
        hits[name] = int(sum(labels[nb[i, j]] == labels[r] for i, r in enumerate(rows) for j in range(k)))
    for i, r in enumerate(rows):
        ax = axes[i, 0]
        ax.imshow(to_display(photos[int(r)][0]))
        _frame(ax, "black", 2.0)
        if class_names is not None:
            ax.set_ylabel(str(class_names[int(labels[r])]), fontsize=7)
        for m, name in enumerate(names):
            start = 1 + m * (k + 1)
            if m > 0:
                axes[i, start - 1].axis("off")
            for j in range(k):
                g = int(neighbours[name][i][j])
                ax = axes[i, start + j]
                ax.imshow(to_display(photos[g][0]))
                _frame(ax, CORRECT if labels[g] == labels[r] else WRONG, 3.0)
                if i == 0 and j == k // 2:
                    ax.set_title(f"{name}: {hits[name]}/{len(rows) * k} correct", fontsize=8)
    axes[0, 0].set_title("query", fontsize=8)
    fig.subplots_adjust(wspace=0.05, hspace=0.08, left=0.02, right=0.99, top=0.9, bottom=0.02)
    total = len(rows) * k
    caption = (f"**What to see.** Each row is one photograph of an unseen class (left, black frame) and its {k} "
               "nearest photographs in the unseen test set under each model, nearest first; a green frame is the "
               "query's class, a red one another class. Correct neighbours out of "
               f"{total}: " + ", ".join(f"{n} {h}" for n, h in hits.items()) + ". The queries are fixed by a rule "
               f"(the first photograph of {len(rows)} classes spread evenly over the unseen class ids), not picked.")
    return fig, caption


def overlay_maps(photos, rows, maps: Mapping[str, np.ndarray], *, size: float = 1.7, alpha: float = 0.5,
                 titles: Sequence[str] | None = None, cmap: str = "jet", what: str = "map"):
    """The photographs ``photos[rows]`` (top row) and, for each entry of ``maps`` (name -> ``(len(rows), h, w)``),
    the map upsampled (bilinear) to the photograph and drawn over it with opacity ``alpha``, each map scaled to
    its own maximum. Returns ``(figure, caption)``."""
    rows = np.asarray(rows, dtype=int)
    images = [to_display(photos[int(r)][0]) for r in rows]
    fig, axes = plt.subplots(1 + len(maps), len(rows), figsize=(size * len(rows), size * (1 + len(maps))),
                             squeeze=False)
    for j, img in enumerate(images):
        axes[0, j].imshow(img)
        if titles is not None:
            axes[0, j].set_title(str(titles[j]), fontsize=8)
    for m, (name, stack) in enumerate(maps.items(), start=1):
        stack = torch.as_tensor(np.asarray(stack, dtype=np.float32))
        if stack.shape[0] != len(rows):
            raise ValueError(f"maps[{name!r}] has {stack.shape[0]} maps for {len(rows)} photographs")
        for j, img in enumerate(images):
            up = torch.nn.functional.interpolate(stack[j][None, None], size=img.shape[:2], mode="bilinear",
                                                 align_corners=False)[0, 0].numpy()
            top = up.max()
            axes[m, j].imshow(img)
            axes[m, j].imshow(up / top if top > 0 else up, cmap=cmap, alpha=alpha, vmin=0, vmax=1)
        axes[m, 0].set_ylabel(name, fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    caption = (f"**What to see.** Top row: the photographs. Below, each {what} drawn over its photograph (red: "
               "the largest values, blue: the smallest, each map scaled to its own maximum); a map on the flower "
               "rather than on leaves or background is what the method should give.")
    return fig, caption


class _LazyPhotos:
    """The photographs of ``rows`` of a dataset, read only when a thumbnail needs one."""

    def __init__(self, photos, rows):
        self.photos, self.rows = photos, np.asarray(rows, dtype=int)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.photos[int(self.rows[i])][0]


def tsne_photos(embeddings, labels, photos, *, n_classes: int = 12, thumbnails: int = 36, seed: int = 0,
                title: str | None = None):
    """A t-SNE of the unseen photographs of ``n_classes`` classes (evenly spaced over the class ids) with
    ``thumbnails`` photographs drawn at well-spread points, framed in their class's colour. Returns
    ``(figure, caption)``."""
    labels = np.asarray(labels)
    classes = np.unique(labels)
    keep_classes = classes[np.linspace(0, classes.size - 1, min(n_classes, classes.size)).round().astype(int)]
    rows = np.flatnonzero(np.isin(labels, keep_classes))
    x = np.asarray(embeddings)[rows]
    fig = embedding_scatter(x, labels[rows], images=_LazyPhotos(photos, rows), n_thumbnails=thumbnails,
                            thumbnail_zoom=0.16, seed=seed, title=title, point_size=14)
    fig.set_size_inches(8.5, 7.5)
    caption = (f"**What to see.** {len(rows)} photographs of {len(keep_classes)} unseen classes, placed by t-SNE "
               "so that photographs with close embeddings sit close; colour is the class, and a thumbnail is framed "
               "in its class's colour. Tight single-colour islands are classes the embedding separates without "
               "having seen them; mixed regions are classes it confuses (look at the thumbnails there: similar "
               "colour and shape).")
    return fig, caption


def retrieval_section(results: Mapping, *, rankers: Mapping | None = None, tsne_of: str | Sequence[str] | None = None,
                      note: str = "", tolerance: Mapping | None = None):
    """The photo figures of a chapter in one call, as :class:`~zslib.present.base.Sections` to display:
    :func:`retrieval_grid` of the recorded runs ``results`` (name -> :class:`~zslib.engine.store.Result`, e.g. the
    untrained features, the baseline, the method; each embedded by :func:`unseen_embeddings`, from its kept weights
    when it has them), ranked by cosine similarity or, for a name in ``rankers``, by ``rankers[name](model)`` (a
    learned metric's ranker, as :func:`nearest` takes it), then :func:`tsne_photos` of the model (or each of the
    models) named by ``tsne_of``. ``note`` is added to the retrieval caption; ``tolerance`` (name -> float) widens
    the reproduction check of a run whose recorded metrics are measured on a small sample (see
    :func:`unseen_embeddings`). Without the photographs a section with the note of :func:`photos_unavailable` (an
    error under ``ZS_REQUIRE_DATA=1``)."""
    from zslib.present.base import Section, Sections  # the presentation floor imports this module: a cycle

    first = next(iter(results.values()))
    try:
        photos = flower_photos(first.config)
    except (DataError, OSError) as err:
        return Sections([Section(notes=[photos_unavailable("The retrieval figure", err).data])])
    rankers = rankers or {}
    embedded, neighbours, rows = {}, {}, None
    for name, result in results.items():
        emb, labels, model = unseen_embeddings(result, with_model=True, tolerance=(tolerance or {}).get(name))
        if not np.array_equal(labels, photos.labels):
            raise RuntimeError(f"the unseen split of {name!r} is not the photographs' test split (order or labels)")
        rows = query_rows(labels) if rows is None else rows
        embedded[name] = (emb, labels)
        neighbours[name] = nearest(emb, rows, ranker=rankers[name](model) if name in rankers else None)
    fig, caption = retrieval_grid(photos, photos.labels, rows, neighbours)
    out = [Section(figure=fig, notes=[caption + (" " + note if note else "") + " " + SOURCE_NOTE])]
    for name in ([tsne_of] if isinstance(tsne_of, str) else list(tsne_of or ())):
        fig, caption = tsne_photos(*embedded[name], photos, title=f"unseen classes, {name}")
        out.append(Section(figure=fig, notes=[caption.replace("**What to see.**", f"**What to see ({name}).**", 1)]))
    return Sections(out)
