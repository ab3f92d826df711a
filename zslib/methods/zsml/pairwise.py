"""Retrieval and clustering from a learned *pair scorer* rather than an embedding, in bounded memory.

Most methods of the book embed each image and compare embeddings (:mod:`zslib.engine.evaluate`). ZSML
(Xu et al., IJCAI 2019; ``xu2019zsml``) learns no embedding, only a function of two feature vectors,
``s_ij = S(R(x_i, x_j))``. Every comparison costs a network evaluation, so the evaluation works on
chunks of pairs:

* :func:`score_matrix` -- the ``(n_query, n_gallery)`` matrix of scores;
* :func:`score_topk` -- only the ``k`` best gallery items per query, exact, ties broken by gallery
  index (the convention of :mod:`zslib.engine.evaluate`);
* :func:`pair_recall_at_k` -- Recall@K from the top-k (leave-one-out when no gallery is given);
* :func:`spectral_clusters`, :func:`k_medoids` -- clusterings of a similarity matrix;
  :func:`cluster_scores` -- ACC, NMI and purity of assignments (ZSML Sec. 5, via
  :func:`zslib.engine.evaluate.cluster_accuracy`, :func:`~zslib.engine.evaluate.nmi`, :func:`~zslib.engine.evaluate.purity`);
* :func:`class_sample`, :func:`neighbor_graph`, :func:`matrix_metrics`, :func:`pairwise_metrics` -- the
  book's protocol for a learned pair scorer: one score matrix of a class-stratified sample, Recall@K
  read from it, and spectral clustering of its nearest-neighbour graph (see below).

A *pair scorer* is any callable ``scorer(a, b)`` that takes two ``(P, d)`` tensors and returns the
``(P,)`` scores of the pairs ``(a[p], b[p])``, larger meaning more similar. A
:class:`zslib.methods.zsml.relation.PairSimilarity` in eval mode is one. ``lambda a, b: (a * b).sum(1)``
(dot product) is another, handy for checking against :mod:`zslib.engine.evaluate`. At most ``max_pairs``
pairs go to the scorer at once. Memory is the output plus ``max_pairs`` times the scorer's working
set per pair: about 150 KB for ZSML's network on 1,280-dim features, so 300 MB at the default 2,048.
A scorer that also has ``halves(x) -> (u, v)`` and ``from_halves(u, v) -> (P,)`` (a
:class:`~zslib.methods.zsml.relation.PairSimilarity`) is given each vector's halves, computed once per
vector, instead of the pairs themselves: the same scores, about half the time for ZSML's kernels, plus
the gallery's second halves in memory (``n`` times the relation's width).

**Which clustering the paper used.** ZSML reports ACC, NMI and purity (Sec. 5, after Cai et al.
2008) but never names the clustering algorithm. Its metric gives only pairwise scores, with no
vectors to average, so k-means cannot run on it. A clustering of the similarity matrix is needed.
Spectral clustering is the standard one for a precomputed affinity, and we use it as the primary
choice (:func:`spectral_clusters`, scikit-learn's ``SpectralClustering(affinity="precomputed")``).
:func:`k_medoids` is a second, graph-free reading. The reported numbers cannot decide between them.
The Euclidean rows are identical wherever the test set is the same (Tables 3-5), so the clustering
was deterministic. One printed purity (MLCA, Caltech -> COIL, 1.97%) lies below 1/20, the least any
clustering of 20 balanced classes can score, so the tables carry at least one typo.

**The protocol the book uses** (:func:`pairwise_metrics`). Scoring every pair of a large set costs one
network evaluation per pair, so a split is evaluated on a class-stratified sample (:func:`class_sample`:
up to ``per_class`` images of every class, drawn with the run's seed; ``None``: every image). From its one
``(n, n)`` score matrix come Recall@K (leave-one-out, ties by index) and a clustering. The clustering is
spectral clustering of the symmetric ``neighbors``-nearest-neighbour graph of the matrix
(:func:`neighbor_graph`), with as many clusters as classes. The graph keeps only each image's ranking of
the others, so two metrics whose scores differ by a monotone map (a distance and a Gaussian of it, or a
network whose outputs are not calibrated) cluster alike. That makes the comparison of ZSML's scores
with Euclidean or NCA distances fair: a dense affinity would favour whichever metric happens to produce
well-spread values.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from sklearn.cluster import SpectralClustering
import torch
from torch import nn

from zslib.engine import checks
from zslib.engine.evaluate import Neighbors, cluster_accuracy, nmi, purity
from zslib.engine.progress import progress_bar
from zslib.engine.threads import one_thread

__all__ = [
    "PairScorer",
    "score_matrix",
    "score_topk",
    "pair_recall_at_k",
    "spectral_clusters",
    "k_medoids",
    "cluster_scores",
    "class_sample",
    "neighbor_graph",
    "matrix_metrics",
    "pairwise_metrics",
    "euclidean_scorer",
    "normalized_euclidean_scorer",
]

PairScorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

DEFAULT_MAX_PAIRS = 2048


def _inputs(query, gallery, device):
    q = checks.features(query, "query", detach=True)
    g = q if gallery is None else checks.features(gallery, "gallery", detach=True)
    checks.same_dimension(q, g, ("query", "gallery"))
    if q.dtype != g.dtype:
        g = g.to(q.dtype)
    device = torch.device(device) if device is not None else q.device
    return q.to(device), g.to(device)


def _check_scorer(scorer) -> None:
    if not callable(scorer):
        raise TypeError(f"scorer must be a callable scorer(a, b) -> (P,) scores, got {type(scorer).__name__}")
    if isinstance(scorer, nn.Module) and scorer.training:
        warnings.warn("the scorer is an nn.Module in training mode; call .eval() first so that scores do not "
                      "depend on how the pairs are chunked (batch norm, dropout)", UserWarning, stacklevel=3)


def _blocks(scorer: PairScorer, q: torch.Tensor, g: torch.Tensor, max_pairs: int
            ) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(query_start, gallery_start, scores)`` blocks covering the query x gallery grid; rows
    in order, and within a row block the gallery blocks in order."""
    max_pairs = checks.finite_number(max_pairs, "max_pairs", low=1, integer=True)
    nq, ng = q.shape[0], g.shape[0]
    gb = min(ng, max_pairs)
    qb = max(1, max_pairs // gb)
    # a scorer that splits into per-vector halves (PairSimilarity) computes them once per vector, not per pair
    split = callable(getattr(scorer, "halves", None)) and callable(getattr(scorer, "from_halves", None))
    with torch.no_grad():
        v_all = scorer.halves(g)[1] if split else None
        for q0 in range(0, nq, qb):
            qc = q[q0:q0 + qb]
            u_q = scorer.halves(qc)[0] if split else None
            for g0 in range(0, ng, gb):
                gc = g[g0:g0 + gb]
                if split:
                    ia = torch.arange(qc.shape[0], device=q.device).repeat_interleave(gc.shape[0])
                    ib = torch.arange(g0, g0 + gc.shape[0], device=q.device).repeat(qc.shape[0])
                    s, pairs = scorer.from_halves(u_q[ia], v_all[ib]), ia.shape[0]
                else:
                    a = qc.unsqueeze(1).expand(-1, gc.shape[0], -1).reshape(-1, q.shape[1])
                    b = gc.unsqueeze(0).expand(qc.shape[0], -1, -1).reshape(-1, q.shape[1])
                    s, pairs = scorer(a, b), a.shape[0]
                if not torch.is_tensor(s) or s.shape != (pairs,):
                    raise ValueError(f"the scorer must return a tensor of shape ({pairs},) for "
                                     f"{pairs} pairs, got {getattr(s, 'shape', type(s).__name__)}")
                if not bool(torch.isfinite(s).all()):
                    raise ValueError("the scorer returned NaN or infinite scores; check the model and its inputs")
                yield q0, g0, s.reshape(qc.shape[0], gc.shape[0])


def score_matrix(scorer: PairScorer, query, gallery=None, *, max_pairs: int = DEFAULT_MAX_PAIRS,
                 device=None, progress=False) -> torch.Tensor:
    """The ``(n_query, n_gallery)`` matrix ``[i, j] = scorer(query[i], gallery[j])`` (CPU).

    ``gallery=None`` scores the query set against itself, diagonal included. The scorer sees at
    most ``max_pairs`` pairs per call, on ``device`` (default: the query's). The scores are
    whatever the scorer computes: for ZSML's network, ``[i, j]`` and ``[j, i]`` differ. Average
    the matrix with its transpose for a symmetric similarity. ``progress``: a bar over the pairs
    (:func:`zslib.engine.progress.progress_bar`'s modes; off by default).
    """
    _check_scorer(scorer)
    q, g = _inputs(query, gallery, device)
    out = None
    bar = progress_bar(progress, q.shape[0] * g.shape[0], desc="pairs")
    try:
        for q0, g0, s in _blocks(scorer, q, g, max_pairs):
            if out is None:
                out = torch.empty(q.shape[0], g.shape[0], dtype=s.dtype)
            out[q0:q0 + s.shape[0], g0:g0 + s.shape[1]] = s.cpu()
            if bar is not None:
                bar.update(s.numel())
    finally:
        if bar is not None:
            bar.close()
    return out


def score_topk(scorer: PairScorer, query, gallery=None, k: int = 1, *, exclude_self: bool | None = None,
               max_pairs: int = DEFAULT_MAX_PAIRS, device=None) -> Neighbors:
    """The ``k`` highest-scoring gallery items of every query, exact, without the full matrix.

    Returns :class:`zslib.engine.evaluate.Neighbors` (``values``, ``indices``; best first; CPU). Equal
    scores are ordered by gallery index, smaller first, as in :mod:`zslib.engine.evaluate`. With
    ``gallery=None`` the query set is its own gallery, and each query's own index is excluded
    (``exclude_self`` defaults to True then). Memory: the scorer's chunk plus ``(rows, k + chunk)``
    for the running merge.
    """
    _check_scorer(scorer)
    q, g = _inputs(query, gallery, device)
    exclude_self = gallery is None if exclude_self is None else bool(exclude_self)
    if exclude_self and q.shape[0] != g.shape[0]:
        raise ValueError("exclude_self needs the query set to be the gallery (same rows); pass gallery=None")
    k = checks.finite_number(k, "k", low=1, integer=True)
    available = g.shape[0] - (1 if exclude_self else 0)
    if k > available:
        raise ValueError(f"k={k} exceeds the {available} gallery items available to each query")
    best_v: list[torch.Tensor] = []
    best_i: list[torch.Tensor] = []
    cur_v = cur_i = None
    cur_q0 = -1
    for q0, g0, s in _blocks(scorer, q, g, max_pairs):
        s = s.cpu()
        if exclude_self:
            r = torch.arange(s.shape[0])
            col = r + q0 - g0
            ok = (col >= 0) & (col < s.shape[1])
            s[r[ok], col[ok]] = -math.inf
        gi = torch.arange(g0, g0 + s.shape[1]).expand(s.shape[0], -1)
        if q0 != cur_q0:  # a new block of query rows: flush the finished one
            if cur_v is not None:
                best_v.append(cur_v)
                best_i.append(cur_i)
            cur_q0 = q0
            cur_v = torch.empty(s.shape[0], 0, dtype=s.dtype)
            cur_i = torch.empty(s.shape[0], 0, dtype=torch.long)
        # the running best (ties already in index order, all indices < g0) then the new block in
        # index order: a stable descending sort keeps equal scores in ascending index order
        v = torch.cat([cur_v, s], 1)
        i = torch.cat([cur_i, gi], 1)
        v, o = v.sort(dim=1, descending=True, stable=True)
        cur_v, cur_i = v[:, :k], i.gather(1, o[:, :k])
    best_v.append(cur_v)
    best_i.append(cur_i)
    return Neighbors(torch.cat(best_v), torch.cat(best_i))


def pair_recall_at_k(scorer: PairScorer, features, labels, ks: Sequence[int] | int = (1, 2, 4, 8), *,
                     query=None, query_labels=None, max_pairs: int = DEFAULT_MAX_PAIRS, device=None
                     ) -> dict[int, float]:
    """Recall@K (Song et al. 2016; ZSML Table 6) with neighbours ranked by a pair scorer.

    A query counts when one of its K best-scoring gallery items shares its label. Without
    ``query``, leave-one-out over ``features``. Queries with no same-label item in the gallery are
    left out with a ``UserWarning``, as :func:`zslib.engine.evaluate.recall_at_k` does. Returns
    ``{K: fraction}``.
    """
    ks = (ks,) if isinstance(ks, (int, np.integer)) else tuple(ks)
    if not ks or any(isinstance(k, bool) or int(k) != k or k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks}")
    ks = tuple(int(k) for k in ks)
    g = checks.features(features, "features", detach=True)
    gl = checks.class_id_array(labels, g.shape[0], of="features")
    if query is None:
        if query_labels is not None:
            raise ValueError("query_labels given without query; pass both or neither")
        ql = gl
    else:
        if query_labels is None:
            raise ValueError("query given without query_labels; pass both or neither")
        ql = checks.class_id_array(query_labels, checks.features(query, "query", detach=True).shape[0],
                                   name="query_labels", of="query")
    loo = query is None
    classes, counts = np.unique(gl, return_counts=True)
    at = np.searchsorted(classes, ql).clip(max=len(classes) - 1)
    n_pos = np.where(classes[at] == ql, counts[at], 0) - (1 if loo else 0)
    valid = _answerable(n_pos, "Recall@K", stacklevel=3)
    nb = score_topk(scorer, g if loo else query, None if loo else g, max(ks), max_pairs=max_pairs, device=device)
    hit = gl[nb.indices.numpy()] == ql[:, None]
    first = np.where(hit.any(1), hit.argmax(1), max(ks))[valid]
    return {k: float(np.mean(first < k)) for k in ks}


# ----------------------------------------------------------------------------------------------------
# clustering a similarity matrix


def _similarity(similarity, symmetrize: bool) -> np.ndarray:
    s = checks.feature_array(similarity, "similarity")
    if s.shape[0] != s.shape[1]:
        raise ValueError(f"similarity must be a square (n, n) matrix, got shape {s.shape}")
    return 0.5 * (s + s.T) if symmetrize else s


def _n_clusters(n_clusters, n) -> int:
    k = checks.finite_number(n_clusters, "n_clusters", low=1, integer=True)
    if k > n:
        raise ValueError(f"n_clusters={k} exceeds the {n} samples")
    return k


@one_thread()
def spectral_clusters(similarity, n_clusters: int, *, seed: int = 0, symmetrize: bool = True) -> np.ndarray:
    """Spectral clustering of a precomputed similarity matrix (scikit-learn ``SpectralClustering``,
    ``affinity="precomputed"``, k-means on the spectral embedding, ``random_state=seed``).

    The affinity must be symmetric and non-negative. We average ``S`` with ``S^T`` (``symmetrize``)
    and set negative scores to 0. ZSML's scores are meant to lie in ``(0, 1)``, and a negative one
    means "dissimilar", which 0 expresses in a graph. Returns int64 cluster ids.
    """
    s = _similarity(similarity, symmetrize)
    if not symmetrize and not np.allclose(s, s.T):
        raise ValueError("spectral clustering needs a symmetric similarity; pass symmetrize=True")
    k = _n_clusters(n_clusters, s.shape[0])
    a = np.clip(s, 0.0, None)
    sc = SpectralClustering(n_clusters=k, affinity="precomputed", random_state=seed, assign_labels="kmeans")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Graph is not fully connected", category=UserWarning)
        return sc.fit_predict(a).astype(np.int64)


def k_medoids(similarity, n_clusters: int, *, seed: int = 0, symmetrize: bool = True, max_iter: int = 100
              ) -> np.ndarray:
    """k-medoids on a similarity matrix: alternate "join the most similar medoid" and "the new medoid
    is the member with the largest total similarity to its cluster" until nothing changes.

    Start: k-means++-style seeding on the dissimilarity ``max(S) - S`` with ``seed``. Each medoid
    always belongs to its own cluster, even if the learned score of a sample with itself is not its
    largest, so no cluster is ever empty. This is the Voronoi-iteration variant, not the slower
    PAM swap search. Returns int64 cluster ids.
    """
    s = _similarity(similarity, symmetrize)
    n = s.shape[0]
    k = _n_clusters(n_clusters, n)
    max_iter = checks.finite_number(max_iter, "max_iter", low=1, integer=True)
    rng = np.random.default_rng(seed)
    d = s.max() - s
    medoids = [int(rng.integers(n))]
    closest = d[medoids[0]].copy()
    for _ in range(1, k):
        w = np.clip(closest, 0, None) ** 2
        w[medoids] = 0.0
        nxt = int(rng.choice(n, p=w / w.sum())) if w.sum() > 0 else int(np.setdiff1d(np.arange(n), medoids)[0])
        medoids.append(nxt)
        closest = np.minimum(closest, d[nxt])
    med = np.array(medoids)
    assign = None
    for _ in range(max_iter):
        new = s[:, med].argmax(1)  # ties: the first medoid
        new[med] = np.arange(k)
        if assign is not None and np.array_equal(new, assign):
            break
        assign = new
        for c in range(k):  # a loop over clusters, not samples
            members = np.flatnonzero(assign == c)
            med[c] = members[s[np.ix_(members, members)].sum(1).argmax()]
    return assign.astype(np.int64)


def cluster_scores(assignments, labels) -> dict[str, float]:
    """ACC, NMI and purity (ZSML Sec. 5) of cluster ``assignments`` against class ``labels``, as
    fractions in ``[0, 1]``. Computed by :mod:`zslib.engine.evaluate`."""
    a = checks.class_id_array(assignments, name="assignments")
    y = checks.class_id_array(labels, len(a), of="assignments")
    return {"ACC": cluster_accuracy(None, y, assignments=a), "NMI": nmi(None, y, assignments=a),
            "Purity": purity(None, y, assignments=a)}


# ----------------------------------------------------------------------------------------------------
# the book's protocol: a sample, one score matrix, retrieval and clustering from it


def class_sample(labels, per_class: int | None, seed: int = 0) -> np.ndarray:
    """Sorted indices of a class-stratified sample: ``per_class`` items of every class (all of a class
    that has fewer), drawn without replacement by ``numpy.random.default_rng(seed)``. ``None``: every
    index. The same labels, ``per_class`` and seed always give the same sample, whatever is scored on it.
    """
    y = checks.class_id_array(labels)
    if per_class is None:
        return np.arange(len(y))
    per_class = checks.finite_number(per_class, "per_class", low=1, integer=True)
    rng = np.random.default_rng(seed)
    keep = []
    for c in np.unique(y):  # a loop over classes, not items
        members = np.flatnonzero(y == c)
        keep.append(members if len(members) <= per_class else rng.choice(members, per_class, replace=False))
    return np.sort(np.concatenate(keep))


def neighbor_graph(similarity, neighbors: int) -> np.ndarray:
    """The symmetric 0/1 ``neighbors``-nearest-neighbour graph of a square similarity matrix: ``i`` and
    ``j`` are joined when ``j`` is among the ``neighbors`` highest-scoring others of row ``i``, or ``i``
    among those of row ``j``. The diagonal is ignored; equal scores are ordered by index."""
    s = checks.feature_array(similarity, "similarity")
    n = s.shape[0]
    if s.shape[1] != n:
        raise ValueError(f"similarity must be a square (n, n) matrix, got shape {s.shape}")
    neighbors = checks.finite_number(neighbors, "neighbors", low=1, integer=True)
    if neighbors > n - 1:
        raise ValueError(f"neighbors={neighbors} exceeds the {n - 1} other items of each row")
    masked = np.array(s, dtype=np.float64)
    np.fill_diagonal(masked, -np.inf)
    order = np.argsort(-masked, axis=1, kind="stable")[:, :neighbors]
    graph = np.zeros((n, n))
    graph[np.repeat(np.arange(n), neighbors), order.reshape(-1)] = 1.0
    return np.maximum(graph, graph.T)


def matrix_metrics(similarity, labels, *, ks: Sequence[int] = (1, 2, 4, 8), neighbors: int = 10,
                   seed: int = 0) -> dict[str, float]:
    """Retrieval and clustering of one set from its full ``(n, n)`` similarity matrix (row ``i``: how
    similar every item is to query ``i``).

    * ``"R@K"``: leave-one-out Recall@K ranking each row by score (larger first, the diagonal left out,
      ties by index, as :mod:`zslib.engine.evaluate`); queries whose class has no other member are left out
      with a ``UserWarning``;
    * ``"ACC"``, ``"NMI"``, ``"Purity"``: :func:`cluster_scores` of :func:`spectral_clusters` (seeded)
      on the :func:`neighbor_graph` with ``neighbors`` neighbours, one cluster per class.
    """
    s = checks.feature_array(similarity, "similarity")
    n = s.shape[0]
    if s.shape[1] != n:
        raise ValueError(f"similarity must be a square (n, n) matrix, got shape {s.shape}")
    y = checks.class_id_array(labels, n, of="similarity")
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 or k > n - 1 for k in ks):
        raise ValueError(f"ks must be integers in [1, {n - 1}], got {ks}")
    row = _gallery_recall(s, np.arange(n), y, ks)
    classes = np.unique(y)
    graph = neighbor_graph(s, min(neighbors, n - 1))
    row.update(cluster_scores(spectral_clusters(graph, len(classes), seed=seed), y))
    return row


def pairwise_metrics(scorer: PairScorer, features, labels, *, per_class: int | None = None, seed: int = 0,
                     symmetric: bool = False, ks: Sequence[int] = (1, 2, 4, 8), neighbors: int = 10,
                     max_pairs: int = DEFAULT_MAX_PAIRS, device=None, full_gallery: bool = False) -> dict[str, float]:
    """The book's evaluation of a pair scorer on one split: :func:`class_sample` (``per_class``,
    ``seed``), the :func:`score_matrix` of the sample against itself (averaged with its transpose when
    ``symmetric``), and :func:`matrix_metrics` of it. Memory: the ``n x n`` matrix plus one chunk.

    ``full_gallery``: the sample is only the set of *queries*; each is scored against every item of the split
    (itself left out), so Recall@K is the every-item Recall@K of those queries. Recall@K is a mean over
    queries, so a class-stratified sample of them estimates the every-item value without bias; only the
    sampling error remains (and it is in the spread over seeds, which draw different queries). ACC, NMI and
    purity still cluster the sample, from the block of the matrix where the gallery items are the queries
    themselves (the same numbers as without ``full_gallery``). Cost: ``queries x items`` scorer calls."""
    x = checks.features(features, "features", detach=True)
    y = checks.class_id_array(labels, x.shape[0], of="features")
    keep = class_sample(y, per_class, seed)
    if not full_gallery:
        s = score_matrix(scorer, x[torch.from_numpy(keep)], max_pairs=max_pairs, device=device)
        if symmetric:
            s = 0.5 * (s + s.T)
        return matrix_metrics(s.numpy(), y[keep], ks=ks, neighbors=neighbors, seed=seed)
    s = score_matrix(scorer, x[torch.from_numpy(keep)], x, max_pairs=max_pairs, device=device)
    if symmetric:
        s = 0.5 * (s + score_matrix(scorer, x, x[torch.from_numpy(keep)], max_pairs=max_pairs, device=device).T)
    s = s.numpy()
    row = matrix_metrics(s[:, keep], y[keep], ks=ks, neighbors=neighbors, seed=seed)
    row.update(_gallery_recall(s, keep, y, ks))
    return row


def _gallery_recall(scores: np.ndarray, queries: np.ndarray, labels: np.ndarray, ks: Sequence[int]) -> dict:
    """Recall@K and MAP@R of the ``queries`` (indices into ``labels``) from their ``(len(queries), n)`` rows of
    scores against every item, each query's own column left out; ties by index. MAP@R is Musgrave et al. 2020,
    Sec. 3.2: with R the query's same-class items, the mean over its first R neighbours of the precision at each
    correct one, divided by R. Queries whose class has no other item are left out with a ``UserWarning``."""
    ks = tuple(int(k) for k in ks)
    masked = np.array(scores, dtype=np.float64)
    masked[np.arange(len(queries)), queries] = -np.inf
    yq = labels[queries]
    classes, counts = np.unique(labels, return_counts=True)
    r = counts[np.searchsorted(classes, yq)] - 1
    order = np.argsort(-masked, axis=1, kind="stable")[:, :max(max(ks), int(r.max()))]
    valid = _answerable(r, "Recall@K and MAP@R", stacklevel=4)
    hit = labels[order] == yq[:, None]
    first = np.where(hit[:, :max(ks)].any(1), hit[:, :max(ks)].argmax(1), max(ks))[valid]
    row = {f"R@{k}": float(np.mean(first < k)) for k in ks}
    rank = np.arange(1, hit.shape[1] + 1)
    within = (rank[None, :] <= r[:, None]) & hit  # a correct neighbour among the first R
    precision = np.cumsum(within, axis=1) / rank
    row["MAP@R"] = float(np.mean(((precision * within).sum(1) / np.maximum(r, 1))[valid]))
    return row


def _answerable(n_pos: np.ndarray, what: str, stacklevel: int) -> np.ndarray:
    """The queries with at least one same-label item to find (``n_pos`` per query); an error when there is none,
    a ``UserWarning`` (at ``stacklevel`` from here) naming how many are left out of ``what`` otherwise."""
    valid = n_pos > 0
    if not valid.any():
        raise ValueError(f"no query has a same-label item in the gallery; {what} is undefined")
    if not valid.all():
        warnings.warn(f"{int((~valid).sum())} of {len(valid)} queries have no same-label gallery item and are "
                      f"left out of {what}", UserWarning, stacklevel=stacklevel)
    return valid


def euclidean_scorer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The negative squared Euclidean distance of each pair, ``-||a - b||^2``: the fixed metric the
    learned ones are compared with (larger means more similar)."""
    return -(a - b).pow(2).sum(1)


def normalized_euclidean_scorer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """:func:`euclidean_scorer` of the L2-normalized vectors, ``-||a/|a| - b/|b|||^2 = 2 cos(a, b) - 2``: it ranks
    exactly as the cosine similarity does, the comparison the book's untrained-feature floor uses."""
    return euclidean_scorer(torch.nn.functional.normalize(a, dim=1), torch.nn.functional.normalize(b, dim=1))
