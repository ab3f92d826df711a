"""The recorded real-profile runs of the JRD chapters as one :class:`~zslib.present.base.Study` (Chu et al., ICML
2020, ``chu2020jrd``): Flowers-102, a frozen ImageNet EfficientNet-Lite0, a trained 512-d head.

Every grid is named by :mod:`zslib.methods.jrd.recipes` and read once, when a section first asks for it, so that a
page's "What we found" reads the same objects its tables were made from. The paired comparisons made from the
grids (JRD against AM-Softmax, each variant, weight, kernel and mixture against its reference, the choice rules,
Table 3's differences) are attributes too, each ``None`` or empty where its runs are not recorded.
"""
from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping
from functools import cached_property

from zslib.analysis.records import recorded_analyses
from zslib.engine.stats import paired, summarize
from zslib.methods.jrd import recipes
from zslib.methods.jrd.recipes import (AM_SOFTMAX, BOUND_OTHERS, BOUND_SEEDS, GRID_SEEDS, JRD, KERNEL_SEEDS,
                                       MIXTURE_SEEDS, MIXTURES, REGULARIZER_NAMES, SWEEP_ALPHAS, SWEEP_SEEDS)
from zslib.present.base import Study
from zslib.present.jrd.bound import bound_rows, jrd_against, paired_values
from zslib.present.jrd.cells import QUANTITIES
from zslib.engine.choice import VALIDATION_SEEDS

__all__ = ["JRDStudy"]


class JRDStudy(Study):
    """The recorded real-profile runs of the JRD chapters, one lazily read attribute per grid of the recipes, with
    the paired comparisons made from them. ``train`` (default: the active profile is ``real``) trains the missing
    runs and makes the missing analysis records; without it only stored ones are read, an attribute whose grid is
    not complete is ``None`` and :attr:`missing` says why."""

    profile = "real"

    def records(self, name: str, grid: Mapping, analysis: str, seeds=None) -> dict | None:
        """``{label: [AnalysisRecord per seed]}`` of ``analysis`` for the runs of ``grid``, kept under ``name`` as
        :meth:`grid` keeps runs; ``None`` when some records are not stored and the study does not train."""
        if name not in self._grids:
            if self.train:
                self._grids[name] = recorded_analyses(grid, analysis, name, seeds, train=True)
            else:
                said = io.StringIO()
                with contextlib.redirect_stdout(said):
                    self._grids[name] = recorded_analyses(grid, analysis, name, seeds, train=False)
                if self._grids[name] is None:
                    self.missing[name] = " ".join(said.getvalue().split())
        return self._grids[name]

    # -- the grids, as recorded
    @cached_property
    def floor(self):
        """The untrained pretrained features (one run: it has no randomness), or ``None``."""
        got = self.grid("the untrained features", recipes.floor_grid(), (0,))
        return got["pretrained"][0] if got else None

    @cached_property
    def main(self):
        """``{"AM-Softmax": runs, "JRD": runs}`` (alpha 0 and 1, the profile's five seeds), or ``None``."""
        return self.grid("AM-Softmax and JRD", recipes.real_configs())

    @cached_property
    def validation(self):
        """``{alpha: runs}`` of JRD on the class-disjoint validation split, for the candidates 1 and 4."""
        return self.grid("the validation runs of alpha", recipes.validation_grid())

    def validation_off(self, seeds):
        """The "off" of every choice made on validation classes (:func:`zslib.methods.jrd.recipes.
        validation_off_grid`), one run per seed of ``seeds``, or ``None`` when they are not recorded."""
        got = self.grid(f"the validation runs of alpha = 0 (seeds {', '.join(map(str, seeds))})",
                        recipes.validation_off_grid(), seeds)
        return got["off"] if got else None

    @cached_property
    def variants(self):
        return self.grid("the variants", recipes.variant_grid())

    @cached_property
    def sweep(self):
        """``{"AM-Softmax": runs, (regularizer, alpha): runs}`` of the Figs. 4-5 sweep."""
        return self.grid("the alpha sweep", recipes.sweep_grid(), SWEEP_SEEDS)

    @cached_property
    def kernels(self):
        return self.grid("the kernels", recipes.kernel_grid(), KERNEL_SEEDS)

    @cached_property
    def kernel_validation(self):
        """``{(kernel, alpha): runs}`` on the validation split, alpha among the recipes' ``KERNEL_ALPHAS``."""
        return self.grid("the kernels' validation runs", recipes.kernel_validation_grid(), KERNEL_SEEDS)

    @cached_property
    def mixtures(self):
        """``{(K, K): runs}`` for the diagonal of Fig. 6."""
        return self.grid("the mixture sizes (Fig. 6)", recipes.mixture_grid(), MIXTURE_SEEDS)

    @cached_property
    def mixture_grid(self):
        """``{(K, K'): runs}`` for K, K' in the recipes' ``GRID_SIZES``."""
        return self.grid("the (K, K') grid (Fig. 6)", recipes.full_mixture_grid(), GRID_SEEDS)

    @cached_property
    def bound_runs(self):
        return self.grid("the Table 3 analogue", recipes.bound_grid(), BOUND_SEEDS)

    @cached_property
    def bound_records(self):
        """``{arm: [bound_terms record per seed]}`` (1-NN) of the real Table 3 analogue, or ``None``."""
        if self.bound_runs is None:
            return None
        return self.records("the Table 3 analogue (records)", recipes.bound_grid(), "bound_terms", BOUND_SEEDS)

    @cached_property
    def bound_records_5nn(self):
        """The same with the 5-NN estimator (``bound_terms_5nn``), or ``None``."""
        if self.bound_runs is None:
            return None
        return self.records("the Table 3 analogue (5-NN)", recipes.bound_grid(), "bound_terms_5nn", BOUND_SEEDS)

    # -- the comparisons
    @cached_property
    def headline(self):
        """JRD against AM-Softmax, paired by seed, or ``None``."""
        return paired(self.main[AM_SOFTMAX], self.main[JRD]) if self.main else None

    @cached_property
    def alpha_choice(self):
        """``(validation means {alpha: mean}, chosen alpha, paired alpha 4 - alpha 1)`` on the validation
        classes, or ``None``."""
        if self.validation is None:
            return None
        means = {a: summarize(rs, "R@1", "val")[0] for a, rs in self.validation.items()}
        return means, max(means, key=means.get), paired(self.validation[1.0], self.validation[4.0], "R@1", "val")

    @cached_property
    def alpha_rule(self):
        """The book's one choice rule over the validation alphas, JRD switched off among the candidates
        (:func:`zslib.methods.jrd.recipes.alpha_rule`), or ``None`` when those runs are not recorded."""
        if self.validation is None:
            return None
        off = self.validation_off(VALIDATION_SEEDS)
        return None if off is None else recipes.alpha_rule(off, self.validation)

    @cached_property
    def variant_pairs(self) -> dict:
        """``{variant: (paired vs AM-Softmax, paired vs JRD)}``, both differences variant minus the other."""
        if self.variants is None or self.main is None:
            return {}
        return {name: (paired(self.main[AM_SOFTMAX], rs), paired(self.main[JRD], rs))
                for name, rs in self.variants.items()}

    @cached_property
    def sweep_pairs(self) -> dict:
        """``{(regularizer, alpha): paired against AM-Softmax on the same seeds}``."""
        if self.sweep is None:
            return {}
        return {(reg, a): paired(self.sweep[AM_SOFTMAX], self.sweep[reg, a]) for reg in REGULARIZER_NAMES
                for a in SWEEP_ALPHAS}

    @cached_property
    def sweep_shape(self) -> dict:
        """``{regularizer: (alpha of the largest mean gain, its verdict, paired(at that alpha, at the largest
        alpha) or None)}``: a bell needs a clear gain at an inner weight and a clear fall after it."""
        out = {}
        for reg in REGULARIZER_NAMES if self.sweep_pairs else ():
            peak = max(SWEEP_ALPHAS, key=lambda a: self.sweep_pairs[reg, a].diff[0])
            last = SWEEP_ALPHAS[-1]
            fall = paired(self.sweep[reg, peak], self.sweep[reg, last]) if peak != last else None
            out[reg] = (peak, self.sweep_pairs[reg, peak].verdict, fall)
        return out

    @cached_property
    def first_fall(self) -> dict:
        """``{regularizer: the smallest swept alpha whose paired verdict against AM-Softmax is "down"}`` (``inf``
        where none is)."""
        return {reg: min((a for a in SWEEP_ALPHAS if self.sweep_pairs[reg, a].verdict == "down"), default=math.inf)
                for reg in REGULARIZER_NAMES} if self.sweep_pairs else {}

    @cached_property
    def kernel_pairs(self) -> dict:
        """``{kernel: (paired unseen, paired seen)}`` against the Gaussian mixture on the same seeds."""
        if self.kernels is None:
            return {}
        mix = self.kernels["gaussian_mixture"]
        return {k: (paired(mix, rs), paired(mix, rs, split="seen")) for k, rs in self.kernels.items()
                if k != "gaussian_mixture"}

    @cached_property
    def kernel_validation_means(self) -> dict:
        """``{(kernel, alpha): mean validation Recall@1}``."""
        return recipes.validation_means(self.kernel_validation)

    @cached_property
    def kernel_alpha(self) -> dict:
        """``{kernel: alpha}``: the leading weight of each kernel on the validation classes
        (:func:`zslib.methods.jrd.recipes.leading_alphas`); empty when those runs are not recorded."""
        return recipes.leading_alphas(self.kernel_validation_means) if self.kernel_validation is not None else {}

    @cached_property
    def kernel_rules(self) -> dict:
        """``{kernel: Choice}`` of :func:`zslib.methods.jrd.recipes.kernel_rules`; empty when those runs are not
        recorded."""
        off = self.validation_off(KERNEL_SEEDS) if self.kernel_validation is not None else None
        return {} if off is None else recipes.kernel_rules(off, self.kernel_validation)

    @cached_property
    def kernels_chosen(self):
        """``{kernel: runs}`` of each kernel at its leading weight (:attr:`kernel_alpha`) on all the seen classes, or
        ``None``; an ablation for every kernel whose rule (:attr:`kernel_rules`) keeps JRD off."""
        if not self.kernel_alpha:
            return None
        return self.grid("the kernels at their chosen alpha", recipes.kernels_at(self.kernel_alpha), KERNEL_SEEDS)

    @cached_property
    def kernel_chosen_pairs(self) -> dict:
        """``{kernel: paired(JRD, kernel at its leading weight)}`` on the kernels' seeds."""
        if self.kernels_chosen is None or self.main is None:
            return {}
        jrd_same = [r for r in self.main[JRD] if r.config.seed in KERNEL_SEEDS]
        return {k: paired(jrd_same, rs) for k, rs in self.kernels_chosen.items()}

    @cached_property
    def kernel_off_pairs(self) -> dict:
        """``{kernel: paired(AM-Softmax alone, kernel at its leading weight)}`` on the unseen classes and the
        kernels' seeds: the test-class counterpart of the rule's comparison with "off"."""
        if self.kernels_chosen is None or self.main is None:
            return {}
        off_same = [r for r in self.main[AM_SOFTMAX] if r.config.seed in KERNEL_SEEDS]
        return {k: paired(off_same, rs) for k, rs in self.kernels_chosen.items()}

    @cached_property
    def mixture_pairs(self) -> dict:
        """``{(K, K): paired against (1, 1)}`` on the diagonal of Fig. 6."""
        if self.mixtures is None:
            return {}
        return {m: paired(self.mixtures[1, 1], self.mixtures[m]) for m in MIXTURES if m != (1, 1)}

    @cached_property
    def grid_pairs(self) -> dict:
        """``{(K, K'): paired against (1, 1)}`` on the whole grid."""
        if self.mixture_grid is None:
            return {}
        return {m: paired(self.mixture_grid[1, 1], rs) for m, rs in self.mixture_grid.items() if m != (1, 1)}

    # -- Table 3
    @cached_property
    def bound(self):
        """``{arm: [row per seed]}`` of the real Table 3 analogue (1-NN), or ``None``."""
        return bound_rows(self.bound_runs, self.bound_records) if self.bound_records is not None else None

    @cached_property
    def bound_5nn(self):
        if self.bound_records_5nn is None or self.bound_records is None:
            return None
        return bound_rows(self.bound_runs, self.bound_records_5nn)

    @cached_property
    def theory(self) -> dict:
        """``{(other arm, "lam" / "d_H"): (interval of JRD - other, verdict)}`` and ``{(other, "r1"): paired}``."""
        if self.bound is None:
            return {}
        out = jrd_against(self.bound)
        out.update({(other, "r1"): paired(self.bound_runs[other], self.bound_runs[JRD]) for other in BOUND_OTHERS})
        return out

    @cached_property
    def theory_5nn(self) -> dict:
        return jrd_against(self.bound_5nn) if self.bound_5nn is not None else {}

    @cached_property
    def more_bound_records(self) -> dict:
        """``{"variants" / "kernels": {arm: [bound_terms record per seed]}}`` (1-NN) for every variant (five seeds)
        and every kernel (the kernels' seeds), where the runs and records are stored."""
        out = {}
        if self.bound is not None and self.variants is not None:
            records = self.records("the variants (Table 3)", recipes.variant_grid(), "bound_terms")
            if records is not None:
                out["variants"] = records
        if self.bound is not None and self.kernels is not None:
            records = self.records("the kernels (Table 3)", recipes.kernel_grid(), "bound_terms", KERNEL_SEEDS)
            if records is not None:
                out["kernels"] = records
        return out

    @cached_property
    def more_bound(self) -> dict:
        """``{"variants" / "kernels": {arm: [row per seed]}}`` of Table 3 for the variants and the kernels, JRD's row
        first (for the kernels, the Gaussian mixture's on its seeds)."""
        records, out = self.more_bound_records, {}
        if "variants" in records:
            out["variants"] = {JRD: self.bound[JRD], **bound_rows(self.variants, records["variants"])}
        if "kernels" in records:
            rows = bound_rows(self.kernels, records["kernels"])
            out["kernels"] = {JRD: rows.pop("gaussian_mixture"), **rows}
        return out

    @cached_property
    def bound_vs_jrd(self) -> dict:
        """``{(table, arm): {"lam" / "d_H" / "r1": (interval of arm - JRD, verdict)}}``, paired by seed."""
        return {(t, name): {key: paired_values(rows, JRD, name, key) for key in ("lam", "d_H", "r1")}
                for t, rows in self.more_bound.items() for name in rows if name != JRD}

    @cached_property
    def moved_5nn(self) -> dict:
        """For the variants and kernels whose lambda or d_H moved clearly against JRD with 1-NN:
        ``{(table, arm): {"lam" / "d_H": ((1-NN interval, verdict), (5-NN interval, verdict))}}``, arm minus JRD."""
        moved = [(t, n) for (t, n), q in self.bound_vs_jrd.items()
                 if any(q[key][1] != "no clear effect" for key, _ in QUANTITIES)]
        if not moved or self.bound_5nn is None:
            return {}
        sources = {"variants": (recipes.variant_grid(), None, self.variants),
                   "kernels": (recipes.kernel_grid(), KERNEL_SEEDS, self.kernels)}
        out = {}
        for table in dict.fromkeys(t for t, _ in moved):
            grid, seeds, table_runs = sources[table]
            arms = [n for t, n in moved if t == table]
            records = self.records(f"the {table} that moved (5-NN)", {n: grid[n] for n in arms}, "bound_terms_5nn",
                                   seeds)
            if records is None:
                continue
            kept = set(seeds or BOUND_SEEDS)
            five = {JRD: [r for r in self.bound_5nn[JRD] if r["seed"] in kept], **bound_rows(table_runs, records)}
            for name in arms:
                out[table, name] = {key: (self.bound_vs_jrd[table, name][key], paired_values(five, JRD, name, key))
                                    for key, _ in QUANTITIES}
        return out
