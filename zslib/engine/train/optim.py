"""Optimizers: the learning-rate settings of a run, parameter groups, and the learning-rate schedule.

All five papers train with Adam: the pretrained backbone at ``lr``, the new layers (the embedding head)
at ``new_layer_mult * lr`` -- the papers use 10x -- and parameters a method holds (class proxies,
classifiers, adversaries) at ``method_lr``. Weight decay is Adam's L2 penalty added to the gradient
(Caffe's and ``torch.optim.Adam``'s convention, as in CML and DeML: Adam, lr 1e-5, weight decay 2e-4).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["OptimSettings", "model_groups", "own_parameters_group", "make_scheduler"]


@dataclass(frozen=True)
class OptimSettings:
    """The learning-rate settings a method turns into parameter groups (see :meth:`zslib.engine.method.Method.param_groups`)."""

    lr: float
    weight_decay: float = 0.0
    new_layer_mult: float = 10.0
    method_lr_override: float | None = None  # Config.objective_lr

    @property
    def method_lr(self) -> float:
        """The learning rate of a method's own parameters: ``objective_lr`` if set, else ``new_layer_mult * lr``."""
        return self.method_lr_override if self.method_lr_override is not None else self.lr * self.new_layer_mult


def model_groups(model: nn.Module, settings: OptimSettings) -> list[dict]:
    """The model's groups: ``model.param_groups(lr, new_layer_mult, weight_decay)`` when it defines them
    (a :class:`zslib.engine.models.EmbeddingNet`: backbone at ``lr``, everything else at ``new_layer_mult * lr``),
    else one group of all its parameters at ``lr``."""
    if hasattr(model, "param_groups"):
        groups = model.param_groups(settings.lr, new_layer_mult=settings.new_layer_mult,
                                    weight_decay=settings.weight_decay)
    else:
        groups = [{"params": model.parameters(), "lr": settings.lr, "weight_decay": settings.weight_decay}]
    return [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in groups]


def own_parameters_group(module: nn.Module, settings: OptimSettings, exclude: Iterable[torch.Tensor] = (),
                         name: str = "method") -> list[dict]:
    """One group with ``module``'s trainable parameters that are not in ``exclude``, at ``settings.method_lr``
    and without weight decay (an empty list when there are none)."""
    skip = {id(p) for p in exclude}
    params = [p for p in module.parameters() if p.requires_grad and id(p) not in skip]
    return [{"params": params, "lr": settings.method_lr, "weight_decay": 0.0, "name": name}] if params else []


def make_scheduler(optimizer, schedule, iterations: int):
    """The learning-rate schedule, stepped once per iteration; ``None`` for a constant rate.

    ``schedule`` is ``None``/``"constant"``; ``{"name": "step", "every": N, "gamma": 0.1}`` (multiply
    every group's rate by gamma every N iterations; JRD's "divide by 10 every 20 epochs");
    ``{"name": "cosine"}`` (cosine decay to 0 over the run); ``{"name": "head_first", "head_steps": N}``
    (the parameter group named ``"backbone"`` at rate 0 for the first N iterations, then at its rate; every other
    group at its rate throughout: linear probing, then fine-tuning, Kumar et al. 2022 "LP-FT"; N at least the run's
    length trains a head on the frozen network); or a callable ``optimizer ->
    torch.optim.lr_scheduler.LRScheduler``.
    """
    if schedule is None or schedule == "constant":
        return None
    if callable(schedule):
        return schedule(optimizer)
    if isinstance(schedule, str):
        schedule = {"name": schedule}
    if not isinstance(schedule, Mapping) or "name" not in schedule:
        raise ValueError(f"unknown schedule {schedule!r}; use 'constant', {{'name': 'step', 'every': N, "
                         "'gamma': 0.1}, {'name': 'cosine'}, {'name': 'head_first', 'head_steps': N} or a callable")
    kind = schedule["name"]
    if kind == "constant":
        return None
    if kind == "step":
        if "every" not in schedule:
            raise ValueError("a step schedule needs 'every' (iterations between decays), e.g. "
                             "{'name': 'step', 'every': 2000, 'gamma': 0.1}")
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=int(schedule["every"]),
                                               gamma=float(schedule.get("gamma", 0.1)))
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=iterations,
                                                          eta_min=float(schedule.get("min_lr", 0.0)))
    if kind == "head_first":
        return _head_first(optimizer, schedule)
    raise ValueError(f"unknown schedule name {kind!r}; use 'constant', 'step', 'cosine' or 'head_first'")


def _head_first(optimizer, schedule):
    """LP-FT's schedule (:func:`make_scheduler`): the ``"backbone"`` group still for ``head_steps`` iterations.
    Adam's step is proportional to the rate, so at rate 0 the backbone's weights do not change at all."""
    if "head_steps" not in schedule or int(schedule["head_steps"]) < 0:
        raise ValueError("a head_first schedule needs 'head_steps' >= 0 (iterations that train only the head), "
                         "e.g. {'name': 'head_first', 'head_steps': 50}")
    steps = int(schedule["head_steps"])
    names = [g.get("name") for g in optimizer.param_groups]
    if "backbone" not in names:
        raise ValueError("a head_first schedule needs a parameter group named 'backbone' (EmbeddingNet.param_groups)")

    def factor(is_backbone):
        return (lambda it: 0.0 if it < steps else 1.0) if is_backbone else (lambda it: 1.0)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, [factor(n == "backbone") for n in names])
