"""The ZSML experiments page's choices on validation classes (Xu et al., IJCAI 2019): alpha of Eq. 3 and the share of
same-class pairs in the pair set P, each chosen by the highest mean validation Recall@1 and put to the book's one
choice rule with ZSML switched off as a candidate, then trained on the test classes.
"""
from __future__ import annotations

import numpy as np

from zslib.engine.config import Config
from zslib.engine.data import DataError
from zslib.engine.data.datasets import Flowers102
from zslib.engine.data.splits import split_classes
from zslib.engine.stats import format_interval, paired, summarize
from zslib.methods.zsml import cross_update as cu
from zslib.methods.zsml.method import ZSML
from zslib.methods.zsml.recipes import REAL_ZSML, validation_config
from zslib.present.base import Section
from zslib.present.zsml.numbers import (METRICS, as_pair, by_seed, cells, differences, frame, seed_difference,
                                        seed_list)
from zslib.present.zsml.outcomes import (Experiments, alpha_status, best_share_words, off_rule, rule_note,
                                         share_name, share_rule_note)
from zslib.present.zsml.real import RealComparison
from zslib.present.zsml.study import ZSMLStudy
from zslib.engine.choice import VALIDATION_FRACTION, VALIDATION_SEEDS

__all__ = ["rows_on_sample", "alpha_choice", "chosen_alpha_test", "share_choice", "chosen_share_test"]


def rows_on_sample(real: RealComparison, *labelled) -> list[dict]:
    """Table rows on ZSML's sampled images: the Euclidean distance first, then ``(label, runs)`` pairs."""
    return ([{"row": "Euclidean (ZSML's sample)", **cells(real.zsml, prefix="input ")}]
            + [{"row": label, **cells(rs)} for label, rs in labelled])


def alpha_choice(ex: Experiments, study: ZSMLStudy) -> None:
    """alpha in ALPHAS chosen by the highest mean Recall@1 on held-out seen classes (split ``val``), against the
    paper's 0.3, paired by seed; also how often a run draws each pair of P."""
    real = Config.from_profile("real")
    ex.val_runs = study.alpha_choice()
    zp = ZSML.validate(REAL_ZSML)  # the run's ZSML settings, defaults included
    draws = real.iterations * zp["batch_pairs"]
    drawn = (f"A run draws {real.iterations} x {zp['batch_pairs']} = {draws:,} pairs from the {zp['pairs']:,} of P: "
             f"each pair {draws / zp['pairs']:.2f} times on average.")
    if ex.val_runs is None:
        ex.alpha_choice = Section(notes=[drawn])
        return
    ex.val_mean = {a: summarize(rs, "R@1", "val")[0] for a, rs in ex.val_runs.items()}
    ex.chosen_alpha = max(ex.val_mean, key=ex.val_mean.get)
    ex.alpha_rule = off_rule(ex.val_runs)
    rows = []
    for a, rs in ex.val_runs.items():
        row = {"alpha": a, "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
               "val ACC %": format_interval(summarize(rs, "ACC", "val")),
               "Euclidean val R@1 %": format_interval(summarize(rs, "input R@1", "val"))}
        if a != 0.3:
            ex.val_vs[a] = paired(ex.val_runs[0.3], rs, "R@1", "val")
            row.update({"R@1 minus alpha 0.3 (pts)": format_interval(ex.val_vs[a].diff, signed=True),
                        "verdict": ex.val_vs[a].verdict})
        rows.append(row)
    ex.alpha_choice = Section(
        f"*Validation classes of Flowers-102 ({100 * VALIDATION_FRACTION:.0f}% of the seen classes), {len(VALIDATION_SEEDS)} "
        "seeds; % [95% CI].*", frame(rows, "alpha"),
        notes=[f"The highest mean validation Recall@1 among the alphas is **alpha = {ex.chosen_alpha:g}**.",
         rule_note(ex.val_runs), drawn])


def chosen_alpha_test(ex: Experiments, study: ZSMLStudy) -> None:
    """ZSML at the chosen alpha on the test classes, against alpha 0.3 and the Euclidean distance (5 seeds)."""
    if ex.chosen_alpha == 0.3:
        ex.chosen_alpha_test = Section(notes=["The validation split chose the paper's alpha = 0.3: the rows of the "
                                              "Flowers-102 table above are the chosen configuration."])
    if ex.chosen_alpha is None or ex.chosen_alpha == 0.3 or ex.real is None:
        return
    a = ex.chosen_alpha
    runs = study.chosen_alpha(a)
    if runs is None:
        return
    zr, zc = ex.real.zsml, runs[a]
    ex.chosen_runs = zc
    ex.chosen_vs = {m: (seed_difference(by_seed(zr, m), by_seed(zc, m)),
                        seed_difference(ex.real.euclid[m], by_seed(zc, m))) for m in METRICS}
    ex.chosen_alpha_test = Section(
        f"*Unseen Flowers-102 classes, {len(zc)} seeds, the same sampled images in every row; % [95% CI].*",
        frame(rows_on_sample(ex.real, ("ZSML, alpha 0.3 (paper)", zr), (f"ZSML, alpha {a:g} ({alpha_status(ex)})", zc)),
              "row"),
        notes=[differences(f"ZSML at alpha {a:g} minus (points, 95% CI):",
                     {m: [("ZSML at alpha 0.3", d1), ("the Euclidean distance", d2)]
                      for m, (d1, d2) in ex.chosen_vs.items()})])


def _uniform_share(ex: Experiments, val: Config) -> str:
    """The share of same-class pairs among uniform pairs (from the Flowers-102 labels, else 1/C), kept in ``ex``,
    and the sentence that says it."""
    try:  # the exact share needs only the label file of Flowers-102
        seen_labels = Flowers102(split="train").labels
    except DataError:
        seen_labels = None
    if seen_labels is not None:
        ex.share_fit = float(np.mean([cu.uniform_positive_share(
            seen_labels[split_classes(seen_labels, val.validation_fraction, seed=s)[0]]) for s in VALIDATION_SEEDS]))
        ex.share_seen, ex.share_exact = cu.uniform_positive_share(seen_labels), True
        how = "from the Flowers-102 labels"
    else:  # C classes of equal size: about 1 / C
        n_seen = Flowers102.official["train"][1]
        ex.share_fit = 1 / (n_seen - round(val.validation_fraction * n_seen))
        ex.share_seen, ex.share_exact = 1 / n_seen, False
        how = "as 1/C for classes of equal size (the Flowers-102 labels are not here)"
    return (f"The share of same-class pairs among uniform pairs, {how}: {100 * ex.share_fit:.1f}% on the training "
            f"classes of the validation split (mean of seeds {seed_list(VALIDATION_SEEDS)}), {100 * ex.share_seen:.1f}% on "
            "all seen classes.")


def share_choice(ex: Experiments, study: ZSMLStudy) -> None:
    """The share of same-class pairs among uniform pairs, then ``positive_fraction`` in POS_FRACTIONS at the alpha
    with the best validation mean, each against the unset share, paired by seed; the best share by mean (the unset
    share wins ties) and the book's choice rule over the shares with ZSML switched off as a candidate
    (:func:`zslib.present.zsml.outcomes.share_rule_note`)."""
    val = validation_config()
    ex.pos_alpha = 0.3 if ex.chosen_alpha is None else ex.chosen_alpha
    share = _uniform_share(ex, val)
    ex.share_runs = study.share_choice(ex.pos_alpha)
    if ex.share_runs is None:
        ex.share_choice = Section(share)
        return
    pf_mean = {f: summarize(rs, "R@1", "val")[0] for f, rs in ex.share_runs.items()}
    ex.best_pf = max(pf_mean, key=pf_mean.get)  # the first maximum: the unset share wins ties
    ex.share_rule = off_rule(ex.share_runs)
    off_runs = ex.share_runs[ex.best_pf]  # the input features are the same in every share's runs of a seed
    rows = [{"positive_fraction": "off (Euclidean, ZSML off)",
             "val R@1 %": format_interval(summarize(off_runs, "input R@1", "val")),
             "val ACC %": format_interval(summarize(off_runs, "input ACC", "val"))}]
    for f, rs in ex.share_runs.items():
        row = {"positive_fraction": share_name(f), "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
               "val ACC %": format_interval(summarize(rs, "ACC", "val"))}
        if f is not None:
            ex.pf_val_vs[f] = paired(ex.share_runs[None], rs, "R@1", "val")
            row.update({"R@1 minus unset (pts)": format_interval(ex.pf_val_vs[f].diff, signed=True),
                        "verdict": ex.pf_val_vs[f].verdict})
        rows.append(row)
    ex.share_choice = Section(
        f"{share}\n\n*Validation classes of Flowers-102, alpha {ex.pos_alpha:g}, {len(VALIDATION_SEEDS)} seeds; % [95% CI].*",
        frame(rows, "positive_fraction"),
        notes=[f"Among the shares, the highest mean validation Recall@1 is at positive_fraction = "
               f"{share_name(ex.best_pf)}.", share_rule_note(ex)])


def chosen_share_test(ex: Experiments, study: ZSMLStudy) -> None:
    """ZSML at the best share of positive pairs on the test classes (chosen, or an ablation when the rule kept ZSML
    off), against the unset share at the same alpha and the Euclidean distance (5 seeds), and the Recall@1 gap of the
    unset share to the Euclidean distance."""
    if ex.share_runs is not None and ex.best_pf is None:
        ex.chosen_share_test = Section(notes=["The uniform pairs (share unset) led the shares on the validation split: "
                                              "the test rows above are ZSML at that share."])
    if ex.real is not None:
        ex.pf_ref = ex.real.zsml if ex.pos_alpha == 0.3 else ex.chosen_runs
    if ex.share_runs is None or ex.best_pf is None or ex.pf_ref is None:
        return
    f, a = ex.best_pf, ex.pos_alpha
    runs = study.share_test(a, f)
    if runs is None:
        return
    ex.zf = zf = runs[f]
    ex.pf_vs = {m: (paired(ex.pf_ref, zf, m), seed_difference(ex.real.euclid[m], by_seed(zf, m))) for m in METRICS}
    ex.gap = float(np.mean(list(ex.real.euclid["R@1"].values())) - summarize(ex.pf_ref, "R@1")[0])
    ablation = (" ZSML at this share is an ablation: on validation classes the choice rule kept ZSML off."
                if ex.share_is_ablation else "")
    ex.chosen_share_test = Section(
        f"*Unseen Flowers-102 classes, {len(zf)} seeds, the same sampled images in every row; % [95% CI].*{ablation}",
        frame(rows_on_sample(ex.real, (f"ZSML, alpha {a:g}, share unset", ex.pf_ref),
                             (f"ZSML, alpha {a:g}, {best_share_words(ex)}", zf)), "row"),
        notes=[differences(f"ZSML with positive_fraction {f:g} minus (points, 95% CI):",
                     {m: [("the unset share", as_pair(p1)), ("the Euclidean distance", d2)]
                      for m, (p1, d2) in ex.pf_vs.items()}),
         f"The Recall@1 gap of ZSML with the unset share to the Euclidean distance is {100 * ex.gap:.1f} points; the "
         f"share {f:g} changes ZSML's mean Recall@1 by {100 * ex.pf_vs['R@1'][0].diff[0]:+.1f} points."])
