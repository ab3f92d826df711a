"""The CML experiments page after the choice of the weights (Chen, Deng, Wang and Zhang, TNNLS 2022;
``chen2022cml``): the diversity of seen and unseen features with and without diversity confusion (Table X), the
Recall@1 curves along training (Fig. 3), the averaged last convolutional map (Figs. 6-7) and linear attribute probes,
each a :class:`~zslib.present.base.Section` drawn from the curve runs of
:class:`~zslib.present.cml.pages.CmlExperiments`, its sentences written from the numbers.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from zslib.analysis.probe import attribute_probe
from zslib.analysis.saliency import activation_map
from zslib.analysis.viz import plot_curves, to_display, probe_bars
from zslib.engine.stats import format_interval, summarize
from zslib.methods.cml import confusion
from zslib.methods.cml.recipes import PROBE
from zslib.present.base import Section
from zslib.present.cml.pages import CmlExperiments
from zslib.present.cml.sweep import tested_lambda2_sentence
from zslib.reported import reported_frame

__all__ = ["diversity_table", "diversity_section", "curves_figure", "attention_figure", "probe_section"]

#: How many unseen images the attention figure shows (evenly spaced over the split).
ATTENTION_IMAGES = 6


def diversity_table(ex: CmlExperiments) -> pd.DataFrame:
    """``(model, classes)`` -> the diversity (CML Definition 1) of the curve runs' seen and unseen embeddings, mean
    and per seed, with each model's unseen Recall@1."""
    rows = []
    for name, per_seed in ex.embedded().items():
        for split in ("seen", "unseen"):
            vals = [float(confusion.diversity(e[split][0])) for e in per_seed]
            rows.append({"model": name, "classes": split, "diversity": np.mean(vals),
                         "per seed": ", ".join(f"{v:.2f}" for v in vals)})
        rows[-1]["unseen R@1 %"] = 100 * summarize(ex.pair()[name])[0]
    return pd.DataFrame(rows).set_index(["model", "classes"])


def diversity_section(ex: CmlExperiments) -> Section:
    """Table X analogue: which lambda2 the CML-d run uses and why (:func:`tested_lambda2_sentence`), the diversity
    table, each model's unseen / seen diversity ratio beside the paper's (Table X, CARS, binomial)."""
    if ex.pair() is None:
        return Section(caption=ex.missing_note())
    div = diversity_table(ex)
    notes = [f"{name}: unseen / seen diversity = "
             f"{div.loc[(name, 'unseen'), 'diversity'] / div.loc[(name, 'seen'), 'diversity']:.2f}"
             for name in ex.pair()]
    t10 = reported_frame("X")
    ratio = t10["unseen diversity"] / t10["seen diversity"]
    notes += [f"paper {m}: unseen / seen diversity = {ratio[m]:.2f}" for m in t10.index]
    notes.append("paper, Table X (CARS, binomial):")
    return Section(caption=tested_lambda2_sentence(ex.sweep(), ex.choices()), table=div, notes=notes,
                   paper=(("chen2022cml", "X"),))


def curves_figure(ex: CmlExperiments) -> Section:
    """Seen and unseen Recall@1 along training of the baseline and CML-d, one panel each (Fig. 3 analogue)."""
    pair = ex.pair()
    if pair is None:
        return Section(caption=ex.missing_note())
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, (name, rs) in zip(axes, pair.items()):
        plot_curves(rs, metric="R@1", splits=("seen", "unseen"), ax=ax, title=name)
    fig.tight_layout()
    return Section(figure=fig)


def attention_figure(ex: CmlExperiments) -> Section:
    """The channel-averaged last convolutional map (:func:`zslib.analysis.saliency.activation_map`) of seed 0 of
    each curve model over :data:`ATTENTION_IMAGES` unseen images (Figs. 6-7 analogue)."""
    if ex.pair() is None:
        return Section(caption=ex.missing_note())
    unseen, models = ex.data()["unseen"], ex.models()
    idx = np.linspace(0, len(unseen) - 1, ATTENTION_IMAGES).astype(int)
    imgs = torch.stack([unseen[int(i)][0] for i in idx])
    first = models["baseline"][0]
    mean, std = getattr(first, "input_mean", None), getattr(first, "input_std", None)
    fig, axes = plt.subplots(1 + len(models), len(idx), figsize=(2 * len(idx), 6))
    maps = {name: activation_map(ms[0], imgs) for name, ms in models.items()}
    for j in range(len(idx)):
        axes[0, j].imshow(to_display(imgs[j], mean, std))
        axes[0, j].set_title(f"class {int(unseen[int(idx[j])][1])}")
        for r, (name, mp) in enumerate(maps.items(), start=1):
            axes[r, j].imshow(to_display(imgs[j], mean, std))
            axes[r, j].imshow(mp[j], cmap="jet", alpha=0.5)
            axes[r, j].set_ylabel(name if j == 0 else "")
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return Section(figure=fig)


def probe_section(ex: CmlExperiments) -> Section:
    """Linear probes (:func:`zslib.analysis.probe.attribute_probe`, :data:`~zslib.methods.cml.recipes.PROBE`) of
    every attribute on the unseen embeddings of each curve model and seed: the bars and accuracies of seed 0, then
    per attribute group (the shortcut colours, the hard attributes) the mean accuracy of each model over the seeds
    and CML-d minus the baseline paired by seed. A dataset without per-image attributes gets a note."""
    if ex.pair() is None:
        return Section(caption=ex.missing_note())
    unseen = ex.data()["unseen"]
    if not (hasattr(unseen, "attributes") and hasattr(unseen, "attribute_names")):
        return Section(notes=[f"the {ex.on.dataset} dataset has no per-image attributes in zslib; the probe is "
                              "skipped"])
    embedded = ex.embedded()
    probes = {name: [attribute_probe(e["unseen"][0], unseen.attributes, names=list(unseen.attribute_names),
                                     groups=e["unseen"][1].numpy(), **PROBE) for e in per_seed]
              for name, per_seed in embedded.items()}
    reports = {name: ps[0] for name, ps in probes.items()}
    fig = probe_bars(reports, shortcut=getattr(unseen, "shortcut_attributes", ()),
                     title="linear probes on unseen-class embeddings (held-out classes), seed 0")
    accuracy = pd.DataFrame({k: r.accuracy for k, r in reports.items()}).assign(
        chance=pd.Series(next(iter(reports.values())).chance)).round(3)
    hard = [a for a in unseen.attribute_names if a not in unseen.shortcut_attributes]
    notes = []
    for group, attrs in (("shortcut", list(unseen.shortcut_attributes)), ("hard", hard)):
        per_seed = {name: [np.mean([p.accuracy[a] for a in attrs]) for p in ps] for name, ps in probes.items()}
        # both arms list their models in the order of their seeds, so the differences are paired
        diff = summarize([c - b for c, b in zip(per_seed["CML-d"], per_seed["baseline"])])
        notes.append(f"{group} attributes, mean probe accuracy over {len(per_seed['baseline'])} seeds: baseline "
                     f"{np.mean(per_seed['baseline']):.3f}, CML-d {np.mean(per_seed['CML-d']):.3f}; "
                     f"CML-d minus baseline {format_interval(diff, scale=1, digits=3, signed=True)}")
    return Section(figure=fig, table=accuracy, notes=notes)
