"""The Adapt-Adv chapter's report plumbing (Al-Kaabi et al. 2022): figures and text made from recorded runs.

A chapter calls these in one line; the paper's math stays in the modules beside this one.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["photo_figures", "gradcam_on_photos", "real_configs", "key_findings"]

FLOOR, BASE, METHOD = "pretrained features, no training", "triplet base", "triplet Adapt-Adv"


def photo_figures(runs: Mapping | None):
    """The retrieval grid and t-SNE on Flowers-102 photographs for the Adapt-Adv chapter's real section: the
    untrained pretrained features against the triplet base head, seed 0 of each, trained again from their
    recorded configs (:func:`zslib.analysis.photos.retrieval_section`). The Adapt-Adv runs are not retrained
    for the picture: each took minutes of training when recorded (their provenance); their Grad-CAM maps are
    drawn over the photographs below (:func:`gradcam_on_photos`)."""
    from IPython.display import Markdown, display

    from zslib.analysis.photos import retrieval_section

    if not runs or FLOOR not in runs or BASE not in runs:
        display(Markdown("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*"))
        return None
    seconds = [r.provenance.get("train_seconds") or 0 for r in runs.get(METHOD, [])]
    note = ("Adapt-Adv is not in the picture: recorded runs keep no weights, and training one again took "
            f"{min(seconds) / 60:.0f} to {max(seconds) / 60:.0f} minutes per run when it was recorded." if seconds else "")
    retrieval_section({"untrained features": runs[FLOOR][0], "triplet base": runs[BASE][0]},
                             tsne_of="triplet base", note=note)


def gradcam_on_photos(records: Mapping, config):
    """Grad-CAM maps of analysis records (``cached_map_gradcam``: name -> list of records, seed 0 first) drawn
    over the Flowers-102 photographs they explain (:func:`zslib.analysis.photos.overlay_maps`). The records
    keep the rows of the unseen split they used; the photographs are read only to be shown."""
    from IPython.display import display

    from zslib.analysis.photos import flower_photos, overlay_maps, photos_unavailable, show
    from zslib.engine.data import DataError

    rec = {name: recs[0] for name, recs in records.items()}
    first = next(iter(rec.values()))
    rows, labels = np.asarray(first["rows"], int), np.asarray(first["labels"], int)
    try:
        photos = flower_photos(config)
    except (DataError, OSError) as err:
        display(photos_unavailable("Grad-CAM on the photographs", err))
        return None
    if not np.array_equal(photos.labels[rows], labels):
        raise RuntimeError("the Grad-CAM records' images are not the photographs' test split (order or labels)")
    maps = {"channel mean of A": np.asarray(first["activation"])}
    maps.update({f"Grad-CAM, {n}": np.asarray(r["gradcam"]) for n, r in rec.items()})
    fig, caption = overlay_maps(photos, rows, maps, titles=[f"class {c + 1}" for c in labels], what="map")
    show(fig, caption + " Here the base and Adapt-Adv re-weight the same frozen 7x7 map A, so their maps can "
         "differ only in which of A's channels they weight.")
    return None


def real_configs():
    """The recorded real-profile rows of the Adapt-Adv chapter: the untrained features, the triplet base head,
    +GDFL (attention without the adversary) and Adapt-Adv."""
    from zslib.engine.config import Config
    from zslib.methods.cml.method import cml_method

    real = Config.from_profile("real")
    base = real.replace(**cml_method("cub200", "triplet", "baseline"))
    adapt = {"classifier_lr": 1e-3, "epoch_steps": 20}
    return (real.replace(method="pretrained"), base,
            base.replace(method="adapt_adv", method_params={**adapt, "use_adversary": False}),
            base.replace(method="adapt_adv", method_params=adapt))


def key_findings():
    """The "Key findings" box the Adapt-Adv chapter opens with, generated from the recorded real-profile runs."""
    from zslib.analysis.findings import findings_box, not_recorded_box, real_comparison, recorded, verdict_words
    from zslib.engine.stats import format_interval, paired

    floor_c, base_c, gdfl_c, aa_c = real_configs()
    floor, runs = recorded({"f": floor_c}, (0,)), recorded({"b": base_c, "g": gdfl_c, "a": aa_c})
    if floor is None or runs is None:
        return not_recorded_box()
    pg, pa = paired(runs["b"], runs["g"]), paired(runs["g"], runs["a"])
    return findings_box(real_comparison(floor["f"][0], runs["b"], runs["a"], "Adapt-Adv", "the triplet base") + [
        f"The attention alone (+GDFL) {verdict_words(pg.verdict)} unseen Recall@1 against the base "
        f"({format_interval(pg.diff, signed=True)} points); adding the class adversary to it "
        f"{verdict_words(pa.verdict)} it ({format_interval(pa.diff, signed=True)} points).",
        "With the backbone frozen, Grad-CAM of the base and of Adapt-Adv re-weights the same 7x7 map: the maps "
        "over the photographs below can differ only in which channels they weight."])
