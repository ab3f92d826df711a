"""The CML chapters' report plumbing (Chen, Deng, Wang and Zhang, TNNLS 2022): configs, tables and sentences made
from the numbers.

A chapter calls these in one or two lines; the paper's math stays in :mod:`zslib.methods.cml.confusion` and the
method in :mod:`zslib.methods.cml.method`. Every sentence is written from the numbers it is given (the statistics
are :mod:`zslib.engine.stats`): nothing here states a result of its own.

* the real-profile protocol of the CML chapter: :func:`real_cml`, :func:`real_sweep_grid`, :func:`choose_weights`,
  :func:`sweep_table`, :func:`real_test_grid`, :func:`real_table`;
* the verdicts: :func:`quick_verdict` (the quick profile's Tables II-V analogue), :func:`real_verdict` (the real
  photographs), :func:`key_findings` (the box the chapter opens with);
* the checks of Lemmas 1-5 as sentences: :func:`lemma_bounds_text`, :func:`mixture_text`, :func:`hoeffding_text`;
* captions: :func:`weights_caption`, :func:`provenance_caption`, :func:`full_runs_text`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from zslib.methods.cml.recipes import (REAL_LOSSES, REAL_WEIGHTS, VARIANT_TERMS, real_cml,
                                     real_sweep_grid, real_test_grid, validation_seeds)

__all__ = ["REAL_LOSSES", "REAL_WEIGHTS", "VARIANT_TERMS", "LOSS_NAMES", "GREEK", "real_cml", "validation_seeds",
           "real_sweep_grid", "choose_weights", "ablations",
           "rule_choices", "sweep_table", "weights_caption", "real_test_grid", "real_table",
           "provenance_caption", "real_verdict", "quick_verdict", "key_findings", "lemma_bounds_text",
           "mixture_text", "hoeffding_text", "full_runs_text", "what_we_found"]

#: The losses as a sentence names them.
LOSS_NAMES = {"triplet": "the triplet loss", "npair": "N-pair", "binomial": "the binomial deviance"}

#: The weights as a sentence names them.
GREEK = {"lambda1": "λ1", "lambda2": "λ2"}


def _markdown(text: str):
    from IPython.display import Markdown

    return Markdown(text)


# ----------------------------------------------------------------------------------------------------
# The real-profile protocol (Flowers-102, frozen ImageNet EfficientNet-Lite0)


def choose_weights(sweep: Mapping) -> dict:
    """``{(loss, term): weight}``: the weight each loss's CML rows train with, through the book's one rule
    (:func:`rule_choices`, :mod:`zslib.engine.choice`): the weight the rule chose when it chose one; where the rule
    keeps the loss alone ("off"), the candidate weight with the best mean validation Recall@1, so that the test rows
    show what the method would have done, as ablations (:func:`ablations`). ``sweep``: the runs of
    :func:`real_sweep_grid`."""
    chosen = {}
    for key, choice in rule_choices(sweep).items():
        if not choice.off_won:
            chosen[key] = choice.chosen
        else:  # "off" kept: the best weight other than 0, tested as an ablation (the first listed wins a tie)
            weights = [k for k in choice.means if k != choice.off]
            chosen[key] = max(weights, key=lambda w: choice.means[w].mean)
    return chosen


def ablations(sweep: Mapping) -> set:
    """The ``(loss, term)`` pairs whose weight the rule did not choose (it kept the loss alone): the CML rows that
    use that term are ablations."""
    return {key for key, choice in rule_choices(sweep).items() if choice.off_won}


def sweep_table(sweep: Mapping):
    """The validation sweep as a table: each weight (λ1 or λ2 of CML's Eq. 11) with its validation Recall@1 and its
    paired difference from the loss alone (same seeds), with the verdict."""
    import pandas as pd

    from zslib.engine.stats import format_interval, paired, summarize

    rows = []
    for (loss, term, weight), rs in sweep.items():
        p = paired(sweep[loss, "none", 0.0], rs, "R@1", "val") if term != "none" else None
        rows.append({"loss": loss, "term": term, "weight": weight,
                     "val R@1 %": format_interval(summarize(rs, "R@1", "val")),
                     "vs no confusion (pts)": format_interval(p.diff, signed=True) if p else "",
                     "verdict": p.verdict if p else ""})
    return pd.DataFrame(rows).set_index(["loss", "term", "weight"])


def rule_choices(sweep: Mapping) -> dict:
    """``{(loss, term): Choice}``: the book's one choice rule (:func:`zslib.engine.choice.choose`) applied to each
    loss and confusion term of the validation sweep, with the loss alone (weight 0) as "off": a weight is chosen only
    if its validation Recall@1 is clearly above the loss alone, paired by seed."""
    from zslib.engine.choice import OFF, choose

    out = {}
    for loss in REAL_LOSSES:
        for term in REAL_WEIGHTS:
            candidates = {OFF: sweep[loss, "none", 0.0]}
            candidates.update({w: rs for (l, t, w), rs in sweep.items() if l == loss and t == term})
            out[loss, term] = choose(candidates)
    return out


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


def real_table(runs: Mapping, floor, kept: set = frozenset()):
    """The real-photograph table: the untrained features (``floor``, one run), then every ``(loss, variant)`` of
    ``runs`` with unseen and seen Recall@1 over seeds, the gain over the untrained features, and each CML variant's
    paired difference from its baseline with the verdicts on the unseen and the seen classes. ``kept``: the
    ``(loss, term)`` pairs the choice rule kept off (:func:`ablations`); a variant that uses such a term is marked
    "(ablation)" in its verdicts."""
    import pandas as pd

    from zslib.engine.stats import format_interval, paired, summarize

    raw = floor.metric("R@1")
    rows = [{"loss": "-", "variant": "pretrained features, no training", "unseen R@1 %": f"{100 * raw:.1f}",
             "seen R@1 %": f"{100 * floor.metric('R@1', 'seen'):.1f}", "vs baseline (pts)": "", "unseen": "",
             "seen": "", "vs pretrained (pts)": ""}]
    for (loss, variant), rs in runs.items():
        row = {"loss": loss, "variant": variant, "unseen R@1 %": format_interval(summarize(rs)),
               "seen R@1 %": format_interval(summarize(rs, split="seen")),
               "vs pretrained (pts)": f"{100 * (summarize(rs)[0] - raw):+.1f}",
               "vs baseline (pts)": "", "unseen": "", "seen": ""}
        if variant != "baseline":
            pu, ps = paired(runs[loss, "baseline"], rs), paired(runs[loss, "baseline"], rs, split="seen")
            tag = " (ablation)" if any((loss, t) in kept for t in VARIANT_TERMS.get(variant, ())) else ""
            row.update({"vs baseline (pts)": format_interval(pu.diff, signed=True), "unseen": pu.verdict + tag,
                        "seen": ps.verdict + tag})
        rows.append(row)
    return pd.DataFrame(rows).set_index(["loss", "variant"])


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
    from zslib.engine.stats import paired

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


def real_verdict(runs: Mapping, floor):
    """The real-data verdict as Markdown: how many CML variants on Flowers-102 photographs raised unseen Recall@1 and
    lowered seen Recall@1 clearly (paired by seed), and which rows lie clearly above or below the untrained features
    (their 95% interval entirely on one side)."""
    from zslib.engine.stats import summarize

    raw = floor.metric("R@1")
    below = [f"{loss} {variant}" for (loss, variant), rs in runs.items() if summarize(rs)[2] < raw]
    above = [f"{loss} {variant}" for (loss, variant), rs in runs.items() if summarize(rs)[1] > raw]
    return _markdown(
        _claim_sentence(*_claim_counts(runs, REAL_LOSSES), "on real photographs") + "\n\n"
        f"Against the untrained pretrained features ({100 * raw:.1f} % unseen Recall@1), clearly above them: "
        f"{', '.join(above) or 'none'}; clearly below them: {', '.join(below) or 'none'}.")


def quick_verdict(verdict, runs: Mapping, fit_floor: float = 0.1):
    """The quick profile's verdict on CML's claim (Sec. IV-D1: confusion lowers seen and raises unseen Recall@1) as
    Markdown, from ``verdict`` (the chapter's table: per CML variant the columns
    ``"unseen effect"`` and ``"seen effect"``) and ``runs`` (``{(loss, variant): runs}``). A loss whose baseline ends
    below ``fit_floor`` seen Recall@1 did not learn the training task, and its rows cannot answer the question."""
    from zslib.engine.stats import summarize

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
    return _markdown(
        f"Unseen Recall@1 against the baseline: {counts('unseen')}; seen Recall@1: {counts('seen')}. Baselines that "
        f"did not even fit the seen classes (seen Recall@1 below {100 * fit_floor:.0f} %): "
        f"{', '.join(unfit) or 'none'}.\n\n{claim}{outcome}")


# ----------------------------------------------------------------------------------------------------
# The key findings (the box the chapter opens with)


def _recorded_real():
    """``(floor, runs, ablations)`` of the chapter's real section from the stored runs (the untrained features, the
    test grid with the weights of :func:`choose_weights` on the stored validation sweep, and the ``(loss, term)``
    pairs the rule kept off), or ``None`` when any is missing."""
    from zslib.analysis.findings import recorded
    from zslib.engine.config import Config

    sweep = recorded(real_sweep_grid(), validation_seeds())
    if sweep is None:
        return None
    floor = recorded({"f": Config.from_profile("real", method="pretrained")}, (0,))
    runs = recorded(real_test_grid(choose_weights(sweep)))
    if floor is None or runs is None:
        return None
    return floor["f"][0], runs, ablations(sweep)


def key_findings():
    """The "Key findings" box the CML chapter opens with, generated from the recorded real-profile runs: CML
    (Eq. 11, each weight through the book's choice rule on validation classes, :func:`choose_weights`) against the
    trained baseline head for each of the paper's three losses, paired by seed, and the count of variants that show
    the paper's claim. A row whose weights the rule did not choose is named an ablation, without "clearly"."""
    from zslib.analysis.findings import findings_box, not_recorded_box, real_comparison
    from zslib.analysis.verdict import verb_words
    from zslib.engine.stats import format_interval, paired

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


def what_we_found(runs: Mapping, real_runs: Mapping, floor, sweep: Mapping, fit_floor: float = 0.1):
    """The "What we found" list the CML chapter closes with, generated from the runs the chapter showed: the quick
    profile's variants that fit (``runs``, ``{(loss, variant): runs}``), the real photographs (``real_runs`` and the
    untrained ``floor``) and the validation sweep judged by the book's one rule (``sweep``, :func:`rule_choices`)."""
    from zslib.analysis.findings import found_list
    from zslib.engine.stats import summarize

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


# ----------------------------------------------------------------------------------------------------
# Lemmas 1-5 as sentences


def _worst(values) -> float:
    import numpy as np

    return float(np.max(np.abs(np.asarray(values, dtype=float))))


def lemma_bounds_text(frame, rel_tol: float = 1e-9):
    """Lemmas 1 and 2 (Eqs. 4-5) on random class pairs, as Markdown: ``frame`` has one row per pair with the columns
    ``EC``, ``half_GED``, ``MMD2`` and ``spreads`` (tr Sigma_I + tr Sigma_J)."""
    tol = rel_tol * (1 + frame.EC.abs())

    def held(lower):
        broken = int((frame.EC < lower - tol).sum())
        return "in every pair" if broken == 0 else f"in all but {broken} pairs"

    return _markdown(
        f"Over {len(frame)} random pairs of classes, EC ≥ GED/2 held {held(frame.half_GED)} (Lemma 1) and EC ≥ MMD² "
        f"{held(frame.MMD2)} (Lemma 2). The gap EC − MMD² equals tr Σ_I + tr Σ_J to within "
        f"{_worst(frame.EC - frame.MMD2 - frame.spreads):.1e}, and GED/2 equals MMD² to within "
        f"{_worst(frame.half_GED - frame.MMD2):.1e}.")


def mixture_text(frame):
    """Lemmas 3-4 (Eq. 7, Eq. 9) on random mixtures, as Markdown: ``frame`` has one row per mixture with the columns
    ``zero mean`` (bool), ``eigenvalue sum`` (of Sigma*), ``E||x||^2``, ``||mu*||^2`` (closed forms) and
    ``sampled diversity``, ``sampled DC`` (the same two quantities estimated from samples)."""
    zero = frame[frame["zero mean"]]
    gap_zero = _worst(zero["eigenvalue sum"] - zero["E||x||^2"])
    gap_all = _worst(frame["eigenvalue sum"] + frame["||mu*||^2"] - frame["E||x||^2"])
    off_div = _worst(frame["sampled diversity"] / frame["eigenvalue sum"] - 1)
    off_dc = _worst(frame["sampled DC"] / frame["E||x||^2"] - 1)
    return _markdown(
        f"For the zero-mean mixtures the sum of the eigenvalues of Σ* equals E‖x‖² to within {gap_zero:.1e}; for "
        f"every mixture it equals E‖x‖² − ‖μ*‖² to within {gap_all:.1e}. From the samples, the diversity comes within "
        f"{off_div:.1%} of the sum of the eigenvalues and DC within {off_dc:.1%} of E‖x‖².")


def hoeffding_text(table, delta: float):
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
    return _markdown(
        f"{share} The bound is {slack.min():.1f} to {slack.max():.1f} times the observed {1 - delta / 2:.1%} quantile "
        "of the deviations, depending on b.")


# ----------------------------------------------------------------------------------------------------
# The full profile


def full_runs_text(runs: Sequence, paper):
    """Markdown about recorded full-profile CML runs (binomial deviance, CUB): each run's unseen Recall@1 and NMI,
    seen Recall@1 and provenance, beside the paper's CML (Binomial) row of Table IV (``paper``, a frame of
    :func:`zslib.reported.reported_frame`). Says so when there is none."""
    if not runs:
        return _markdown("No full-profile CML (binomial, CUB) run has been recorded (`results/recorded/`): run this "
                         "notebook with `ZS_PROFILE=full` on a GPU to make one.")
    lines = []
    for r in runs:
        pv = r.provenance
        lines.append(f"- `{r.config.name}`: unseen Recall@1 {100 * r.metric('R@1'):.1f} %, NMI "
                     f"{100 * r.metric('NMI'):.1f} %, seen Recall@1 {100 * r.metric('R@1', 'seen'):.1f} %; recorded "
                     f"{pv.get('timestamp')} on {pv.get('device')}, zslib {pv.get('zslib_version')}, torch "
                     f"{pv.get('torch_version')}, commit `{pv.get('git_commit')}`, {pv.get('train_seconds')} s.")
    lines.append(f"\nThe paper (Table IV): CML (Binomial) Recall@1 {paper.loc['CML (Binomial)', 'R@1']} %.")
    return _markdown("\n".join(lines))
