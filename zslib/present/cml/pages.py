"""The runs of the two CML pages that train on the active profile (Chen, Deng, Wang and Zhang, TNNLS 2022;
``chen2022cml``), each a :class:`~zslib.present.base.Study` whose grids are named by :mod:`zslib.methods.cml.recipes`:

* :class:`CmlExperiments` (``book/cml_experiments.ipynb``): the validation sweep of lambda1 and lambda2, the rule's
  choices, the two curve runs (the loss alone and CML-d at the tested lambda2), their models and embeddings;
* :class:`CmlAblations` (``book/cml_ablations.ipynb``): the dropout grid of Table VI and the size grid of Table IX.

Missing runs are trained (the quick profile trains each in seconds; a run stored by the CML chapter is loaded).
"""
from __future__ import annotations

import time

import zslib
from zslib.engine.runner import build_data, load_model
from zslib.engine.train import embed
from zslib.methods.cml import recipes
from zslib.present.base import Study

__all__ = ["CmlExperiments", "CmlAblations"]


class _ActiveProfile(Study):
    """A study of the active profile that trains what is missing (as ``run_grid`` does), timing each grid."""

    def __init__(self, train: bool | None = None):
        super().__init__(True if train is None else train)
        self.on = zslib.get_profile()
        self.seconds: dict[str, float] = {}
        self._made: dict = {}  # models, data and embeddings, made once

    def timed(self, name: str, configs, seeds=None) -> dict | None:
        """:meth:`grid`, keeping the seconds its first reading took in :attr:`seconds`."""
        if name not in self._grids:
            started = time.perf_counter()
            self.grid(name, configs, seeds)
            self.seconds[name] = time.perf_counter() - started
        return self._grids[name]


class CmlExperiments(_ActiveProfile):
    """The experiments page's runs (see the module docstring); models and embeddings are computed once."""

    def sweep(self) -> dict | None:
        """``{(term, weight): [run per seed]}`` of :func:`~zslib.methods.cml.recipes.sweep_grid`."""
        return self.timed("the validation sweep", recipes.sweep_grid(self.on))

    def choices(self) -> dict | None:
        """``{term: Choice}``, the rule applied to the sweep (:func:`~zslib.methods.cml.recipes.sweep_choices`)."""
        sweep = self.sweep()
        return None if sweep is None else recipes.sweep_choices(sweep)

    def lambda2(self) -> float | None:
        """The lambda2 the curve runs train with (:func:`~zslib.methods.cml.recipes.tested_weight`)."""
        choices = self.choices()
        return None if choices is None else recipes.tested_weight(choices["lambda2"])

    def pair(self) -> dict | None:
        """``{"baseline": runs, "CML-d": runs}`` of :func:`~zslib.methods.cml.recipes.curve_grid`."""
        lam2 = self.lambda2()
        return None if lam2 is None else self.timed("the curve runs", recipes.curve_grid(self.on, lam2))

    def data(self):
        """The curve runs' data splits (``build_data`` of their config)."""
        if "data" not in self._made:
            self._made["data"] = build_data(recipes.curve_base(self.on))
        return self._made["data"]

    def models(self) -> dict:
        """``{name: [model per seed]}`` of :meth:`pair`, loaded from their checkpoints."""
        if "models" not in self._made:
            self._made["models"] = {name: [load_model(r) for r in rs] for name, rs in self.pair().items()}
        return self._made["models"]

    def embedded(self) -> dict:
        """``{name: [{split: (embeddings, labels)} per seed]}`` of both splits under each model, computed once."""
        if "embedded" not in self._made:
            data = self.data()
            self._made["embedded"] = {name: [{s: embed(m, data[s]) for s in ("seen", "unseen")} for m in ms]
                                         for name, ms in self.models().items()}
        return self._made["embedded"]


class CmlAblations(_ActiveProfile):
    """The ablations page's runs on the setting of :func:`~zslib.methods.cml.recipes.ablation_setting`."""

    @property
    def setting(self) -> recipes.AblationSetting:
        return recipes.ablation_setting(self.on)

    def dropout_runs(self) -> dict | None:
        """``{configuration: [run per seed]}`` of :func:`~zslib.methods.cml.recipes.dropout_grid` (Table VI)."""
        return self.timed("the dropout grid", recipes.dropout_grid(self.setting))

    def size_runs(self) -> dict | None:
        """``{(name, size): [run per seed]}`` of :func:`~zslib.methods.cml.recipes.size_grid` (Table IX)."""
        return self.timed("the size grid", recipes.size_grid(self.setting))
