"""The CML chapter's figures on Flowers-102 photographs (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``):
what the untrained features, the triplet baseline head and CML itself (Eq. 11 with the triplet loss of Eq. 12) retrieve
for the same unseen queries, and a t-SNE of each trained head, drawn by
:func:`zslib.analysis.photos.retrieval_section`.
"""
from __future__ import annotations

from zslib.analysis.photos import has_kept_weights, retrieval_section
from zslib.methods.cml.recipes import GREEK, VARIANT_TERMS
from zslib.present.base import Section, Sections
from zslib.present.cml.study import CmlStudy

__all__ = ["BASELINE", "METHOD", "photo_section"]

#: The names the figures give the triplet baseline head and CML with the triplet loss.
BASELINE, METHOD = "triplet baseline", "triplet CML"


def photo_section(study: CmlStudy) -> Section | Sections:
    """The retrieval grid and the t-SNE of the baseline and of CML on the photographs: the untrained features, the
    triplet baseline head (trained again from its recorded config, seconds) and CML with the triplet loss at the
    weights of the table (from the weights kept with its recorded run when this copy has them, else trained again),
    seed 0 of each; every model must give its run's recorded retrieval metrics before it is drawn
    (:func:`zslib.analysis.photos.unseen_embeddings`). The note says which weights CML ran with and whether the rule
    chose them or they are an ablation. A section with a note when the runs are not recorded."""
    runs, floor = study.runs(), study.floor()
    if runs is None or floor is None:
        return Section(notes=["*The real-profile runs are not recorded in this copy, so there is no retrieval "
                              "figure.*"])
    cml = runs["triplet", "cml"][0]
    params = cml.config.method_params
    weights = ", ".join(f"{GREEK[t]} = {params[t]:g}" for t in VARIANT_TERMS["cml"])
    kept = [GREEK[t] for t in VARIANT_TERMS["cml"] if ("triplet", t) in study.kept()]
    status = (f"an ablation: the rule kept the loss alone for {' and '.join(kept)}" if kept else
              "the weights the rule chose")
    source = "loaded from its kept weights" if has_kept_weights(cml) else "trained again from its recorded config"
    note = f"The {METHOD} row is CML's recorded seed-0 run ({weights}; {status}), {source}."
    return retrieval_section({"untrained features": floor, BASELINE: runs["triplet", "baseline"][0], METHOD: cml},
                             tsne_of=[BASELINE, METHOD], note=note)
