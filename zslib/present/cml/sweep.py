"""The CML experiments page's choice of lambda1 and lambda2 on validation classes (Chen, Deng, Wang and Zhang, TNNLS
2022, Tables VII-VIII analogue): the sweep as a table beside the paper's test-class curves, and what the book's one
rule (:mod:`zslib.engine.choice`, "off" = the triplet loss alone) made of it, in the words of
:mod:`zslib.analysis.verdict` ("clearly" only for a weight the rule chose, every other weight an ablation, the
power of the choice stated).
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from zslib.analysis.verdict import PAGE_BUDGET_REASON, POWER, paired_phrase, power_of, power_size, power_words, seeds_words
from zslib.engine.stats import diverged_label, format_interval, paired, summarize
from zslib.methods.cml.recipes import GREEK, SWEEP_OFF, sweep_choices, tested_weight
from zslib.present.base import Section
from zslib.present.cml.pages import CmlExperiments
from zslib.reported import reported_table

__all__ = ["TERM_VARIANTS", "lambda_sweep_table", "rule_lines", "lambda_sweep_section", "lambda_sweep_figure",
           "tested_lambda2_sentence"]

#: The CML variant each weight of Eq. 11 switches on, as a sentence names it.
TERM_VARIANTS = {"lambda1": "CML-e", "lambda2": "CML-d"}
_OFF_WORDS = "off (λ = 0, the triplet loss alone)"


def _status(term: str, weight: float, choices: Mapping) -> str:
    choice = choices[term]
    if (term, weight) == SWEEP_OFF:
        return "off"
    if weight == choice.chosen:
        return "chosen"
    return "best tried, an ablation" if weight == tested_weight(choice) else "ablation"


def lambda_sweep_table(sweep: Mapping, choices: Mapping | None = None) -> pd.DataFrame:
    """The sweep (``{(term, weight): runs}``) as a table: validation Recall@1 with its 95% interval, the paired
    difference from the loss alone and its verdict, the seen Recall@1 the run fitted, and (``choices``, the rule's
    :func:`~zslib.methods.cml.recipes.sweep_choices`) what the rule made of each weight."""
    zero = sweep[SWEEP_OFF]
    rows = []
    for (term, lam), rs in sweep.items():
        m, lo, hi = summarize(rs, "R@1", "val")
        vs0 = paired(zero, rs, "R@1", "val") if (term, lam) != SWEEP_OFF else None
        row = {"term": term, "lambda": lam, "val R@1 %": 100 * m, "95% CI low": 100 * lo, "95% CI high": 100 * hi,
               "vs lambda=0 (pts)": format_interval(vs0.diff, signed=True) if vs0 else "",
               "verdict": vs0.verdict if vs0 else "", "seen R@1 %": 100 * summarize(rs, "R@1", "seen")[0]}
        if choices is not None:
            row["rule"] = _status(term, lam, choices)
        rows.append(row)
    return pd.DataFrame(rows)


def _differences(off_runs, runs) -> list[float]:
    """Per-seed differences ``runs - off_runs`` of validation Recall@1, paired by seed."""
    off = {r.config.seed: r.metric("R@1", "val") for r in off_runs}
    return [r.metric("R@1", "val") - off[r.config.seed] for r in runs]


def _power(sweep: Mapping, term: str) -> float:
    """The true validation difference the rule would call clear in 80% of repetitions for ``term``'s weights
    (:func:`~zslib.analysis.verdict.power_of`: the paired spread pooled over the weights tried)."""
    off_runs = sweep[SWEEP_OFF]
    return power_of([_differences(off_runs, rs) for (t, w), rs in sweep.items() if t == term and (t, w) != SWEEP_OFF])


def rule_lines(sweep: Mapping, choices: Mapping) -> list[str]:
    """Per weight of Eq. 11 (lambda1, lambda2) a paragraph: what the rule chose, the power of its validation seeds
    (:func:`_power`, :func:`~zslib.analysis.verdict.power_words`), then one line per
    candidate weight with its paired validation difference from off (:func:`~zslib.analysis.verdict.paired_phrase`:
    "clearly" only for the chosen weight; every other weight an ablation)."""
    out = []
    off_runs = sweep[SWEEP_OFF]
    seeds = len(off_runs)
    for term, choice in choices.items():
        name, greek = TERM_VARIANTS[term], GREEK[term]
        tested = tested_weight(choice)
        margin = _power(sweep, term)
        if not choice.off_won:
            head = (f"**{greek}** ({name}): the rule chose {greek} = {choice.chosen:g}, the best mean validation "
                    f"Recall@1 ({100 * choice.means[choice.chosen].mean:.1f} %), clearly above {_OFF_WORDS}; with "
                    f"{seeds} validation seeds the rule would call a true difference of {power_size(margin)} points "
                    f"clear in {100 * POWER:.0f}% of repetitions.")
        else:
            head = (f"**{greek}** ({name}): the rule kept {_OFF_WORDS}: "
                    + power_words(choice.leader_vs_off, margin, seeds, f"the {greek} weights tried")
                    + f". The weights tried are ablations; the best of them is {greek} = {tested:g}.")
        lines = []
        for (t, w), rs in sweep.items():
            if t != term or (t, w) == SWEEP_OFF:
                continue
            p = paired(off_runs, rs, "R@1", "val")
            chosen = w == choice.chosen
            lines.append(f"- {greek} = {w:g} ({'chosen' if chosen else 'ablation'}): "
                         + paired_phrase(p.diff, p.verdict, chosen, "off", diverged_label(rs)))
        out.append(head + "\n\n" + "\n".join(lines))
    return out


def lambda_sweep_section(ex: CmlExperiments) -> Section:
    """The validation sweep of the experiments page: how many runs and how long they took, the table
    (:func:`lambda_sweep_table`) and the rule's choice of each weight in words (:func:`rule_lines`)."""
    sweep = ex.sweep()
    if sweep is None:
        return Section(caption=ex.missing_note("the validation sweep"))
    choices = sweep_choices(sweep)
    count = sum(map(len, sweep.values()))
    return Section(caption=f"{count} runs in {ex.seconds['the validation sweep']:.1f} s",
                   table=lambda_sweep_table(sweep, choices), notes=[*rule_lines(sweep, choices),
                                                                    seeds_line(sweep, choices)])


def seeds_line(sweep: Mapping, choices: Mapping) -> str:
    """Why the sweep has the seeds it has and what they detect for each weight
    (:func:`~zslib.analysis.verdict.seeds_words`): on the quick profile the book build trains them, so a page's time
    budget keeps them at the default even though a run costs seconds."""
    off_runs = sweep[SWEEP_OFF]
    seconds = [float(r.provenance["train_seconds"]) for rs in sweep.values() for r in rs
               if r.provenance.get("train_seconds")]
    median = float(np.median(seconds)) if seconds else float("nan")
    quick = off_runs[0].config.profile == "quick"
    parts = [f"{GREEK[term]}: " + seeds_words(len(off_runs), len(off_runs), median, _power(sweep, term),
                                               kept_by=PAGE_BUDGET_REASON if quick else None)
             for term, choice in choices.items()]
    return "**How many seeds.** " + "; ".join(parts) + "."


def lambda_sweep_figure(ex: CmlExperiments) -> Section:
    """The validation curves of lambda1 and lambda2 (mean and 95% interval over seeds, lambda = 0 first) above the
    paper's test-class curves of CML-e (Tri) and CML-d (Tri) on CARS (Tables VII and VIII)."""
    sweep = ex.sweep()
    if sweep is None:
        return Section(caption=ex.missing_note("the validation sweep"))
    table = lambda_sweep_table(sweep)
    vii, viii = reported_table("VII"), reported_table("VIII")
    fig, axes = plt.subplots(2, 2, figsize=(10, 6))
    lam0 = table[(table.term == SWEEP_OFF[0]) & (table["lambda"] == SWEEP_OFF[1])]
    for col, (which, tab, name) in enumerate((("lambda1", vii, "CML-e (Tri)"), ("lambda2", viii, "CML-d (Tri)"))):
        sub = pd.concat([lam0, table[(table.term == which) & (table["lambda"] > 0)]])
        xs = np.arange(len(sub))
        ax = axes[0, col]
        ax.errorbar(xs, sub["val R@1 %"], yerr=[sub["val R@1 %"] - sub["95% CI low"],
                                                 sub["95% CI high"] - sub["val R@1 %"]], fmt="o-", capsize=3)
        ax.set_xticks(xs, [f"{v:g}" for v in sub["lambda"]])
        ax.set_ylabel("validation R@1 % (95% CI)")
        ax.set_title(f"ours, SynthParts, triplet: {which}")
        row = next(r for r in tab["rows"] if r["method"] == name)
        ax = axes[1, col]
        grid = tab["lambdas"][name]
        ax.plot(range(len(grid)), [row[c] for c in tab["columns"]], "s--", color="C3")
        ax.set_xticks(range(len(grid)), [f"{v:g}" for v in grid])
        ax.set_xlabel(which)
        ax.set_ylabel("test R@1 %")
        ax.set_title(f"paper, Table {tab['table']}: {name} on CARS")
    fig.tight_layout()
    return Section(figure=fig)


def tested_lambda2_sentence(sweep: Mapping, choices: Mapping) -> str:
    """The sentence above the diversity table: which lambda2 the curve runs train with and why (the rule's
    choice, or where it kept off the best weight tried, as an ablation), with its validation difference from off
    in the words of :func:`~zslib.analysis.verdict.paired_phrase`."""
    choice = choices["lambda2"]
    lam2 = tested_weight(choice)
    p = paired(sweep[SWEEP_OFF], sweep["lambda2", lam2], "R@1", "val")
    phrase = paired_phrase(p.diff, p.verdict, not choice.off_won, "off on the validation classes")
    if not choice.off_won:
        return f"CML-d weight chosen by the rule on the validation classes: λ2 = {lam2:g}; {phrase}."
    return (f"CML-d weight: the rule kept λ2 = 0 (off) on the validation classes, so the CML-d runs below are an "
            f"ablation at λ2 = {lam2:g}, the best weight tried; {phrase}.")
