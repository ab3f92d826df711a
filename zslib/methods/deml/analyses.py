"""What the ``J`` learners of a trained DeML attend to (Chen and Deng, CVPR 2019, Sec. 3.2 and Fig. 5): the
``learner_attention`` analysis, recorded beside a run by :func:`zslib.analysis.records.analyze`; and the few
steps the chapter's pages (:mod:`zslib.present.deml`) take on trained networks and analysis records:
loading a run's network for its embeddings or its maps, reading the recorded ``learner_attention`` records.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from zslib.analysis.records import Analysis, recorded_analyses, register_analysis
from zslib.engine.runner import build_data, build_model, load_model
from zslib.engine.train import embed, set_seed
from zslib.methods.deml.network import DeMLNet

__all__ = ["learner_attention", "learner_attention_parts", "unseen_embeddings", "backbone_maps", "first_of_each_class",
           "learner_attention_records"]

def first_of_each_class(labels) -> np.ndarray:
    """Positions of the first image (in the set's order) of every class, by class id."""
    labels = np.asarray(labels)
    return np.array([int(np.flatnonzero(labels == c)[0]) for c in np.unique(labels)])


def _pairwise_mean(v: torch.Tensor) -> torch.Tensor:
    """``v`` ``(J, B, n)`` rows centred and unit-length over ``n``: their mean correlation over the pairs
    ``j < k`` of the first axis, per image ``(B,)``."""
    v = F.normalize(v - v.mean(-1, keepdim=True), dim=-1)
    j = v.shape[0]
    corr = torch.einsum("jbn,kbn->bjk", v, v)
    first, second = torch.triu_indices(j, j, offset=1)
    return corr[:, first, second].mean(-1)


def _top_overlap(a: torch.Tensor, top: int) -> torch.Tensor:
    """Jaccard overlap of the ``top`` channels with the largest weight, mean over learner pairs, per image."""
    j, b, c = a.shape
    sets = torch.zeros(j, b, c, dtype=torch.bool)
    sets.scatter_(-1, a.topk(top, dim=-1).indices.cpu(), True)
    first, second = torch.triu_indices(j, j, offset=1)
    inter = (sets[first] & sets[second]).sum(-1).double()
    return (inter / (2 * top - inter)).mean(0)


def learner_attention_parts(model: DeMLNet, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """What the ``J`` learners of scale 1 of ``model`` attend to, for the inputs ``x``.

    * ``weights`` ``(J, B, C)``: each CAM's channel weights (DeML's CAM; averaged over positions for the
      released code's per-position variant);
    * ``evidence`` ``(J, B, h, w)``: where each learner's output comes from. With average pooling learner
      ``j``'s raw output is ``z_j = mean_p W_j (a_j o u_p)`` (``u_p`` the map at position ``p`` after GNet,
      ``a_j`` the CAM weights), so ``e_j(p) = <z_j / ||z_j||, W_j (a_j o u_p)>`` splits its length over the
      positions: ``mean_p e_j(p) = ||z_j||`` (the class-activation-map decomposition, for an embedding);
    * ``activation`` ``(B, h, w)``: the channel mean of GNet's map of the unweighted input (no CAM), the
      reference (on cached maps GNet is the identity: the channel mean of the map the CAMs reweight).
    """
    if not isinstance(model, DeMLNet) or not model.use_cam:
        raise TypeError("learner_attention needs a DeMLNet with channel attention (cam=True)")
    bb = model.backbones[0]
    if bb.pooling != "avg":
        raise ValueError(f"the evidence maps split an average-pooled output; {bb.name} pools by {bb.pooling!r}")
    u = bb.run(x, None, model.cam_stage)
    a = model.cams[0].channel_weights(u)
    if a.dim() == 5:  # per-position CAM (released code): one weight per channel, averaged over positions
        a = a.mean(dim=(-2, -1))
    h = model.cams[0](u)  # (J, B, C, h, w)
    j, b = h.shape[:2]
    h = h.reshape(j * b, *h.shape[2:])
    plain = u
    if model.cam_stage != bb.stage_names[-2]:
        h = bb.run(h, model.cam_stage, None)  # GNet, shared by the J branches
        plain = bb.run(u, model.cam_stage, None)
    h = h.reshape(j, b, *h.shape[1:])  # (J, B, C', h, w)
    w = model.heads[0].expand(model.num_learners, -1, -1)  # (J, d_l, C')
    per_position = torch.einsum("jbchw,jdc->jbdhw", h, w)
    z = per_position.mean(dim=(-2, -1))  # (J, B, d_l): the learner outputs
    evidence = torch.einsum("jbdhw,jbd->jbhw", per_position, F.normalize(z, dim=-1))
    return {"weights": a, "evidence": evidence, "activation": plain.mean(1), "outputs": z}


def learner_attention(model, data: dict, config, *, split: str = "unseen", show: int = 6, top: int = 64,
                      digits: int = 4) -> dict:
    """Do the ``J`` CAM learners of a trained DeML(1, J) attend to different channels and regions?

    The images are fixed by a rule: the first image (in the set's order) of every class of ``split``. For each,
    :func:`learner_attention_parts` gives the ``J`` CAMs' channel weights and the learners' evidence maps, for
    the trained ``model`` and for the same network at initialization (rebuilt from ``config`` with the run's
    seed, as :func:`zslib.engine.runner.run` builds it before the first step). Values (means over the images):

    * ``channel_corr`` / ``channel_corr_init``: correlation (over channels) between the weights of two learners
      on the same image, mean over the pairs of learners; ``channel_corr_images``: the correlation between the
      weights of one learner on two different images, mean over learners and pairs of images (how much a
      learner's choice is its own rather than the image's), and ``channel_corr_images_init``;
    * ``top_overlap`` / ``top_overlap_init``: Jaccard overlap of two learners' ``top`` highest-weighted
      channels (at most a quarter of the ``C`` channels; the number used is stored as ``top``; random sets
      overlap by ``top / (2 C - top)``, stored as ``top_overlap_chance``);
    * ``weight_spread`` / ``weight_spread_init``: the standard deviation of a CAM's weights over the channels
      (0: the CAM scales every channel alike, i.e. selects nothing);
    * ``map_corr`` / ``map_corr_init``: correlation (over positions) between two learners' evidence maps of
      the same image, mean over pairs; ``map_corr_activation``: between a learner's map and the unweighted
      activation map;
    * ``evidence_error``: the largest ``|mean_p e_j(p) - ||z_j|| |`` (the decomposition's check);
    * arrays for pictures: ``maps`` ``(J, show, h, w)`` (trained evidence), ``maps_init``, ``activation``
      ``(show, h, w)``, for ``show`` images evenly spaced over the classes (positions ``shown`` in ``split``,
      labels ``shown_labels``), and ``mean_weights`` ``(J, C)``, each CAM's weights averaged over the images.
    Arrays are rounded to ``digits`` decimals (they are for pictures; the scalars are not rounded).
    """
    ds = data[split]
    if isinstance(ds, tuple):
        raise NotImplementedError("learner_attention reads one set of images; In-Shop's query/gallery split is not supported")
    device = next(model.parameters()).device
    first = first_of_each_class(ds.labels)
    x = torch.stack([ds[int(i)][0] for i in first]).to(device)
    with torch.random.fork_rng(devices=[]):
        set_seed(config.seed)
        initial = build_model(config).to(device).eval()
    with torch.no_grad():
        parts = {"": learner_attention_parts(model.eval(), x), "_init": learner_attention_parts(initial, x)}
    j, b, c = parts[""]["weights"].shape
    if j < 2:
        raise ValueError("learner_attention compares learners: the model has J = 1")
    top = min(top, max(1, c // 4))  # a small network's CAM stage may have fewer than 4 top channels
    out: dict = {"images": float(b), "learners": float(j), "channels": float(c), "top": float(top),
                 "top_overlap_chance": top / (2 * c - top)}
    pairs = torch.triu_indices(b, b, offset=1)
    for tag, p in parts.items():
        a, e = p["weights"].double().cpu(), p["evidence"].double().cpu()
        out["channel_corr" + tag] = float(_pairwise_mean(a).mean())
        unit = F.normalize(a - a.mean(-1, keepdim=True), dim=-1)
        out["channel_corr_images" + tag] = float(torch.einsum("jbc,jkc->jbk", unit, unit)[:, pairs[0], pairs[1]].mean())
        out["top_overlap" + tag] = float(_top_overlap(a, top).mean())
        out["weight_spread" + tag] = float(a.std(-1).mean())
        flat = e.flatten(2)
        out["map_corr" + tag] = float(_pairwise_mean(flat).mean())
        act = p["activation"].double().cpu().flatten(1)
        both = torch.stack([torch.stack([flat[k], act]) for k in range(j)])  # (J, 2, B, n)
        out["map_corr_activation" + tag] = float(torch.stack([_pairwise_mean(pair) for pair in both]).mean())
        out["evidence_error" + tag] = float((e.mean(dim=(-2, -1)) - p["outputs"].double().cpu().norm(dim=-1)).abs().max())
    shown = np.linspace(0, b - 1, min(show, b)).round().astype(int)
    out.update({"shown": first[shown].astype(float), "shown_labels": np.asarray(ds.labels)[first[shown]].astype(float),
                "maps": parts[""]["evidence"][:, shown].cpu().double().numpy().round(digits),
                "maps_init": parts["_init"]["evidence"][:, shown].cpu().double().numpy().round(digits),
                "activation": parts[""]["activation"][shown].cpu().double().numpy().round(digits),
                "mean_weights": parts[""]["weights"].mean(1).cpu().double().numpy().round(digits)})
    return out


register_analysis(Analysis("learner_attention", learner_attention, {"split": "unseen", "show": 6, "top": 64, "digits": 4}))


def unseen_embeddings(runs, names, data_from) -> tuple[dict, dict, object]:
    """The trained networks of ``runs[name]`` for each of ``names`` (one per seed, loaded from their checkpoints)
    and their embeddings of the unseen classes, ``(models, {name: [(embeddings, labels) per seed]}, unseen set)``;
    the data are built from the config of the run ``data_from``."""
    unseen = build_data(data_from.config)["unseen"]
    models = {name: [load_model(r) for r in runs[name]] for name in names}
    return models, {name: [embed(m, unseen) for m in ms] for name, ms in models.items()}, unseen


def backbone_maps(run, x: torch.Tensor, layers) -> dict:
    """The maps ``layers`` of the first backbone of the trained network of ``run`` (on the CPU, in eval mode)
    for the normalized inputs ``x``."""
    net = load_model(run, device="cpu").eval()
    with torch.no_grad():
        return net.backbones[0].features(x, list(layers))


def learner_attention_records(grid, train: bool = False) -> dict:
    """The ``learner_attention`` records of a grid ``{name: Config}``, ``{name: [record per seed]}``; a name whose
    records are not all stored is left out after a note (made, with their runs, under ``train``)."""
    out: dict = {}
    for name, config in grid.items():
        out.update(recorded_analyses({name: config}, "learner_attention", f"{name} on the real profile",
                                     train=train) or {})
    return out
