"""The CML ablations page (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): dropout against confusion
(Table VI), the embedding size (Table IX), t-SNE maps of the unseen classes (Figs. 4-5) and the recorded
full-profile ablations, each a :class:`~zslib.present.base.Section` drawn from the runs of
:class:`~zslib.present.cml.pages.CmlAblations`, its sentences written from the numbers. The settings are none of
the chosen ones of the book's rule: every row here is an ablation, so its verdicts are the plain paired ones.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.metrics import silhouette_score
import torch

from zslib.analysis.viz import embedding_scatter, project_2d
from zslib.engine.models import normalization
from zslib.engine.runner import build_data, load_model
from zslib.engine.stats import format_interval, paired, summarize
from zslib.engine.store import load_results
from zslib.methods.cml.recipes import TSNE, ablation_variant
from zslib.present.base import Section
from zslib.present.cml.pages import CmlAblations
from zslib.reported import reported_frame

__all__ = ["TABLE_VI_NAMES", "setting_section", "dropout_table", "dropout_section", "dropout_figure", "size_table",
           "size_section", "slope", "size_verdicts", "tsne_section", "full_profile_section"]

#: The paper's row of Table VI for each configuration of the dropout grid.
TABLE_VI_NAMES = {"baseline": "Binomial", "dropout 0.1": "Dropout (Binomial, 0.1)",
                  "dropout 0.25": "Dropout (Binomial, 0.25)", "dropout 0.4": "Dropout (Binomial, 0.4)",
                  "cml-e": "CML-e (Binomial)", "cml-d": "CML-d (Binomial)", "cml": "CML (Binomial)"}

#: The sizes of the paper's Table IX (CARS).
TABLE_IX_SIZES = (128, 256, 384, 512)


def _ci(results, metric="R@1", split="unseen"):
    """(mean, low, high) in percent."""
    return tuple(100 * v for v in summarize(results, metric, split))


def setting_section(ab: CmlAblations) -> Section:
    """The loss, CML weights, iterations and seeds every configuration of the page starts from."""
    cml = ablation_variant(ab.setting, "cml")
    return Section(notes=[f"loss {cml.loss}, CML parameters {cml.method_params}, {cml.iterations} iterations, "
                          f"seeds {ab.on.seeds}"])


def dropout_table(runs) -> pd.DataFrame:
    """Table VI analogue: each configuration's unseen Recall@1 (95% interval over seeds), its paired difference from
    the baseline with the verdict, seen Recall@1, and the paper's CARS number and gain over its baseline."""
    paper6 = reported_frame("VI")
    rows = []
    for key, rs in runs.items():
        m, lo, hi = _ci(rs)
        vs = paired(runs["baseline"], rs) if key != "baseline" else None
        rows.append({"configuration": key, "unseen R@1 %": m, "95% CI": f"[{lo:.1f}, {hi:.1f}]",
                     "vs baseline (pts)": format_interval(vs.diff, signed=True) if vs else "",
                     "verdict": vs.verdict if vs else "", "seen R@1 %": _ci(rs, split="seen")[0],
                     "paper R@1 % (CARS, binomial)": paper6.loc[TABLE_VI_NAMES[key], "R@1"],
                     "paper vs baseline": paper6.loc[TABLE_VI_NAMES[key], "R@1"] - paper6.loc["Binomial", "R@1"]})
    return pd.DataFrame(rows).set_index("configuration")


def dropout_section(ab: CmlAblations) -> Section:
    """How many dropout-grid runs and how long they took, then :func:`dropout_table`."""
    runs = ab.dropout_runs()
    if runs is None:
        return Section(caption=ab.missing_note())
    return Section(caption=f"{sum(map(len, runs.values()))} runs ready in {ab.seconds['the dropout grid']:.0f} s",
                   table=dropout_table(runs))


def dropout_figure(ab: CmlAblations) -> Section:
    """Each configuration's unseen Recall@1 per seed and its mean with 95% interval (dropout orange, confusion green,
    the baseline blue), then each configuration's paired verdict against the baseline and their tally."""
    runs = ab.dropout_runs()
    if runs is None:
        return Section(caption=ab.missing_note())
    fig, ax = plt.subplots(figsize=(8, 3.8))
    keys = list(runs)
    for i, key in enumerate(keys):
        vals = [100 * r.metric() for r in runs[key]]
        m, lo, hi = _ci(runs[key])
        colour = "C0" if key == "baseline" else "C1" if key.startswith("dropout") else "C2"
        ax.errorbar(i, m, yerr=[[m - lo], [hi - m]], fmt="o", color=colour, capsize=4)
        ax.plot([i] * len(vals), vals, "x", color=colour, alpha=0.5)
    ax.axhline(_ci(runs["baseline"])[0], color="C0", ls=":", lw=1)
    ax.set_xticks(range(len(keys)), keys, rotation=20)
    ax.set_ylabel("unseen R@1 % (mean, 95% CI, seeds)")
    ax.set_title("dropout (orange) and confusion (green) against the baseline (blue)")
    fig.tight_layout()
    effects = {key: paired(runs["baseline"], runs[key]).verdict for key in keys[1:]}
    lines = "\n".join(f"- {key}: unseen R@1 vs baseline -> {v}" for key, v in effects.items())
    drop = [k for k in effects if k.startswith("dropout")]
    conf = [k for k in effects if not k.startswith("dropout")]

    def tally(ks):
        return ", ".join(f"{sum(effects[k] == v for k in ks)} {v}" for v in sorted({effects[k] for k in ks}))

    return Section(figure=fig, notes=[lines, f"What this run found: dropout rates against the baseline: "
                                             f"{tally(drop)} (of {len(drop)}); confusion variants: {tally(conf)} "
                                             f"(of {len(conf)})."])


def size_table(runs) -> pd.DataFrame:
    """Table IX analogue: ``(model, embedding)`` -> unseen Recall@1 with its 95% interval, unseen NMI, seen
    Recall@1 (means over seeds, in percent)."""
    rows = []
    for (name, d), rs in runs.items():
        m, lo, hi = _ci(rs)
        rows.append({"model": name, "embedding": d, "unseen R@1 %": m, "95% CI low": lo, "95% CI high": hi,
                     "unseen NMI %": _ci(rs, "NMI")[0], "seen R@1 %": _ci(rs, split="seen")[0]})
    return pd.DataFrame(rows)


def size_section(ab: CmlAblations) -> Section:
    """How many size-grid runs and how long they took, our unseen Recall@1 against the embedding size beside the
    paper's Table IX (CARS), and :func:`size_table`."""
    runs = ab.size_runs()
    if runs is None:
        return Section(caption=ab.missing_note())
    sizes, base = ab.setting.sizes, ab.setting.base
    table9, paper9 = size_table(runs), reported_frame("IX")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, colour in (("baseline", "C0"), ("cml", "C2")):
        t = table9[table9.model == name]
        axes[0].errorbar(t["embedding"], t["unseen R@1 %"], capsize=3, color=colour, marker="o", label=name,
                         yerr=[t["unseen R@1 %"] - t["95% CI low"], t["95% CI high"] - t["unseen R@1 %"]])
        label = "Binomial" if name == "baseline" else "CML (Binomial)"
        axes[1].plot(TABLE_IX_SIZES, [paper9.loc[f"{label}-{d}", "R@1"] for d in TABLE_IX_SIZES], "s--",
                     color=colour, label=label)
    axes[0].set_xscale("log", base=2)
    axes[0].set_xticks(sizes, [str(d) for d in sizes])
    axes[0].set_xlabel("embedding size")
    axes[0].set_ylabel("unseen R@1 % (95% CI)")
    axes[0].set_title(f"ours: {base.dataset}, {base.loss}")
    axes[0].legend()
    axes[1].set_xlabel("embedding size")
    axes[1].set_ylabel("test R@1 %")
    axes[1].set_title("paper, Table IX (CARS)")
    axes[1].legend()
    fig.tight_layout()
    return Section(caption=f"{sum(map(len, runs.values()))} runs ready in {ab.seconds['the size grid']:.0f} s",
                   figure=fig, table=table9.set_index(["model", "embedding"]))


def slope(runs, name: str, sizes) -> float:
    """Least-squares slope of unseen Recall@1 (points) per doubling of the embedding size, over every seed's run of
    ``name`` at ``sizes``."""
    xs = [np.log2(d) for d in sizes for _ in runs[name, d]]
    ys = [100 * r.metric() for d in sizes for r in runs[name, d]]
    return float(np.polyfit(xs, ys, 1)[0])


def size_verdicts(ab: CmlAblations) -> Section:
    """The two parts of Table IX's claim as numbers: each model's :func:`slope`, and CML minus the baseline at each
    size, paired by seed."""
    runs = ab.size_runs()
    if runs is None:
        return Section(caption=ab.missing_note())
    sizes = ab.setting.sizes
    lines = [f"- {name}: {slope(runs, name, sizes):+.2f} R@1 points per doubling of the embedding size"
             for name in ("baseline", "cml")]
    for d in sizes:
        gap = paired(runs["baseline", d], runs["cml", d])
        lines.append(f"- d={d}: CML minus baseline {format_interval(gap.diff, signed=True)} R@1 points ({gap.verdict})")
    return Section(notes=["\n".join(lines)])


def _tsne_subset(unseen):
    """The unseen images of the maps (:data:`~zslib.methods.cml.recipes.TSNE`): ``(rows, classes)``."""
    labels = np.asarray(unseen.labels)
    classes = np.unique(labels)[:TSNE["classes"]]  # real data: the first unseen classes
    if hasattr(unseen, "class_attributes"):  # SynthParts: all five classes of each of the first shortcut colour pairs
        cols = [list(unseen.attribute_names).index(a) for a in unseen.shortcut_attributes]
        _, pair_of_class = np.unique(unseen.class_attributes[:, cols], axis=0, return_inverse=True)
        classes = np.asarray(unseen.classes)[np.isin(pair_of_class.ravel(), list(range(TSNE["colour_pairs"])))]
    rows = np.concatenate([np.flatnonzero(labels == c)[:TSNE["per_class"]] for c in classes])
    return rows, classes


def tsne_section(ab: CmlAblations) -> Section:
    """t-SNE maps (Figs. 4-5) of the baseline and CML (seed 0 of the dropout grid's runs) on a subset of the unseen
    classes, coloured by class and, on SynthParts, by the shortcut colour pair; then the silhouette (cosine) of the
    embeddings by class and by colour pair, which puts a number on what the maps show."""
    runs = ab.dropout_runs()
    if runs is None:
        return Section(caption=ab.missing_note())
    unseen = build_data(ablation_variant(ab.setting, "baseline"))["unseen"]
    labels = np.asarray(unseen.labels)
    pick, classes = _tsne_subset(unseen)
    images = torch.stack([unseen[int(i)][0] for i in pick])  # normalized for the network
    mean, std = normalization(ab.setting.base.backbone)  # ... and un-normalized for display
    maps = {}
    for name in ("baseline", "cml"):
        model = load_model(runs[name][0], device="cpu")
        with torch.no_grad():
            emb = model(images).numpy()
        maps[name] = (emb, project_2d(emb, method="tsne", seed=TSNE["seed"], perplexity=TSNE["perplexity"]))
    colour_pair = None
    if hasattr(unseen, "attributes") and all(a in unseen.attribute_names for a in unseen.shortcut_attributes):
        cols = [list(unseen.attribute_names).index(a) for a in unseen.shortcut_attributes]
        _, colour_pair = np.unique(np.asarray(unseen.attributes)[pick][:, cols], axis=0, return_inverse=True)
    two = colour_pair is not None
    fig, axes = plt.subplots(2 if two else 1, 2, figsize=(12, 11 if two else 5.5), squeeze=False)
    for j, (name, (emb, xy)) in enumerate(maps.items()):
        embedding_scatter(emb, labels[pick], coords=xy, images=images, n_thumbnails=16, thumbnail_zoom=0.5,
                          mean=mean, std=std, ax=axes[0, j], title=f"{name}: coloured by class")
        if two:
            embedding_scatter(emb, colour_pair, coords=xy, ax=axes[1, j],
                              title=f"{name}: coloured by the shortcut colour pair")
    fig.tight_layout()
    lines = []
    for name, (emb, _) in maps.items():
        line = f"- {name}: silhouette by class {silhouette_score(emb, labels[pick], metric='cosine'):+.3f}"
        if two:
            line += f", by shortcut colour pair {silhouette_score(emb, colour_pair, metric='cosine'):+.3f}"
        lines.append(line)
    return Section(caption=f"{len(pick)} images of {len(classes)} unseen classes", figure=fig,
                   notes=["\n".join(lines)])


def full_profile_section() -> Section:
    """The full-profile Cars196 ablation runs recorded in ``results/`` (binomial deviance, the four variants), each
    with its dropout, size, unseen Recall@1 and provenance; says so when there is none."""
    recorded = [r for r in load_results(profile="full") if r.config.dataset == "cars196" and r.config.method in
                ("baseline", "cml-e", "cml-d", "cml") and r.config.loss == "binomial_deviance"]
    if not recorded:
        return Section(notes=["No full-profile Cars196 ablation run has been recorded (results/recorded/) - run this "
                              "notebook with ZS_PROFILE=full on a GPU to make them."])
    lines = []
    for r in recorded:
        pv = r.provenance
        lines.append(f"- {r.config.name} (dropout {r.config.dropout}, d={r.config.embedding_dim}): unseen R@1 "
                     f"{100 * r.metric():.1f}% -- {pv.get('timestamp')} on {pv.get('device')}, commit "
                     f"{pv.get('git_commit')}")
    return Section(notes=["\n".join(lines)])
