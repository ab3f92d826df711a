"""What the ZSML experiments page computes from its runs (Xu et al., IJCAI 2019), section by section
(:class:`Experiments`), and the words that name its choices: a setting chosen by the book's one choice rule, or
an ablation when the rule keeps ZSML switched off.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from zslib.engine.choice import OFF, Prefixed, choose
from zslib.present.base import Section
from zslib.present.zsml.real import RealComparison

__all__ = ["Experiments", "off_rule", "rule_note", "share_rule_note", "share_name", "share_label",
           "best_share_words", "alpha_status", "settings"]


@dataclass
class Experiments:
    """The experiments page's recorded runs and what the chapter computes from them, one group per section (each
    ``Section`` is ``None`` when its runs are not recorded here or a section it builds on is missing)."""

    real: RealComparison | None
    # alpha chosen on validation classes
    alpha_choice: Section | None = None
    val_runs: dict | None = None
    val_mean: dict = field(default_factory=dict)
    chosen_alpha: float | None = None  # the alpha with the best mean validation Recall@1
    alpha_rule: object = None  # the rule's Choice over the alphas with ZSML off a candidate (zslib.engine.choice)
    val_vs: dict = field(default_factory=dict)
    # ZSML at the chosen alpha on the test classes
    chosen_alpha_test: Section | None = None
    chosen_runs: list | None = None
    chosen_vs: dict = field(default_factory=dict)
    # the share of positive pairs chosen on validation classes
    share_choice: Section | None = None
    share_fit: float | None = None
    share_seen: float | None = None
    share_exact: bool = True
    pos_alpha: float = 0.3
    share_runs: dict | None = None
    best_pf: float | None = None  # the share with the highest mean validation Recall@1 among the shares
    share_rule: object = None  # the rule's Choice over the shares with ZSML off a candidate (zslib.engine.choice)
    pf_val_vs: dict = field(default_factory=dict)
    # ZSML at the best share on the test classes
    chosen_share_test: Section | None = None
    pf_ref: list | None = None
    zf: list | None = None
    pf_vs: dict = field(default_factory=dict)
    gap: float | None = None
    # Table 8 and Table 7 analogues
    alpha_ablation: Section | None = None
    alpha_runs: dict | None = None
    ablation_vs: dict = field(default_factory=dict)
    test_order: list | None = None
    val_order: list | None = None
    k_ablation: Section | None = None
    k_runs: dict | None = None
    k_vs: dict = field(default_factory=dict)
    # NCA, the Table 9 and 6 analogues, every pair, the transfer
    nca: Section | None = None
    nca_runs: list | None = None
    nca_vs: dict = field(default_factory=dict)
    arms: Section | None = None
    arm_runs: dict | None = None
    arm_vs: dict = field(default_factory=dict)
    every_pair: Section | None = None
    every: object = None
    transfer: Section | None = None
    xfer: dict | None = None
    xfer_vs: dict = field(default_factory=dict)

    @property
    def share_is_ablation(self) -> bool:
        """Whether the rule kept ZSML off over the shares: then the best share's rows are an ablation."""
        return self.share_rule is not None and self.share_rule.off_won


def settings(ex: Experiments) -> tuple:
    """``(alpha, positive_fraction)`` of the later sections: the alpha and the share with the best mean validation
    Recall@1 (an ablation when the choice rule kept ZSML off, :attr:`Experiments.share_is_ablation`)."""
    return ex.pos_alpha, ex.best_pf


def share_name(f) -> str:
    """A share of positive pairs as the chapter names it (``None``: the uniform pairs)."""
    return "unset (uniform)" if f is None else f"{f:g}"


def share_label(f) -> str:
    """A share as the candidate of the rule's sentence (``None``: the uniform pairs)."""
    return "the unset (uniform) share" if f is None else f"positive_fraction = {f:g}"


def best_share_words(ex: Experiments) -> str:
    """The best share by mean, and the word that says what its rows are: chosen, or an ablation."""
    return f"positive_fraction {share_name(ex.best_pf)} ({'ablation' if ex.share_is_ablation else 'chosen'})"


def alpha_status(ex: Experiments) -> str:
    """How the best-mean alpha's rows are labelled: chosen, or an ablation when the rule keeps ZSML off."""
    return "ablation: best mean, the rule keeps ZSML off" if ex.alpha_rule is not None and ex.alpha_rule.off_won \
        else "chosen"


def off_rule(val_runs: Mapping):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over a validation grid of ZSML with ZSML
    switched off as a candidate, listed first: "off" is the Euclidean distance of the same runs' input features on
    the same validation images and seeds (the ``input`` metrics every ZSML result carries, read through
    :class:`zslib.engine.choice.Prefixed`, as in the comparison chapter), taken from the leading setting's runs."""
    leader = max(val_runs, key=lambda k: np.mean([r.metric("R@1", "val") for r in val_runs[k]]))
    return choose({OFF: [Prefixed(r, "input ") for r in val_runs[leader]], **val_runs})


def _rule_words(rule, label) -> str:
    """The rule's sentence (:meth:`zslib.engine.choice.Choice.sentence`), "off" named as ZSML switched off."""
    return rule.sentence(lambda k: "the Euclidean distance of the input features (ZSML off)" if k == OFF else label(k))


def rule_note(val_runs: Mapping) -> str:
    """The rule over the alphas with ZSML switched off as a candidate (:func:`off_rule`), as a sentence."""
    rule = off_rule(val_runs)
    return (f"With ZSML switched off as a candidate, the book's choice rule reads: "
            f"{_rule_words(rule, lambda a: f'alpha = {a:g}')}"
            + (" So on validation classes ZSML is not chosen, and its rows show what it does as an ablation."
               if rule.off_won else ""))


def share_rule_note(ex: Experiments) -> str:
    """What the book's choice rule chose for the share of positive pairs, as Markdown: the rule over the unset share
    and each ``positive_fraction`` at ``ex.pos_alpha`` with ZSML switched off as a candidate (:func:`off_rule`, on
    the same validation classes and seeds). When it keeps ZSML off, the best share by mean is named as an ablation.
    Empty when the share's validation runs are not here."""
    rule = ex.share_rule
    if rule is None:
        return ""
    text = ("With ZSML switched off as a candidate, the book's choice rule over the shares of positive pairs reads: "
            + _rule_words(rule, share_label))
    if rule.off_won:
        return text + (f" So on validation classes no share is chosen: ZSML stays off, and {share_label(ex.best_pf)}, "
                       "the best share by mean, is shown only as an ablation.")
    return text + f" So **{share_label(rule.chosen)}** is the chosen share."
