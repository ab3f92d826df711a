"""ZSML's explorer (Xu et al., IJCAI 2019): Eq. 3's continuous labels of positive and negative pairs as alpha moves,
built on the explorer framework of :mod:`zslib.analysis.explorers` (live in a notebook, static on the page)."""
from __future__ import annotations

import html
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from zslib.analysis.explorers import CORRECT, WRONG, Control, Explorer, Frame, figure_uri
from zslib.methods.zsml.cross_update import continuous_labels

__all__ = ["zsml_labels"]


def zsml_labels(*, alphas: Sequence[float] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5), pairs: int = 400, seed: int = 0,
                sq_dist=None, positive=None) -> Explorer:
    """ZSML Eq. 3: the initial continuous labels y_ij of positive and negative pairs as alpha moves (beta =
    1 - alpha, Sec. 5.1; 0 < alpha <= 0.5), computed by :func:`zslib.methods.zsml.cross_update.continuous_labels`.

    ``sq_dist`` (normalized squared distances in [0, 1]) and ``positive`` (a boolean per pair) default to a
    seeded sample of ``pairs`` pairs whose positive pairs lie nearer on average, as in a trained space.
    """
    if sq_dist is None:
        rng = np.random.default_rng(seed)
        positive = rng.random(pairs) < 0.3
        sq_dist = np.where(positive, rng.beta(2, 5, pairs), rng.beta(5, 2, pairs))
    d2 = torch.as_tensor(np.asarray(sq_dist), dtype=torch.float64)
    pos = torch.as_tensor(np.asarray(positive), dtype=torch.bool)

    def render(alpha):
        y = continuous_labels(d2, pos, alpha=alpha).numpy()
        fig, (a, b) = plt.subplots(1, 2, figsize=(8.4, 3.0))
        order = np.argsort(d2.numpy())
        for mask, colour, name in ((pos.numpy(), CORRECT, "positive"), (~pos.numpy(), WRONG, "negative")):
            sel = order[mask[order]]
            a.plot(d2.numpy()[sel], y[sel], "o", ms=3, color=colour, label=name)
            b.hist(y[mask], bins=np.linspace(0, 1, 41), color=colour, alpha=0.7, label=name)
        a.axhspan(0, alpha, color=WRONG, alpha=0.06)
        a.axhspan(1 - alpha, 1, color=CORRECT, alpha=0.06)
        a.set(xlim=(0, 1), ylim=(-0.03, 1.03), xlabel=r"normalized squared distance $d_{ij}^2$",
              ylabel=r"label $y_{ij}$", title=fr"Eq. 3 with $\alpha$ = {alpha:g}, $\beta$ = {1 - alpha:g}")
        a.legend(loc="center right", fontsize=8)
        b.set(xlim=(0, 1), xlabel=r"label $y_{ij}$", ylabel="pairs", title="the labels the pairs get")
        fig.tight_layout()
        gap = float(y[pos.numpy()].min() - y[~pos.numpy()].max()) if pos.any() and (~pos).any() else float("nan")
        text = (f"alpha = {alpha:g}: negatives in [0, {alpha:g}], positives in [{1 - alpha:g}, 1]; "
                f"lowest positive label minus highest negative label = {gap:+.3f}")
        return Frame(f'<img alt="ZSML Eq. 3 labels" src="{figure_uri(fig)}"><div>{html.escape(text)}</div>',
                     {"alpha": alpha, "labels": y, "gap": gap})

    control = Control("alpha", [(f"{a:g}", float(a)) for a in alphas], "slider",
                      default=min(range(len(alphas)), key=lambda i: abs(alphas[i] - 0.3)))
    return Explorer("ZSML Eq. 3: continuous labels as alpha moves", [control], render)
