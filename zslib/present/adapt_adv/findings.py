"""What the Adapt-Adv pages found (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): the "Key findings" box the chapter opens with (:func:`key_findings`, also the paper's line
on the index page), the two pages' "What we found" lists, and the full profile's recorded runs. Every sentence is
generated from the runs.
"""
from __future__ import annotations

from collections.abc import Mapping

from zslib.analysis.compare import rule_status
from zslib.analysis.findings import Findings, findings_box, found_list, not_recorded_box, real_comparison
from zslib.analysis.verdict import change_words, status_note, verb_words
from zslib.engine.config import Config
from zslib.engine.grid import run_grid
from zslib.engine.stability import stability_label
from zslib.engine.stats import format_interval, summarize
from zslib.engine.store import load_results, short_commit
from zslib.methods.adapt_adv.recipes import BASE, FLOOR, GDFL, METHOD
from zslib.present.adapt_adv.sentences import (ablation_findings, bullets, gradcam_sentences, lambda0_sentences,
                                               lambda_sweep_sentence, late_sentence, real_pair_sentences,
                                               rule_summary, stopping_sentence, table5_sentences, table5_summary)
from zslib.present.adapt_adv.study import AdaptAdvStudy
from zslib.present.base import Section
from zslib.reported import reported_frame

__all__ = ["key_findings", "main_findings", "experiments_findings", "full_profile_section"]


def key_findings() -> Findings:
    """The "Key findings" box the Adapt-Adv chapter opens with, generated from the recorded real-profile runs: each
    row named by the parts that ran, "clearly" only for the setting the book's choice rule chose
    (:func:`zslib.analysis.verdict.rule_status`), and the adversary's runs called unstable where their seeds fell
    after their best step (:mod:`zslib.engine.stability`)."""
    study = AdaptAdvStudy.cached(train=False)
    runs = study.runs
    if any(name not in runs for name in (FLOOR, BASE, GDFL, METHOD)):
        return not_recorded_box()
    pg, pa = study.pairs[BASE, GDFL], study.pairs[GDFL, METHOD]
    stop = study.stopping
    where = (f"at the best trained length on validation classes ({stop.length} steps; an ablation: the choice rule "
             "keeps no training)" if stop is not None and stop.ablation else
             f"at the length chosen on validation classes ({stop.length} steps)" if stop is not None else "")
    chosen = stop is not None and not stop.ablation
    stopped = []
    if stop is not None and stop.p_stop is not None:
        vs_gdfl = (f" and {verb_words(stop.p_stop_gdfl.verdict, chosen)} it against +GDFL "
                   f"({format_interval(stop.p_stop_gdfl, signed=True)} points)." if stop.p_stop_gdfl is not None else ".")
        stopped = [f"Stopped {where}, Adapt-Adv {verb_words(stop.p_stop.verdict, chosen)} unseen Recall@1 against "
                   f"the triplet base ({format_interval(stop.p_stop, signed=True)} points, paired){vs_gdfl}"]
    label = "Adapt-Adv (GDFL attention and class adversary)"
    head = real_comparison(runs[FLOOR][0], runs[BASE], runs[METHOD], label, "the triplet base",
                           status=rule_status("Adapt-Adv", runs[METHOD][0].config))
    g_status, broken = rule_status("Adapt-Adv", runs[GDFL][0].config), stability_label(runs[METHOD])
    adversary = (f"adding the class adversary to it made training unstable ({broken}; {format_interval(pa, signed=True)} points)"
                 if broken != "stable" else
                 f"adding the class adversary to it left unseen Recall@1 {change_words(pa.verdict, False)} the "
                 f"attention alone ({format_interval(pa, signed=True)} points)")
    return findings_box(head + [
        f"The attention alone (+GDFL: GDFL attention, adversary off{status_note(g_status)}) left unseen Recall@1 "
        f"{change_words(pg.verdict, g_status == 'chosen')} the base ({format_interval(pg, signed=True)} points); {adversary}."]
        + stopped + [
        "With the backbone frozen, Grad-CAM of the base and of Adapt-Adv re-weights the same 7x7 map: their maps over "
        "the photographs (on the experiments page) can differ only in which channels they weight."])


def main_findings(runs: Mapping, study: AdaptAdvStudy) -> Findings:
    """The chapter's "What we found": the quick ablation and the paper's Table 6 gains, the Flowers-102 rows
    against each other and against the untrained features, and the headline results of the experiments page
    (the stopping step chosen on validation classes, the three losses)."""
    paper6 = reported_frame("6", paper="alkaabi2022adaptadv")
    gain = {row: paper6.loc[f"Triplet / {row}", "R@1"] - paper6.loc["Triplet / Base", "R@1"]
            for row in ("+GDFL", "+Adv", "Adapt-Adv")}
    found = ablation_findings(runs) + [
        f"The paper's Table 6 reports +{gain['+GDFL']:.1f} (+GDFL), +{gain['+Adv']:.1f} (+Adv) and "
        f"+{gain['Adapt-Adv']:.1f} (Adapt-Adv) points on Flowers-102."]
    found += real_pair_sentences(study) if study.pairs else [
        "The real-profile Adapt-Adv runs are not recorded in this copy, so no real-data verdict is stated."]
    real = study.runs
    if FLOOR in real and BASE in real:
        floor_r1 = real[FLOOR][0].metric("R@1")
        found.append(f"On Flowers-102 the untrained pretrained features reach {100 * floor_r1:.1f}% unseen Recall@1 "
                     f"and the trained triplet head {100 * summarize(real[BASE])[0]:.1f}% (paper's base: "
                     f"{paper6.loc['Triplet / Base', 'R@1']:.1f}% with a fine-tuned Inception v2).")
    if FLOOR in real and METHOD in real:
        floor_r1 = real[FLOOR][0].metric("R@1")
        aa_m, aa_lo, aa_hi = summarize(real[METHOD])
        where = "above" if aa_lo > floor_r1 else "below" if aa_hi < floor_r1 else "not clearly different from"
        found.append(f"Adapt-Adv's trained head on Flowers-102: {format_interval((aa_m, aa_lo, aa_hi))}% unseen "
                     f"Recall@1 over {len(real[METHOD])} seeds, {where} the untrained features' "
                     f"{100 * floor_r1:.1f}%.")
    found.append(stopping_sentence(study))
    if study.table5 is not None:
        found += [f"Table 5 analogue on Flowers-102 (frozen backbone): {s}" for s in table5_summary(study)]
    return found_list(found)


def experiments_findings(runs: Mapping, lam_quick: Mapping, attention, gradcam, study: AdaptAdvStudy,
                         records) -> Findings:
    """The experiments page's "What we found": the quick profile's :math:`\\lambda_0` sweep, attention and Grad-CAM
    on the bird's parts (``attention``, ``gradcam``: their tables), then on Flowers-102 how the runs changed late,
    the stopping step and :math:`\\lambda_0` chosen on validation classes, the Table 5 rows and Grad-CAM on real
    flowers (``records``)."""
    found = [lambda_sweep_sentence(runs, lam_quick),
             "Relative attention mass on the bird per layer (1 = uniform): "
             + ", ".join(f"{k} {v:.2f}" for k, v in attention["object"].items()) + ".",
             f"Grad-CAM of the same-class similarity puts {gradcam.loc['base', 'object']:.2f} (base) and "
             f"{gradcam.loc['Adapt-Adv', 'object']:.2f} (Adapt-Adv) times the uniform mass on the bird.",
             late_sentence(study), stopping_sentence(study)]
    found += lambda0_sentences(study)
    if study.table5 is not None:
        found += rule_summary(study)
        found += [f"Table 5 analogue on Flowers-102 (frozen backbone): {s}" for s in table5_sentences(study)]
    if records:
        found += gradcam_sentences(records)
    return found_list(found)


def full_profile_section(full: Config, train: bool) -> Section:
    """The full profile's Adapt-Adv (the paper's setting on CUB-200-2011): trained when ``train``
    (``ZS_PROFILE=full``), and every recorded full-profile Adapt-Adv run with its unseen Recall@1 and provenance."""
    out = [f"The full-profile configuration: `{full.name}` (" + ", ".join(
        f"{k} {full.as_dict()[k]}" for k in ("backbone", "dataset", "iterations", "lr")) + ")."]
    if train:
        run = run_grid({"Adapt-Adv": full}, seeds=(0,))["Adapt-Adv"][0]
        out.append(f"Trained here: unseen R@1 {100 * run.metric('R@1'):.1f}%, NMI {100 * run.metric('NMI'):.1f}%.")
    recorded = [r for r in load_results(profile="full", method="adapt_adv")  # the paper's setting's test runs
                if r.config.dataset == full.dataset and not r.config.validation_fraction]
    out += [f"`{r.config.name}`: unseen R@1 {100 * r.metric('R@1'):.1f}%, recorded {r.provenance.get('timestamp')} on "
            f"{r.provenance.get('device')}, commit {short_commit(r.provenance.get('git_commit'))}." for r in recorded]
    if not recorded:
        out.append("No full-profile Adapt-Adv run has been recorded (`results/recorded/`): run this notebook with "
                   "`ZS_PROFILE=full` on a GPU to make one.")
    return Section(notes=[bullets(out)])
