"""The Adapt-Adv chapter's reports (Al-Kaabi et al. 2022): tables, figures and sentences made from runs.

The chapter (``book/adapt_adv.ipynb``) and its experiments page (``book/adapt_adv_experiments.ipynb``) call
these in a line or two; the paper's math stays in the modules beside this one. The functions come in three
kinds: ``*_table`` returns a ``pandas.DataFrame``, ``show_*`` draws a figure and states what it shows as
Markdown, and the others compute from the runs without drawing (the sentences of a page's closing findings
reuse them). Every sentence is written from the numbers; none is typed.

The real-profile sections all read one :class:`RealStudy` (:func:`real_study`): the recorded Flowers-102 runs
of the paper's Table 6 rows, the stopping step and :math:`\\lambda_0` chosen on validation classes, the Table 5
rows and what they chose.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from zslib.methods.adapt_adv.recipes import (BASE, EC_CHOICES, FLOOR, GDFL, LAMBDA0S, METHOD, PROXY_LRS,
                                           REAL_ADAPT, VAL_SEEDS, VALIDATION, quick_ablation, quick_adapt,
                                           real_configs)

__all__ = ["photo_figures", "gradcam_on_photos", "real_configs", "key_findings",
           "ablation_table", "ablation_findings", "lambda_sweep", "show_lambda_sweep", "show_lambda_schedule",
           "attention_on_parts", "attention_sentence", "gradcam_on_parts",
           "RealStudy", "real_study", "real_table", "real_pair_sentences", "provenance_table",
           "late_changes", "show_late_changes", "stopping_rule_sentence", "stopping_sentence", "stopping_choice",
           "show_stopping", "show_lambda0_choice", "choice_sentences", "table5_choices", "table5_table",
           "table5_sentences", "real_gradcam", "show_real_gradcam",
           "full_profile_runs", "main_findings", "experiments_findings", "quick_adapt", "quick_ablation"]

COLUMNS = ["NMI", "R@1", "R@2", "R@4", "R@8", "kNN"]  # kNN: zslib.engine.evaluate's kNN accuracy (the paper's kNN-Acc)
GC_LOSSES = {"angular": "Angular", "triplet": "Triplet"}  # the loss as the Grad-CAM records name it -> its Table 5 rows
_HIGHER = {"up": "clearly higher", "down": "clearly lower"}  # a paired verdict as a comparison


def _md(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def _list(sentences) -> None:
    from IPython.display import display

    from zslib.analysis.findings import found_list

    display(found_list(sentences))


def _fi(value, **kw) -> str:
    from zslib.engine.stats import format_interval

    return format_interval(value, **kw)


def _signed(p) -> str:
    """A paired difference (or an interval) in points, signed."""
    return _fi(getattr(p, "diff", p), signed=True)


def _grid(grid: Mapping, what: str, seeds=None, *, train: bool, missing: dict):
    """The runs of ``grid`` (trained if ``train``, else only read); ``None`` when some are not stored, with the
    reason kept under ``missing[what]`` for the page to state."""
    from zslib.engine.grid import MissingRunsError, run_grid

    try:
        return run_grid(grid, seeds, stored_only=not train)
    except MissingRunsError as err:
        missing[what] = str(err)
        return None


def _by_seed(runs) -> dict:
    return {r.config.seed: r for r in runs}


def _curve(run, split: str = "unseen", metric: str = "R@1") -> dict:
    """A run's evaluations during training: ``{step: value}``."""
    return dict(zip(*run.history.metric_curve(split, metric)))


def _read_as(runs, value_of) -> list:
    """``runs`` as candidates of :func:`zslib.engine.choice.choose` whose metric is ``value_of(run)`` (a value read
    off each run, e.g. at one step of its validation curve); seeds and divergence are the runs' own."""
    from types import SimpleNamespace

    return [SimpleNamespace(config=r.config, diverged=getattr(r, "diverged", None),
                            metric=lambda name, split, v=value_of(r): v) for r in runs]


def _step_rule(val_runs):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) applied to a training length: every evaluated
    step of the validation curves is a candidate, scored by the validation Recall@1 each seed had there, and step 0
    (no training: the head at initialisation, as the runs evaluated it before the first update) is "off"."""
    from zslib.engine.choice import choose

    steps = sorted(_curve(val_runs[0], "val"))
    if not steps or steps[0] != 0:
        raise ValueError("the validation curves do not record step 0 (no training), the 'off' of a length choice")
    return choose({s: _read_as(val_runs, lambda r, s=s: _curve(r, "val")[s]) for s in steps}, off=0)


def _step_label(step) -> str:
    return "step 0 (no training: the head at initialisation)" if step == 0 else f"step {step}"


# ------------------------------------------------------------------------------------ the quick profile


def ablation_table(runs: Mapping):
    """The paper's ablation (Table 6 analogue) on the quick profile: per row (base, +GDFL, +Adv, Adapt-Adv) unseen
    Recall@1 and NMI and seen Recall@1 with 95% intervals over seeds, and the paired difference of unseen
    Recall@1 against the base with its verdict (:func:`zslib.engine.stats.paired`)."""
    import pandas as pd

    from zslib.engine.stats import paired, summarize

    rows = []
    for name, rs in runs.items():
        row = {"variant": name, "unseen R@1 % [95% CI]": _fi(summarize(rs)), "unseen NMI %": _fi(summarize(rs, "NMI")),
               "seen R@1 %": _fi(summarize(rs, split="seen"))}
        if name != "base":
            p = paired(runs["base"], rs)
            row.update({"vs base (pts)": _signed(p), "verdict": p.verdict})
        rows.append(row)
    return pd.DataFrame(rows).set_index("variant").fillna("")


def ablation_findings(runs: Mapping) -> list[str]:
    """The ablation's outcome in sentences: every row against the base, and +GDFL against +Adv (the paper's
    conclusion II: GDFL is the larger share of the gain), each paired by seed."""
    from zslib.engine.stats import paired, summarize

    base = runs["base"]
    out = [f"On the quick profile, {name} reached {100 * summarize(rs)[0]:.1f} % unseen Recall@1 against the base's "
           f"{100 * summarize(base)[0]:.1f} %: {_signed(paired(base, rs))} points over {len(base)} paired seeds "
           f"({paired(base, rs).verdict})." for name, rs in runs.items() if name != "base"]
    if "+GDFL" in runs and "+Adv" in runs:
        p = paired(runs["+Adv"], runs["+GDFL"])
        out.append(f"+GDFL against +Adv (the paper's conclusion II: GDFL is the larger gain): {_signed(p)} points "
                   f"({p.verdict}).")
    return out


def lambda_sweep(runs: Mapping, lam_quick: Mapping) -> dict:
    """The quick profile's :math:`\\lambda_0` sweep (Fig. 14 analogue): ``{lambda0: runs}`` with 0 the +GDFL row
    (no adversary) and 0.5 the Adapt-Adv row, and ``"vs"``: each other value minus 0.5, paired by seed."""
    from zslib.engine.stats import paired

    sweep = {0.0: runs["+GDFL"], 0.1: lam_quick["lambda0 0.1"], 0.5: runs["Adapt-Adv"]}
    return {"sweep": sweep, "vs": {lam: paired(runs["Adapt-Adv"], rs) for lam, rs in sweep.items() if lam != 0.5}}


def show_lambda_sweep(runs: Mapping, lam_quick: Mapping):
    """The Fig. 14 analogue of the quick profile: unseen Recall@1 and NMI against :math:`\\lambda_0` with 95%
    intervals (figure), and the table of the three values with each one's paired difference to 0.5."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from zslib.engine.stats import summarize

    got = lambda_sweep(runs, lam_quick)
    sweep, vs = got["sweep"], got["vs"]
    rows = []
    for lam, rs in sweep.items():
        row = {"lambda0": f"{lam:g}" + (" (+GDFL)" if lam == 0 else " (Adapt-Adv)" if lam == 0.5 else ""),
               "unseen R@1 % [95% CI]": _fi(summarize(rs)), "unseen NMI %": _fi(summarize(rs, "NMI"))}
        if lam in vs:
            row.update({"minus lambda0 0.5 (pts)": _signed(vs[lam]), "verdict": vs[lam].verdict})
        rows.append(row)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for metric, marker in (("R@1", "o"), ("NMI", "s")):
        stats = [summarize(rs, metric) for rs in sweep.values()]
        ax.errorbar(list(sweep), [100 * s[0] for s in stats], yerr=[[100 * (s[0] - s[1]) for s in stats],
                    [100 * (s[2] - s[0]) for s in stats]], marker=marker, capsize=3, label=metric)
    ax.set_xlabel("$\\lambda_0$"); ax.set_ylabel("unseen %")
    ax.set_title(f"Fig. 14 analogue (quick, {len(runs['base'])} seeds, 95% intervals)"); ax.legend()
    plt.show()
    return pd.DataFrame(rows).set_index("lambda0").fillna("")


def _lambda_sweep_sentence(runs: Mapping, lam_quick: Mapping) -> str:
    vs = lambda_sweep(runs, lam_quick)["vs"]
    return ("On the quick profile, lambda0 against the default 0.5 (paired seeds, unseen Recall@1): " + "; ".join(
        f"{lam:g}{' (+GDFL)' if lam == 0 else ''} {_signed(p)} points ({p.verdict})" for lam, p in vs.items())
        + ". The paper's Fig. 14 puts lambda0 = 0 below the values around 0.5 (no intervals); here it is "
        + {"up": "clearly above", "down": "clearly below"}.get(vs[0.0].verdict, "not clearly different from") + " 0.5.")


def show_lambda_schedule(run) -> int:
    """Eq. 22 along one Adapt-Adv run: the classifier's loss per step and the :math:`\\lambda` it set per epoch,
    replayed from the logged losses (:func:`~zslib.methods.adapt_adv.method.lambda_trace`), and when
    :math:`\\lambda` first turned adversarial. Returns the run's number of seen classes (its chance level)."""
    import matplotlib.pyplot as plt

    from zslib.methods.adapt_adv.analyses import seen_class_count
    from zslib.methods.adapt_adv.method import lambda_trace

    num_seen = seen_class_count(run.config)
    trace = lambda_trace(run.history, num_seen, run.config.method_params)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(trace["step"], trace["classifier_ce"], lw=0.8, label="$L_c$ (classifier, per step)")
    ax.axhline(run.config.method_params["l_thresh"], color="k", ls=":", lw=0.8, label="$l_{thresh}$")
    ax2 = ax.twinx()
    ax2.step(trace["step"], trace["lambda"], color="C3", where="post", label="$\\lambda$")
    ax2.axhline(0, color="C3", lw=0.5)
    ax.set_xlabel("step"); ax.set_ylabel("$L_c$"); ax2.set_ylabel("$\\lambda$", color="C3")
    ax.legend(loc="upper right")
    plt.show()
    turned = trace["step"][trace["lambda"] > 0]
    _md(f"λ starts at {trace['lambda'][0]:+.3f} (chance level ln {num_seen}); "
        + (f"it first turns adversarial at step {int(turned[0])} and is {trace['lambda'][-1]:+.3f} at the end."
           if len(turned) else f"it never turns adversarial in {len(trace['step'])} steps "
                               f"(the classifier's loss stays above {run.config.method_params['l_thresh']})."))
    return num_seen


def attention_on_parts(run):
    """Where GDFL's attention looks (Fig. 15 analogue): the attention weights of every attended layer of a trained
    Adapt-Adv model on 64 unseen SynthParts images, as mass on each part relative to its area (1 is uniform;
    :func:`zslib.methods.adapt_adv.analyses.attention_shares`). Draws the first image and its maps; returns the
    table (one row per layer)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from zslib.methods.adapt_adv.analyses import attention_shares

    att, images, rows = attention_shares(run)
    fig, axes = plt.subplots(1, 1 + len(att), figsize=(2.2 * (1 + len(att)), 2.4))
    first = images[0] if images.min() >= 0 else (images[0] - images[0].min()) / (images[0].max() - images[0].min())
    axes[0].imshow(first.permute(1, 2, 0).numpy().clip(0, 1))
    axes[0].set_title("unseen image")
    for ax, (layer, w) in zip(axes[1:], att.items()):
        ax.imshow(w[0].numpy(), cmap="magma"); ax.set_title(layer)
    for ax in axes:
        ax.axis("off")
    plt.show()
    return pd.DataFrame(rows).set_index("layer")


def attention_sentence(table) -> str:
    """The attention table's outcome: the relative mass on the bird per layer and the layer that concentrates most."""
    obj = table["object"]
    return ("Relative attention on the bird (1 = uniform): " + ", ".join(f"{k} {v:.2f}" for k, v in obj.items())
            + f"; the layer that concentrates most on the bird is {obj.idxmax()}.")


def gradcam_on_parts(models: Mapping):
    """Grad-CAM of a same-class similarity (Fig. 2 analogue) on the quick profile: for the 64 unseen images of
    :func:`attention_on_parts`, each explained by its cosine similarity to another image of its class, the mean
    relative mass on each part per model (``models``: name -> run, e.g. the base and Adapt-Adv of seed 0;
    :func:`zslib.methods.adapt_adv.analyses.gradcam_shares`)."""
    import pandas as pd

    from zslib.methods.adapt_adv.analyses import gradcam_shares

    return pd.DataFrame(gradcam_shares(models)).set_index("model")


# ------------------------------------------------------------------------------------ the real profile


@dataclass
class LateChange:
    """How a row's runs changed between their last two evaluations on the test classes."""

    before_step: int
    last_step: int
    change: object  # Interval of the per-seed changes
    per_seed: dict  # seed -> change of unseen R@1 (a fraction)
    before: dict  # seed -> unseen R@1 at before_step


@dataclass
class Stopping:
    """Adapt-Adv's training length put to the book's choice rule on validation classes, with no training (step 0,
    the head at initialisation) as "off", and what stopping at the length read gave on the test classes."""

    val_runs: dict  # base / Adapt-Adv -> runs with 30% of the seen classes held out
    val_curve: dict  # name -> {step: mean validation R@1}
    rule: object  # zslib.engine.choice.Choice over Adapt-Adv's evaluated steps, step 0 as "off"
    length: int  # the trained length the chapter reads Adapt-Adv at: the rule's choice, else the best trained step
    stop_runs: list | None = None  # Adapt-Adv trained for ``length`` steps (None when that is the full length)
    p_stop: object = None  # paired(base, stopped)
    p_stop_gdfl: object = None  # paired(+GDFL, stopped)
    same_seeds: list = field(default_factory=list)  # seeds whose stopped run equals the long run at ``length``

    @property
    def chosen(self) -> int:
        """The step the rule chose: 0 (no training) when no trained length beats the head at initialisation clearly."""
        return self.rule.chosen

    @property
    def ablation(self) -> bool:
        """Whether the rule kept no training, so that runs read at :attr:`length` are an ablation."""
        return self.rule.off_won


@dataclass
class Lambda0Choice:
    """:math:`\\lambda_0` chosen on validation classes at the chosen length (0 is +GDFL, no adversary)."""

    at: dict  # lambda0 -> {seed: validation R@1 at the chosen step}
    chosen: float
    vs: dict  # lambda0 -> Interval of (it - chosen) over the seeds
    used: float  # the value every Adapt-Adv run of the chapter used
    test: dict = field(default_factory=dict)  # "base" / "0.5" -> paired, when the chosen value had to be trained
    rule: object = None  # the book's choice rule (zslib.engine.choice.Choice) with lambda0 = 0 as "off"


@dataclass
class Table5:
    """The Table 5 analogue: three losses, each with its base, Energy (CML's energy confusion) and Adapt-Adv."""

    loss_bases: dict
    choices: dict  # what each validation grid chose: name -> (zslib.engine.choice.Choice, the name of its "off")
    grid: dict
    runs: dict
    pairs: dict  # row -> paired(its base on the same seeds, row)
    aa_steps: int | None
    ablations: dict = field(default_factory=dict)  # row -> why it is an ablation (the rule kept "off")


@dataclass
class RealStudy:
    """Everything the real-profile sections show, from one reading of the runs (see :func:`real_study`)."""

    configs: dict  # the Table 6 rows: name -> Config
    runs: dict  # name -> runs (the rows that are stored)
    pairs: dict  # (a, b) -> paired(a, b) on unseen R@1
    late: dict  # name -> LateChange
    stopping: Stopping | None
    lambda0: Lambda0Choice | None
    table5: Table5 | None
    missing: dict  # what is not stored -> why
    train: bool


_STUDIES: dict = {}


def real_study(train: bool = False) -> RealStudy:
    """The chapter's real-profile study (Flowers-102, frozen ImageNet EfficientNet-Lite0, classes 52-102 unseen),
    computed once per session: the Table 6 rows (five seeds; the untrained features once: nothing is random),
    their paired comparisons, how the runs changed late, the stopping step and :math:`\\lambda_0` chosen on
    validation classes (30% of the seen classes held out, seeds 0-2), and the Table 5 rows. With ``train`` the
    missing runs are trained (``ZS_PROFILE=real``); otherwise only stored runs are read and what is missing
    is named in ``missing``."""
    from zslib.engine.store import results_dir

    key = (bool(train), str(results_dir()))
    if key not in _STUDIES:
        _STUDIES[key] = _real_study(bool(train))
    return _STUDIES[key]


def _real_study(train: bool) -> RealStudy:
    from zslib.engine.stats import paired

    missing: dict = {}
    configs = real_configs()
    runs = {}
    for name, config in configs.items():  # each row on its own: a row that is not recorded is named, the others shown
        got = _grid({name: config}, f"the row {name!r}", (0,) if config.method == "pretrained" else None,
                    train=train, missing=missing)
        if got is not None:
            runs[name] = got[name]
    pairs = {(a, b): paired(runs[a], runs[b]) for a, b in ((BASE, GDFL), (BASE, METHOD), (GDFL, METHOD))
             if a in runs and b in runs}
    stop = _stopping(configs, runs, train, missing)
    lam = _lambda0_choice(configs, runs, stop, train, missing) if stop is not None else None
    t5 = _table5(configs[BASE], stop, lam, train, missing)
    return RealStudy(configs, runs, pairs, late_changes(runs), stop, lam, t5, missing, train)


def real_table(study: RealStudy):
    """The Table 6 analogue on Flowers-102: per row, seeds and unseen NMI, Recall@1/2/4/8 and kNN accuracy in %
    (95% intervals over the seeds; one number for the untrained features)."""
    import pandas as pd

    from zslib.engine.stats import summarize

    rows = [{"variant": name, "seeds": len(rs),
             **{c: _fi(summarize(rs, c)) if len(rs) > 1 else f"{100 * rs[0].metric(c):.1f}" for c in COLUMNS}}
            for name, rs in study.runs.items()]
    return pd.DataFrame(rows).set_index("variant")


def real_pair_sentences(study: RealStudy) -> list[str]:
    """The Table 6 rows against each other on unseen Recall@1, paired by seed (+GDFL and Adapt-Adv against the
    base, Adapt-Adv against +GDFL)."""
    return [f"On Flowers-102, {b} against {a}: {_signed(p)} points of unseen Recall@1 over {len(p.seeds)} paired "
            f"seeds ({p.verdict})." for (a, b), p in study.pairs.items()] + [
        f"Not recorded in this copy of the book: {what} ({why})" for what, why in study.missing.items()
        if what.startswith("the row")]


def _seeds(runs) -> str:
    seeds = sorted(r.config.seed for r in runs)
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) else \
        ", ".join(map(str, seeds))


def provenance_table(runs: Mapping):
    """Where and when the runs of each row were made and how long they trained (their provenance): steps, seeds,
    device, threads, zslib version, commit, date (UTC) and the range of training seconds per run. What all rows
    share is stated once above the table (Markdown); the table keeps the columns that differ."""
    import pandas as pd

    from zslib.engine.store import short_commit, utc_minute

    rows = []
    for name, rs in runs.items():
        pv, trained = rs[0].provenance, [r.provenance.get("train_seconds") or 0.0 for r in rs]
        rows.append({"row": name, "steps": rs[0].config.iterations, "seeds": _seeds(rs), "device": pv.get("device"),
                     "threads": pv.get("torch_threads"), "zslib": pv.get("zslib_version"),
                     "commit": short_commit(pv.get("git_commit")),
                     "made (UTC)": (utc_minute(pv.get("timestamp")) or "").removesuffix(" UTC"),
                     "training s per run": f"{min(trained):.0f} to {max(trained):.0f}" if max(trained) > 0 else "none"})
    table = pd.DataFrame(rows).set_index("row")
    shared = [c for c in ("device", "threads", "zslib", "steps", "seeds") if table[c].nunique(dropna=False) == 1]
    if shared and len(table) > 1:
        _md("Every row: " + ", ".join(f"{c} {table[c].iloc[0]}" for c in shared) + ".")
        table = table.drop(columns=shared)
    return table


def late_changes(runs: Mapping) -> dict:
    """For the triplet base and Adapt-Adv: the change of unseen Recall@1 between each run's last two evaluations
    (read on the test classes: for reading, not for choosing), as a :class:`LateChange` per row."""
    from zslib.engine.stats import interval

    if BASE not in runs or METHOD not in runs:
        return {}
    late = {}
    for name in (BASE, METHOD):
        changes, before = {}, {}
        for res in runs[name]:
            steps, r1 = res.history.metric_curve("unseen", "R@1")
            changes[res.config.seed], before[res.config.seed] = r1[-1] - r1[-2], r1[-2]
        late[name] = LateChange(steps[-2], steps[-1], interval(changes.values()), changes, before)
    return late


def _at_step(late: Mapping):
    """Adapt-Adv minus the base at the step before the last, paired by seed."""
    from zslib.engine.stats import interval

    b_at, a_at = late[BASE].before, late[METHOD].before
    return interval([a_at[s] - b_at[s] for s in sorted(set(a_at) & set(b_at))])


def _epoch_means(run, num_seen: int):
    from zslib.methods.adapt_adv.method import lambda_trace

    tr = lambda_trace(run.history, num_seen, run.config.method_params)
    epoch = run.config.method_params["epoch_steps"]
    ce = tr["classifier_ce"][: len(tr["classifier_ce"]) // epoch * epoch].reshape(-1, epoch).mean(1)
    return epoch * np.arange(1, len(ce) + 1), ce


def show_late_changes(study: RealStudy) -> None:
    """Where the recorded Adapt-Adv runs lost their recall: every evaluation during training of the triplet base
    and Adapt-Adv, one line per seed (left), and each Adapt-Adv seed's classifier loss per epoch (right); then
    the change between the last two evaluations, the two rows paired at the step before, and what the
    adversary did over the last steps of the run that fell most."""
    import matplotlib.pyplot as plt

    from zslib.engine.data.datasets import Flowers102
    from zslib.engine.stats import verdict
    from zslib.methods.adapt_adv.method import lambda_trace

    runs, late = study.runs, study.late
    if not late:
        _md("*The triplet base or the Adapt-Adv runs are not recorded in this copy, so the curves are not drawn.*")
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
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
    plt.tight_layout(); plt.show()
    out = []
    for name, lc in late.items():
        fell = sum(v < 0 for v in lc.per_seed.values())
        out.append(f"{name}: unseen R@1 changed by {_signed(lc.change)} points from step {lc.before_step} to step "
                   f"{lc.last_step}; {fell} of {len(lc.per_seed)} seeds fell (per seed "
                   + ", ".join(f"{s}: {100 * v:+.1f}" for s, v in lc.per_seed.items()) + ").")
    at_step = _at_step(late)
    out.append(f"At step {late[BASE].before_step}, Adapt-Adv minus the base, paired by seed: {_signed(at_step)} points "
               f"({verdict(at_step)}; read on the test classes, so not a result one may pick: a stopping step has to "
               "be chosen on validation classes).")
    worst = min(late[METHOD].per_seed, key=late[METHOD].per_seed.get)
    res = _by_seed(runs[METHOD])[worst]
    tr = lambda_trace(res.history, n_seen, res.config.method_params)
    tail = len(tr["step"]) // 10  # the last tenth of the run against the tenth before it
    ce_before, ce_end = tr["classifier_ce"][-2 * tail:-tail].mean(), tr["classifier_ce"][-tail:].mean()
    _, m_loss = res.history.loss_curve(res.config.loss)
    out.append(f"Seed {worst}, the largest fall: over its last {tail} steps λ was {tr['lambda'][-tail:].mean():+.2f} "
               f"on average, the classifier's loss went from {ce_before:.3f} to {ce_end:.3f} and the {res.config.loss} "
               f"loss from {np.mean(m_loss[-2 * tail:-tail]):.4f} to {np.mean(m_loss[-tail:]):.4f} (mean of the "
               f"{tail} steps before, then of the last {tail}).")
    _list(out)
    return None


def _late_sentence(study: RealStudy) -> str:
    if not study.late:
        return ""
    from zslib.engine.stats import verdict

    lc, at_step = study.late[METHOD], _at_step(study.late)
    fell = sum(v < 0 for v in lc.per_seed.values())
    return (f"{fell} of {len(lc.per_seed)} recorded Adapt-Adv runs lost unseen Recall@1 between steps {lc.before_step} "
            f"and {lc.last_step} ({_signed(lc.change)} points; the base: {_signed(study.late[BASE].change)}); at step "
            f"{lc.before_step} they stood {_signed(at_step)} points from the base ({verdict(at_step)}; read on the test "
            "classes, so not a result).")


def _stopping(configs: Mapping, runs: Mapping, train: bool, missing: dict) -> Stopping | None:
    from zslib.engine.stats import paired

    val_grid = {name: configs[name].replace(validation_fraction=VALIDATION) for name in (BASE, METHOD)}
    val_runs = _grid(val_grid, "the stopping-step selection on validation classes", VAL_SEEDS, train=train,
                     missing=missing)
    if val_runs is None:
        return None
    val_curve = {name: dict(zip(np.asarray(rs[0].history.metric_curve("val", "R@1")[0]).tolist(),
                                np.array([r.history.metric_curve("val", "R@1")[1] for r in rs]).mean(0)))
                 for name, rs in val_runs.items()}
    rule = _step_rule(val_runs[METHOD])
    trained = [s for s in val_curve[METHOD] if s > 0]
    chosen = rule.chosen if not rule.off_won else max(trained, key=val_curve[METHOD].get)
    stop = Stopping(val_runs, val_curve, rule, chosen)
    if chosen == configs[METHOD].iterations:
        return stop
    got = _grid({"stopped": configs[METHOD].replace(iterations=chosen)}, f"Adapt-Adv stopped at {chosen} steps",
                train=train, missing=missing)
    if got is None:
        return stop
    stop.stop_runs = rs = got["stopped"]
    if BASE in runs:
        stop.p_stop = paired(runs[BASE], rs)
        if GDFL in runs:
            stop.p_stop_gdfl = paired(runs[GDFL], rs)
        long = _by_seed(runs.get(METHOD, []))
        stop.same_seeds = [r.config.seed for r in rs
                           if r.config.seed in long and _curve(long[r.config.seed]).get(chosen) == r.metric("R@1")]
    return stop


def stopping_rule_sentence(study: RealStudy) -> str:
    """What the book's choice rule (:func:`zslib.engine.choice.choose`) made of Adapt-Adv's training length: every
    evaluated step of the validation curves of seeds 0-2 is a candidate and step 0, no training, is "off"."""
    stop = study.stopping
    if stop is None:
        return ""
    out = ("The book's choice rule over Adapt-Adv's validation curves (every evaluated step a candidate, scored by its "
           f"validation Recall@1 over seeds {_seeds(stop.val_runs[METHOD])}; no training, step 0, as \"off\"): "
           + stop.rule.sentence(_step_label))
    if stop.ablation:
        out += (f" So on validation classes no length of training is chosen: the Adapt-Adv runs read at {stop.length} "
                "steps, the trained step with the best mean, are an ablation that shows what training does.")
    return out


def stopping_sentence(study: RealStudy) -> str:
    """Adapt-Adv's length as the choice rule left it on validation classes and, stopped there (an ablation when the
    rule kept no training), its unseen Recall@1 against the base and against +GDFL, paired by seed."""
    from zslib.engine.stats import summarize

    stop = study.stopping
    if stop is None:
        return ""
    if stop.ablation:
        lead = ("" if stop.rule.leader_vs_off is None else
                f", {_signed(stop.rule.leader_vs_off)} points for {_step_label(stop.rule.leader)}, not clearly above")
        head = (f"On validation classes the choice rule keeps no training for Adapt-Adv's length (step 0{lead}), so "
                f"Adapt-Adv read at {stop.length} steps, the best trained step, is an ablation")
    else:
        head = f"Chosen on validation classes by the book's choice rule, Adapt-Adv's length is {stop.length} steps"
    if stop.p_stop is not None:
        return (f"{head}; stopped there it reaches {_fi(summarize(stop.stop_runs))}% unseen Recall@1, "
                f"{_signed(stop.p_stop)} points against the base ({stop.p_stop.verdict})"
                + (f", and {_signed(stop.p_stop_gdfl)} points against +GDFL without the adversary "
                   f"({stop.p_stop_gdfl.verdict})." if stop.p_stop_gdfl is not None else "."))
    return head + (", the length of the recorded runs." if stop.length == study.configs[METHOD].iterations
                   else "; the runs stopped there are not recorded in this copy.")


def stopping_choice(study: RealStudy):
    """Markdown: the choice rule applied to Adapt-Adv's length on validation classes, step 0 (no training) as "off"
    (:func:`stopping_rule_sentence`), and what the length read gave on the test classes (:func:`stopping_sentence`)."""
    from IPython.display import Markdown

    if study.stopping is None:
        return Markdown("*The runs of the stopping-step choice on validation classes are not recorded in this copy.*")
    return Markdown(stopping_rule_sentence(study) + "\n\n" + stopping_sentence(study))


def show_stopping(study: RealStudy) -> None:
    """The training length on validation classes: validation Recall@1 of the base and Adapt-Adv at every evaluation,
    step 0 (no training) included, one line per seed (figure); the mean by step, the trained step with the best
    mean, and a check that the runs stopped there equal the long ones at that step. What the choice rule made of
    it is :func:`stopping_choice`."""
    import matplotlib.pyplot as plt

    stop = study.stopping
    if stop is None:
        why = study.missing.get("the stopping-step selection on validation classes")
        _md(f"*Not recorded in this copy of the book: {why}*")
        return None
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for name, color in ((BASE, "0.55"), (METHOD, "C3")):
        for k, r in enumerate(stop.val_runs[name]):
            steps, r1 = r.history.metric_curve("val", "R@1")
            ax.plot(steps, 100 * np.asarray(r1), color=color, marker="o", ms=3, lw=1, label=name if k == 0 else None)
    ax.set_xlabel("step (0: no training)"); ax.set_ylabel("validation R@1 % (held-out seen classes)"); ax.legend()
    plt.tight_layout(); plt.show()
    best = max((s for s in stop.val_curve[METHOD] if s > 0), key=stop.val_curve[METHOD].get)
    out = ["Mean validation Recall@1 by step (%): " + "; ".join(
        f"{name}: " + ", ".join(f"{s} {100 * v:.1f}" for s, v in curve.items()) for name, curve in stop.val_curve.items())
        + f". Among the trained steps, the highest mean of Adapt-Adv's {len(VAL_SEEDS)} seeds is at step {best}."]
    if stop.stop_runs is not None:
        out.append(f"Determinism check: for {len(stop.same_seeds)} of {len(stop.stop_runs)} seeds the stopped run's unseen "
                   f"Recall@1 equals the long run's evaluation at step {stop.length} exactly (same batches, same updates "
                   "up to that step).")
    _list(out)
    return None


def _lambda0_choice(configs: Mapping, runs: Mapping, stop: Stopping, train: bool, missing: dict) -> Lambda0Choice | None:
    from zslib.engine.stats import interval, paired
    from zslib.engine.registry import get_method

    lam_grid = {0.0: configs[GDFL].replace(validation_fraction=VALIDATION)}  # lambda0 = 0: no adversary
    val_aa = configs[METHOD].replace(validation_fraction=VALIDATION)
    lam_grid.update({lam: val_aa.replace(method_params={**REAL_ADAPT, "lambda0": lam}) for lam in LAMBDA0S})
    lam_runs = _grid(lam_grid, "the lambda0 choice on validation classes", VAL_SEEDS, train=train, missing=missing)
    if lam_runs is None:
        return None
    at = {lam: {r.config.seed: _curve(r, "val")[stop.length] for r in rs} for lam, rs in lam_runs.items()}
    chosen = max(LAMBDA0S, key=lambda lam: np.mean(list(at[lam].values())))  # the adversary's weight, > 0
    vs = {lam: interval([at[lam][s] - at[chosen][s] for s in VAL_SEEDS]) for lam in lam_grid if lam != chosen}
    used = get_method("adapt_adv").settings(REAL_ADAPT)["lambda0"]  # what every Adapt-Adv run of the chapter used
    choice = Lambda0Choice(at, chosen, vs, used, rule=_rule(at, lam_runs))
    if chosen != used and stop.stop_runs is not None and BASE in runs:
        cfg = configs[METHOD].replace(iterations=stop.length, method_params={**REAL_ADAPT, "lambda0": chosen})
        got = _grid({"chosen": cfg}, f"Adapt-Adv at lambda0 {chosen:g}", train=train, missing=missing)
        if got is not None:
            choice.test = {"base": paired(runs[BASE], got["chosen"]), "0.5": paired(stop.stop_runs, got["chosen"])}
    return choice


def _rule(at: Mapping, lam_runs: Mapping):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over the lambda0 values (Eq. 22), read at
    the length the chapter reads Adapt-Adv at, with lambda0 = 0 (+GDFL, the adversary off) as "off"."""
    from zslib.engine.choice import OFF, choose

    def at_step(lam):
        return _read_as(lam_runs[lam], lambda r: at[lam][r.config.seed])

    return choose({OFF: at_step(0.0), **{lam: at_step(lam) for lam in LAMBDA0S}})


def show_lambda0_choice(study: RealStudy) -> None:
    """The :math:`\\lambda_0` choice on validation classes (Fig. 14 analogue): validation Recall@1 at the chosen
    length per seed (left) and every value minus the chosen one, paired by seed, with its 95% interval
    (right); then the choice in words."""
    import matplotlib.pyplot as plt

    lc = study.lambda0
    if lc is None:
        _md("*The runs of the lambda0 choice on validation classes (or of the stopping step it needs) are not recorded "
            "in this copy of the book.*")
        return None
    chosen, xs = lc.chosen, list(lc.at)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4))  # the seeds differ by more than the lambda0 do: pair them
    for s in VAL_SEEDS:
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
    plt.tight_layout(); plt.show()
    means = ", ".join(f"lambda0 {lam:g} {100 * np.mean(list(lc.at[lam].values())):.2f}" for lam in xs)
    _list([f"Mean validation Recall@1 at step {step} (%): {means}."] + _lambda0_sentences(study))
    return None


def _lambda0_sentences(study: RealStudy) -> list[str]:
    from zslib.engine.stats import verdict

    lc = study.lambda0
    if lc is None:
        return []
    stop = study.stopping
    clear = [f"{lam:g} ({verdict(d)})" for lam, d in lc.vs.items() if verdict(d) != "no clear effect"]
    out = [f"Among the adversary's weights (lambda0 > 0), the best mean validation Recall@1 at {stop.length} steps"
           + (" (the best trained step, an ablation length: the rule kept no training)" if stop.ablation else "")
           + " is "
           f"lambda0 = {lc.chosen:g} (mean of {len(VAL_SEEDS)} seeds); against it, paired by seed, the validation "
           "Recall@1 is clearly different for lambda0 "
           f"{', '.join(clear) or 'none of the others'}"
           + (f"; lambda0 = 0 (+GDFL) is {_signed(lc.vs[0.0])} points from it" if 0.0 in lc.vs else "")
           + ". The paper's Fig. 14 (test classes, no intervals) puts lambda0 = 0 lower and the peak between 0.3 and 0.7; "
           + (f"here lambda0 = 0 is {_HIGHER.get(verdict(lc.vs[0.0]), 'not clearly different')} on validation classes."
              if 0.0 in lc.vs else "here lambda0 = 0 was not run.")]
    if lc.rule is not None:
        rule = lc.rule.sentence(lambda k: "lambda0 = 0 (the adversary off)" if k == "off" else f"lambda0 = {k:g}")
        out.append(f"The book's choice rule, with the adversary switched off as a candidate: {rule}"
                   + (" So on validation classes the adversary is not chosen, and every Adapt-Adv row with the "
                      "adversary in this chapter is an ablation that shows what it does." if lc.rule.off_won else ""))
    if lc.chosen == lc.used:
        out.append(f"Among the adversary's weights, the leader is the paper's {lc.used:g}, the value of every Adapt-Adv "
                   "run of this chapter: nothing is trained again.")
    elif lc.test:
        out.append(f"Trained at lambda0 = {lc.chosen:g} on all seen classes, Adapt-Adv against the triplet base: "
                   f"{_signed(lc.test['base'])} points ({lc.test['base'].verdict}); against lambda0 = 0.5: "
                   f"{_signed(lc.test['0.5'])} points ({lc.test['0.5'].verdict}).")
    return out


def _val_choice(grid: Mapping, off, what: str, train: bool, missing: dict):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over the settings of ``grid`` with the config
    ``off`` (the same recipe switched off) as "off", on validation classes over :data:`VAL_SEEDS`; ``None`` when
    the runs are not recorded."""
    from zslib.engine.choice import OFF, choose

    rs = _grid({k: c.replace(validation_fraction=VALIDATION) for k, c in {OFF: off, **grid}.items()}, what,
               VAL_SEEDS, train=train, missing=missing)
    if rs is None:
        return None
    return choose({k: rs[k] for k in (OFF, *grid)})


def _shown(choice):
    """The setting the Table 5 rows are trained at: the rule's choice, or, when the rule keeps "off", the best other
    candidate by mean (its rows are then an ablation)."""
    if not choice.off_won:
        return choice.chosen
    others = [k for k in choice.means if k != choice.off and k not in choice.diverged]
    return max(others, key=lambda k: choice.means[k].mean)


def _because(ablations: dict, row: str, why: str) -> None:
    ablations[row] = f"{ablations[row]}; {why}" if row in ablations else why


def _table5(real_base, stop: Stopping | None, lam: Lambda0Choice | None, train: bool, missing: dict) -> Table5:
    from zslib.engine.stats import paired

    loss_bases = {"Triplet": real_base, "Angular": real_base.replace(loss="angular", loss_params={"alpha": 45.0}),
                  "Proxy-NCA": real_base.replace(loss="proxy_nca", loss_params={})}
    choices, energy, ablations = {}, {}, {}
    # Proxy-NCA's proxies' rate: "off" is no rate of their own (objective_lr unset: they learn at the head's rate)
    default_rate = loss_bases["Proxy-NCA"].lr * loss_bases["Proxy-NCA"].new_layer_mult
    rate = _val_choice({lr: loss_bases["Proxy-NCA"].replace(objective_lr=lr) for lr in PROXY_LRS},
                       loss_bases["Proxy-NCA"], "the proxies' learning rate of Proxy-NCA", train, missing)
    lr = None
    if rate is not None:
        lr = _shown(rate)
        loss_bases["Proxy-NCA"] = loss_bases["Proxy-NCA"].replace(objective_lr=lr)
        choices["Proxy-NCA proxies' learning rate"] = (rate, f"no rate of their own (the head's rate, {default_rate:g})")
        if rate.off_won:
            why = f"the rule keeps the proxies at the head's rate {default_rate:g}; the Proxy-NCA rows use the leading {lr:g}"
            for row in ("Base", "Energy", "Adapt-Adv"):
                _because(ablations, f"Proxy-NCA / {row}", why)
    for loss, (values, scale) in EC_CHOICES.items():
        if loss == "Proxy-NCA" and lr is None:
            continue
        grid = {v: loss_bases[loss].replace(method="cml", method_params={"lambda1": v, "lambda2": 0.0, "scale": scale})
                for v in values}
        ec = _val_choice(grid, loss_bases[loss], f"the Energy weight for {loss}", train, missing)
        if ec is not None:
            energy[loss] = grid[_shown(ec)]
            choices[f"{loss} Energy lambda1 ({scale} scale)"] = (ec, f"lambda1 = 0 (the {loss} base)")
            if ec.off_won:
                _because(ablations, f"{loss} / Energy", f"the rule keeps lambda1 = 0; this row uses the leading "
                                                        f"lambda1 = {_shown(ec):g}")
    aa_steps = stop.length if stop is not None else None  # Adapt-Adv's length, read on triplet's validation runs
    kept_off = (["no training (step 0) for the length"] if stop is not None and stop.ablation else []) + (
        ["lambda0 = 0 (the adversary off)"] if lam is not None and lam.rule is not None and lam.rule.off_won else [])
    if aa_steps is not None and kept_off:
        for loss in loss_bases:
            _because(ablations, f"{loss} / Adapt-Adv", f"the rule keeps {' and '.join(kept_off)}")
    t5_grid = {}
    for loss, base_config in loss_bases.items():
        if loss == "Proxy-NCA" and base_config.objective_lr is None:
            continue  # its proxies' rate is not chosen in this copy
        t5_grid[f"{loss} / Base"] = base_config
        if loss in energy:
            t5_grid[f"{loss} / Energy"] = energy[loss]
        if aa_steps is not None:
            t5_grid[f"{loss} / Adapt-Adv"] = base_config.replace(method="adapt_adv", method_params=REAL_ADAPT,
                                                                 iterations=aa_steps)
    t5_runs = {}
    for name, config in t5_grid.items():  # row by row: a row that is not recorded is named, the others shown
        got = _grid({name: config}, f"the Table 5 row {name!r}", train=train, missing=missing)
        if got is not None:
            t5_runs[name] = got[name]
    pairs = {}
    for name, rs in t5_runs.items():
        base_name = f"{name.split(' / ')[0]} / Base"
        if not name.endswith(" / Base") and base_name in t5_runs:
            mine = {r.config.seed for r in rs}
            pairs[name] = paired([r for r in t5_runs[base_name] if r.config.seed in mine], rs)
    return Table5(loss_bases, choices, t5_grid, t5_runs, pairs, aa_steps, ablations)


def choice_sentences(study: RealStudy) -> list[str]:
    """What the book's choice rule made of each validation grid of the Table 5 rows (the paper's Table 5: the
    Energy weight lambda1 per loss, Proxy-NCA's proxies' rate), "off" among the candidates, with the mean
    validation Recall@1 of every candidate; where "off" wins, the rows at the leading setting are an ablation."""
    from zslib.engine.choice import OFF

    out = []
    for what, (choice, off_name) in study.table5.choices.items():
        def label(k, off_name=off_name):
            return off_name if k == OFF else f"{k:g}"

        means = ", ".join(f"{label(k)} {100 * m.mean:.1f}" for k, m in choice.means.items())
        out.append(f"{what}: mean validation Recall@1 % of seeds {VAL_SEEDS[0]}-{VAL_SEEDS[-1]}: {means}. "
                   + choice.sentence(label)
                   + (f" The Table 5 rows that use {_shown(choice):g} are an ablation." if choice.off_won else ""))
    return out


def table5_choices(study: RealStudy):
    """Markdown: the choices behind the Table 5 rows (:func:`choice_sentences`), each by the book's choice rule
    with "off" (lambda1 = 0, the loss alone; the proxies without a rate of their own) as a candidate."""
    from IPython.display import Markdown

    if study.table5 is None or not study.table5.choices:
        return Markdown("*The validation runs of the Table 5 choices are not recorded in this copy.*")
    return Markdown("\n".join(f"- {s}" for s in choice_sentences(study)))


def table5_table(study: RealStudy):
    """The Table 5 analogue: per row, seeds, unseen Recall@1, NMI and kNN accuracy (95% intervals), the paired
    difference against its own loss's base with its verdict, and the paper's Recall@1 and difference."""
    import pandas as pd

    from zslib.engine.stats import summarize
    from zslib.reported import reported_frame

    t5, paper5 = study.table5, reported_frame("5", paper="alkaabi2022adaptadv")
    rows = []
    for name, rs in t5.runs.items():
        base_name = f"{name.split(' / ')[0]} / Base"
        row = {"row": name, "seeds": len(rs), "unseen R@1 % [95% CI]": _fi(summarize(rs)),
               "NMI %": _fi(summarize(rs, "NMI")), "kNN %": _fi(summarize(rs, "kNN"))}
        if name in t5.pairs:
            row.update({"vs base (pts)": _signed(t5.pairs[name]), "verdict": t5.pairs[name].verdict})
        row["on validation classes"] = "ablation" if name in t5.ablations else "chosen" if name in _ruled(t5) else ""
        row["paper R@1 %"] = paper5.loc[name, "R@1"]
        row["paper vs base (pts)"] = (f"{paper5.loc[name, 'R@1'] - paper5.loc[base_name, 'R@1']:+.2f}"
                                      if name != base_name else "")
        rows.append(row)
    return pd.DataFrame(rows).set_index("row").fillna("") if rows else None


def _ruled(t5: Table5) -> set:
    """The Table 5 rows whose setting went through the choice rule (the Energy rows, Adapt-Adv, the rows of a loss
    whose own rate was chosen)."""
    rows = {n for n in t5.grid if not n.endswith(" / Base")}
    return rows | ({f"Proxy-NCA / {r}" for r in ("Base", "Energy", "Adapt-Adv")} if any(
        w.startswith("Proxy-NCA proxies") for w in t5.choices) else set())


def table5_sentences(study: RealStudy) -> list[str]:
    """The Table 5 analogue in sentences: every Energy and Adapt-Adv row against its loss's base (paired by seed)
    beside the paper's difference, then how many losses each one raised or lowered clearly."""
    from zslib.reported import reported_frame

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
            agree = ("the same direction as" if (p.verdict == "up") == (paper_diff > 0) else "the opposite direction to") \
                + f" the paper's {paper_diff:+.2f}"
        out.append(f"{ext} on {loss}: {_signed(p)} points of unseen Recall@1 against the {loss} base over {p.diff.n} "
                   f"paired seeds ({p.verdict}); {agree}.")
    return out + _table5_summary(study)


def _rule_summary(study: RealStudy) -> list[str]:
    """One sentence: which Table 5 choices the rule made and for which it kept "off"."""
    got = study.table5.choices
    if not got:
        return []
    kept = [what for what, (c, _) in got.items() if c.off_won]
    taken = [f"{what} = {c.chosen:g}" for what, (c, _) in got.items() if not c.off_won]
    return [f"With \"off\" among the candidates, the choice rule keeps \"off\" on validation classes for "
            f"{len(kept)} of the {len(got)} Table 5 choices ({'; '.join(kept) or 'none'}) and chooses "
            f"{'; '.join(taken) or 'no setting'}; the rows at a setting the rule did not choose are labelled ablations."]


def _table5_summary(study: RealStudy) -> list[str]:
    from zslib.reported import reported_frame

    t5, paper5 = study.table5, reported_frame("5", paper="alkaabi2022adaptadv")
    out = []
    aa_rows = [n for n in t5.pairs if n.endswith("Adapt-Adv") and t5.pairs[n].diff.n > 1]
    if aa_rows:
        gains = sum(paper5.loc[f"{loss} / Adapt-Adv", "R@1"] > paper5.loc[f"{loss} / Base", "R@1"]
                    for loss in t5.loss_bases)
        ups = [n.split(" / ")[0] for n in aa_rows if t5.pairs[n].verdict == "up"]
        downs = [n.split(" / ")[0] for n in aa_rows if t5.pairs[n].verdict == "down"]
        abl = " as an ablation" if any(n in t5.ablations for n in aa_rows) else ""
        out.append(f"Adapt-Adv ({t5.aa_steps} steps{abl}) raises unseen Recall@1 clearly for {len(ups)} of the {len(aa_rows)} "
                   f"losses with an interval ({', '.join(ups) or 'none'}) and lowers it clearly for {len(downs)} "
                   f"({', '.join(downs) or 'none'}); the paper reports a gain for {gains} of its three losses.")
    en_rows = [n for n in t5.pairs if n.endswith("Energy") and t5.pairs[n].diff.n > 1]
    if en_rows:
        clear = [f"{n.split(' / ')[0]} ({t5.pairs[n].verdict})" for n in en_rows if t5.pairs[n].verdict != "no clear effect"]
        abl = [n.split(" / ")[0] for n in en_rows if n in t5.ablations]
        out.append(f"Energy changes unseen Recall@1 clearly for {len(clear)} of the {len(en_rows)} losses"
                   + (f": {', '.join(clear)}" if clear else "")
                   + (f" (an ablation for {', '.join(abl)}: not chosen on validation classes)." if abl else "."))
    return out


def real_gradcam(study: RealStudy):
    """The ``cached_map_gradcam`` records (:mod:`zslib.methods.adapt_adv.analyses`) of seed 0 of the base and of
    Adapt-Adv at its chosen length, for the angular and the triplet loss (name -> [record]); ``None`` when the
    Table 5 Adapt-Adv rows or the records are not stored."""
    from zslib.methods.adapt_adv.analyses import gradcam_records

    t5 = study.table5
    grid = {}
    for short, loss in GC_LOSSES.items():
        if t5.aa_steps is not None and f"{loss} / Adapt-Adv" in t5.grid:
            grid.update({f"{short} base": t5.loss_bases[loss], f"{short} Adapt-Adv": t5.grid[f"{loss} / Adapt-Adv"]})
    if not grid:
        return None
    return gradcam_records(grid, train=study.train)


def _gradcam_summary(records: Mapping) -> dict:
    """Per loss: how the two models' Grad-CAM maps compare on the images where both have mass (correlation,
    largest difference, Adapt-Adv's central share minus the base's), and which maps are all zero."""
    from zslib.engine.stats import interval

    rec = {name: recs[0] for name, recs in records.items()}
    cams = {name: np.asarray(r["gradcam"]) for name, r in rec.items()}
    share = {name: np.asarray(r["central_share"]) for name, r in rec.items()}
    n = len(np.asarray(next(iter(rec.values()))["rows"]))
    empty = {name: [j for j in range(n) if c[j].max() == 0] for name, c in cams.items()}
    out = {"empty": empty, "n": n, "losses": {}}
    for short in GC_LOSSES:
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


def _gradcam_sentences(records: Mapping) -> list[str]:
    from zslib.engine.stats import verdict

    out = []
    for short, g in _gradcam_summary(records)["losses"].items():
        out.append(f"Grad-CAM on real flowers ({short} loss, seed 0, {len(g['corr'])} unseen images): both models explain "
                   f"the same frozen feature map, so their maps differ only by the channel weights; per image the two "
                   f"maps correlate {min(g['corr']):+.2f} to {max(g['corr']):+.2f}, and Adapt-Adv's share of the mass in "
                   f"the central box minus the base's is {_fi(g['d_share'], scale=1.0, digits=2, signed=True)} "
                   f"({verdict(g['d_share'])}, over images of one seed).")
    return out


def show_real_gradcam(study: RealStudy, records) -> None:
    """Grad-CAM on real flowers (Fig. 2 analogue): the maps of the records over the photographs
    (:func:`gradcam_on_photos`), then what they share (the images, the frozen map A), which are all zero, and per
    loss how the base's and Adapt-Adv's maps differ: largest difference, correlation, central share."""
    from zslib.engine.config import Config
    from zslib.engine.stats import verdict

    if not records:
        _md("*The Grad-CAM records of real flowers (or the Table 5 Adapt-Adv rows they explain) are not recorded in "
            "this copy of the book.*")
        return None
    rec = {name: recs[0] for name, recs in records.items()}
    first = next(iter(rec.values()))
    rows_idx = np.asarray(first["rows"], int)
    same_images = all(np.array_equal(np.asarray(r["rows"], int), rows_idx) for r in rec.values())
    act = np.asarray(first["activation"])
    same_act = max(float(np.abs(np.asarray(r["activation"]) - act).max()) for r in rec.values())
    gradcam_on_photos(records, Config.from_profile("real"))  # the maps of the records over the photographs they explain
    summary = _gradcam_summary(records)
    out = [f"The same images in every record: {'yes' if same_images else 'no'}. The feature map A is the same for every "
           f"model: the largest difference of its channel mean between the records is {same_act:.2g}.",
           "Maps with no positive evidence (all zero after the ReLU: no position raises the similarity): " + "; ".join(
               f"{n}: {len(e)} of {summary['n']}" + (f" (image {', '.join(str(j + 1) for j in e)})" if e else "")
               for n, e in summary["empty"].items()) + "."]
    for short, g in summary["losses"].items():
        loss = GC_LOSSES[short]
        out.append(f"{loss}: the two Grad-CAM maps are {'identical' if g['gap'].max() == 0 else 'not identical'}: largest "
                   "difference per image (maps scaled to a maximum of 1) " + ", ".join(f"{v:.2f}" for v in g["gap"])
                   + f"; correlation on the {len(g['both'])} images where both maps have mass "
                   + ", ".join(f"{c:+.2f}" for c in g["corr"]) + ".")
        out.append(f"{loss}: share of the Grad-CAM mass in the central box (uniform {g['uniform']:.2f}) on those images: "
                   "base " + ", ".join(f"{v:.2f}" for v in g["base"])
                   + "; Adapt-Adv " + ", ".join(f"{v:.2f}" for v in g["adapt"])
                   + ". Adapt-Adv minus base (images of one seed, so a description of these images, not a verdict over "
                   f"training runs): {_fi(g['d_share'], scale=1.0, digits=2, signed=True)} ({verdict(g['d_share'])}).")
    seed0 = {}
    for short, loss in GC_LOSSES.items():
        for ext, row in (("base", f"{loss} / Base"), ("Adapt-Adv", f"{loss} / Adapt-Adv")):
            if row in study.table5.runs:
                seed0[f"{short} {ext}"] = _by_seed(study.table5.runs[row])[0].metric("R@1")
    out.append("The models analysed: " + "; ".join(
        f"{n} from its {r.provenance.get('model_from')}, unseen R@1 {100 * r['R@1']:.2f}%"
        + (f" (the recorded seed-0 run: {100 * seed0[n]:.2f}%)" if n in seed0 else "") for n, r in rec.items()) + ".")
    _list(out)
    return None


def full_profile_runs(full, train: bool) -> None:
    """The full profile's Adapt-Adv (the paper's setting on CUB-200-2011): trained when ``train`` (``ZS_PROFILE=full``),
    and every recorded full-profile Adapt-Adv run with its unseen Recall@1 and provenance, as Markdown."""
    from zslib.engine.grid import run_grid
    from zslib.engine.store import load_results, short_commit

    out = [f"The full-profile configuration: `{full.name}` (" + ", ".join(
        f"{k} {full.as_dict()[k]}" for k in ("backbone", "dataset", "iterations", "lr")) + ")."]
    if train:
        run = run_grid({"Adapt-Adv": full}, seeds=(0,))["Adapt-Adv"][0]
        out.append(f"Trained here: unseen R@1 {100 * run.metric('R@1'):.1f}%, NMI {100 * run.metric('NMI'):.1f}%.")
    recorded = list(load_results(profile="full", method="adapt_adv"))
    out += [f"`{r.config.name}`: unseen R@1 {100 * r.metric('R@1'):.1f}%, recorded {r.provenance.get('timestamp')} on "
            f"{r.provenance.get('device')}, commit {short_commit(r.provenance.get('git_commit'))}." for r in recorded]
    if not recorded:
        out.append("No full-profile Adapt-Adv run has been recorded (`results/recorded/`): run this notebook with "
                   "`ZS_PROFILE=full` on a GPU to make one.")
    _list(out)


# ------------------------------------------------------------------------------------ figures on photographs


def photo_figures(runs: Mapping | None):
    """The retrieval grid and t-SNE on Flowers-102 photographs for the Adapt-Adv chapter's real section: the
    untrained pretrained features against the triplet base head, seed 0 of each, trained again from their
    recorded configs (:func:`zslib.analysis.photos.retrieval_section`). The Adapt-Adv runs are not retrained
    for the picture: each took minutes of training when recorded (their provenance); their Grad-CAM maps are
    drawn over the photographs on the chapter's experiments page (:func:`gradcam_on_photos`)."""
    from zslib.analysis.photos import retrieval_section

    if not runs or FLOOR not in runs or BASE not in runs:
        _md("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*")
        return None
    seconds = [r.provenance.get("train_seconds") or 0 for r in runs.get(METHOD, [])]
    note = ("Adapt-Adv is not in the picture: recorded runs keep no weights, and training one again took "
            f"{min(seconds) / 60:.0f} to {max(seconds) / 60:.0f} minutes per run when it was recorded." if seconds else "")
    retrieval_section({"untrained features": runs[FLOOR][0], "triplet base": runs[BASE][0]},
                      tsne_of="triplet base", note=note)


def gradcam_on_photos(records: Mapping, config):
    """Grad-CAM maps of analysis records (``cached_map_gradcam``: name -> list of records, seed 0 first) drawn
    over the Flowers-102 photographs they explain (:func:`zslib.analysis.photos.overlay_maps`). The records
    keep the rows of the unseen split they used; the photographs are read only to be shown."""
    from IPython.display import display

    from zslib.analysis.photos import flower_photos, overlay_maps, photos_unavailable, show
    from zslib.engine.data import DataError

    rec = {name: recs[0] for name, recs in records.items()}
    first = next(iter(rec.values()))
    rows, labels = np.asarray(first["rows"], int), np.asarray(first["labels"], int)
    try:
        photos = flower_photos(config)
    except (DataError, OSError) as err:
        display(photos_unavailable("Grad-CAM on the photographs", err))
        return None
    if not np.array_equal(photos.labels[rows], labels):
        raise RuntimeError("the Grad-CAM records' images are not the photographs' test split (order or labels)")
    maps = {"channel mean of A": np.asarray(first["activation"])}
    maps.update({f"Grad-CAM, {n}": np.asarray(r["gradcam"]) for n, r in rec.items()})
    fig, caption = overlay_maps(photos, rows, maps, titles=[f"class {c + 1}" for c in labels], what="map")
    show(fig, caption + " Here the base and Adapt-Adv re-weight the same frozen 7x7 map A, so their maps can "
         "differ only in which of A's channels they weight.")
    return None


# ------------------------------------------------------------------------------------ findings


def key_findings():
    """The "Key findings" box the Adapt-Adv chapter opens with, generated from the recorded real-profile runs: each
    row named by the parts that ran, "clearly" only for the setting the book's choice rule chose
    (:func:`zslib.analysis.verdict.rule_status`), and the adversary's runs called unstable where their seeds fell
    after their best step (:mod:`zslib.engine.stability`)."""
    from zslib.analysis.findings import findings_box, not_recorded_box, real_comparison
    from zslib.analysis.compare import rule_status
    from zslib.analysis.verdict import change_words, status_note, verb_words
    from zslib.engine.stability import stability_label

    study = real_study(train=False)
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
                   f"({_signed(stop.p_stop_gdfl)} points)." if stop.p_stop_gdfl is not None else ".")
        stopped = [f"Stopped {where}, Adapt-Adv {verb_words(stop.p_stop.verdict, chosen)} unseen Recall@1 against "
                   f"the triplet base ({_signed(stop.p_stop)} points, paired){vs_gdfl}"]
    label = "Adapt-Adv (GDFL attention and class adversary)"
    head = real_comparison(runs[FLOOR][0], runs[BASE], runs[METHOD], label, "the triplet base",
                           status=rule_status("Adapt-Adv", runs[METHOD][0].config))
    g_status, broken = rule_status("Adapt-Adv", runs[GDFL][0].config), stability_label(runs[METHOD])
    adversary = (f"adding the class adversary to it made training unstable ({broken}; {_signed(pa)} points)"
                 if broken != "stable" else
                 f"adding the class adversary to it left unseen Recall@1 {change_words(pa.verdict, False)} the "
                 f"attention alone ({_signed(pa)} points)")
    return findings_box(head + [
        f"The attention alone (+GDFL: GDFL attention, adversary off{status_note(g_status)}) left unseen Recall@1 "
        f"{change_words(pg.verdict, g_status == 'chosen')} the base ({_signed(pg)} points); {adversary}."]
        + stopped + [
        "With the backbone frozen, Grad-CAM of the base and of Adapt-Adv re-weights the same 7x7 map: their maps over "
        "the photographs (on the experiments page) can differ only in which channels they weight."])


def main_findings(runs: Mapping, study: RealStudy):
    """The chapter's "What we found": the quick ablation and the paper's Table 6 gains, the Flowers-102 rows
    against each other and against the untrained features, and the headline results of the experiments page
    (the stopping step chosen on validation classes, the three losses)."""
    from zslib.analysis.findings import found_list
    from zslib.engine.stats import summarize
    from zslib.reported import reported_frame

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
        found.append(f"On Flowers-102 the untrained pretrained features reach {100 * floor_r1:.1f}% unseen Recall@1 and "
                     f"the trained triplet head {100 * summarize(real[BASE])[0]:.1f}% (paper's base: "
                     f"{paper6.loc['Triplet / Base', 'R@1']:.1f}% with a fine-tuned Inception v2).")
    if FLOOR in real and METHOD in real:
        floor_r1 = real[FLOOR][0].metric("R@1")
        aa_m, aa_lo, aa_hi = summarize(real[METHOD])
        where = "above" if aa_lo > floor_r1 else "below" if aa_hi < floor_r1 else "not clearly different from"
        found.append(f"Adapt-Adv's trained head on Flowers-102: {_fi((aa_m, aa_lo, aa_hi))}% unseen Recall@1 over "
                     f"{len(real[METHOD])} seeds, {where} the untrained features' {100 * floor_r1:.1f}%.")
    found.append(stopping_sentence(study))
    if study.table5 is not None:
        found += [f"Table 5 analogue on Flowers-102 (frozen backbone): {s}" for s in _table5_summary(study)]
    return found_list(found)


def experiments_findings(runs: Mapping, lam_quick: Mapping, attention, gradcam, study: RealStudy, records):
    """The experiments page's "What we found": the quick profile's :math:`\\lambda_0` sweep, attention and Grad-CAM
    on the bird's parts, then on Flowers-102 how the runs changed late, the stopping step and :math:`\\lambda_0`
    chosen on validation classes, the Table 5 rows and Grad-CAM on real flowers."""
    from zslib.analysis.findings import found_list

    found = [_lambda_sweep_sentence(runs, lam_quick),
             "Relative attention mass on the bird per layer (1 = uniform): "
             + ", ".join(f"{k} {v:.2f}" for k, v in attention["object"].items()) + ".",
             f"Grad-CAM of the same-class similarity puts {gradcam.loc['base', 'object']:.2f} (base) and "
             f"{gradcam.loc['Adapt-Adv', 'object']:.2f} (Adapt-Adv) times the uniform mass on the bird.",
             _late_sentence(study), stopping_sentence(study)]
    found += _lambda0_sentences(study)
    if study.table5 is not None:
        found += _rule_summary(study)
        found += [f"Table 5 analogue on Flowers-102 (frozen backbone): {s}" for s in table5_sentences(study)]
    if records:
        found += _gradcam_sentences(records)
    return found_list(found)
