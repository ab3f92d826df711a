"""DeML's Fig. 4 on Flowers-102 photographs (Chen and Deng, CVPR 2019; ``chen2019deml``): (a) the object attention
of the frozen pretrained network and the crops it selects, scored by where its mass sits; (b) what the
channel-attention learners of the recorded DeML(1, 4) runs select. Each ``*_section`` returns a
:class:`~zslib.present.base.Section` (or :class:`~zslib.present.base.Sections`); every sentence is written from the
numbers.
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from zslib.analysis.localization import box_iou, central_mask, central_mass
from zslib.analysis.photos import photos_unavailable
from zslib.analysis.viz import attention_panels
from zslib.engine.config import Config
from zslib.engine.data import get_dataset_class, test_transform
from zslib.engine.data.errors import MissingDataError
from zslib.engine.models import build_model, normalization
from zslib.engine.stats import format_interval, interval, verdict
from zslib.methods.deml import recipes
from zslib.methods.deml.analyses import first_of_each_class
from zslib.methods.deml.attention_crop import attention_boxes, crop_and_zoom
from zslib.methods.deml.explore import deml_attention
from zslib.methods.deml.object_attention import object_attention_map, shuffle_positions
from zslib.present.base import Section, Sections
from zslib.present.deml.attention import synth_attention_maps

__all__ = ["CAM_ROWS", "MOVED", "side_of", "oam_on_photographs", "attention_explorer", "cam_numbers",
           "cam_section", "cam_figures"]

#: The rows of the CAM table: label -> key of the ``learner_attention`` analysis records.
CAM_ROWS = {"channel corr., two learners, same image": "channel_corr",
            "channel corr., one learner, two images": "channel_corr_images",
            "spread of a CAM's weights (sd)": "weight_spread",
            "top-64 channel overlap (Jaccard)": "top_overlap",
            "evidence-map corr., two learners": "map_corr",
            "evidence-map corr., learner vs unweighted map": "map_corr_activation"}

#: A verdict as the verb of a sentence about a change.
MOVED = {"up": "raised", "down": "lowered"}


def side_of(iv, level: float) -> str:
    """Where the interval ``iv`` lies against ``level``."""
    return "above" if iv.low > level else "below" if iv.high < level else "not clearly different from"


def _flowers_test(real):
    """The Flowers-102 test images (the unseen classes) with the real profile's test-time transform and
    normalization, in the dataset's order; raises ``MissingDataError`` when the files are not here."""
    mean, std = normalization(real.backbone)
    return get_dataset_class(real.dataset)(split="test", transform=test_transform(real.image_size, real.resize_size,
                                                                                  mean, std))


# -- Fig. 4 (a) on photographs: the object attention of a pretrained network ------------------------------------

def oam_on_photographs() -> tuple[dict | None, Sections]:
    """DeML's Fig. 4 (a) on photographs: the object attention (Eqs. 2-3, T = 10) of the real profile's frozen,
    ImageNet-pretrained EfficientNet-Lite0 on the first test image of each unseen Flowers-102 class (scale 1)
    and on the crop it selects, zoomed back to 224 px (scale 2), with the paper's plain graph (Eq. 2) and the
    released code's spatial Gaussian (sigma 0.15). Scored by the share of the mass in the central quarter of the
    frame, on the photographs and on the same maps with shuffled positions (a null without layout), the crop's
    area and the two graphs' crop overlap (95% intervals over the images, differences paired by image).
    Returns the numbers (with the first image and its maps, for the explorer) and the sections (the table, the
    outcome and the figure); the numbers are ``None`` and the section a note when the photographs or the weights
    are missing."""
    real = Config.from_profile("real")
    real_mean, real_std = normalization(real.backbone)
    missing = []
    try:  # never downloads
        flowers = _flowers_test(real)
    except MissingDataError:
        missing.append("the Flowers-102 images (set ZS_DATA to the folder that holds flowers102/)")
    try:
        lite0 = build_model(real.backbone, 8, pretrained=True, download=False).backbone.eval()
    except (FileNotFoundError, ImportError) as err:
        how = str(err).splitlines()[-1].strip()  # the error's last line says how to get them
        missing.append(f"the ImageNet weights of EfficientNet-Lite0 ({how[:1].lower() + how[1:]})")
    if missing:
        note = photos_unavailable("The Fig. 4 analogue", "this machine lacks " + " and ".join(missing))
        return None, Sections([Section(caption=note.data)])
    stages = list(lite0.roles["object_attention"])
    sigmas = {"Eq. 2": None, "Gaussian 0.15": 0.15}
    side = real.image_size
    first = [int(i) for i in first_of_each_class(flowers.labels)]
    x_real = torch.stack([flowers[i][0] for i in first])
    with torch.no_grad():
        maps1 = lite0.features(x_real, stages)
    att1 = {v: object_attention_map(maps1, side, spatial_sigma=s) for v, s in sigmas.items()}
    null_maps = shuffle_positions(maps1, seed=0)  # the null: the same vectors, the image's layout removed
    att_null = {v: object_attention_map(null_maps, side, spatial_sigma=s) for v, s in sigmas.items()}
    boxes1 = {v: attention_boxes(a) for v, a in att1.items()}
    area = {v: ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) / side ** 2).double() for v, b in boxes1.items()}
    centre = {v: central_mass(a).double() for v, a in att1.items()}
    centre_null = {v: central_mass(a).double() for v, a in att_null.items()}
    uniform = float(central_mask(side, side).float().mean())
    crop_iou = box_iou(boxes1["Eq. 2"], boxes1["Gaussian 0.15"])
    fig4 = {"n": len(first), "uniform": uniform, "iou": interval(crop_iou.tolist()),
            "iou_below_half": int((crop_iou < 0.5).sum()),
            "centre": {v: interval(c.tolist()) for v, c in centre.items()},
            "centre_null": {v: interval(c.tolist()) for v, c in centre_null.items()},
            "area": {v: interval(a.tolist()) for v, a in area.items()},
            "image": x_real[0], "maps": {k: m[:1] for k, m in maps1.items()}, "mean": real_mean, "std": real_std}
    for key, values in (("d_centre", centre), ("d_centre_null", centre_null), ("d_area", area)):
        fig4[key] = interval((values["Gaussian 0.15"] - values["Eq. 2"]).tolist())
        fig4[key + "_verdict"] = verdict(fig4[key])

    shapes = ", ".join(f"`{k}` {tuple(m.shape[1:])}" for k, m in maps1.items())
    table = pd.DataFrame({v: {"mass in the centre": format_interval(fig4["centre"][v], scale=1, digits=3),
                              "same, shuffled positions": format_interval(fig4["centre_null"][v], scale=1, digits=3),
                              "crop area / image": format_interval(fig4["area"][v], scale=1, digits=3)} for v in sigmas}).T
    numbers = Section(caption=f"{fig4['n']} images (the first test image of each unseen class); the OAM reads "
                              f"{shapes}, T = 10; the central region is the middle half of each side, {uniform:.2f} "
                              "of the image.", table=table, notes=[_oam_text(fig4)])

    show = np.linspace(0, len(first) - 1, 6).round().astype(int)
    x6 = x_real[show]
    centre_box = torch.tensor([[side / 4, side / 4, 3 * side / 4, 3 * side / 4]]).expand(len(show), 4)
    panels = {"scale 1": x6}
    boxes_drawn = {"scale 1": [(boxes1["Eq. 2"][show], "yellow"), (boxes1["Gaussian 0.15"][show], "cyan")]}
    for v, s in sigmas.items():
        crops = crop_and_zoom(x6, boxes1[v][show])  # scale 2's input: the crop zoomed to 224 px
        with torch.no_grad():
            att2 = object_attention_map(lite0.features(crops, stages), side, spatial_sigma=s)
        colour, name = ("yellow", "Eq. 2") if s is None else ("cyan", "Gaussian")
        panels[f"OAM, {name}"] = att1[v][show]
        boxes_drawn[f"OAM, {name}"] = [(centre_box, "white")]
        panels[f"scale 2, {name}"] = crops
        boxes_drawn[f"scale 2, {name}"] = [(attention_boxes(att2), colour)]
        panels[f"its OAM, {name}"] = att2
    fig = attention_panels(panels, boxes_drawn, mean=real_mean, std=real_std, size=1.7,
                           titles=[f"class {flowers.class_names[flowers.labels[first[k]]]}" for k in show])
    return fig4, Sections([numbers, Section(figure=fig)])


def _oam_text(fig4: Mapping) -> str:
    """What :func:`oam_on_photographs` measured, as a Markdown list."""
    n, uniform = fig4["n"], fig4["uniform"]
    lines = [f"Gaussian minus Eq. 2, {what}: {format_interval(fig4[key], scale=1, digits=3, signed=True)} "
             f"({fig4[key + '_verdict']}; paired over the {n} images)."
             for key, what in (("d_centre", "mass in the centre"),
                               ("d_centre_null", "mass in the centre, shuffled maps"), ("d_area", "crop area share"))]
    lines.append(f"IoU of the two crops of the same image: {format_interval(fig4['iou'], scale=1, digits=3)}, "
                 f"{fig4['iou_below_half']} of {n} "
                 "below 0.5.")
    plain, plain_null = fig4["centre"]["Eq. 2"], fig4["centre_null"]["Eq. 2"]
    null_flat = side_of(plain_null, uniform).startswith("not")
    lines.append(f"With Eq. 2 the centre's share is {side_of(plain, uniform)} the uniform {uniform:.2f} on the "
                 f"photographs and {side_of(plain_null, uniform)} it on shuffled maps"
                 + ("; the plain graph has no preference for the centre of its own, so its centre share comes from "
                    "what the photographs show there (a flower or not)." if null_flat
                    else "; the plain graph itself shifts mass relative to the centre."))
    lines.append(f"The Gaussian {MOVED.get(fig4['d_centre_verdict'], 'did not clearly change')} the share on the "
                 f"photographs and {MOVED.get(fig4['d_centre_null_verdict'], 'did not clearly change')} it on "
                 "shuffled maps"
                 + (", where no image layout is left: a preference for the centre that needs no image, so a higher "
                    "centre share with the Gaussian is no evidence that it finds the flower better."
                    if fig4["d_centre_null_verdict"] == "up" else "."))
    return "\n".join(f"- {line}" for line in lines)


def attention_explorer(fig4: Mapping | None, runs: Mapping):
    """The interactive view (:func:`zslib.methods.deml.explore.deml_attention`, returned for the notebook to show)
    of the object attention of one photograph as the walk runs longer (T = 10 is the paper's setting); without the
    photographs, of one SynthParts image under seed 0 of U_d."""
    if fig4 is not None:
        return deml_attention(fig4["image"], fig4["maps"], mean=fig4["mean"], std=fig4["std"])
    return deml_attention(*synth_attention_maps(runs["U_d"][0]))


# -- Fig. 4 (b) on photographs: what the channel-attention learners select ---------------------------------------

def _att_iv(records, key):
    return interval([r[key] for r in records])


def _att_change(records, key):
    """Trained minus initialization, paired by seed."""
    return interval([r[key] - r[key + "_init"] for r in records])


def cam_numbers(a4) -> dict:
    """The intervals over seeds the CAM sentences read from the ``learner_attention`` records ``a4``."""
    return {"ch_c": _att_iv(a4, "channel_corr"), "ch_i": _att_iv(a4, "channel_corr_images"),
            "ch_c0": _att_iv(a4, "channel_corr_init"), "spread": _att_iv(a4, "weight_spread"),
            "spread0": _att_iv(a4, "weight_spread_init"), "d_spread": _att_change(a4, "weight_spread"),
            "top": _att_iv(a4, "top_overlap"), "top_chance": a4[0]["top_overlap_chance"],
            "map_c": _att_iv(a4, "map_corr"), "map_c0": _att_iv(a4, "map_corr_init"),
            "map_a": _att_iv(a4, "map_corr_activation"), "d_map": _att_change(a4, "map_corr")}


def _cam_table(cam_att: Mapping) -> pd.DataFrame:
    rows = []
    for name, recs in cam_att.items():
        for what, key in CAM_ROWS.items():
            d = _att_change(recs, key)
            rows.append({"variant": name, "quantity": what, "trained": format_interval(_att_iv(recs, key), scale=1, digits=3),
                         "at initialization": format_interval(_att_iv(recs, key + "_init"), scale=1, digits=3),
                         "trained - init": format_interval(d, scale=1, digits=3, signed=True), "verdict": verdict(d)})
    return pd.DataFrame(rows).set_index(["variant", "quantity"])


def cam_section(cam_att: Mapping) -> Section:
    """Whether the CAM learners differ (Fig. 4 (b), measured): per variant, each of :data:`CAM_ROWS` trained, at
    initialization, and the change (paired by seed) with its verdict; below it, the counts and checks behind the
    table, for DeML(1, 4) whether the learners keep channel selections of their own and whether they look at
    different regions, and the main numbers of the other variants. Empty without records."""
    if not cam_att:
        return Section()
    rec0 = cam_att[recipes.DEML4][0] if recipes.DEML4 in cam_att else next(iter(cam_att.values()))[0]
    lines = [f"{int(rec0['images'])} unseen images, {len(next(iter(cam_att.values())))} seeds per variant; random "
             f"sets of {int(rec0['top'])} of the {int(rec0['channels'])} channels overlap by "
             f"{rec0['top_overlap_chance']:.3f}; largest error of the evidence decomposition: "
             f"{max(r['evidence_error'] for rs in cam_att.values() for r in rs):.1e}."]
    if recipes.DEML4 in cam_att:
        c = cam_numbers(cam_att[recipes.DEML4])
        lines.append(
            f"Channels: two CAMs of DeML(1,4) weight the channels of the same image with correlation "
            f"{format_interval(c['ch_c'], scale=1, digits=3)} "
            f"(at initialization {format_interval(c['ch_c0'], scale=1, digits=3)}), while one CAM's weights on two "
            f"different flowers correlate "
            f"{format_interval(c['ch_i'], scale=1, digits=3)}"
            + (": the learners differ from each other more than a learner differs from image to image, so each "
               "keeps a channel selection of its own." if c["ch_c"].high < c["ch_i"].low else
               ": a learner's choice does not differ from the other learners' more than it changes with the image."))
        lines.append(
            f"Training {MOVED.get(verdict(c['d_spread']), 'did not clearly change')} the spread of a CAM's weights "
            f"over the channels ({format_interval(c['spread0'], scale=1, digits=3)} at initialization, "
            f"{format_interval(c['spread'], scale=1, digits=3)} trained), and two "
            f"learners' 64 highest-weighted channels overlap by {format_interval(c['top'], scale=1, digits=3)} (Jaccard), "
            f"{side_of(c['top'], c['top_chance'])} the {c['top_chance']:.3f} of random sets.")
        lines.append(
            f"Regions: two learners' evidence maps of the same image correlate "
            f"{format_interval(c['map_c'], scale=1, digits=3)} (at initialization "
            f"{format_interval(c['map_c0'], scale=1, digits=3)}; training "
            f"{MOVED.get(verdict(c['d_map']), 'did not clearly change')} it) and each "
            f"learner's map correlates {format_interval(c['map_a'], scale=1, digits=3)} with the unweighted activation map"
            + (": above 0.9, the learners look at nearly the same places. On this backbone a CAM can only reweight "
               "channels of the last map, after which the positions are averaged, so different channel selections "
               "change what a learner sums over the image much more than where it looks."
               if c["map_c"].low > 0.9 else "."))
    for name in [n for n in cam_att if n != recipes.DEML4]:
        recs = cam_att[name]
        lines.append(f"{name}: channel corr. between learners "
                     f"{format_interval(_att_iv(recs, 'channel_corr'), scale=1, digits=3)}, of one learner "
                     f"across images {format_interval(_att_iv(recs, 'channel_corr_images'), scale=1, digits=3)}, weight spread "
                     f"{format_interval(_att_iv(recs, 'weight_spread'), scale=1, digits=3)}, evidence-map corr. between learners "
                     f"{format_interval(_att_iv(recs, 'map_corr'), scale=1, digits=3)}.")
    return Section(table=_cam_table(cam_att), notes=["\n".join(f"- {line}" for line in lines)])


def cam_figures(cam_att: Mapping) -> Sections:
    """The picture of Fig. 4 (b), seed 0 of DeML(1, 4): six of the images (evenly spaced over the classes) with
    the unweighted activation map and each learner's evidence map (each scaled to its own range); then every
    CAM's weight of each channel averaged over the images, channels grouped by the learner that weights them most
    (grouping by the largest weight makes blocks by construction; what to read is how far a CAM's favoured
    channels sit above its others), with the count of channels each CAM weights most below it. Empty without the
    records of DeML(1, 4)."""
    if recipes.DEML4 not in cam_att:
        return Sections()
    real = Config.from_profile("real")
    rec = cam_att[recipes.DEML4][0]
    shown, shown_labels = np.asarray(rec["shown"], dtype=int), np.asarray(rec["shown_labels"]).astype(int)
    try:
        flowers = _flowers_test(real)
    except MissingDataError:
        flowers = None
    # the feature cache keeps the test images in the dataset's order: the same photographs
    photos = flowers is not None and np.array_equal(flowers.labels[shown], shown_labels)
    maps, act = torch.tensor(rec["maps"]), torch.tensor(rec["activation"])
    panels = {"image": torch.stack([flowers[int(i)][0] for i in shown])} if photos else {}
    panels["unweighted map"] = act
    for j in range(maps.shape[0]):
        panels[f"learner {j + 1}"] = maps[j]
    titles = [f"class {flowers.class_names[int(c)]}" if photos else f"class {int(c)}" for c in shown_labels]
    mean, std = normalization(real.backbone)
    evidence = attention_panels(panels, mean=mean, std=std, size=1.5, titles=titles)
    w = np.asarray(rec["mean_weights"])  # (J, 1280)
    owner = w.argmax(0)
    order = np.lexsort((-w.max(0), owner))
    fig, ax = plt.subplots(figsize=(9, 1.8))
    im = ax.imshow(w[:, order], aspect="auto", cmap="magma", interpolation="nearest")
    ax.set_yticks(range(len(w)), [f"CAM {j + 1}" for j in range(len(w))])
    ax.set_xlabel("channel of the head map (grouped by the CAM that weights it most)")
    fig.colorbar(im, ax=ax, label="mean weight")
    return Sections([Section(figure=evidence), Section(figure=fig, notes=[
        f"Channels each CAM weights most: {', '.join(map(str, np.bincount(owner, minlength=len(w))))} of "
        f"{w.shape[1]}."])])
