"""One run, from a :class:`~zslib.engine.config.Config` to a stored :class:`~zslib.engine.store.Result`.

:func:`run` builds what the config names -- the data (:mod:`zslib.engine.data`), the network
(:mod:`zslib.engine.models`, extended by the method's ``attach``) and the method (:data:`zslib.engine.registry.METHODS`,
which builds the metric loss) -- trains with :func:`zslib.engine.train.train`, evaluates the unseen (and
validation) classes once with :func:`zslib.engine.evaluate.evaluate`, and stores everything with its provenance
(:mod:`zslib.engine.store`). A run whose result exists is loaded, not repeated; an interrupted one resumes from
its checkpoint in ``<results>/checkpoints/``: the store decides both in one call (:func:`zslib.engine.store.lookup`).

Under ``torchrun --nproc_per_node=N`` (for example ``torchrun --nproc_per_node=2 -m zslib train ...``) every
process calls :func:`run`; it joins the process group (:func:`zslib.engine.train.distributed.setup`), lets process 0
download and cache the data and weights before the others read them, trains with
:mod:`zslib.engine.train.distributed`, and process 0 alone evaluates and writes the result, which the other
processes then read back: every process returns the same :class:`~zslib.engine.store.Result`.
"""
from __future__ import annotations

import os
import time
import warnings
from functools import partial

import numpy as np
import torch
from torch import nn

from zslib.engine.collapse import collapse_reason
from zslib.engine.config import Config
from zslib.engine.data import LabeledSubset, build_dataset, labels_of, split_classes
from zslib.engine.data.device_images import data_path, on_device
from zslib.engine.data.features import ViewDataset, view_cache
from zslib.engine.evaluate import evaluate
from zslib.engine.method import Method
from zslib.engine.models import build_model as build_net, normalization
from zslib.engine.models.adapted import entry_stage
from zslib.engine.models.registry import layout
from zslib.engine.out_of_memory import batch_memory_hint
from zslib.engine.profile import device as default_device
from zslib.engine.registry import get_method
from zslib.engine.store import (Result, check_writable, checkpoint_config, code_fingerprint, load_result, lookup,
                                provenance)
from zslib.engine.train import (History, TrainSpec, default_eval, distributed, embed, load_checkpoint, set_seed,
                                train)
from zslib.engine.train.precision import Precision

__all__ = ["build_data", "build_model", "build_method", "run", "load_model", "evaluate_checkpoint", "split_metrics",
           "scored_splits",
           "HELD_OUT_EXTRA",
           "checkpoint_config"]


def build_data(config: Config, method_cls: type[Method] | None = None) -> dict:
    """The datasets of a run, normalized for its backbone: ``train`` (augmented), ``seen`` (training
    classes, test transform), ``unseen`` (test classes; for In-Shop a ``(query, gallery)`` pair) and
    ``val`` when ``validation_fraction`` > 0. ``method_cls``: the run's method class, when the caller has
    resolved it already (:func:`run` does, once)."""
    profile = config.to_profile()
    mean, std = normalization(config.backbone)
    pooled_only = _pooled_only(config, method_cls or get_method(config.method))
    if config.train_stages:
        return _adapted_data(config)

    def build(split, train):
        return build_dataset(profile, split, train=train, mean=mean, std=std, pooled_only=pooled_only)

    train_set = build("train", True)
    # SynthParts renders its random poses into the images and adds no augmentation: reuse the set
    seen_set = train_set if config.dataset == "synthparts" else build("train", False)
    if config.dataset == "inshop":
        unseen = (build("query", False), build("gallery", False))
    else:
        unseen = build("test", False)
    out = {"train": train_set, "seen": seen_set, "unseen": unseen}
    if config.validation_fraction > 0:
        tr, va = split_classes(train_set.labels, config.validation_fraction, seed=config.seed)
        out["train"], out["seen"] = LabeledSubset(train_set, tr), LabeledSubset(seen_set, tr)
        out["val"] = LabeledSubset(seen_set, va)
    return out


def _pooled_only(config: Config, method_cls: type[Method]) -> bool:
    """On a cached-feature profile, whether the run reads only the pooled feature (its method reads no maps).
    Never in the adapted regime: its pooled feature comes from the trained stages."""
    return (bool(config.feature_stages) and not config.train_stages
            and not method_cls.reads_maps(config.method_params))


def _adapted_data(config: Config) -> dict:
    """The datasets of the adapted regime (``config.train_stages``): the two-view cache of the map that enters
    the trained stages; ``train`` draws a view per image and step, the others read the centre crop."""
    if config.dataset == "inshop":
        raise NotImplementedError("the adapted regime caches datasets with a train and a test split, not In-Shop")
    stage = entry_stage(config.backbone, config.train_stages)
    arrays, info = view_cache(config.dataset, config.backbone, stage, config.image_size, config.resize_size)
    shapes = layout(config.backbone, [stage], config.image_size)
    train_set = ViewDataset(arrays, "train", shapes, info, augment=True)
    seen_set = ViewDataset(arrays, "train", shapes, info)
    out = {"train": train_set, "seen": seen_set, "unseen": ViewDataset(arrays, "test", shapes, info)}
    if config.validation_fraction > 0:
        tr, va = split_classes(train_set.labels, config.validation_fraction, seed=config.seed)
        out["train"], out["seen"] = LabeledSubset(train_set, tr), LabeledSubset(seen_set, tr)
        out["val"] = LabeledSubset(seen_set, va)
    return out


def build_model(config: Config, method_cls: type[Method] | None = None) -> nn.Module:
    """The network of ``config``: the profile's backbone and embedding head, extended by the method."""
    method_cls = method_cls or get_method(config.method)
    net = build_net(config.backbone, config.embedding_dim, pretrained=config.pretrained,
                    weights_path=config.weights_path, normalize=config.normalize, freeze_bn=config.freeze_bn,
                    dropout=config.dropout, feature_stages=config.feature_stages, image_size=config.image_size,
                    pooled_only=_pooled_only(config, method_cls), train_stages=config.train_stages,
                    train_bn=config.train_bn, **config.backbone_params)
    return method_cls.attach(net, config.method_params)


def build_method(config: Config, model: nn.Module, classes, method_cls: type[Method] | None = None) -> Method:
    """The method of ``config`` for ``model`` and the training classes ``classes`` (their ids, sorted)."""
    method = (method_cls or get_method(config.method))(config, model, len(classes))
    method.use_classes(classes)
    return method


#: Metrics every held-out split (validation, unseen) reports beyond its dataset's standard row: MAP@R (Musgrave
#: et al. 2020, "A Metric Learning Reality Check", Sec. 3.2), which reads the whole first R neighbours of a query
#: rather than the first one, so that two methods with one Recall@1 can still be told apart.
HELD_OUT_EXTRA = ("MAP@R",)


def scored_splits(config: Config) -> tuple[str, ...]:
    """The splits a finished run is scored on: a validation run (``validation_fraction`` > 0) is made to choose a
    setting before any unseen-class number is read, so it scores ``seen`` and ``val`` only; a test run scores
    ``seen``, ``val`` (when it has one) and ``unseen``."""
    return ("seen", "val") if config.validation_fraction else ("seen", "val", "unseen")


def split_metrics(config: Config, model: nn.Module, data: dict, device, method=None, cluster_seed: int | None = None,
                  splits=None, embedded=None) -> dict[str, dict[str, float]]:
    """The final evaluation of a trained model: the full :func:`zslib.engine.evaluate.evaluate` row on the unseen (and
    validation) classes with :data:`HELD_OUT_EXTRA`, Recall@K on the seen classes, as ``{split: {metric: value}}``.

    A method with a pair evaluator (:meth:`zslib.engine.method.Method.pair_evaluator`, e.g. ZSML) scores pairs of
    the rows ``model(x)`` instead, with the same evaluator on every split. ``cluster_seed`` seeds the clustering
    (k-means; for a pair evaluator also its sample of pairs); ``None`` is the run's own choice (k-means seed 0,
    a pair evaluator the run's seed), the one a stored result was measured with. ``splits`` limits the evaluation
    to those of ``data``'s splits (each one is embedded and scored in full); by default :func:`scored_splits`, so a
    validation run stores no unseen-class metrics. ``embedded`` (split -> ``(embeddings, labels)`` of
    :func:`zslib.engine.train.embed` with this ``model``; In-Shop: ``((q, ql), (g, gl))``) gives splits already
    embedded, which are scored without embedding them again."""
    def emb(ds):
        return embed(model, ds, batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers,
                     amp=config.amp)

    def emb_split(split):
        if embedded is not None and split in embedded:
            return embedded[split]
        return (emb(data[split][0]), emb(data[split][1])) if isinstance(data[split], tuple) else emb(data[split])

    pairwise = method.pair_evaluator(model) if method is not None else None
    kmeans_seed = 0 if cluster_seed is None else int(cluster_seed)
    metrics = {}
    for split in scored_splits(config) if splits is None else splits:
        if split not in data:
            continue
        # a held-out set without a query/gallery split (In-Shop's validation classes) is scored leave-one-out
        score = default_eval if split == "seen" else partial(evaluate, dataset=config.dataset, seed=kmeans_seed,
                                                             extra=HELD_OUT_EXTRA,
                                                             leave_one_out=not isinstance(data[split], tuple))
        if pairwise is not None:
            if isinstance(data[split], tuple):
                raise NotImplementedError(f"method {config.method!r} evaluates pairs of one set; separate query "
                                          "and gallery sets (In-Shop) are not supported")
            with torch.no_grad():
                row = pairwise(*emb_split(split), seed=config.seed if cluster_seed is None else int(cluster_seed),
                               split=split)
        elif isinstance(data[split], tuple):  # In-Shop: queries against the gallery
            (q, ql), (g, gl) = emb_split(split)
            row = score(g, gl, query_embeddings=q, query_labels=ql)
        else:
            row = score(*emb_split(split))
        metrics[split] = {str(k): float(v) for k, v in row.items()}
    return metrics


def _final_metrics(config, model, data, history, device, method=None) -> dict:
    """:func:`split_metrics` of the trained model; its Recall@K values also close the history's curves (the
    trainer leaves the last evaluation to this function, so nothing is embedded twice)."""
    metrics = split_metrics(config, model, data, device, method)
    last_row = {"step": config.iterations}
    for split, row in metrics.items():
        last_row[split] = {k: v for k, v in row.items() if k.startswith("R@")}
    history.evals.append(last_row)
    return metrics


def run(config: Config, results_dir: str | os.PathLike | None = None, force: bool = False, *, progress="auto",
        device=None, checkpoint_every: int | None = None, max_steps: int | None = None) -> Result:
    """Train and evaluate ``config``, or load its stored result.

    A stored result with the same :func:`~zslib.engine.config.config_hash` is returned as is unless ``force``. An
    interrupted run resumes from its checkpoint. ``max_steps`` trains only that far (no result is written:
    call again to continue). Under ``torchrun`` see the module docstring.
    """
    if not isinstance(config, Config):
        raise TypeError(f"run() needs a zslib.engine.config.Config, got {type(config).__name__}")
    found = lookup(config, results_dir, force)  # the store's one answer: reuse, resume or start over
    if found.result is not None and not distributed.launched():
        return found.result
    if found.result is None:
        check_writable(found.directory)
    device = distributed.setup(device)  # the same device outside torchrun; one GPU per process under it
    rank, world_size = distributed.world()
    if distributed.broadcast_object(found.result is not None):  # under torchrun, process 0 decides for all
        return found.result or load_result(found.path)
    with distributed.main_first():
        if rank == 0:
            found.discard_checkpoint()
    path, ckpt, identity = found.path, found.checkpoint, found.identity

    started = time.perf_counter()
    method_cls = get_method(config.method)  # resolved once, here, and handed down
    with distributed.main_first():  # process 0 downloads and caches; the others then find the files
        data = build_data(config, method_cls)
    if "unseen" not in scored_splits(config):  # a validation run: the unseen classes are neither read nor moved
        data.pop("unseen", None)
    moved = {}
    if config.device_images:  # the same batches, cropped and normalized on the device (or the loader's: too big)
        data = on_device(data, device)
        moved = {"data_path": data_path(data)}
    classes = np.unique(np.asarray(data["train"].labels))
    set_seed(config.seed)  # model initialization and class proxies are drawn from the seed
    with distributed.main_first():
        model = build_model(config, method_cls)
    method = build_method(config, model, classes, method_cls)
    if not method.trains:  # e.g. the pretrained features: evaluate only
        if rank != 0:
            distributed.barrier()
            return load_result(path)
        history = History()
        model.to(device)
        method.to(device)
        method.prepare(model, data["train"])  # e.g. a closed-form fit on the training classes
        metrics = _final_metrics(config, model, data, history, device, method)
        result = Result(config, metrics, history, provenance(config, device, train_seconds=0.0,
                                                             wall_seconds=round(time.perf_counter() - started, 3),
                                                             data_identity=identity))
        result.save(path)
        distributed.barrier()
        return result
    # a validation run never embeds the unseen classes, not even in its intermediate evaluations (which run under
    # saved-and-restored random states: leaving a set out changes no training step)
    eval_sets = {k: data[k] for k in scored_splits(config) if k in data}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    spec = TrainSpec.from_config(
        config, eval_at_start=config.eval_every < config.iterations, eval_at_end=False, checkpoint_path=ckpt,
        checkpoint_every=checkpoint_every or config.eval_every, max_steps=max_steps, device=device, progress=progress,
        meta={"config": config.as_dict(), "code_fingerprint": code_fingerprint(),  # checked before a resume
              "data_identity": identity})
    with batch_memory_hint(config):  # an allocation failure names the batch and what to lower
        history = train(model, method, data["train"], spec, eval_sets)
    if "unseen" not in scored_splits(config):  # nor a curve of them from a checkpoint of older code
        for row in history.evals:
            row.pop("unseen", None)
    done = bool(history.losses) and history.losses[-1]["step"] >= config.iterations
    if not done:
        return Result(config, {"seen": history.last("seen")}, history, {"complete": False}, None)
    if rank != 0:  # process 0 evaluates and writes the result; the others read it
        distributed.barrier()
        return load_result(path)
    metrics = _final_metrics(config, model, data, history, device, method)
    diverged = collapse_reason(model, history, metrics, labels_of(data["seen"]),
                               {k: labels_of(data[k]) for k in ("val", "unseen") if k in data
                                and not isinstance(data[k], tuple)})
    result = Result(config, metrics, history, provenance(
        config, device, train_seconds=round(history.elapsed, 3), wall_seconds=round(time.perf_counter() - started, 3),
        checkpoint=os.path.relpath(ckpt, path.parent), precision=Precision(device, config.amp).name,
        processes=world_size, data_wait_share=round(history.data_share, 4), data_identity=identity,
        **moved, **_throughput(config, history, device)),
        diverged=diverged)
    result.save(path)
    if diverged:
        warnings.warn(f"run {config.name} diverged ({diverged}); it is stored as diverged: lower the learning "
                      f"rate (lr={config.lr:g})", stacklevel=2)
    distributed.barrier()
    return result


def _throughput(config: Config, history, device) -> dict:
    """Training images per second over the whole run (steps x batch / training wall time, intermediate
    evaluations and checkpoint writes included; a resumed run counts every session) and, on CUDA, the peak GPU
    memory of this process's training session in GiB. ``$ZS_CONCURRENT_RUNS`` (set by whoever trains several runs
    on one device at once, e.g. ``scripts/gpu_session.py``) is recorded as ``concurrent_runs``: the images per
    second are then this run's share of the device."""
    out = {}
    shared = os.environ.get("ZS_CONCURRENT_RUNS", "").strip()
    if shared.isdigit() and int(shared) > 1:
        out["concurrent_runs"] = int(shared)
    if history.elapsed > 0:
        images = config.iterations * config.batch_classes * config.batch_per_class
        out["images_per_second"] = round(images / history.elapsed, 1)
    if device.type == "cuda":
        out["gpu_peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    return out


# ----------------------------------------------------------------------------------------------------
# A stored model


def load_model(result: Result, device=None) -> nn.Module:
    """The trained network of a finished run, rebuilt from its config and checkpoint, in eval mode."""
    if not isinstance(result, Result):
        raise TypeError(f"load_model needs a zslib.engine.store.Result, got {type(result).__name__}")
    if device is None:
        device = default_device()
    method_cls = get_method(result.config.method)
    if not method_cls.trains:  # nothing was trained: the network as it comes, and its
        set_seed(result.config.seed)                     # random parts initialized as run() initialized them
        return build_model(result.config, method_cls).to(device).eval()
    ckpt = result.checkpoint
    if ckpt is None or not ckpt.is_file():
        raise FileNotFoundError(
            f"the checkpoint of run {result.config.name!r} is missing ({ckpt}); results copied without "
            "their checkpoints/ folder cannot give back the model -- run it again with force=True, or, for a "
            "recorded run with kept weights, use zslib.engine.kept_weights.kept_model")
    state = load_checkpoint(ckpt, map_location="cpu")
    checkpoint_config(ckpt, state, result.config)  # never another run's weights under this run's name
    return _model_from_state(result.config, state, device)


def _model_from_state(config: Config, state: dict, device) -> nn.Module:
    """The network of ``config`` with the weights of a training checkpoint, on ``device``, in eval mode."""
    model = build_model(config)
    model.load_state_dict(state["model"])
    return model.to(device).eval()


def evaluate_checkpoint(checkpoint: str | os.PathLike, split: str = "test", device=None,
                        config: Config | None = None) -> dict[str, float]:
    """Rebuild the model of a training checkpoint and evaluate it on ``split`` (``"test"`` = unseen
    classes, ``"train"`` = seen classes) with :func:`zslib.engine.evaluate.evaluate`."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if device is None:
        device = default_device()
    state = load_checkpoint(checkpoint, map_location="cpu")  # the model is moved to the device below
    # the checkpoint's own config, checked against its name and against ``config`` (a result's config is never
    # evaluated with another run's weights)
    config = checkpoint_config(checkpoint, state, config)
    model = _model_from_state(config, state, device)
    mean, std = normalization(config.backbone)

    def emb(name):
        ds = build_dataset(config.to_profile(), name, train=False, mean=mean, std=std)
        return embed(model, ds, batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers,
                     amp=config.amp)

    extra = HELD_OUT_EXTRA if split == "test" else ()  # the unseen row of the run's own result
    if config.dataset == "inshop" and split == "test":
        (q, ql), (g, gl) = emb("query"), emb("gallery")
        row = evaluate(g, gl, dataset=config.dataset, query_embeddings=q, query_labels=ql, extra=extra)
    else:
        row = evaluate(*emb(split), dataset=config.dataset, extra=extra, leave_one_out=True)
    return {str(k): float(v) for k, v in row.items()}
