"""CML's explorer (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): the energy-confusion weight of Eq. 11
as a slider over the unseen embedding of runs trained at each weight, built on the book's explorer framework
(:mod:`zslib.analysis.explorers`).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zslib.analysis.explorers import Explorer, embedding, embeddings_of, models_of_runs
from zslib.engine.evaluate import recall_at_k
from zslib.engine.models import normalization
from zslib.methods.cml.method import with_confusion

__all__ = ["cml_confusion", "separation"]


def cml_confusion(base, lambdas: Sequence[float] = (0.0, 0.2, 2.0, 20.0), *, lambda2: float = 0.0, seed: int = 0,
                  fallback: str | None = "quick", **kwargs) -> Explorer:
    """CML's energy-confusion weight as a slider (Chen et al. 2022, Eq. 11: the loss plus lambda1 times the energy
    confusion of Eq. 3 and lambda2 times the diversity confusion): for each ``lambdas`` value the run ``base``
    with that weight (:func:`zslib.methods.cml.method.with_confusion`; 0 is the loss alone) at ``seed`` is loaded
    with its weights where the results folder holds it (a run of the chapter's table), else trained again (the
    missing runs in parallel, :func:`zslib.analysis.explorers.models_of_runs`), and its unseen embedding drawn as a
    t-SNE map (:func:`zslib.analysis.explorers.embedding`), with the run's unseen Recall@1 and the ratio of the mean
    distance between class centres to the mean distance of an image to its own class centre (how far apart the
    unseen classes sit, in units of their own spread, :func:`separation`) under each map. ``kwargs`` go to
    :func:`~zslib.analysis.explorers.embedding`."""
    lambdas = [float(v) for v in lambdas]
    if len(set(lambdas)) != len(lambdas) or any(not v >= 0 for v in lambdas):
        raise ValueError(f"lambdas must be distinct non-negative weights, got {lambdas}")
    configs = {f"{v:g}": with_confusion(base, lambda1=v, lambda2=lambda2) for v in sorted(lambdas)}
    models, unseen, first, note, origin = models_of_runs(configs, seed, fallback, label=lambda n: f"lambda1 = {n}")
    y = np.asarray(unseen.labels)
    embs = {name: embeddings_of(m, unseen) for name, m in models.items()}
    captions = {}
    for name, e in embs.items():
        r1 = recall_at_k(e, y, ks=1)[1]
        captions[name] = (f"lambda1 = {name}: unseen Recall@1 {100 * r1:.1f}% (seed {seed}); class centres sit "
                          f"{separation(e, y):.2f} within-class spreads apart on average")
    mean, std = normalization(first.backbone)
    explorer = embedding(embs, unseen, mean=mean, std=std, seed=seed, knob="lambda1", kind="slider",
                         captions=captions, title="CML's energy-confusion weight lambda1 and the unseen embedding",
                         **kwargs)
    explorer.note = note + explorer.note + origin + " Each map is its own t-SNE: compare the clusters, not the axes."
    return explorer


def separation(emb: np.ndarray, y: np.ndarray) -> float:
    """How far apart the classes sit in units of their own spread: the mean distance between class centres over the
    mean distance of an embedding to its class centre (unit vectors)."""
    z = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    classes = np.unique(y)
    centres = np.stack([z[y == c].mean(0) for c in classes])
    spread = np.mean([np.linalg.norm(z[y == c] - centres[i], axis=1).mean() for i, c in enumerate(classes)])
    d = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    between = d[np.triu_indices(len(classes), 1)].mean()
    return float(between / max(spread, 1e-12))
