"""JRD's interactive explorer (Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020; ``chu2020jrd``): the bound terms
of Eq. 1-3 (the seen error, the H-divergence d_H and the ideal joint error lambda, beside the unseen error they
bound) of recorded runs, arm by arm, built on the framework of :mod:`zslib.analysis.explorers`."""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from zslib.analysis.explorers import QUERY, Control, Explorer, Frame, figure_uri

__all__ = ["JRD_TERMS", "jrd_bound"]

#: The terms the explorer shows, by the key of a ``bound_terms`` record.
JRD_TERMS = {"seen_error": "seen error", "unseen_error": "unseen error", "d_H": "d_H", "lambda": "lambda"}


def jrd_bound(records: Mapping[str, Sequence], *, terms: Mapping[str, str] | None = None,
              title: str | None = None) -> Explorer:
    """JRD's bound terms (JRD Eq. 1-3: the seen error, the H-divergence d_H and the ideal joint error lambda,
    beside the unseen error they bound) of recorded runs, arm by arm along the regularizer weight alpha.

    ``records``: ``{arm: [per-seed record]}``, a record being a
    :class:`zslib.analysis.records.AnalysisRecord` of the ``bound_terms`` analysis (as
    :func:`zslib.analysis.records.recorded_analyses` returns them) or a mapping of the terms; the arm's
    alpha is read from its runs' ``config.method_params`` where a record carries one. The slider picks an
    arm: the bars are the seeds' mean of each term (ticks: every seed), the right plot the means of all
    arms, so the reader sees which terms the regularizer moves.
    """
    if not records:
        raise ValueError("no records; give {arm: [per-seed bound_terms record]}")
    terms = dict(terms or JRD_TERMS)
    arms = list(records)
    values = {a: [{t: float(r[t]) for t in terms} for r in records[a]] for a in arms}
    for a in arms:
        if not values[a]:
            raise ValueError(f"arm {a!r} has no record")
    means = {a: {t: float(np.mean([v[t] for v in values[a]])) for t in terms} for a in arms}

    def alpha_of(a):
        config = getattr(records[a][0], "config", None)
        alpha = (getattr(config, "method_params", None) or {}).get("alpha") if config is not None else None
        return f"{a} (alpha = {alpha:g})" if alpha is not None else str(a)

    labels = [alpha_of(a) for a in arms]
    top = max(v[t] for a in arms for v in values[a] for t in terms) * 1.1

    def render(arm):
        i = arms.index(arm)
        fig, (a, b) = plt.subplots(1, 2, figsize=(8.6, 3.0))
        x = np.arange(len(terms))
        a.bar(x, [means[arm][t] for t in terms], color=QUERY, alpha=0.8)
        for v in values[arm]:
            a.plot(x, [v[t] for t in terms], "_", color="#333", ms=14)
        a.set_xticks(x, list(terms.values()))
        a.set(ylim=(0, top), title=f"{labels[i]}, {len(values[arm])} seeds")
        for t, name in terms.items():
            b.plot(range(len(arms)), [means[o][t] for o in arms], "o-", ms=3, label=name)
        b.axvline(i, color="#999", ls=":")
        b.set_xticks(range(len(arms)), arms)
        b.set(title="seed means, every arm")
        b.legend(fontsize=8)
        fig.tight_layout()
        text = ", ".join(f"{name} = {means[arm][t]:.3f}" for t, name in terms.items())
        return Frame(f'<img alt="bound terms of {html.escape(str(arm))}" src="{figure_uri(fig)}">'
                     f'<div>{html.escape(labels[i])}: {html.escape(text)} (means over {len(values[arm])} seeds)</div>',
                     {"arm": arm, "means": means[arm]})

    control = Control("arm", list(zip(labels, arms)), "slider")
    return Explorer(title or "JRD: the bound terms of recorded runs, along alpha", [control], render)
