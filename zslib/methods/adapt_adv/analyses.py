"""Grad-CAM of a trained Adapt-Adv (or its base) on the cached maps of the real profile (Al-Kaabi et al., Appl.
Intell. 2022, Fig. 2): the ``cached_map_gradcam`` analysis, recorded beside a run by
:func:`zslib.analysis.records.analyze`, and :func:`gradcam_records`, which reads those records for a grid.

The chapter's quick-profile measurements of trained models, made when the page runs (not recorded):
:func:`attention_shares` (where GDFL's attention puts its weight on the parts of SynthParts birds, Fig. 15) and
:func:`gradcam_shares` (where Grad-CAM of a same-class similarity puts its mass, Fig. 2), on the images of
:func:`unseen_sample`; :func:`seen_class_count` (the class adversary's C). The chapter's pages draw them with
:mod:`zslib.present.adapt_adv`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from zslib.analysis.localization import central_mask, central_mass
from zslib.analysis.records import Analysis, recorded_analyses, register_analysis
from zslib.analysis.saliency import part_shares, similarity_gradcam
from zslib.engine.config import config_hash
from zslib.engine.data import build_dataset
from zslib.engine.models.adapted import AdaptedBackbone
from zslib.engine.models.cached import CachedBackbone
from zslib.engine.runner import build_data, load_model

__all__ = ["cached_map_gradcam", "gradcam_records", "seen_class_count", "unseen_sample", "attention_shares",
           "gradcam_shares"]

def cached_map_gradcam(model, data: dict, config, *, classes: int = 6, stage: str | None = None,
                       fraction: float = 0.5) -> dict[str, np.ndarray]:
    r"""Grad-CAM of a same-class similarity (Adapt-Adv's Fig. 2) on a cached-feature profile, for a base
    network or a GDFL network, on a fixed set of unseen test images.

    The images: the first test image of ``classes`` unseen classes spread evenly over the sorted unseen class
    ids; each one's reference is the next image of its class. The explained output is
    :math:`s = \cos(\phi(x), \phi(x_{ref}))` with the reference embedding held fixed; with :math:`A` the map of
    ``stage`` (default: the last cached map) the Grad-CAM is :math:`\mathrm{ReLU}(\sum_c \alpha_c A_c)`,
    :math:`\alpha_c = \frac1{hw}\sum_{jk}\partial s/\partial A_{cjk}`, as
    :func:`zslib.analysis.saliency.similarity_gradcam` computes it for images (which takes image batches and captum;
    a cache row is not an image, so the map is substituted here directly). A base network
    (``model.embed_pooled`` of the average-pooled map) gets the map from a second, full-map copy of the test
    split; a :class:`~zslib.methods.adapt_adv.gdfl.GDFLNet` reads it through ``forward_tapped`` (its attention and ``u``
    both see the substituted map).

    In the adapted regime (``Config.train_stages``) the maps of ``stage`` (default ``head``) are those the trained
    stages compute, and the network continues from the substituted map through the stages after it.

    What it can show with a frozen backbone: :math:`A` is the same for every model (computed once, when the
    cache was built), so two trained heads can differ only in the channel weights :math:`\alpha`; every map
    is a non-negative part of a combination of the same fixed channels. ``activation`` (the channel mean of
    :math:`A`, CML's map, no model involved) is stored as the common reference.

    Returns arrays: ``gradcam`` ``(n, h, w)`` (each divided by its maximum), ``activation`` ``(n, h, w)``,
    ``central_share`` ``(n,)`` (:func:`zslib.analysis.localization.central_mass` of the bilinearly upsampled map at
    the image size, centre box of side ``fraction``), ``central_share_activation`` ``(n,)``,
    ``uniform_share`` (the box's area share), ``rows`` and ``labels`` (the images' indices in the test split
    and their class ids), ``similarity`` ``(n,)``, and for a GDFL network ``attention_<layer>`` ``(n, h, w)``.
    """
    test, maps_net, stage, adapted = _maps_source(model, data, config, stage)
    labels = np.asarray(test.labels)
    rows, refs = _chosen_images(labels, classes)
    device = next(model.parameters()).device
    x = torch.stack([test[int(i)][0] for i in rows]).to(device)
    x_ref = torch.stack([test[int(i)][0] for i in refs]).to(device)
    gdfl = hasattr(model, "forward_tapped")
    last = list(maps_net.stage_channels)[-1]
    if not gdfl and not adapted and stage != last:
        raise ValueError(f"a base network reads only the pooled last map ({last!r}); Grad-CAM of {stage!r} is zero")
    cam, act, sim, attention = _substituted_gradcam(model, maps_net, x, x_ref, stage, gdfl=gdfl, adapted=adapted)
    size = (config.image_size, config.image_size)

    def centre(m):
        up = F.interpolate(m[:, None].float(), size=size, mode="bilinear", align_corners=False)[:, 0].clamp_min(0)
        return central_mass(up, fraction)

    out = {"gradcam": cam.cpu().numpy(), "activation": act.cpu().numpy(), "central_share": centre(cam).cpu().numpy(),
           "central_share_activation": centre(act).cpu().numpy(),
           "uniform_share": float(central_mask(*size, fraction).float().mean()),
           "rows": rows.astype(float), "labels": labels[rows].astype(float),
           "similarity": sim.detach().cpu().numpy()}
    out.update({f"attention_{name}": w.detach().cpu().numpy() for name, w in attention.items()})
    return out


def _maps_source(model, data, config, stage):
    """``(test split, maps network, stage, adapted)`` for :func:`cached_map_gradcam`: in the adapted regime the
    trained stages compute the maps (``stage`` defaults to the last trained one); for a cached backbone, a second,
    full-map copy of the test split (``stage`` defaults to the last cached map)."""
    backbone = getattr(model, "backbone", None)
    if not isinstance(backbone, (CachedBackbone, AdaptedBackbone)):
        raise TypeError("cached_map_gradcam explains a network on cached maps (the real profile); for images use "
                        "zslib.analysis.saliency.similarity_gradcam")
    adapted = isinstance(backbone, AdaptedBackbone)
    if adapted:  # the trained stages compute the maps: Grad-CAM reads the trained map of ``stage``
        test = data["unseen"] if data and "unseen" in data else build_data(config)["unseen"]
        maps_net = backbone
        stage = stage or list(backbone.stage_channels)[-1]
    else:
        test = build_dataset(config.to_profile(), "test", train=False, pooled_only=False)
        maps_net = CachedBackbone(config.backbone, config.feature_stages, config.image_size)
        stage = stage or maps_net.layout[-1][0]
    if stage not in maps_net.stage_channels:
        raise ValueError(f"unknown stage {stage!r}; the network holds {list(maps_net.stage_channels)}")
    return test, maps_net, stage, adapted


def _chosen_images(labels: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the first test image of ``classes`` unseen classes spread evenly over the sorted class ids, and
    the rows of their references (the next image of each one's class)."""
    ids = np.unique(labels)
    if not 1 <= int(classes) <= len(ids):
        raise ValueError(f"classes must be between 1 and the {len(ids)} unseen classes, got {classes}")
    chosen = ids[np.linspace(0, len(ids) - 1, int(classes)).round().astype(int)]
    rows = np.array([np.flatnonzero(labels == c)[0] for c in chosen])
    refs = np.array([np.flatnonzero(labels == c)[1] for c in chosen])
    return rows, refs


def _substituted_gradcam(model, maps_net, x, x_ref, stage, *, gdfl: bool, adapted: bool):
    """``(cam, activation, similarity, attention)``: Grad-CAM of the cosine similarity of ``x`` to the fixed
    embeddings of ``x_ref`` with the map of ``stage`` substituted into the network (each map divided by its
    maximum), the channel mean of that map, the similarities, and a GDFL network's attention maps."""
    last = list(maps_net.stage_channels)[-1]

    def maps_of(rows_x):
        return maps_net.run(rows_x, None, stage) if adapted else maps_net.maps(rows_x, [stage])[stage]

    def embed(rows_x, fmap=None):
        if gdfl:
            return model(rows_x) if fmap is None else model.forward_tapped(rows_x, {stage: lambda _: fmap})
        if adapted:
            return model(rows_x) if fmap is None else model.embed_pooled(
                maps_net.pool(maps_net.run(fmap, start_after=stage)))
        a = maps_net.maps(rows_x, [last])[last] if fmap is None else fmap
        return model.embed_pooled(a.mean((2, 3)))

    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            with torch.no_grad():
                ref = embed(x_ref)
            a = maps_of(x).detach().clone().requires_grad_(True)
            sim = F.cosine_similarity(embed(x, a), ref, dim=1)
            (grad,) = torch.autograd.grad(sim.sum(), a)
        cam = torch.relu((grad.mean((2, 3), keepdim=True) * a.detach()).sum(1))
        attention = model.attention_maps(x) if gdfl else {}
    finally:
        model.train(was_training)
    cam = cam / cam.flatten(1).amax(1).clamp_min(torch.finfo(cam.dtype).tiny)[:, None, None]
    return cam, a.detach().mean(1), sim, attention


register_analysis(Analysis("cached_map_gradcam", cached_map_gradcam, {"classes": 6, "stage": None, "fraction": 0.5}))


def gradcam_records(grid, train: bool = False):
    """The ``cached_map_gradcam`` records of seed 0 of every config of ``grid`` (name -> [record]), made when
    ``train`` (with their runs), else read; ``None`` when some are not stored
    (:func:`zslib.analysis.records.recorded_analyses`)."""
    return recorded_analyses(grid, "cached_map_gradcam", "the Grad-CAM maps of real flowers", seeds=(0,), train=train)


def seen_class_count(config) -> int:
    """The number of seen (training) classes of a run's data: the class adversary's C, whose chance level ln C sets
    the first epoch's lambda."""
    return len(np.unique(np.asarray(build_data(config)["train"].labels)))


_SAMPLES: dict = {}


def unseen_sample(config, count: int = 64):
    """``(unseen split, indices, images, part maps)``: ``count`` unseen SynthParts images spread evenly over the
    test split, with the map of their parts (computed once per config)."""
    key = (config_hash(config), count)
    if key not in _SAMPLES:
        unseen = build_data(config)["unseen"]
        idx = np.arange(0, len(unseen), max(1, len(unseen) // count))[:count]
        images = torch.stack([unseen[int(i)][0] for i in idx])
        _SAMPLES[key] = (unseen, idx, images, unseen.part_map[torch.as_tensor(idx)])
    return _SAMPLES[key]


def attention_shares(run, count: int = 64):
    """Where the attention of a trained GDFL network looks: its weights on every attended layer for the images of
    :func:`unseen_sample`, and per layer the mean mass on each part relative to the part's area
    (:func:`zslib.analysis.saliency.part_shares` with ``relative=True``: 1 is uniform). Returns ``(maps, images,
    rows)``: ``{layer: (B, h, w) weights}``, the images, one dict per layer."""
    _, _, images, parts = unseen_sample(run.config, count)
    with torch.no_grad():
        att = load_model(run, device="cpu").attention_maps(images)
    rows = []
    for layer, w in att.items():  # (B, h, w) weights summing to one over the positions
        shares = part_shares(w.float(), parts, relative=True)
        rows.append({"layer": layer, "map": f"{w.shape[-2]}x{w.shape[-1]}",
                     **{k: float(np.nanmean(v)) for k, v in shares.items() if k != "background"},
                     "background": float(np.nanmean(shares["background"]))})
    return att, images, rows


def gradcam_shares(models, count: int = 64) -> list[dict]:
    """Grad-CAM of a same-class similarity for every model of ``models`` (name -> run): each image of
    :func:`unseen_sample` explained by its cosine similarity to the next other image of its class
    (:func:`zslib.analysis.saliency.similarity_gradcam`); one dict per model with the mean mass on each part
    relative to its area."""
    unseen, idx, images, parts = unseen_sample(next(iter(models.values())).config, count)
    all_labels = np.asarray(unseen.labels)
    ref_idx = []
    for i, lab in zip(idx, all_labels[idx]):  # another image of the same class
        same = np.flatnonzero(all_labels == lab)
        ref_idx.append(int(same[same != i][0]))
    references = torch.stack([unseen[j][0] for j in ref_idx])
    rows = []
    for name, res in models.items():
        shares = part_shares(similarity_gradcam(load_model(res, device="cpu"), images, references), parts, relative=True)
        rows.append({"model": name, **{k: float(np.nanmean(v)) for k, v in shares.items()}})
    return rows
