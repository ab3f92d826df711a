"""The DeML pages' generated sentences (Chen and Deng, CVPR 2019; ``chen2019deml``): the "Key findings" box the
chapter opens with, the "What we found" lists of the main and the experiments page, and the full-profile runs against
the paper's Table 3. Every sentence is written from the numbers it is given.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from zslib.analysis.compare import rule_status
from zslib.analysis.findings import (Findings, findings_box, found_list, not_recorded_box, real_comparison, recorded,
                                     verdict_words)
from zslib.engine.stats import format_interval, paired
from zslib.engine.store import short_commit, utc_minute
from zslib.methods.deml import recipes
from zslib.present.base import Section
from zslib.present.deml.attention import probe_diff
from zslib.present.deml.photos import cam_numbers
from zslib.present.deml.quick import paper_gains, quick_pairs
from zslib.present.deml.real import arm_pairs
from zslib.present.deml.study import DemlStudy
from zslib.reported import reported_frame

__all__ = ["key_findings", "main_found", "experiments_found", "full_profile_section"]


def key_findings() -> Findings:
    """The "Key findings" box the DeML chapter opens with, generated from the recorded real-profile runs."""
    c = recipes.real_configs()
    floor = recorded({"f": c[recipes.FLOOR]}, (0,))
    runs = recorded({"b": c[recipes.BASE], "4": c[recipes.DEML4], "8": c[recipes.DEML8]})
    if floor is None or runs is None:
        return not_recorded_box()
    p8 = paired(runs["4"], runs["8"])
    return findings_box(real_comparison(floor["f"][0], runs["b"], runs["4"], "DeML(1, 4)",
                                        status=rule_status("DeML", c[recipes.DEML4])) + [
        f"Eight learners instead of four {verdict_words(p8.verdict)} it ({format_interval(p8.diff, signed=True)} "
        "points, paired): with a frozen backbone the CAMs can only re-weight the channels of one fixed map."])


def main_found(runs: Mapping, sim: Mapping, study: DemlStudy) -> Findings:
    """The main page's "What we found": the quick experiment's three claims beside the paper's gains, the
    learners' similarity (Table 4), DeML(1, 4) on the photographs (the runs of ``study``), and which claims this run
    does not reproduce; every sentence from the numbers."""
    floor, real = study.floor(), study.runs()
    pairs, gain = quick_pairs(runs), paper_gains()
    p_act, p_j, p_adv = pairs["L_act"], pairs["J=4"], pairs["L_adv"]
    found = [
        f"On the quick profile, activation decay {verdict_words(p_act.verdict)} unseen Recall@1 over U_d "
        f"({format_interval(p_act.diff, signed=True)} points; the paper: {gain['L_act']:+.1f} on CUB).",
        f"Four CAM learners with the adversary {verdict_words(p_j.verdict)} it "
        f"({format_interval(p_j.diff, signed=True)}; "
        f"paper {gain['J=4']:+.1f}); a second scale (paper {gain['I=2']:+.1f}) was not trained here.",
        f"Keeping the adversary in DeML(1,4) changed unseen Recall@1 by {format_interval(p_adv.diff, signed=True)} "
        f"points against removing it (the paper: {gain['L_adv']:+.1f} for J=8); the learners' mean cosine "
        f"similarity was {np.mean(sim['DeML(1,4)']):.2f} with it and {np.mean(sim['DeML(1,4) no L_adv']):.2f} without "
        "(paper: -0.08 and 0.92)."]
    if floor is not None and recipes.BASE in real and recipes.DEML4 in real:
        p = paired(real[recipes.BASE], real[recipes.DEML4])
        found.append(f"On Flowers-102 with frozen pretrained features, DeML(1,4) with the paper's weights "
                     f"{verdict_words(p.verdict)} unseen Recall@1 against the baseline head "
                     f"({format_interval(p.diff, signed=True)} points); the untrained features reach "
                     f"{100 * floor[recipes.FLOOR][0].metric('R@1'):.1f}%.")
    missed = [k for k, p in (("activation decay", p_act), ("J = 4 learners", p_j), ("the adversary", p_adv))
              if p.verdict != "up"]
    found.append("Claims of the paper that this quick run does not reproduce (no clear gain): "
                 + (", ".join(missed) if missed else "none") + ".")
    return found_list(found)


def _fig4_sentence(fig4: Mapping) -> str:
    c0, d, d0 = fig4["centre"]["Eq. 2"], fig4["d_centre"], fig4["d_centre_null"]
    return (f"On {fig4['n']} Flowers-102 photographs of unseen classes, the frozen pretrained network's OAM (Eq. 2) "
            "put "
            f"{format_interval(c0, scale=1, digits=2)} of its mass in the central quarter of the image (uniform "
            f"{fig4['uniform']:.2f}, the same maps shuffled {fig4['centre_null']['Eq. 2'].mean:.2f}); the released "
            f"code's Gaussian changed that by {format_interval(d, scale=1, digits=3, signed=True)} on the photographs "
            f"and by {format_interval(d0, scale=1, digits=3, signed=True)} on shuffled maps"
            + (", so the centre preference it adds is smaller on photographs than with no image layout at all"
               if d0.low > d.high else "")
            + "; its crops were " + {"up": "larger than", "down": "smaller than"}.get(fig4["d_area_verdict"],
                                                                               "not clearly different in area from")
            + f" those of Eq. 2 and overlapped them with IoU {fig4['iou'].mean:.2f} on average. Without flower masks "
            "this says where the attention sits in the frame, not whether it finds the flower.")


def experiments_found(loc: tuple, probe: Mapping, real: Mapping, lambda0: Mapping | None, cam_att: Mapping,
                      fig4: Mapping | None) -> Findings:
    """The experiments page's "What we found": the OAM scored on SynthParts (``loc``: the result of
    :func:`~zslib.present.deml.attention.localization`), the attribute probe, the validation check of lambda0, the
    two extra real arms (``real``: ``study.runs(arms=True)``) beside the paper's Table 2, the CAM learners and Fig. 4
    (a) on photographs; every sentence from the numbers."""
    table, chance = loc
    paper = table.loc["both, T=10 (paper)"]
    diff = probe_diff(probe)
    found = [
        f"The OAM put {paper['mass on bird']:.2f} of its mass on the bird (chance {chance['area_share']:.2f}, "
        f"{paper['lift over chance']:.1f}x) and its crop box reached IoU {paper['crop IoU']:.2f} with the bird "
        f"(whole image {chance['box_iou_full_image']:.2f}); the literal reading of Eq. 3 gives uniform attention "
        f"(mass {table.loc['literal Eq. 3', 'mass on bird']:.2f}).",
        f"The hard-attribute probe moved by {format_interval(diff, scale=1, digits=3, signed=True)} from U_d + L_act "
        "to DeML(1,4): " + ("more hard attributes kept, as the paper's story predicts." if diff[1] > 0
                            else "no clear evidence that decoupling keeps more of them.")]
    if lambda0 is not None:
        p, (low, high) = lambda0["paired"], (lambda0["values"][0], lambda0["values"][-1])
        found.append(f"On the validation classes, λ₀ = {high:g} {verdict_words(p.verdict)} Recall@1 against "
                     f"λ₀ = {low:g} ({format_interval(p.diff, signed=True)} points, paired); the higher mean is "
                     f"λ₀ = {lambda0['best']:g}, and the test tables use the paper's 1.")
    j8 = paper_gains()["J=8 over J=4"]
    for name, (p_b, p_d) in arm_pairs(real).items():
        found.append(f"{name} {verdict_words(p_b.verdict)} unseen Recall@1 against the baseline head "
                     f"({format_interval(p_b.diff, signed=True)} points) and {verdict_words(p_d.verdict)} it against "
                     f"DeML(1,4) with the adversary ({format_interval(p_d.diff, signed=True)})"
                     + (f"; the paper: DeML(1,8) {j8:+.1f} over DeML(1,4) on CUB." if name == "DeML(1,8)" else "."))
    if recipes.DEML4 in cam_att:
        c = cam_numbers(cam_att[recipes.DEML4])
        own = c["ch_c"].high < c["ch_i"].low
        found.append("The four CAMs of DeML(1,4) learned " + ("channel selections of their own" if own else
                                                            "channel selections that are not clearly their own")
                     + f" (correlation between learners {format_interval(c['ch_c'], scale=1, digits=3)}, of one learner "
                       f"across images "
                     f"{format_interval(c['ch_i'], scale=1, digits=3)}; spread of the weights "
                     f"{format_interval(c['spread'], scale=1, digits=3)}, at initialization "
                     f"{format_interval(c['spread0'], scale=1, digits=3)}); the learners' evidence maps of an image "
                     f"correlate {format_interval(c['map_c'], scale=1, digits=3)}: "
                     + ("different channels, nearly the same regions." if own and c["map_c"].low > 0.9 else
                        "nearly the same regions." if c["map_c"].low > 0.9 else "the regions differ too."))
    found.append(_fig4_sentence(fig4) if fig4 is not None else
                 "The Fig. 4 analogue on photographs was not computed on this machine (its section says what is "
                 "missing).")
    return found_list(found)


def full_profile_section(full_runs, paper_config) -> Section:
    """The full-profile DeML(3, 3) runs on CUB (the paper's headline model, :func:`~zslib.methods.deml.recipes.
    full_config`) against the paper's Table 3, with where and when each was made; without one, the paper's setting
    and how to make the run. Only test runs of the paper's dataset are set beside the paper's figure (the fine-tuned
    Flowers-102 runs have a section of their own)."""
    full_runs = [r for r in full_runs if r.config.dataset == paper_config.dataset and not r.config.validation_fraction]
    if not full_runs:
        c, mp = paper_config, paper_config.method_params
        return Section(notes=[
            f"No full-profile DeML run is recorded in `results/recorded/`: run this notebook with "
            f"`ZS_PROFILE=full` on a GPU to make one. The paper's setting: DeML({mp['scales']}, {mp['learners']}) "
            f"on `{c.dataset}` with `{c.backbone}`, {c.embedding_dim} dimensions, learning rate {c.lr:g}, "
            f"{c.iterations:,} iterations, loss `{c.loss}`."])
    paper = reported_frame("3", "chen2019deml").loc["DeML(3,3)", "CUB R@1"]
    lines = [f"**{r.config.name}**: unseen Recall@1 {100 * r.metric('R@1'):.1f} % (the paper, Table 3: {paper} %); "
             f"made {utc_minute(r.provenance.get('timestamp'))} on {r.provenance.get('device')} with zslib "
             f"{r.provenance.get('zslib_version')}, commit `{short_commit(r.provenance.get('git_commit'))}`, "
             f"{r.provenance.get('train_seconds')} s of training." for r in full_runs]
    return Section(notes=["\n".join(f"- {line}" for line in lines)])
