"""The Adapt-Adv pages' figures on Flowers-102 photographs (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence
2022; ``alkaabi2022adaptadv``): what the trained head retrieves, its t-SNE, and Grad-CAM maps over the photographs
(Fig. 2 analogue), built from the parts of :mod:`zslib.analysis.photos` and returned as sections.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from zslib.analysis.photos import (flower_photos, has_kept_weights, overlay_maps, photos_unavailable,
                                   retrieval_section)
from zslib.engine.config import Config
from zslib.engine.data import DataError
from zslib.methods.adapt_adv.recipes import BASE, FLOOR, METHOD
from zslib.present.adapt_adv.sentences import bullets, real_gradcam_sentences
from zslib.present.adapt_adv.study import AdaptAdvStudy
from zslib.present.base import Section, Sections

__all__ = ["photo_sections", "gradcam_photos_section", "real_gradcam_section"]


def photo_sections(study: AdaptAdvStudy) -> Section | Sections:
    """The retrieval grid and t-SNE on Flowers-102 photographs for the experiments page's real section: the untrained
    pretrained features, the triplet base head and the full Adapt-Adv model (GDFL attention and the class adversary),
    seed 0 of each, drawn by :func:`zslib.analysis.photos.retrieval_section`, with a t-SNE of the base and one of
    Adapt-Adv. The trained models are loaded from their kept weights (float16), each checked to give its run's
    recorded unseen retrieval metrics from the very embeddings that are drawn
    (:func:`zslib.engine.kept_weights.kept_embeddings`); training Adapt-Adv again took minutes. A copy without its kept
    weights draws the base alone and says why. Its Grad-CAM maps are drawn over the photographs on the experiments
    page (:func:`gradcam_photos_section`)."""
    runs = study.runs
    if not runs or FLOOR not in runs or BASE not in runs:
        return Section(notes=["*The real-profile runs are not recorded in this copy, so there is no retrieval "
                              "figure.*"])
    results = {"untrained features": runs[FLOOR][0], "triplet base": runs[BASE][0]}
    method = runs.get(METHOD, [None])[0]
    if method is not None and has_kept_weights(method):
        results["Adapt-Adv"] = method
        note = ("The Adapt-Adv row is the full method (GDFL attention with the class adversary), its recorded seed-0 "
                "run loaded from its kept weights.")
    else:
        seconds = [r.provenance.get("train_seconds") or 0 for r in runs.get(METHOD, [])]
        note = ("Adapt-Adv is not in the picture: this copy keeps no weights of its run, and training one again took "
                f"{min(seconds) / 60:.0f} to {max(seconds) / 60:.0f} minutes per run when it was recorded."
                if seconds else "")
    return retrieval_section(results, tsne_of=[name for name in ("triplet base", "Adapt-Adv") if name in results],
                             note=note)


def gradcam_photos_section(records: Mapping, config: Config) -> Section:
    """Grad-CAM maps of analysis records (``cached_map_gradcam``: name -> list of records, seed 0 first) drawn
    over the Flowers-102 photographs they explain (:func:`zslib.analysis.photos.overlay_maps`). The records
    keep the rows of the unseen split they used; the photographs are read only to be shown."""
    rec = {name: recs[0] for name, recs in records.items()}
    first = next(iter(rec.values()))
    rows, labels = np.asarray(first["rows"], int), np.asarray(first["labels"], int)
    try:
        photos = flower_photos(config)
    except (DataError, OSError) as err:
        return Section(notes=[photos_unavailable("Grad-CAM on the photographs", err).data])
    if not np.array_equal(photos.labels[rows], labels):
        raise RuntimeError("the Grad-CAM records' images are not the photographs' test split (order or labels)")
    maps = {"channel mean of A": np.asarray(first["activation"])}
    maps.update({f"Grad-CAM, {n}": np.asarray(r["gradcam"]) for n, r in rec.items()})
    fig, caption = overlay_maps(photos, rows, maps, titles=[f"class {c + 1}" for c in labels], what="map")
    return Section(figure=fig, notes=[caption + " Here the base and Adapt-Adv re-weight the same frozen 7x7 map A, "
                                      "so their maps can differ only in which of A's channels they weight."])


def real_gradcam_section(study: AdaptAdvStudy, records: Mapping | None) -> Section | Sections:
    """Grad-CAM on real flowers (Fig. 2 analogue): the maps of the records over the photographs
    (:func:`gradcam_photos_section`), then what they share (the images, the frozen map A), which are all zero, and
    per loss how the base's and Adapt-Adv's maps differ: largest difference, correlation, central share."""
    if not records:
        return Section(notes=["*The Grad-CAM records of real flowers (or the Table 5 Adapt-Adv rows they explain) are "
                              "not recorded in this copy of the book.*"])
    return Sections([gradcam_photos_section(records, Config.from_profile("real")),
                     Section(notes=[bullets(real_gradcam_sentences(study, records))])])
