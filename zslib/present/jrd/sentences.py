"""The JRD chapters' generated sentences (Chu et al., ICML 2020, ``chu2020jrd``): the "Key findings" box the
chapter opens with, and the "What we found" lists of the chapter and of the experiments page, each sentence made
from the numbers the tables above it show (the quick runs of the chapter and the recorded real-profile runs of
:class:`~zslib.present.jrd.study.JRDStudy`).

Most of these comparisons are descriptive grids that no choice rule picked a setting from, so their sentences never
say "clearly" of a difference (:func:`zslib.analysis.verdict.verb_words` with ``chosen=False``): an interval that
excludes 0 is "above" or "below", and a sentence that reads one of a grid's many intervals says how many tests the
grid holds and that they are uncorrected (:func:`_uncorrected`).
"""
from __future__ import annotations

from collections.abc import Mapping

from zslib.analysis.compare import rule_status
from zslib.analysis.findings import findings_box, found_list, not_recorded_box, real_comparison
from zslib.analysis.verdict import verb_words
from zslib.engine.stats import format_interval, paired, summarize
from zslib.methods.jrd.recipes import (BOUND_OTHERS, BOUND_SEEDS, GRID_SEEDS, GRID_SIZES, KERNEL_SEEDS,
                                       MIXTURE_SEEDS, MIXTURES, REGULARIZER_NAMES, SWEEP_ALPHAS, SWEEP_SEEDS)
from zslib.present.jrd.bound import against_text, lambda_scale, paired_values
from zslib.present.jrd.cells import PAPER3_ROW, QUANTITIES, groups, paper4, paper_table
from zslib.present.jrd.quick import quick_vs_jrd
from zslib.present.jrd.study import JRDStudy
from zslib.present.jrd.tables import rule_words

__all__ = ["found_main", "found_experiments", "key_findings", "paper_directions"]


def verdict_words(verdict: str) -> str:
    """A paired verdict of a comparison no rule chose, as a verb: "raised", "lowered", "did not clearly change"."""
    return verb_words(verdict, chosen=False)


def _uncorrected(tests: int) -> str:
    """What a sentence adds when it reads intervals of a grid of ``tests`` paired tests."""
    return f"95% intervals that exclude 0, uncorrected for the grid's {tests} tests"


def found_main(runs: Mapping, bound: Mapping, study: JRDStudy):
    """The main JRD page's "What we found": the quick profile's Tables 2 and 3 (``runs``, ``bound``) and the
    headline on Flowers-102 photographs, each sentence generated from the numbers."""
    jrd_vs_base = paired(runs["AM-Softmax"], runs["JRD"])
    vs_jrd = quick_vs_jrd(runs)
    better = [n for n, p in vs_jrd.items() if p.verdict == "up"]
    worse = [n for n, p in vs_jrd.items() if p.verdict == "down"]
    clear = ([f"above {', '.join(better)}"] * bool(better) + [f"below {', '.join(worse)}"] * bool(worse))
    (dl, wl), (dd, wd) = (paired_values(bound, "JMMD", "JRD", key) for key in ("lam", "d_H"))
    premise = lambda_scale(bound)["premise_holds"]
    out = [f"On the quick profile, JRD (alpha = 1) {verdict_words(jrd_vs_base.verdict)} unseen Recall@1 against "
           f"AM-Softmax alone ({format_interval(jrd_vs_base.diff, signed=True)} points, {len(runs['JRD'])} seeds "
           "paired).",
           f"Against its variants and JMMD, JRD was {' and '.join(clear) or 'not clearly different from any of them'}"
           + (f" ({_uncorrected(len(vs_jrd))})" if clear else "") + "; the paper reports JRD above MRD and JRD-C on "
           "CUB (Table 2).",
           f"Against JMMD, JRD's lambda changed by {format_interval(dl, 1.0, 3, signed=True)} ({wl}) and its d_H by "
           f"{format_interval(dd, 1.0, 3, signed=True)} "
           f"({wd}); "
           "the paper reports a smaller lambda and a slightly larger d_H for JRD (Table 3).",
           "The unseen part of lambda " + ("tracks" if premise else "does not track")
           + " 1 - Recall@1 within 0.1 on every model here, "
           + ("which supports" if premise else "so it does not support")
           + " reading the paper's lambda as the mean of the two errors."]
    if study.main is not None and study.floor is not None:
        p = study.headline
        out.append(f"On Flowers-102 with a frozen pretrained network, JRD {verdict_words(p.verdict)} unseen Recall@1 "
                   f"against AM-Softmax ({format_interval(p.diff, signed=True)} points, {len(study.main['JRD'])} "
                   f"seeds); the untrained features reach {100 * study.floor.metric('R@1'):.1f}%.")
    else:
        out.append("The real-profile runs are not recorded in this copy, so there is no real-data verdict here.")
    if study.alpha_choice is not None:
        _, chosen, val_p = study.alpha_choice
        out.append(f"On the validation classes of Flowers-102, alpha = 4 against alpha = 1 gave "
                   f"{format_interval(val_p.diff, signed=True)} points ({val_p.verdict}); the higher mean of the two "
                   f"is alpha = {chosen:g}." + rule_words(study.alpha_rule))
    return found_list(out)


def _variant_sentences(study: JRDStudy) -> list[str]:
    if not study.variant_pairs:
        return ["The real-profile runs of the variants are not recorded in this copy, so there is no Table 2 verdict "
                "on real data."]
    pairs = study.variant_pairs
    paper2 = paper_table("2")
    paper_below = [n for n in ("MRD", "JRD-C", "JRD-Pooling")
                   if paper2.loc[n, "CUB R@1"] < paper2.loc["JRD", "CUB R@1"]]
    below = [name for name, (p, q) in pairs.items() if q.verdict == "down"]
    helped = [name for name, (p, q) in pairs.items() if p.verdict == "up"]
    hurt = [name for name, (p, q) in pairs.items() if p.verdict == "down"]
    pool = pairs["JRD-pooling"][1]
    return [f"On Flowers-102, each variant minus JRD in unseen Recall@1 (points, {len(study.main['JRD'])} seeds): "
            + "; ".join(f"{name} {format_interval(q.diff, digits=2, signed=True)} ({q.verdict})"
                        for name, (p, q) in pairs.items())
            + f". Below JRD ({_uncorrected(len(pairs))}): {', '.join(below) or 'none'}; the paper's CUB means put "
            f"{', '.join(paper_below) or 'none'} below JRD (Table 2).",
            f"Against AM-Softmax alone ({_uncorrected(len(pairs))}), variants that raised unseen Recall@1: "
            f"{', '.join(helped) or 'none'}; that lowered it: {', '.join(hurt) or 'none'}.",
            f"With the backbone frozen, JRD-pooling differs from JRD only by a fixed weight on each pair; dropping "
            f"that weight {verdict_words(pool.verdict)} unseen Recall@1 "
            f"({format_interval(pool.diff, digits=2, signed=True)} points)."]


def _sweep_sentences(study: JRDStudy) -> list[str]:
    if not study.sweep_pairs:
        return ["The real-profile runs of the alpha sweep are not recorded in this copy, so there is no Fig. 5 reading "
                "on real data."]
    pairs, out = study.sweep_pairs, []
    for reg, label in REGULARIZER_NAMES.items():
        ups = [f"{a:g}" for a in SWEEP_ALPHAS if pairs[reg, a].verdict == "up"]
        downs = [f"{a:g}" for a in SWEEP_ALPHAS if pairs[reg, a].verdict == "down"]
        peak, peak_word, fall = study.sweep_shape[reg]
        bell = peak_word == "up" and fall is not None and fall.verdict == "down"
        out.append(f"Sweep on the Flowers-102 test classes ({len(SWEEP_ALPHAS)} weights, {len(SWEEP_SEEDS)} seeds, "
                   f"descriptive, {_uncorrected(len(pairs))}): {label} "
                   + (f"above AM-Softmax at alpha {', '.join(ups)}" if ups else "above AM-Softmax at no alpha")
                   + (f", below at {', '.join(downs)}" if downs else ", and below at no alpha")
                   + f"; its curve is {'bell-shaped' if bell else 'not bell-shaped'} by the test above (largest mean "
                   f"gain at alpha {peak:g}, {peak_word}"
                   + (f"; alpha {SWEEP_ALPHAS[-1]:g} against it: {fall.verdict})." if fall else ")."))
    ups = sorted({REGULARIZER_NAMES[reg] for (reg, a), p in pairs.items() if p.verdict == "up"})
    downs = sorted({REGULARIZER_NAMES[reg] for (reg, a), p in pairs.items() if p.verdict == "down"})
    out.append(f"Regularizers with an interval above AM-Softmax at some swept alpha (uncorrected, {len(pairs)} tests): "
               f"{', '.join(ups) or 'none'}; below it: {', '.join(downs) or 'none'}. The paper's Fig. 5 reports a gain "
               "for JRD only, and its Fig. 4 bell-shaped curves for JRD.")
    gains = [p.diff[0] for p in pairs.values() if p.verdict == "up"]
    spans = {label: [100 * pairs[reg, a].diff[0] for a in SWEEP_ALPHAS] for reg, label in REGULARIZER_NAMES.items()}
    out.append("Sizes: the mean differences from AM-Softmax across the sweep run from "
               + "; ".join(f"{min(v):+.2f} to {max(v):+.2f} points for {label}" for label, v in spans.items())
               + (f". The largest gain whose interval excludes 0 (uncorrected, one of {len(pairs)} tests) is "
                  f"{100 * max(gains):+.2f} points of unseen Recall@1" if gains else
                  ". No weight's interval lies above 0")
               + " (the text of the paper we have keeps Fig. 4's axes but not its curves, so their sizes cannot be set "
                 "beside these).")
    return out


def _kernel_sentences(study: JRDStudy) -> list[str]:
    out = []
    if study.kernel_pairs:
        for split, i in (("unseen", 0), ("seen", 1)):
            g = groups({k: ps[i].verdict for k, ps in study.kernel_pairs.items()})
            out.append(f"Against the Gaussian mixture at alpha = 1 ({len(KERNEL_SEEDS)} seeds; "
                       f"{_uncorrected(len(study.kernel_pairs))}), {split} Recall@1 was higher with: {g['up']}; lower "
                       f"with: {g['down']}; not clearly different with: {g['no clear effect']}.")
        top = paper4()[0]["R@1"].nlargest(2)
        out.append(f"The paper's two best kernels on CUB, each at its own alpha, are {' and '.join(top.index)} "
                   f"(R@1 {' and '.join(f'{v:g}' for v in top)}, Table 4).")
    else:
        out.append("The real-profile runs of the kernels are not recorded in this copy, so there is no Table 4 reading "
                   "on real data.")
    if study.kernel_rules:
        taken = [f"{k} (alpha {c.chosen:g})" for k, c in study.kernel_rules.items() if not c.off_won]
        kept = [k for k, c in study.kernel_rules.items() if c.off_won]
        out.append(f"By the book's choice rule on validation classes, with JRD switched off (alpha = 0) as a candidate "
                   f"({len(KERNEL_SEEDS)} seeds), a weight is chosen for: {', '.join(taken) or 'no kernel'}; JRD stays "
                   f"off for: {', '.join(kept) or 'no kernel'}.")
    if study.kernel_chosen_pairs:
        g = groups({f"{k} (alpha {study.kernel_alpha[k]:g})": p.verdict for k, p in study.kernel_chosen_pairs.items()})
        ablation = " (an ablation wherever the rule keeps JRD off)" if any(
            c.off_won for c in study.kernel_rules.values()) else ""
        out.append(f"With each kernel at its leading weight on validation classes{ablation}, unseen Recall@1 against "
                   f"JRD ({len(KERNEL_SEEDS)} seeds, paired; {_uncorrected(len(study.kernel_chosen_pairs))}) was higher "
                   f"with: {g['up']}; lower with: {g['down']}; not clearly different with: {g['no clear effect']}.")
    if study.kernel_off_pairs and study.kernel_rules:
        chosen = {f"{k} (alpha {c.chosen:g})": study.kernel_off_pairs[k] for k, c in study.kernel_rules.items()
                  if not c.off_won}
        if chosen:
            out.append("On the unseen classes, against AM-Softmax alone (the same seeds, paired), the weights the rule "
                       "chose gave: "
                       + "; ".join(f"{name} {format_interval(p.diff, digits=2, signed=True)} ({p.verdict})"
                                   for name, p in chosen.items())
                       + ".")
    return out


def _mixture_sentences(study: JRDStudy) -> list[str]:
    out = []
    if study.mixture_pairs:
        g = groups({m: p.verdict for m, p in study.mixture_pairs.items()})
        top = max(MIXTURES, key=lambda m: summarize(study.mixtures[m])[0])
        n_up = sum(p.verdict == "up" for p in study.mixture_pairs.values())
        out.append(f"Against one Gaussian per layer, (K, K') = (1, 1), unseen Recall@1 on Flowers-102 "
                   f"({len(MIXTURE_SEEDS)} seeds, paired; {_uncorrected(len(study.mixture_pairs))}) was higher with: "
                   f"{g['up']}; lower with: {g['down']}; not clearly different with: {g['no clear effect']}. The "
                   f"highest mean is at {top} "
                   f"({format_interval(summarize(study.mixtures[top]))}%; descriptive, on the test classes).")
        out.append("The paper reports that on CUB and Cars the mixtures beat (1, 1) (Fig. 6); on Flowers-102 with a "
                   "frozen backbone, "
                   + ("every mixture we ran does too." if n_up == len(study.mixture_pairs) else
                      f"not every mixture we ran does ({n_up} of {len(study.mixture_pairs)} above (1, 1))."))
    else:
        out.append("The real-profile runs of the mixture sizes are not recorded in this copy, so there is no Fig. 6 "
                   "reading on real data.")
    if study.grid_pairs:
        g = groups({m: p.verdict for m, p in study.grid_pairs.items()})
        top = max(study.mixture_grid, key=lambda m: summarize(study.mixture_grid[m])[0])
        n_up = sum(p.verdict == "up" for p in study.grid_pairs.values())
        out.append(f"On the whole grid K, K' in {set(GRID_SIZES)} ({len(GRID_SEEDS)} seeds, each cell paired with "
                   f"(1, 1); {_uncorrected(len(study.grid_pairs))}), unseen Recall@1 was higher with: {g['up']}; lower "
                   f"with: {g['down']}; not clearly different with: {g['no clear effect']}. The highest mean is at {top} "
                   f"({format_interval(summarize(study.mixture_grid[top]))}%; descriptive, on the test classes).")
        out.append("The paper's claim that the mixtures beat a single Gaussian per layer (Fig. 6) "
                   + ("holds for every cell of this grid." if n_up == len(study.grid_pairs) else
                      f"holds for {n_up} of the {len(study.grid_pairs)} other cells of this grid, as paired verdicts "
                      f"on {len(GRID_SEEDS)} seeds."))
    else:
        out.append("The real-profile runs of the (K, K') grid are not recorded in this copy, so there is no reading of "
                   "the whole Fig. 6 grid.")
    return out


def paper_directions() -> tuple[dict, dict]:
    """The paper's Table 3 on CUB: ``{"lambda" / "d_H": "lower" / "higher"}`` for JRD against JMMD, and the
    same quantities' differences JRD - JMMD."""
    paper3 = paper_table("3")
    gap = {c: paper3.loc[PAPER3_ROW["JRD"], c] - paper3.loc[PAPER3_ROW["JMMD"], c] for c in ("lambda", "d_H")}
    return {c: "lower" if g < 0 else "higher" for c, g in gap.items()}, gap


def _bound_sentences(study: JRDStudy) -> list[str]:
    if not study.theory:
        return ["The Table 3 analysis records of the real-profile runs are not recorded in this copy, so there is no "
                "real-data lambda or d_H verdict here."]
    theory = study.theory
    paper_dir, paper_gap = paper_directions()
    ours = {key: {"up": "higher", "down": "lower"}.get(theory["JMMD", key][1]) for key, _ in QUANTITIES}
    agree = [label for key, label in QUANTITIES if ours[key] == paper_dir[label]]
    largest = max(abs(theory[other, key][0][0]) for other in BOUND_OTHERS for key, _ in QUANTITIES)
    rj = theory["JMMD", "r1"]
    allr = [r for rows in study.bound.values() for r in rows]
    tracks = max(abs(r["unseen_err"] - (1 - r["r1"])) for r in allr) < 0.1
    out = [f"On Flowers-102 ({len(BOUND_SEEDS)} seeds, JRD minus the other arm, paired): {against_text(theory, 4)}. "
           f"The paper reports a {paper_dir['lambda']} lambda and a {paper_dir['d_H']} d_H for JRD than for JMMD on "
           "CUB (Table 3); our paired verdicts agree with the paper's direction for "
           + (" and ".join(agree) or "neither quantity") + ".",
           f"The largest of these mean differences, in absolute value, is {largest:.4f}; the paper's JRD - JMMD gaps "
           f"on CUB are {paper_gap['lambda']:+.4f} in lambda and {paper_gap['d_H']:+.4f} in d_H.",
           f"On the same runs JRD {verdict_words(rj.verdict)} unseen Recall@1 against JMMD "
           f"({format_interval(rj.diff, digits=2, signed=True)} points); "
           "the unseen part of lambda " + ("tracks" if tracks else "does not track")
           + " 1 - Recall@1 within 0.1 on every real model."]
    if study.theory_5nn:
        five = study.theory_5nn
        changed = [f"{label} vs {other} ({theory[other, key][1]} with 1-NN, {five[other, key][1]} with 5-NN)"
                   for other in BOUND_OTHERS for key, label in QUANTITIES
                   if theory[other, key][1] != five[other, key][1]]
        out.append(f"With a 5-NN classifier in place of 1-NN (all else equal, {len(BOUND_SEEDS)} seeds), JRD minus the "
                   f"other arm: {against_text(five, 4)}. "
                   + (f"The verdict changed for {'; '.join(changed)}, so it depends on the estimator." if changed else
                      "Every one of these four verdicts is the same as with 1-NN."))
    else:
        out.append("The 5-NN analysis records of the Table 3 analogue are not recorded in this copy, so there is no "
                   "second estimator setting here.")
    return out


def _more_bound_sentences(study: JRDStudy) -> list[str]:
    out = []
    for table in ("variants", "kernels"):
        arms = {name: q for (t, name), q in study.bound_vs_jrd.items() if t == table}
        if not arms:
            out.append(f"No {table[:-1]} besides JRD has Table 3 analysis records in this copy, so there is no lambda "
                       f"or d_H reading for the {table}.")
            continue
        parts = []
        for key, label in QUANTITIES:
            g = groups({n: q[key][1] for n, q in arms.items()})
            parts.append(f"{label} higher than JRD's for {g['up']}, lower for {g['down']}, not clearly "
                         f"different for {g['no clear effect']}")
        out.append(f"Table 3 for the {table} on Flowers-102 (paired by seed with JRD; "
                   f"{_uncorrected(len(arms) * len(QUANTITIES))}): " + "; ".join(parts) + ".")
        moved = [f"{n}, {label} {format_interval(q[key][0], 1.0, 4, signed=True)} ({q[key][1]})" for n, q in arms.items()
                 for key, label in QUANTITIES if q[key][1] != "no clear effect"]
        out.append(f"Of the {len(arms)} {table} besides JRD, the clear moves against JRD (arm minus JRD, paired): "
                   + ("; ".join(moved) if moved else "none; no arm moved lambda or d_H beyond seed noise") + ".")
        both = [n for n, q in arms.items() if q["lam"][1] != "no clear effect" and q["r1"][1] != "no clear effect"]
        opposite = [n for n in both if (arms[n]["lam"][1] == "up") == (arms[n]["r1"][1] == "down")]
        if both:
            out.append(f"Among the {table} with a clear verdict on both lambda and unseen Recall@1 against JRD "
                       f"({', '.join(both)}), the two moved in opposite directions (higher lambda, lower Recall@1 or "
                       f"the reverse, as the bound suggests) for {', '.join(opposite) or 'none'}.")
        else:
            out.append(f"None of the {table} has a clear verdict on both lambda and unseen Recall@1 against JRD, so "
                       "whether the two move in opposite directions (as the bound suggests) cannot be read here.")
    if study.moved_5nn:
        clear = [(t, n, key, label) for (t, n), q in study.moved_5nn.items() for key, label in QUANTITIES
                 if q[key][0][1] != "no clear effect"]
        kept = [f"{n} {label}" for t, n, key, label in clear
                if study.moved_5nn[t, n][key][1][1] == study.moved_5nn[t, n][key][0][1]]
        lost = [f"{n} {label} ({study.moved_5nn[t, n][key][1][1]}, "
                f"{format_interval(study.moved_5nn[t, n][key][1][0], 1.0, 4, signed=True)})"
                for t, n, key, label in clear if study.moved_5nn[t, n][key][1][1] != study.moved_5nn[t, n][key][0][1]]
        out.append(f"Of the {len(clear)} clear moves against JRD in Table 3 for the variants and kernels (1-NN), the "
                   f"5-NN estimates keep the same verdict for: {', '.join(kept) or 'none'}; not for: "
                   f"{', '.join(lost) or 'none'}.")
    return out


def found_experiments(study: JRDStudy):
    """The experiments page's "What we found": Tables 2-4 and Figs. 4-6 on Flowers-102, each sentence generated
    from the recorded runs and analysis records that :class:`JRDStudy` loaded."""
    return found_list(_variant_sentences(study) + _sweep_sentences(study) + _kernel_sentences(study)
                      + _mixture_sentences(study) + _bound_sentences(study) + _more_bound_sentences(study))


def key_findings():
    """The "Key findings" box the JRD chapter opens with, generated from the recorded real-profile runs: JRD at
    the paper's alpha = 1 against AM-Softmax alone and the untrained features, the three regularizers across
    alpha (Figs. 4-5), the mixture sizes (Fig. 6) and lambda against JMMD (Table 3)."""
    study = JRDStudy.cached(train=False)
    if study.floor is None or study.main is None:
        return not_recorded_box()
    out = real_comparison(study.floor, study.main["AM-Softmax"], study.main["JRD"], "JRD (alpha = 1)",
                          "AM-Softmax alone", status=rule_status("JRD", study.main["JRD"][0].config))
    if study.sweep_pairs:
        parts = []
        for reg, label in REGULARIZER_NAMES.items():
            ups = [f"{a:g}" for a in SWEEP_ALPHAS if study.sweep_pairs[reg, a].verdict == "up"]
            downs = [f"{a:g}" for a in SWEEP_ALPHAS if study.sweep_pairs[reg, a].verdict == "down"]
            parts.append(f"{label} above it " + (f"at alpha {', '.join(ups)}" if ups else "at no weight")
                         + " and below " + (f"at alpha {', '.join(downs)}" if downs else "at no weight"))
        gains = [100 * p.diff[0] for p in study.sweep_pairs.values() if p.verdict == "up"]
        tests = len(study.sweep_pairs)
        out.append(f"Across {len(SWEEP_ALPHAS)} weights per regularizer ({len(SWEEP_SEEDS)} seeds, against AM-Softmax, "
                   f"descriptive: no rule chose these weights; {_uncorrected(tests)}): " + "; ".join(parts) + "."
                   + (f" The largest gain whose interval excludes 0 is {max(gains):+.2f} points, one of {tests} "
                      "uncorrected tests." if gains else " No weight's interval lies above 0."))
    if study.grid_pairs:
        n_up = sum(p.verdict == "up" for p in study.grid_pairs.values())
        out.append(f"More Gaussians per layer than one (Fig. 6) raised unseen Recall@1 in {n_up} of the "
                   f"{len(study.grid_pairs)} other cells of the (K, K') grid ({len(GRID_SEEDS)} seeds, paired with "
                   f"(1, 1); {_uncorrected(len(study.grid_pairs))}).")
    if study.theory:
        (dl, wl), paper_dir = study.theory["JMMD", "lam"], paper_directions()[0]
        ours = {"up": "higher", "down": "lower"}.get(wl, "not clearly different")
        out.append(f"JRD's lambda (Table 3, 1-NN) against JMMD's: {format_interval(dl, 1.0, 4, signed=True)} ({wl}); the "
                   f"paper reports a "
                   f"{paper_dir['lambda']} lambda for JRD on CUB"
                   + (", the same direction." if ours == paper_dir["lambda"] else f", ours is {ours}."))
    return findings_box(out)
