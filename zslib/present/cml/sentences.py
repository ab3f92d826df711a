"""The CML chapter's generated sentences (Chen, Deng, Wang and Zhang, TNNLS 2022; ``chen2022cml``): every sentence
is written from the numbers it is given (the statistics are :mod:`zslib.engine.stats`); nothing here states a result
of its own.

* captions: :func:`grid_note`, :func:`weights_caption`, :func:`provenance_caption`;
* the verdicts: :func:`quick_verdict` (the quick profile's Tables II-V analogue), :func:`real_verdict_section` (the
  real photographs), :func:`key_findings` (the box the chapter opens with), :func:`what_we_found` (the list it
  closes with);
* the checks of Lemmas 1-5 as sentences: :func:`lemma_bounds_text`, :func:`mixture_text`, :func:`hoeffding_text`;
* the full profile: :func:`full_runs_section`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from zslib.analysis.findings import Findings, findings_box, found_list, not_recorded_box, real_comparison, recorded
from zslib.analysis.verdict import verb_words
from zslib.engine.stats import format_interval, paired, summarize
from zslib.methods.cml.recipes import (GREEK, REAL_LOSSES, REAL_WEIGHTS, VARIANT_TERMS, ablations, choose_weights,
                                       floor_config, real_sweep_grid, real_test_grid, rule_choices)
from zslib.present.base import Section
from zslib.reported import reported_frame
from zslib.engine.choice import VALIDATION_SEEDS

__all__ = ["LOSS_NAMES", "grid_note", "weights_caption", "provenance_caption", "quick_verdict", "real_verdict_section",
           "key_findings", "what_we_found", "lemma_bounds_text", "mixture_text", "hoeffding_text", "full_runs_section"]

#: The losses as a sentence names them.
LOSS_NAMES = {"triplet": "the triplet loss", "npair": "N-pair", "binomial": "the binomial deviance"}


def weights_caption(sweep: Mapping, chosen: Mapping, seconds: float, trained: bool) -> str:
    """Markdown: how many validation runs were read or trained, the weights of CML's Eq. 11 that led the validation
    grid for each loss (``chosen`` from :func:`choose_weights`), and what the book's choice rule made of each
    (:func:`rule_choices`): where "off" (the loss alone) wins, the CML rows trained at the leader are ablations."""
    count = sum(map(len, sweep.values()))
    seeds = sorted({r.config.seed for rs in sweep.values() for r in rs})
    picks = "; ".join(f"{loss}: " + ", ".join(f"{GREEK[t]} = {chosen[loss, t]:g}" for t in REAL_WEIGHTS)
                      for loss in REAL_LOSSES)
    how = "trained or loaded" if trained else "recorded"
    rule = rule_choices(sweep)
    kept_off = [f"{GREEK[t]} with {LOSS_NAMES[loss]}" for (loss, t), c in rule.items() if c.off_won]
    taken = [f"{GREEK[t]} = {c.chosen:g} with {LOSS_NAMES[loss]}" for (loss, t), c in rule.items() if not c.off_won]
    if not taken:
        verdict = ("By the book's choice rule, which takes a weight only when it is clearly above the loss alone on "
                   "the validation classes, no weight is chosen: the rule keeps every loss without confusion, so every "
                   "CML row of the table below is an ablation that shows what the leading weight does.")
    else:
        verdict = (f"By the book's choice rule (a weight only when clearly above the loss alone on the validation "
                   f"classes) these weights are chosen: {', '.join(taken)}; it keeps the loss alone for "
                   f"{', '.join(kept_off) or 'none'}, and the CML rows that use those are ablations.")
    return (f"The validation sweep: {count} runs ({how}, read in {seconds:.1f} s). The leading weights on the "
            f"validation classes, the highest mean validation Recall@1 over seeds {', '.join(map(str, seeds))}: "
            f"{picks}. {verdict}")


def grid_note(runs: Mapping, seconds: float) -> str:
    """Markdown under the quick table's grid: how many runs, how many were trained by this execution and how many
    are recorded runs (their machine, commit and date), and the CML weights the triplet rows trained with."""
    flat = [r for rs in runs.values() for r in rs]
    recorded = [r for r in flat if r.path is not None and r.path.parent.name == "recorded"]
    text = f"{len(flat)} runs ready in {seconds:.1f} s"
    if recorded:
        pv = recorded[0].provenance
        text += (f"; {len(recorded)} of them are recorded runs, loaded (made on {pv.get('device')}, commit "
                 f"`{str(pv.get('git_commit'))[:12]}`, {str(pv.get('timestamp'))[:10]}; the page of recorded runs "
                 f"lists them), {len(flat) - len(recorded)} trained here")
    weights = next((rs[0].config.method_params for (loss, variant), rs in runs.items()
                    if loss == "triplet" and variant == "cml"), None)
    return text + (f". CML weights as trained, triplet: `{weights}`." if weights is not None else ".")


def provenance_caption(runs: Mapping, floor) -> str:
    """Markdown: seeds per row of the real-photograph table (CML, TNNLS 2022, Tables II-V analogue) and where and when
    the untrained floor was recorded."""
    pv = floor.provenance
    per_row = len(next(iter(runs.values())))
    return (f"Real profile, {per_row} seeds per row; the runs were made on {pv.get('device')} with zslib "
            f"{pv.get('zslib_version')}, commit `{str(pv.get('git_commit'))[:12]}`, {pv.get('timestamp')}.")


def _claim_counts(runs: Mapping, losses: Sequence[str]) -> tuple[int, int, int, int]:
    """For the CML variants of ``losses``: how many there are, how many clearly raised unseen Recall@1 over their
    baseline, how many clearly lowered seen Recall@1, how many did both (the paper's claim, Sec. IV-D1)."""
    n = ups = downs = both = 0
    for (loss, variant), rs in runs.items():
        if variant == "baseline" or loss not in losses:
            continue
        up = paired(runs[loss, "baseline"], rs).verdict == "up"
        down = paired(runs[loss, "baseline"], rs, split="seen").verdict == "down"
        n, ups, downs, both = n + 1, ups + up, downs + down, both + (up and down)
    return n, ups, downs, both


def _claim_sentence(n: int, ups: int, downs: int, both: int, where: str, ablations: bool = False) -> str:
    """The count of the paper's two-part claim; for rows the choice rule did not choose (``ablations``) the counts
    say "interval above / below zero" instead of "clearly" (:mod:`zslib.analysis.verdict`)."""
    if ablations:
        return (f"Of the {n} CML variants {where} (ablations: the rule chose no weight for them), {ups} had unseen "
                f"Recall@1 above their baseline and {downs} seen Recall@1 below it (95% intervals on one side of "
                f"zero); {both} did both, which is the paper's two-part claim (Sec. IV-D1).")
    return (f"Of the {n} CML variants {where}, {ups} raised unseen Recall@1 clearly over their baseline and {downs} "
            f"lowered seen Recall@1 clearly; {both} did both, which is the paper's two-part claim (Sec. IV-D1).")


def real_verdict_section(study) -> Section:
    """The real-data verdict on the runs of ``study`` (:class:`~zslib.present.cml.study.CmlStudy`): how many CML
    variants on Flowers-102 photographs raised unseen Recall@1 and lowered seen Recall@1 clearly (paired by seed),
    and which rows lie clearly above or below the untrained features (their 95% interval entirely on one side)."""
    runs, floor = study.runs(), study.floor()
    if runs is None or floor is None:
        return Section(caption=study.missing_note())
    raw = floor.metric("R@1")
    below = [f"{loss} {variant}" for (loss, variant), rs in runs.items() if summarize(rs)[2] < raw]
    above = [f"{loss} {variant}" for (loss, variant), rs in runs.items() if summarize(rs)[1] > raw]
    return Section(notes=[
        _claim_sentence(*_claim_counts(runs, REAL_LOSSES), "on real photographs"),
        f"Against the untrained pretrained features ({100 * raw:.1f} % unseen Recall@1), clearly above them: "
        f"{', '.join(above) or 'none'}; clearly below them: {', '.join(below) or 'none'}."])


def quick_verdict(verdict, runs: Mapping, fit_floor: float = 0.1) -> str:
    """The quick profile's verdict on CML's claim (Sec. IV-D1: confusion lowers seen and raises unseen Recall@1) as
    Markdown, from ``verdict`` (the chapter's table: per CML variant the columns
    ``"unseen effect"`` and ``"seen effect"``) and ``runs`` (``{(loss, variant): runs}``). A loss whose baseline ends
    below ``fit_floor`` seen Recall@1 did not learn the training task, and its rows cannot answer the question."""
    def counts(split):
        return ", ".join(f"{v} {'with no clear effect' if k == 'no clear effect' else k}"
                         for k, v in verdict[f"{split} effect"].value_counts().items())

    losses = list(dict.fromkeys(loss for loss, _ in runs))
    unfit = [l for l in losses if summarize(runs[l, "baseline"], "R@1", "seen")[0] < fit_floor]
    fit = [l for l in losses if l not in unfit]
    n, ups, downs, both = _claim_counts(runs, fit)
    if not fit:
        outcome = "No baseline fitted the seen classes, so no row can answer the question at this size."
    elif ups == n and downs == n:
        outcome = "The paper's claim is reproduced here."
    elif ups == 0:
        outcome = "So the paper's claim is not reproduced at this size."
    else:
        outcome = "The paper's claim holds only in part here."
    claim = _claim_sentence(n, ups, downs, both, f"of the losses that fit ({', '.join(fit)})") + " " if fit else ""
    return (
        f"Unseen Recall@1 against the baseline: {counts('unseen')}; seen Recall@1: {counts('seen')}. Baselines that "
        f"did not even fit the seen classes (seen Recall@1 below {100 * fit_floor:.0f} %): "
        f"{', '.join(unfit) or 'none'}.\n\n{claim}{outcome}")


def _recorded_real():
    """``(floor, runs, ablations)`` of the chapter's real section from the stored runs (the untrained features, the
    test grid with the weights of :func:`choose_weights` on the stored validation sweep, and the ``(loss, term)``
    pairs the rule kept off), or ``None`` when any is missing."""
    sweep = recorded(real_sweep_grid(), VALIDATION_SEEDS)
    if sweep is None:
        return None
    floor = recorded({"f": floor_config()}, (0,))
    runs = recorded(real_test_grid(choose_weights(sweep)))
    if floor is None or runs is None:
        return None
    return floor["f"][0], runs, ablations(sweep)


def key_findings() -> Findings:
    """The "Key findings" box the CML chapter opens with, generated from the recorded real-profile runs: CML
    (Eq. 11, each weight through the book's choice rule on validation classes, :func:`choose_weights`) against the
    trained baseline head for each of the paper's three losses, paired by seed, and the count of variants that show
    the paper's claim. A row whose weights the rule did not choose is named an ablation, without "clearly"."""
    got = _recorded_real()
    if got is None:
        return not_recorded_box()
    floor, runs, kept = got
    first, rest = REAL_LOSSES[0], REAL_LOSSES[1:]

    def status(loss):
        return "ablation" if any((loss, t) in kept for t in VARIANT_TERMS["cml"]) else "chosen"

    head = real_comparison(floor, runs[first, "baseline"], runs[first, "cml"], f"CML with {LOSS_NAMES[first]}",
                           f"the {first} baseline head", status=status(first))
    others = [f"{verb_words(p.verdict, status(loss) == 'chosen')} {'unseen Recall@1' if i == 0 else 'it'} with "
              f"{LOSS_NAMES[loss]} ({format_interval(p.diff, signed=True)} points"
              f"{'; an ablation' if status(loss) == 'ablation' else ''})"
              for i, (loss, p) in enumerate((loss, paired(runs[loss, "baseline"], runs[loss, "cml"])) for loss in rest)]
    return findings_box([
        head[0],
        "Against their own baseline heads, CML " + " and ".join(others) + ".",
        _claim_sentence(*_claim_counts(runs, REAL_LOSSES), "(CML-e, CML-d and CML for three losses)",
                        ablations=len(kept) == len(REAL_LOSSES) * len(REAL_WEIGHTS))
        + (f" The rule kept the loss alone for {len(kept)} of the {len(REAL_LOSSES) * len(REAL_WEIGHTS)} pairs of "
           "loss and confusion term, so the rows that use those terms are ablations." if kept else ""),
        head[1]])


def what_we_found(runs: Mapping, study, fit_floor: float = 0.1) -> Findings:
    """The "What we found" list the CML chapter closes with, generated from the runs the chapter showed: the quick
    profile's variants that fit (``runs``, ``{(loss, variant): runs}``), the real photographs and the validation
    sweep judged by the book's one rule (:func:`~zslib.methods.cml.recipes.rule_choices`), both of ``study``
    (:class:`~zslib.present.cml.study.CmlStudy`)."""
    real_runs, floor, sweep = study.runs(), study.floor(), study.sweep()
    if real_runs is None or floor is None or sweep is None:
        return found_list([study.missing_note().replace("*", "")])
    out = []
    losses = list(dict.fromkeys(loss for loss, _ in runs))
    fit = [l for l in losses if summarize(runs[l, "baseline"], "R@1", "seen")[0] >= fit_floor]
    if fit:
        out.append("On the quick profile: " + _claim_sentence(*_claim_counts(runs, fit), f"of the losses that fit "
                                                               f"the seen classes ({', '.join(fit)})"))
    else:
        out.append("On the quick profile no baseline fitted the seen classes, so no row there tests the claim.")
    rule = rule_choices(sweep)
    out.append("On Flowers-102 photographs: " + _claim_sentence(*_claim_counts(real_runs, REAL_LOSSES),
                                                               "on real photographs",
                                                               ablations=all(c.off_won for c in rule.values())))
    raw = floor.metric("R@1")
    above = sum(summarize(rs)[1] > raw for rs in real_runs.values())
    out.append(f"{above} of the {len(real_runs)} real-photograph rows lie clearly above the untrained features "
               f"({100 * raw:.1f}% unseen Recall@1): training a head on the seen flowers has to keep what ImageNet "
               "features already give before it can add to it.")
    kept = sum(c.off_won for c in rule.values())
    out.append(f"On validation classes the book's choice rule keeps the loss alone for {kept} of the {len(rule)} "
               "pairs of loss and confusion term, so the CML rows tested on the unseen classes are "
               + ("ablations throughout." if kept == len(rule) else "ablations where it does."))
    return found_list(out)


def _worst(values) -> float:
    return float(np.max(np.abs(np.asarray(values, dtype=float))))


def lemma_bounds_text(frame, rel_tol: float = 1e-9) -> str:
    """Lemmas 1 and 2 (Eqs. 4-5) on random class pairs, as Markdown: ``frame`` has one row per pair with the columns
    ``EC``, ``half_GED``, ``MMD2`` and ``spreads`` (tr Sigma_I + tr Sigma_J)."""
    tol = rel_tol * (1 + frame.EC.abs())

    def held(lower):
        broken = int((frame.EC < lower - tol).sum())
        return "in every pair" if broken == 0 else f"in all but {broken} pairs"

    return (
        f"Over {len(frame)} random pairs of classes, EC ≥ GED/2 held {held(frame.half_GED)} (Lemma 1) and EC ≥ MMD² "
        f"{held(frame.MMD2)} (Lemma 2). The gap EC − MMD² equals tr Σ_I + tr Σ_J to within "
        f"{_worst(frame.EC - frame.MMD2 - frame.spreads):.1e}, and GED/2 equals MMD² to within "
        f"{_worst(frame.half_GED - frame.MMD2):.1e}.")


def mixture_text(frame) -> str:
    """Lemmas 3-4 (Eq. 7, Eq. 9) on random mixtures, as Markdown: ``frame`` has one row per mixture with the columns
    ``zero mean`` (bool), ``eigenvalue sum`` (of Sigma*), ``E||x||^2``, ``||mu*||^2`` (closed forms) and
    ``sampled diversity``, ``sampled DC`` (the same two quantities estimated from samples)."""
    zero = frame[frame["zero mean"]]
    gap_zero = _worst(zero["eigenvalue sum"] - zero["E||x||^2"])
    gap_all = _worst(frame["eigenvalue sum"] + frame["||mu*||^2"] - frame["E||x||^2"])
    off_div = _worst(frame["sampled diversity"] / frame["eigenvalue sum"] - 1)
    off_dc = _worst(frame["sampled DC"] / frame["E||x||^2"] - 1)
    return (
        f"For the zero-mean mixtures the sum of the eigenvalues of Σ* equals E‖x‖² to within {gap_zero:.1e}; for "
        f"every mixture it equals E‖x‖² − ‖μ*‖² to within {gap_all:.1e}. From the samples, the diversity comes within "
        f"{off_div:.1%} of the sum of the eigenvalues and DC within {off_dc:.1%} of E‖x‖².")


def hoeffding_text(table, delta: float) -> str:
    """Lemma 5 (Hoeffding) by sampling, as Markdown: ``table`` has one row per batch size with the columns ``b``,
    ``bound``, ``outside`` (the share of batches whose deviation exceeds the bound) and ``quantile`` (the observed
    1 - delta/2 quantile of the deviations)."""
    worst = table.loc[table["outside"].idxmax()]
    slack = table["bound"] / table["quantile"]
    broken = table[table["outside"] > delta / 2]
    if worst["outside"] == 0:
        share = f"No batch of any size fell outside the bound (Lemma 5 allows a share of δ/2 = {delta / 2:g})."
    elif broken.empty:
        share = (f"The share of batches outside the bound stayed within the allowed δ/2 = {delta / 2:g} at every batch "
                 f"size (the largest: {worst['outside']:.4f} at b = {int(worst['b'])}).")
    else:
        share = (f"The share of batches outside the bound exceeded the allowed δ/2 = {delta / 2:g} at b = "
                 f"{', '.join(str(int(b)) for b in broken['b'])}.")
    return (
        f"{share} The bound is {slack.min():.1f} to {slack.max():.1f} times the observed {1 - delta / 2:.1%} quantile "
        "of the deviations, depending on b.")


def full_runs_section(runs: Sequence) -> Section:
    """Recorded full-profile CML runs (binomial deviance, CUB): each run's unseen Recall@1 and NMI, seen Recall@1 and
    provenance, beside the paper's CML (Binomial) row of Table IV. Says so when there is none."""
    if not runs:
        return Section(notes=["No full-profile CML (binomial, CUB) run has been recorded (`results/recorded/`): run "
                              "this notebook with `ZS_PROFILE=full` on a GPU to make one."])
    paper = reported_frame("IV")
    lines = []
    for r in runs:
        pv = r.provenance
        lines.append(f"- `{r.config.name}`: unseen Recall@1 {100 * r.metric('R@1'):.1f} %, NMI "
                     f"{100 * r.metric('NMI'):.1f} %, seen Recall@1 {100 * r.metric('R@1', 'seen'):.1f} %; recorded "
                     f"{pv.get('timestamp')} on {pv.get('device')}, zslib {pv.get('zslib_version')}, torch "
                     f"{pv.get('torch_version')}, commit `{pv.get('git_commit')}`, {pv.get('train_seconds')} s.")
    lines.append(f"\nThe paper (Table IV): CML (Binomial) Recall@1 {paper.loc['CML (Binomial)', 'R@1']} %.")
    return Section(notes=["\n".join(lines)])
