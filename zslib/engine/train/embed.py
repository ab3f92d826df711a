"""Embeddings of a dataset, the default evaluation during training, and the memory layout of image batches."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from zslib.engine.evaluate import recall_at_k
from zslib.engine.train.batches import in_memory, loader_workers
from zslib.engine.train.precision import Precision

__all__ = ["embed", "default_eval", "memory_format", "to_device"]


def memory_format(model: nn.Module) -> torch.memory_format:
    """``torch.channels_last`` when the model's 2-D convolutions store their weights that way (see
    :func:`train`), else ``torch.contiguous_format``: the layout its image batches should have."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            last = m.weight.is_contiguous(memory_format=torch.channels_last)
            if last != m.weight.is_contiguous():  # a 1x1 kernel on one channel is both: undecided
                return torch.channels_last if last else torch.contiguous_format
    return torch.contiguous_format


def to_device(x: torch.Tensor, device, fmt: torch.memory_format) -> torch.Tensor:
    """``x`` on ``device``; a 4-D image batch also in the memory layout ``fmt``."""
    if x.dim() == 4 and fmt is torch.channels_last:
        return x.to(device, non_blocking=True, memory_format=fmt)
    return x.to(device, non_blocking=True)


@torch.no_grad()
def embed(model: nn.Module, dataset, batch_size: int = 256, device=None, num_workers: int = 0,
          amp: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings of every image of ``dataset``, in order, with the model in eval mode.

    Returns ``(embeddings, labels)``: a float32 CPU tensor ``(n, d)`` and an int64 CPU tensor ``(n,)``.
    The model's train/eval mode is restored afterwards. The forward passes run in the run's arithmetic
    (:class:`~zslib.engine.train.precision.Precision` of ``device`` and ``amp``: autocast on CUDA unless ``amp`` is
    false, float32 on the CPU, where nothing changes).
    """
    if device is None:
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
    device = torch.device(device)
    was_training = model.training
    model.eval()
    fmt = memory_format(model)
    precision = Precision(device, amp)
    try:
        outs, labs = [], []
        in_memory_data = in_memory(dataset)
        if in_memory_data is not None:
            images, labels = in_memory_data
            for i in range(0, len(images), batch_size):
                with precision.autocast():
                    out = model(to_device(images[i:i + batch_size], device, fmt))
                outs.append(out.float().cpu())
            labs = [torch.as_tensor(np.asarray(labels), dtype=torch.long)]
        else:
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                                 num_workers=loader_workers(num_workers),
                                                 pin_memory=device.type == "cuda")
            for images, labels in loader:
                with precision.autocast():
                    out = model(to_device(images, device, fmt))
                outs.append(out.float().cpu())
                labs.append(torch.as_tensor(labels, dtype=torch.long))
        if not outs:
            raise ValueError(f"cannot embed an empty dataset ({type(dataset).__name__} has no images)")
        return torch.cat(outs), torch.cat(labs)
    finally:
        model.train(was_training)


def default_eval(embeddings: torch.Tensor, labels: torch.Tensor, query_embeddings=None,
                 query_labels=None) -> dict[str, float]:
    """Recall@1, 2, 4, 8 (cosine) -- the curves of CML Fig. 3 and DeML Fig. 5. Leave-one-out over
    ``embeddings``, or ``query_embeddings`` against the gallery ``embeddings`` (In-Shop)."""
    n = len(labels) if query_embeddings is not None else len(labels) - 1
    ks = tuple(k for k in (1, 2, 4, 8) if k <= n) or (1,)
    rec = recall_at_k(embeddings, labels, ks=ks, query_embeddings=query_embeddings, query_labels=query_labels)
    return {f"R@{k}": float(v) for k, v in rec.items()}
