"""The first training step of a run, laid out for a page that writes the step out by hand.

:func:`first_step` builds what :func:`zslib.engine.runner.run` and :func:`zslib.engine.train.train` build before their
first step, in the same order and from the same seeds: the run's network and method, one Adam optimizer per phase
over the method's parameter groups, and the run's first class-balanced batch. A chapter then writes the step out
(forward, the method's terms, backward, the optimizer step) and :meth:`FirstStep.check` compares the terms it
wrote with the terms the method itself returns on the same batch (``Method.terms``), from the same random state.
So the step on the page is the method's step, and a change to the method that the page does not follow stops the
page with the name of the term that differs.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from zslib.engine.config import Config
from zslib.engine.registry import get_method
from zslib.engine.runner import build_data, build_method, build_model
from zslib.engine.train.checkpoint import set_seed
from zslib.engine.train.embed import to_device
from zslib.engine.train.loop import _start
from zslib.engine.train.spec import TrainSpec

__all__ = ["FirstStep", "first_step"]


@dataclass
class FirstStep:
    """A run at step 0: ``model`` and ``method`` (in training mode, on ``device``), ``optimizers`` (phase -> Adam,
    as the trainer builds them), ``images`` and ``labels`` (the first batch; the labels as ``Method.terms`` sees
    them, i.e. mapped to 0..C-1), ``train_set`` (the training images), and ``library``: the method's own terms of
    every phase on this batch, computed on copies before anything was written out (phase -> {name: value})."""

    config: Config
    model: nn.Module
    method: nn.Module
    optimizers: dict
    images: torch.Tensor
    labels: torch.Tensor
    train_set: object
    device: torch.device
    library: dict = field(default_factory=dict)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer of a one-phase method."""
        if len(self.optimizers) != 1:
            raise ValueError(f"the method has the phases {list(self.optimizers)}: use optimizers[phase]")
        return next(iter(self.optimizers.values()))

    def check(self, terms: Mapping[str, torch.Tensor], phase: str | None = None, rtol: float = 1e-5) -> pd.DataFrame:
        """Compare the terms written out on the page with the method's own terms of ``phase`` (default: every phase
        of the step) on the same batch; raise ``AssertionError`` naming a term that is missing, extra or different.
        Returns the table of both, term by term."""
        expected = dict(self.library[phase]) if phase is not None else {
            name: value for phase_terms in self.library.values() for name, value in phase_terms.items()}
        written = {name: float(torch.as_tensor(value).detach().float()) for name, value in terms.items()}
        if set(written) != set(expected):
            raise AssertionError(f"the terms written out are {sorted(written)}, the method's are {sorted(expected)}")
        for name, value in written.items():
            if not np.isclose(value, expected[name], rtol=rtol, atol=1e-7):
                raise AssertionError(f"term {name!r}: written out {value:.8g}, the method computes {expected[name]:.8g}")
        return pd.DataFrame({"written out": {k: f"{v:.8g}" for k, v in written.items()},
                             "the method's terms()": {k: f"{v:.8g}" for k, v in expected.items()}}).rename_axis("term")


def _library_terms(model: nn.Module, method: nn.Module, images, labels, train_set) -> dict:
    """The method's terms of every phase on one batch, on copies of the model and the method (the training set is
    shared, not copied), without an optimizer step between the phases: what each phase computes from step 0."""
    model_copy = copy.deepcopy(model)
    method_copy = copy.deepcopy(method, memo={id(train_set): train_set})
    out = {}
    for phase in method_copy.phases:
        terms = method_copy.terms(phase, model_copy, images, labels)
        out[phase] = {name: float(value.detach().float()) for name, value in terms.items()}
    return out


def first_step(config: Config, device=None) -> FirstStep:
    """``config``'s run at step 0, as the runner and the trainer build it (see the module docstring)."""
    if not isinstance(config, Config):
        raise TypeError(f"first_step() needs a zslib.engine.config.Config, got {type(config).__name__}")
    method_cls = get_method(config.method)
    data = build_data(config, method_cls)
    classes = np.unique(np.asarray(data["train"].labels))
    set_seed(config.seed)  # the model's initialization, as in zslib.engine.runner.run
    model = build_model(config, method_cls)
    method = build_method(config, model, classes, method_cls)
    spec = TrainSpec.from_config(config, device=device, progress=False)
    run = _start(model, method, data["train"], spec, None)  # seeded, prepared, one Adam per phase
    model.train()
    method.train()
    run.stream.start(0)
    try:
        images, labels = run.stream.next()
    finally:
        run.stream.close()
    images = to_device(images, run.device, run.fmt)
    labels = labels.to(run.device)
    if method.class_index is not None:  # what Method.step_terms does before calling terms
        labels = method.class_index.to(labels.device)[labels]
    state = torch.get_rng_state()
    library = _library_terms(model, method, images, labels, data["train"])
    torch.set_rng_state(state)  # the page draws what the method drew
    return FirstStep(config, model, method, run.optimizers, images, labels, data["train"], run.device, library)
