"""The ZSML chapter's report plumbing (Xu et al. 2019): figures and text made from recorded runs.

A chapter calls these in one line; the paper's math stays in the modules beside this one.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["photo_figures"]


def photo_figures(floor, runs: Mapping | None, head: str = "trained head (binomial deviance)"):
    """The retrieval grid on Flowers-102 photographs for the ZSML chapter's real section: the untrained
    pretrained features (cosine), the trained baseline head (cosine) and ZSML, whose neighbours are the images
    its relation network S scores highest against the query (Eq. 4's learned metric over the run's rows;
    :func:`zslib.methods.zsml.pairwise.score_topk`), seed 0 of each, trained again from the recorded configs;
    then a t-SNE of ZSML's input rows."""
    from IPython.display import Markdown, display

    from zslib.analysis.photos import retrieval_section

    if floor is None or not runs or "ZSML" not in runs or head not in runs:
        display(Markdown("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*"))
        return None
    results = {"untrained features": floor, "baseline head": runs[head][0], "ZSML": runs["ZSML"][0]}
    note = ("ZSML ranks by its relation network's score of each (query, image) pair, not by a distance, over all "
            "unseen photographs (the recorded metrics score a sample of four images per class).")
    retrieval_section(results, scorers={"ZSML": lambda model: model.pair}, tsne_of="baseline head", note=note)
