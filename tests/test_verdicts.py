"""What the comparison and the index page *say* about the recorded runs holds: like-for-like paper gains, labels
that name the parts that ran and the rule's verdict, the untrained run as the floor, broken seeds marked, dates read
from the records, no unseen metric in a validation run, one rule for CML, and the power of every choice.

Every expected value is recomputed here from the recorded JSON files with numpy and scipy (and the rule with the
project's oracle, ``tests/rule_oracle.py``), not through the code under test.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rule_oracle import expected_choice
from zslib.analysis import compare as cmp
from zslib.engine.choice import OFF, VALIDATION_SEEDS
from zslib.engine.config import Config, config_hash

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "results" / "recorded"


def _json(config) -> dict:
    (path,) = RECORDED.glob(f"*-{config_hash(config)}.json")
    return json.loads(path.read_text())


def _r1(config, seeds, split="unseen", metric="R@1") -> np.ndarray:
    return np.array([_json(config.replace(seed=s))["metrics"][split][metric] for s in seeds])


def _half(d) -> float:
    d = np.asarray(d, float)
    return float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))


def _power(groups) -> float:
    """The true mean difference the rule's interval lies above 0 for in 80% of repetitions, at the seeds of ``groups``
    from their pooled standard deviation: the noncentral t's tail solved by bisection (the library uses Brent's
    method), groups all 0 left out."""
    moved = [np.asarray(g, float) for g in groups if np.any(np.asarray(g) != 0)]
    if not moved:
        return math.nan
    n = min(len(g) for g in moved)
    sd = math.sqrt(sum((len(g) - 1) * g.var(ddof=1) for g in moved) / sum(len(g) - 1 for g in moved))
    crit = stats.t.ppf(0.975, n - 1)
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if stats.nct.sf(crit, n - 1, mid) < 0.8 else (lo, mid)
    return lo * sd / math.sqrt(n)


def _size(x) -> str:
    return f"{100 * x:.2f}" if 100 * x < 0.1 else f"{100 * x:.1f}"


def _side(d) -> int:
    d = np.asarray(d, float)
    h = _half(d)
    return int(d.mean() - h > 0) - int(d.mean() + h < 0)


@pytest.fixture(scope="module")
def comparisons():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {regime: cmp.compare(regime) for regime in cmp.REGIMES}


def _val_values(entry, regime):
    """{candidate: per-seed validation R@1} from the JSON files, "off" included (ZSML: the leader's input
    features), and the seeds."""
    base = cmp.regime_config(regime)
    seeds = entry.choice_seeds(regime)
    grid = cmp.validation_grid(entry, base, regime)
    values = {k: _r1(c, seeds, "val") for k, c in grid.items()}
    if entry.off_metrics_prefix:
        leader = max(values, key=lambda k: values[k].mean())
        values[OFF] = _r1(grid[leader], seeds, "val", entry.off_metrics_prefix + "R@1")
    return values


def _entry(name):
    return next(e for e in cmp.ENTRIES if e.name == name)


# ---------------------------------------------------------------------------------------------------- 1
#: The papers' printed Recall@1 for the variant each candidate trains, and the base row it is measured against.
PAPER_GAINS = {
    ("CML", "lambda1"): 53.8 - 48.9,  # CML-e (Tri) - Triplet, Table IV (CUB-200)
    ("CML", "lambda2"): 55.2 - 48.9,  # CML-d (Tri) - Triplet, Table IV
    ("DeML", "lambda0"): 56.6 - 52.9,  # DeML(1,4) (Table 2, CUB, H) - U512 (Table 1)
    ("Adapt-Adv", "+GDFL"): 86.41 - 81.55,  # Triplet / +GDFL - Triplet / Base, Table 6 (Flowers-102)
    ("Adapt-Adv", "lambda0"): 89.32 - 81.55,  # Triplet / Adapt-Adv - Triplet / Base, Table 6
    # the fine-tuned regime's candidates (the campaign plans' labels)
    ("CML", "EC"): 53.8 - 48.9,
    ("CML", "DC"): 55.2 - 48.9,
    ("CML", "EC+DC"): 55.3 - 48.9,  # CML (Tri) - Triplet, Table IV
    ("DeML", "J=4"): 56.6 - 52.9,
    ("DeML", "J=8"): 59.0 - 52.9,  # DeML(1,8), Table 2 (CUB, H)
    ("Adapt-Adv", "+adversary"): 84.54 - 81.55,  # Triplet / +Adv, Table 6
    ("Adapt-Adv", "GDFL"): 89.32 - 81.55,  # "GDFL + adversary": the method, Table 6
}


def test_the_claimed_gain_is_the_paper_row_of_the_variant_tested(comparisons):
    for regime, comp in comparisons.items():
        table = cmp.comparison_table([comp])
        for i, row in enumerate(comp.rows):
            if row.missing:  # a method whose runs are not recorded (yet) in this copy has no claim to check
                continue
            cell = table.loc[i, "paper's R@1 gain, same or nearest variant (pts)"]
            key = (row.method, row.tested.split()[0])
            if key in PAPER_GAINS:
                assert row.reported_gain == pytest.approx(PAPER_GAINS[key]), (regime, key)
                assert cell.startswith(f"{PAPER_GAINS[key]:+.1f} (") and "Table" in cell, cell
            else:
                assert row.reported_gain is None and cell.startswith("no like-for-like row"), (regime, key, cell)


# ---------------------------------------------------------------------------------------------------- 2 and 8
@pytest.mark.parametrize("regime", ["quick", "real frozen", "real adapted"])
def test_a_row_the_rule_did_not_choose_is_an_ablation_in_every_sentence_and_never_clearly(comparisons, regime):
    comp = comparisons[regime]
    findings = cmp.findings([comp])
    lines = {r.method: next(line for line in findings.splitlines() if f"**{r.method} (" in line) for r in comp.rows}
    for row in comp.rows:
        entry = _entry(row.method)
        expected = expected_choice(_val_values(entry, regime), OFF)
        assert (row.chosen == OFF) == (expected == OFF), (regime, row.method)
        line = lines[row.method]
        if expected == OFF:
            assert "ablation" in line and "clearly above" not in line and "clearly below" not in line, line
        tested = entry.build(cmp.regime_config(regime), entry.candidates[row.tested])
        seeds = tuple(sorted(r.config.seed for r in row.runs))
        if entry.off_metrics_prefix:
            diffs = _r1(tested, seeds) - _r1(tested, seeds, metric="input R@1")
        else:
            diffs = _r1(tested, seeds) - _r1(entry.build(cmp.regime_config(regime), None), seeds)
        if np.all(diffs == 0):
            assert "identical to its baseline on every seed" in line, line
        # the power of the choice and of the test at 80%, from the paired standard deviations (pooled on validation)
        values = _val_values(entry, regime)
        val_power = _power([values[k] - values[OFF] for k in values if k != OFF])
        test_power = _power([diffs])
        assert row.val_power == pytest.approx(val_power, rel=1e-6) or (math.isnan(val_power) and row.val_identical)
        assert row.test_power == pytest.approx(test_power, rel=1e-6) or math.isnan(test_power)
        cell = cmp.comparison_table([comp]).set_index("method").loc[row.method, "80% power, validation / test (pts)"]
        test_cell = "= baseline" if np.all(diffs == 0) else _size(test_power)
        assert cell == f"{_size(val_power)} / {test_cell}", cell
        if expected == OFF:
            assert f"would call a true difference of {_size(val_power)} points clear in 80% of repetitions" in line
    for line in cmp.adaptation_sentences(list(comparisons.values())).splitlines():
        for part in line.split(" and "):
            if ", an ablation)" in part:
                assert "clearly" not in part, line


def test_the_labels_name_the_parts_that_ran(comparisons):
    frozen = {r.method: r for r in comparisons["real frozen"].rows}
    assert frozen["Adapt-Adv"].tested == "+GDFL (no adversary)"
    assert "GDFL attention, adversary off" in cmp.findings([comparisons["real frozen"]])
    cml = frozen["CML"]
    part = {"lambda1": "CML-e, energy confusion alone", "lambda2": "CML-d, diversity confusion alone"}
    assert part[cml.tested.split()[0]] in cmp.comparison_table([comparisons["real frozen"]]).iloc[0, 2]
    weight = cml.tested.replace(" ", " = ")  # the weight tested, e.g. "lambda2 = 0.1"
    assert weight in cmp.comparison_table([comparisons["real frozen"]]).iloc[0, 2]
    assert "**CML (CML-" in cmp.findings([comparisons["real frozen"]]) and weight in cmp.findings(
        [comparisons["real frozen"]])


def test_a_map_at_r_verdict_that_differs_is_said_beside_recall(comparisons):
    comp = comparisons["real frozen"]
    line = next(s for s in cmp.findings([comp]).splitlines() if "**CML (" in s)
    row = next(r for r in comp.rows if r.method == "CML")
    entry, base = _entry("CML"), cmp.regime_config("real frozen")
    tested, seeds = entry.build(base, entry.candidates[row.tested]), (0, 1, 2, 3, 4)
    r1 = _r1(tested, seeds) - _r1(entry.build(base, None), seeds)
    mapr = _r1(tested, seeds, metric="MAP@R") - _r1(entry.build(base, None), seeds, metric="MAP@R")
    if _side(r1) != _side(mapr):
        assert "(MAP@R" in line, line


def test_the_index_headlines_say_clearly_only_for_a_setting_the_rule_chose():
    """Every method's first "Key findings" sentence (the index page's line): the frozen regime's rule, recomputed
    with the oracle, kept each of these methods off (or chose another setting), so none says "clearly raised" or
    "clearly lowered", and each names its status."""
    from zslib.present import adapt_adv as adapt
    from zslib.present import cml
    from zslib.present import deml
    from zslib.present.zsml import sentences as zsml

    for name, module in (("CML", cml), ("DeML", deml), ("Adapt-Adv", adapt), ("ZSML", zsml)):
        first = module.key_findings().sentences[0]
        kept_off = expected_choice(_val_values(_entry(name), "real frozen"), OFF) == OFF
        assert "clearly raised" not in first and "clearly lowered" not in first, first
        if kept_off:
            assert "ablation" in first, first
    first = adapt.key_findings().sentences[0]
    assert "adversary" in first and "unstable" in first, first


# ---------------------------------------------------------------------------------------------------- 3
def test_zsml_against_the_untrained_network_is_against_its_run(comparisons):
    for regime in ("real frozen", "real adapted"):
        comp = comparisons[regime]
        row = next(r for r in comp.rows if r.method == "ZSML")
        base = cmp.regime_config(regime)
        floor = _json(base.replace(method="pretrained", seed=0))["metrics"]["unseen"]
        entry = _entry("ZSML")
        tested, seeds = entry.build(base, entry.candidates[row.tested]), (0, 1, 2, 3, 4)
        for metric in ("R@1", "MAP@R"):
            want = _r1(tested, seeds, metric=metric) - floor[metric]
            assert row.vs_floor[metric].mean == pytest.approx(want.mean()), (regime, metric)


# ---------------------------------------------------------------------------------------------------- 4
def _seen_collapsed(history) -> bool:
    seen = [(row["step"], row["seen"]["R@1"]) for row in history["evals"] if "seen" in row]
    peak = max(v for _, v in seen)
    return seen[-1][1] <= peak / 3 and seen[-1][0] > max(s for s, v in seen if v == peak)


def test_diverged_and_collapsed_seeds_are_marked_in_the_table(comparisons):
    comp = comparisons["quick"]
    table = cmp.comparison_table([comp]).set_index("method")
    base = cmp.regime_config("quick")
    for row in comp.rows:
        entry = _entry(row.method)
        tested = entry.build(base, entry.candidates[row.tested])
        files = [_json(tested.replace(seed=s)) for s in (0, 1, 2)]
        diverged = sum(f.get("status") == "diverged" for f in files)
        collapsed = sum(f.get("status") != "diverged" and _seen_collapsed(f["history"]) for f in files)
        cell = table.loc[row.method, "unseen R@1 %"]
        assert (f"(diverged: {diverged} of 3 seeds)" in cell) == bool(diverged), cell
        stability = table.loc[row.method, "stability"]
        assert (f"collapsed: {collapsed} of 3 seeds" in stability) == bool(collapsed), stability
        if diverged or collapsed:
            assert table.loc[row.method, "verdict"].startswith("unstable"), row.method
    assert "collapsed: 2 of 3 seeds" in table.loc["Adapt-Adv", "stability"]  # seen R@1 0.28 -> 0.08, 0.47 -> 0.07


def test_the_stability_check_reads_a_history():
    from zslib.engine.stability import held_out_fall, seen_collapse, stability_label

    def evals(seen, unseen):
        return [{"step": 50 * i, "seen": {"R@1": s}, "unseen": {"R@1": u}}
                for i, (s, u) in enumerate(zip(seen, unseen))]

    assert seen_collapse(evals([0.1, 0.3, 0.09], [0.1] * 3))  # 0.09 <= 0.3 / 3
    assert seen_collapse(evals([0.1, 0.3, 0.11], [0.1] * 3)) is None
    assert held_out_fall(evals([0.5] * 5, [0.88, 0.92, 0.92, 0.912, 0.688]))  # the frozen Adapt-Adv seed
    assert held_out_fall(evals([0.5] * 3, [0.88, 0.90, 0.875])) is None  # 2.5 points: within the margin
    assert held_out_fall(evals([0.5] * 2, [0.95, 0.80])) and held_out_fall(evals([0.5], [0.95])) is None

    class Run:
        def __init__(self, seen, unseen):
            self.history = type("H", (), {"evals": evals(seen, unseen)})()
            self.config, self.diverged = Config(), None

    runs = [Run([0.3, 0.5, 0.5], [0.2, 0.2, 0.2]), Run([0.3, 0.5, 0.1], [0.2, 0.2, 0.1])]
    assert stability_label(runs) == "collapsed: 1 of 2 seeds"


# ---------------------------------------------------------------------------------------------------- 5
def _first_trained(provenance) -> dt.datetime:
    stamps = []
    while provenance:
        stamps.append(dt.datetime.fromisoformat(provenance["timestamp"]))
        provenance = provenance.get("replaced")
    return min(stamps)


def test_when_runs_were_trained_is_read_from_their_records(comparisons):
    comp = comparisons["real adapted"]
    base = cmp.regime_config("real adapted")
    val, test = [], []
    for row in comp.rows:
        entry = _entry(row.method)
        for config in cmp.validation_grid(entry, base, "real adapted").values():
            val += [_first_trained(_json(config.replace(seed=s))["provenance"])
                    for s in entry.choice_seeds("real adapted")]
        tested = entry.build(base, entry.candidates[row.tested])
        test += [_first_trained(_json(tested.replace(seed=s))["provenance"]) for s in range(5)]
        if not entry.off_metrics_prefix:
            test += [_first_trained(_json(entry.build(base, None).replace(seed=s))["provenance"]) for s in range(5)]
        else:  # ZSML's baseline is its own runs' input features: the same files once more
            test += [_first_trained(_json(tested.replace(seed=s))["provenance"]) for s in range(5)]
    early = sum(t < max(val) for t in test)
    sentence = cmp.adapted_order_sentence(comp)
    assert (f"{early} of the {len(test)} test runs" in sentence) if early else ("every validation run" in sentence)
    for text in (cmp.Entry.candidates_for.__doc__, (REPO / "book" / "compare.ipynb").read_text()):
        assert "before any adapted run was trained" not in text


# ---------------------------------------------------------------------------------------------------- 6
def test_a_validation_run_stores_no_unseen_metrics(tmp_path):
    from zslib.engine.runner import run, scored_splits

    tiny = Config.from_profile("quick", iterations=4, eval_every=2, batch_classes=4, batch_per_class=2,
                               synth_images_per_class=8, image_size=32, resize_size=36, embedding_dim=16)
    val = run(tiny.replace(validation_fraction=0.3), results_dir=tmp_path, progress=False)
    stored = json.loads(val.path.read_text())
    assert set(stored["metrics"]) == {"seen", "val"}
    assert all("unseen" not in row for row in stored["history"]["evals"])
    test = run(tiny, results_dir=tmp_path, progress=False)
    assert "unseen" in test.metrics and scored_splits(tiny) == ("seen", "val", "unseen")


def test_the_recorded_runs_table_hides_a_validation_runs_unseen_metrics():
    from zslib.engine import store

    base = cmp.regime_config("real frozen")
    config = cmp.validation_grid(_entry("CML"), base)[OFF].replace(seed=0)
    assert "unseen" in _json(config)["metrics"]  # recorded by earlier code
    table = store.recorded_runs_table([store.load_result(next(RECORDED.glob(f"*-{config_hash(config)}.json")))])
    assert table["unseen R@1 %"].isna().all()


# ---------------------------------------------------------------------------------------------------- 7
def test_cml_weights_go_through_the_one_rule_and_its_headline_names_an_ablation():
    from zslib.engine.grid import run_grid
    from zslib.methods.cml import recipes
    from zslib.methods.cml.method import cml_method
    from zslib.present.cml import key_findings

    val = Config.from_profile("real").replace(validation_fraction=0.3)
    seeds = VALIDATION_SEEDS
    sweep = run_grid(recipes.real_sweep_grid(), seeds=seeds, stored_only=True)
    chosen, kept = recipes.choose_weights(sweep), recipes.ablations(sweep)

    def config(loss, **w):
        c = val.replace(**cml_method("cub200", loss, "baseline"))
        return c.replace(method="cml", method_params={"lambda1": 0.0, "lambda2": 0.0, **w}) if any(w.values()) else c

    for loss in recipes.REAL_LOSSES:
        for term, weights in recipes.REAL_WEIGHTS.items():
            values = {0.0: _r1(config(loss), seeds, "val")}
            values.update({w: _r1(config(loss, **{term: w}), seeds, "val") for w in weights})
            expected = expected_choice(values, 0.0)
            assert ((loss, term) in kept) == (expected == 0.0), (loss, term)
            best = max(weights, key=lambda w: values[w].mean())
            assert chosen[loss, term] == (best if expected == 0.0 else expected), (loss, term)
    first = key_findings().sentences[0]
    triplet_kept = any(("triplet", t) in kept for t in recipes.REAL_WEIGHTS)
    assert ("ablation" in first) == triplet_kept and ("clearly" not in first.split(":")[0] or not triplet_kept)


# ---------------------------------------------------------------------------------------------------- 8
def test_detectable_is_the_half_width_of_the_paired_interval():
    """The interval's half-width (what a true difference of its own size crosses only about half the time) stays
    available as ``detectable``; the book's power figures are :func:`power_difference` at 80%."""
    from zslib.analysis.verdict import detectable
    from zslib.engine.stats import interval

    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 10):
        d = rng.normal(0.01, 0.02, n)
        assert detectable(d) == pytest.approx(_half(d))
        i = interval(d)
        assert detectable(d) == pytest.approx(i.high - i.mean)
    assert math.isnan(detectable([0.1]))


def test_the_chapter_explains_off_kept_at_the_rules_power(comparisons):
    note = cmp.power_note(list(comparisons.values()))
    assert "noncentral t" in note and "80%" in note  # the method stated once
    for comp in comparisons.values():
        for row in comp.rows:
            if row.ablation:
                line = next(x for x in note.splitlines() if x.startswith(f"- **{row.method}, {comp.regime}**"))
                if row.val_identical:
                    assert "no power figure" in line, line
                else:
                    assert f"true difference of {_size(row.val_power)} points clear in 80%" in line, line


def test_the_forest_plot_marks_the_rows_with_broken_seeds(comparisons):
    import matplotlib.pyplot as plt

    comp = comparisons["quick"]
    fig = cmp.forest_plot([comp])
    try:
        marked = [t.xy[1] for t in fig.axes[0].texts if t.get_text() == "unstable"]
    finally:
        plt.close(fig)
    base = cmp.regime_config("quick")
    broken = []
    for y, row in enumerate(comp.rows):
        entry = _entry(row.method)
        files = [_json(entry.build(base, entry.candidates[row.tested]).replace(seed=s)) for s in (0, 1, 2)]
        if any(f.get("status") == "diverged" or _seen_collapsed(f["history"]) for f in files):
            broken.append(y)
    assert sorted(marked) == broken and broken  # quick Adapt-Adv collapsed, quick ZSML diverged


def test_a_paired_phrase_says_clearly_only_for_a_chosen_setting_and_names_broken_seeds():
    from zslib.analysis.verdict import paired_phrase

    up = (0.021, 0.003, 0.039)
    assert paired_phrase(up, "up", True, "X") == "+2.1 [+0.3, +3.9] points against X (clearly above it)"
    assert paired_phrase(up, "up", False, "X") == "+2.1 [+0.3, +3.9] points against X (above it)"
    assert paired_phrase((-0.01, -0.03, 0.01), "no clear effect", True, "X").endswith(
        "(not clearly different from it)")
    broken = paired_phrase(up, "up", True, "X", "collapsed: 1 of 3 seeds")
    assert "clearly" not in broken and "unstable, collapsed: 1 of 3 seeds" in broken
    assert paired_phrase(up, "up", True, "X", "stable") == paired_phrase(up, "up", True, "X")
    assert paired_phrase(up, "up", True, "X", "not judged: 5 of 5 seeds evaluated once") == paired_phrase(
        up, "up", True, "X")


def _campaign(tuning_off_won: bool, method_off_won: bool, stability: str = "stable"):
    """A recorded campaign as campaign_sentences reads it: rows and choices, every verdict "up"."""
    from types import SimpleNamespace

    def choice(off_won):
        return SimpleNamespace(off_won=off_won, chosen="off" if off_won else "lr 1e-5", sentence=lambda: "Chose.")

    diff = {"diff": (0.02, 0.01, 0.03), "verdict": "up"}
    common = dict(seeds=[0, 1, 2], hardware=["cuda (H100)"], loss="triplet", stability="stable",
                  **{"R@1": (0.8, 0.79, 0.81)})
    rows = [dict(common, row="untrained floor (x)", hardware=[], **{"vs floor": None, "vs baseline": None}),
            dict(common, row="no fine-tuning: head on the frozen network", **{"vs floor": diff, "vs baseline": None}),
            dict(common, row="baseline: triplet (off for cml)", **{"vs floor": diff, "vs baseline": None}),
            dict(common, row="cml", setting="w 0.1", stability=stability, **{"vs floor": diff, "vs baseline": diff})]
    tuning = choice(tuning_off_won)
    return SimpleNamespace(rows=rows, tuning_choice=tuning, tuning_setting="lr 1e-5",
                           choices={"cml": choice(method_off_won)}, paths={})


@pytest.mark.parametrize("tuning_off_won, method_off_won", [(False, False), (False, True), (True, False)])
def test_the_campaign_sentences_say_clearly_only_of_rows_the_rules_chose(tuning_off_won, method_off_won):
    from zslib.campaign.report import campaign_sentences

    text = campaign_sentences(_campaign(tuning_off_won, method_off_won))
    head = text[text.index("A head trained"):text.index("The triplet loss")]
    base = text[text.index("The triplet loss"):text.index("CML:")]
    method = text[text.index("CML:"):]
    assert ("clearly above" in head) == tuning_off_won  # the head alone is chosen when the recipe kept "off"
    assert ("clearly above" in base) == (not tuning_off_won) and ("ablation" in base) == tuning_off_won
    assert ("clearly above" in method) == (not tuning_off_won and not method_off_won)
    assert "above it" in method and ("labelled ablation" in method) == method_off_won
    broken = campaign_sentences(_campaign(False, False, "collapsed: 2 of 3 seeds"))
    assert "unstable, collapsed: 2 of 3 seeds" in broken[broken.index("CML:"):]
    assert "clearly" not in broken[broken.index("CML:"):].split("Chose.")[1]


def test_the_seeds_sentence_says_why_a_choice_has_its_seeds_and_whether_the_aim_was_met():
    from zslib.analysis.verdict import POWER_AIM, seeds_words

    met = seeds_words(10, 3, 18.0, 0.004)
    assert met.startswith("10 validation seeds, raised from 3") and "about 18 s" in met and "is met" in met
    short = seeds_words(10, 3, 30.0, 2 * POWER_AIM)
    assert "short of the 0.5-point aim" in short and "cap of 10" in short and "difference of 1.0 points" in short
    dear = seeds_words(3, 3, 240.0, 0.009)
    assert dear == ("3 validation seeds (a validation run trains in about 4 min, so no more were trained); 80% power "
                    "at a true difference of 0.9 points")
    assert "although" in seeds_words(3, 3, 27.0, 0.024)  # cheap runs left at the default are said to be cheap
    assert "although a validation run trains in about 27 s: the page budget;" in seeds_words(
        3, 3, 27.0, 0.024, kept_by="the page budget")  # and what kept them there, where a budget did


def test_every_recorded_choice_states_its_seeds_and_the_cheap_ones_have_more(comparisons):
    from zslib.analysis.verdict import CHEAP_RUN_SECONDS, PAGE_BUDGET_REASON

    note = cmp.seeds_note(list(comparisons.values()))
    for regime, comp in comparisons.items():
        for r in comp.rows:
            if r.choice is None or not r.val_runs:
                continue
            assert f"**{r.method}, {regime}**: {r.val_seeds} validation seeds" in note
            if regime == "quick" and r.val_seeds == len(VALIDATION_SEEDS):  # the quick regime says what kept it at three
                line = next(x for x in note.splitlines() if f"**{r.method}, {regime}**" in x)
                assert PAGE_BUDGET_REASON in line or "so no more were trained" in line, line
            seconds = np.median([getattr(x, "run", x).provenance["train_seconds"] for runs in r.val_runs.values()
                                 for x in runs])
            if regime.startswith("real") and seconds < CHEAP_RUN_SECONDS:  # a recorded choice of cheap runs
                assert r.val_seeds > len(VALIDATION_SEEDS), (r.method, regime, seconds)
