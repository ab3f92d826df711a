"""The Adapt-Adv chapters' recorded real-profile study (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022;
``alkaabi2022adaptadv``): :class:`AdaptAdvStudy`.

Flowers-102 with the frozen ImageNet EfficientNet-Lite0 and classes 52-102 unseen: the paper's Table 6 rows (five
seeds; the untrained features once), how the runs changed late, the training length and :math:`\\lambda_0` chosen on
validation classes (30% of the seen classes held out, seeds 0-2) and the Table 5 rows with their own choices. Every
grid is named by :mod:`zslib.methods.adapt_adv.recipes` and read once through :meth:`Study.grid`; what is not stored
is named in :attr:`Study.missing` under the grid's name, which the pages state.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from zslib.engine.choice import OFF, VALIDATION_SEEDS
from zslib.engine.registry import get_method
from zslib.engine.stats import interval, paired
from zslib.methods.adapt_adv import recipes
from zslib.methods.adapt_adv.analyses import gradcam_records
from zslib.methods.adapt_adv.recipes import BASE, FLOOR, GDFL, LAMBDA0S, METHOD, REAL_ADAPT
from zslib.present.base import Study

__all__ = ["AdaptAdvStudy", "LateChange", "Stopping", "Lambda0Choice", "Table5", "STOPPING", "LAMBDA0",
           "curve", "by_seed", "step_label", "at_step"]

#: The names of the validation grids, as the pages state them when they are not stored.
STOPPING = "the stopping-step selection on validation classes"
LAMBDA0 = "the lambda0 choice on validation classes"


def curve(run, split: str = "unseen", metric: str = "R@1") -> dict:
    """A run's evaluations during training: ``{step: value}``."""
    return dict(zip(*run.history.metric_curve(split, metric)))


def by_seed(runs) -> dict:
    """``{seed: run}``."""
    return {r.config.seed: r for r in runs}


def step_label(step) -> str:
    """A step of a length choice as the sentences name it (step 0 is no training)."""
    return "step 0 (no training: the head at initialisation)" if step == 0 else f"step {step}"


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

    def ruled(self) -> set:
        """The rows whose setting went through the choice rule (the Energy rows, Adapt-Adv, the rows of a loss whose
        own rate was chosen)."""
        rows = {n for n in self.grid if not n.endswith(" / Base")}
        return rows | ({f"Proxy-NCA / {r}" for r in ("Base", "Energy", "Adapt-Adv")} if any(
            w.startswith("Proxy-NCA proxies") for w in self.choices) else set())


def at_step(late: Mapping):
    """Adapt-Adv minus the base at the step before the last, paired by seed."""
    b_at, a_at = late[BASE].before, late[METHOD].before
    return interval([a_at[s] - b_at[s] for s in sorted(set(a_at) & set(b_at))])


class AdaptAdvStudy(Study):
    """Everything the real-profile sections of the two Adapt-Adv pages show, from one reading of the runs: the Table
    6 rows (:attr:`configs`, :attr:`runs`, :attr:`pairs`), how they changed late (:attr:`late`), the stopping step
    (:attr:`stopping`) and :math:`\\lambda_0` (:attr:`lambda0`) chosen on validation classes, and the Table 5 rows
    (:attr:`table5`). With ``train`` (``ZS_PROFILE=real``) the missing runs are trained."""

    profile = "real"

    def __init__(self, train: bool | None = None):
        super().__init__(train)
        self.configs = recipes.real_configs()

    def _rows(self, grid: Mapping, name) -> dict:
        """The rows of ``grid`` read one by one: a row that is not recorded is named, the others shown."""
        runs = {}
        for row, config in grid.items():
            got = self.grid(name(row), {row: config}, recipes.FLOOR_SEEDS if row == FLOOR else None)
            if got is not None:
                runs[row] = got[row]
        return runs

    @cached_property
    def runs(self) -> dict:
        """The Table 6 rows that are stored: name -> runs."""
        return self._rows(self.configs, lambda row: f"the row {row!r}")

    @cached_property
    def pairs(self) -> dict:
        """``(a, b) -> paired(a, b)`` on unseen Recall@1: +GDFL and Adapt-Adv against the base, Adapt-Adv against
        +GDFL."""
        runs = self.runs
        return {(a, b): paired(runs[a], runs[b]) for a, b in ((BASE, GDFL), (BASE, METHOD), (GDFL, METHOD))
                if a in runs and b in runs}

    @cached_property
    def late(self) -> dict:
        """For the triplet base and Adapt-Adv: the change of unseen Recall@1 between each run's last two evaluations
        (read on the test classes: for reading, not for choosing), as a :class:`LateChange` per row."""
        runs = self.runs
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

    @cached_property
    def stopping(self) -> Stopping | None:
        """Adapt-Adv's training length chosen on validation classes and the runs stopped there."""
        runs = self.runs
        val_runs = self.grid(STOPPING, recipes.stopping_grid(), VALIDATION_SEEDS)
        if val_runs is None:
            return None
        val_curve = {name: dict(zip(np.asarray(rs[0].history.metric_curve("val", "R@1")[0]).tolist(),
                                    np.array([r.history.metric_curve("val", "R@1")[1] for r in rs]).mean(0)))
                     for name, rs in val_runs.items()}
        rule = recipes.step_rule(val_runs[METHOD])
        trained = [s for s in val_curve[METHOD] if s > 0]
        chosen = rule.chosen if not rule.off_won else max(trained, key=val_curve[METHOD].get)
        stop = Stopping(val_runs, val_curve, rule, chosen)
        if chosen == self.configs[METHOD].iterations:
            return stop
        got = self.grid(f"Adapt-Adv stopped at {chosen} steps", {"stopped": recipes.stopped(chosen)})
        if got is None:
            return stop
        stop.stop_runs = rs = got["stopped"]
        if BASE in runs:
            stop.p_stop = paired(runs[BASE], rs)
            if GDFL in runs:
                stop.p_stop_gdfl = paired(runs[GDFL], rs)
            long = by_seed(runs.get(METHOD, []))
            stop.same_seeds = [r.config.seed for r in rs
                               if r.config.seed in long and curve(long[r.config.seed]).get(chosen) == r.metric("R@1")]
        return stop

    @cached_property
    def lambda0(self) -> Lambda0Choice | None:
        """:math:`\\lambda_0` chosen on validation classes at the length :attr:`stopping` read (``None`` when either
        grid is not stored)."""
        stop = self.stopping
        if stop is None:
            return None
        lam_runs = self.grid(LAMBDA0, recipes.lambda0_grid(), VALIDATION_SEEDS)
        if lam_runs is None:
            return None
        at = {lam: {r.config.seed: curve(r, "val")[stop.length] for r in rs} for lam, rs in lam_runs.items()}
        chosen = max(LAMBDA0S, key=lambda lam: np.mean(list(at[lam].values())))  # the adversary's weight, > 0
        vs = {lam: interval([at[lam][s] - at[chosen][s] for s in VALIDATION_SEEDS]) for lam in lam_runs if lam != chosen}
        used = get_method("adapt_adv").settings(REAL_ADAPT)["lambda0"]  # what every Adapt-Adv run of the chapter used
        choice = Lambda0Choice(at, chosen, vs, used, rule=recipes.lambda0_rule(at, lam_runs))
        if chosen != used and stop.stop_runs is not None and BASE in self.runs:
            got = self.grid(f"Adapt-Adv at lambda0 {chosen:g}", {"chosen": recipes.at_lambda0(stop.length, chosen)})
            if got is not None:
                choice.test = {"base": paired(self.runs[BASE], got["chosen"]),
                               "0.5": paired(stop.stop_runs, got["chosen"])}
        return choice

    def _val_choice(self, grid: Mapping, off, what: str):
        """The book's choice rule over the settings of ``grid`` with the config ``off`` (the same recipe switched
        off) as "off", on validation classes over :data:`VALIDATION_SEEDS`; ``None`` when the runs are not recorded."""
        rs = self.grid(what, {k: recipes.on_validation(c) for k, c in {OFF: off, **grid}.items()}, VALIDATION_SEEDS)
        if rs is None:
            return None
        return recipes.choice_on_validation({k: rs[k] for k in (OFF, *grid)})

    @cached_property
    def table5(self) -> Table5:
        """The Table 5 rows: each loss's base, Energy at its chosen weight and Adapt-Adv at the chosen length."""
        stop, lam = self.stopping, self.lambda0
        loss_bases = recipes.table5_bases()
        choices, energy, ablations = {}, {}, {}

        def because(row: str, why: str) -> None:
            ablations[row] = f"{ablations[row]}; {why}" if row in ablations else why

        # Proxy-NCA's proxies' rate: "off" is no rate of their own (objective_lr unset: they learn at the head's rate)
        pnca = loss_bases["Proxy-NCA"]
        default_rate = pnca.lr * pnca.new_layer_mult
        rate = self._val_choice(recipes.proxy_rate_grid(pnca), pnca, "the proxies' learning rate of Proxy-NCA")
        lr = None
        if rate is not None:
            lr = recipes.shown_setting(rate)
            loss_bases["Proxy-NCA"] = pnca.replace(objective_lr=lr)
            choices["Proxy-NCA proxies' learning rate"] = (rate, f"no rate of their own (the head's rate, "
                                                                 f"{default_rate:g})")
            if rate.off_won:
                why = (f"the rule keeps the proxies at the head's rate {default_rate:g}; the Proxy-NCA rows use the "
                       f"leading {lr:g}")
                for row in ("Base", "Energy", "Adapt-Adv"):
                    because(f"Proxy-NCA / {row}", why)
        for loss, (_, scale) in recipes.EC_CHOICES.items():
            if loss == "Proxy-NCA" and lr is None:
                continue
            grid = recipes.energy_grid(loss_bases[loss], loss)
            ec = self._val_choice(grid, loss_bases[loss], f"the Energy weight for {loss}")
            if ec is not None:
                energy[loss] = grid[recipes.shown_setting(ec)]
                choices[f"{loss} Energy lambda1 ({scale} scale)"] = (ec, f"lambda1 = 0 (the {loss} base)")
                if ec.off_won:
                    because(f"{loss} / Energy", f"the rule keeps lambda1 = 0; this row uses the leading "
                                                f"lambda1 = {recipes.shown_setting(ec):g}")
        aa_steps = stop.length if stop is not None else None  # Adapt-Adv's length, read on triplet's validation runs
        kept_off = (["no training (step 0) for the length"] if stop is not None and stop.ablation else []) + (
            ["lambda0 = 0 (the adversary off)"] if lam is not None and lam.rule is not None and lam.rule.off_won
            else [])
        if aa_steps is not None and kept_off:
            for loss in loss_bases:
                because(f"{loss} / Adapt-Adv", f"the rule keeps {' and '.join(kept_off)}")
        t5_grid = {}
        for loss, base_config in loss_bases.items():
            if loss == "Proxy-NCA" and base_config.objective_lr is None:
                continue  # its proxies' rate is not chosen in this copy
            t5_grid[f"{loss} / Base"] = base_config
            if loss in energy:
                t5_grid[f"{loss} / Energy"] = energy[loss]
            if aa_steps is not None:
                t5_grid[f"{loss} / Adapt-Adv"] = recipes.table5_adapt_adv(base_config, aa_steps)
        t5_runs = self._rows(t5_grid, lambda row: f"the Table 5 row {row!r}")
        pairs = {}
        for name, rs in t5_runs.items():
            base_name = f"{name.split(' / ')[0]} / Base"
            if not name.endswith(" / Base") and base_name in t5_runs:
                mine = {r.config.seed for r in rs}
                pairs[name] = paired([r for r in t5_runs[base_name] if r.config.seed in mine], rs)
        return Table5(loss_bases, choices, t5_grid, t5_runs, pairs, aa_steps, ablations)

    def gradcam_grid(self) -> dict:
        """The models Grad-CAM explains on real flowers: per loss of :data:`~zslib.methods.adapt_adv.recipes.
        GRADCAM_LOSSES`, its base and its Adapt-Adv at the chosen length (empty when those rows are not set)."""
        t5, grid = self.table5, {}
        for short, loss in recipes.GRADCAM_LOSSES.items():
            if t5.aa_steps is not None and f"{loss} / Adapt-Adv" in t5.grid:
                grid.update({f"{short} base": t5.loss_bases[loss],
                             f"{short} Adapt-Adv": t5.grid[f"{loss} / Adapt-Adv"]})
        return grid

    def gradcam_records(self) -> dict | None:
        """The ``cached_map_gradcam`` records (:mod:`zslib.methods.adapt_adv.analyses`) of seed 0 of the models of
        :meth:`gradcam_grid` (name -> [record]); ``None`` when the Table 5 Adapt-Adv rows or the records are not
        stored."""
        grid = self.gradcam_grid()
        if not grid:
            return None
        return gradcam_records(grid, train=self.train)
