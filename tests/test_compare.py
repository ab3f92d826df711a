"""The one-protocol comparison (zslib.analysis.compare, book/compare.ipynb): every row comes from the same protocol,
"off" is offered to every method's choice, and the words follow the numbers."""
from __future__ import annotations

import math

import pytest

from zslib.analysis import compare as cmp
from zslib.engine.choice import OFF
from zslib.engine.config import Config


@pytest.fixture(scope="module", params=list(cmp.REGIMES))
def real(request):
    """Each regime's comparison, read from the recorded runs (the real regime's and the quick grid's)."""
    return cmp.compare(request.param)


def _configs(comparison):
    for row in comparison.rows:
        for r in [*row.runs, *row.baseline]:
            yield getattr(r, "config")


def test_every_recorded_row_of_a_regime_shares_the_protocol(real):
    configs = list(_configs(real))
    seeds = cmp.test_seeds(real.regime)
    assert len(configs) == 2 * len(seeds) * len(cmp.ENTRIES)  # every method tested on every seed, with its baseline
    cmp.check_protocol(configs)
    assert {c.seed for c in configs} == set(seeds)
    assert all(c.validation_fraction == 0 for c in configs)


def test_the_choice_offered_off_to_every_method_on_the_same_seeds(real):
    for row in real.rows:
        assert row.choice is not None, f"{row.method}: {row.missing}"
        assert OFF in row.choice.means and len(row.choice.means) >= 2
        assert row.choice.means[OFF].n == len(next(e for e in cmp.ENTRIES if e.name == row.method).choice_seeds(
            real.regime)) >= 3
        for key, m in row.choice.means.items():
            assert m.n == row.choice.means[OFF].n, (row.method, key)


def test_check_protocol_names_the_field_that_differs():
    a = Config.from_profile("real")
    cmp.check_protocol([a, a.replace(seed=3, method="cml", method_params={"lambda1": 0.2})])
    with pytest.raises(ValueError, match="iterations"):
        cmp.check_protocol([a, a.replace(iterations=150)])
    with pytest.raises(ValueError, match="embedding_dim"):
        cmp.check_protocol([a, a.replace(embedding_dim=128)])


@pytest.mark.parametrize("metric", cmp.METRICS)
def test_the_paired_changes_are_the_means_of_the_per_seed_differences(real, metric):
    for row in real.rows:
        if metric not in row.vs_baseline:
            # left out only where some run of the row was recorded without the metric
            assert any(metric not in r.metrics["unseen"] for r in row.runs) or any(
                getattr(r, "prefix", "") + metric not in getattr(r, "run", r).metrics["unseen"] for r in row.baseline)
            continue
        by_seed = {r.config.seed: r.metric(metric) for r in row.baseline}
        diffs = [r.metric(metric) - by_seed[r.config.seed] for r in row.runs]
        assert row.vs_baseline[metric].mean == pytest.approx(sum(diffs) / len(diffs))
        if metric in row.vs_floor and real.floor is not None:
            floor = real.floor.metric(metric)
            assert row.vs_floor[metric].mean == pytest.approx(sum(r.metric(metric) - floor for r in row.runs)
                                                              / len(row.runs))


def test_map_at_r_verdicts_are_compared_with_recall_in_words(real):
    from zslib.engine.stats import verdict

    text = cmp.metric_agreement([real])
    same = text.split("same verdict as R@1 for ")[1].split(";")[0] if "same verdict" in text else ""
    for row in real.rows:
        a, m = row.vs_baseline.get("R@1"), row.vs_baseline.get("MAP@R")
        if a is None or m is None:
            continue
        assert (row.method in same) == (verdict(a) == verdict(m)), (row.method, text)


def test_a_row_without_map_at_r_says_not_recorded_and_has_no_interval():
    from zslib.engine.choice import Choice

    class Run:
        def __init__(self, seed, r1):
            self.config, self.metrics = Config(seed=seed), {"unseen": {"R@1": r1, "NMI": 0.5}}

        def metric(self, name="R@1", split="unseen"):
            return self.metrics[split][name]

    runs, base = [Run(s, 0.5 + 0.01 * s) for s in range(3)], [Run(s, 0.4) for s in range(3)]
    row = cmp.Row("X", "quick", choice=None, runs=runs, baseline=base)
    row.vs_baseline = cmp._differences(base, runs)
    assert set(row.vs_baseline) == {"R@1", "NMI"}
    row.choice = Choice.__new__(Choice)
    row.chosen = "a"
    table = cmp.comparison_table([cmp.Comparison("quick", [row])])
    assert table.loc[0, "vs baseline MAP@R (pts)"] == "not recorded"
    assert table.loc[0, "vs baseline R@1 (pts)"].startswith("+11.0")
    assert "MAP@R is not recorded for X" in cmp.metric_agreement([cmp.Comparison("quick", [row])])


def test_the_words_follow_the_verdicts(real):
    """"clearly" only for a row whose setting the rule chose, and then with the direction of its interval; an
    ablation's row says so; every choice sentence says what the rule did."""
    text = cmp.findings([real])
    for row in real.rows:
        d = row.vs_baseline.get("R@1")
        line = next(s for s in text.splitlines() if f"**{row.method} (" in s)
        if d is None or math.isnan(d.low):
            continue
        if row.ablation:
            assert "ablation" in line and "clearly above" not in line and "clearly below" not in line, line
        elif row.stability == "stable" and not row.identical:
            word = "clearly above" if d.low > 0 else "clearly below" if d.high < 0 else "not clearly different"
            assert word in line, line
    for line in cmp.choice_sentences([real]).splitlines():
        assert "clearly above it, so" in line or "rule keeps" in line or "stays off" in line


def test_the_papers_claimed_gains_are_read_from_their_tables():
    from zslib.reported import reported_value

    for entry in cmp.ENTRIES:
        for label in entry.candidates:
            claim = entry.claims(label)
            if not isinstance(claim, cmp.Claim):
                assert claim.startswith("no like-for-like row")
                continue
            (tm, rm, cm), (tb, rb, cb) = claim.method, claim.base
            want = reported_value(tm, rm, cm, claim.paper) - reported_value(tb, rb, cb, claim.paper)
            row = cmp.Row(entry.name, "real frozen")
            cmp._claim(row, claim, entry.build(cmp.regime_config("real frozen"), entry.candidates[label]))
            assert row.reported_gain == pytest.approx(want)


def test_zsml_test_rows_rank_every_unseen_image_against_the_cosine_of_its_inputs(real):
    """ZSML's test rows (not its validation runs) rank every unseen image for their sampled queries, and its
    "off" is the cosine of the same input features on the same queries."""
    row = next(r for r in real.rows if r.method == "ZSML")
    for r in row.runs:
        p = r.config.method_params
        assert p["gallery_splits"] == ["unseen"] and p["input_metric"] == "normalized", r.config.name
    assert [b.metric("R@1") for b in row.baseline] == [r.metric("input R@1") for r in row.runs]


@pytest.mark.parametrize("metrics", [("R@1",), ("R@1", "MAP@R")])
def test_the_forest_plot_puts_the_first_method_on_top_in_every_panel(real, metrics):
    import matplotlib.pyplot as plt

    fig = cmp.forest_plot([real, real], metrics=metrics)
    try:
        assert len(fig.axes) == 2 * len(metrics)
        for i, ax in enumerate(fig.axes):
            low, high = ax.get_ylim()
            assert low > high  # inverted: row 0 (the first method) at the top
            if i % 2 == 0:  # the first column names the rows (the panels beside it share them)
                fig.canvas.draw()
                assert [t.get_text() for t in ax.get_yticklabels()] == [r.method for r in real.rows]
    finally:
        plt.close(fig)


def test_every_tested_row_and_the_untrained_network_report_map_at_r(real):
    """The recorded test runs of every regime carry MAP@R, so every row of the table has its MAP@R change."""
    assert "MAP@R" in real.floor.metrics["unseen"]
    for row in real.rows:
        assert row.runs, row.method
        assert "MAP@R" in row.vs_baseline and "MAP@R" in row.vs_floor, row.method


def test_the_finetuning_sentences_say_what_each_fine_tuned_row_did():
    """The comparison's bullets beside the fine-tuned table (zslib.campaign.report.finetuning_sentences): each method's
    fine-tuned part quotes its paired interval, its direction, "clearly" only for a setting the rule chose, and says
    "an ablation" exactly for a row whose setting the rule did not choose."""
    from zslib.campaign.report import finetuning_sentences
    from zslib.engine.stats import format_interval, verdict

    comps = [cmp.compare("real frozen"), cmp.compare(cmp.FINETUNED_CPU)]
    text = finetuning_sentences(comps)
    for row in comps[1].rows:
        line = next(s for s in text.splitlines() if s.startswith(f"- **{row.method}**"))
        part = line.split("fine-tuned on the CPU", 1)[1]
        d = row.vs_baseline["R@1"]
        assert f"({format_interval(d, signed=True)} points)" in part, part
        said = {"up": "above its baseline", "down": "below its baseline"}.get(verdict(d),
                                                                             "not clearly different from its baseline")
        assert said in part, part
        assert ("clearly above" in part or "clearly below" in part) == (not row.ablation and verdict(d) in ("up", "down"))
        assert ("an ablation" in part) == row.ablation
