"""Linear attribute probes: which properties of an image can be read off its embedding?

DeML (Chen & Deng 2019, Sec. 1) and CML (Chen et al. 2022, Sec. 1) explain the generalization gap by
*partial learning*: a network trained on the seen classes keeps only the cues that separate those
classes and discards the rest. On a real dataset this is argued from attention maps; on SynthParts,
whose images come with ground-truth attributes (:mod:`zslib.engine.data.synthparts`), it can be measured:
fit a linear classifier (multinomial logistic regression, scikit-learn) that predicts one attribute
from the embedding, and score it on held-out images. An attribute the network learned is linearly
decodable (accuracy far above chance); an attribute it ignored is not (accuracy near chance).

**Split by class.** SynthParts' attributes are properties of a *class*. If train and test images of
the probe share classes, a probe can memorize "this cluster has a red body" for every class and
score well on any attribute of any embedding that separates the classes (50 clusters in 64
dimensions are almost always linearly separable, whatever labels they carry). Pass ``groups`` (the
class labels) to make the folds class-disjoint: the probe must then find a *direction* in the
embedding that encodes the attribute across classes it never saw, which is what "the network learned
the attribute" should mean.

The reported chance level is the held-out accuracy of the best constant guess: the most frequent
value among the probe's training rows of each fold, pooled like the accuracy.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from zslib.engine.threads import one_thread

__all__ = ["ProbeReport", "attribute_probe", "probe_folds", "first_per_group"]


@dataclass(frozen=True)
class ProbeReport:
    """Held-out accuracy of one linear probe per attribute.

    Attributes:
        names: the attributes, in order.
        accuracy: pooled held-out accuracy per attribute (every row predicted once).
        chance: held-out accuracy of the most frequent training value (the best constant guess).
        stderr: binomial standard error of each accuracy, ``sqrt(p (1 - p) / n_test)``.
        n_values: number of distinct values of each attribute.
        n_test: number of held-out predictions per attribute.
        folds: number of folds (1 for an explicit ``test_mask``).
        grouped: whether the folds were disjoint in ``groups`` (e.g. class-disjoint).
    """

    names: tuple[str, ...]
    accuracy: dict[str, float]
    chance: dict[str, float]
    stderr: dict[str, float]
    n_values: dict[str, int]
    n_test: int
    folds: int
    grouped: bool

    def above_chance(self, name: str) -> float:
        """Accuracy minus chance for one attribute."""
        return self.accuracy[name] - self.chance[name]

    def to_frame(self):
        """A pandas DataFrame, one row per attribute (accuracy, chance, stderr, n_values)."""
        return pd.DataFrame({"attribute": list(self.names),
                             "accuracy": [self.accuracy[n] for n in self.names],
                             "chance": [self.chance[n] for n in self.names],
                             "stderr": [self.stderr[n] for n in self.names],
                             "n_values": [self.n_values[n] for n in self.names]})

    def __str__(self) -> str:
        rows = [f"{n:>14s}: {self.accuracy[n]:.3f} (chance {self.chance[n]:.3f})" for n in self.names]
        kind = "class-disjoint" if self.grouped else "random"
        return f"linear probe, {self.folds}-fold {kind} split, {self.n_test} held-out rows\n" + "\n".join(rows)


# --------------------------------------------------------------------------- input checks


def _embeddings(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"embeddings must be a 2-D array of numbers (n, dim); got {type(x).__name__}") from err
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"embeddings must have shape (n >= 2, dim >= 1); got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or inf; repair them before probing")
    return x


def _attribute_table(attributes, n: int, names) -> tuple[tuple[str, ...], list[np.ndarray]]:
    if isinstance(attributes, Mapping):
        if names is not None:
            raise ValueError("names= is only for an (n, A) array; a dict already names its attributes")
        names = tuple(str(k) for k in attributes)
        columns = [np.asarray(attributes[k]) for k in attributes]
    else:
        table = np.asarray(attributes.detach().cpu() if hasattr(attributes, "detach") else attributes)
        if table.ndim == 1:
            table = table[:, None]
        if table.ndim != 2:
            raise ValueError(f"attributes must be an (n, A) array or a dict name -> (n,) values; got shape {table.shape}")
        names = tuple(f"attr{i}" for i in range(table.shape[1])) if names is None else tuple(str(s) for s in names)
        if len(names) != table.shape[1]:
            raise ValueError(f"{len(names)} names for {table.shape[1]} attribute columns; give one name per column")
        columns = [table[:, i] for i in range(table.shape[1])]
    if not columns:
        raise ValueError("no attributes to probe")
    for name, col in zip(names, columns):
        if col.ndim != 1 or col.shape[0] != n:
            raise ValueError(f"attribute {name!r} has shape {col.shape}; it needs one value per embedding ({n})")
        if col.dtype.kind == "f":
            raise TypeError(f"attribute {name!r} holds floats; give discrete values (ints or strings)")
    return names, columns


def first_per_group(groups, k: int) -> np.ndarray:
    """Indices of the first ``k`` rows of every group, in row order."""
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(f"groups must be one label per row (1-D); got shape {groups.shape}")
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    rank = np.arange(groups.size) - np.repeat(starts, np.diff(np.r_[starts, groups.size]))
    return np.sort(order[rank < k])


def probe_folds(n: int, folds: int = 5, groups=None, seed: int = 0) -> np.ndarray:
    """Fold id (0..folds-1) of each of ``n`` rows: a seeded random partition into near-equal folds,
    or, with ``groups``, a partition of the distinct groups (every group lies in a single fold)."""
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2; got {folds!r}")
    rng = np.random.default_rng(seed)
    if groups is None:
        if n < folds:
            raise ValueError(f"{n} rows cannot fill {folds} folds; use fewer folds")
        fold = np.empty(n, dtype=np.int64)
        fold[rng.permutation(n)] = np.arange(n) % folds
        return fold
    groups = np.asarray(groups.detach().cpu() if hasattr(groups, "detach") else groups)
    if groups.shape != (n,):
        raise ValueError(f"groups must have one entry per embedding (shape ({n},)); got {groups.shape}")
    uniq, inverse = np.unique(groups, return_inverse=True)
    if uniq.size < folds:
        raise ValueError(f"only {uniq.size} distinct groups for {folds} class-disjoint folds; use fewer folds")
    group_fold = np.empty(uniq.size, dtype=np.int64)
    group_fold[rng.permutation(uniq.size)] = np.arange(uniq.size) % folds
    return group_fold[inverse]


# --------------------------------------------------------------------------- the probe


@one_thread()
def attribute_probe(embeddings, attributes, *, names: Sequence[str] | None = None, groups=None,
                    folds: int = 5, test_mask=None, seed: int = 0, C: float = 1.0,
                    max_iter: int = 1000, max_per_group: int | None = None) -> ProbeReport:
    """Held-out accuracy of a linear probe for each attribute, and the chance level.

    For every attribute, a multinomial logistic regression (scikit-learn, L2 penalty ``C``, on
    standardized embeddings) is fitted on the training rows and predicts the held-out rows.

    Args:
        embeddings: (n, dim) array or tensor.
        attributes: an (n, A) array of discrete values (one column per attribute, named by ``names``
            or ``attr0..``), or a dict ``name -> (n,) values``.
        groups: optional (n,) group ids (the class labels): folds are then disjoint in groups, so the
            probe is scored on classes it never saw (see the module docstring, and use it for
            class-level attributes).
        folds: number of cross-validation folds; every row is predicted once.
        test_mask: instead of folds, an (n,) boolean mask of the held-out rows (one fit per attribute).
        seed: fixes the folds.
        C, max_iter: of ``sklearn.linear_model.LogisticRegression``.
        max_per_group: with ``groups``, probe only the first this-many rows of every group (in row
            order). For attributes that are properties of a class, more images of the same class add
            little to the probe but a lot to its fitting time.

    Returns:
        :class:`ProbeReport` (``accuracy``, ``chance``, ``stderr`` per attribute).
    """
    x = _embeddings(embeddings)
    n = x.shape[0]
    names, columns = _attribute_table(attributes, n, names)
    if max_per_group is not None:
        if groups is None:
            raise ValueError("max_per_group needs groups (the class label of every row)")
        if not (isinstance(max_per_group, (int, np.integer)) and max_per_group >= 1):
            raise ValueError(f"max_per_group must be a positive integer; got {max_per_group!r}")
        rows = first_per_group(groups, int(max_per_group))
        x, columns, groups, n = x[rows], [c[rows] for c in columns], np.asarray(groups)[rows], rows.size
        if test_mask is not None:
            test_mask = np.asarray(test_mask)[rows]
    if not (isinstance(C, (int, float)) and C > 0):
        raise ValueError(f"C must be a positive number (inverse regularization strength); got {C!r}")
    if test_mask is not None:
        mask = np.asarray(test_mask)
        if mask.dtype != bool or mask.shape != (n,):
            raise ValueError(f"test_mask must be a boolean array of shape ({n},); got {mask.dtype} {mask.shape}")
        if mask.all() or not mask.any():
            raise ValueError("test_mask must hold out some rows and keep some for training")
        fold, n_folds = mask.astype(np.int64), 1
        splits = [1]
    else:
        fold, n_folds = probe_folds(n, folds, groups, seed), int(folds)
        splits = list(range(n_folds))

    accuracy, chance, stderr, n_values = {}, {}, {}, {}
    for name, col in zip(names, columns):
        values, y = np.unique(col, return_inverse=True)
        n_values[name] = int(values.size)
        pred = np.full(n, -1, dtype=np.int64)
        guess = np.full(n, -1, dtype=np.int64)
        for f in splits:
            te, tr = fold == f, fold != f
            majority = np.bincount(y[tr], minlength=values.size).argmax()
            guess[te] = majority
            if np.unique(y[tr]).size < 2:  # nothing to learn: a constant is all a probe can say
                pred[te] = majority
                continue
            scaler = StandardScaler().fit(x[tr])
            clf = LogisticRegression(C=float(C), max_iter=int(max_iter))
            clf.fit(scaler.transform(x[tr]), y[tr])
            pred[te] = clf.predict(scaler.transform(x[te]))
        scored = fold == 1 if test_mask is not None else np.ones(n, dtype=bool)
        acc = float((pred[scored] == y[scored]).mean())
        accuracy[name] = acc
        chance[name] = float((guess[scored] == y[scored]).mean())
        stderr[name] = float(np.sqrt(acc * (1 - acc) / scored.sum()))
    n_test = int(fold.sum()) if test_mask is not None else n
    return ProbeReport(names=names, accuracy=accuracy, chance=chance, stderr=stderr, n_values=n_values,
                       n_test=n_test, folds=n_folds, grouped=groups is not None and test_mask is None)
