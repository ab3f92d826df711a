"""The Adapt-Adv pages' tables (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022; ``alkaabi2022adaptadv``):
each ``*_table`` returns the ``pandas.DataFrame``, each ``*_section`` the :class:`~zslib.present.base.Section` a
chapter cell shows.

The quick profile's ablation (Table 6 analogue) and Grad-CAM on the bird's parts; the real profile's Table 6 rows,
their pairs and provenance, and the Table 5 analogue with the choices behind it.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from zslib.engine.stats import format_interval, paired, summarize
from zslib.engine.store import short_commit, utc_minute
from zslib.methods.adapt_adv.analyses import gradcam_shares
from zslib.present.adapt_adv.sentences import bullets, choice_sentences, real_pair_sentences, seed_range
from zslib.present.adapt_adv.study import AdaptAdvStudy
from zslib.present.base import Section, Sections
from zslib.reported import reported_frame

__all__ = ["COLUMNS", "ablation_table", "ablation_section", "gradcam_parts_table", "gradcam_parts_section",
           "real_table", "real_section", "real_pairs_section", "provenance_table", "provenance_section",
           "table5_table", "table5_section", "table5_choices_section"]

COLUMNS = ["NMI", "R@1", "R@2", "R@4", "R@8", "kNN"]  # kNN: zslib.engine.evaluate's kNN accuracy (the paper's kNN-Acc)


# ------------------------------------------------------------------------------------ the quick profile


def ablation_table(runs: Mapping) -> pd.DataFrame:
    """The paper's ablation (Table 6 analogue) on the quick profile: per row (base, +GDFL, +Adv, Adapt-Adv) unseen
    Recall@1 and NMI and seen Recall@1 with 95% intervals over seeds, and the paired difference of unseen
    Recall@1 against the base with its verdict (:func:`zslib.engine.stats.paired`)."""
    rows = []
    for name, rs in runs.items():
        row = {"variant": name, "unseen R@1 % [95% CI]": format_interval(summarize(rs)),
               "unseen NMI %": format_interval(summarize(rs, "NMI")),
               "seen R@1 %": format_interval(summarize(rs, split="seen"))}
        if name != "base":
            p = paired(runs["base"], rs)
            row.update({"vs base (pts)": format_interval(p, signed=True), "verdict": p.verdict})
        rows.append(row)
    return pd.DataFrame(rows).set_index("variant").fillna("")


def ablation_section(runs: Mapping) -> Section:
    """The quick ablation's table (:func:`ablation_table`)."""
    return Section(table=ablation_table(runs))


def gradcam_parts_table(models: Mapping) -> pd.DataFrame:
    """Grad-CAM of a same-class similarity (Fig. 2 analogue) on the quick profile: for the 64 unseen images of the
    attention figure, each explained by its cosine similarity to another image of its class, the mean relative
    mass on each part per model (``models``: name -> run, e.g. the base and Adapt-Adv of seed 0;
    :func:`zslib.methods.adapt_adv.analyses.gradcam_shares`)."""
    return pd.DataFrame(gradcam_shares(models)).set_index("model")


def gradcam_parts_section(models: Mapping) -> Section:
    """The Grad-CAM part shares of ``models`` (:func:`gradcam_parts_table`)."""
    return Section(table=gradcam_parts_table(models))


# ------------------------------------------------------------------------------------ the real profile


def real_table(study: AdaptAdvStudy) -> pd.DataFrame:
    """The Table 6 analogue on Flowers-102: per row, seeds and unseen NMI, Recall@1/2/4/8 and kNN accuracy in %
    (95% intervals over the seeds; one number for the untrained features)."""
    rows = [{"variant": name, "seeds": len(rs),
             **{c: format_interval(summarize(rs, c)) if len(rs) > 1 else f"{100 * rs[0].metric(c):.1f}"
                for c in COLUMNS}}
            for name, rs in study.runs.items()]
    return pd.DataFrame(rows).set_index("variant")


def real_section(study: AdaptAdvStudy) -> Section:
    """The Table 6 analogue on Flowers-102 (:func:`real_table`)."""
    return Section(table=real_table(study))


def real_pairs_section(study: AdaptAdvStudy) -> Sections:
    """The Table 6 rows against each other, paired by seed (:func:`~zslib.present.adapt_adv.sentences.
    real_pair_sentences`), and below them the paper's Table 6."""
    return Sections([Section(notes=[bullets(real_pair_sentences(study))]),
                     Section(table=reported_frame("6", paper="alkaabi2022adaptadv"))])


def provenance_table(runs: Mapping) -> tuple[str, pd.DataFrame]:
    """Where and when the runs of each row were made and how long they trained (their provenance): steps, seeds,
    device, threads, zslib version, commit, date (UTC) and the range of training seconds per run. Returns what all
    rows share, as one Markdown sentence (empty when nothing is shared), and the table of the columns that
    differ."""
    rows = []
    for name, rs in runs.items():
        pv, trained = rs[0].provenance, [r.provenance.get("train_seconds") or 0.0 for r in rs]
        rows.append({"row": name, "steps": rs[0].config.iterations, "seeds": seed_range(rs),
                     "device": pv.get("device"), "threads": pv.get("torch_threads"), "zslib": pv.get("zslib_version"),
                     "commit": short_commit(pv.get("git_commit")),
                     "made (UTC)": (utc_minute(pv.get("timestamp")) or "").removesuffix(" UTC"),
                     "training s per run": f"{min(trained):.0f} to {max(trained):.0f}" if max(trained) > 0
                     else "none"})
    table = pd.DataFrame(rows).set_index("row")
    shared = [c for c in ("device", "threads", "zslib", "steps", "seeds") if table[c].nunique(dropna=False) == 1]
    if shared and len(table) > 1:
        return ("Every row: " + ", ".join(f"{c} {table[c].iloc[0]}" for c in shared) + ".",
                table.drop(columns=shared))
    return "", table


def provenance_section(runs: Mapping) -> Section:
    """The provenance of ``runs`` (name -> runs): what every row shares above, the table of what differs."""
    shared, table = provenance_table(runs)
    return Section(caption=shared, table=table)


def table5_table(study: AdaptAdvStudy) -> pd.DataFrame | None:
    """The Table 5 analogue: per row, seeds, unseen Recall@1, NMI and kNN accuracy (95% intervals), the paired
    difference against its own loss's base with its verdict, and the paper's Recall@1 and difference."""
    t5, paper5 = study.table5, reported_frame("5", paper="alkaabi2022adaptadv")
    ruled = t5.ruled()
    rows = []
    for name, rs in t5.runs.items():
        base_name = f"{name.split(' / ')[0]} / Base"
        row = {"row": name, "seeds": len(rs), "unseen R@1 % [95% CI]": format_interval(summarize(rs)),
               "NMI %": format_interval(summarize(rs, "NMI")), "kNN %": format_interval(summarize(rs, "kNN"))}
        if name in t5.pairs:
            row.update({"vs base (pts)": format_interval(t5.pairs[name], signed=True), "verdict": t5.pairs[name].verdict})
        row["on validation classes"] = "ablation" if name in t5.ablations else "chosen" if name in ruled else ""
        row["paper R@1 %"] = paper5.loc[name, "R@1"]
        row["paper vs base (pts)"] = (f"{paper5.loc[name, 'R@1'] - paper5.loc[base_name, 'R@1']:+.2f}"
                                      if name != base_name else "")
        rows.append(row)
    return pd.DataFrame(rows).set_index("row").fillna("") if rows else None


def table5_section(study: AdaptAdvStudy) -> Section:
    """The Table 5 analogue (:func:`table5_table`; nothing when none of its rows is stored)."""
    return Section(table=table5_table(study))


def table5_choices_section(study: AdaptAdvStudy) -> Section:
    """The choices behind the Table 5 rows (:func:`~zslib.present.adapt_adv.sentences.choice_sentences`), each by
    the book's choice rule with "off" (lambda1 = 0, the loss alone; the proxies without a rate of their own) as a
    candidate."""
    if study.table5 is None or not study.table5.choices:
        return Section(notes=["*The validation runs of the Table 5 choices are not recorded in this copy.*"])
    return Section(notes=[bullets(choice_sentences(study))])
