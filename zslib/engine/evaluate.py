"""Exact, memory-bounded evaluation of zero-shot retrieval and clustering.

The metrics of the five papers, computed one way for the whole book:

* retrieval: :func:`recall_at_k` (Recall@K, the metric of every table since Song et al. 2016, used
  by CML, DeML, JRD and Adapt-Adv), :func:`map_at_r` and :func:`r_precision` (the metrics that
  Musgrave et al. 2020, "A Metric Learning Reality Check", recommend), :func:`knn_accuracy`
  (Adapt-Adv, Al-Kaabi et al. 2022, Sec. 5.2: k = 5, correct when at least 3 of the 5 neighbours
  share the query's label);
* clustering of the embeddings with k-means (K = number of classes): :func:`nmi` (CML Sec. IV-B,
  Adapt-Adv Eq. 23: ``2 I(Y; C) / (H(Y) + H(C))``), :func:`pairwise_f1` (the pairwise F-measure of
  Song et al. 2016 used by CML), :func:`cluster_accuracy` and :func:`purity` (ZSML, Xu et al. 2019,
  Sec. 5);
* :func:`mean_pairwise_cosine`: the mean cosine similarity between the sub-embeddings (learners)
  of one feature, DeML (Chen & Deng 2019) Table 4's "sim";
* :func:`retrieval_metrics`: several retrieval metrics from one neighbour search;
* :func:`evaluate`: the book's standard row for a dataset (see :data:`STANDARD_ROWS`).

Search
------
:func:`knn` is an exact k-nearest-neighbour search with two back ends: a chunked torch path (CPU
or CUDA) and a faiss ``IndexFlat`` path. Both process the queries in chunks, so memory stays at
``chunk x gallery`` similarities and never reaches a full ``n x n`` matrix.

**One search per evaluation.** :func:`retrieval_metrics` and :func:`evaluate` search the
neighbours once, as deep as the deepest requested metric needs -- the largest K of Recall@K, the
largest R of MAP@R and R-Precision (they only look at a query's first R neighbours), the k of the
kNN vote -- and read every metric from that one result, chunk by chunk. Each value equals what
the separate function (:func:`recall_at_k`, :func:`map_at_r`, ...) returns, exactly.

On the torch path a deep Recall@K (``max(ks) > 64``, e.g. SOP's R@1000) does not take a top-K:
for each query whose top-R holds no same-label item it counts the gallery items that score above
its best same-label item, which gives the rank of the first correct neighbour for every K at once.

Metric ``"cosine"`` L2-normalizes both sides and ranks by inner product (the papers' protocol);
``"euclidean"`` ranks by L2 distance; ``"dot"`` by raw inner product. All arithmetic is float32.

Conventions (documented once, tested in ``tests/test_evaluate.py``)
--------------------------------------------------------------------
* **Ties** are broken by gallery index: among gallery items with exactly the same similarity
  (distance), the one with the smaller index ranks first -- the order of a stable sort. Every back
  end and every metric uses this order, so results are deterministic.
* **Leave-one-out.** When no separate query set is given, every sample is a query and the gallery
  is all *other* samples: the query itself is excluded by index (a duplicate of it stays in the
  gallery). With ``query_embeddings``/``query_labels`` (In-Shop), queries and gallery are separate.
* **Queries that cannot be answered** -- no other gallery item shares their label (a class with
  one sample, in leave-one-out) -- are left out of every retrieval metric, with a ``UserWarning``
  saying how many. If no query can be answered, a ``ValueError`` is raised.
* **K larger than the gallery** (``n - 1`` items in leave-one-out) raises ``ValueError``.
* **Bad input** -- NaN or infinite values, empty arrays, mismatched lengths, zero vectors under the
  cosine metric -- raises ``ValueError`` naming the problem.
* All metrics are fractions in ``[0, 1]`` (the book multiplies by 100 when printing tables).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans

from zslib.engine import checks, profile
from zslib.engine.threads import one_thread

__all__ = [
    "METRICS",
    "STANDARD_ROWS",
    "Neighbors",
    "knn",
    "recall_at_k",
    "map_at_r",
    "r_precision",
    "knn_accuracy",
    "retrieval_metrics",
    "kmeans",
    "nmi",
    "pairwise_f1",
    "cluster_accuracy",
    "purity",
    "mean_pairwise_cosine",
    "evaluate",
]

METRICS = ("cosine", "euclidean", "dot")

_CLUSTER_ROW = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1")
#: The book's standard row per dataset (the columns of the papers' tables). SynthParts, the quick
#: profile's stand-in, reports the CUB row.
STANDARD_ROWS: dict[str, tuple[str, ...]] = {
    "cub200": _CLUSTER_ROW,  # CML Table II, DeML Table 1, JRD Table 1
    "cars196": _CLUSTER_ROW,
    "synthparts": _CLUSTER_ROW,
    "sop": ("R@1", "R@10", "R@100", "R@1000"),  # Stanford Online Products (Song et al. 2016)
    "inshop": ("R@1", "R@10", "R@20", "R@30", "R@40", "R@50"),  # In-Shop (Liu et al. 2016)
    "flowers102": ("R@1", "R@2", "R@4", "R@8", "kNN", "NMI"),  # Adapt-Adv Table 5
}

_EXTRA_KEYS = ("R@", "MAP@R", "RP", "kNN", "NMI", "F1", "ACC", "Purity")

# Budget for one chunk of query-by-gallery scores (float32 elements): 2**25 = 128 MiB.
_CHUNK_ELEMENTS = 2**25
# Recall@K with max(ks) above this counts ranks instead of taking a top-k (faster for large K).
_TOPK_LIMIT = 64
# Classes larger than this are found with a label mask instead of a padded index table.
_GATHER_LIMIT = 256


class Neighbors(NamedTuple):
    """Result of :func:`knn`: ``values`` (similarities for cosine/dot, Euclidean distances for
    euclidean), shape ``(n_queries, k)``, best first; ``indices`` into the gallery, int64."""

    values: torch.Tensor
    indices: torch.Tensor


# --------------------------------------------------------------------------------------------
# input checking
# --------------------------------------------------------------------------------------------
def _matrix(x, name: str) -> torch.Tensor:
    """An ``(n, d)`` float32 tensor on its own device, detached, contiguous, finite (zslib.engine.checks)."""
    return checks.features(x, name, float32=True, detach=True).contiguous()


def _encode_labels(*arrays):
    """Integer codes for label arrays, encoded jointly so equal labels get equal codes."""
    out = []
    for a in arrays:
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
        a = np.asarray(a)
        if a.ndim != 1:
            raise ValueError(f"labels must be 1-D (one label per sample); got shape {a.shape}.")
        out.append(a)
    if all(np.issubdtype(a.dtype, np.integer) for a in out):
        return [a.astype(np.int64) for a in out]
    cat = np.concatenate(out) if len(out) > 1 else out[0]
    _, codes = np.unique(cat, return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    splits = np.cumsum([len(a) for a in out])[:-1]
    return list(np.split(codes, splits))


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}; got {metric!r}.")
    return metric


def _resolve_device(device, *tensors) -> torch.device:
    if device is not None:
        return torch.device(device)
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return t.device
    return profile.device()


def _prepare(x: torch.Tensor, metric: str, name: str) -> torch.Tensor:
    """Normalize for the cosine metric (a zero row is an error there); refuse values so large
    that float32 scores would overflow under the euclidean / dot metrics."""
    if metric != "cosine":
        big = float(torch.linalg.vector_norm(x, dim=1, dtype=torch.float64).max()) ** 2
        if big > 1e37:
            raise ValueError(
                f"{name} has a squared norm of {big:.3g}; float32 scores would overflow. Rescale "
                "the embeddings (or use metric='cosine')."
            )
        return x
    norms = torch.linalg.vector_norm(x, dim=1, dtype=torch.float64).to(x.dtype)
    zero = norms == 0
    if bool(zero.any()):
        first = int(zero.nonzero()[0])
        raise ValueError(
            f"{name} has {int(zero.sum())} all-zero row(s) (first: row {first}); the cosine "
            "similarity of a zero vector is undefined. Use metric='euclidean' or fix the model."
        )
    return x / norms[:, None]


class _Problem:
    """Validated query/gallery pair shared by all retrieval metrics."""

    def __init__(self, embeddings, labels, query_embeddings, query_labels, metric, device):
        self.metric = _check_metric(metric)
        gallery = _matrix(embeddings, "embeddings")
        if (query_embeddings is None) != (query_labels is None):
            raise ValueError("pass both query_embeddings and query_labels, or neither.")
        self.loo = query_embeddings is None
        if self.loo:
            (gl,) = _encode_labels(labels)
            query, ql = gallery, gl
        else:
            query = _matrix(query_embeddings, "query_embeddings")
            checks.same_dimension(query, gallery, ("query_embeddings", "embeddings (the gallery)"))
            gl, ql = _encode_labels(labels, query_labels)
            if len(ql) != query.shape[0]:
                raise ValueError(
                    f"query_labels has {len(ql)} entries but query_embeddings has {query.shape[0]} rows."
                )
        if len(gl) != gallery.shape[0]:
            raise ValueError(f"labels has {len(gl)} entries but embeddings has {gallery.shape[0]} rows.")
        self.device = _resolve_device(device, embeddings, query_embeddings)
        self.gallery = _prepare(gallery, metric, "embeddings")
        self.query = self.gallery if self.loo else _prepare(query, metric, "query_embeddings")
        self.gl, self.ql = gl, ql
        self.n_gallery = gallery.shape[0] - (1 if self.loo else 0)  # items each query can see
        # how many gallery items share each query's label (self excluded)
        uniq, counts = np.unique(gl, return_counts=True)
        pos = np.searchsorted(uniq, ql)
        pos = np.clip(pos, 0, len(uniq) - 1)
        found = uniq[pos] == ql
        self.n_pos = np.where(found, counts[pos], 0) - (1 if self.loo else 0)

    def valid(self) -> np.ndarray:
        ok = self.n_pos > 0
        n_bad = int((~ok).sum())
        if n_bad == len(ok):
            raise ValueError(
                "no query has another gallery item with its label (every class has a single "
                "sample?), so retrieval metrics are undefined."
            )
        if n_bad:
            warnings.warn(
                f"{n_bad} of {len(ok)} queries have no other gallery item with their label (a class "
                "with one sample); they are left out of the retrieval metrics.",
                UserWarning,
                stacklevel=3,
            )
        return ok

    def check_k(self, k: int, what: str = "k"):
        if k > self.n_gallery:
            extra = " (leave-one-out: n - 1)" if self.loo else ""
            raise ValueError(
                f"{what} = {k} but each query can only see {self.n_gallery} gallery items{extra}; "
                "use a smaller K or a larger gallery."
            )


def _ks(ks) -> tuple[int, ...]:
    if isinstance(ks, (int, np.integer)):
        ks = (int(ks),)
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers; got {ks}.")
    return ks


# --------------------------------------------------------------------------------------------
# exact k-nearest-neighbour search
# --------------------------------------------------------------------------------------------
def _auto_chunk(n_gallery: int, chunk_size: int | None) -> int:
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
        return int(chunk_size)
    return max(1, _CHUNK_ELEMENTS // max(n_gallery, 1))


def _scores(qc: torch.Tensor, g: torch.Tensor, gsq, metric: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """Ranking keys, larger = nearer: q.g for cosine/dot, 2 q.g - |g|^2 for euclidean.

    ``out`` (optional, at least ``len(qc)`` rows) is reused across chunks: no fresh 128 MiB of pages
    per chunk. On the CPU the product goes through NumPy's BLAS (OpenBLAS): as fast as torch's MKL on
    one thread of this project's 2-core AMD machine, and 1.2x to 1.7x faster than it with two threads
    when other jobs share the cores; the scores are the same float32 inner products.
    """
    s = None if out is None else out[:qc.shape[0]]
    if qc.device.type == "cpu":
        s_np = np.matmul(qc.numpy(), g.numpy().T, out=None if s is None else s.numpy())
        s = torch.from_numpy(s_np) if s is None else s
    else:
        s = torch.mm(qc, g.T, out=s) if s is not None else qc @ g.T
    if metric == "euclidean":
        s.mul_(2).sub_(gsq)
    return s


def _to_values(keys: torch.Tensor, qc: torch.Tensor, metric: str) -> torch.Tensor:
    """Turn ranking keys into what :func:`knn` reports (Euclidean distances for euclidean)."""
    if metric != "euclidean":
        return keys
    qsq = (qc * qc).sum(1, keepdim=True)
    return (qsq - keys).clamp_(min=0).sqrt_()


def _order_ties(vals: torch.Tensor, idx: torch.Tensor):
    """Within rows sorted by value, put equal values in ascending index order."""
    tied = (vals[:, 1:] == vals[:, :-1]).any(1) if vals.shape[1] > 1 else torch.zeros(0, dtype=torch.bool)
    if not bool(tied.any()):
        return vals, idx
    rows = tied.nonzero().flatten()
    v, i = vals[rows], idx[rows]
    # number the runs of equal values along each row, then sort by (run, index): one int64 sort
    run = torch.zeros_like(i)
    run[:, 1:] = (v[:, 1:] != v[:, :-1]).cumsum(1)
    _, o = (run * (int(i.max()) + 1) + i).sort(dim=1)
    idx = idx.clone()
    idx[rows] = i.gather(1, o)  # the values keep their order: runs are already in place
    return vals, idx


def _topk_block(s: torch.Tensor, k: int):
    """Exact top-k of each row of ``s`` with ties broken by column index (stable order)."""
    n = s.shape[1]
    kk = min(k + 1, n)  # one extra to see whether a tie crosses the k-th position
    vals, idx = s.topk(kk, dim=1)
    if kk > k:
        straddle = vals[:, k - 1] == vals[:, k]
    else:
        straddle = torch.zeros(s.shape[0], dtype=torch.bool, device=s.device)
    vals, idx = _order_ties(vals[:, :k], idx[:, :k])
    if bool(straddle.any()):
        rows = straddle.nonzero().flatten()
        for r0 in range(0, rows.numel(), 256):  # bounded temporaries
            rr = rows[r0:r0 + 256]
            sv, so = s[rr].sort(dim=1, descending=True, stable=True)
            vals[rr], idx[rr] = sv[:, :k], so[:, :k]
    return vals, idx


def _mask_self(s: torch.Tensor, start: int):
    r = torch.arange(s.shape[0], device=s.device)
    s[r, r + start] = -math.inf


def _torch_knn_chunks(query, gallery, k, metric, exclude_self, device, chunk_size):
    g = gallery.to(device)
    gsq = (g * g).sum(1) if metric == "euclidean" else None
    same = query is gallery
    c = _auto_chunk(g.shape[0], chunk_size)
    for start in range(0, query.shape[0], c):
        qc = g[start:start + c] if same else query[start:start + c].to(device)
        s = _scores(qc, g, gsq, metric)
        if exclude_self:
            _mask_self(s, start)
        keys, idx = _topk_block(s, k)
        del s
        yield start, _to_values(keys, qc, metric).cpu(), idx.cpu()


def _search(faiss, index, queries: np.ndarray, k: int):
    """``index.search`` with as many threads as torch uses (:func:`torch.get_num_threads`, which a result's provenance
    records): faiss sums each score in blocks that depend on its thread count, so a near tie deep in a ranking
    (MAP@R reads the first R neighbours) would otherwise depend on the machine's OpenMP setting, not the run's."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(torch.get_num_threads())
    try:
        return index.search(queries, k)
    finally:
        faiss.omp_set_num_threads(before)


def _faiss_knn_chunks(query, gallery, k, metric, exclude_self, chunk_size):
    try:
        import faiss  # optional (zslib[notebook] or [full]): the CPU's fast neighbour search
    except ImportError:  # pragma: no cover - faiss is installed in the book environment
        raise ImportError(
            "backend='faiss' needs the faiss package (pip install faiss-cpu); or use backend='torch'."
        ) from None
    n, d = gallery.shape
    index = faiss.IndexFlatL2(d) if metric == "euclidean" else faiss.IndexFlatIP(d)
    for a in range(0, n, 65536):  # add in slices: no second full copy of the gallery
        index.add(np.ascontiguousarray(gallery[a:a + 65536].cpu().numpy()))
    # the index's own storage, viewed (not copied) for exact re-ranking of tied rows
    g = torch.from_numpy(faiss.rev_swig_ptr(index.get_xb(), n * d).reshape(n, d))
    gsq = (g * g).sum(1) if metric == "euclidean" else None
    same = query is gallery
    ex = 1 if exclude_self else 0
    kf = min(k + 1 + ex, n)  # +1 to detect a tie that crosses the k-th position, +1 for self
    c = chunk_size or max(4096, (2**22 // kf) // 4096 * 4096)
    for start in range(0, query.shape[0], c):
        qc = g[start:start + c] if same else query[start:start + c].cpu()
        D, I = _search(faiss, index, qc.numpy(), kf)
        D, I = torch.from_numpy(D), torch.from_numpy(I)
        keys = -D if metric == "euclidean" else D  # larger = nearer
        if ex:
            ids = torch.arange(start, start + qc.shape[0])
            if bool((I[:, 0] == ids).all()):  # the usual case: self ranks first
                keys, I = keys[:, 1:], I[:, 1:]
            else:
                keep = I != ids[:, None]
                keep[keep.all(1), -1] = False  # self not retrieved: drop the extra last column
                keys = keys[keep].view(qc.shape[0], kf - 1)
                I = I[keep].view(qc.shape[0], kf - 1)
        if keys.shape[1] > k:
            straddle = keys[:, k - 1] == keys[:, k]
        else:
            straddle = torch.zeros(qc.shape[0], dtype=torch.bool)
        keys, I = _order_ties(keys[:, :k].contiguous(), I[:, :k].contiguous())
        vals = keys.neg().clamp_(min=0).sqrt_() if metric == "euclidean" else keys
        if bool(straddle.any()):
            rows = straddle.nonzero().flatten()
            s = _scores(qc[rows], g, gsq, metric)
            if ex:
                s[torch.arange(rows.numel()), rows + start] = -math.inf
            fk, fi = _topk_block(s, k)
            vals[rows], I[rows] = _to_values(fk, qc[rows], metric), fi
        yield start, vals, I


def _pick_backend(backend: str, device: torch.device, deep: bool = False) -> str:
    """``"auto"``: torch on CUDA, and on the CPU for a ``deep`` Recall@K (``max(ks) > 64``: counting
    ranks beats faiss's top-K there, 0.55x to 0.8x the time of a k = 1000 faiss search in
    ``benchmarks/bench_eval.py``); otherwise faiss on the CPU when it is installed."""
    if backend not in ("auto", "torch", "faiss"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'faiss'; got {backend!r}.")
    if backend == "faiss" and device.type != "cpu":
        raise ValueError("backend='faiss' runs on the CPU here; use backend='torch' for CUDA.")
    if backend == "auto":
        if device.type != "cpu" or deep:
            return "torch"
        try:
            import faiss  # noqa: F401  (optional: without it, torch's search)
        except ImportError:
            return "torch"
        return "faiss"
    return backend


def knn(query, gallery=None, k: int = 1, metric: str = "cosine", *, exclude_self: bool | None = None,
        backend: str = "auto", device=None, chunk_size: int | None = None) -> Neighbors:
    """Exact k nearest neighbours of each query row in the gallery, best first.

    Args:
        query: ``(n_q, d)`` array or tensor.
        gallery: ``(n_g, d)``; ``None`` searches the queries among themselves.
        k: neighbours per query (at most the gallery size, minus one when excluding self).
        metric: ``"cosine"``, ``"euclidean"`` or ``"dot"``.
        exclude_self: drop gallery item ``i`` from query ``i``'s neighbours (leave-one-out).
            Defaults to ``True`` when ``gallery`` is ``None``. With a separate gallery it requires
            ``n_q == n_g`` (query ``i`` is gallery item ``i``).
        backend: ``"torch"`` (chunked matrix products, CPU or CUDA), ``"faiss"`` (``IndexFlat``,
            CPU) or ``"auto"`` (faiss on the CPU when it is installed, else torch).
        device: where the torch path computes; default the input's CUDA device, else
            :func:`zslib.device`.
        chunk_size: query rows per chunk (default: as many as fit 2**25 scores, 128 MiB).

    Returns:
        :class:`Neighbors` ``(values, indices)`` on the CPU: similarities (cosine/dot) or Euclidean
        distances, ``(n_q, k)``. Ties are ordered by gallery index (see the module docstring).
    """
    metric = _check_metric(metric)
    q = _matrix(query, "query")
    if exclude_self is None:
        exclude_self = gallery is None
    if gallery is None:
        g = q
    else:
        g = _matrix(gallery, "gallery")
        checks.same_dimension(q, g, ("query", "gallery"))
        if exclude_self and g.shape[0] != q.shape[0]:
            raise ValueError(
                "exclude_self=True with a separate gallery needs as many gallery rows as queries "
                f"(query i = gallery item i); got {q.shape[0]} and {g.shape[0]}."
            )
    k = int(k)
    avail = g.shape[0] - (1 if exclude_self else 0)
    if k < 1 or k > avail:
        raise ValueError(f"k = {k} must be between 1 and the {avail} gallery items available.")
    dev = _resolve_device(device, query, gallery)
    g = _prepare(g, metric, "gallery")
    q = g if gallery is None else _prepare(q, metric, "query")
    be = _pick_backend(backend, dev)
    if be == "faiss":
        chunks = _faiss_knn_chunks(q, g, k, metric, exclude_self, chunk_size)
    else:
        chunks = _torch_knn_chunks(q, g, k, metric, exclude_self, dev, chunk_size)
    vals = torch.empty(q.shape[0], k, dtype=torch.float32)
    idx = torch.empty(q.shape[0], k, dtype=torch.int64)
    for start, v, i in chunks:
        vals[start:start + v.shape[0]] = v
        idx[start:start + v.shape[0]] = i
    return Neighbors(vals, idx)


# --------------------------------------------------------------------------------------------
# retrieval metrics: one search, every metric
# --------------------------------------------------------------------------------------------
class _Want(NamedTuple):
    """What one search has to deliver. ``ks``: Recall@K cut-offs (empty: none); ``map_rp``: MAP@R
    and R-Precision; ``knn``: ``(k, min_agree)`` of kNN accuracy, or ``None``."""

    ks: tuple[int, ...] = ()
    map_rp: bool = False
    knn: tuple[int, int] | None = None


class _Depth(NamedTuple):
    kmax: int  # largest Recall@K cut-off (0: no Recall@K)
    r_max: int  # largest R of an answerable query (0: no MAP@R / R-Precision)
    k_knn: int  # k of the kNN vote (0: none)
    min_agree: int


def _per_query(p: _Problem, want: _Want, valid: np.ndarray, backend: str, chunk_size) -> dict:
    """One exact neighbour search; per query, what every requested metric needs.

    Returns numpy arrays over the queries: ``"first"`` (rank of the first same-label neighbour,
    0-based, capped at ``max(ks)``), ``"ap"`` and ``"rp"`` (MAP@R's average precision and
    R-Precision), ``"knn"`` (kNN vote correct). Rows of queries that cannot be answered are
    meaningless; callers average over ``valid``.

    The search goes as deep as the deepest metric: ``max(ks)``, the largest R of an answerable
    query (MAP@R and R-Precision only look at the first R neighbours), the k of the kNN vote.
    """
    kmax = max(want.ks, default=0)
    r_max = int(p.n_pos[valid].max()) if want.map_rp else 0
    k_knn = want.knn[0] if want.knn else 0
    nq = len(p.ql)
    out: dict[str, np.ndarray] = {}
    if want.ks:
        out["first"] = np.full(nq, kmax, dtype=np.int64)
    if want.map_rp:
        out["ap"], out["rp"] = np.zeros(nq), np.zeros(nq)
    if want.knn:
        out["knn"] = np.zeros(nq, dtype=bool)
    r_all = torch.from_numpy(np.maximum(p.n_pos, 1))  # R >= 1, so unanswerable rows stay finite
    depth = _Depth(kmax, r_max, k_knn, want.knn[1] if want.knn else 0)
    if _pick_backend(backend, p.device, deep=kmax > _TOPK_LIMIT) == "faiss":
        gl, ql = torch.from_numpy(p.gl), torch.from_numpy(p.ql)
        k = max(kmax, r_max, k_knn)
        for start, _, idx in _faiss_knn_chunks(p.query, p.gallery, k, p.metric, p.loo, chunk_size):
            m = gl[idx] == ql[start:start + idx.shape[0], None]
            _from_matches(m, start, r_all, depth, out)
    else:
        _torch_search(p, depth, r_all, chunk_size, out)
    return out


def _from_matches(m: torch.Tensor, start: int, r_all: torch.Tensor, d: _Depth, out: dict) -> None:
    """Fill ``out`` for queries ``start, start + 1, ...`` from ``m[i, j]`` = "neighbour j of query i
    shares its label" (neighbours best first, ties by gallery index, at least as many columns as the
    metrics need; Recall@K rows without a match are left to the caller when ``m`` is too short)."""
    m = m.cpu()
    sl = slice(start, start + m.shape[0])
    if "first" in out:
        width = m.shape[1]
        first = torch.where(m.any(1), m.to(torch.uint8).argmax(1), torch.full((m.shape[0],), width))
        out["first"][sl] = first.clamp_(max=d.kmax).numpy()
    if "ap" in out:
        r = r_all[sl]
        pos = torch.arange(1, d.r_max + 1)
        mr = m[:, :d.r_max] & (pos[None, :] <= r[:, None])  # only the first R neighbours count
        hits = mr.cumsum(1)
        out["ap"][sl] = ((hits.double() / pos * mr).sum(1) / r).numpy()
        out["rp"][sl] = (hits[:, -1].double() / r).numpy()
    if "knn" in out:
        out["knn"][sl] = (m[:, :d.k_knn].sum(1) >= d.min_agree).numpy()


def _positive_table(p: _Problem):
    """Padded (n_q, R_max) table of each query's same-label gallery indices (-1 = padding)."""
    order = np.argsort(p.gl, kind="stable")
    sorted_labels = p.gl[order]
    uniq, first, counts = np.unique(sorted_labels, return_index=True, return_counts=True)
    r_max = int(counts.max())
    if r_max > _GATHER_LIMIT:
        return None
    pos = np.clip(np.searchsorted(uniq, p.ql), 0, len(uniq) - 1)
    has = uniq[pos] == p.ql
    table = np.full((len(p.ql), r_max), -1, dtype=np.int64)
    cols = np.arange(r_max)
    take = has[:, None] & (cols[None, :] < counts[pos][:, None])
    src = first[pos][:, None] + cols[None, :]
    table[take] = order[np.minimum(src, len(order) - 1)][take]
    if p.loo:
        table[table == np.arange(len(p.ql))[:, None]] = -1
    return table


def _torch_search(p: _Problem, d: _Depth, r_all: torch.Tensor, chunk_size, out: dict) -> None:
    """The torch back end of :func:`_per_query`: one matrix product per chunk of queries, then

    * a top-k of depth ``k0`` = what MAP@R, R-Precision, kNN and a small ``max(ks)`` need;
    * for Recall@K deeper than that, the rank of the first same-label item by counting, only for the
      queries whose top ``k0`` holds no same-label item (all of them when ``k0 = 0``).
    """
    dev = p.device
    g = p.gallery.to(dev)
    gsq = (g * g).sum(1) if p.metric == "euclidean" else None
    gl = torch.from_numpy(p.gl).to(dev)
    ql = torch.from_numpy(p.ql).to(dev)
    k0 = max(d.r_max, d.k_knn, d.kmax if d.kmax <= _TOPK_LIMIT else 0)
    count = d.kmax > k0
    table = None
    if count:
        table = _positive_table(p)
        table = None if table is None else torch.from_numpy(table).to(dev)
    c = _auto_chunk(g.shape[0], chunk_size)
    buf = torch.empty(min(c, p.query.shape[0]), g.shape[0], device=dev)
    for start in range(0, p.query.shape[0], c):
        qc = g[start:start + c] if p.loo else p.query[start:start + c].to(dev)
        rows = qc.shape[0]
        s = _scores(qc, g, gsq, p.metric, buf)
        if p.loo:
            _mask_self(s, start)
        left = None  # queries (rows of the chunk) still without a first hit: all of them
        if k0:
            _, idx = _topk_block(s, k0)
            m = gl[idx] == ql[start:start + rows, None]
            _from_matches(m, start, r_all, d, out)
            if count:
                left = (~m.any(1)).nonzero().flatten()
                if left.numel() == 0:
                    continue
        if count:
            sub = s if left is None else s[left]
            qi = torch.arange(start, start + rows, device=dev)
            qi = qi if left is None else qi[left]
            rank = _first_rank(sub, qi, gl, ql, table, d.kmax).cpu().numpy()
            if left is None:
                out["first"][start:start + rows] = rank
            else:
                out["first"][start + left.cpu().numpy()] = rank
        del s


def _count_gt_eq(s: torch.Tensor, best: torch.Tensor):
    """Per row ``i`` of ``s``: how many entries are above ``best[i]``, and how many equal it (int64)."""
    if s.device.type != "cpu":
        return torch.gt(s, best[:, None]).sum(1), torch.eq(s, best[:, None]).sum(1)
    # On the CPU, row by row in NumPy: count_nonzero over one flat row is a vectorized popcount,
    # several times faster than a sum over an axis of a 2-D boolean array (torch's or NumPy's).
    a, b = s.numpy(), best.numpy()
    gt, eq = np.empty(len(a), dtype=np.int64), np.empty(len(a), dtype=np.int64)
    hit = np.empty(a.shape[1], dtype=bool)
    for i in range(len(a)):
        gt[i] = np.count_nonzero(np.greater(a[i], b[i], out=hit))
        eq[i] = np.count_nonzero(np.equal(a[i], b[i], out=hit))
    return torch.from_numpy(gt), torch.from_numpy(eq)


def _first_rank(s: torch.Tensor, qi: torch.Tensor, gl: torch.Tensor, ql: torch.Tensor, table, kmax: int):
    """Rank (0-based, capped at ``kmax``) of the first same-label gallery item for the queries ``qi``
    whose scores are the rows of ``s`` (the query itself already at -inf in leave-one-out).

    For a query with best same-label score ``b``, first reached at gallery index ``j``: rank =
    #{items scoring above b} + #{other-label items scoring exactly b with index below j}. Counting,
    no top-k and no sort.
    """
    qlab = ql[qi]
    if table is not None:
        t = table[qi]
        pk = s.gather(1, t.clamp(min=0)).masked_fill_(t < 0, -math.inf)
        best = pk.amax(1)
        at_best = (pk == best[:, None]) & (t >= 0)
        e_pos = at_best.sum(1)
        first_pos = torch.where(at_best, t, torch.iinfo(torch.int64).max).amin(1)
    else:  # a class too large for the padded table: a label mask
        best = torch.full((s.shape[0],), -math.inf, device=s.device)
        e_pos = torch.zeros(s.shape[0], dtype=torch.int64, device=s.device)
        first_pos = torch.zeros(s.shape[0], dtype=torch.int64, device=s.device)
        for a in range(0, s.shape[0], 256):  # bounded temporaries
            mask = gl[None, :] == qlab[a:a + 256, None]  # self is at -inf in s: it never counts
            sa = s[a:a + 256]
            b = torch.where(mask, sa, -math.inf).amax(1)
            at = mask & (sa == b[:, None])
            best[a:a + 256], e_pos[a:a + 256], first_pos[a:a + 256] = b, at.sum(1), at.to(torch.uint8).argmax(1)
    bcol = best[:, None]
    rank, n_eq = _count_gt_eq(s, best)
    found = torch.isfinite(best)
    fix = ((n_eq > e_pos) & found).nonzero().flatten()
    cols = torch.arange(s.shape[1], device=s.device)
    for a in range(0, fix.numel(), 256):  # other-label items tied with the best: those before it
        r = fix[a:a + 256]
        before = (s[r] == bcol[r]) & (gl[None, :] != qlab[r, None]) & (cols[None, :] < first_pos[r, None])
        rank[r] += before.sum(1)
    return torch.where(found, rank, torch.full_like(rank, kmax)).clamp_(max=kmax)


_RETRIEVAL_HELP = "use 'R@K' (K a positive integer), 'MAP@R', 'RP' or 'kNN'"


def retrieval_metrics(embeddings, labels, metrics: Iterable[str] = ("R@1", "MAP@R", "RP"),
                      metric: str = "cosine", query_embeddings=None, query_labels=None, device=None,
                      chunk_size: int | None = None, *, backend: str = "auto", knn_k: int = 5,
                      knn_min_agree: int | None = None) -> dict[str, float]:
    """Several retrieval metrics from ONE exact neighbour search.

    ``metrics`` names any of ``"R@K"`` (:func:`recall_at_k` at K), ``"MAP@R"`` (:func:`map_at_r`),
    ``"RP"`` (:func:`r_precision`) and ``"kNN"`` (:func:`knn_accuracy` with ``knn_k`` and
    ``knn_min_agree``). The default is the set of pytorch-metric-learning's ``AccuracyCalculator``
    (``"R@1"`` is its precision_at_1). The neighbours are searched once, as deep as the deepest
    metric needs (the largest K, the largest R, ``knn_k``), and every metric is read from that one
    result; each value equals the one the separate function returns, exactly.

    Returns ``{name: fraction in [0, 1]}`` in the order of ``metrics``. Queries, gallery, metric,
    ties and queries without a same-label gallery item: as in the module docstring.
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise ValueError(f"metrics is empty; {_RETRIEVAL_HELP}.")
    ks, map_rp, knn_ = [], False, None
    for name in names:
        if isinstance(name, str) and name.startswith("R@") and name[2:].isdigit() and int(name[2:]) >= 1:
            ks.append(int(name[2:]))
        elif name in ("MAP@R", "RP"):
            map_rp = True
        elif name == "kNN":
            knn_ = _knn_rule(knn_k, knn_min_agree)
        else:
            raise ValueError(f"unknown retrieval metric {name!r}; {_RETRIEVAL_HELP}.")
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    if ks:
        p.check_k(max(ks), "the largest K")
    if knn_:
        p.check_k(knn_[0], "knn_k")
    return _retrieval_row(p, names, _Want(tuple(sorted(set(ks))), map_rp, knn_), p.valid(), backend,
                          chunk_size)


def _retrieval_row(p: _Problem, names, want: _Want, valid, backend, chunk_size) -> dict[str, float]:
    per = _per_query(p, want, valid, backend, chunk_size)
    row = {}
    for name in names:
        if name.startswith("R@"):
            row[name] = float(np.mean(per["first"][valid] < int(name[2:])))
        elif name == "MAP@R":
            row[name] = float(per["ap"][valid].mean())
        elif name == "RP":
            row[name] = float(per["rp"][valid].mean())
        else:
            row[name] = float(per["knn"][valid].mean())
    return row


def _knn_rule(k, min_agree) -> tuple[int, int]:
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}.")
    min_agree = k // 2 + 1 if min_agree is None else int(min_agree)
    if not 1 <= min_agree <= k:
        raise ValueError(f"min_agree must be between 1 and k = {k}; got {min_agree}.")
    return k, min_agree


def recall_at_k(embeddings, labels, ks: Sequence[int] | int = (1, 2, 4, 8), metric: str = "cosine",
                query_embeddings=None, query_labels=None, device=None, chunk_size: int | None = None,
                *, backend: str = "auto") -> dict[int, float]:
    """Recall@K: the fraction of queries with at least one same-label item among their K nearest.

    Song et al. 2016's protocol, used by every paper of the book. Leave-one-out over
    ``embeddings`` unless ``query_embeddings``/``query_labels`` are given (then ``embeddings`` is
    the gallery, as for In-Shop). Returns ``{K: fraction in [0, 1]}`` in the order of ``ks``.

    Backends: ``"faiss"`` takes a ``k = max(ks)`` exact faiss search, chunked over the queries;
    ``"torch"`` (CPU or CUDA) takes a top-k for ``max(ks) <= 64`` and otherwise counts, per query,
    the items scoring above its best relative (no top-k). ``"auto"``: torch on CUDA and, on the
    CPU, for ``max(ks) > 64`` (counting is the faster search there); faiss on the CPU otherwise
    when it is installed. Same answer, same ties. Several metrics at once:
    :func:`retrieval_metrics` (one search).
    """
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    ks = _ks(ks)
    p.check_k(max(ks), "max(ks)")
    valid = p.valid()
    first = _per_query(p, _Want(ks=tuple(sorted(set(ks)))), valid, backend, chunk_size)["first"][valid]
    return {k: float(np.mean(first < k)) for k in ks}


def map_at_r(embeddings, labels, metric: str = "cosine", query_embeddings=None, query_labels=None,
             device=None, chunk_size: int | None = None, *, backend: str = "auto") -> float:
    """MAP@R of Musgrave et al. 2020 ("A Metric Learning Reality Check", Sec. 3.2).

    For a query with R same-label gallery items: ``(1/R) * sum_{i<=R} P(i) * rel(i)``, with
    ``P(i)`` the precision among the first i neighbours and ``rel(i)`` = neighbour i is correct.
    Averaged over the queries (those with R >= 1).
    """
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    return _retrieval_row(p, ["MAP@R"], _Want(map_rp=True), p.valid(), backend, chunk_size)["MAP@R"]


def r_precision(embeddings, labels, metric: str = "cosine", query_embeddings=None, query_labels=None,
                device=None, chunk_size: int | None = None, *, backend: str = "auto") -> float:
    """R-Precision (Musgrave et al. 2020): the fraction of correct items among a query's first R
    neighbours, R = number of same-label gallery items; averaged over queries with R >= 1."""
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    return _retrieval_row(p, ["RP"], _Want(map_rp=True), p.valid(), backend, chunk_size)["RP"]


def knn_accuracy(embeddings, labels, k: int = 5, min_agree: int | None = None, metric: str = "cosine",
                 query_embeddings=None, query_labels=None, device=None, chunk_size: int | None = None,
                 *, backend: str = "auto") -> float:
    """kNN accuracy as Adapt-Adv defines it (Al-Kaabi et al. 2022, Sec. 5.2).

    A query counts as correct when at least ``min_agree`` of its ``k`` nearest neighbours share its
    label; the paper uses k = 5 and 3 (the default ``min_agree`` is a strict majority,
    ``k // 2 + 1``). Averaged over queries with at least one same-label gallery item.
    """
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    rule = _knn_rule(k, min_agree)
    p.check_k(rule[0])
    return _retrieval_row(p, ["kNN"], _Want(knn=rule), p.valid(), backend, chunk_size)["kNN"]


# --------------------------------------------------------------------------------------------
# clustering metrics
# --------------------------------------------------------------------------------------------
@one_thread()
def kmeans(embeddings, n_clusters: int, metric: str = "cosine", seed: int = 0, n_init: int = 1) -> np.ndarray:
    """Cluster assignments from scikit-learn's k-means (k-means++ start, ``random_state=seed``).

    Under the cosine metric the embeddings are L2-normalized first, as the papers evaluate
    normalized features. Returns int64 cluster ids, one per sample.
    """
    metric = _check_metric(metric)
    x = _prepare(_matrix(embeddings, "embeddings"), metric, "embeddings").cpu().numpy()
    n_clusters = int(n_clusters)
    if not 1 <= n_clusters <= x.shape[0]:
        raise ValueError(f"n_clusters must be between 1 and the {x.shape[0]} samples; got {n_clusters}.")
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed)
    return km.fit_predict(x).astype(np.int64)


def _cells(labels, assignments):
    """Non-zero cells of the class-by-cluster contingency table: (class, cluster, count)."""
    y, c = _encode_labels(labels, assignments)
    if len(y) != len(c):
        raise ValueError(f"labels has {len(y)} entries but the cluster assignments have {len(c)}.")
    if len(y) == 0:
        raise ValueError("labels are empty; there is nothing to evaluate.")
    _, y = np.unique(y, return_inverse=True)
    _, c = np.unique(c, return_inverse=True)
    y, c = y.reshape(-1), c.reshape(-1)
    n_c = int(c.max()) + 1
    cell, count = np.unique(y * n_c + c, return_counts=True)
    return cell // n_c, cell % n_c, count.astype(np.float64), len(y)


def _assignments(embeddings, labels, assignments, n_clusters, metric, seed):
    if assignments is not None:
        return assignments
    if embeddings is None:
        raise ValueError("pass embeddings (to run k-means) or precomputed assignments.")
    (y,) = _encode_labels(labels)
    if len(y) != _matrix(embeddings, "embeddings").shape[0]:
        raise ValueError(f"labels has {len(y)} entries but embeddings has {len(embeddings)} rows.")
    k = len(np.unique(y)) if n_clusters is None else int(n_clusters)
    return kmeans(embeddings, k, metric=metric, seed=seed)


def _entropy(counts: np.ndarray, n: int) -> float:
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def nmi(embeddings, labels, *, assignments=None, n_clusters: int | None = None, metric: str = "cosine",
        seed: int = 0) -> float:
    """Normalized mutual information ``2 I(Y; C) / (H(Y) + H(C))`` (CML Sec. IV-B; Adapt-Adv Eq. 23).

    ``C`` is k-means on ``embeddings`` with K = number of classes (or ``n_clusters``), unless
    ``assignments`` are given (then ``embeddings`` may be ``None``). Convention: 1.0 when both Y
    and C have a single group (both entropies 0), as scikit-learn does.
    """
    a = _assignments(embeddings, labels, assignments, n_clusters, metric, seed)
    yi, ci, nij, n = _cells(labels, a)
    ny = np.bincount(yi, weights=nij)
    nc = np.bincount(ci, weights=nij)
    hy, hc = _entropy(ny, n), _entropy(nc, n)
    if hy + hc == 0:
        return 1.0
    mi = float((nij / n * (np.log(nij * n) - np.log(ny[yi] * nc[ci]))).sum())
    return float(min(max(2 * mi / (hy + hc), 0.0), 1.0))


def pairwise_f1(embeddings, labels, *, assignments=None, n_clusters: int | None = None,
                metric: str = "cosine", seed: int = 0) -> float:
    """Pairwise F-measure of a clustering (Song et al. 2016, used by CML).

    Over all sample pairs: precision = same-class pairs among same-cluster pairs, recall =
    same-cluster pairs among same-class pairs, F1 = 2PR / (P + R). Convention: 0/0 counts as 0
    (e.g. every cluster a singleton gives P = 0), so F1 = 0 when there is no positive pair.
    """
    a = _assignments(embeddings, labels, assignments, n_clusters, metric, seed)
    yi, ci, nij, _ = _cells(labels, a)

    def pairs(x):
        return float((x * (x - 1) / 2).sum())

    tp = pairs(nij)
    pred = pairs(np.bincount(ci, weights=nij))
    true = pairs(np.bincount(yi, weights=nij))
    prec = tp / pred if pred else 0.0
    rec = tp / true if true else 0.0
    return 2 * prec * rec / (prec + rec) if prec + rec else 0.0


def cluster_accuracy(embeddings, labels, *, assignments=None, n_clusters: int | None = None,
                     metric: str = "cosine", seed: int = 0) -> float:
    """Clustering accuracy (ZSML, Xu et al. 2019, Sec. 5): the best one-to-one matching of clusters
    to classes (Hungarian algorithm), as the fraction of samples it labels correctly. Clusters
    or classes left unmatched (when their numbers differ) count as errors."""
    a = _assignments(embeddings, labels, assignments, n_clusters, metric, seed)
    yi, ci, nij, n = _cells(labels, a)
    table = np.zeros((yi.max() + 1, ci.max() + 1))
    table[yi, ci] = nij
    r, c = linear_sum_assignment(table, maximize=True)
    return float(table[r, c].sum() / n)


def purity(embeddings, labels, *, assignments=None, n_clusters: int | None = None,
           metric: str = "cosine", seed: int = 0) -> float:
    """Purity (ZSML, Xu et al. 2019): each cluster votes for its majority class; the fraction of
    samples in their cluster's majority class."""
    a = _assignments(embeddings, labels, assignments, n_clusters, metric, seed)
    _, ci, nij, n = _cells(labels, a)
    best = np.zeros(ci.max() + 1)
    np.maximum.at(best, ci, nij)
    return float(best.sum() / n)


# --------------------------------------------------------------------------------------------
# diversity of sub-embeddings
# --------------------------------------------------------------------------------------------
def mean_pairwise_cosine(features, n_parts: int | None = None) -> float:
    """Mean cosine similarity between the sub-embeddings of one feature: DeML Table 4's "sim".

    ``features`` is ``(n, J, d)`` (J learners), or ``(n, J * d)`` with ``n_parts = J`` (split into
    J equal consecutive blocks, the learners' concatenation order). For every sample, the cosine of
    each of the J(J-1)/2 pairs of different sub-embeddings; the mean over pairs and samples.
    Near 1: redundant learners; near 0 or below: decorrelated ones.
    """
    if isinstance(features, torch.Tensor):
        x = features.detach().to(torch.float64)
    else:
        x = torch.as_tensor(np.asarray(features, dtype=np.float64))
    if x.ndim == 2:
        if n_parts is None:
            raise ValueError("a 2-D feature needs n_parts (the number of sub-embeddings J).")
        if n_parts < 2 or x.shape[1] % n_parts:
            raise ValueError(f"dimension {x.shape[1]} cannot be split into n_parts = {n_parts} >= 2 equal parts.")
        x = x.reshape(x.shape[0], n_parts, x.shape[1] // n_parts)
    elif x.ndim != 3:
        raise ValueError(f"features must be (n, J, d) or (n, J*d); got shape {tuple(x.shape)}.")
    n, j, d = x.shape
    if n == 0 or d == 0:
        raise ValueError("features are empty.")
    if j < 2:
        raise ValueError("need at least two sub-embeddings to compare.")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("features contain NaN or infinite values.")
    norms = torch.linalg.vector_norm(x, dim=2, keepdim=True)
    if bool((norms == 0).any()):
        raise ValueError("a sub-embedding is all zeros; its cosine similarity is undefined.")
    u = x / norms
    gram = u @ u.transpose(1, 2)  # (n, J, J)
    iu = torch.triu_indices(j, j, offset=1)
    return float(gram[:, iu[0], iu[1]].mean())


# --------------------------------------------------------------------------------------------
# the book's standard row
# --------------------------------------------------------------------------------------------
_ALIASES = {"cub": "cub200", "cub-200-2011": "cub200", "cars": "cars196", "stanford_online_products": "sop",
            "in-shop": "inshop", "in_shop": "inshop", "flowers": "flowers102", "synth": "synthparts"}


def evaluate(embeddings, labels, dataset: str = "cub200", query_embeddings=None, query_labels=None,
             seed: int = 0, *, metric: str = "cosine", extra: Iterable[str] = (), device=None,
             backend: str = "auto", chunk_size: int | None = None, leave_one_out: bool = False) -> dict[str, float]:
    """The book's standard evaluation row for ``dataset`` (keys in :data:`STANDARD_ROWS`).

    Keys (all fractions in [0, 1]):

    * ``"R@K"``: :func:`recall_at_k`, leave-one-out over ``embeddings`` (for ``"inshop"``:
      ``query_embeddings``/``query_labels`` against the gallery ``embeddings``/``labels``);
    * ``"NMI"``, ``"F1"``: :func:`nmi`, :func:`pairwise_f1` on one k-means clustering of
      ``embeddings`` with K = number of classes (``seed`` seeds k-means);
    * ``"kNN"``: :func:`knn_accuracy` with k = 5, at least 3 agreeing (Adapt-Adv);
    * optional via ``extra``: ``"MAP@R"``, ``"RP"`` (R-Precision), ``"ACC"`` (cluster accuracy),
      ``"Purity"``, or any ``"R@K"``, ``"kNN"``, ``"NMI"``, ``"F1"``.

    Rows: cub200 / cars196 / synthparts: R@1, R@2, R@4, R@8, NMI, F1 (CML, DeML, JRD); sop:
    R@1, R@10, R@100, R@1000; inshop: R@1, R@10, R@20, R@30, R@40, R@50; flowers102: R@1, R@2,
    R@4, R@8, kNN, NMI (Adapt-Adv).

    In-Shop's test split has separate queries and gallery (Liu et al. 2016); a set without them, such as the
    validation classes held out of its training split, is scored leave-one-out with the same row only when asked
    (``leave_one_out=True``), so that a test split passed without its queries is an error, not another protocol.
    """
    key = _ALIASES.get(str(dataset).strip().lower(), str(dataset).strip().lower())
    if key not in STANDARD_ROWS:
        raise ValueError(f"unknown dataset {dataset!r}; use one of {sorted(STANDARD_ROWS)}.")
    if leave_one_out and query_embeddings is not None:
        raise ValueError("leave_one_out scores every item against the others of one set: pass no query_embeddings")
    if key == "inshop" and query_embeddings is None and not leave_one_out:
        raise ValueError("In-Shop is evaluated with separate queries: pass query_embeddings and query_labels (or, "
                         "for a set without a query/gallery split such as its validation classes, leave_one_out=True).")
    cols = list(STANDARD_ROWS[key])
    for e in extra:
        if not (e.startswith("R@") and e[2:].isdigit() and int(e[2:]) >= 1) and e not in _EXTRA_KEYS:
            raise ValueError(f"unknown extra metric {e!r}; use 'R@K', 'MAP@R', 'RP', 'kNN', 'NMI', 'F1', "
                             "'ACC' or 'Purity'.")
        if e not in cols:
            cols.append(e)
    p = _Problem(embeddings, labels, query_embeddings, query_labels, metric, device)
    row: dict[str, float] = {}
    ks = [int(c[2:]) for c in cols if c.startswith("R@")]
    need_k = max(ks + ([5] if "kNN" in cols else []), default=0)
    if need_k:
        p.check_k(need_k, "the largest K of the row")
    retrieval = [c for c in cols if c.startswith("R@") or c in ("kNN", "MAP@R", "RP")]
    if retrieval:  # one neighbour search for all of them
        want = _Want(tuple(sorted(set(ks))), "MAP@R" in cols or "RP" in cols, (5, 3) if "kNN" in cols else None)
        row.update(_retrieval_row(p, retrieval, want, p.valid(), backend, chunk_size))
    cluster_cols = [c for c in cols if c in ("NMI", "F1", "ACC", "Purity")]
    if cluster_cols:
        n_classes = len(np.unique(p.gl))
        a = kmeans(embeddings, n_classes, metric=metric, seed=seed)
        fns = {"NMI": nmi, "F1": pairwise_f1, "ACC": cluster_accuracy, "Purity": purity}
        for c in cluster_cols:
            row[c] = fns[c](None, p.gl, assignments=a)
    return {c: row[c] for c in cols}
