"""What one call of the training loop needs besides the model, the method and the data: :class:`TrainSpec`.

A run's :class:`~zslib.engine.config.Config` holds what its result depends on; the part of it that the loop reads
(the length, the batches, the learning rates, precision and loading: :class:`~zslib.engine.fields.TrainFields`, which
both inherit, and the seed) is copied by :meth:`TrainSpec.from_config`, and the rest (evaluation, checkpoints,
progress, the device) is how this call trains, not what it trains.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zslib.engine.fields import TrainFields, names

__all__ = ["TrainSpec"]


#: The values of the training fields a spec leaves out (the others stay ``None``: see :class:`TrainSpec`).
_LOOP_DEFAULTS = {"weight_decay": 0.0, "new_layer_mult": 10.0, "eval_batch_size": 256, "num_workers": 0}


@dataclass(frozen=True, kw_only=True)
class TrainSpec(TrainFields):
    """How :func:`zslib.engine.train.train` trains, by purpose:

    * length and batches: ``iterations`` steps; P x K batches of ``batch_classes`` x ``batch_per_class``
      (:class:`zslib.engine.data.ClassBalancedSampler`), or any ``batch_sampler`` (an iterable of index lists with
      ``state_dict``/``load_state_dict``);
    * optimizers: Adam per phase over ``method.param_groups(phase, model, settings)``, where the settings are
      ``lr`` (the backbone), ``new_layer_mult * lr`` (new layers), ``objective_lr`` (the method's own parameters;
      default ``new_layer_mult * lr``) and ``weight_decay``; ``schedule`` as in
      :func:`zslib.engine.train.make_scheduler`, one per phase, stepped once per iteration; optional ``grad_clip``;
    * evaluation of the ``eval_sets`` given to ``train`` every ``eval_every`` steps (default: at the end only), at
      step 0 when ``eval_at_start``, at the end unless ``eval_at_end`` is false (the caller then evaluates the final
      model itself), with ``eval_fn(embeddings, labels) -> dict`` (default: Recall@1/2/4/8) in batches of
      ``eval_batch_size``; a set given as ``(queries, gallery)`` is evaluated as ``eval_fn(gallery_emb,
      gallery_labels, query_embeddings=..., query_labels=...)``;
    * checkpoints: ``checkpoint_path`` written every ``checkpoint_every`` steps and at the end (or at
      ``max_steps``); with ``resume`` an existing checkpoint is continued exactly; ``meta`` is stored in it.
      ``max_steps``: stop (after checkpointing) once this many steps are done, keeping the schedule of
      ``iterations``; ``callbacks``: ``cb(step, history)`` after each step (a callback may raise to stop);
      ``log_every``: the losses are logged every this many steps;
    * ``seed``; ``device`` (default ``zslib.device()``); ``amp`` (default on for CUDA, never on the CPU;
      :class:`~zslib.engine.train.precision.Precision` picks bfloat16 or float16); ``num_workers`` data-loading
      processes; ``channels_last`` (default: when the model has 2-D convolutions) weights and image batches in NHWC
      order; ``progress``: see :func:`zslib.engine.progress.progress_bar`.
    """

    batch_sampler: object = None
    grad_clip: float | None = None
    eval_at_start: bool = True
    eval_at_end: bool = True
    eval_fn: Callable | None = None
    checkpoint_path: str | os.PathLike | None = None
    checkpoint_every: int | None = None
    resume: bool = True
    meta: dict | None = None
    max_steps: int | None = None
    callbacks: Iterable[Callable] = ()
    log_every: int = 1
    seed: int = 0
    device: object = None
    channels_last: bool | None = None
    progress: object = "auto"

    def __post_init__(self):
        for key, default in _LOOP_DEFAULTS.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, default)
        if self.iterations is None:
            raise ValueError("give iterations, the number of training steps")
        if self.iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {self.iterations}")
        if self.log_every < 1:
            raise ValueError(f"log_every must be at least 1, got {self.log_every}")
        if self.lr is None:
            raise ValueError("give lr, the backbone's learning rate")
        object.__setattr__(self, "callbacks", tuple(self.callbacks))

    @classmethod
    def from_config(cls, config, **changes) -> "TrainSpec":
        """The spec of a run's ``config`` (every field of the config whose name is a field of the spec: those of
        :class:`~zslib.engine.fields.TrainFields`, ``seed`` ...), then ``changes`` (how this call trains:
        checkpoints, device ...)."""
        shared = set(names(cls)) & set(names(type(config)))
        return cls(**{**{name: getattr(config, name) for name in shared}, **changes})
