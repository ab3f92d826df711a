"""The DeML experiments page on SynthParts (Chen and Deng, CVPR 2019; ``chen2019deml``): does the object attention
find the bird (Fig. 4, scored against the birds' masks), the crops a second scale would see, and partial learning
measured by attribute probes. Each ``*_section`` returns a :class:`~zslib.present.base.Section`.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from zslib.analysis.localization import localization_scores
from zslib.analysis.probe import attribute_probe
from zslib.analysis.viz import attention_panels
from zslib.engine.data import SynthParts
from zslib.engine.stats import format_interval, summarize
from zslib.methods.deml.analyses import backbone_maps, unseen_embeddings
from zslib.methods.deml.attention_crop import attention_boxes, zoom_to_attention
from zslib.methods.deml.object_attention import object_attention_map
from zslib.present.base import Section
from zslib.present.deml.quick import synth_normalize

__all__ = ["LOC_VARIANTS", "localization", "localization_section", "attention_section", "synth_attention_maps",
           "hard_attribute_probe", "probe_diff", "probe_section"]

#: The object-attention variants scored on SynthParts: (layers, options of ``object_attention_map``).
LOC_VARIANTS = {"stage3, T=10": (["stage3"], {}), "stage4, T=10": (["stage4"], {}),
                "both, T=1": (["stage3", "stage4"], {"steps": 1}), "both, T=10 (paper)": (["stage3", "stage4"], {}),
                "both, exact pi": (["stage3", "stage4"], {"steps": None}),
                "both, T=10, Gaussian 0.15": (["stage3", "stage4"], {"spatial_sigma": 0.15}),
                "literal Eq. 3": (["stage3", "stage4"], {"reading": "literal"})}


def _loc_images():
    loc_set = SynthParts("unseen", image_size=48, images_per_class=4)
    xs, _ = loc_set.tensors()
    return xs, loc_set.object_masks(), loc_set.boxes


def localization(runs: Mapping) -> tuple:
    """Does the OAM find the bird (the paper's Fig. 4, scored)? The object attention of the trained U_d
    networks (one per seed) on SynthParts images of the unseen classes, for each of :data:`LOC_VARIANTS`
    (layers, steps T, the released code's Gaussian, the literal reading of Eq. 3), scored against the birds'
    masks and boxes (:func:`zslib.analysis.localization.localization_scores`), means over seeds. Returns the
    table and the chance levels with the counts (``seeds``, ``images``)."""
    xs, masks, obj_boxes = _loc_images()
    loc_rows: dict = {}
    for r in runs["U_d"]:
        feats = backbone_maps(r, synth_normalize(xs), ["stage3", "stage4"])
        for label, (layers, opts) in LOC_VARIANTS.items():
            att = object_attention_map([feats[l] for l in layers], 48, **opts)
            loc_rows.setdefault(label, []).append(localization_scores(att, masks, obj_boxes, attention_boxes(att)))
    table = pd.DataFrame({label: {"mass on bird": np.mean([s["mass_on_object"] for s in ss]),
                                  "lift over chance": np.mean([s["lift"] for s in ss]),
                                  "peak on bird": np.mean([s["peak_on_object"] for s in ss]),
                                  "crop IoU": np.mean([s["box_iou"] for s in ss])}
                          for label, ss in loc_rows.items()}).T
    chance = {**loc_rows["both, T=10 (paper)"][0], "seeds": len(runs["U_d"]), "images": len(xs)}
    return table, chance


def localization_section(loc: tuple) -> Section:
    """The table of :func:`localization` with its chance levels and counts below it."""
    table, chance = loc
    return Section(table=table, notes=[
        f"Chance: a mass of {chance['area_share']:.3f} on the bird (its area share) and a crop IoU of "
        f"{chance['box_iou_full_image']:.3f} (the whole image). Means over {chance['seeds']} seeds and "
        f"{chance['images']} unseen images."])


def attention_section(run) -> Section:
    """Six SynthParts images with the OAM's crop box (T = 10, ``stage3`` and ``stage4`` of the trained U_d
    network ``run``), the attention map, and the zoomed crop a second scale would see."""
    xs = _loc_images()[0][:6]
    f6 = backbone_maps(run, synth_normalize(xs), ["stage3", "stage4"])
    att_show = object_attention_map([f6["stage3"], f6["stage4"]], 48)
    zoomed, crop_boxes = zoom_to_attention(xs, att_show, size=(48, 48))  # what a second scale would see
    fig = attention_panels({"image + crop box": xs, "OAM (T=10)": att_show, "scale 2 input": zoomed},
                           {"image + crop box": [(crop_boxes, "yellow")]}, panels_as="rows", size=1.85)
    return Section(figure=fig)


def synth_attention_maps(run) -> tuple:
    """``(image, [stage3, stage4 maps])`` of the first SynthParts image under the trained network ``run``: what the
    attention explorer shows when the photographs are absent."""
    x = _loc_images()[0][:1]
    f = backbone_maps(run, synth_normalize(x), ["stage3", "stage4"])
    return x[0], [f["stage3"], f["stage4"]]


# -- partial learning: attribute probes -----------------------------------------------------------------------

def hard_attribute_probe(runs: Mapping) -> dict:
    """Partial learning, measured: a linear probe (:func:`zslib.analysis.probe.attribute_probe`, class-disjoint
    folds) reads each SynthParts attribute from the unseen-class embeddings of U_d + L_act and DeML(1, 4).
    Returns ``{"hard": [names], arm: [mean accuracy on the hard attributes, per seed]}`` (the hard
    attributes: all but the shortcut colours)."""
    names = ("U_d + L_act", "DeML(1,4)")
    _, embedded, unseen = unseen_embeddings(runs, names, runs["U_d"][0])
    hard = [a for a in unseen.attribute_names if a not in unseen.shortcut_attributes]

    def hard_accuracy(e, lab):
        rep = attribute_probe(e, unseen.attributes, names=list(unseen.attribute_names), groups=lab.numpy(), folds=5,
                              C=0.1, max_per_group=10)
        return float(np.mean([rep.accuracy[a] for a in hard]))

    return {"hard": hard, **{name: [hard_accuracy(e, lab) for e, lab in embedded[name]] for name in names}}


def probe_diff(probe: Mapping):
    """DeML(1, 4) minus U_d + L_act in the probe's mean accuracy on the hard attributes, paired by seed."""
    return summarize([a - b for a, b in zip(probe["DeML(1,4)"], probe["U_d + L_act"])])


def probe_section(probe: Mapping) -> Section:
    """The probe's mean accuracy on the hard attributes per arm and the paired difference."""
    return Section(notes=[
        f"Hard attributes ({', '.join(f'`{a}`' for a in probe['hard'])}): mean probe accuracy "
        f"{np.mean(probe['U_d + L_act']):.3f} for U_d + L_act and {np.mean(probe['DeML(1,4)']):.3f} for "
        f"DeML(1,4); DeML(1,4) minus U_d + L_act, paired by seed: "
        f"{format_interval(probe_diff(probe), scale=1, digits=3, signed=True)}."])
