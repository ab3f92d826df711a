"""The ZSML chapter's figure at the derivation: the continuous labels of Eq. 3 against the normalized distance, drawn
with the library's own :func:`zslib.methods.zsml.cross_update.continuous_labels`."""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from zslib.methods.zsml import cross_update as cu
from zslib.present.base import Section

__all__ = ["labels_figure"]


def labels_figure(alphas=(0.1, 0.3, 0.5), paper_alpha: float = 0.3) -> Section:
    """Eq. 3's label of a positive pair (solid) and of a negative pair (dashed) against the normalized squared
    distance ``d^2`` in ``[0, 1]``, for each of ``alphas``; the two ranges ``[beta, 1]`` and ``[0, alpha]`` of
    ``paper_alpha`` (the paper's 0.3) are shaded."""
    d2 = torch.linspace(0.0, 1.0, 101)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    lo, hi = 1.0 - paper_alpha, paper_alpha
    ax.axhspan(lo, 1.0, color="tab:green", alpha=0.08)
    ax.axhspan(0.0, hi, color="tab:red", alpha=0.08)
    rows = []
    for alpha, colour in zip(alphas, ("tab:blue", "tab:orange", "tab:purple")):
        pos = cu.continuous_labels(d2, torch.ones_like(d2, dtype=torch.bool), alpha=alpha)
        neg = cu.continuous_labels(d2, torch.zeros_like(d2, dtype=torch.bool), alpha=alpha)
        ax.plot(d2, pos, "-", color=colour, label=f"α = {alpha:g}: positive pairs")
        ax.plot(d2, neg, "--", color=colour, label=f"α = {alpha:g}: negative pairs")
        rows.append((alpha, float(pos.min()), float(neg.max())))
    ax.set_xlabel("normalized squared distance $d_{ij}^2$"); ax.set_ylabel("label $y_{ij}$ (Eq. 3)")
    ax.set_ylim(-0.02, 1.02); ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    gaps = "; ".join(f"α = {a:g}: positives down to {p:.2f}, negatives up to {n:.2f}" for a, p, n in rows)
    return Section(figure=fig, notes=[
        f"Shaded: the two ranges at the paper's α = {paper_alpha:g}, [β, 1] = [{lo:g}, 1] for positive pairs and "
        f"[0, α] = [0, {hi:g}] for negative ones. Both labels fall with the distance, so the order within each kind "
        f"of pair is kept; the two ranges are apart for α < 0.5 and touch at α = 0.5. {gaps}."])
