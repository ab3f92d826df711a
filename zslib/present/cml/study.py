"""The CML chapter's recorded real-profile runs as one :class:`~zslib.present.base.Study` (Chen, Deng, Wang and Zhang,
TNNLS 2022; ``chen2022cml``): the validation sweep of the weights, the test rows at the weights the book's rule takes
from it and the untrained features, every grid named by :mod:`zslib.methods.cml.recipes`.
"""
from __future__ import annotations

import time

from zslib.engine.choice import VALIDATION_SEEDS
from zslib.methods.cml import recipes
from zslib.present.base import Study

__all__ = ["CmlStudy"]


class CmlStudy(Study):
    """The real-profile runs of the CML chapter, each grid read once (trained under ``ZS_PROFILE=real``)."""

    profile = "real"
    sweep_seconds: float = 0.0

    def sweep(self) -> dict | None:
        """``{(loss, term, weight): [run per seed]}`` of :func:`~zslib.methods.cml.recipes.real_sweep_grid` on the
        validation seeds; ``None`` when not stored. The seconds its first reading took are kept in
        :attr:`sweep_seconds`."""
        name = "the validation sweep"
        if name not in self._grids:
            started = time.perf_counter()
            self.grid(name, recipes.real_sweep_grid(), VALIDATION_SEEDS)
            self.sweep_seconds = time.perf_counter() - started
        return self._grids[name]

    def chosen(self) -> dict | None:
        """``{(loss, term): weight}`` the test rows train with (:func:`~zslib.methods.cml.recipes.choose_weights`)."""
        sweep = self.sweep()
        return None if sweep is None else recipes.choose_weights(sweep)

    def kept(self) -> set:
        """The ``(loss, term)`` pairs the rule kept off (:func:`~zslib.methods.cml.recipes.ablations`)."""
        sweep = self.sweep()
        return set() if sweep is None else recipes.ablations(sweep)

    def test_grid(self) -> dict | None:
        """``{(loss, variant): Config}``: the baseline, CML-e, CML-d and CML of every loss at :meth:`chosen`."""
        chosen = self.chosen()
        return None if chosen is None else recipes.real_test_grid(chosen)

    def runs(self) -> dict | None:
        """``{(loss, variant): [run per seed]}`` of :meth:`test_grid`; ``None`` when not stored."""
        grid = self.test_grid()
        return None if grid is None else self.grid("the test rows", grid)

    def floor(self):
        """The one run of the untrained features (seed 0), or ``None`` when not stored."""
        got = self.grid("the untrained features", {"pretrained": recipes.floor_config()}, (0,))
        return None if got is None else got["pretrained"][0]
