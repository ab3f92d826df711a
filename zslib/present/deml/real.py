"""The DeML pages' real-profile results (Chen and Deng, CVPR 2019; ``chen2019deml``): Flowers-102 through a frozen
ImageNet EfficientNet-Lite0, the runs of :class:`~zslib.present.deml.study.DemlStudy`. The comparison with the
baseline head, every recorded seed, the validation check of the adversary's weight lambda0, the two extra arms and
the retrieval figure on the photographs. Each ``*_section`` returns a :class:`~zslib.present.base.Section`.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from zslib.analysis.photos import has_kept_weights, retrieval_section
from zslib.engine.choice import OFF, VALIDATION_SEEDS, choose
from zslib.engine.stats import format_interval, paired, summarize
from zslib.engine.store import short_commit, utc_minute
from zslib.methods.deml import recipes
from zslib.present.base import Section
from zslib.present.deml.quick import table_row
from zslib.present.deml.study import DemlStudy

__all__ = ["real_table", "real_section", "real_runs_table", "lambda0_check", "arm_pairs", "arms_section",
           "photo_figures"]


def real_table(floor: Mapping | None, runs: Mapping) -> pd.DataFrame:
    """The real-profile comparison: the untrained features (one run), then each trained row with unseen and
    seen Recall@1 (95% intervals over seeds) and its paired difference to the baseline head."""
    rows = []
    if floor is not None:
        raw = floor[recipes.FLOOR][0]
        rows.append({"variant": "pretrained features, no training", "unseen R@1 %": f"{100 * raw.metric('R@1'):.1f}",
                     "seen R@1 %": f"{100 * raw.metric('R@1', 'seen'):.1f}", "vs baseline (pts)": "", "verdict": ""})
    rows += [table_row(name, rs, {"baseline": runs.get(recipes.BASE)}) for name, rs in runs.items()]
    return pd.DataFrame(rows).set_index("variant")


def _provenance_line(name: str, rs) -> str:
    pv = rs[0].provenance
    trained = [r.provenance.get("train_seconds") or 0.0 for r in rs]
    threads = pv.get("torch_threads")
    return (f"**{name}**: {len(rs)} seeds, made on {pv.get('device')} with zslib {pv.get('zslib_version')}, commit "
            f"`{short_commit(pv.get('git_commit'))}`, {utc_minute(pv.get('timestamp'))}; {min(trained):.0f} to "
            f"{max(trained):.0f} s of training per run" + (f" ({threads} thread(s))" if threads else ""))


def real_section(study: DemlStudy) -> Section:
    """The experiments page's real-profile table (:func:`real_table`: the untrained features, the baseline head and
    DeML(1, 4)), then where the runs come from (device, code, training time per row), what training the head alone
    moved against the untrained features, and what is missing when a row is not recorded."""
    floor, runs = study.floor(), study.runs()
    lines = [_provenance_line(name, rs) for name, rs in runs.items()]
    if floor is not None and recipes.BASE in runs:
        raw = floor[recipes.FLOOR][0].metric("R@1")
        lines.append(f"The trained baseline head against the untrained features: "
                     f"{100 * (summarize(runs[recipes.BASE])[0] - raw):+.1f} points of unseen Recall@1.")
    if recipes.DEML4 not in runs:
        lines.append("The DeML(1,4) runs of the real profile are not recorded in this copy (a DeML run reads the "
                     "cached 1280 x 7 x 7 maps of every image and takes minutes on one core): run the chapter with "
                     "`ZS_PROFILE=real` to train them.")
    notes = ["\n".join(f"- {line}" for line in lines)] if lines else []
    table = real_table(floor, runs) if floor is not None or runs else None
    return Section(caption=study.missing_note(), table=table, notes=notes)


def real_runs_table(study: DemlStudy) -> pd.DataFrame:
    """Every recorded real-profile run of the chapter and its two extra arms, one row per seed: unseen and seen
    Recall@1, training time, commit and date (the full grid behind :func:`real_table`)."""
    floor, runs = study.floor(), study.runs(arms=True)
    rows = []
    for name, rs in {**({"pretrained features": floor[recipes.FLOOR]} if floor else {}), **runs}.items():
        for r in sorted(rs, key=lambda r: r.config.seed):
            pv = r.provenance
            rows.append({"variant": name, "seed": r.config.seed, "unseen R@1 %": round(100 * r.metric("R@1"), 2),
                         "seen R@1 %": round(100 * r.metric("R@1", "seen"), 2),
                         "training s": round(float(pv.get("train_seconds") or 0.0)),
                         "commit": short_commit(pv.get("git_commit")), "date": utc_minute(pv.get("timestamp"))})
    return pd.DataFrame(rows)


def lambda0_check(study: DemlStudy) -> tuple[dict | None, Section]:
    """The adversary's weight lambda0 of DeML(1, 4) compared on a class-disjoint validation split of the seen
    classes (:data:`~zslib.engine.choice.VALIDATION_FRACTION` held out; never the unseen classes): validation
    Recall@1 per value and the paired difference, and the book's one choice rule (:func:`zslib.engine.choice.choose`)
    with DeML switched off (the same binomial loss alone on the same split) as a candidate. Returns the numbers
    (``None`` when the runs are not recorded) and the section."""
    values, seeds = recipes.LAMBDA0S, VALIDATION_SEEDS
    sweep = study.lambda0_sweep()
    if sweep is None:
        return None, Section(caption=study.missing_note("the validation comparison of lambda0"))
    best = max(values, key=lambda v: summarize(sweep[v], "R@1", "val")[0])
    p = paired(sweep[values[0]], sweep[values[-1]], "R@1", "val")
    per_value = "; ".join(f"λ₀ = {v:g}: {format_interval(summarize(sweep[v], 'R@1', 'val'))} %" for v in values)
    text = (f"Validation Recall@1 over seeds {', '.join(map(str, seeds))}: {per_value}. λ₀ = {values[-1]:g} minus "
            f"λ₀ = {values[0]:g}, paired by seed: {format_interval(p.diff, signed=True)} points ({p.verdict}); "
            f"the higher mean is λ₀ = {best:g}"
            + ("." if best == 1.0 else ": the test table uses the paper's 1, not the validation choice."))
    off = study.lambda0_off()
    rule = None if off is None else choose({OFF: off, **sweep})
    if rule is not None:
        said = rule.sentence(lambda k: "the binomial baseline (DeML off)" if k == OFF else f"λ₀ = {k:g}")
        text += (f" With DeML switched off as a candidate, the book's choice rule reads: {said}"
                 + (" So on validation classes DeML is not chosen, and its rows in this chapter show what it does as "
                    "an ablation." if rule.off_won else ""))
    return {"values": tuple(values), "best": best, "paired": p, "rule": rule}, Section(notes=[text])


def arm_pairs(runs: Mapping) -> dict:
    """name -> (paired against the baseline, paired against DeML(1,4)) for each extra real-profile arm."""
    return {name: (paired(runs[recipes.BASE], runs[name]), paired(runs[recipes.DEML4], runs[name]))
            for name in recipes.real_arm_configs()
            if name in runs and recipes.BASE in runs and recipes.DEML4 in runs}


def arms_section(study: DemlStudy) -> Section:
    """DeML(1, 4) and the two extra arms (:func:`~zslib.methods.deml.recipes.real_arm_configs`) on the real
    profile: unseen and seen Recall@1 with their paired differences to the baseline head and to DeML(1, 4); an
    empty section when they are not recorded."""
    runs = study.runs(arms=True)
    names = [n for n in recipes.real_arm_configs() if n in arm_pairs(runs)]
    if not names:
        return Section()
    versus = {"baseline": runs[recipes.BASE], "DeML(1,4)": runs[recipes.DEML4]}
    return Section(table=pd.DataFrame([table_row(name, runs[name], versus)
                                       for name in (recipes.DEML4, *names)]).set_index("variant"))


def photo_figures(study: DemlStudy):
    """The retrieval grid and t-SNE on Flowers-102 photographs for the DeML experiments page's real section: the untrained
    pretrained features, the trained baseline head (Eq. 5's loss) and DeML(1, 4) itself, seed 0 of each, drawn by
    :func:`zslib.analysis.photos.retrieval_section` (returned as sections). The baseline is trained again from its
    recorded config (seconds); DeML(1, 4) is loaded from its kept weights (float16, checked to reproduce the run's
    recorded retrieval metrics before it is drawn), since training it again took minutes. Returns a section with a
    note when the runs are not recorded."""
    floor, runs = study.floor(), study.runs()
    if not floor or not runs or recipes.BASE not in runs:
        return Section(notes=["*The real-profile runs are not recorded in this copy, so there is no retrieval "
                              "figure.*"])
    results = {"untrained features": floor[recipes.FLOOR][0], "baseline head": runs[recipes.BASE][0]}
    deml = runs.get(recipes.DEML4)
    if deml and has_kept_weights(deml[0]):
        results["DeML(1,4)"] = deml[0]
        note = "The DeML(1,4) row is its recorded seed-0 run, loaded from its kept weights."
    else:
        seconds = [r.provenance.get("train_seconds") or 0 for r in deml] if deml else []
        note = ("DeML(1, 4) is not in the picture: this copy keeps no weights of its run, and training one again took "
                f"{min(seconds) / 60:.1f} to {max(seconds) / 60:.1f} minutes per run when it was recorded."
                if seconds else "")
    return retrieval_section(results, tsne_of=[n for n in ("baseline head", "DeML(1,4)") if n in results], note=note)
