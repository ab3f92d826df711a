"""Does a stored run reproduce? The metrics of a retrained run against the stored ones.

A run trained again from its config with the same code and thread count gives the same bits on the machine
that recorded it. On another CPU the sums of the frozen network and of training run in another order, and
the last bits differ. Retrieval metrics (Recall@K, kNN accuracy) hardly notice: a query changes its answer
only when two neighbours were tied to the last bit. Clustering metrics (NMI, F1, ACC, Purity) notice a lot:
they come from one k-means start (``n_init=1``), and a different last bit can send Lloyd's iterations to
another local optimum. Measured (triplet baseline, seed 0, Flowers-102, ``real`` profile): recorded on one
machine, retrained on an AMD EPYC, every Recall@K and kNN accuracy within 0.0002 (one query of 4,696), but
the unseen NMI 0.7734 against a recorded 0.7470; k-means with seeds 0 to 5 on that one retrained embedding
gives NMI from 0.7345 to 0.7734.

Where a stored run was recorded decides how closely it must come back (:func:`reproduction_rule`): on the same
processor model, with the same thread count and torch version, a retrained run must give the stored numbers to the
last bit; elsewhere, within a tolerance the caller states and justifies (a few queries of the split for a short run,
the run's own seed spread for a long one).

So :func:`reproduction_gaps` asks two things. A retrieval metric must be close to the stored value. A
clustering metric must be close to the range the retrained embedding gives over several k-means seeds (its
gap is the distance from the stored value to that range, zero inside it). A run that trained differently
moves its embedding, and with it both its Recall@K and the whole range of its NMI.

:func:`verify_run` (``python -m zslib verify``) is what anyone can run against a recorded number: it trains the run
again and compares every metric, to the last bit on the machine the run's provenance names, within a tolerance
elsewhere (:func:`reproduction_mode`). The digests of the store catch accidents and edits by hand; only this
catches a number forged together with its digest.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import torch

from zslib.engine.runner import build_data, build_method, load_model, run, scored_splits, split_metrics
from zslib.engine.store import cpu_model

__all__ = ["CLUSTER_METRICS", "EXACT", "reproduction_gaps", "check_reproduced", "reproduction_mode",
           "reproduction_rule", "check_reproduced_here", "verify_run"]

CLUSTER_METRICS = frozenset({"NMI", "F1", "ACC", "Purity"})  # metrics of one k-means (or spectral) clustering

#: The gap allowed where a run is retrained on the machine kind that recorded it: none (float noise of the
#: metric's own arithmetic only).
EXACT = 1e-9


def reproduction_rule(stored, elsewhere: float, device: str = "cpu") -> tuple[float, str]:
    """``(tolerance, why)`` for retraining ``stored`` here with the thread count of its provenance:
    :data:`EXACT` where :func:`reproduction_mode` says this is the machine that recorded it, else ``elsewhere``, the
    caller's stated tolerance for another processor or device."""
    mode, why = reproduction_mode(stored, device)
    if mode == "exact":
        return EXACT, f"exact: {why}"
    return float(elsewhere), f"within {elsewhere:g}: {why}"

def reproduction_gaps(stored, again, device="cpu", cluster_seeds: Iterable[int] = range(5)
                      ) -> dict[tuple[str, str], float]:
    """``{(split, metric): gap}`` between a stored :class:`~zslib.engine.store.Result` and ``again``, the same config
    retrained (with its checkpoint). Retrieval metrics: the absolute difference. Clustering metrics: the
    distance from the stored value to the interval of the metric over ``again``'s own value and the
    clusterings of its model with ``cluster_seeds`` (:func:`zslib.engine.runner.split_metrics`)."""
    if stored.config.name != again.config.name:
        raise ValueError(f"these are two different runs: {stored.config.name!r} and {again.config.name!r}")
    scored = set(scored_splits(stored.config))  # a validation run recorded before it stopped scoring unseen classes
    stored_metrics = {s: row for s, row in stored.metrics.items() if s in scored}
    missing = [(s, m) for s, row in stored_metrics.items() for m in row if m not in again.metrics.get(s, {})]
    if missing:
        raise ValueError(f"the retrained run has no value for {missing}; was it trained with other code?")
    gaps = {(s, m): abs(again.metrics[s][m] - v) for s, row in stored_metrics.items() for m, v in row.items()
            if m not in CLUSTER_METRICS}
    clustered = [(s, m) for s, row in stored_metrics.items() for m in row if m in CLUSTER_METRICS]
    if not clustered:
        return gaps
    config = again.config
    data = build_data(config)
    model = load_model(again, device)
    method = build_method(config, model, np.unique(np.asarray(data["train"].labels)))
    method.to(device)
    values = {key: [again.metrics[key[0]][key[1]]] for key in clustered}
    splits = tuple(dict.fromkeys(s for s, _ in clustered))  # only the splits with a clustering metric
    with torch.no_grad():
        for seed in cluster_seeds:
            rows = split_metrics(config, model, data, device, method, cluster_seed=seed, splits=splits)
            for s, m in clustered:
                values[s, m].append(rows[s][m])
    for (s, m), vs in values.items():
        v = stored.metrics[s][m]
        gaps[s, m] = max(0.0, min(vs) - v, v - max(vs))
    return gaps


def check_reproduced(stored, again, tolerance: float = 0.01, device="cpu") -> float:
    """The largest of :func:`reproduction_gaps`; ``RuntimeError`` naming the metric when it exceeds
    ``tolerance`` (the stored run does not reproduce: what was measured on it is not about this model)."""
    gaps = reproduction_gaps(stored, again, device)
    if not gaps:
        return 0.0
    (split, name), worst = max(gaps.items(), key=lambda kv: kv[1])
    if worst > tolerance:
        kind = "outside the range of k-means seeds by" if name in CLUSTER_METRICS else "off by"
        raise RuntimeError(f"{stored.config.name} does not reproduce: {split} {name} recorded "
                           f"{stored.metrics[split][name]:.4f}, retrained {again.metrics[split][name]:.4f}, "
                           f"{kind} {worst:.4f} (tolerance {tolerance}). Was the run recorded with other code? "
                           f"Compare its provenance (git_commit, code_fingerprint) with this checkout.")
    return worst


def check_reproduced_here(stored, again, elsewhere: float, device="cpu") -> tuple[float, str]:
    """:func:`check_reproduced` at the tolerance of :func:`reproduction_rule`: ``(largest gap, the rule applied)``.
    On the recording machine every metric of every scored split must match to :data:`EXACT` (clustering metrics
    too: the same bits give the same k-means); elsewhere clustering metrics are judged by the k-means range."""
    tolerance, why = reproduction_rule(stored, elsewhere)
    if tolerance > EXACT:
        return check_reproduced(stored, again, tolerance, device), why
    worst = 0.0
    scored = set(scored_splits(stored.config))  # a validation run recorded before it stopped scoring unseen classes
    for split, row in stored.metrics.items():
        for name, value in row.items():
            if split not in scored:
                continue
            if name not in again.metrics.get(split, {}):
                raise ValueError(f"the retrained run has no {split} {name}; was it trained with other code?")
            gap = abs(again.metrics[split][name] - value)
            if gap > tolerance:
                raise RuntimeError(f"{stored.config.name} does not reproduce on the processor that recorded it: "
                                   f"{split} {name} recorded {value!r}, retrained {again.metrics[split][name]!r}. "
                                   "Was it recorded with other code? Compare its provenance (git_commit, "
                                   "code_fingerprint) with this checkout.")
            worst = max(worst, gap)
    return worst, why


def reproduction_mode(stored, device: str = "cpu") -> tuple[str, str]:
    """How closely a run trained again here must match ``stored``: ``("exact", why)`` (every metric to the last bit)
    when this is the machine its provenance names (a CPU run, the same CPU model: the same code, seed and thread
    count then give the same bits), else ``("tolerance", why)`` (:func:`reproduction_gaps`)."""
    recorded_device = str(stored.provenance.get("device", ""))
    recorded_cpu = stored.provenance.get("cpu")
    if not recorded_device.startswith("cpu") or str(device) != "cpu":
        return "tolerance", f"recorded on {recorded_device or 'an unnamed device'}, trained again on {device}"
    if not recorded_cpu:
        return "tolerance", "its provenance does not name the CPU it was recorded on"
    if recorded_cpu != cpu_model():
        return "tolerance", f"recorded on {recorded_cpu}, trained again on {cpu_model() or 'an unnamed CPU'}"
    recorded_omp = stored.provenance.get("omp_num_threads")
    if "omp_num_threads" in stored.provenance and recorded_omp != os.environ.get("OMP_NUM_THREADS"):
        return "tolerance", (f"recorded in a process started with OMP_NUM_THREADS={recorded_omp}, trained again with "
                             f"{os.environ.get('OMP_NUM_THREADS')} (oneDNN picks its kernels by it)")
    recorded_torch = stored.provenance.get("torch_version")
    if recorded_torch and recorded_torch != torch.__version__:
        return "tolerance", f"recorded with torch {recorded_torch}, trained again with {torch.__version__}"
    return "exact", f"on the CPU it was recorded on, {recorded_cpu}"


def verify_run(stored, scratch, tolerance: float = 0.01, device: str = "cpu") -> dict:
    """Train the recorded run ``stored`` again from its config in the folder ``scratch`` (its data hashed again,
    with the thread count of its provenance) and compare every metric: exactly, or within ``tolerance`` where
    :func:`reproduction_mode` says the machine differs. Returns ``{"run", "mode", "why", "ok", "worst", "message"}``:
    ``worst`` is ``(split, metric, recorded, again, gap)`` of the largest difference, ``message`` one line."""
    mode, why = reproduction_mode(stored, device)
    threads = torch.get_num_threads()
    torch.set_num_threads(int(stored.provenance.get("torch_threads") or 1))
    try:
        again = run(stored.config, results_dir=scratch, force=True, progress=False, device=device)
    finally:
        torch.set_num_threads(threads)
    name = stored.path.name if getattr(stored, "path", None) else stored.config.name
    if stored.status != again.status:
        return {"run": name, "mode": mode, "why": why, "ok": False, "worst": None,
                "message": f"{name}: recorded {stored.status}, trained again {again.status}"}
    if mode == "exact":
        scored = set(scored_splits(stored.config))
        gaps = {(s, m): abs(again.metrics.get(s, {}).get(m, float("nan")) - v)
                for s, row in stored.metrics.items() if s in scored for m, v in row.items()}
        gaps = {k: (float("inf") if g != g else g) for k, g in gaps.items()}
        allowed = 0.0
    else:
        gaps, allowed = reproduction_gaps(stored, again, device), tolerance
    if not gaps:
        return {"run": name, "mode": mode, "why": why, "ok": True, "worst": None, "message": f"{name}: no metric"}
    (split, metric), gap = max(gaps.items(), key=lambda kv: kv[1])
    recorded, retrained = stored.metrics[split][metric], again.metrics.get(split, {}).get(metric, float("nan"))
    ok = gap <= allowed
    verdict = "reproduces" if ok else "does NOT reproduce"
    bound = "exactly" if mode == "exact" else f"within {tolerance}"
    found = (f"all {len(gaps)} metrics equal to the last bit" if gap == 0 else
             f"largest difference {split} {metric}: recorded {recorded:.6g}, trained again {retrained:.6g}")
    return {"run": name, "mode": mode, "why": why, "ok": ok, "worst": (split, metric, recorded, retrained, gap),
            "message": f"{name}: {verdict} {bound} ({why}); {found}"}
