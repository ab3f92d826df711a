"""The JRD chapter's figures on Flowers-102 photographs (Chu et al., ICML 2020, ``chu2020jrd``): what the untrained
features, AM-Softmax alone and JRD at the paper's alpha = 1 retrieve for the same unseen queries, and a t-SNE of
each trained head, drawn by :func:`zslib.analysis.photos.retrieval_section`.
"""
from __future__ import annotations

from zslib.analysis.photos import has_kept_weights, retrieval_section
from zslib.methods.jrd.recipes import AM_SOFTMAX, JRD
from zslib.present.base import Section, Sections
from zslib.present.jrd.study import JRDStudy

__all__ = ["photo_section"]


def photo_section(study: JRDStudy) -> Section | Sections:
    """The retrieval grid and t-SNE on the photographs: the untrained features, AM-Softmax (trained again from its
    recorded config, seconds) and JRD at alpha = 1 (from the weights kept with its recorded run when this copy has
    them, else trained again), seed 0 of each; every model must give its run's recorded retrieval metrics before it
    is drawn (:func:`zslib.analysis.photos.unseen_embeddings`). A section with a note when the runs are not
    recorded."""
    floor, main = study.floor, study.main
    if floor is None or not main:
        return Section(notes=["*The real-profile runs are not recorded in this copy, so there is no retrieval "
                              "figure.*"])
    jrd = main[JRD][0]
    results = {"untrained features": floor, "AM-Softmax": main[AM_SOFTMAX][0], "JRD": jrd}
    note = ("The JRD row is its recorded seed-0 run at alpha = 1, loaded from its kept weights." if has_kept_weights(jrd)
            else "")
    return retrieval_section(results, tsne_of=["AM-Softmax", "JRD"], note=note)
