"""The ZSML experiments page's ablations and further rows (Xu et al., IJCAI 2019): the Table 8 and 7 analogues
(alpha and the number of kernels k on the test classes), NCA on the same features, the Table 9 and 6 analogues
(the linear relation, the paper's S, ZSML after a lifted-structure embedding), every pair of the unseen images, and
the inter-dataset transfer of Tables 4-5.
"""
from __future__ import annotations

from collections.abc import Mapping

from zslib.engine.stats import format_interval, interval, paired, summarize
from zslib.methods.zsml.recipes import ABL_SEEDS, ALPHAS, LIFTED
from zslib.present.base import Section
from zslib.present.zsml.choices import rows_on_sample
from zslib.present.zsml.numbers import (METRICS, as_pair, by_seed, cells, differences, frame, printed,
                                        seed_difference, seed_list)
from zslib.present.zsml.outcomes import Experiments, best_share_words, settings
from zslib.present.zsml.study import ZSMLStudy

__all__ = ["ARM_COLUMNS", "MEMORY_BUDGET_MIB", "alpha_ablation", "k_ablation", "nca", "arms", "every_pair",
           "transfer"]

#: The columns of the Table 9 and 6 analogue.
ARM_COLUMNS = ("R@1", "R@2", "R@4", "R@8", "NMI")

#: The memory budget the every-pair analysis is held against (a CPU machine's share for one process).
MEMORY_BUDGET_MIB = 2048


def _ablation(grid_runs: Mapping, reference, label: str, metrics=("R@1", "ACC")):
    """Rows of a descriptive ablation and each value's paired difference from ``reference`` (``{value: {metric:
    Paired}}``)."""
    rows, vs = [], {}
    for value, rs in grid_runs.items():
        row = {label: f"{value:g}", **cells(rs)}
        if value != reference:
            vs[value] = {m: paired(grid_runs[reference], rs, m) for m in metrics}
            row.update({f"{m} minus {label} {reference:g} (pts)":
                        format_interval(p.diff, signed=True) + f" ({p.verdict})" for m, p in vs[value].items()})
        rows.append(row)
    return rows, vs


def alpha_ablation(ex: Experiments, study: ZSMLStudy) -> None:
    """Table 8 analogue: each alpha of the validation grid trained on all seen classes (seeds 0-2) and scored on
    the test classes, against alpha 0.3; and the order of the alphas on the test and on the validation classes."""
    ex.alpha_runs = study.alpha_ablation()
    if ex.alpha_runs is None:
        return
    rows, ex.ablation_vs = _ablation(ex.alpha_runs, 0.3, "alpha")
    rows.insert(0, {"alpha": "Euclidean", **cells(ex.alpha_runs[0.3], prefix="input ")})
    ex.test_order = sorted(ALPHAS, key=lambda a: -summarize(ex.alpha_runs[a], "R@1")[0])
    ex.val_order = sorted(ALPHAS, key=lambda a: -ex.val_mean[a]) if ex.val_runs is not None else None
    order = "alpha by mean unseen Recall@1, best first: " + ", ".join(f"{a:g}" for a in ex.test_order)
    if ex.val_order is not None:
        order += "; by mean validation Recall@1: " + ", ".join(f"{a:g}" for a in ex.val_order)
    ex.alpha_ablation = Section(f"*Unseen Flowers-102 classes, seeds {seed_list(ABL_SEEDS)}; % [95% CI].*",
                                frame(rows, "alpha"), notes=[order[0].upper() + order[1:] + "."],
                                paper=printed("8"))


def k_ablation(ex: Experiments, study: ZSMLStudy) -> None:
    """Table 7 analogue: the number of relation kernels k at alpha 0.3 (seeds 0-2) on the test classes, against
    the paper's k = 96."""
    ex.k_runs = study.k_ablation()
    if ex.k_runs is None:
        return
    rows, ex.k_vs = _ablation(ex.k_runs, 96, "k")
    ex.k_ablation = Section(f"*Unseen Flowers-102 classes, alpha 0.3, seeds {seed_list(ABL_SEEDS)}; % [95% CI].*",
                            frame(rows, "k"), paper=printed("7"))


def nca(ex: Experiments, study: ZSMLStudy) -> None:
    """NCA (scikit-learn's Mahalanobis learner) on the same features and sampled images: NCA minus Euclidean and
    ZSML minus NCA, paired by seed."""
    runs = study.nca()
    if runs is None or ex.real is None:
        return
    nr, zr = runs["NCA"], ex.real.zsml
    ex.nca_runs = nr
    ex.nca_vs = {m: (seed_difference(ex.real.euclid[m], by_seed(nr, m)),
                     seed_difference(by_seed(nr, m), by_seed(zr, m))) for m in METRICS}
    rows = rows_on_sample(ex.real, ("NCA (Mahalanobis)", nr), ("ZSML, alpha 0.3", zr))
    rows[0]["row"] = "Euclidean"
    ex.nca = Section(f"*Unseen Flowers-102 classes, {len(nr)} seeds, the same sampled images in every row; "
                     "% [95% CI].*", frame(rows, "row"),
                     notes=[differences("Paired differences (points, 95% CI):",
                                  {m: [("NCA minus Euclidean", d1), ("ZSML minus NCA", d2)]
                                   for m, (d1, d2) in ex.nca_vs.items()})])


def arms(ex: Experiments, study: ZSMLStudy) -> None:
    """Tables 9 and 6 analogues at the best validation settings (:func:`zslib.present.zsml.outcomes.settings`):
    LR + Reloss for 200 and 1,000 steps, the paper's S (1,000, 1,000) and Lifted + ZSML, each against that
    configuration (Lifted + ZSML against its own frozen lifted embedding's Euclidean distance), paired by seed; the
    seen classes' Recall@1 shows what a run fitted."""
    if ex.zf is None:
        return
    ex.arm_runs = runs = study.arms(*settings(ex))
    if runs is None:
        return
    zf, lifted = ex.zf, runs[LIFTED]

    def row(name, rs, prefix=""):
        out = {"row": name, **cells(rs, ARM_COLUMNS, prefix)}
        if not prefix:
            out["seen R@1 %"] = format_interval(summarize(rs, "R@1", "seen"))
        return out

    rows = [row("Euclidean (pretrained features)", zf, "input "),
            row("ZSML (MR), S (256, 256): " + ("ablation (best share)" if ex.share_is_ablation
                                                else "the chosen configuration"), zf)]
    rows += [row(name, runs[name]) for name in runs if name != LIFTED]
    rows += [row("Lifted (Euclidean on the frozen lifted embedding)", lifted, "input "), row(LIFTED, lifted)]
    for name in runs:
        if name != LIFTED:
            ex.arm_vs[name] = {m: as_pair(paired(zf, runs[name], m)) for m in ("R@1", "NMI")}
    ex.arm_vs[LIFTED] = {m: seed_difference(by_seed(lifted, f"input {m}"), by_seed(lifted, m)) for m in ("R@1", "NMI")}
    ex.arms = Section(
        f"*Unseen Flowers-102 classes, {len(zf)} seeds, the same sampled images in every row (seen R@1: the seen "
        f"classes' test images); alpha {ex.pos_alpha:g}, {best_share_words(ex)}; % [95% CI].*",
        frame(rows, "row"),
        notes=[differences("Paired differences (points, 95% CI):",
                     {f"{name} minus {'Lifted' if name == LIFTED else 'ZSML (MR), S (256, 256)'}": list(vs.items())
                      for name, vs in ex.arm_vs.items()})],
        paper=printed("9", "6"))


def every_pair(ex: Experiments, study: ZSMLStudy) -> None:
    """The ``every_pair`` analysis of the best validation settings at seed 0: every ordered pair of the unseen
    images scored, its time and peak memory, and its metrics beside those of the run's own sample."""
    if ex.zf is None:
        return
    ev = ex.every = study.every_pair(*settings(ex))
    if ev is None:
        return
    pv, sample = ev.provenance, ex.zf[0]
    text = (f"{int(ev['n_images']):,} unseen images, {int(ev['pairs']):,} ordered pairs scored in "
            f"{ev['seconds'] / 60:.0f} min ({1e6 * ev['seconds'] / ev['pairs']:.0f} µs per pair) on "
            f"{pv.get('device')}, torch threads "
            f"{pv.get('torch_threads')}; the score matrix takes {ev['matrix_mib']:.0f} MiB; the peak resident "
            f"memory of the process while scoring was {ev['peak_rss_mib'] / 1024:.2f} GiB"
            + (" (the kernel's peak counter was reset before scoring)" if ev["peak_since_reset"] else
               " (the peak of the whole process: the counter could not be reset)")
            + f", {'within' if ev['peak_rss_mib'] <= MEMORY_BUDGET_MIB else 'above'} a budget of "
            f"{MEMORY_BUDGET_MIB // 1024} GB. Model {pv.get('model_from')} (largest metric difference to the record "
            f"{pv.get('reproduced_max_metric_diff', 0):.4f}), commit {str(pv.get('git_commit'))[:12]}, "
            f"{pv.get('timestamp')}.")
    rows = [{"metric": m, "ZSML, every image %": f"{100 * ev[m]:.1f}",
             "Euclidean, every image %": f"{100 * ev['input ' + m]:.1f}",
             "ZSML, the run's sample %": f"{100 * sample.metric(m):.1f}",
             "Euclidean, the run's sample %": f"{100 * sample.metric('input ' + m):.1f}"}
            for m in ("R@1", "R@2", "R@4", "R@8", "ACC", "NMI", "Purity")]
    ex.every_pair = Section(text, frame(rows, "metric"), notes=[
        f"On every unseen image, ZSML minus Euclidean: Recall@1 {100 * (ev['R@1'] - ev['input R@1']):+.1f} points, "
        f"NMI {100 * (ev['NMI'] - ev['input NMI']):+.1f} points (one seed, one model: no interval)."])


def transfer(ex: Experiments, study: ZSMLStudy) -> None:
    """Tables 4-5 analogue: ZSML at the best validation settings trained on Flowers-102 or SynthParts (pretrained
    features of both) and tested on the other's unseen classes, against ZSML trained on the target itself and the
    Euclidean distance, paired by seed."""
    if ex.zf is None:
        return
    synth_runs = study.synthparts(*settings(ex))
    records = study.transfer(*settings(ex))
    if synth_runs is None or records is None:
        return
    zf, zs, (to_synth, to_flowers) = ex.zf, synth_runs["SynthParts"], records
    xfer = ex.xfer = {  # (trained on, tested on) -> {metric: {seed: value}}
        ("Euclidean", "Flowers-102"): {m: by_seed(zf, f"input {m}") for m in METRICS},
        ("Euclidean", "SynthParts"): {m: by_seed(zs, f"input {m}") for m in METRICS},
        ("Flowers-102", "Flowers-102"): {m: by_seed(zf, m) for m in METRICS},
        ("SynthParts", "SynthParts"): {m: by_seed(zs, m) for m in METRICS},
        ("Flowers-102", "SynthParts"): {m: by_seed(to_synth, m) for m in METRICS},
        ("SynthParts", "Flowers-102"): {m: by_seed(to_flowers, m) for m in METRICS}}
    rows = []
    for source in ("Euclidean", "Flowers-102", "SynthParts"):
        row = {"trained on": source if source == "Euclidean" else f"ZSML trained on {source}"}
        for target in ("Flowers-102", "SynthParts"):
            for m in ("R@1", "NMI", "ACC"):
                row[f"-> {target} {m} %"] = format_interval(interval(xfer[source, target][m].values()))
        rows.append(row)
    notes = []
    for source, target in (("SynthParts", "Flowers-102"), ("Flowers-102", "SynthParts")):
        ex.xfer_vs[target] = {m: (seed_difference(xfer[target, target][m], xfer[source, target][m]),
                                  seed_difference(xfer["Euclidean", target][m], xfer[source, target][m]))
                              for m in ("R@1", "NMI")}
        notes.append(differences(f"{source} -> {target} minus (points, 95% CI):",
                                 {m: [(f"trained on {target} itself", d1), ("the Euclidean distance", d2)]
                                  for m, (d1, d2) in ex.xfer_vs[target].items()}))
    ex.transfer = Section(f"*Unseen classes of each target, {len(zf)} seeds, the same sampled images in each column; "
                          "% [95% CI].*", frame(rows, "trained on"), notes=notes,
                          paper=printed("4", "5"))
