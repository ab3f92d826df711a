"""zslib.present.zsml: the ZSML chapters' tables and findings say what the runs say.

The oracles are computed here from the runs' own numbers (the JSON files of the recorded runs, or made-up runs with
known metrics) with numpy and scipy, not with the presentation modules' helpers.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from zslib.engine.config import Config
from zslib.engine.store import Result
from zslib.engine.train.history import History
from zslib.methods.zsml import recipes as R
from zslib.present.zsml import numbers as N
from zslib.present.zsml import outcomes as O
from zslib.present.zsml import sentences as S
from zslib.present.zsml.experiments import real_experiments
from zslib.present.zsml.quick import paper_section, quick_comparison
from zslib.present.zsml.real import not_recorded, real_comparison
from zslib.present.zsml.study import ZSMLStudy
from zslib.engine.choice import TEST_SEEDS, VALIDATION_FRACTION, VALIDATION_SEEDS

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "results" / "recorded"
METHODS = REPO / "zslib" / "methods" / "zsml"


def _t_interval(values) -> tuple[float, float, float]:
    v = np.asarray(values, float)
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return v.mean(), v.mean() - half, v.mean() + half


def _pct(mean, low, high, signed=False) -> str:
    f = "+.1f" if signed else ".1f"
    return f"{100 * mean:{f}} [{100 * low:{f}}, {100 * high:{f}}]"


def _verdict(low, high) -> str:
    return "up" if low > 0 else "down" if high < 0 else "no clear effect"


def _unseen(run) -> dict:
    """The unseen metrics of a stored run, read from its JSON file."""
    return json.loads(Path(run.path).read_text())["metrics"]["unseen"]


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A results folder whose recorded/ is the repository's: only committed runs are read."""
    if not any(RECORDED.glob("zsml-*.json")):
        pytest.skip("no recorded ZSML runs in this checkout")
    (tmp_path / "recorded").symlink_to(RECORDED, target_is_directory=True)
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path))
    return tmp_path


def _fake(name: str, seed: int, unseen: dict) -> Result:
    config = Config.from_profile("quick", method="zsml", seed=seed, name=name,
                                 method_params={"eval_per_class": 5, "relation": "linear" if "LR" in name else "kernels"})
    return Result(config, {"unseen": unseen}, History(), {"complete": True})


def test_quick_table_and_verdicts_are_the_runs_paired_by_seed():
    rng = np.random.default_rng(0)
    euclid = {s: {m: float(rng.uniform(0.3, 0.7)) for m in N.METRICS} for s in (0, 1, 2)}
    # ZSML: ACC clearly 5 points below the Euclidean distance on every seed, the rest noise around it
    mr = {s: {**{f"input {m}": v for m, v in euclid[s].items()},
              **{m: v + (-0.05 - 0.001 * s if m == "ACC" else rng.normal(0, 0.02)) for m, v in euclid[s].items()}}
          for s in (0, 1, 2)}
    lr = {s: {m: float(rng.uniform(0.3, 0.7)) for m in N.METRICS} for s in (0, 1, 2)}
    runs = {R.MR: [_fake("mr", s, mr[s]) for s in (2, 0, 1)],  # out of seed order: pairing must be by seed
            R.LR: [_fake("lr", s, lr[s]) for s in (0, 1, 2)]}
    q = quick_comparison(runs)
    assert q.table.table.loc["Triplet (Euclidean)", "ACC"] == _pct(*_t_interval([euclid[s]["ACC"] for s in (0, 1, 2)]))
    for m in ("ACC", "NMI", "R@1"):
        d = _t_interval([mr[s][m] - euclid[s][m] for s in (0, 1, 2)])
        assert q.verdicts[R.MR, "Euclidean", m] == _verdict(d[1], d[2])
        assert q.verdict_table.table.loc[(R.MR, m), "vs Euclidean (pts)"] == _pct(*d, signed=True)
        d2 = _t_interval([lr[s][m] - mr[s][m] for s in (0, 1, 2)])
        assert q.verdicts[R.LR, R.MR, m] == _verdict(d2[1], d2[2])
    assert q.verdicts[R.MR, "Euclidean", "ACC"] == "down"
    assert "lowered clustering accuracy" in S.quick_findings(q)[0]


def test_seed_difference_refuses_different_seeds():
    with pytest.raises(ValueError, match="different seeds"):
        N.seed_difference({0: 0.1, 1: 0.2}, {0: 0.1, 2: 0.2})


def test_real_table_lists_every_recorded_seed_and_the_finding_is_the_paired_difference(recorded):
    real = real_comparison(ZSMLStudy(train=False))
    assert real is not None
    seeds = sorted(r.config.seed for r in real.every)
    assert seeds == list(TEST_SEEDS) == sorted(r.config.seed for r in real.runs[R.HEAD])
    assert seeds == sorted(r.config.seed for r in real.zsml)
    for r in real.every:  # every seed with its training time from its own file
        seconds = json.loads(Path(r.path).read_text())["provenance"]["train_seconds"]
        assert f"seed {r.config.seed} {seconds:.0f} s" in real.table.caption
    # the headline: ZSML minus the cosine of its input features, every unseen image ranked, paired by seed
    diffs = {r.config.seed: _unseen(r)["R@1"] - _unseen(r)["input R@1"] for r in real.every}
    d = _t_interval([diffs[s] for s in seeds])
    assert S.real_findings(real)[0].split("(")[2].startswith(_pct(*d, signed=True) + " pts")
    first = S.key_findings().sentences[0]
    assert f": {_pct(*d, signed=True)} points over {len(seeds)} seeds paired." in first
    assert ("lowered" if d[2] < 0 else "raised" if d[1] > 0 else "did not clearly change") in first
    # the earlier protocol's reading, and whether the two agree
    old = _t_interval([_unseen(r)["R@1"] - _unseen(r)["input R@1"] for r in real.zsml])
    second = S.real_findings(real)[1]
    assert f"reads {_pct(*old, signed=True)} points" in second
    side = lambda lo, hi: "up" if lo > 0 else "down" if hi < 0 else "flat"  # noqa: E731
    assert ("it agrees" in second) == (side(*d[1:]) == side(*old[1:]))
    # the table's comparator rows are the runs' own 'input' numbers
    table = real.table.table
    cos_row = next(i for i in table.index if i.startswith("cosine of ZSML's input features (every unseen image"))
    assert table.loc[cos_row, "R@1 %"] == _pct(*_t_interval([_unseen(r)["input R@1"] for r in real.every]))
    assert table.loc["Euclidean, raw features (4 per class, sample only)", "R@1 %"] == _pct(
        *_t_interval([_unseen(r)["input R@1"] for r in real.zsml]))


def test_every_image_queries_estimate_the_floor_on_every_image(recorded):
    """The cosine of ZSML's input features, its queries ranked against every unseen image, estimates the untrained
    features' every-image Recall@1 (the same features and similarity; only the queries are sampled): the mean over
    seeds lands within a few points of the floor's file, while the 4-per-class sample's raw Euclidean does not."""
    real = real_comparison(ZSMLStudy(train=False))
    floor = json.loads(Path(real.floor.path).read_text())["metrics"]["unseen"]["R@1"]
    every = np.mean([_unseen(r)["input R@1"] for r in real.every])
    sample = np.mean([_unseen(r)["input R@1"] for r in real.zsml])
    assert abs(every - floor) < 0.03
    assert floor - sample > 0.1
    for r in real.every:  # queries: 10 per class of the 51 unseen classes, every one of them scored
        assert r.config.method_params["gallery_splits"] == ["unseen"]
        assert r.config.method_params["input_metric"] == "normalized"


def test_experiments_choose_and_report_what_the_recorded_runs_say(recorded):
    study = ZSMLStudy(train=False)
    ex = real_experiments(real_comparison(study), study)
    # alpha: the highest mean validation Recall@1, read from the files
    val = {a: [json.loads(Path(r.path).read_text())["metrics"]["val"]["R@1"] for r in rs] for a, rs in ex.val_runs.items()}
    assert ex.chosen_alpha == max(val, key=lambda a: np.mean(val[a]))
    assert sorted(r.config.seed for r in ex.val_runs[0.3]) == list(VALIDATION_SEEDS)
    found = S.experiment_findings(ex)
    by_seed = {a: {r.config.seed: json.loads(Path(r.path).read_text())["metrics"]["val"]["R@1"] for r in rs}
               for a, rs in ex.val_runs.items()}
    for a in R.ALPHAS:
        if a != 0.3:
            d = _t_interval([by_seed[a][s] - by_seed[0.3][s] for s in VALIDATION_SEEDS])
            assert f"alpha {a:g} {_pct(*d, signed=True)} R@1 pts ({_verdict(d[1], d[2])})" in found[0]
    # the best-mean alpha's rows are an ablation exactly when the rule (recomputed here) keeps ZSML off
    from rule_oracle import expected_choice

    off = [json.loads(Path(r.path).read_text())["metrics"]["val"]["input R@1"]
           for r in sorted(ex.val_runs[ex.chosen_alpha], key=lambda r: r.config.seed)]
    cands = {"off": off, **{a: [by_seed[a][s] for s in VALIDATION_SEEDS] for a in R.ALPHAS}}
    kept_off = expected_choice(cands, "off") == "off"
    assert ("an ablation: with ZSML off a candidate, the rule keeps it off" in found[0]) == kept_off
    if ex.chosen_alpha_test is not None and ex.chosen_alpha != 0.3:
        label = next(i for i in ex.chosen_alpha_test.table.index if i.startswith(f"ZSML, alpha {ex.chosen_alpha:g}"))
        assert ("ablation" in label) == kept_off and ("(chosen)" in label) == (not kept_off)
    # Table 6 analogue: Lifted + ZSML against its own frozen embedding's Euclidean distance, seed by seed
    if ex.arm_runs is not None:
        lifted = ex.arm_runs["Lifted + ZSML"]
        d = _t_interval([_unseen(r)["R@1"] - _unseen(r)["input R@1"] for r in sorted(lifted, key=lambda r: r.config.seed)])
        sentence = next(s for s in found if s.startswith("Table 6 analogue"))
        assert f"({_pct(*d, signed=True)} pts)" in sentence
        assert sorted(r.config.seed for r in lifted) == list(TEST_SEEDS)
    # every pair: the sentence's numbers are the analysis record's
    if ex.every is not None:
        sentence = next(s for s in found if s.startswith("Scoring every ordered pair"))
        assert re.search(rf"Recall@1 is {100 * ex.every['R@1']:.1f}% against {100 * ex.every['input R@1']:.1f}%", sentence)


def test_the_alpha_choice_offers_zsml_switched_off_and_applies_the_one_rule():
    """The Euclidean distance of the input features (ZSML off) is a candidate of the alpha choice; the note's
    verdict equals a recomputation from the runs' own numbers with scipy's t quantile."""
    runs = ZSMLStudy(train=False).alpha_choice()
    if runs is None:
        pytest.skip("the alpha choice's runs are not recorded in this copy")
    values = {a: np.array([r.metrics["val"]["R@1"] for r in rs]) for a, rs in runs.items()}
    leader = max(values, key=lambda a: values[a].mean())
    off = np.array([r.metrics["val"]["input R@1"] for r in runs[leader]])
    d = values[leader] - off
    clear = d.mean() - stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)) > 0
    kept_off = off.mean() >= values[leader].mean() or not clear
    assert ("ZSML is not chosen" in O.rule_note(runs)) == kept_off


def _stored_val(config, seeds) -> dict:
    """{seed: the stored validation metrics} of ``config``, read from the recorded JSON file named by its hash."""
    from zslib.engine.config import config_hash

    out = {}
    for seed in seeds:
        (path,) = RECORDED.glob(f"*-{config_hash(config.replace(seed=seed))}.json")
        stored = json.loads(path.read_text())
        assert stored["config"]["seed"] == seed and stored["config"]["validation_fraction"] == VALIDATION_FRACTION
        out[seed] = stored["metrics"]["val"]
    return out


def test_the_share_choice_offers_zsml_switched_off_and_says_what_the_rule_chose(recorded):
    """The share of positive pairs is put to the one rule with ZSML switched off (its input features on the same
    validation images and seeds) as a candidate: the rule is recomputed with the independent oracle from the recorded
    JSON files, and the chapter's generated note (in the table's notes and in the findings) says that outcome."""
    from rule_oracle import expected_choice

    study = ZSMLStudy(train=False)
    ex = real_experiments(real_comparison(study), study)
    if ex.share_runs is None:
        pytest.skip("the share choice's runs are not recorded in this copy")
    val = R.validation_config()
    stored = {f: _stored_val(R.real_zsml(val, alpha=ex.pos_alpha, positive_fraction=f), VALIDATION_SEEDS)
              for f in R.POS_FRACTIONS}
    values = {f: [stored[f][s]["R@1"] for s in VALIDATION_SEEDS] for f in R.POS_FRACTIONS}
    best = max(values, key=lambda f: np.mean(values[f]))  # the first maximum: the unset share wins ties
    off = [stored[best][s]["input R@1"] for s in VALIDATION_SEEDS]
    for f in R.POS_FRACTIONS:  # the same input features on the same images in every share's runs of a seed
        assert [stored[f][s]["input R@1"] for s in VALIDATION_SEEDS] == off
    candidates = {"off": off, **values}
    expected = expected_choice(candidates, "off")
    leader = max(candidates, key=lambda k: np.mean(candidates[k]))

    assert ex.best_pf == best and ex.share_rule.chosen == expected and "off" in ex.share_rule.means
    note = O.share_rule_note(ex)
    assert note in ex.share_choice.notes
    assert note in next(s for s in S.experiment_findings(ex) if s.startswith("Positive pairs in P"))
    assert f"had the best mean validation R@1 ({100 * np.mean(candidates[leader]):.2f})" in note
    off_row = ex.share_choice.table.loc["off (Euclidean, ZSML off)", "val R@1 %"]
    assert off_row.startswith(f"{100 * np.mean(off):.1f} [")
    if expected == "off":
        name = "the unset (uniform) share" if best is None else f"positive_fraction = {best:g}"
        assert "no share is chosen: ZSML stays off" in note and f"{name}, the best share by mean" in note
        assert "only as an ablation" in note
        if ex.chosen_share_test is not None and ex.chosen_share_test.table is not None:
            assert any(row.endswith("(ablation)") for row in ex.chosen_share_test.table.index)
            assert not any("(chosen)" in row for row in ex.chosen_share_test.table.index)
    else:
        assert f"So **positive_fraction = {expected:g}** is the chosen share." in note and "ablation" not in note


def _val_run(seed: int, fraction, val: float, off: float) -> Result:
    config = Config.from_profile("quick", method="zsml", seed=seed, name=f"pf{fraction}-s{seed}",
                                 method_params={"positive_fraction": fraction})
    return Result(config, {"val": {"R@1": val, "input R@1": off}}, History(), {"complete": True})


@pytest.mark.parametrize("gain, chosen", [(0.10, 0.5), (0.0, "off")])
def test_the_share_note_names_a_share_only_when_it_clearly_beats_zsml_off(gain, chosen):
    """Made-up validation runs: a share 10 points above the input features on every seed is chosen; a share no
    better than them leaves ZSML off, and the note then names the best share an ablation."""
    from rule_oracle import expected_choice

    off = {0: 0.60, 1: 0.70, 2: 0.65}
    shift = {None: -0.05, 0.5: gain}
    noise = {0: 0.004, 1: -0.003, 2: 0.001}
    ex = O.Experiments(None)
    ex.share_runs = {f: [_val_run(s, f, off[s] + d + noise[s], off[s]) for s in off] for f, d in shift.items()}
    ex.best_pf = 0.5
    ex.share_rule = O.off_rule(ex.share_runs)
    values = {"off": list(off.values()), **{f: [r.metric("R@1", "val") for r in rs] for f, rs in ex.share_runs.items()}}
    assert expected_choice(values, "off") == chosen == ex.share_rule.chosen
    note = O.share_rule_note(ex)
    if chosen == "off":
        assert ex.share_is_ablation
        assert "positive_fraction = 0.5, the best share by mean, is shown only as an ablation" in note
    else:
        assert not ex.share_is_ablation and note.endswith("So **positive_fraction = 0.5** is the chosen share.")


def test_the_paper_folder_holds_no_reports_module_and_no_long_file():
    """The presentation lives in zslib.present.zsml: no ``reports`` module is left in the paper's folder, and no
    file there exceeds 700 lines."""
    assert not (METHODS / "reports.py").exists() and not (METHODS / "reports").exists()
    long = {p.name: n for p in METHODS.glob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long
    for chapter in ("zsml", "zsml_experiments"):
        assert "zsml.reports" not in (REPO / "book" / f"{chapter}.ipynb").read_text()


def test_every_grid_of_the_study_is_recorded_under_its_recipe(recorded):
    """Every grid the two pages read, configured by the recipes, names recorded runs (the recipes keep the config
    hashes of the recorded runs); a study without them names what is missing instead of training."""
    study = ZSMLStudy(train=False)
    ex = real_experiments(real_comparison(study), study)
    assert study.missing == {}, study.missing
    assert not_recorded(study).notes == [] and not_recorded(study).markdown() == ""
    assert ex.zf is not None and ex.arm_runs is not None and ex.xfer is not None
    (recorded / "recorded").unlink()
    (recorded / "recorded").mkdir()
    empty = ZSMLStudy(train=False)
    assert real_comparison(empty) is None
    assert set(empty.missing) == {"the ZSML comparison", "the pretrained features"}
    note = not_recorded(empty).markdown()
    assert note.count("not shown") == 2 and note.startswith("*the ZSML comparison: not shown, ")


def test_the_paper_section_holds_the_papers_printed_tables():
    s = paper_section("8", "7")
    assert s.paper == (("xu2019zsml", "8"), ("xu2019zsml", "7")) and s.table is None and s.markdown() == ""


def test_fig5_without_a_checkpoint_is_a_note_and_no_numbers():
    from zslib.present.zsml.quick import fig5

    shown = fig5([_fake("mr", 1, {}), _fake("mr", 0, {})])
    assert shown.numbers is None and shown.section.figure is None
    assert shown.section.markdown().startswith("*The checkpoint of the seed-0 run is not here")
