"""The JRD chapters' sections on the recorded real-profile runs (Chu et al., ICML 2020, ``chu2020jrd``): the
headline and the choice of alpha, the full profile, and on the experiments page the analogues of Table 2 (the
variants), Figs. 4-5 (the alpha sweep), Table 4 (the kernels, at alpha = 1 and at a weight chosen for each) and
Fig. 6 (the mixture sizes). Each function takes the chapter's :class:`~zslib.present.jrd.study.JRDStudy` and returns
a :class:`~zslib.present.base.Section` (or :class:`~zslib.present.base.Sections`); Table 3 is in
:mod:`zslib.present.jrd.bound_tables`.
"""
from __future__ import annotations

import math

import pandas as pd

from zslib.engine.config import config_hash
from zslib.engine.stats import format_interval, summarize
from zslib.experiment import load_results
from zslib.methods.jrd import recipes
from zslib.methods.jrd.diversification import mixture_scales
from zslib.methods.jrd.recipes import (GRID_SEEDS, JRD, KERNEL_ALPHAS, KERNEL_SEEDS, MIXTURE_SEEDS,
                                       MIXTURES, REGULARIZER_NAMES, SWEEP_ALPHAS, SWEEP_SEEDS)
from zslib.present.base import Section, Sections
from zslib.present.jrd.cells import (PAPER, PAPER2_ROW, frame, missing_section, paper4, paper4_entry, paper_cell,
                                     paper_table, provenance)
from zslib.present.jrd.figures import grid_heatmap, mixture_figure, sweep_figure
from zslib.reported import reported_table

__all__ = ["headline_section", "rule_words", "full_profile_section", "variants_section", "alpha_sweep_section",
           "kernels_section", "kernel_rule_note", "kernels_chosen_table", "kernels_chosen_section",
           "mixtures_section", "mixture_grid_section"]


# --------------------------------------------------------------------------------- the main page: the headline

def headline_section(study) -> Sections:
    """The headline on Flowers-102 photographs: the untrained pretrained features, AM-Softmax alone and JRD at the
    paper's alpha = 1 (five seeds, JRD paired with AM-Softmax), and the choice between alpha = 1 and 4 on the
    class-disjoint validation split."""
    out = []
    if study.main is None or study.floor is None:
        out.append(missing_section(study, "the headline grid", "AM-Softmax and JRD", "the untrained features"))
    else:
        raw = study.floor.metric("R@1")
        rows = [{"method": "pretrained features, no training", "unseen R@1 %": f"{100 * raw:.1f}",
                 "seen R@1 %": f"{100 * study.floor.metric('R@1', 'seen'):.1f}"}]
        for name, rs in study.main.items():
            rows.append({"method": name, "unseen R@1 %": format_interval(summarize(rs)),
                         "seen R@1 %": format_interval(summarize(rs, split="seen")),
                         "vs pretrained (pts)": f"{100 * (summarize(rs)[0] - raw):+.1f}"})
        p = study.headline
        rows[-1].update({"vs AM-Softmax (pts)": format_interval(p.diff, signed=True), "verdict": p.verdict})
        pv = study.main[JRD][0].provenance
        out.append(Section(caption=f"{len(study.main[JRD])} seeds per row; the runs were made on {pv.get('device')} "
                                   f"with zslib {pv.get('zslib_version')}, commit {str(pv.get('git_commit'))[:12]}, "
                                   f"{pv.get('timestamp')}.", table=frame(rows, "method")))
    if study.alpha_choice is None:
        out.append(missing_section(study, "the validation of alpha", "the validation runs of alpha"))
        return Sections(out)
    _, chosen, val_p = study.alpha_choice
    out.append(Section(caption=(
        "Validation Recall@1 (the held-out seen classes): "
        + "; ".join(f"alpha {a:g} {format_interval(summarize(rs, 'R@1', 'val'))} %"
                    for a, rs in study.validation.items())
        + f". Alpha 4 minus alpha 1, paired by seed: {format_interval(val_p.diff, digits=1, signed=True)} points "
          f"({val_p.verdict}); the higher "
        f"mean among them is **alpha = {chosen:g}**" + ("." if chosen == 1.0 else
        " (its test runs on the unseen classes are not part of the recorded grid: see the exercises).")
        + rule_words(study.alpha_rule))))
    return Sections(out)


def rule_words(rule) -> str:
    """The book's choice rule over alpha, with JRD switched off (alpha = 0) as a candidate, in words."""
    if rule is None:
        return ""
    said = rule.sentence(lambda k: "alpha = 0 (AM-Softmax alone)" if k == "off" else f"alpha = {k:g}")
    return (f" With JRD switched off as a candidate, the book's choice rule reads: {said}"
            + (" So on validation classes JRD is not chosen, and its rows here show what it does as an ablation."
               if rule.off_won else ""))


def full_profile_section() -> Section:
    """The recorded full-profile JRD runs on CUB (the paper's setting on a GPU) with their provenance, if any,
    beside the paper's Table 1."""
    paper = reported_table("1", PAPER)["rows"][-1]["CUB R@1"]
    full_runs = [r for r in load_results(profile="full", method="jrd")
                 if r.config.dataset == "cub200" and not r.config.validation_fraction]
    if not full_runs:
        return Section(caption="No full-profile JRD run on CUB has been recorded (`results/recorded/`): run this "
                               "notebook with `ZS_PROFILE=full` on a GPU to make one. The paper's Table 1 reports "
                               f"{paper} % Recall@1 for JRD on CUB.")
    lines = [f"- {r.config.name}, alpha = {r.config.method_params.get('alpha')}: unseen Recall@1 "
             f"{100 * r.metric('R@1'):.1f} %, recorded {r.provenance.get('timestamp')} on "
             f"{r.provenance.get('device')}, "
             f"zslib {r.provenance.get('zslib_version')}, commit {r.provenance.get('git_commit')}" for r in full_runs]
    return Section(caption="\n".join(lines) + f"\n\nThe paper's Table 1: {paper} % for JRD on CUB.")


# ------------------------------------------------------------------------ the experiments page, section by section

def variants_section(study) -> Section:
    """The Table 2 analogue on Flowers-102: MRD, JRD-C and JRD-pooling at alpha = 1 beside AM-Softmax and JRD,
    each variant paired by seed with AM-Softmax and with JRD, the paper's CUB Recall@1 beside."""
    if not study.variant_pairs:
        return missing_section(study, "the variants", "the variants", "AM-Softmax and JRD")
    paper2 = paper_table("2")
    rows = []
    for name, rs in {**study.main, **study.variants}.items():
        row = {"method": name, "unseen R@1 %": format_interval(summarize(rs)),
               "seen R@1 %": format_interval(summarize(rs, split="seen"))}
        if name == JRD:
            row.update({"vs AM-Softmax (pts)": format_interval(study.headline.diff, digits=2, signed=True),
                        "verdict": study.headline.verdict})
        if name in study.variant_pairs:
            p, q = study.variant_pairs[name]
            row.update({"vs AM-Softmax (pts)": format_interval(p.diff, digits=2, signed=True), "verdict": p.verdict,
                        "vs JRD (pts)": format_interval(q.diff, digits=2, signed=True), "verdict vs JRD": q.verdict})
        row["paper CUB R@1 % (Table 2)"] = paper_cell(paper2, PAPER2_ROW.get(name), "CUB R@1")
        rows.append(row)
    shown = [r for rs in (*study.main.values(), *study.variants.values()) for r in rs]
    seconds = [r.provenance.get("train_seconds") or math.nan for r in shown]
    return Section(caption=f"{len(study.variants['MRD'])} seeds per row; differences paired by seed, in points with "
                           f"two decimals (the effects are that small). These {len(shown)} runs trained in "
                           f"{min(seconds):.0f} to {max(seconds):.0f} s each {provenance(shown)}. The paper's column: "
                           f"{paper2.attrs['citation']}.", table=frame(rows, "method"))


def alpha_sweep_section(study) -> Sections | Section:
    """The Figs. 4-5 analogue on Flowers-102: JRS, JMMD and JIntra at every swept weight, five seeds, unseen
    Recall@1 and its paired difference from AM-Softmax with 95% bands (:func:`zslib.present.jrd.figures.
    sweep_figure`), the table of differences and each curve's shape (the weight of the largest mean gain, and
    whether the largest weight falls clearly below it)."""
    if not study.sweep_pairs:
        return missing_section(study, "the alpha sweep", "the alpha sweep")
    table = pd.DataFrame({label: {a: f"{format_interval(study.sweep_pairs[reg, a].diff, digits=2, signed=True)} "
                                     f"{study.sweep_pairs[reg, a].verdict}"
                                  for a in SWEEP_ALPHAS} for reg, label in REGULARIZER_NAMES.items()})
    table.index.name = "alpha"
    lines = []
    for reg, label in REGULARIZER_NAMES.items():
        peak, word, fall = study.sweep_shape[reg]
        lines.append(f"- **{label}**: the largest mean gain is at alpha {peak:g} "
                     f"({format_interval(study.sweep_pairs[reg, peak].diff, digits=2, signed=True)} points, {word}); "
                     f"alpha {SWEEP_ALPHAS[-1]:g} "
                     f"minus alpha {peak:g}: "
                     + (f"{format_interval(fall.diff, digits=2, signed=True)} points ({fall.verdict})." if fall
                        else "the same weight."))
    return Sections([Section(figure=sweep_figure(study)),
                     Section(caption=f"Unseen Recall@1 minus AM-Softmax (points, {len(SWEEP_SEEDS)} seeds paired), "
                                     "with the verdict.", table=table, notes=["\n".join(lines)])])


def kernels_section(study) -> Section:
    """The Table 4 analogue on Flowers-102: JRD at alpha = 1 with every kernel, three seeds, unseen and seen
    Recall@1 paired with the Gaussian mixture, the paper's Recall@1 and alpha beside."""
    if study.kernels is None:
        return missing_section(study, "the kernels", "the kernels")
    rows = []
    for k, rs in study.kernels.items():
        row = {"kernel": k, "unseen R@1 %": format_interval(summarize(rs)),
               "seen R@1 %": format_interval(summarize(rs, split="seen"))}
        if k in study.kernel_pairs:
            unseen, seen = study.kernel_pairs[k]
            row.update({"unseen vs mixture (pts)": format_interval(unseen.diff, digits=2, signed=True), "verdict": unseen.verdict,
                        "seen vs mixture (pts)": format_interval(seen.diff, digits=2, signed=True), "seen verdict": seen.verdict})
        rows.append({**row, "paper CUB R@1 % (Table 4)": paper4_entry(k)})
    return Section(caption=f"JRD, alpha = 1 for every kernel; {len(KERNEL_SEEDS)} seeds per row, paired by seed. The "
                           f"paper's column: {paper4()[0].attrs['citation']}.", table=frame(rows, "kernel"))


def _kernel_label(key) -> str:
    """A candidate of the kernels' weight choice in words: "off" is JRD switched off."""
    return "alpha = 0 (JRD off)" if key == "off" else f"alpha = {key:g}"


def kernel_rule_note(study) -> str:
    """What the book's choice rule made of each kernel's weight on the validation classes (``study.kernel_rules``;
    Table 4 of Chu et al., ICML 2020), as Markdown: one sentence per kernel from
    :meth:`zslib.engine.choice.Choice.sentence`, then which kernels get a weight and which keep JRD off, whose rows
    at the leading weight are ablations."""
    rules = study.kernel_rules
    if not rules:
        return ("*The validation runs of the kernels or of alpha = 0 are not all recorded in this copy of the book, so "
                "the choice rule cannot be applied to the kernels' weights.*")
    lines = [f"- **{k}**: {c.sentence(_kernel_label)}" for k, c in rules.items()]
    taken = [f"{k} ({_kernel_label(c.chosen)})" for k, c in rules.items() if not c.off_won]
    kept = [k for k, c in rules.items() if c.off_won]
    ties = [k for k, c in rules.items() if c.leader == c.off and any(
        c.means[a].mean == c.means[c.off].mean for a in KERNEL_ALPHAS)]
    seeds = ", ".join(map(str, KERNEL_SEEDS))
    head = (f"The book's choice rule on the validation classes (seeds {seeds}), with JRD switched off (alpha = 0: "
            "AM-Softmax alone on the same validation split and seeds) among each kernel's candidates, listed first: a "
            "weight is chosen only if its paired 95% interval over alpha = 0 lies above zero.")
    tail = (f"The rule chooses a weight for: {', '.join(taken) or 'no kernel'}; it keeps JRD off for: "
            f"{', '.join(kept) or 'no kernel'}.")
    if kept:
        tail += (" For those kernels the rule's setting on the test classes is AM-Softmax alone, and their rows of the "
                 "table, at the leading weight, are **ablations**: they show what that weight does, not a setting "
                 "chosen on validation classes.")
    if ties:
        tail += (f" For {', '.join(ties)} some weight ties with alpha = 0 on the mean; the tie goes to alpha = 0, "
                 "listed first.")
    return "\n\n".join([head, "\n".join(lines), tail])


def kernels_chosen_table(study):
    """The table of :func:`kernels_chosen_section`, one row per kernel: its validation Recall@1 at alpha = 0 (JRD
    off) and at each of the recipes' ``KERNEL_ALPHAS``, the leading weight, the rule's outcome (``"chosen: alpha =
    ..."`` or ``"JRD off: ablation row"``), and at the leading weight its unseen Recall@1 paired with JRD and with
    AM-Softmax alone; ``None`` when the validation runs are not recorded."""
    if not study.kernel_alpha:
        return None
    rules = study.kernel_rules
    rows = []
    for k, lead in study.kernel_alpha.items():
        row = {"kernel": k}
        if rules:
            row["val R@1 % at 0 (off)"] = f"{100 * rules[k].means['off'].mean:.2f}"
        row.update({f"val R@1 % at {a:g}": f"{100 * study.kernel_validation_means[k, a]:.2f}" for a in KERNEL_ALPHAS})
        row["leading alpha"] = f"{lead:g}"
        if rules:
            row["rule"] = "JRD off: ablation row" if rules[k].off_won else f"chosen: alpha = {rules[k].chosen:g}"
        if study.kernels_chosen is not None:
            row["unseen R@1 %"] = format_interval(summarize(study.kernels_chosen[k]))
            if k in study.kernel_chosen_pairs:
                p = study.kernel_chosen_pairs[k]
                row.update({"vs JRD (pts)": format_interval(p.diff, digits=2, signed=True), "verdict": p.verdict})
            if k in study.kernel_off_pairs:
                p = study.kernel_off_pairs[k]
                row.update({"vs AM-Softmax (pts)": format_interval(p.diff, digits=2, signed=True),
                            "verdict vs AM-Softmax": p.verdict})
        rows.append({**row, "paper alpha": paper4_entry(k, recall=False)})
    return frame(rows, "kernel")


def kernels_chosen_section(study) -> Section:
    """Each kernel at its leading weight on the validation classes (three seeds), with what the book's choice rule
    made of it (JRD off among the candidates, :func:`kernel_rule_note`), then tested on the unseen classes and
    paired with JRD (the Gaussian mixture at alpha = 1) and with AM-Softmax alone; a row whose rule keeps JRD off is
    labelled an ablation (:func:`kernels_chosen_table`)."""
    table = kernels_chosen_table(study)
    if table is None:
        return missing_section(study, "the kernels' validation runs", "the kernels' validation runs")
    return Section(caption=f"The leading alpha of each kernel on validation classes ({len(KERNEL_SEEDS)} seeds), then "
                           f"tested on the unseen classes ({len(KERNEL_SEEDS)} seeds), paired with JRD (Gaussian "
                           "mixture, alpha = 1) and with AM-Softmax alone (alpha = 0). The column 'rule' says whether "
                           "the book's choice rule takes that weight.", table=table, notes=[kernel_rule_note(study)])


def mixtures_section(study) -> Sections | Section:
    """The Fig. 6 analogue on the diagonal K = K' in {1, 2, 3, 5}: JRD at alpha = 1, five seeds, each mixture
    paired with one Gaussian per layer, (1, 1); with the checks that (3, 3) is the chapter's JRD config and that
    (1, 1) computes what the single-Gaussian kernel of the Table 4 analogue computes."""
    if study.mixtures is None:
        return missing_section(study, "the mixture sizes", "the mixture sizes (Fig. 6)")
    three = recipes.mixture_config((3, 3))
    same = config_hash(three) == config_hash(recipes.real_configs()[JRD])
    notes = [f"(K, K') = (3, 3) is {'the same config as' if same else 'not the config of'} the chapter's JRD (config "
             f"hash {config_hash(three)})."]
    if study.kernels is not None:
        gap = max(abs(a.metric("R@1") - b.metric("R@1"))
                  for a, b in zip(study.mixtures[1, 1], study.kernels["gaussian"]))
        notes.append(f"(1, 1) against the single-Gaussian kernel of the Table 4 analogue, seeds {KERNEL_SEEDS}: the "
                     f"largest difference in unseen Recall@1 is {gap:.1e}.")
    rows = []
    for m in MIXTURES:
        row = {"(K, K')": str(m), "pooling bandwidths / tau": ", ".join(f"{s:g}" for s in mixture_scales(m[0])),
               "embedding bandwidths / tau": ", ".join(f"{s:g}" for s in mixture_scales(m[1])),
               "unseen R@1 %": format_interval(summarize(study.mixtures[m])),
               "seen R@1 %": format_interval(summarize(study.mixtures[m], split="seen"))}
        if m in study.mixture_pairs:
            row.update({"vs (1, 1) (pts)": format_interval(study.mixture_pairs[m].diff, digits=2, signed=True),
                        "verdict": study.mixture_pairs[m].verdict})
        rows.append(row)
    return Sections([Section(caption=" ".join(notes) + f" {len(MIXTURE_SEEDS)} seeds per mixture, paired by seed with "
                                                       "(1, 1).", table=frame(rows, "(K, K')")),
                     Section(figure=mixture_figure(study))])


def mixture_grid_section(study) -> Sections | Section:
    """The whole Fig. 6 grid, K, K' in the recipes' ``GRID_SIZES``: a heatmap of the mean unseen Recall@1 with each
    cell's paired difference from (1, 1) (:func:`zslib.present.jrd.figures.grid_heatmap`), and the table of every
    cell."""
    if study.mixture_grid is None:
        return missing_section(study, "the (K, K') grid", "the (K, K') grid (Fig. 6)")
    fig, means = grid_heatmap(study)
    rows = [{"(K, K')": str(m), "unseen R@1 %": format_interval(summarize(rs)),
             "seen R@1 %": format_interval(summarize(rs, split="seen")),
             "vs (1, 1) (pts)": format_interval(study.grid_pairs[m].diff, digits=2, signed=True) if m in study.grid_pairs else "",
             "verdict": study.grid_pairs[m].verdict if m in study.grid_pairs else "reference"}
            for m, rs in study.mixture_grid.items()]
    return Sections([Section(figure=fig), Section(
        caption=f"The colour scale spans only the range of the cell means, {means.min():.2f}% to {means.max():.2f}% "
                f"({means.max() - means.min():.2f} points). JRD, alpha = 1; {len(GRID_SEEDS)} seeds per cell (seeds "
                f"{', '.join(map(str, GRID_SEEDS))}), paired by seed with (1, 1).", table=frame(rows, "(K, K')"))])
