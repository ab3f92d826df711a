"""Kept weights: the trained parameters of a recorded run, small enough to commit beside its record.

A recorded run (:mod:`zslib.engine.store`) keeps its config, metrics and provenance, not its model; its training
checkpoint (optimizer state, random state, the whole network) is not committed. For the runs whose model a page
draws, ``results/recorded/weights/<run file stem>.pt`` keeps what the run *trained* and nothing else:

* the model's parameters that take gradients (:func:`kept_names`): on the real profile the embedding head and
  whatever the method attaches (attention modules, learners, a pair network), never the frozen pretrained network
  (its maps come from the feature cache, or it is rebuilt from its pretrained weights); on the quick profile the
  whole small CNN, which is trained from scratch;
* the buffers of the modules that own such a parameter (e.g. a trained batch norm's running statistics);
* stored in float16 (integer buffers as they are), with the run's name and config hash.

A kept-weights file is used only after three checks (:func:`kept_model`): its SHA-256 is the one the recorded
runs' manifest lists for it (:func:`zslib.engine.store.check_listed`), it belongs to the run (config hash), and the
model rebuilt from the run's config with these weights (cast back to float32) gives the run's recorded retrieval
metrics again on every split the run recorded, within :data:`TOLERANCE` or the wider tolerance the file states
(set when it was recorded, ``record --weights --tolerance``, for a run scored on a small sample). A figure that
draws one split uses :func:`kept_embeddings`: the same checks, with the record compared on that split alone, from
the embeddings it then draws (one pass over the split). Otherwise :class:`KeptWeightsError` says which check failed
and what to do. :func:`record_weights` makes the file: it
trains the run again in a scratch folder with its provenance's thread count, requires the retrained run to reproduce
the record, and saves it.
"""
from __future__ import annotations

import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from zslib.engine.config import Config, config_hash
from zslib.engine import runner, train as training  # called through their modules: a patch of either reaches here
from zslib.engine.store import ResultFileError, check_listed
from zslib.engine.train.checkpoint import atomic_write

__all__ = ["WEIGHTS_FOLDER", "FORMAT", "TOLERANCE", "RETRAIN_TOLERANCE", "KeptWeightsError", "weights_path",
           "has_kept_weights", "kept_names", "kept_state", "save_weights", "read_weights", "model_from_weights",
           "retrieval_gaps", "check_reproduces", "kept_model", "kept_embeddings", "record_weights"]

#: The sub-folder of the recorded runs that holds their kept weights.
WEIGHTS_FOLDER = "weights"
#: The ``"format"`` of a kept-weights file.
FORMAT = "zslib-kept-weights"
_VERSION = 1

#: The largest difference allowed between a recorded retrieval metric (a fraction, e.g. unseen Recall@1) and the one
#: the kept float16 weights give, unless the file states a wider one: 0.5 points. Measured on the real-profile runs
#: of seed 0 trained again on one thread and rounded to float16 (metrics over every image of a split, 4,696 unseen
#: queries): the triplet baseline, CML, JRD and DeML(1, 4) (0.66 to 1.3 million parameters), whose retraining gives
#: the record again, at most 0.02 points (one query) from it; Adapt-Adv (2.8 million), whose retraining is 0.34
#: points off the record (unseen kNN), no further off in float16. ZSML's metrics score a sample of 4 images per class
#: (204 queries, 0.49 points each): trained again on one thread (recorded on two) 4 queries moved (unseen R@4 -1.96
#: points), float16 moved none further, so its file states 3 points, the bound its chapter sets for a retrained run.
TOLERANCE = 0.005
#: The largest difference allowed when a run is trained again to record its weights (as the photo figures' retrained
#: runs are held to): 1 point.
RETRAIN_TOLERANCE = 0.01

# Metrics of one k-means clustering (a single start can move them with the last bit of an embedding): not compared,
# nor their variants named "<what> NMI" (e.g. ZSML's "input NMI").
_CLUSTERING = frozenset({"NMI", "F1", "ACC", "Purity"})


class KeptWeightsError(RuntimeError):
    """Kept weights that cannot be used: damaged, unlisted, another run's, or not reproducing the record."""


def weights_path(result) -> Path | None:
    """Where the kept weights of a stored run (:class:`~zslib.engine.store.Result`) are: ``weights/<file stem>.pt``
    beside its result file; ``None`` for a result that was not read from a file."""
    if result.path is None:
        return None
    return Path(result.path).parent / WEIGHTS_FOLDER / f"{Path(result.path).stem}.pt"


def has_kept_weights(result) -> bool:
    """Whether the stored run ``result`` has a kept-weights file (checked only when it is loaded)."""
    path = weights_path(result)
    return path is not None and path.is_file()


def kept_names(model: nn.Module) -> list[str]:
    """The entries of ``model.state_dict()`` a kept-weights file holds: every parameter that takes gradients, and
    the buffers of the modules that own one (in state-dict order)."""
    owners = {name for name, module in model.named_modules()
              if any(p.requires_grad for p in module.parameters(recurse=False))}
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    buffers = {f"{m}.{b}" if m else b for m, module in model.named_modules() if m in owners
               for b, _ in module.named_buffers(recurse=False)}
    return [k for k in model.state_dict() if k in trained or k in buffers]


def kept_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` of :func:`kept_names`, on the CPU, floating tensors rounded to float16."""
    state = model.state_dict()
    return {k: (state[k].detach().to("cpu", torch.float16) if state[k].is_floating_point() else
                state[k].detach().to("cpu").clone()) for k in kept_names(model)}


def save_weights(model: nn.Module, config: Config, path: str | os.PathLike, tolerance: float = TOLERANCE) -> Path:
    """Write the kept weights of ``model`` (the trained network of ``config``) to ``path`` atomically, with the
    ``tolerance`` they are checked against when loaded (:func:`kept_model`)."""
    tensors = {k: v.contiguous() for k, v in kept_state(model).items()}
    body = {"format": FORMAT, "version": _VERSION, "run": config.name, "config_hash": config_hash(config),
            "dtype": "float16", "tolerance": float(tolerance), "tensors": tensors}
    return atomic_write(Path(path), lambda f: torch.save(body, f))


def read_weights(path: str | os.PathLike, config: Config, *, listed_in: str | os.PathLike | None = None
                 ) -> dict[str, torch.Tensor]:
    """The tensors of the kept-weights file ``path`` of the run ``config``. With ``listed_in`` (the recorded runs'
    folder) the file's SHA-256 must first be the one its manifest lists (:func:`zslib.engine.store.check_listed`).
    Read safely (``weights_only=True``); a damaged file, another format, another run's weights, or a stated
    tolerance that is not a fraction raise :class:`KeptWeightsError`."""
    return _read(path, config, listed_in)["tensors"]


def _read(path, config: Config, listed_in) -> dict:
    """The checked contents of a kept-weights file (:func:`read_weights`): ``tensors``, ``tolerance``, ..."""
    path = Path(path)
    data = path.read_bytes()
    if listed_in is not None:
        try:
            check_listed(path, data, Path(listed_in))
        except ResultFileError as err:
            raise KeptWeightsError(str(err)) from None

    try:
        body = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, foreign
        raise KeptWeightsError(f"could not read the kept weights {path} ({type(err).__name__}); it is damaged or not "
                               "a zslib kept-weights file: restore it from version control, or record it again "
                               "(python -m zslib record --weights <run>.json)") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or body.get("version") != _VERSION:
        raise KeptWeightsError(f"{path} is not a zslib kept-weights file of version {_VERSION}; record it again "
                               "(python -m zslib record --weights <run>.json)")
    if body.get("config_hash") != config_hash(config):
        raise KeptWeightsError(f"{path} holds the weights of run {body.get('run')!r} ({body.get('config_hash')}), "
                               f"not of {config.name!r} ({config_hash(config)}); record this run's weights again")
    tensors = body.get("tensors")
    if not isinstance(tensors, dict) or not all(torch.is_tensor(t) for t in tensors.values()):
        raise KeptWeightsError(f"{path} holds no tensors; record it again (python -m zslib record --weights)")
    tolerance = body.get("tolerance", TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise KeptWeightsError(f"{path} states the tolerance {tolerance!r}, not a fraction; record it again")
    return {**body, "tolerance": float(tolerance)}


def model_from_weights(config: Config, tensors: dict[str, torch.Tensor], device="cpu", *, where: str = "the weights"
                       ) -> nn.Module:
    """The network of ``config`` built as :func:`zslib.engine.runner.run` builds it (same seed, so any part the run
    did not train is what it was), with ``tensors`` (:func:`kept_state`) loaded, cast to the dtype of the model's
    own entries (float32), on ``device`` in eval mode. ``tensors`` must hold exactly :func:`kept_names` with their
    shapes, else :class:`KeptWeightsError`."""
    training.set_seed(config.seed)
    model = runner.build_model(config)
    state = model.state_dict()
    want = kept_names(model)
    missing, extra = sorted(set(want) - set(tensors)), sorted(set(tensors) - set(want))
    if missing or extra:
        raise KeptWeightsError(f"{where} do not fit the network of run {config.name!r}: missing {missing[:3]}, "
                               f"unexpected {extra[:3]}; record them again with this zslib")
    for k in want:
        if tuple(tensors[k].shape) != tuple(state[k].shape):
            raise KeptWeightsError(f"{where}: {k} has shape {tuple(tensors[k].shape)}, the network of run "
                                   f"{config.name!r} {tuple(state[k].shape)}; record them again with this zslib")
    model.load_state_dict({k: tensors[k].to(state[k].dtype) for k in want}, strict=False)
    return model.to(device).eval()


def retrieval_gaps(result, model: nn.Module, device="cpu", *, splits=None, data: dict | None = None,
                   embedded=None) -> dict[tuple[str, str], tuple[float, float]]:
    """``{(split, metric): (recorded, now)}`` for every retrieval metric (not the clustering ones, which one k-means
    start moves) that the stored run ``result`` recorded on a split it scores (or on those of ``splits``), ``now``
    measured with ``model`` as the run measured it (:func:`zslib.engine.runner.split_metrics`, the method's pair
    evaluator included). ``data``: the run's datasets when the caller built them
    (:func:`zslib.engine.runner.build_data`); ``embedded``: splits the caller has embedded with ``model`` already
    (split -> ``(embeddings, labels)``)."""


    config = result.config
    splits = tuple(s for s in (runner.scored_splits(config) if splits is None else splits) if s in result.metrics)
    data = runner.build_data(config) if data is None else data
    method = runner.build_method(config, model, np.unique(np.asarray(data["train"].labels)))
    with torch.no_grad():
        now = runner.split_metrics(config, model.eval(), data, torch.device(device), method, splits=splits,
                            embedded=embedded)
    return {(s, m): (float(v), float(now.get(s, {}).get(m, float("nan"))))
            for s in splits for m, v in result.metrics[s].items() if m.split()[-1] not in _CLUSTERING}


def check_reproduces(result, model: nn.Module, device="cpu", tolerance: float = TOLERANCE, *,
                     what: str = "its kept weights", splits=None, data: dict | None = None,
                     embedded=None) -> dict[tuple[str, str], float]:
    """Require ``model`` to give the recorded retrieval metrics of ``result`` (on every split it scores, or on
    those of ``splits``) within ``tolerance`` (a fraction); returns ``{(split, metric): now - recorded}``, else
    :class:`KeptWeightsError` naming the worst metric. ``data``, ``embedded``: as :func:`retrieval_gaps`."""
    gaps = retrieval_gaps(result, model, device, splits=splits, data=data, embedded=embedded)
    diffs = {key: now - rec for key, (rec, now) in gaps.items()}
    if not diffs:
        where = "" if splits is None else f" on {', '.join(splits)}"
        raise KeptWeightsError(f"run {result.config.name!r} records no retrieval metric{where} to check {what} "
                               "against")
    (split, metric), worst = max(diffs.items(), key=lambda kv: abs(kv[1]) if kv[1] == kv[1] else float("inf"))
    if not abs(worst) <= tolerance:
        rec, now = gaps[split, metric]
        raise KeptWeightsError(f"run {result.config.name!r} with {what} gives {split} {metric} {now:.4f} against the "
                               f"recorded {rec:.4f} (tolerance {tolerance}): they do not reproduce the record, so the "
                               "model is not used; record its weights again (python -m zslib record --weights)")
    return diffs


def kept_model(result, device="cpu", tolerance: float | None = None) -> nn.Module:
    """The trained network of the stored run ``result`` from its kept weights, checked (listed in the manifest of
    its folder, its own, reproducing its recorded retrieval metrics within ``tolerance``) before it is returned, in
    eval mode. ``tolerance`` defaults to the one the file states: :data:`TOLERANCE`, unless it was recorded with a
    wider one (``record --weights --tolerance``: a run scored on a small sample, whose retraining moves a few of its
    queries). :class:`KeptWeightsError` when a check fails; ``FileNotFoundError`` when it has none."""
    model, path, tolerance = _listed_model(result, device, tolerance)
    check_reproduces(result, model, device, tolerance, what=f"the kept weights {path.name}")
    return model


def kept_embeddings(result, split: str = "unseen", device="cpu", tolerance: float | None = None
                    ) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """``(model, embeddings, labels)``: the trained network of the stored run ``result`` from its kept weights, and
    the embeddings of its ``split`` (:func:`zslib.engine.train.embed`), for a figure that draws that split. The same
    checks as :func:`kept_model` (listed in the manifest, the run's own, reproducing the record within
    ``tolerance``), except that the recorded metrics compared are those of ``split`` alone, scored from these very
    embeddings: the split is embedded once, and what is drawn is what was checked. A run that recorded no retrieval
    metric on ``split`` is refused (:class:`KeptWeightsError`)."""
    model, path, tolerance = _listed_model(result, device, tolerance)
    config = result.config
    data = runner.build_data(config)
    if split not in data or isinstance(data[split], tuple):
        raise ValueError(f"run {config.name!r} has no single {split!r} set to embed (its splits: {sorted(data)})")
    with torch.no_grad():
        emb, labels = training.embed(model, data[split], batch_size=config.eval_batch_size, device=device,
                            num_workers=config.num_workers)
    check_reproduces(result, model, device, tolerance, what=f"the kept weights {path.name}", splits=(split,),
                     data=data, embedded={split: (emb, labels)})
    return model, emb, labels


def _listed_model(result, device, tolerance: float | None) -> tuple[nn.Module, Path, float]:
    """The model of the kept weights of ``result`` once the file is listed and the run's own (not yet compared with
    the record), its path, and the tolerance to compare with (``tolerance``, else the file's)."""
    path = weights_path(result)
    if path is None or not path.is_file():
        raise FileNotFoundError(f"run {result.config.name!r} has no kept weights (looked for {path}); record them "
                                "with python -m zslib record --weights <run>.json")
    body = _read(path, result.config, Path(result.path).parent)
    model = model_from_weights(result.config, body["tensors"], device, where=f"the kept weights {path}")
    return model, path, float(body["tolerance"] if tolerance is None else tolerance)


def record_weights(result, *, scratch: str | os.PathLike | None = None, device="cpu",
                   tolerance: float = TOLERANCE, retrain_tolerance: float = RETRAIN_TOLERANCE) -> dict:
    """Make the kept weights of the stored run ``result``: train it again in ``scratch`` (a temporary folder by
    default; a folder that already holds the finished run is reused) with the thread count of its provenance,
    require its retrieval metrics to reproduce the record within ``retrain_tolerance``, save its
    :func:`kept_state` to :func:`weights_path`, then read the file back and require the float16 weights to give
    the recorded metrics within ``tolerance``. Returns ``{"path", "bytes", "seconds", "train_seconds", "threads",
    "gaps", "retrain_gaps"}``: the file, its size, the seconds spent training (or reusing) the run here, the
    training time and thread count of the run trained again (its provenance), ``{"split metric": float16 model -
    record}`` and the same for the float32 model trained again. The manifest is not rewritten here."""


    if not getattr(result, "path", None):
        raise ValueError("record_weights needs a stored result read from its file (load_result)")
    target = weights_path(result)
    threads = torch.get_num_threads()
    torch.set_num_threads(int(result.provenance.get("torch_threads", 1)))
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="zslib-weights-") as tmp:
            folder = Path(scratch) if scratch is not None else Path(tmp)
            again = runner.run(result.config, results_dir=folder, progress=False, device=torch.device(device))
            seconds = time.perf_counter() - started
            trained = runner.load_model(again, torch.device(device))
            retrained = check_reproduces(result, trained, device, retrain_tolerance, what="the weights trained again")
            save_weights(trained, result.config, target, tolerance)
    finally:
        torch.set_num_threads(threads)
    tensors = read_weights(target, result.config)
    model = model_from_weights(result.config, tensors, device, where=f"the kept weights {target}")
    try:
        gaps = check_reproduces(result, model, device, tolerance, what=f"the kept weights {target.name}")
    except KeptWeightsError:
        target.unlink()
        raise
    return {"path": target, "bytes": target.stat().st_size, "seconds": round(seconds, 1),
            "train_seconds": again.provenance.get("train_seconds"), "threads": again.provenance.get("torch_threads"),
            "gaps": {f"{s} {m}": round(g, 6) for (s, m), g in gaps.items()},
            "retrain_gaps": {f"{s} {m}": round(g, 6) for (s, m), g in retrained.items()}}

