"""The training loop: one readable function, the same for every method of the book.

Each step draws a class-balanced batch of P classes x K images (:mod:`zslib.engine.train.batches`), then runs
the method's phases in order (:class:`zslib.engine.method.Method`); each phase is

    terms = method.step_terms(phase, model, images, labels)   # named, weighted scalar terms
    zero every gradient; backward(sum of terms); clip; optimizer[phase].step()

with the phase's own optimizer (Adam over ``method.param_groups(phase, ...)``), learning-rate schedule and
gradient scaler (:mod:`zslib.engine.train.precision`: mixed precision on CUDA only, bfloat16 where the GPU has it,
float16 with loss scaling elsewhere); a phase that declares no parameters (``[]``) has none and updates
the method's state itself. Before the first step the trainer calls ``method.prepare(model, train_set)``
once, for methods that need the whole training set. The trainer logs every term, and stops with an error that
names the term as soon as one is not finite. Evaluation on named sets (typically the seen and the unseen
classes) runs every ``eval_every`` steps under saved-and-restored random states, so evaluating more or
less often never changes training. Checkpoints (:mod:`zslib.engine.train.checkpoint`) make a run killed at any
point resume to bitwise the same parameters on the CPU as a run never stopped (with the same number of
torch threads: CPU kernels sum in a thread-dependent order).

The function reads in one sitting; its parts are named helpers: :func:`_start` (the state, fresh or from a
checkpoint), :func:`_step` (the phases of one step), :func:`_log_and_evaluate` and :func:`_evaluate`, and
:func:`_checkpoint`.

Under ``torchrun`` several processes train one model together (:mod:`zslib.engine.train.distributed`): each loads
its share of every batch, the method sees the whole batch through a gathering view of the model, and
process 0 evaluates and writes the checkpoints. With one process none of that code runs.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from zslib.engine.profile import device as default_device
from zslib.engine.progress import progress_bar
from zslib.engine.train import distributed
from zslib.engine.train.batches import BatchStream, default_sampler
from zslib.engine.train.checkpoint import (CHECKPOINT_VERSION, from_safe, load_checkpoint, preserved_rng, rng_state,
                                           save_checkpoint, set_rng_state, set_seed, to_safe)
from zslib.engine.train.embed import default_eval, embed, memory_format, to_device
from zslib.engine.train.history import History
from zslib.engine.train.optim import OptimSettings, make_scheduler
from zslib.engine.train.precision import Precision
from zslib.engine.train.spec import TrainSpec
from zslib.engine.data.splits import labels_of

__all__ = ["train", "TrainSpec"]


def _as_method(method):
    from zslib.engine.method import Method, objective_method  # method.py imports this package: a cycle

    if isinstance(method, Method):
        return method
    if callable(method):  # a plain objective(model, images, labels) -> {name: term}
        return objective_method(method)
    raise TypeError(f"train() needs a zslib.engine.method.Method or an objective(model, images, labels) -> dict of "
                    f"terms, got {type(method).__name__}")


def _sum_terms(terms, step: int, phase: str, scaled: bool = False) -> tuple[torch.Tensor | None, dict[str, float]]:
    """Sum the named loss terms; stop with an error naming the first term that is not finite, unless the loss is
    ``scaled`` (float16): then the step goes on and the gradient scaler skips it (see :data:`OVERFLOW_STEPS`)."""
    if not isinstance(terms, Mapping):
        raise TypeError(
            f"phase {phase!r} must return a dict of named loss terms, e.g. {{'triplet': loss}} (an empty dict "
            f"skips the phase); got {type(terms).__name__}. Wrap a plain loss with zslib.methods.objective_method.")
    total, logged = None, {}
    for name, value in terms.items():
        if not torch.is_tensor(value) or value.numel() != 1:
            raise TypeError(f"loss term {name!r} must be a scalar tensor, got "
                            f"{type(value).__name__}{tuple(value.shape) if torch.is_tensor(value) else ''}")
        v = float(value.detach().float())
        if not math.isfinite(v) and not scaled:
            kind = "nan" if math.isnan(v) else "inf"
            raise FloatingPointError(
                f"loss term {name!r} became {kind} at step {step}; lower its weight or the learning rate"
            )
        logged[name] = v
        total = value.float() if total is None else total + value.float()
    return total, logged


#: Under float16 a step whose loss overflowed is skipped by the gradient scaler (:class:`torch.amp.GradScaler`: its
#: gradients are not finite, the optimizer does not step, the scale is halved) and logged as ``{"step": t, "skipped":
#: 1.0}``; this many such steps in a row (the scale halved from 2**16 to 2**-4) mean the run diverged, and it stops.
OVERFLOW_STEPS = 20


def _overflow_guard(logged: dict, step: int, skipped: int, lr: float) -> int:
    """The number of consecutive float16 steps whose loss was not finite, this one included; an error past
    :data:`OVERFLOW_STEPS`."""
    bad = [name for name, v in logged.items() if not math.isfinite(v)]
    if not bad:
        return 0
    if skipped + 1 >= OVERFLOW_STEPS:
        raise FloatingPointError(f"loss term {bad[0]!r} was not finite in {skipped + 1} float16 steps in a row up to "
                                 f"step {step} (each skipped by the loss scaler): the run diverged; lower the learning "
                                 f"rate (lr={lr:g}) or train in float32 (amp=False)")
    return skipped + 1


#: A parameter larger than this in absolute value means the run diverged: in the 148 quick-profile runs of the book's
#: chapters no weight or batch-norm statistic exceeded 8 in absolute value, while an Adam run at lr 1e6 passes 1e5
#: within 20 steps. The run stops before it is checkpointed or stored, as it does for a non-finite loss.
EXPLODED = 1e4


def _check_healthy(modules, step: int, lr: float) -> None:
    """Stop a run whose parameters became non-finite or exploded, with a message that names the step."""
    largest = 0.0
    for module in modules:
        for name, p in module.named_parameters():
            m = float(p.detach().abs().max()) if p.numel() else 0.0
            if not math.isfinite(m):
                raise FloatingPointError(f"parameter {name!r} became non-finite by step {step}: the run diverged; "
                                         f"lower the learning rate (lr={lr:g})")
            largest = max(largest, m)
    if largest > EXPLODED:
        raise FloatingPointError(f"the parameters exploded by step {step} (largest |weight| {largest:.3g} > "
                                 f"{EXPLODED:g}): the run diverged; lower the learning rate (lr={lr:g})")


def _check_loss_moved(history, step: int) -> None:
    """Stop a run whose total loss never changed at all: nothing was learned (a learning rate of 0, a method
    whose terms do not depend on the parameters, ...), and its numbers would only be its initialization's."""
    totals = [row["total"] for row in history.losses if "total" in row]
    if len(totals) >= 10 and len(set(totals)) == 1 and len(history.losses) == step:
        raise FloatingPointError(f"the total loss stayed exactly {totals[0]:.6g} for all {step} steps: nothing "
                                 "was trained; check the learning rate and that the method's terms depend on "
                                 "the parameters")


def _phase_groups(method, model, phase: str, settings: OptimSettings) -> list[dict] | None:
    """The phase's parameter groups, checked: every tensor trainable, owned by the model or the method
    (so checkpoints hold it), and in one group only. ``None`` when the method declares no groups at all
    (``[]``): a phase that updates the method's state itself and has no optimizer."""
    owned = {id(p) for p in model.parameters()} | {id(p) for p in method.parameters()}
    declared = list(method.param_groups(phase, model, settings))
    if not declared:
        return None
    groups, seen = [], set()
    for g in declared:
        params = list(g["params"])
        for p in params:
            if id(p) not in owned:
                raise ValueError(f"{type(method).__name__}.param_groups({phase!r}) returned a tensor that belongs "
                                 "neither to the model nor to the method; register it as a parameter of one of "
                                 "them, or checkpoints could not restore it")
            if id(p) in seen:
                raise ValueError(f"{type(method).__name__}.param_groups({phase!r}) lists a parameter twice")
            seen.add(id(p))
        params = [p for p in params if p.requires_grad]
        if params:
            groups.append({**g, "params": params})
    if not groups:
        raise ValueError(f"nothing to train in phase {phase!r}: the model and the method have no parameters "
                         "that require grad")
    return groups


def train(model: nn.Module, method, train_set, spec: TrainSpec,
          eval_sets: Mapping[str, object] | None = None) -> History:
    """Train ``model`` with ``method`` on ``train_set`` as ``spec`` says (:class:`TrainSpec`: length, batches,
    learning rates, evaluation, checkpoints, device); return the :class:`History`.

    * ``train_set``: ``ds[i] -> (image, label)`` with ``.labels``, or ``.tensors()`` for in-memory data.
    * ``method``: a :class:`zslib.engine.method.Method`, or a function ``objective(model, images, labels) ->
      {name: weighted scalar term}`` (wrapped as a one-phase method without parameters of its own).
    * ``eval_sets``: named sets evaluated during training, such as ``{"seen": ..., "unseen": ...}`` (a set may be
      a ``(queries, gallery)`` pair).
    * several processes: when a process group is initialized (``torchrun``; see
      :mod:`zslib.engine.train.distributed`), every process calls ``train`` with the same arguments; the batch
      size must be a multiple of the number of processes. The history is the same on every process; only
      process 0 evaluates, shows progress and writes the checkpoint.
    """
    run = _start(model, _as_method(method), train_set, spec, eval_sets)  # fresh, or continued from a checkpoint
    if run.step >= spec.iterations:  # a finished run: nothing to do
        return run.history
    model.train()
    run.method.train()
    if run.eval_sets and spec.eval_at_start and run.step == 0 and not run.history.evals:
        _evaluate(run)
    stop_at = spec.iterations if spec.max_steps is None else min(spec.iterations, spec.max_steps)
    bar = progress_bar(spec.progress if run.rank == 0 else False, spec.iterations, run.step)
    replicas = distributed.Replicas(model, run.method, run.device) if run.world_size > 1 else None
    net = model if replicas is None else replicas.view  # what the method computes its terms with
    cudnn_benchmark = torch.backends.cudnn.benchmark
    if run.device.type == "cuda":  # fixed image sizes: let cuDNN pick the fastest convolution algorithms once
        torch.backends.cudnn.benchmark = True
    started, elapsed0, waited, overflowed = time.perf_counter(), run.history.elapsed, run.history.data_seconds, 0
    try:
        run.stream.start(run.step)
        while run.step < stop_at:
            fetched = time.perf_counter()
            images, labels = run.stream.next()
            images = to_device(images, run.device, run.fmt)
            labels = labels.to(run.device, non_blocking=True)
            waited += time.perf_counter() - fetched
            if replicas is not None:
                labels = replicas.labels(labels)
            logged = _step(run, net, images, labels, replicas)  # every phase of the method, one optimizer step each
            overflowed = _overflow_guard(logged, run.step + 1, overflowed, spec.lr)
            logged = {"skipped": 1.0} if overflowed else {**logged, "total": float(sum(logged.values()))}
            run.step += 1
            _log_and_evaluate(run, logged, bar)
            run.history.elapsed = elapsed0 + time.perf_counter() - started
            run.history.data_seconds = waited
            if (spec.checkpoint_every and run.step % spec.checkpoint_every == 0) or run.step == stop_at:
                _check_healthy((model, run.method), run.step, spec.lr)
                if run.step == spec.iterations:
                    _check_loss_moved(run.history, run.step)
                _checkpoint(run)
            if bar is not None:
                bar.update(1)
                bar.set_postfix({k: f"{v:.4g}" for k, v in logged.items()}, refresh=False)
            for cb in spec.callbacks:
                cb(run.step, run.history)
    finally:
        run.stream.close()
        torch.backends.cudnn.benchmark = cudnn_benchmark
        if replicas is not None:
            replicas.close()
        if bar is not None:
            bar.close()
    return run.history


@dataclass
class _Run:
    """What one call of :func:`train` holds: the spec, the model and method on their device, the optimizers (one
    per phase with parameters), schedulers and gradient scalers, the batch stream, and where the run stands (its
    ``step`` and ``history``)."""

    spec: TrainSpec
    model: nn.Module
    method: object
    phases: tuple
    device: torch.device
    precision: Precision
    rank: int
    world_size: int
    eval_sets: dict
    eval_every: int | None
    eval_fn: object
    run_key: dict
    fmt: torch.memory_format = torch.contiguous_format
    optimizers: dict = field(default_factory=dict)
    schedulers: dict = field(default_factory=dict)
    scalers: dict = field(default_factory=dict)
    stream: BatchStream | None = None
    every_param: list = field(default_factory=list)
    history: History = field(default_factory=History)
    step: int = 0


def _start(model: nn.Module, method, train_set, spec: TrainSpec, eval_sets) -> _Run:
    """The run's state: seeded and fresh, or continued from its checkpoint (read into host memory, then copied to
    the device: a run resumes on any device). The method prepares (random draws leave the run's stream as it
    was); each phase with parameters gets Adam over its groups, a schedule and a gradient scaler."""
    phases = tuple(method.phases)
    if not phases or len(set(phases)) != len(phases):
        raise ValueError(f"{type(method).__name__}.phases must be distinct names, got {phases!r}")
    device = spec.device
    if device is None:
        device = default_device()
    device = torch.device(device)
    rank, world_size = distributed.world()
    run_key = {"iterations": int(spec.iterations), "seed": int(spec.seed), "batch_classes": spec.batch_classes,
               "batch_per_class": spec.batch_per_class, "phases": list(phases)}
    run = _Run(spec, model, method, phases, device, Precision(device, spec.amp), rank, world_size,
               dict(eval_sets or {}), spec.eval_every or (spec.iterations if eval_sets else spec.eval_every),
               spec.eval_fn or default_eval, run_key)
    state = None
    if spec.checkpoint_path is not None and spec.resume and Path(spec.checkpoint_path).exists():
        state = load_checkpoint(spec.checkpoint_path, map_location="cpu")  # copied to the device below
        if state["run"] != run_key:
            raise ValueError(f"checkpoint {spec.checkpoint_path} belongs to another run ({state['run']}, this one is "
                             f"{run_key}); delete it or pass resume=False")
    if state is None:
        set_seed(spec.seed)
    model.to(device)
    method.to(device)
    channels_last = spec.channels_last
    if channels_last is None:
        channels_last = any(isinstance(m, nn.Conv2d) for m in model.modules())
    if channels_last:
        model.to(memory_format=torch.channels_last)
    run.fmt = memory_format(model)
    with preserved_rng():  # whatever the method draws here leaves the run's random stream as it was
        method.prepare(model, train_set)
    settings = OptimSettings(spec.lr, spec.weight_decay, spec.new_layer_mult, spec.objective_lr)
    groups = {ph: _phase_groups(method, model, ph, settings) for ph in phases}
    run.optimizers = {ph: torch.optim.Adam(g) for ph, g in groups.items() if g is not None}  # none: a state phase
    run.schedulers = {ph: make_scheduler(opt, spec.schedule, spec.iterations) for ph, opt in run.optimizers.items()}
    run.scalers = {ph: run.precision.scaler() for ph in run.optimizers}
    sampler = spec.batch_sampler if spec.batch_sampler is not None else default_sampler(
        labels_of(train_set), spec.batch_classes, spec.batch_per_class, spec.seed)
    if state is not None:
        _restore(run, state)
    run.stream = BatchStream(train_set, sampler, seed=spec.seed, num_workers=spec.num_workers,
                             pin_memory=device.type == "cuda", state=from_safe(state["stream"]) if state else None,
                             part=(rank, world_size))
    run.every_param = [p for opt in run.optimizers.values() for g in opt.param_groups for p in g["params"]]
    return run


def _restore(run: _Run, state: dict) -> None:
    """Continue from a checkpoint read on the CPU: the tensors are copied into the model's, the method's and the
    optimizers' own (on the run's device), the random states restored from their host copies."""
    run.model.load_state_dict(state["model"])
    run.method.load_state_dict(state["method"])
    for ph in run.optimizers:
        run.optimizers[ph].load_state_dict(state["optimizers"][ph])
        if run.schedulers[ph] is not None:
            run.schedulers[ph].load_state_dict(state["schedulers"][ph])
        if state["scalers"][ph]:  # empty: saved by a run without loss scaling (float32, bfloat16)
            run.scalers[ph].load_state_dict(state["scalers"][ph])
    run.history, run.step = History.from_dict(state["history"]), int(state["step"])
    set_rng_state(state["rng"])


def _step(run: _Run, net, images, labels, replicas) -> dict[str, float]:
    """One training step: for each phase, its terms under autocast, zeroed gradients, ``backward`` of their (scaled)
    sum, optional clipping, the phase's optimizer step through its scaler; then every schedule steps. Returns the
    step's named terms."""
    logged = {}
    for ph in run.phases:
        with run.precision.autocast():
            terms = run.method.step_terms(ph, net, images, labels)
        loss, named = _sum_terms(terms, run.step + 1, ph, scaled=run.precision.scales_loss)
        clash = set(named) & set(logged)
        if clash:
            raise ValueError(f"phase {ph!r} repeats the term name(s) {sorted(clash)} of an earlier phase; "
                             "give every term of a step its own name")
        logged.update(named)
        if loss is None:  # the phase skips this step
            continue
        if ph not in run.optimizers:
            raise ValueError(f"phase {ph!r} has no parameters to update (param_groups returned []) but "
                             f"returned the terms {sorted(named)}; a state phase must return {{}}")
        optimizer, scaler = run.optimizers[ph], run.scalers[ph]
        for p in run.every_param:
            p.grad = None
        scaler.scale(loss).backward()
        if replicas is not None:
            replicas.sync_method_grads()
        if run.spec.grad_clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]],
                                           run.spec.grad_clip)
        scaler.step(optimizer)
        scaler.update()
    for scheduler in run.schedulers.values():
        if scheduler is not None:
            scheduler.step()
    return logged


def _log_and_evaluate(run: _Run, logged: dict, bar) -> None:
    """After step ``run.step``: log its terms every ``log_every`` steps (and at the last), evaluate every
    ``eval_every`` steps (at the last only if ``eval_at_end``)."""
    spec, step = run.spec, run.step
    if step % spec.log_every == 0 or step == spec.iterations:
        run.history.losses.append({"step": step, **logged})
    at_end = step == spec.iterations
    if run.eval_sets and ((step % run.eval_every == 0 and not at_end) or (at_end and spec.eval_at_end)):
        row = _evaluate(run)
        if bar is not None:
            bar.write(f"step {step}: " + "  ".join(
                f"{name} R@1 {m['R@1']:.3f}" for name, m in row.items() if name != "step" and "R@1" in m))


def _evaluate(run: _Run) -> dict:
    """Evaluate every set of ``run.eval_sets`` (a ``(queries, gallery)`` pair: queries against the gallery) under
    saved-and-restored random states, append the row to the history and return it. Process 0 evaluates; the others
    receive its row."""
    row = {"step": run.step}
    if run.rank != 0:
        row = distributed.broadcast_object(None)
        run.history.evals.append(row)
        return row
    spec = run.spec

    def emb(ds):
        return embed(run.model, ds, batch_size=spec.eval_batch_size, device=run.device, num_workers=spec.num_workers,
                     amp=spec.amp)

    with preserved_rng():
        for name, ds in run.eval_sets.items():
            if isinstance(ds, tuple):  # (queries, gallery), e.g. In-Shop
                (q, ql), (g, gl) = emb(ds[0]), emb(ds[1])
                metrics = run.eval_fn(g, gl, query_embeddings=q, query_labels=ql)
            else:
                metrics = run.eval_fn(*emb(ds))
            row[name] = {str(k): float(v) for k, v in metrics.items()}
    if run.world_size > 1:
        distributed.broadcast_object(row)
    run.history.evals.append(row)
    return row


def _checkpoint(run: _Run) -> None:
    """Write everything an exact resume needs (:mod:`zslib.engine.train.checkpoint`); process 0 only."""
    if run.spec.checkpoint_path is None or run.rank != 0:
        return
    save_checkpoint(run.spec.checkpoint_path, {
        "format": "zslib-checkpoint", "version": CHECKPOINT_VERSION, "run": run.run_key, "step": run.step,
        "model": run.model.state_dict(), "method": run.method.state_dict(),
        "optimizers": {ph: o.state_dict() for ph, o in run.optimizers.items()},
        "schedulers": {ph: s.state_dict() for ph, s in run.schedulers.items() if s is not None},
        "scalers": {ph: s.state_dict() for ph, s in run.scalers.items()},
        "stream": to_safe(run.stream.state_dict(run.step)), "rng": rng_state(),
        "history": run.history.to_dict(), "meta": to_safe(run.spec.meta or {}),
    })
