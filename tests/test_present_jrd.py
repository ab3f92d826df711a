"""zslib.present.jrd: the JRD chapters' generated numbers equal what the recorded files say.

Each check reads the committed result and analysis files (``results/recorded/``) by config hash, with ``json`` and
``numpy`` only, recomputes a stated number independently (a paired difference, a Student-t interval, a mean) and
compares it with what the presentation's functions generate. The JRD folder under ``zslib/methods`` keeps its
math, method and recipes, each file short, and no presentation.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rule_oracle import expected_choice
from zslib.engine.config import config_hash
from zslib.engine.store import recorded_dir
from zslib.methods.jrd import recipes
from zslib.methods.jrd.method import jrd_method
from zslib.present import Section, Sections
from zslib.present import jrd as R
from zslib.present.jrd.cells import PAPER
from zslib.engine.choice import VALIDATION_SEEDS


def _file(config, seed: int, analysis: str | None = None) -> dict:
    """The recorded JSON of ``config`` at ``seed`` (or of its analysis record), found by its config hash."""
    h = config_hash(config.replace(seed=seed))
    folder = recorded_dir() / ("analyses" if analysis else "")
    found = sorted(folder.glob(f"*-{h}-{analysis}.json" if analysis else f"*-{h}.json"))
    assert len(found) == 1, f"expected one recorded file for hash {h}, found {found}"
    return json.loads(found[0].read_text())


def _r1(config, seed: int, split: str = "unseen") -> float:
    return _file(config, seed)["metrics"][split]["R@1"]


def _t_interval(values) -> tuple[float, float, float]:
    v = np.asarray(values, float)
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return v.mean(), v.mean() - half, v.mean() + half


def _signed(triple, digits: int, scale: float = 100.0) -> str:
    m, lo, hi = (scale * x for x in triple)
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


@pytest.fixture(scope="module")
def real():
    got = R.JRDStudy.cached(train=False)  # the reading the key findings share
    if got.main is None:
        pytest.skip("the real-profile JRD runs are not recorded in this checkout")
    return got


@pytest.fixture(scope="module")
def box(real):
    return R.key_findings()


def test_the_key_finding_is_the_paired_difference_of_the_recorded_runs(real, box):
    seeds = (0, 1, 2, 3, 4)
    grid = recipes.real_configs()
    diffs = [_r1(grid["JRD"], s) - _r1(grid["AM-Softmax"], s) for s in seeds]
    floor = _r1(recipes.floor_grid()["pretrained"], 0)
    assert f"{_signed(_t_interval(diffs), 1)} points over 5 seeds paired" in box.sentences[0]
    assert f"untrained features' {100 * floor:.1f} %" in box.sentences[1]
    assert real.headline.seeds == seeds


def test_the_validation_choice_is_the_alpha_with_the_higher_recorded_mean(real):
    means = {a: np.mean([_r1(recipes.validation_base().replace(**jrd_method("cub200", alpha=a)), s, "val")
                         for s in range(5)]) for a in recipes.VALIDATION_ALPHAS}
    _, chosen, _ = real.alpha_choice
    assert chosen == max(means, key=means.get)


def test_the_mixture_grid_holds_every_recorded_cell_and_seed(real, box):
    assert set(real.mixture_grid) == {(k, kk) for k in recipes.GRID_SIZES for kk in recipes.GRID_SIZES}
    for cell, runs in real.mixture_grid.items():
        assert tuple(r.config.seed for r in runs) == recipes.GRID_SEEDS, cell
        for r in runs:  # the run shown is the recorded file of that cell and seed
            assert r.metric("R@1") == _r1(recipes.mixture_config(cell), r.config.seed)
    # and the count of cells clearly above (1, 1) in the findings is the one the paired verdicts give
    n_up = sum(p.verdict == "up" for p in real.grid_pairs.values())
    assert any(f"in {n_up} of the 8 other cells" in s for s in box.sentences)


def test_the_sweep_table_pairs_each_weight_with_the_same_seeds_of_am_softmax(real):
    base = recipes.real_configs()["AM-Softmax"]
    for reg, a in [("jrs", 0.2), ("jmmd", 2.0)]:
        config = recipes.real_base().replace(**jrd_method("cub200", alpha=a, regularizer=reg))
        diffs = [_r1(config, s) - _r1(base, s) for s in recipes.SWEEP_SEEDS]
        p = real.sweep_pairs[reg, a]
        assert p.seeds == recipes.SWEEP_SEEDS
        assert np.allclose(p.diff[:3], _t_interval(diffs), atol=1e-12)


def test_table_3_rows_and_the_lambda_verdict_are_the_recorded_analyses(real):
    lam = {arm: [_file(config, s, "bound_terms")["values"]["lambda"] for s in recipes.BOUND_SEEDS]
           for arm, config in recipes.bound_grid().items()}
    assert [row["lam"] for row in real.bound["JRD"]] == lam["JRD"]
    assert [row["seed"] for row in real.bound["JMMD"]] == list(recipes.BOUND_SEEDS)
    expected = _signed(_t_interval(np.subtract(lam["JRD"], lam["JMMD"])), 4, 1.0)
    sentences = R.found_experiments(real).sentences
    assert any(f"lambda vs JMMD {expected}" in s for s in sentences)


def test_paired_values_match_seed_by_seed_and_refuse_other_seeds():
    bound = {"A": [dict(seed=s, lam=v) for s, v in [(2, 0.30), (0, 0.10), (1, 0.20)]],
             "B": [dict(seed=s, lam=v) for s, v in [(0, 0.15), (1, 0.26), (2, 0.37)]]}
    diff, word = R.paired_values(bound, "A", "B", "lam")  # seed by seed: 0.05, 0.06, 0.07 whatever the order
    assert np.allclose(diff[:3], _t_interval([0.05, 0.06, 0.07])) and word == "up"
    bound["B"][0]["seed"] = 5
    with pytest.raises(AssertionError):
        R.paired_values(bound, "A", "B", "lam")


def test_the_lambda_scale_readings_come_from_the_papers_table_3():
    from zslib.reported import reported_value

    rows = [dict(seed=0, lam=0.5, lam_sum=1.0, seen_err=0.2, unseen_err=0.8, r1=0.21, d_H=0.4)]
    s = R.lambda_scale({"JRD": rows})
    for name, row in (("JMMD", "JMMD (alpha 0.1)"), ("JRD", "JRD (alpha 1)")):
        lam = reported_value("3", row, "lambda", paper=PAPER)
        unseen = 1 - reported_value("3", row, "Recall@1", paper=PAPER)
        assert s["sum_reading"][name] == round(lam - unseen, 3) < 0
        assert s["mean_reading"][name] == round(2 * lam - unseen, 3) > 0
    assert s["premise_holds"] and abs(s["gap"].iloc[0] - 0.01) < 1e-12


def test_the_alpha_choice_offers_jrd_switched_off_and_applies_the_one_rule():
    """alpha = 0 (AM-Softmax alone) is a candidate of the alpha choice; the rule's outcome equals a recomputation from
    the recorded JSON: the best mean validation R@1 leads and wins only if its paired interval over alpha = 0 lies
    above zero."""
    real = R.JRDStudy()
    rule = real.alpha_rule
    values = {a: np.array([_r1(recipes.jrd(recipes.validation_base(), alpha=a), s, "val") for s in VALIDATION_SEEDS])
              for a in (0.0, *recipes.VALIDATION_ALPHAS)}
    expected = expected_choice(values, 0.0)
    expected = "off" if expected == 0.0 else expected
    assert rule.chosen == expected and set(rule.means) == {"off", *recipes.VALIDATION_ALPHAS}
    assert ("JRD is not chosen" in R.rule_words(rule)) == (expected == "off")


def test_each_kernels_weight_choice_offers_jrd_switched_off_and_the_page_says_what_the_rule_chose(real):
    """Per kernel of Table 4, alpha = 0 (AM-Softmax alone on the same validation split and seeds) is a candidate beside
    the weights searched; the rule recomputed from the recorded JSON by the independent oracle is the one the page
    states, with each leader's mean validation R@1, and the rows the rule keeps off are labelled ablations."""
    from zslib.methods.jrd.diversification import KERNELS

    rules, note, table = real.kernel_rules, R.kernel_rule_note(real), R.kernels_chosen_table(real)
    taken, kept = [], []
    for k in KERNELS:
        val = recipes.validation_base()
        values = {0.0: np.array([_r1(recipes.jrd(val, alpha=0.0), s, "val") for s in recipes.KERNEL_SEEDS])}
        values.update({a: np.array([_r1(recipes.jrd(val, alpha=a, kernel=k), s, "val") for s in recipes.KERNEL_SEEDS])
                       for a in recipes.KERNEL_ALPHAS})
        expected = expected_choice(values, 0.0)
        assert rules[k].chosen == ("off" if expected == 0.0 else expected), k
        assert set(rules[k].means) == {"off", *recipes.KERNEL_ALPHAS}
        leader = max(values, key=lambda a: float(np.mean(values[a])))
        said = "alpha = 0 (JRD off)" if leader == 0.0 else f"alpha = {leader:g}"
        line = next(s for s in note.splitlines() if s.startswith(f"- **{k}**: "))
        assert f"{said} had the best mean validation R@1 ({100 * np.mean(values[leader]):.2f})" in line, line
        assert line.endswith("is chosen.") == (expected != 0.0), line
        assert table.loc[k, "rule"] == ("JRD off: ablation row" if expected == 0.0 else f"chosen: alpha = {expected:g}")
        (kept if expected == 0.0 else taken).append(k if expected == 0.0 else f"{k} (alpha = {expected:g})")
    assert (f"The rule chooses a weight for: {', '.join(taken) or 'no kernel'}; it keeps JRD off for: "
            f"{', '.join(kept) or 'no kernel'}.") in note
    assert ("**ablations**" in note) == bool(kept)


def test_the_headline_section_states_the_recorded_paired_difference(real):
    """The headline section (a Section, displayed by the floor, nothing shown as a side effect) holds the table of
    the recorded runs and the validation sentence with alpha 4 minus alpha 1 recomputed from the JSON."""
    shown = R.headline_section(real)
    assert isinstance(shown, Sections) and all(isinstance(s, Section) for s in shown)
    table = shown[0].table
    seeds = range(5)
    grid = recipes.real_configs()
    diffs = [_r1(grid["JRD"], s) - _r1(grid["AM-Softmax"], s) for s in seeds]
    assert table.loc["JRD", "vs AM-Softmax (pts)"] == _signed(_t_interval(diffs), 1)
    val = recipes.validation_grid()
    gaps = [_r1(val[4.0], s, "val") - _r1(val[1.0], s, "val") for s in seeds]
    assert f"Alpha 4 minus alpha 1, paired by seed: {_signed(_t_interval(gaps), 1)} points" in shown.markdown()


def test_a_study_without_recorded_runs_shows_what_is_missing(tmp_path, monkeypatch):
    """With an empty results folder every grid is missing: each section says so and names the grid to train, the
    findings say nothing was recorded, and no exception reaches the page."""
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path))
    study = R.JRDStudy(train=False)
    text = R.headline_section(study).markdown()
    assert "runs of the headline grid are not all recorded" in text
    assert "*AM-Softmax and JRD: not shown, " in text and "ZS_PROFILE=real" in text
    for section in (R.variants_section, R.alpha_sweep_section, R.kernels_section, R.kernels_chosen_section,
                    R.mixtures_section, R.mixture_grid_section, R.real_bound_section, R.real_bound_5nn_section,
                    R.bound_variants_kernels_section, R.moved_5nn_section):
        shown = section(study)
        assert isinstance(shown, Section) and shown.table is None and "not all recorded" in shown.caption, section
    assert "the alpha sweep" in study.missing and study.sweep_pairs == {}
    assert any("are not recorded in this copy" in s for s in R.found_experiments(study).sentences)


def test_the_jrd_folder_holds_short_files_and_no_presentation():
    """Every file under zslib/methods/jrd/ is at most 700 lines, and no ``reports`` module remains there: the
    chapters' presentation lives in zslib/present/jrd/ (each file under 700 lines too)."""
    root = Path(__file__).resolve().parents[1] / "zslib"
    methods = sorted((root / "methods" / "jrd").glob("*.py"))
    assert methods and not (root / "methods" / "jrd" / "reports.py").exists()
    for path in methods + sorted((root / "present" / "jrd").glob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 700, f"{path.relative_to(root)} has {lines} lines"
    assert not any("reports" in p.stem for p in methods)
