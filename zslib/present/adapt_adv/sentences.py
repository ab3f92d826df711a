"""The Adapt-Adv pages' generated sentences (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): every one is written from the numbers of the runs it names, none is typed.

The quick profile's ablation and :math:`\\lambda_0` sweep (:func:`ablation_findings`, :func:`lambda_sweep_sentence`),
then the real profile's study (:class:`~zslib.present.adapt_adv.study.AdaptAdvStudy`): the Table 6 rows against each
other, how the runs changed late, the stopping step and :math:`\\lambda_0` chosen on validation classes, the Table 5
rows and their choices, and Grad-CAM on real flowers.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from zslib.engine.choice import OFF, VALIDATION_SEEDS
from zslib.engine.stats import format_interval, interval, paired, summarize, verdict
from zslib.methods.adapt_adv.method import lambda_trace
from zslib.methods.adapt_adv.recipes import BASE, GRADCAM_LOSSES, METHOD, shown_setting
from zslib.present.adapt_adv.study import AdaptAdvStudy, at_step, by_seed, step_label
from zslib.reported import reported_frame

__all__ = ["bullets", "seed_range", "ablation_findings", "lambda_sweep", "lambda_sweep_sentence",
           "attention_sentence", "real_pair_sentences", "late_sentence", "late_change_sentences",
           "stopping_rule_sentence", "stopping_sentence", "stopping_curve_sentences", "lambda0_sentences",
           "choice_sentences", "table5_sentences", "rule_summary", "table5_summary", "gradcam_summary",
           "gradcam_sentences", "real_gradcam_sentences"]

_HIGHER = {"up": "clearly higher", "down": "clearly lower"}  # a paired verdict as a comparison


def bullets(sentences: Sequence[str]) -> str:
    """Sentences as a Markdown list (the text of :func:`zslib.analysis.findings.found_list`)."""
    return "\n".join(f"- {s}" for s in sentences if s)


def seed_range(runs) -> str:
    """The seeds of ``runs``: ``"0-4"`` when consecutive (more than two), else listed."""
    seeds = sorted(r.config.seed for r in runs)
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) else \
        ", ".join(map(str, seeds))


# ------------------------------------------------------------------------------------ the quick profile


def ablation_findings(runs: Mapping) -> list[str]:
    """The ablation's outcome in sentences: every row against the base, and +GDFL against +Adv (the paper's
    conclusion II: GDFL is the larger share of the gain), each paired by seed."""
    base = runs["base"]
    out = [f"On the quick profile, {name} reached {100 * summarize(rs)[0]:.1f} % unseen Recall@1 against the base's "
           f"{100 * summarize(base)[0]:.1f} %: {format_interval(paired(base, rs), signed=True)} points over {len(base)} "
           f"paired seeds "
           f"({paired(base, rs).verdict})." for name, rs in runs.items() if name != "base"]
    if "+GDFL" in runs and "+Adv" in runs:
        p = paired(runs["+Adv"], runs["+GDFL"])
        out.append(f"+GDFL against +Adv (the paper's conclusion II: GDFL is the larger gain): "
                   f"{format_interval(p, signed=True)} points "
                   f"({p.verdict}).")
    return out


def lambda_sweep(runs: Mapping, lam_quick: Mapping) -> dict:
    """The quick profile's :math:`\\lambda_0` sweep (Fig. 14 analogue): ``{lambda0: runs}`` with 0 the +GDFL row
    (no adversary) and 0.5 the Adapt-Adv row, and ``"vs"``: each other value minus 0.5, paired by seed."""
    sweep = {0.0: runs["+GDFL"], 0.1: lam_quick["lambda0 0.1"], 0.5: runs["Adapt-Adv"]}
    return {"sweep": sweep, "vs": {lam: paired(runs["Adapt-Adv"], rs) for lam, rs in sweep.items() if lam != 0.5}}


def lambda_sweep_sentence(runs: Mapping, lam_quick: Mapping) -> str:
    """The quick sweep against lambda0 = 0.5, paired by seed, set beside the paper's Fig. 14."""
    vs = lambda_sweep(runs, lam_quick)["vs"]
    return ("On the quick profile, lambda0 against the default 0.5 (paired seeds, unseen Recall@1): " + "; ".join(
        f"{lam:g}{' (+GDFL)' if lam == 0 else ''} {format_interval(p, signed=True)} points ({p.verdict})"
        for lam, p in vs.items())
        + ". The paper's Fig. 14 puts lambda0 = 0 below the values around 0.5 (no intervals); here it is "
        + {"up": "clearly above", "down": "clearly below"}.get(vs[0.0].verdict, "not clearly different from") + " 0.5.")


def attention_sentence(table) -> str:
    """The attention table's outcome: the relative mass on the bird per layer and the layer that concentrates most."""
    obj = table["object"]
    return ("Relative attention on the bird (1 = uniform): " + ", ".join(f"{k} {v:.2f}" for k, v in obj.items())
            + f"; the layer that concentrates most on the bird is {obj.idxmax()}.")


# ------------------------------------------------------------------------------------ the real profile


def real_pair_sentences(study: AdaptAdvStudy) -> list[str]:
    """The Table 6 rows against each other on unseen Recall@1, paired by seed (+GDFL and Adapt-Adv against the
    base, Adapt-Adv against +GDFL), and every row that is not recorded."""
    pairs = study.pairs
    return [f"On Flowers-102, {b} against {a}: {format_interval(p, signed=True)} points of unseen Recall@1 over "
            f"{len(p.seeds)} paired "
            f"seeds ({p.verdict})." for (a, b), p in pairs.items()] + [
        f"Not recorded in this copy of the book: {what} ({why})" for what, why in study.missing.items()
        if what.startswith("the row")]


def late_sentence(study: AdaptAdvStudy) -> str:
    """How many Adapt-Adv runs lost unseen Recall@1 between their last two evaluations, and where they stood
    against the base before (read on the test classes, so not a result)."""
    if not study.late:
        return ""
    lc, at = study.late[METHOD], at_step(study.late)
    fell = sum(v < 0 for v in lc.per_seed.values())
    return (f"{fell} of {len(lc.per_seed)} recorded Adapt-Adv runs lost unseen Recall@1 between steps {lc.before_step} "
            f"and {lc.last_step} ({format_interval(lc.change, signed=True)} points; the base: "
            f"{format_interval(study.late[BASE].change, signed=True)}); at step "
            f"{lc.before_step} they stood {format_interval(at, signed=True)} points from the base ({verdict(at)}; read on "
            f"the test "
            "classes, so not a result).")


def late_change_sentences(study: AdaptAdvStudy, n_seen: int) -> list[str]:
    """Below the late-change figure: each row's change between its last two evaluations per seed, the two rows
    paired at the step before, and what the adversary did over the last steps of the run that fell most
    (``n_seen``: the classifier's classes)."""
    runs, late = study.runs, study.late
    out = []
    for name, lc in late.items():
        fell = sum(v < 0 for v in lc.per_seed.values())
        out.append(f"{name}: unseen R@1 changed by {format_interval(lc.change, signed=True)} points from step "
                   f"{lc.before_step} to step "
                   f"{lc.last_step}; {fell} of {len(lc.per_seed)} seeds fell (per seed "
                   + ", ".join(f"{s}: {100 * v:+.1f}" for s, v in lc.per_seed.items()) + ").")
    at = at_step(late)
    out.append(f"At step {late[BASE].before_step}, Adapt-Adv minus the base, paired by seed: "
               f"{format_interval(at, signed=True)} points "
               f"({verdict(at)}; read on the test classes, so not a result one may pick: a stopping step has to "
               "be chosen on validation classes).")
    worst = min(late[METHOD].per_seed, key=late[METHOD].per_seed.get)
    res = by_seed(runs[METHOD])[worst]
    tr = lambda_trace(res.history, n_seen, res.config.method_params)
    tail = len(tr["step"]) // 10  # the last tenth of the run against the tenth before it
    ce_before, ce_end = tr["classifier_ce"][-2 * tail:-tail].mean(), tr["classifier_ce"][-tail:].mean()
    _, m_loss = res.history.loss_curve(res.config.loss)
    out.append(f"Seed {worst}, the largest fall: over its last {tail} steps λ was {tr['lambda'][-tail:].mean():+.2f} "
               f"on average, the classifier's loss went from {ce_before:.3f} to {ce_end:.3f} and the {res.config.loss} "
               f"loss from {np.mean(m_loss[-2 * tail:-tail]):.4f} to {np.mean(m_loss[-tail:]):.4f} (mean of the "
               f"{tail} steps before, then of the last {tail}).")
    return out


def stopping_rule_sentence(study: AdaptAdvStudy) -> str:
    """What the book's choice rule (:func:`zslib.engine.choice.choose`) made of Adapt-Adv's training length: every
    evaluated step of the validation curves of seeds 0-2 is a candidate and step 0, no training, is "off"."""
    stop = study.stopping
    if stop is None:
        return ""
    out = ("The book's choice rule over Adapt-Adv's validation curves (every evaluated step a candidate, scored by its "
           f"validation Recall@1 over seeds {seed_range(stop.val_runs[METHOD])}; no training, step 0, as \"off\"): "
           + stop.rule.sentence(step_label))
    if stop.ablation:
        out += (f" So on validation classes no length of training is chosen: the Adapt-Adv runs read at {stop.length} "
                "steps, the trained step with the best mean, are an ablation that shows what training does.")
    return out


def stopping_sentence(study: AdaptAdvStudy) -> str:
    """Adapt-Adv's length as the choice rule left it on validation classes and, stopped there (an ablation when the
    rule kept no training), its unseen Recall@1 against the base and against +GDFL, paired by seed."""
    stop = study.stopping
    if stop is None:
        return ""
    if stop.ablation:
        lead = ("" if stop.rule.leader_vs_off is None else
                f", {format_interval(stop.rule.leader_vs_off, signed=True)} points for {step_label(stop.rule.leader)}, "
                f"not clearly above")
        head = (f"On validation classes the choice rule keeps no training for Adapt-Adv's length (step 0{lead}), so "
                f"Adapt-Adv read at {stop.length} steps, the best trained step, is an ablation")
    else:
        head = f"Chosen on validation classes by the book's choice rule, Adapt-Adv's length is {stop.length} steps"
    if stop.p_stop is not None:
        return (f"{head}; stopped there it reaches {format_interval(summarize(stop.stop_runs))}% unseen Recall@1, "
                f"{format_interval(stop.p_stop, signed=True)} points against the base ({stop.p_stop.verdict})"
                + (f", and {format_interval(stop.p_stop_gdfl, signed=True)} points against +GDFL without the adversary "
                   f"({stop.p_stop_gdfl.verdict})." if stop.p_stop_gdfl is not None else "."))
    return head + (", the length of the recorded runs." if stop.length == study.configs[METHOD].iterations
                   else "; the runs stopped there are not recorded in this copy.")


def stopping_curve_sentences(study: AdaptAdvStudy) -> list[str]:
    """Below the validation curves: the mean by step, the trained step with the best mean, and whether the runs
    stopped there equal the long ones at that step."""
    stop = study.stopping
    best = max((s for s in stop.val_curve[METHOD] if s > 0), key=stop.val_curve[METHOD].get)
    out = ["Mean validation Recall@1 by step (%): " + "; ".join(
        f"{name}: " + ", ".join(f"{s} {100 * v:.1f}" for s, v in curve.items())
        for name, curve in stop.val_curve.items())
        + f". Among the trained steps, the highest mean of Adapt-Adv's {len(VALIDATION_SEEDS)} seeds is at step {best}."]
    if stop.stop_runs is not None:
        out.append(f"Determinism check: for {len(stop.same_seeds)} of {len(stop.stop_runs)} seeds the stopped run's "
                   f"unseen Recall@1 equals the long run's evaluation at step {stop.length} exactly (same batches, "
                   "same updates up to that step).")
    return out


def lambda0_sentences(study: AdaptAdvStudy) -> list[str]:
    """The :math:`\\lambda_0` choice on validation classes in sentences: the leader among the adversary's weights and
    what differs clearly from it, the choice rule with the adversary off as a candidate, and whether the leader had
    to be trained again."""
    lc = study.lambda0
    if lc is None:
        return []
    stop = study.stopping
    clear = [f"{lam:g} ({verdict(d)})" for lam, d in lc.vs.items() if verdict(d) != "no clear effect"]
    out = [f"Among the adversary's weights (lambda0 > 0), the best mean validation Recall@1 at {stop.length} steps"
           + (" (the best trained step, an ablation length: the rule kept no training)" if stop.ablation else "")
           + " is "
           f"lambda0 = {lc.chosen:g} (mean of {len(VALIDATION_SEEDS)} seeds); against it, paired by seed, the validation "
           "Recall@1 is clearly different for lambda0 "
           f"{', '.join(clear) or 'none of the others'}"
           + (f"; lambda0 = 0 (+GDFL) is {format_interval(lc.vs[0.0], signed=True)} points from it" if 0.0 in lc.vs else "")
           + ". The paper's Fig. 14 (test classes, no intervals) puts lambda0 = 0 lower and the peak between 0.3 and "
             "0.7; "
           + (f"here lambda0 = 0 is {_HIGHER.get(verdict(lc.vs[0.0]), 'not clearly different')} on validation classes."
              if 0.0 in lc.vs else "here lambda0 = 0 was not run.")]
    if lc.rule is not None:
        rule = lc.rule.sentence(lambda k: "lambda0 = 0 (the adversary off)" if k == "off" else f"lambda0 = {k:g}")
        out.append(f"The book's choice rule, with the adversary switched off as a candidate: {rule}"
                   + (" So on validation classes the adversary is not chosen, and every Adapt-Adv row with the "
                      "adversary in this chapter is an ablation that shows what it does." if lc.rule.off_won else ""))
    if lc.chosen == lc.used:
        out.append(f"Among the adversary's weights, the leader is the paper's {lc.used:g}, the value of every "
                   "Adapt-Adv run of this chapter: nothing is trained again.")
    elif lc.test:
        out.append(f"Trained at lambda0 = {lc.chosen:g} on all seen classes, Adapt-Adv against the triplet base: "
                   f"{format_interval(lc.test['base'], signed=True)} points ({lc.test['base'].verdict}); against lambda0 = 0.5: "
                   f"{format_interval(lc.test['0.5'], signed=True)} points ({lc.test['0.5'].verdict}).")
    return out


def choice_sentences(study: AdaptAdvStudy) -> list[str]:
    """What the book's choice rule made of each validation grid of the Table 5 rows (the paper's Table 5: the
    Energy weight lambda1 per loss, Proxy-NCA's proxies' rate), "off" among the candidates, with the mean
    validation Recall@1 of every candidate; where "off" wins, the rows at the leading setting are an ablation."""
    out = []
    for what, (choice, off_name) in study.table5.choices.items():
        def label(k, off_name=off_name):
            return off_name if k == OFF else f"{k:g}"

        means = ", ".join(f"{label(k)} {100 * m.mean:.1f}" for k, m in choice.means.items())
        out.append(f"{what}: mean validation Recall@1 % of seeds {VALIDATION_SEEDS[0]}-{VALIDATION_SEEDS[-1]}: {means}. "
                   + choice.sentence(label)
                   + (f" The Table 5 rows that use {shown_setting(choice):g} are an ablation." if choice.off_won
                      else ""))
    return out


def table5_sentences(study: AdaptAdvStudy) -> list[str]:
    """The Table 5 analogue in sentences: every Energy and Adapt-Adv row against its loss's base (paired by seed)
    beside the paper's difference, then how many losses each one raised or lowered clearly."""
    t5, paper5 = study.table5, reported_frame("5", paper="alkaabi2022adaptadv")
    out = []
    for name, p in t5.pairs.items():
        loss, ext = name.split(" / ")
        if name in t5.ablations:
            ext = f"{ext} (an ablation: {t5.ablations[name]})"
        paper_diff = paper5.loc[name, "R@1"] - paper5.loc[f"{loss} / Base", "R@1"]
        if p.diff.n < 2:
            out.append(f"{ext} on {loss}: {100 * p.diff.mean:+.1f} points of unseen Recall@1 against the {loss} base "
                       f"on one seed, too few for an interval or a verdict (the paper: {paper_diff:+.2f}).")
            continue
        if p.verdict == "no clear effect":
            agree = f"the paper reports {paper_diff:+.2f}"
        else:
            same = (p.verdict == "up") == (paper_diff > 0)
            agree = f"{'the same direction as' if same else 'the opposite direction to'} the paper's {paper_diff:+.2f}"
        out.append(f"{ext} on {loss}: {format_interval(p, signed=True)} points of unseen Recall@1 against the {loss} base "
                   f"over {p.diff.n} "
                   f"paired seeds ({p.verdict}); {agree}.")
    return out + table5_summary(study)


def rule_summary(study: AdaptAdvStudy) -> list[str]:
    """One sentence: which Table 5 choices the rule made and for which it kept "off"."""
    got = study.table5.choices
    if not got:
        return []
    kept = [what for what, (c, _) in got.items() if c.off_won]
    taken = [f"{what} = {c.chosen:g}" for what, (c, _) in got.items() if not c.off_won]
    return [f"With \"off\" among the candidates, the choice rule keeps \"off\" on validation classes for "
            f"{len(kept)} of the {len(got)} Table 5 choices ({'; '.join(kept) or 'none'}) and chooses "
            f"{'; '.join(taken) or 'no setting'}; the rows at a setting the rule did not choose are labelled "
            "ablations."]


def table5_summary(study: AdaptAdvStudy) -> list[str]:
    """How many losses Adapt-Adv and Energy raised or lowered clearly, beside the paper's count of gains."""
    t5, paper5 = study.table5, reported_frame("5", paper="alkaabi2022adaptadv")
    out = []
    aa_rows = [n for n in t5.pairs if n.endswith("Adapt-Adv") and t5.pairs[n].diff.n > 1]
    if aa_rows:
        gains = sum(paper5.loc[f"{loss} / Adapt-Adv", "R@1"] > paper5.loc[f"{loss} / Base", "R@1"]
                    for loss in t5.loss_bases)
        ups = [n.split(" / ")[0] for n in aa_rows if t5.pairs[n].verdict == "up"]
        downs = [n.split(" / ")[0] for n in aa_rows if t5.pairs[n].verdict == "down"]
        abl = " as an ablation" if any(n in t5.ablations for n in aa_rows) else ""
        out.append(f"Adapt-Adv ({t5.aa_steps} steps{abl}) raises unseen Recall@1 clearly for {len(ups)} of the "
                   f"{len(aa_rows)} losses with an interval ({', '.join(ups) or 'none'}) and lowers it clearly for "
                   f"{len(downs)} ({', '.join(downs) or 'none'}); the paper reports a gain for {gains} of its three "
                   "losses.")
    en_rows = [n for n in t5.pairs if n.endswith("Energy") and t5.pairs[n].diff.n > 1]
    if en_rows:
        clear = [f"{n.split(' / ')[0]} ({t5.pairs[n].verdict})" for n in en_rows
                 if t5.pairs[n].verdict != "no clear effect"]
        abl = [n.split(" / ")[0] for n in en_rows if n in t5.ablations]
        out.append(f"Energy changes unseen Recall@1 clearly for {len(clear)} of the {len(en_rows)} losses"
                   + (f": {', '.join(clear)}" if clear else "")
                   + (f" (an ablation for {', '.join(abl)}: not chosen on validation classes)." if abl else "."))
    return out


# ------------------------------------------------------------------------------------ Grad-CAM on real flowers


def gradcam_summary(records: Mapping) -> dict:
    """Per loss: how the two models' Grad-CAM maps compare on the images where both have mass (correlation,
    largest difference, Adapt-Adv's central share minus the base's), and which maps are all zero."""
    rec = {name: recs[0] for name, recs in records.items()}
    cams = {name: np.asarray(r["gradcam"]) for name, r in rec.items()}
    share = {name: np.asarray(r["central_share"]) for name, r in rec.items()}
    n = len(np.asarray(next(iter(rec.values()))["rows"]))
    empty = {name: [j for j in range(n) if c[j].max() == 0] for name, c in cams.items()}
    out = {"empty": empty, "n": n, "losses": {}}
    for short in GRADCAM_LOSSES:
        b, a = f"{short} base", f"{short} Adapt-Adv"
        if b not in rec or a not in rec:
            continue
        both = [j for j in range(n) if j not in empty[b] and j not in empty[a]]
        out["losses"][short] = dict(
            corr=[float(np.corrcoef(cams[b][j].ravel(), cams[a][j].ravel())[0, 1]) for j in both],
            gap=np.abs(cams[b] - cams[a]).reshape(n, -1).max(1), both=both, uniform=rec[b]["uniform_share"],
            base=[share[b][j] for j in both], adapt=[share[a][j] for j in both],
            d_share=interval([share[a][j] - share[b][j] for j in both]))
    return out


def gradcam_sentences(records: Mapping) -> list[str]:
    """Grad-CAM on real flowers in one sentence per loss: how the two maps correlate and Adapt-Adv's central share
    minus the base's."""
    out = []
    for short, g in gradcam_summary(records)["losses"].items():
        out.append(f"Grad-CAM on real flowers ({short} loss, seed 0, {len(g['corr'])} unseen images): both models "
                   f"explain the same frozen feature map, so their maps differ only by the channel weights; per image "
                   f"the two maps correlate {min(g['corr']):+.2f} to {max(g['corr']):+.2f}, and Adapt-Adv's share of "
                   "the mass in the central box minus the base's is "
                   f"{format_interval(g['d_share'], scale=1.0, digits=2, signed=True)} "
                   f"({verdict(g['d_share'])}, over images of one seed).")
    return out


def real_gradcam_sentences(study: AdaptAdvStudy, records: Mapping) -> list[str]:
    """Below the Grad-CAM maps on real flowers: what the records share (the images, the frozen map A), which maps
    are all zero, and per loss how the base's and Adapt-Adv's maps differ (largest difference, correlation,
    central share), then the models analysed beside their recorded runs."""
    rec = {name: recs[0] for name, recs in records.items()}
    first = next(iter(rec.values()))
    rows_idx = np.asarray(first["rows"], int)
    same_images = all(np.array_equal(np.asarray(r["rows"], int), rows_idx) for r in rec.values())
    act = np.asarray(first["activation"])
    same_act = max(float(np.abs(np.asarray(r["activation"]) - act).max()) for r in rec.values())
    summary = gradcam_summary(records)
    out = [f"The same images in every record: {'yes' if same_images else 'no'}. The feature map A is the same for "
           f"every model: the largest difference of its channel mean between the records is {same_act:.2g}.",
           "Maps with no positive evidence (all zero after the ReLU: no position raises the similarity): " + "; ".join(
               f"{n}: {len(e)} of {summary['n']}" + (f" (image {', '.join(str(j + 1) for j in e)})" if e else "")
               for n, e in summary["empty"].items()) + "."]
    for short, g in summary["losses"].items():
        loss = GRADCAM_LOSSES[short]
        out.append(f"{loss}: the two Grad-CAM maps are {'identical' if g['gap'].max() == 0 else 'not identical'}: "
                   "largest difference per image (maps scaled to a maximum of 1) "
                   + ", ".join(f"{v:.2f}" for v in g["gap"])
                   + f"; correlation on the {len(g['both'])} images where both maps have mass "
                   + ", ".join(f"{c:+.2f}" for c in g["corr"]) + ".")
        out.append(f"{loss}: share of the Grad-CAM mass in the central box (uniform {g['uniform']:.2f}) on those "
                   "images: base " + ", ".join(f"{v:.2f}" for v in g["base"])
                   + "; Adapt-Adv " + ", ".join(f"{v:.2f}" for v in g["adapt"])
                   + ". Adapt-Adv minus base (images of one seed, so a description of these images, not a verdict "
                   f"over training runs): {format_interval(g['d_share'], scale=1.0, digits=2, signed=True)} "
                   f"({verdict(g['d_share'])}).")
    seed0 = {}
    for short, loss in GRADCAM_LOSSES.items():
        for ext, row in (("base", f"{loss} / Base"), ("Adapt-Adv", f"{loss} / Adapt-Adv")):
            if row in study.table5.runs:
                seed0[f"{short} {ext}"] = by_seed(study.table5.runs[row])[0].metric("R@1")
    out.append("The models analysed: " + "; ".join(
        f"{n} from its {r.provenance.get('model_from')}, unseen R@1 {100 * r['R@1']:.2f}%"
        + (f" (the recorded seed-0 run: {100 * seed0[n]:.2f}%)" if n in seed0 else "") for n, r in rec.items()) + ".")
    return out
