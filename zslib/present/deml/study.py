"""The DeML chapters' recorded real-profile runs as one :class:`~zslib.present.base.Study` (Chen and Deng, CVPR
2019; ``chen2019deml``): every grid is named by :mod:`zslib.methods.deml.recipes`, read once per session and trained
again only under ``ZS_PROFILE=real``.
"""
from __future__ import annotations

from zslib.engine.choice import OFF, VALIDATION_FRACTION, VALIDATION_SEEDS
from zslib.methods.deml import recipes
from zslib.methods.deml.analyses import learner_attention_records
from zslib.present.base import Study

__all__ = ["DemlStudy"]


class DemlStudy(Study):
    """The real-profile runs the DeML pages show: the untrained features, the baseline head, DeML(1, 4), the two
    extra arms, the validation runs of lambda0 and the CAM records. A row whose runs are not stored is left out and
    named in :attr:`missing` (:meth:`missing_note` says what to run)."""

    profile = "real"

    def floor(self) -> dict | None:
        """``{"pretrained": [run]}``: the untrained features (seed 0), or ``None`` when not stored."""
        return self.grid("the untrained features", {recipes.FLOOR: recipes.real_configs()[recipes.FLOOR]}, (0,))

    def runs(self, arms: bool = False) -> dict:
        """``{name: [run per seed]}`` of the baseline head and DeML(1, 4) (with ``arms`` also
        :func:`~zslib.methods.deml.recipes.real_arm_configs`); a row not stored is left out."""
        configs = recipes.real_configs()
        rows = {recipes.BASE: configs[recipes.BASE], recipes.DEML4: configs[recipes.DEML4],
                **(recipes.real_arm_configs() if arms else {})}
        out = {}
        for name, config in rows.items():
            out.update(self.grid(name, {name: config}) or {})
        return out

    def lambda0_sweep(self) -> dict | None:
        """``{lambda0: [run per seed]}``: DeML(1, 4) at each of :data:`~zslib.methods.deml.recipes.LAMBDA0S` on the
        validation split (:data:`~zslib.engine.choice.VALIDATION_FRACTION`), seeds
        :data:`~zslib.engine.choice.VALIDATION_SEEDS`; ``None`` when not stored."""
        deml4 = recipes.real_configs()[recipes.DEML4]
        val = deml4.replace(validation_fraction=VALIDATION_FRACTION)
        grid = {v: val.replace(method_params={**deml4.method_params, "lambda0": v}) for v in recipes.LAMBDA0S}
        return self.grid("the validation comparison of lambda0", grid, VALIDATION_SEEDS)

    def lambda0_off(self) -> list | None:
        """The binomial baseline (DeML switched off) on the same validation split and seeds, the "off" candidate of
        the lambda0 choice; ``None`` when not stored."""
        base = recipes.real_configs()[recipes.BASE].replace(validation_fraction=VALIDATION_FRACTION)
        got = self.grid("the validation runs of the binomial baseline", {OFF: base}, VALIDATION_SEEDS)
        return None if got is None else got[OFF]

    def cam_records(self) -> dict:
        """``{name: [learner_attention record per seed]}`` of DeML(1, 4) and the two extra arms
        (:func:`zslib.methods.deml.analyses.learner_attention_records`); a variant not stored is left out."""
        if "cam records" not in self._grids:
            grid = {recipes.DEML4: recipes.real_configs()[recipes.DEML4], **recipes.real_arm_configs()}
            self._grids["cam records"] = learner_attention_records(grid, train=self.train)
        return self._grids["cam records"]
