"""The recorded real-profile runs of the ZSML chapters (Xu et al., IJCAI 2019), as one :class:`Study`: every grid is
named and configured by :mod:`zslib.methods.zsml.recipes` and read once per session; a grid whose runs are not all
stored is ``None`` and :attr:`Study.missing` says what to run. On the real profile the missing runs are trained.
"""
from __future__ import annotations

from zslib.methods.zsml import recipes
from zslib.methods.zsml.analyses import recorded_every_pair, recorded_transfer
from zslib.present.base import Study
from zslib.engine.choice import TEST_SEEDS, VALIDATION_SEEDS

__all__ = ["ZSMLStudy"]


class ZSMLStudy(Study):
    """The real-profile grids of ``book/zsml.ipynb`` and ``book/zsml_experiments.ipynb`` (Flowers-102, frozen
    pretrained features), one method per grid; the analyses of a trained model (every pair, the transfer) are read
    beside them."""

    profile = "real"

    def comparison(self) -> dict | None:
        """The chapter's comparison: ZSML on the sample, ZSML ranking every unseen image, the trained head."""
        return self.grid("the ZSML comparison", recipes.comparison_grid(), TEST_SEEDS)

    def floor(self) -> dict | None:
        """The untrained pretrained features (seed 0)."""
        return self.grid("the pretrained features", recipes.floor_grid(), (0,))

    def alpha_choice(self) -> dict | None:
        """alpha on validation classes."""
        return self.grid("the choice of alpha", recipes.alpha_choice_grid(), VALIDATION_SEEDS)

    def chosen_alpha(self, alpha: float) -> dict | None:
        """ZSML at ``alpha`` on the test classes."""
        return self.grid(f"ZSML at alpha {alpha:g}", recipes.chosen_alpha_grid(alpha), TEST_SEEDS)

    def share_choice(self, alpha: float) -> dict | None:
        """The shares of positive pairs at ``alpha`` on validation classes."""
        return self.grid(f"the choice of the share of positive pairs (alpha {alpha:g})",
                         recipes.share_choice_grid(alpha), VALIDATION_SEEDS)

    def share_test(self, alpha: float, fraction: float) -> dict | None:
        """ZSML at ``alpha`` and the share ``fraction`` on the test classes."""
        return self.grid(f"ZSML at alpha {alpha:g}, positive_fraction {fraction:g}",
                         recipes.share_test_grid(alpha, fraction), TEST_SEEDS)

    def alpha_ablation(self) -> dict | None:
        """Table 8 analogue."""
        return self.grid("the alpha ablation", recipes.alpha_ablation_grid(), recipes.ABL_SEEDS)

    def k_ablation(self) -> dict | None:
        """Table 7 analogue."""
        return self.grid("the k ablation", recipes.k_ablation_grid(), recipes.ABL_SEEDS)

    def nca(self) -> dict | None:
        """NCA on the same features."""
        return self.grid("the NCA row", recipes.nca_grid(), TEST_SEEDS)

    def arms(self, alpha: float, fraction: float | None) -> dict | None:
        """The Table 9 and 6 analogues at ``alpha`` and ``fraction``."""
        return self.grid(f"the LR, Lifted + ZSML and S-size rows (alpha {alpha:g}, positive_fraction {fraction})",
                         recipes.arm_grid(alpha, fraction), TEST_SEEDS)

    def synthparts(self, alpha: float, fraction: float | None) -> dict | None:
        """ZSML on SynthParts through the pretrained features, at ``alpha`` and ``fraction``."""
        return self.grid(f"ZSML on SynthParts (pretrained features; alpha {alpha:g}, positive_fraction {fraction})",
                         recipes.synthparts_grid(alpha, fraction), TEST_SEEDS)

    def every_pair(self, alpha: float, fraction: float | None):
        """The ``every_pair`` record of ZSML at ``alpha`` and ``fraction``, seed 0, or ``None`` (after a note)."""
        return recorded_every_pair(recipes.settings_config(alpha, fraction), 0, train=self.train)

    def transfer(self, alpha: float, fraction: float | None):
        """The transfer records (Flowers-102 -> SynthParts, SynthParts -> Flowers-102), or ``None`` (after a note)."""
        return recorded_transfer(*recipes.transfer_configs(alpha, fraction), TEST_SEEDS, train=self.train)
