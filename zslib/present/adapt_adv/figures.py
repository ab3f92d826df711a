"""The Adapt-Adv pages' figures (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022; ``alkaabi2022adaptadv``),
each returned as a :class:`~zslib.present.base.Section` with the table or sentences it goes with.

The quick profile: the :math:`\\lambda_0` sweep (Fig. 14 analogue), Eq. 22's :math:`\\lambda` along a run, where
GDFL's attention looks (Fig. 15 analogue). The real profile's study: how the recorded runs changed late, the
training length and :math:`\\lambda_0` on validation classes.
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from zslib.engine.data.datasets import Flowers102
from zslib.engine.stats import format_interval, summarize
from zslib.methods.adapt_adv.analyses import attention_shares, seen_class_count
from zslib.methods.adapt_adv.method import lambda_trace
from zslib.methods.adapt_adv.recipes import BASE, LAMBDA0S, METHOD
from zslib.present.adapt_adv.sentences import (bullets, lambda0_sentences, lambda_sweep, late_change_sentences,
                                               stopping_curve_sentences, stopping_rule_sentence, stopping_sentence)
from zslib.present.adapt_adv.study import STOPPING, AdaptAdvStudy
from zslib.present.base import Section, Sections
from zslib.engine.choice import VALIDATION_SEEDS

__all__ = ["lambda_sweep_section", "lambda_schedule_section", "attention_section", "late_changes_section",
           "stopping_section", "lambda0_choice_section"]


def _subplots(*args, **kwargs):
    return plt.subplots(*args, **kwargs)


# ------------------------------------------------------------------------------------ the quick profile


def lambda_sweep_section(runs: Mapping, lam_quick: Mapping) -> Section:
    """The Fig. 14 analogue of the quick profile: unseen Recall@1 and NMI against :math:`\\lambda_0` with 95%
    intervals (figure), and the table of the three values with each one's paired difference to 0.5."""
    got = lambda_sweep(runs, lam_quick)
    sweep, vs = got["sweep"], got["vs"]
    rows = []
    for lam, rs in sweep.items():
        row = {"lambda0": f"{lam:g}" + (" (+GDFL)" if lam == 0 else " (Adapt-Adv)" if lam == 0.5 else ""),
               "unseen R@1 % [95% CI]": format_interval(summarize(rs)),
               "unseen NMI %": format_interval(summarize(rs, "NMI"))}
        if lam in vs:
            row.update({"minus lambda0 0.5 (pts)": format_interval(vs[lam], signed=True), "verdict": vs[lam].verdict})
        rows.append(row)
    fig, ax = _subplots(figsize=(5.5, 3.2))
    for metric, marker in (("R@1", "o"), ("NMI", "s")):
        stats = [summarize(rs, metric) for rs in sweep.values()]
        ax.errorbar(list(sweep), [100 * s[0] for s in stats], yerr=[[100 * (s[0] - s[1]) for s in stats],
                    [100 * (s[2] - s[0]) for s in stats]], marker=marker, capsize=3, label=metric)
    ax.set_xlabel("$\\lambda_0$"); ax.set_ylabel("unseen %")
    ax.set_title(f"Fig. 14 analogue (quick, {len(runs['base'])} seeds, 95% intervals)"); ax.legend()
    return Section(figure=fig, table=pd.DataFrame(rows).set_index("lambda0").fillna(""))


def lambda_schedule_section(run) -> Section:
    """Eq. 22 along one Adapt-Adv run: the classifier's loss per step and the :math:`\\lambda` it set per epoch,
    replayed from the logged losses (:func:`~zslib.methods.adapt_adv.method.lambda_trace`), and when
    :math:`\\lambda` first turned adversarial (chance level: the run's number of seen classes)."""
    num_seen = seen_class_count(run.config)
    trace = lambda_trace(run.history, num_seen, run.config.method_params)
    fig, ax = _subplots(figsize=(6, 3))
    ax.plot(trace["step"], trace["classifier_ce"], lw=0.8, label="$L_c$ (classifier, per step)")
    ax.axhline(run.config.method_params["l_thresh"], color="k", ls=":", lw=0.8, label="$l_{thresh}$")
    ax2 = ax.twinx()
    ax2.step(trace["step"], trace["lambda"], color="C3", where="post", label="$\\lambda$")
    ax2.axhline(0, color="C3", lw=0.5)
    ax.set_xlabel("step"); ax.set_ylabel("$L_c$"); ax2.set_ylabel("$\\lambda$", color="C3")
    ax.legend(loc="upper right")
    turned = trace["step"][trace["lambda"] > 0]
    text = (f"λ starts at {trace['lambda'][0]:+.3f} (chance level ln {num_seen}); "
            + (f"it first turns adversarial at step {int(turned[0])} and is {trace['lambda'][-1]:+.3f} at the end."
               if len(turned) else f"it never turns adversarial in {len(trace['step'])} steps "
                                   f"(the classifier's loss stays above {run.config.method_params['l_thresh']})."))
    return Section(figure=fig, notes=[text])


def attention_section(run) -> Section:
    """Where GDFL's attention looks (Fig. 15 analogue): the attention weights of every attended layer of a trained
    Adapt-Adv model on 64 unseen SynthParts images, as mass on each part relative to its area (1 is uniform;
    :func:`zslib.methods.adapt_adv.analyses.attention_shares`). The figure is the first image and its maps; the
    table has one row per layer."""
    att, images, rows = attention_shares(run)
    fig, axes = _subplots(1, 1 + len(att), figsize=(2.2 * (1 + len(att)), 2.4))
    first = images[0] if images.min() >= 0 else (images[0] - images[0].min()) / (images[0].max() - images[0].min())
    axes[0].imshow(first.permute(1, 2, 0).numpy().clip(0, 1))
    axes[0].set_title("unseen image")
    for ax, (layer, w) in zip(axes[1:], att.items()):
        ax.imshow(w[0].numpy(), cmap="magma"); ax.set_title(layer)
    for ax in axes:
        ax.axis("off")
    return Section(figure=fig, table=pd.DataFrame(rows).set_index("layer"))


# ------------------------------------------------------------------------------------ the real profile


def _epoch_means(run, num_seen: int):
    tr = lambda_trace(run.history, num_seen, run.config.method_params)
    epoch = run.config.method_params["epoch_steps"]
    ce = tr["classifier_ce"][: len(tr["classifier_ce"]) // epoch * epoch].reshape(-1, epoch).mean(1)
    return epoch * np.arange(1, len(ce) + 1), ce


def late_changes_section(study: AdaptAdvStudy) -> Section:
    """Where the recorded Adapt-Adv runs lost their recall: every evaluation during training of the triplet base
    and Adapt-Adv, one line per seed (left), and each Adapt-Adv seed's classifier loss per epoch (right); then
    the change between the last two evaluations, the two rows paired at the step before, and what the
    adversary did over the last steps of the run that fell most."""
    runs, late = study.runs, study.late
    if not late:
        return Section(notes=["*The triplet base or the Adapt-Adv runs are not recorded in this copy, so the curves "
                              "are not drawn.*"])
    fig, (ax1, ax2) = _subplots(1, 2, figsize=(11, 3.6))
    for name, color in ((BASE, "0.55"), (METHOD, "C3")):
        for k, res in enumerate(runs[name]):
            steps, r1 = res.history.metric_curve("unseen", "R@1")
            ax1.plot(steps, 100 * np.asarray(r1), color=color, marker="o", ms=3, lw=1, label=name if k == 0 else None)
    ax1.set_xlabel("step"); ax1.set_ylabel("unseen R@1 % (test classes)"); ax1.legend()
    ax1.set_title("evaluations during training, one line per seed")
    n_seen = Flowers102.official["train"][1]  # the protocol's seen classes: the classifier's C
    for res in runs[METHOD]:
        ax2.plot(*_epoch_means(res, n_seen), marker=".", label=f"seed {res.config.seed}")
    ax2.set_yscale("log"); ax2.set_xlabel("step (end of epoch)"); ax2.set_ylabel("mean $L_c$ of the epoch")
    ax2.set_title("Adapt-Adv's classifier loss"); ax2.legend(fontsize=8)
    fig.tight_layout()
    return Section(figure=fig, notes=[bullets(late_change_sentences(study, n_seen))])


def stopping_section(study: AdaptAdvStudy) -> Sections:
    """The training length on validation classes: validation Recall@1 of the base and Adapt-Adv at every evaluation,
    step 0 (no training) included, one line per seed (figure); the mean by step, the trained step with the best
    mean and a check that the runs stopped there equal the long ones at that step; then what the book's choice
    rule made of it, step 0 (no training) as "off", and what the length read gave on the test classes."""
    stop = study.stopping
    if stop is None:
        return Sections([Section(notes=[f"*Not recorded in this copy of the book: {study.missing.get(STOPPING)}*"]),
                         Section(notes=["*The runs of the stopping-step choice on validation classes are not "
                                        "recorded in this copy.*"])])
    fig, ax = _subplots(figsize=(6, 3.4))
    for name, color in ((BASE, "0.55"), (METHOD, "C3")):
        for k, r in enumerate(stop.val_runs[name]):
            steps, r1 = r.history.metric_curve("val", "R@1")
            ax.plot(steps, 100 * np.asarray(r1), color=color, marker="o", ms=3, lw=1, label=name if k == 0 else None)
    ax.set_xlabel("step (0: no training)"); ax.set_ylabel("validation R@1 % (held-out seen classes)"); ax.legend()
    fig.tight_layout()
    return Sections([Section(figure=fig, notes=[bullets(stopping_curve_sentences(study))]),
                     Section(notes=[stopping_rule_sentence(study) + "\n\n" + stopping_sentence(study)])])


def lambda0_choice_section(study: AdaptAdvStudy) -> Section:
    """The :math:`\\lambda_0` choice on validation classes (Fig. 14 analogue): validation Recall@1 at the chosen
    length per seed (left) and every value minus the chosen one, paired by seed, with its 95% interval
    (right); then the choice in words."""
    lc = study.lambda0
    if lc is None:
        return Section(notes=["*The runs of the lambda0 choice on validation classes (or of the stopping step it "
                              "needs) are not recorded in this copy of the book.*"])
    chosen, xs = lc.chosen, list(lc.at)
    fig, (ax1, ax2) = _subplots(1, 2, figsize=(11, 3.4))  # the seeds differ by more than the lambda0 do: pair them
    for s in VALIDATION_SEEDS:
        ax1.plot(xs, [100 * lc.at[lam][s] for lam in xs], marker="o", ms=4, lw=1, label=f"seed {s}")
        ax2.plot(xs, [100 * (lc.at[lam][s] - lc.at[chosen][s]) for lam in xs], color="0.7", marker=".", lw=1)
    diff = [lc.vs.get(lam) for lam in xs]
    ax2.errorbar(xs, [0.0 if d is None else 100 * d.mean for d in diff],
                 yerr=[[0.0 if d is None else 100 * (d.mean - d.low) for d in diff],
                       [0.0 if d is None else 100 * (d.high - d.mean) for d in diff]],
                 color="C3", marker="o", capsize=3, label="mean, 95% interval (grey: one seed)")
    ax2.axhline(0.0, color="gray", linestyle="--")
    for ax in (ax1, ax2):
        ax.set_xticks(xs, ["0\n(+GDFL)"] + [f"{lam:g}" for lam in LAMBDA0S]); ax.set_xlabel(r"$\lambda_0$")
        ax.legend(fontsize=8)
    step = study.stopping.length
    ax1.set_ylabel(f"validation R@1 % at step {step}"); ax1.set_title("Fig. 14 analogue on validation classes")
    ax2.set_ylabel(f"minus lambda0 {chosen:g}, same seed (points)"); ax2.set_title("paired by seed")
    fig.tight_layout()
    means = ", ".join(f"lambda0 {lam:g} {100 * np.mean(list(lc.at[lam].values())):.2f}" for lam in xs)
    return Section(figure=fig, notes=[bullets([f"Mean validation Recall@1 at step {step} (%): {means}."]
                                              + lambda0_sentences(study))])
