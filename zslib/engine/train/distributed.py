"""Training on several processes (one per GPU) with DistributedDataParallel, equivalent to one process.

Start it with ``torchrun --nproc_per_node=N -m zslib train ...`` (or any script that calls
:func:`zslib.engine.runner.run` under ``torchrun``): :func:`setup` joins the process group that ``torchrun``
describes in the environment (NCCL on GPUs, gloo on the CPU) and gives process ``r`` the GPU ``cuda:r``.
The design keeps one training step *the same computation* as on one process:

1. **The batch.** Every process runs the same sampler with the same seed, so all know the global
   P x K batch; each loads and forwards only its contiguous share (:func:`zslib.engine.data.split_batch`).
2. **The loss sees the whole batch.** Metric losses compare every pair or triplet of the batch, so a
   loss over one share would be another loss. The trainer hands the method a :class:`GatheredModel`
   instead of the model: ``model(images)`` runs the DDP-wrapped network on this process's share and
   all-gathers the output, so the method computes its terms on the embeddings of the *whole* batch, with
   the whole batch's labels, exactly as on one process -- and every process computes the same terms.
3. **The gradient.** In the gathered batch only this process's slice keeps its gradient (the others are
   constants: their gradients are computed by their own processes). Backward through the gather returns
   ``world_size x`` the slice's gradient, so that DDP's *average* of the processes' gradients is their
   *sum*, the gradient of the single-process loss. This is pytorch-metric-learning's scaling, applied where
   the gather is rather than to the loss: parameters the method holds (class proxies, adversaries) see
   the gathered batch directly, get the full gradient on every process, and must not be scaled; they are
   not wrapped in DDP, and their gradients are broadcast from process 0 so that the copies cannot drift.
4. **BatchNorm** normalizes with the statistics of the whole batch, as on one process:
   ``torch.nn.SyncBatchNorm`` on CUDA, :class:`SyncedBatchNorm` (the same arithmetic through gloo) on the CPU.
   The layers are swapped in for training and the model's own layers put back afterwards.
5. **Once.** Evaluation, progress bar, checkpoints and result files are the work of process 0; the others
   receive its evaluation rows, so every process holds the same history.

Why the gather lives in a wrapper around the model (and not in a helper each method calls): a method stays
a plain function of ``model(images)`` and knows nothing of processes; the one call the trainer controls is
where the batch is split, so it is where the batch is put back together. The price is a rule: under DDP a
method computes its terms from ``model(images)`` alone (every method of the book does; one that needs
intermediate maps returns them from the model's forward, which ``Method.attach`` can arrange). Calling
other functions of the model (``model.features``) would run on this process's share only, so the wrapper
refuses them with an error that says so.

Random augmentation is the one thing that differs: process ``r > 0`` draws its own crops and flips (see
:mod:`zslib.engine.train.batches`), so with augmented data a run on N processes equals a single-process run in
distribution, not in every digit. Without augmentation (SynthParts, the real profile's cached features) it
is the same computation, up to the order of floating-point sums.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from zslib.engine.profile import device as default_device

__all__ = ["world", "setup", "launched", "main_first", "barrier", "broadcast_object", "gather_batch",
           "GatheredModel", "SyncedBatchNorm", "synced_batchnorm", "Replicas"]

#: How long a process waits for the others at a collective (process 0 may evaluate a large test set meanwhile).
TIMEOUT = datetime.timedelta(hours=2)


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of this process: ``(0, 1)`` unless a process group is initialized."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def launched() -> bool:
    """Whether this process was started by ``torchrun`` (or a launcher like it) as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def setup(device=None) -> torch.device:
    """Join the process group ``torchrun`` describes (once; nothing happens outside ``torchrun``) and return
    the device this process trains on: ``device`` (default ``zslib.device()``), with CUDA pinned to the GPU
    of this process's local rank. NCCL connects GPUs, gloo CPU processes."""
    if device is None:
        device = default_device()
    device = torch.device(device)
    if not launched():
        return device
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    if device.type == "cuda":
        device = torch.device("cuda", local if device.index is None else device.index)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=TIMEOUT)
        atexit.register(_leave)
    return device


def _leave():
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every process (nothing to wait for on one)."""
    if world()[1] > 1:
        dist.barrier()


@contextlib.contextmanager
def main_first():
    """Run the block on process 0 first, then on the others: downloads, cache builds and other work that
    writes shared files happen once, and the other processes find the files made."""
    rank, size = world()
    if size > 1 and rank != 0:
        dist.barrier()
    try:
        yield
    finally:
        if size > 1 and rank == 0:
            dist.barrier()  # also on an error: the others then fail on their own, not wait forever


def broadcast_object(obj, src: int = 0):
    """Process ``src``'s ``obj`` (any picklable value) on every process."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


# ----------------------------------------------------------------------------------------------------
# The whole batch on every process


class _GatherBatch(torch.autograd.Function):
    """Forward: the processes' tensors concatenated in rank order. Backward: only this process's slice of
    the gradient, times ``world_size`` (DDP averages the model's gradients; see the module docstring)."""

    @staticmethod
    def forward(ctx, x):
        rank, size = world()
        parts = [torch.empty_like(x, memory_format=torch.contiguous_format) for _ in range(size)]
        dist.all_gather(parts, x.contiguous())
        ctx.rank, ctx.size, ctx.n = rank, size, x.shape[0]
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.rank * ctx.n:(ctx.rank + 1) * ctx.n] * ctx.size


def gather_batch(out, n: int):
    """Every tensor of ``out`` (a tensor, or a tuple / list / dict of them) whose first dimension is the
    local batch size ``n``, gathered over the processes (:class:`_GatherBatch`); anything else unchanged."""
    if torch.is_tensor(out):
        return _GatherBatch.apply(out) if out.dim() >= 1 and out.shape[0] == n else out
    if isinstance(out, dict):
        return type(out)((k, gather_batch(v, n)) for k, v in out.items())
    if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
        return type(out)(gather_batch(v, n) for v in out)
    if isinstance(out, tuple):  # a named tuple
        return type(out)(*(gather_batch(v, n) for v in out))
    return out


class GatheredModel:
    """What a method receives as ``model`` when several processes train: ``model(images)`` runs the
    DDP-wrapped network on this process's images and returns the outputs of the whole batch
    (:func:`gather_batch`). Plain attributes (``normalize``, ``roles``, ``training``...) are the model's;
    its functions are refused (they would see this process's share only). ``module`` is the model itself."""

    def __init__(self, ddp: nn.Module, module: nn.Module):
        object.__setattr__(self, "ddp", ddp)
        object.__setattr__(self, "module", module)

    def __call__(self, images, *args, **kwargs):
        return gather_batch(self.ddp(images, *args, **kwargs), images.shape[0])

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if callable(value):
            raise AttributeError(
                f"under DistributedDataParallel a method computes its terms from model(images) alone, the call "
                f"the trainer gathers over the processes; model.{name} would see this process's share of the batch "
                "only. Return what the method needs from the model's forward (see Method.attach), or train on "
                "one process.")
        return value

    def __setattr__(self, name, value):
        raise AttributeError("the model a method receives is read-only during a step")


# ----------------------------------------------------------------------------------------------------
# BatchNorm over the whole batch


class _GatherStats(torch.autograd.Function):
    """All-gather of small statistics, differentiable: the backward sums every process's gradient with
    respect to this process's entry (an all-reduce, then this process's slice)."""

    @staticmethod
    def forward(ctx, x):
        rank, size = world()
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x.contiguous())
        ctx.rank = rank
        return torch.stack(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad[ctx.rank]


class SyncedBatchNorm(nn.BatchNorm2d):
    """BatchNorm whose training-mode statistics are those of the whole batch, over every process.

    What ``torch.nn.SyncBatchNorm`` computes, for the CPU (gloo), which it does not support. Each process
    computes the mean and the sum of squared deviations of its share per channel; the shares' statistics
    are gathered and combined (Chan et al.'s pairwise update: ``M2 = sum_r M2_r + n_r (mean_r - mean)^2``),
    and the input is normalized with the biased variance ``M2 / N``. The running statistics are updated as
    ``nn.BatchNorm2d`` does on the whole batch (unbiased variance ``M2 / (N - 1)``). Gradients flow through
    the shared statistics to every process (:class:`_GatherStats`). In eval mode, or on one process, it is
    ``nn.BatchNorm2d``. Accepts inputs of any rank >= 2 (batch, channels, ...).
    """

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected an input with a batch and a channel dimension, got {input.dim()}-D")

    @classmethod
    def like(cls, bn: nn.Module) -> "SyncedBatchNorm":
        """A synced layer sharing ``bn``'s parameters and running statistics (the same tensors)."""
        new = cls(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
        _share_state(bn, new)
        return new

    def forward(self, x):
        if not self.training or world()[1] == 1:
            return super().forward(x)
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        n = x.numel() // x.shape[1]
        mean = x.mean(dims)
        m2 = (x - mean.reshape(shape)).pow(2).sum(dims)
        stats = _GatherStats.apply(torch.stack([torch.full_like(mean, n), mean, m2]))  # (world, 3, C)
        counts, means, m2s = stats[:, 0], stats[:, 1], stats[:, 2]
        total = counts.sum(0)
        mean = (counts * means).sum(0) / total
        m2 = m2s.sum(0) + (counts * (means - mean).pow(2)).sum(0)
        var = m2 / total
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = (1.0 / float(self.num_batches_tracked)) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
                self.running_var.mul_(1 - momentum).add_((m2 / (total - 1)).detach(), alpha=momentum)
        y = (x - mean.reshape(shape)) * torch.rsqrt(var + self.eps).reshape(shape)
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y


def _share_state(old: nn.Module, new: nn.Module) -> None:
    if old.affine:
        new.weight, new.bias = old.weight, old.bias
    if old.track_running_stats:
        new.running_mean, new.running_var = old.running_mean, old.running_var
        new.num_batches_tracked = old.num_batches_tracked
    new.train(old.training)


@contextlib.contextmanager
def synced_batchnorm(model: nn.Module, device):
    """Inside the block, every BatchNorm layer of ``model`` normalizes over the whole batch of all processes
    (``torch.nn.SyncBatchNorm`` on CUDA, :class:`SyncedBatchNorm` elsewhere). The synced layers share the
    original layers' parameters and statistics (so state dicts and checkpoints are unchanged); afterwards the
    original layers are put back."""
    device = torch.device(device)
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm) and not isinstance(
                    child, (nn.SyncBatchNorm, SyncedBatchNorm)):
                if device.type == "cuda":
                    new = nn.SyncBatchNorm(child.num_features, child.eps, child.momentum, child.affine,
                                           child.track_running_stats)
                    _share_state(child, new)
                else:
                    new = SyncedBatchNorm.like(child)
                setattr(parent, name, new)
                swapped.append((parent, name, child, new))
    try:
        yield model
    finally:
        for parent, name, child, new in reversed(swapped):
            child.train(new.training)
            setattr(parent, name, child)


# ----------------------------------------------------------------------------------------------------
# What the training loop uses


class Replicas:
    """One model trained by ``world_size`` processes: what :func:`zslib.engine.train.train` needs when it is more
    than one. Use as a context manager (it swaps the BatchNorm layers in and out).

    ``view`` is what the method receives as ``model`` (:class:`GatheredModel`); :meth:`labels` gathers
    the labels of the whole batch; :meth:`sync_method_grads` broadcasts the gradients of the method's own
    parameters from process 0 after each backward.
    """

    def __init__(self, model: nn.Module, method: nn.Module, device):
        self.rank, self.size = world()
        if self.size == 1:
            raise RuntimeError("Replicas is for several processes; none is initialized (start with torchrun)")
        self.device = torch.device(device)
        self.model, self.method = model, method
        self._bn = synced_batchnorm(model, self.device)
        self._bn.__enter__()
        try:
            # find_unused_parameters: a phase may leave parts of the model out (an adversary's phase)
            self.ddp = DistributedDataParallel(
                model, device_ids=[self.device] if self.device.type == "cuda" else None,
                find_unused_parameters=True)
        except BaseException:
            self._bn.__exit__(None, None, None)
            raise
        self.view = GatheredModel(self.ddp, model)
        in_model = {id(p) for p in model.parameters()}
        self.own = [p for p in method.parameters() if id(p) not in in_model]
        with torch.no_grad():  # the method's parameters start equal on every process (DDP does the model's)
            for t in self.own + [b for b in method.buffers()]:
                dist.broadcast(t.data, 0)

    def labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The labels of the whole batch, in rank order (as :meth:`GatheredModel.__call__` gathers the outputs)."""
        parts = [torch.empty_like(labels) for _ in range(self.size)]
        dist.all_gather(parts, labels.contiguous())
        return torch.cat(parts)

    def sync_method_grads(self) -> None:
        """Process 0's gradients of the method's own parameters on every process (they are equal already when
        the arithmetic is deterministic; broadcasting keeps the copies from drifting apart where it is not)."""
        for p in self.own:
            if p.grad is not None:  # the same parameters have gradients on every process (same computation)
                dist.broadcast(p.grad, 0)

    def close(self) -> None:
        self._bn.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
