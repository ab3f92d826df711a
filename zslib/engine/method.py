"""The extension point every method of the book uses: a :class:`Method` is an ``nn.Module`` that says
what to minimize at each training step, over which parameters, in which order.

A training step of any of the five papers has the same parts: a network that embeds images (possibly
extended by the method: attention modules, several heads), a metric loss, the method's extra terms, and
sometimes a second player (an adversary, a classifier) updated in its own step. A method expresses this
through a few hooks; the trainer (:func:`zslib.engine.train.train`) knows only these hooks, never a method's
name::

    class MyMethod(Method):
        name, paper, equations = "mine", "doe2024", "Eq. 3"
        params = {"alpha": Param(0.1, "weight of the extra term", number(low=0))}

        def terms(self, phase, model, images, labels):      # one phase, "main"
            emb = model(images)
            return {self.loss_name: self.loss(emb, labels), "extra": self.p["alpha"] * extra(emb)}

* ``attach(model, params)`` (class method): add networks to the model that evaluation needs too
  (attention modules, several heads); the default returns the model unchanged. Networks only training
  needs (an adversary, a classifier) are attributes of the method instead.
* ``uses_maps``: whether the method reads the backbone's intermediate maps (attention over them) or only
  its pooled feature (``reads_maps(params)`` when it depends on the method's parameters). On the ``real`` profile,
  whose maps come from a disk cache, a method that does not
  read maps is fed the cached pooled feature alone, which is 50 times less to read per image.
* ``phases``: the names of the updates of one step, in order, e.g. ``("embedding", "adversary")``. Each
  phase has its own optimizer, learning-rate schedule and gradient scaler. A min-max game written with
  a gradient reversal layer (:mod:`zslib.engine.models.grl`) is a single phase.
* ``param_groups(phase, model, settings)``: what the phase's optimizer updates. The default (for a
  one-phase method) is the model's groups plus one group of the method's own parameters (class proxies,
  heads) at ``settings.method_lr``.
  A phase whose ``param_groups`` is the empty list has no optimizer: it updates the method's own state
  itself inside ``terms`` (ZSML's label update, Algorithm 1 step 4) and must return ``{}``.
* ``terms(phase, model, images, labels)``: the named, already weighted scalar loss terms of that phase on
  this batch; the trainer sums, logs and minimizes them. A phase may return ``{}`` to skip this step.
  Phases run in order on the same batch, so a later phase may reuse what an earlier one stored.
* ``prepare(model, train_set)``: called once before the first step (also when a run resumes, before its
  checkpoint is loaded; and before evaluation for methods that train nothing), with the training set,
  for methods that need more than a batch: a fixed set of pairs over the whole training set (ZSML), a
  closed-form fit (scikit-learn's NCA). Default: nothing.
* ``pair_evaluator(model)``: ``None`` (the default) for methods that embed images, which are evaluated
  by distances of ``model(x)``. A method that learns a similarity of *two* vectors instead returns a
  function ``evaluator(features, labels, seed, split) -> {metric: value}`` of the rows ``model(x)`` of one
  split (``split``: its name, ``"seen"``, ``"val"`` or ``"unseen"``) (for instance
  :func:`zslib.methods.zsml.pairwise.pairwise_metrics` with its scorer); the runner then uses it
  for every split.

``params`` declares the method's hyperparameters (``Config.method_params``): each with its default, a
sentence, and a check. Unknown keys are refused with the list of accepted ones.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from zslib.engine.checks import finite_number
from zslib.engine.losses import get_loss
from zslib.engine.train.optim import OptimSettings, model_groups, own_parameters_group

__all__ = ["Method", "Param", "number", "one_of", "boolean", "ObjectiveMethod", "objective_method"]


@dataclass(frozen=True)
class Param:
    """A method hyperparameter: its ``default``, one sentence ``doc``, and ``check(value) -> value``
    (raises ``ValueError``/``TypeError`` saying what is accepted).

    ``omit_default``: a parameter added to a method after runs of it were recorded. Its key is left out of
    the validated parameters (:meth:`Method.validate`, hence ``Config.method_params`` and
    :func:`~zslib.engine.config.config_hash`) whenever its checked value equals the default, so every existing
    config, and every new one that leaves it at its default, keeps its hash; the method itself still sees
    the default in ``self.p``."""

    default: Any
    doc: str
    check: Callable[[Any], Any] | None = None
    omit_default: bool = False


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False,
           integer: bool = False) -> Callable[[Any], Any]:
    """A check: a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``), whole if ``integer``."""
    def check(value, name="value"):
        return finite_number(value, name, low=low, high=high, low_open=low_open, integer=integer)
    check.spec = {"kind": "number", "low": low, "high": high, "low_open": low_open, "integer": integer}
    return check


def one_of(*options) -> Callable[[Any], Any]:
    """A check: one of ``options``."""
    def check(value, name="value"):
        if value not in options:
            raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
        return value
    check.spec = {"kind": "choice", "options": list(options)}
    return check


def boolean(value, name="value"):
    """A check: ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be true or false, got {value!r}")
    return value


boolean.spec = {"kind": "bool"}


class Method(nn.Module):
    """Base class of the methods in :data:`zslib.engine.registry.METHODS` (see the module docstring).

    Registered methods are built by the runner as ``Method(config, model, num_classes)``; the base
    class validates ``config.method_params`` into ``self.p`` and builds the metric loss ``config.loss``
    (``self.loss``, a module: a loss with class proxies is trained and checkpointed with the method).
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    paper: ClassVar[str] = ""  # key in references.bib
    equations: ClassVar[str] = ""
    params: ClassVar[Mapping[str, Param]] = {}
    phases: ClassVar[tuple[str, ...]] = ("main",)
    trains: ClassVar[bool] = True  # False: nothing to train, the runner only evaluates (e.g. "pretrained")
    uses_maps: ClassVar[bool] = False  # True: reads the backbone's intermediate maps, not only its pooled feature

    def __init__(self, config=None, model: nn.Module | None = None, num_classes: int | None = None):
        super().__init__()
        self.p = self.settings(getattr(config, "method_params", None))
        self.loss_name = getattr(config, "loss", None)
        if config is not None:
            self.loss = get_loss(config.loss, num_classes=num_classes, embedding_dim=config.embedding_dim,
                                 **config.loss_params)
        self.register_buffer("class_index", None, persistent=False)

    # ----- hyperparameters ---------------------------------------------------------------------------
    @classmethod
    def validate(cls, params: Mapping | None) -> dict:
        """``params`` completed with the defaults and checked; unknown keys list the accepted ones. A parameter
        declared with ``omit_default`` is left out while it equals its default (see :class:`Param`)."""
        params = dict(params or {})
        unknown = sorted(set(params) - set(cls.params))
        if unknown:
            accepted = ", ".join(f"{k} (default {p.default!r})" for k, p in cls.params.items()) or "none"
            raise ValueError(f"method {cls.name!r} has no parameter(s) {unknown}; it accepts: {accepted}")
        out = {}
        for key, spec in cls.params.items():
            value = params.get(key, spec.default)
            value = spec.check(value, f"{cls.name} parameter {key}") if spec.check is not None else value
            if spec.omit_default and value == spec.default:
                continue  # left out, so that the configs recorded before the parameter existed keep their hash
            out[key] = value
        return out

    @classmethod
    def settings(cls, params: Mapping | None) -> dict:
        """:meth:`validate`'s parameters with the defaults of the ``omit_default`` ones filled back in: every
        parameter, as the method uses them (``self.p``)."""
        out = cls.validate(params)
        return {key: out.get(key, spec.default) for key, spec in cls.params.items()}

    @classmethod
    def describe(cls) -> str:
        """Several lines: name, title, paper and equations, and every parameter with its default."""
        home = cls.__module__.replace(".", "/") + ".py"
        lines = [f"{cls.name}: {cls.title}", f"    paper: {cls.paper}; {cls.equations}",
                 f"    code: {home}", f"    phases: {', '.join(cls.phases)}"]
        for key, spec in cls.params.items():
            lines.append(f"    {key} = {spec.default!r}: {spec.doc}")
        return "\n".join(lines)

    @classmethod
    def reads_maps(cls, params: Mapping | None = None) -> bool:
        """Whether a run with these method parameters reads the backbone's intermediate maps (default:
        :attr:`uses_maps`). A method whose parameters switch its attention on and off overrides it, so
        that its runs without attention read only the pooled feature on the cached profile."""
        return cls.uses_maps

    # ----- the network ----------------------------------------------------------------------------------
    @classmethod
    def attach(cls, model: nn.Module, params: Mapping) -> nn.Module:
        """The network this method trains and evaluates, built from the standard one (default: unchanged)."""
        return model

    # ----- labels -----------------------------------------------------------------------------------------
    def use_classes(self, classes) -> None:
        """Map the dataset's class ids ``classes`` to 0..C-1 before ``terms`` sees them (losses with one
        parameter vector per class need contiguous ids). Not needed when the ids already are 0..C-1."""
        classes = np.asarray(classes, dtype=np.int64)
        if np.array_equal(classes, np.arange(len(classes))):
            self.class_index = None
            return
        lookup = torch.full((int(classes.max()) + 1,), -1, dtype=torch.long)
        lookup[torch.from_numpy(classes)] = torch.arange(len(classes))
        self.class_index = lookup.to(self.class_index.device if self.class_index is not None else "cpu")

    # ----- data-wide preparation and pairwise evaluation --------------------------------------------------
    def prepare(self, model: nn.Module, train_set) -> None:
        """Called once with the training set before the first step (see the module docstring). Default: nothing."""

    def pair_evaluator(self, model: nn.Module) -> Callable | None:
        """``None``: evaluate embeddings ``model(x)``. Else ``evaluator(features, labels, seed) -> metrics``
        for a method that scores pairs of the rows ``model(x)`` (see the module docstring)."""
        return None

    # ----- a training step ----------------------------------------------------------------------------
    def param_groups(self, phase: str, model: nn.Module, settings: OptimSettings) -> list[dict]:
        """What ``phase``'s optimizer updates. Default (one-phase methods): the model's groups, then the
        method's own parameters at ``settings.method_lr`` without weight decay."""
        if len(self.phases) != 1:
            raise NotImplementedError(f"{type(self).__name__} has phases {self.phases}: it must say which "
                                      "parameters each phase updates (override param_groups)")
        return model_groups(model, settings) + own_parameters_group(self, settings, exclude=model.parameters())

    def terms(self, phase: str, model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
              ) -> dict[str, torch.Tensor]:
        """The named, weighted scalar loss terms of ``phase`` on this batch (``{}``: skip the phase)."""
        raise NotImplementedError(f"{type(self).__name__} must define terms(phase, model, images, labels)")

    def step_terms(self, phase: str, model: nn.Module, images: torch.Tensor, labels: torch.Tensor):
        """What the trainer calls: :meth:`terms` with the labels mapped by :meth:`use_classes`."""
        if self.class_index is not None:
            labels = self.class_index.to(labels.device)[labels]
        return self.terms(phase, model, images, labels)


class ObjectiveMethod(Method):
    """A one-phase method made from a function ``objective(model, images, labels) -> {name: term}``.

    For experiments and exercises that write an objective in a few lines; the modules given (e.g. a loss
    with class proxies) are registered, so their parameters are trained and checkpointed with it.
    """

    name = "objective"
    title = "a one-phase objective given as a function"

    def __init__(self, objective: Callable, *modules: nn.Module):
        super().__init__()
        if not callable(objective):
            raise TypeError(f"objective must be a callable (model, images, labels) -> dict of terms, got "
                            f"{type(objective).__name__}")
        self.objective = objective  # registered as a submodule when it is a Module
        self.extra = nn.ModuleList(modules)

    def terms(self, phase, model, images, labels):
        return self.objective(model, images, labels)


def objective_method(objective: Callable, *modules: nn.Module) -> ObjectiveMethod:
    """Wrap ``objective(model, images, labels) -> {name: weighted term}`` (and the ``modules`` whose
    parameters it uses) as a one-phase :class:`Method`."""
    return ObjectiveMethod(objective, *modules)
