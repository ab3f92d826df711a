"""The trainer (``zslib.engine.train``): one readable loop that every chapter and every method uses.

* :func:`train` -- the loop (:mod:`zslib.engine.train.loop`): batches, the method's phases, evaluation,
  checkpoints with exact resume; :class:`TrainSpec` -- how it trains (:mod:`zslib.engine.train.spec`);
* :class:`History` -- what a run leaves behind (:mod:`zslib.engine.train.history`);
* :func:`embed`, :func:`default_eval`, :func:`memory_format` -- embeddings of a dataset and the default
  Recall@K evaluation (:mod:`zslib.engine.train.embed`);
* :func:`make_scheduler`, :class:`OptimSettings` -- learning rates and schedules (:mod:`zslib.engine.train.optim`);
* :func:`set_seed`, :func:`save_checkpoint`, :func:`load_checkpoint` -- random state and checkpoints
  (:mod:`zslib.engine.train.checkpoint`);
* :class:`Precision` -- float32, or mixed precision on CUDA in bfloat16 or float16 (:mod:`zslib.engine.train.precision`);
* :mod:`zslib.engine.train.distributed` -- one model trained by several processes (``torchrun``), equivalent to one.

Methods (what a step minimizes) live in :mod:`zslib.methods`; the trainer knows only their hooks.
"""
from zslib.engine.train.checkpoint import CHECKPOINT_VERSION, load_checkpoint, save_checkpoint, set_seed
from zslib.engine.train.embed import default_eval, embed, memory_format
from zslib.engine.train.history import History
from zslib.engine.train.loop import train
from zslib.engine.train.optim import OptimSettings, make_scheduler
from zslib.engine.train.precision import Precision
from zslib.engine.train.spec import TrainSpec

__all__ = ["train", "TrainSpec", "History", "embed", "default_eval", "memory_format", "make_scheduler", "OptimSettings",
           "set_seed", "save_checkpoint", "load_checkpoint", "CHECKPOINT_VERSION", "Precision"]
