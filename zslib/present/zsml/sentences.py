"""The ZSML pages' generated sentences (Xu et al., IJCAI 2019): the chapter's "What we found" list (the quick
profile, the real profile and the experiments page), the experiments page's own list, and the "Key findings" box
the chapter opens with. Every sentence is written from the numbers of its section.
"""
from __future__ import annotations

from zslib.analysis.compare import rule_status
from zslib.analysis.findings import findings_box, found_list, not_recorded_box, recorded
from zslib.analysis.verdict import status_note, variant_words, verb_words
from zslib.engine.stats import format_interval, summarize
from zslib.methods.zsml.recipes import (ABL_SEEDS, FLOOR, HEAD, KS, LIFTED, LR, LR_200, LR_1000, MR, S_PAPER,
                                        every_image_config, real_configs)
from zslib.present.zsml.numbers import METRICS, PAPER, by_seed, dataset_name, says, seed_difference
from zslib.present.zsml.outcomes import Experiments, alpha_status, share_name, share_rule_note
from zslib.present.zsml.quick import QuickComparison
from zslib.present.zsml.real import RealComparison
from zslib.reported import reported_frame
from zslib.engine.choice import VALIDATION_SEEDS

__all__ = ["quick_findings", "real_findings", "share_sentence", "experiment_findings", "arm_sentences",
           "chapter_findings", "key_findings"]


def quick_findings(quick: QuickComparison, fig5_numbers: dict | None = None) -> list[str]:
    """The quick profile's sentences: ZSML and the linear relation against the Euclidean distance (their paired
    verdicts), the paper's Table 3 gap, and how far the labels moved in Fig. 5."""
    runs, verdicts = quick.runs, quick.verdicts
    mr = {m: summarize(runs[MR], m)[0] for m in METRICS}
    paper3 = reported_frame("3", paper=PAPER)
    out = [f"Quick profile ({dataset_name(runs[MR][0].config.dataset)}, {len(runs[MR])} seeds): ZSML on a frozen "
           f"triplet embedding reached unseen ACC {100 * mr['ACC']:.1f}%, NMI {100 * mr['NMI']:.1f}%, R@1 "
           f"{100 * mr['R@1']:.1f}%; against the Euclidean distance of the same embedding it "
           f"{says(verdicts[MR, 'Euclidean', 'ACC'], 'clustering accuracy')}, "
           f"{says(verdicts[MR, 'Euclidean', 'NMI'], 'NMI')} and {says(verdicts[MR, 'Euclidean', 'R@1'], 'Recall@1')}.",
           f"The linear relation against the kernels: {says(verdicts[LR, MR, 'ACC'], 'ACC')}, "
           f"{says(verdicts[LR, MR, 'R@1'], 'Recall@1')}; against Euclidean it "
           f"{says(verdicts[LR, 'Euclidean', 'ACC'], 'ACC')}.",
           f"The paper (Table 3) reports ZSML "
           f"{paper3.loc['Ours', 'Caltech->Caltech ACC'] - paper3.loc['Euclidean', 'Caltech->Caltech ACC']:+.1f} "
           "ACC points over Euclidean on Caltech -> Caltech."]
    if fig5_numbers is not None:
        moved = fig5_numbers["moved"]
        out.append(f"Fig. 5 analogue: the labels moved at most {moved:.2g} from their Eq. 3 start in "
                   f"{fig5_numbers['zsml_steps']} ZSML steps"
                   + (", so at this length the cross-update is in effect a regression onto Eq. 3's labels."
                      if moved < 0.01 else ": the label phase changed them visibly."))
    return out


def real_findings(real: RealComparison | None) -> list[str]:
    """The real profile's sentences: ZSML against the cosine of the same features, every unseen image ranked (and
    clustering on the sample), then what the earlier 4-per-class sample said, and whether it agrees."""
    if real is None:
        return []
    d, v = real.verdicts["R@1"]
    dn, vn = real.verdicts["ACC"]
    ds, vs = real.sample_verdicts["R@1"]
    agree = ("agrees" if vs == v else "disagrees: a small sample scored only against itself is an easier, different "
             "retrieval task, and the raw features' Euclidean distance ranks worse than their cosine")
    return [f"Real Flowers-102 features ({len(real.every)} seeds): ZSML {says(v, 'Recall@1')} "
            f"({format_interval(d, signed=True)} pts) against the cosine of the same pretrained features, with every "
            f"unseen image ranked, and {says(vn, 'clustering accuracy')} ({format_interval(dn, signed=True)} pts) on "
            "the sampled images.",
            f"On the earlier protocol (4 images per class, each ranked only against the sample, against the raw "
            f"Euclidean distance) the same training reads {format_interval(ds, signed=True)} points of Recall@1; it "
            f"{agree}."]


def share_sentence(ex: Experiments) -> str:
    """The share of positive pairs: its value among uniform pairs, the shares against it on validation classes, the
    rule's choice, and what the best share did on the test classes against the unset share and the Euclidean
    distance (how much of ZSML's Recall@1 gap it closes)."""
    words = "; ".join(f"positive_fraction {f:g} {format_interval(p.diff, signed=True)} R@1 pts ({p.verdict})"
                      for f, p in ex.pf_val_vs.items())
    text = (f"Positive pairs in P: {'' if ex.share_exact else 'about '}{100 * ex.share_fit:.1f}% of the uniform pairs "
            f"of the validation runs are same-class pairs. On validation classes ({len(VALIDATION_SEEDS)} seeds, alpha "
            f"{ex.pos_alpha:g}), against that unset share: {words}; "
            + ("none of these differences is clear of the seed noise, but "
               if all(p.verdict == "no clear effect" for p in ex.pf_val_vs.values()) else "")
            + f"the highest mean among the shares is at {share_name(ex.best_pf)}. {share_rule_note(ex)}")
    if ex.best_pf is None:
        return text + (" So the validation split gives no reason to change the share, and no sign that the scarcity "
                       "of positive pairs is what keeps ZSML below the Euclidean distance.")
    if not ex.pf_vs:
        return text
    p1, (d2, v2) = ex.pf_vs["R@1"]
    gap = ex.gap
    text += (f" On the test classes ({len(ex.zf)} seeds) that share{' (an ablation)' if ex.share_is_ablation else ''} "
             f"{says(p1.verdict, 'Recall@1')} "
             f"({format_interval(p1.diff, signed=True)} pts) against the unset share")
    if p1.verdict == "up" and gap > 0:
        text += (f", a mean gain of {100 * p1.diff[0] / gap:.0f}% of the {100 * gap:.1f}-point Recall@1 gap that ZSML "
                 "with the unset share leaves to the Euclidean distance"
                 + (": the scarcity of positive pairs explains part of the gap, not all of it" if v2 == "down"
                    else ": within the noise, the scarcity of positive pairs accounts for the whole gap"))
    elif p1.verdict == "down":
        text += f": it widens the {100 * gap:.1f}-point Recall@1 gap to the Euclidean distance instead of closing it"
    else:
        text += (f", so these runs give no evidence that the share of positive pairs explains any of the "
                 f"{100 * gap:.1f}-point Recall@1 gap to the Euclidean distance")
    return text + (f"; against the Euclidean distance, ZSML with this share {says(v2, 'Recall@1')} "
                   f"({format_interval(d2, signed=True)} pts).")


def experiment_findings(ex: Experiments) -> list[str]:
    """The experiments page's sentences, each generated from its section's numbers: the choices of alpha and of
    the share of positive pairs and what they did on the test classes, the Table 8 and 7 analogues, NCA, the
    Table 9 and 6 analogues, every pair of the unseen images and the transfer."""
    out = []
    if ex.val_vs:
        out.append(f"On validation classes of Flowers-102 ({len(VALIDATION_SEEDS)} seeds), against the paper's alpha = 0.3: "
                   + "; ".join(f"alpha {a:g} {format_interval(p.diff, signed=True)} R@1 pts ({p.verdict})"
                               for a, p in ex.val_vs.items())
                   + f". The highest mean is at alpha = {ex.chosen_alpha:g}"
                   + (" (an ablation: with ZSML off a candidate, the rule keeps it off)"
                      if ex.alpha_rule is not None and ex.alpha_rule.off_won else "")
                   + (", the largest value Eq. 3 allows (the positive range [1 - alpha, 1] must not fall below the "
                      "negative one), so the grid cannot go further that way." if ex.chosen_alpha == 0.5 else "."))
    if ex.chosen_vs:
        (d1, v1), (d2, v2) = ex.chosen_vs["R@1"]
        (a1, w1), (a2, w2) = ex.chosen_vs["ACC"]
        out.append(f"On the test classes ({len(ex.chosen_runs)} seeds), ZSML at the best-mean alpha = "
                   f"{ex.chosen_alpha:g} ({alpha_status(ex)}) "
                   f"{says(v1, 'Recall@1')} ({format_interval(d1, signed=True)} pts) and "
                   f"{says(w1, 'clustering accuracy')} "
                   f"({format_interval(a1, signed=True)} pts) against the paper's alpha = 0.3; against the Euclidean "
                   f"distance it {says(v2, 'Recall@1')} ({format_interval(d2, signed=True)} pts) and "
                   f"{says(w2, 'clustering accuracy')} ({format_interval(a2, signed=True)} pts).")
    if ex.pf_val_vs:
        out.append(share_sentence(ex))
    if ex.ablation_vs:
        order = f"the test classes rank alpha {', '.join(f'{a:g}' for a in ex.test_order)} by mean Recall@1"
        if ex.val_order is None:
            order += " (no validation runs here to compare with)."
        elif ex.val_order == ex.test_order:
            order += ", the validation split's order."
        else:
            order += f", not the validation split's order ({', '.join(f'{a:g}' for a in ex.val_order)})."
        words = "; ".join(f"alpha {a:g} minus 0.3 {format_interval(p['R@1'].diff, signed=True)} R@1 pts "
                          f"({p['R@1'].verdict})" for a, p in ex.ablation_vs.items())
        best8 = reported_frame("8", paper=PAPER).idxmax()
        out.append(f"Table 8 analogue ({len(ABL_SEEDS)} seeds, descriptive): {order} On the test classes, {words}. The "
                   f"paper's Table 8 has its best value at alpha = 0.3 in {(best8 == 'alpha = 0.3').sum()} of its "
                   f"{len(best8)} columns.")
    if ex.k_vs:
        best_k = max(KS, key=lambda k: summarize(ex.k_runs[k], "R@1")[0])
        best7 = reported_frame("7", paper=PAPER).idxmax()
        out.append(f"Table 7 analogue ({len(ABL_SEEDS)} seeds, descriptive): the highest mean unseen Recall@1 is at "
                   f"k = {best_k} (the paper's Table 7 has its best value at k = 96 in {(best7 == 'k = 96').sum()} of "
                   f"its {len(best7)} columns); against k = 96, "
                   + "; ".join(f"k = {k} {format_interval(p['R@1'].diff, signed=True)} R@1 pts ({p['R@1'].verdict})"
                               for k, p in ex.k_vs.items()) + ".")
    if ex.nca_vs:
        (e1, u1), (z1, y1) = ex.nca_vs["R@1"]
        (e2, u2), (z2, y2) = ex.nca_vs["ACC"]
        out.append(f"NCA on the same features ({len(ex.nca_runs)} seeds) {says(u1, 'Recall@1')} "
                   f"({format_interval(e1, signed=True)} pts) and {says(u2, 'clustering accuracy')} "
                   f"({format_interval(e2, signed=True)} pts) against the Euclidean distance; against NCA, ZSML "
                   f"{says(y1, 'Recall@1')} ({format_interval(z1, signed=True)} pts) and "
                   f"{says(y2, 'clustering accuracy')} "
                   f"({format_interval(z2, signed=True)} pts).")
    if ex.arm_vs:
        out += arm_sentences(ex)
    if ex.every is not None:
        ev = ex.every
        threads = int(ev.provenance.get("torch_threads") or 1)
        out.append(f"Scoring every ordered pair of the {int(ev['n_images']):,} unseen images took "
                   f"{ev['seconds'] / 60:.0f} min on "
                   f"{'one CPU thread' if threads == 1 else f'{threads} CPU threads'} with a peak of "
                   f"{ev['peak_rss_mib'] / 1024:.2f} GiB of memory; there ZSML's Recall@1 is {100 * ev['R@1']:.1f}% "
                   f"against {100 * ev['input R@1']:.1f}% for the Euclidean distance (one model).")
    if ex.xfer is not None:
        parts = []
        for source, target in (("SynthParts", "Flowers-102"), ("Flowers-102", "SynthParts")):
            (d1, v1), (d2, v2) = ex.xfer_vs[target]["R@1"]
            parts.append(f"trained on {source} and tested on {target}, ZSML {says(v1, 'Recall@1')} "
                         f"({format_interval(d1, signed=True)} pts) against ZSML trained on {target} itself and "
                         f"{says(v2, 'Recall@1')} ({format_interval(d2, signed=True)} pts) against the Euclidean "
                         "distance")
        out.append(f"Inter-dataset transfer ({len(ex.zf)} seeds, pretrained features of both datasets): "
                   + "; ".join(parts) + ".")
    return out


def arm_sentences(ex: Experiments) -> list[str]:
    """The Table 9 and 6 analogues' sentences: the linear relation after 200 and 1,000 steps, the paper's S, and
    ZSML after a frozen lifted-structure embedding."""
    runs, vs = ex.arm_runs, ex.arm_vs
    (lr_d, lr_v), (long_d, long_v) = vs[LR_200]["R@1"], vs[LR_1000]["R@1"]
    long_runs = runs[LR_1000]
    s_d, s_v = vs[S_PAPER]["R@1"]
    ld, lv = vs[LIFTED]["R@1"]
    p6 = reported_frame("6", paper=PAPER)
    return [f"Table 9 analogue ({len(ex.zf)} seeds): the linear relation {says(lr_v, 'Recall@1')} "
            f"({format_interval(lr_d, signed=True)} pts) against the relation kernels, reaching "
            f"{format_interval(summarize(runs[LR_200], 'R@1'))}% unseen Recall@1 after 200 steps; "
            f"trained for 1,000 steps it reaches {format_interval(summarize(long_runs, 'R@1', 'seen'))}% on the seen "
            f"classes' test images but {format_interval(summarize(long_runs, 'R@1'))}% on the unseen classes "
            f"({format_interval(long_d, signed=True)} pts against the kernels, {long_v}). "
            "The paper's Table 9 reports LR + Reloss above LMNN and GMML"
            + ("; on these features the similarity learned from difference vectors does not carry over to "
               "new ones." if lr_v == "down" and long_v == "down" else "."),
            f"The paper's S (1,000, 1,000) instead of (256, 256) {says(s_v, 'Recall@1')} "
            f"({format_interval(s_d, signed=True)} pts).",
            f"Table 6 analogue ({len(runs[LIFTED])} seeds): ZSML after a frozen lifted-structure embedding "
            f"{says(lv, 'Recall@1')} ({format_interval(ld, signed=True)} pts) against that embedding's Euclidean "
            f"distance on the same images; the paper reports "
            f"{p6.loc['Lifted+Ours', 'R@1'] - p6.loc['Lifted', 'R@1']:+.1f} R@1 points on CUB-200-2011."]


def chapter_findings(quick: QuickComparison, fig5_numbers: dict | None, real: RealComparison | None,
                     ex: Experiments | None):
    """The chapter's "What we found" list: the quick profile, the real profile and the experiments page, every
    sentence generated from the numbers (:func:`zslib.analysis.findings.found_list`)."""
    return found_list(quick_findings(quick, fig5_numbers) + real_findings(real)
                      + (experiment_findings(ex) if ex is not None else []))


def key_findings():
    """The "Key findings" box the ZSML chapter opens with, generated from the recorded real-profile runs."""
    c = real_configs()
    floor, runs = recorded({"f": c[FLOOR]}, (0,)), recorded({"z": every_image_config(), "h": c[HEAD]})
    if floor is None or runs is None:
        return not_recorded_box()
    z = runs["z"]
    d, v = seed_difference(by_seed(z, "input R@1"), by_seed(z, "R@1"))
    status = rule_status("ZSML", z[0].config)
    return findings_box([
        f"On Flowers-102 photographs of unseen classes, ZSML's learned pair metric at {variant_words(z[0].config)}"
        f"{status_note(status)} "
        f"{verb_words(v, status == 'chosen')} Recall@1 against the cosine of the same features, every unseen image "
        "ranked: "
        f"{format_interval(d, signed=True)} points over {len(z)} seeds paired.",
        f"The untrained features reach {100 * floor['f'][0].metric('R@1'):.1f} % unseen Recall@1 and a trained "
        f"embedding head (binomial deviance) {format_interval(summarize(runs['h']))} % (all unseen images, on this "
        "book's 160-px copy of the photographs).",
        "ZSML's relation network scores pairs, not distances: its neighbours in the experiments page's retrieval "
        "figure are the images it scores highest against each query."])
