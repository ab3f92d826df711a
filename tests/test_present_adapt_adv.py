"""zslib.present.adapt_adv: the numbers the Adapt-Adv pages state are the numbers of the runs.

Every check recomputes what a report says from the runs themselves (the recorded result files of the checkout, or
runs made up here), with its own arithmetic, and compares: the paired differences in the sentences, the seeds and
training times in the tables, the stopping step chosen on validation classes, the directions set beside the paper's.
"""
from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from rule_oracle import expected_choice
from scipy import stats

from zslib.engine.config import Config, config_hash
from zslib.engine.data.datasets import Flowers102
from zslib.engine.store import Result, recorded_runs
from zslib.engine.train.history import History
from zslib.methods.adapt_adv import recipes
from zslib.methods.adapt_adv.recipes import BASE, GDFL, METHOD
from zslib.present import adapt_adv as P
from zslib.present.adapt_adv import sentences as S
from zslib.present.adapt_adv.study import STOPPING, AdaptAdvStudy
from zslib.reported import reported_value

REPO = Path(__file__).resolve().parents[1]


def _t_interval(values) -> tuple[float, float, float]:
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return v.mean(), v.mean() - half, v.mean() + half


def _points(values) -> str:
    """A paired difference (fractions) as the pages write it: signed points with one decimal and its 95% interval."""
    m, lo, hi = (100 * x for x in _t_interval(values))
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"


@pytest.fixture(scope="module")
def study():
    """The real-profile study read from the checkout's recorded runs (nothing is trained)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZS_RESULTS", str(REPO / "results"))
        got = AdaptAdvStudy.cached(train=False)
        yield got


@pytest.fixture(scope="module")
def recorded():
    """hash -> the recorded runs of the checkout with that config hash (the seed is part of the hash)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZS_RESULTS", str(REPO / "results"))
        return {config_hash(r.config): r for r in recorded_runs()}


def _seeds_of(config, recorded):
    return sorted(s for s in range(10) if config_hash(config.replace(seed=s)) in recorded)


def _r1(config, seed, recorded):
    return recorded[config_hash(config.replace(seed=seed))].metric("R@1")


def test_every_row_and_choice_is_recorded(study):
    assert not study.missing, study.missing
    assert study.stopping is not None and study.lambda0 is not None and study.table5 is not None


def test_the_real_table_counts_every_recorded_seed(study, recorded):
    table = P.real_table(study)
    for name, config in study.configs.items():
        seeds = _seeds_of(config, recorded)
        assert seeds, name
        assert table.loc[name, "seeds"] == len(seeds) == len(study.runs[name]), name


def test_pair_sentences_state_the_paired_difference_of_the_recorded_runs(study, recorded):
    sentences = P.real_pair_sentences(study)
    for a, b in ((BASE, GDFL), (BASE, METHOD), (GDFL, METHOD)):
        seeds = _seeds_of(study.configs[a], recorded)
        diffs = [_r1(study.configs[b], s, recorded) - _r1(study.configs[a], s, recorded) for s in seeds]
        sentence = next(s for s in sentences if f"{b} against {a}:" in s)
        assert _points(diffs) in sentence, sentence
        assert f"over {len(seeds)} paired seeds" in sentence


def test_the_provenance_table_gives_each_rows_training_times(study):
    _, table = P.tables.provenance_table(study.table5.runs)
    for name, rs in study.table5.runs.items():
        seconds = [r.provenance["train_seconds"] for r in rs]
        assert table.loc[name, "training s per run"] == f"{min(seconds):.0f} to {max(seconds):.0f}"
        if "steps" in table:  # the rows differ in length: Adapt-Adv stops at the chosen step
            assert table.loc[name, "steps"] == rs[0].config.iterations


def _val_curves(study, recorded):
    val = study.configs[METHOD].replace(validation_fraction=0.3)
    return [dict(zip(*recorded[config_hash(val.replace(seed=s))].history.metric_curve("val", "R@1"))) for s in (0, 1, 2)]


def test_the_stopping_step_goes_through_the_rule_with_no_training_as_off(study, recorded):
    """Every evaluated step of the recorded validation curves is a candidate and step 0 (no training) is "off"; the
    rule's outcome equals the oracle's, and the length read is the rule's choice or, when it keeps step 0, the best
    trained step (then labelled an ablation)."""
    curves = _val_curves(study, recorded)
    assert all(0 in c for c in curves)
    values = {step: np.array([c[step] for c in curves]) for step in curves[0]}
    expected = expected_choice(values, 0)
    assert study.stopping.chosen == study.stopping.rule.chosen == expected
    assert set(study.stopping.rule.means) == set(values) and study.stopping.rule.off == 0
    best = max((s for s in values if s > 0), key=lambda s: values[s].mean())
    assert study.stopping.length == (expected if expected != 0 else best)
    assert study.stopping.ablation == (expected == 0)
    rule = P.stopping_rule_sentence(study)
    assert f"step {study.stopping.rule.leader}" in rule or study.stopping.rule.leader == 0
    assert ("so the rule keeps step 0" in rule or "stays off" in rule) == (expected == 0)
    assert ("are an ablation" in rule) == (expected == 0)
    text = P.stopping_section(study).markdown()
    assert rule in text and P.stopping_sentence(study) in text
    assert ("is an ablation" in P.stopping_sentence(study)) == (expected == 0)


def test_the_runs_stopped_at_the_length_read_are_compared_with_the_base(study, recorded):
    stopped = study.configs[METHOD].replace(iterations=study.stopping.length)
    seeds = _seeds_of(stopped, recorded)
    diffs = [_r1(stopped, s, recorded) - _r1(study.configs[BASE], s, recorded) for s in seeds]
    assert _points(diffs) in P.stopping_sentence(study)
    key = P.key_findings().sentences[3]
    assert _points(diffs) in key and ("an ablation" in key) == study.stopping.ablation


def _val_r1(config, recorded):
    val = config.replace(validation_fraction=0.3)
    return np.array([recorded[config_hash(val.replace(seed=s))].metric("R@1", "val") for s in (0, 1, 2)])


def test_the_table5_choices_offer_off_and_apply_the_one_rule(study, recorded):
    """The proxies' rate (off: no rate of their own) and each loss's Energy weight (off: lambda1 = 0, the loss's
    base), recomputed with the oracle from the recorded validation runs; the sentences and the table's labels follow."""
    t5 = study.table5
    base = recipes.real_configs()[BASE]
    pnca = base.replace(loss="proxy_nca", loss_params={})
    values = {"off": _val_r1(pnca, recorded), **{lr: _val_r1(pnca.replace(objective_lr=lr), recorded)
                                                 for lr in recipes.PROXY_LRS}}
    rate = expected_choice(values, "off")
    choice, _ = t5.choices["Proxy-NCA proxies' learning rate"]
    assert choice.chosen == rate and set(choice.means) == set(values)
    shown = rate if rate != "off" else max(recipes.PROXY_LRS, key=lambda k: values[k].mean())
    assert t5.loss_bases["Proxy-NCA"].objective_lr == shown
    sentences = P.choice_sentences(study)
    table = P.table5_table(study)
    for loss, (lambdas, scale) in recipes.EC_CHOICES.items():
        loss_base = t5.loss_bases[loss]
        grid = {v: loss_base.replace(method="cml", method_params={"lambda1": v, "lambda2": 0.0, "scale": scale})
                for v in lambdas}
        values = {"off": _val_r1(loss_base, recorded), **{v: _val_r1(c, recorded) for v, c in grid.items()}}
        expected = expected_choice(values, "off")
        what = f"{loss} Energy lambda1 ({scale} scale)"
        choice, _ = t5.choices[what]
        assert choice.chosen == expected
        lead = expected if expected != "off" else max(lambdas, key=lambda v: values[v].mean())
        assert t5.grid[f"{loss} / Energy"] == grid[lead]
        sentence = next(s for s in sentences if s.startswith(what))
        assert f"lambda1 = 0 (the {loss} base) {100 * values['off'].mean():.1f}" in sentence
        assert ("are an ablation" in sentence) == (expected == "off")
        row = f"{loss} / Energy"
        assert (table.loc[row, "on validation classes"] == "ablation") == (expected == "off" or rate == "off"
                                                                           and loss == "Proxy-NCA")
        ablated = next(s for s in P.table5_sentences(study) if s.startswith("Energy") and f" on {loss}:" in s)
        assert ("an ablation" in ablated) == (row in t5.ablations)
    rate_sentence = next(s for s in sentences if s.startswith("Proxy-NCA proxies"))
    assert ("The Table 5 rows that use" in rate_sentence) == (rate == "off")
    assert P.table5_choices_section(study).markdown().count("\n- ") == len(t5.choices) - 1


def test_table5_sentences_set_each_direction_beside_the_papers(study, recorded):
    sentences = P.table5_sentences(study)
    for loss in ("Triplet", "Angular", "Proxy-NCA"):
        row, base = f"{loss} / Adapt-Adv", study.table5.grid[f"{loss} / Base"]
        seeds = _seeds_of(base, recorded)
        diffs = [_r1(study.table5.grid[row], s, recorded) - _r1(base, s, recorded) for s in seeds]
        paper = reported_value("5", row, "R@1", paper="alkaabi2022adaptadv") - \
            reported_value("5", f"{loss} / Base", "R@1", paper="alkaabi2022adaptadv")
        sentence = next(s for s in sentences if s.startswith("Adapt-Adv") and f" on {loss}:" in s)
        assert _points(diffs) in sentence
        m, lo, hi = _t_interval(diffs)
        if lo > 0 or hi < 0:
            same = (m > 0) == (paper > 0)
            assert ("the same direction as" if same else "the opposite direction to") in sentence
            assert f"{paper:+.2f}" in sentence


def test_the_late_fall_counts_the_runs_that_fell(study):
    fell = sum(r.history.metric_curve("unseen", "R@1")[1][-1] < r.history.metric_curve("unseen", "R@1")[1][-2]
               for r in study.runs[METHOD])
    assert re.match(rf"{fell} of {len(study.runs[METHOD])} recorded Adapt-Adv runs lost", S.late_sentence(study))


def _run(method_params: dict, seed: int, r1: float, nmi: float = 0.5) -> Result:
    config = Config.from_profile("quick", method="adapt_adv", method_params=method_params, seed=seed)
    return Result(config, {"unseen": {"R@1": r1, "NMI": nmi}, "seen": {"R@1": r1 + 0.1}}, History(), {})


def test_ablation_findings_and_table_on_made_up_runs():
    base = [_run({"use_gdfl": False, "use_adversary": False}, s, v) for s, v in enumerate((0.10, 0.20, 0.30))]
    gdfl = [_run({"use_adversary": False}, s, v) for s, v in ((2, 0.50), (0, 0.20), (1, 0.40))]  # listed out of order
    adv = [_run({"use_gdfl": False}, s, v) for s, v in enumerate((0.05, 0.10, 0.20))]
    runs = {"base": base, "+GDFL": gdfl, "+Adv": adv}
    found = P.ablation_findings(runs)
    assert _points([0.10, 0.20, 0.20]) in found[0] and "(up)" in found[0]  # paired by seed, not by position
    assert _points([-0.05, -0.10, -0.10]) in found[1] and "(down)" in found[1]
    assert _points([0.15, 0.30, 0.30]) in found[2]  # +GDFL minus +Adv
    table = P.ablation_table(runs)
    assert table.loc["+GDFL", "vs base (pts)"] == _points([0.10, 0.20, 0.20])
    assert table.loc["base", "verdict"] == "" and table.loc["+Adv", "verdict"] == "down"


def test_the_lambda0_choice_offers_the_adversary_off_and_applies_the_one_rule():
    """lambda0 = 0 (+GDFL, the adversary off) is a candidate of the lambda0 choice; the rule's outcome equals a
    recomputation with scipy from the per-seed validation values the chapter reads."""
    lc = AdaptAdvStudy.cached(train=False).lambda0
    if lc is None:
        pytest.skip("the lambda0 choice's runs are not recorded in this copy")
    seeds = sorted(lc.at[0.0])
    values = {lam: np.array([lc.at[lam][s] for s in seeds]) for lam in lc.at}
    expected = expected_choice(values, 0.0)
    expected = "off" if expected == 0.0 else expected
    assert lc.rule.chosen == expected and "off" in lc.rule.means
    text = " ".join(S.lambda0_sentences(AdaptAdvStudy.cached(train=False)))
    assert ("the adversary is not chosen" in text) == (expected == "off")


def test_the_paper_folder_has_no_reports_module_and_no_file_over_700_lines():
    folder = REPO / "zslib" / "methods" / "adapt_adv"
    assert not (folder / "reports.py").exists() and importlib.util.find_spec("zslib.methods.adapt_adv.reports") is None
    lines = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert lines and all(n <= 700 for n in lines.values()), lines


def test_a_study_with_nothing_recorded_names_what_is_missing_in_every_section(tmp_path, monkeypatch):
    """In a results folder with no runs, every real-profile section says what is not recorded (under the grid's name
    the study kept) and draws nothing; the Key findings box says so too."""
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path))
    study = AdaptAdvStudy.cached(train=False)
    assert study.runs == {} and study.pairs == {} and study.late == {}
    assert study.stopping is None and study.lambda0 is None and study.gradcam_grid() == {}
    assert {f"the row {name!r}" for name in study.configs} | {STOPPING} <= set(study.missing)
    pairs = P.real_pairs_section(study)
    for name in study.configs:
        assert f"Not recorded in this copy of the book: the row {name!r} ({study.missing[f'the row {name!r}']})" in \
            pairs.markdown()
    sections = [P.late_changes_section(study), P.stopping_section(study), P.lambda0_choice_section(study),
                P.table5_choices_section(study), P.photo_sections(study), P.real_gradcam_section(study, None)]
    for section in sections:
        parts = section if isinstance(section, list) else [section]
        assert all(s.figure is None and s.table is None for s in parts)
        assert "not recorded" in section.markdown() or "Not recorded" in section.markdown(), section.markdown()
    assert study.missing[STOPPING] in P.stopping_section(study).markdown()
    assert "not recorded" in P.key_findings().sentences[0]


def test_the_recorded_studys_figures_come_with_their_sentences(study):
    """Each real-profile figure section holds its figure and, below it, the sentences made from the same study."""
    late = P.late_changes_section(study)
    assert late.figure is not None
    assert late.notes == [S.bullets(S.late_change_sentences(study, Flowers102.official["train"][1]))]
    stop = P.stopping_section(study)
    assert stop[0].figure is not None and S.bullets(S.stopping_curve_sentences(study)) in stop[0].notes
    lam = P.lambda0_choice_section(study)
    assert lam.figure is not None and all(s in lam.markdown() for s in S.lambda0_sentences(study))
    for fig in (late.figure, stop[0].figure, lam.figure):
        plt.close(fig)
    shared, table = P.tables.provenance_table(study.runs)
    section = P.provenance_section(study.runs)
    assert section.caption == shared and section.table.equals(table)
