"""zslib.engine.choice: the shared rule that picks a setting on validation classes, "off" always a candidate."""
from types import SimpleNamespace

import numpy as np
import pytest

from zslib.engine.choice import Prefixed, choose
from zslib.engine.stability import run_stability, stability_label


def _runs(values, split="val", metric="R@1"):
    return [SimpleNamespace(config=SimpleNamespace(seed=s),
                            metric=lambda m, sp, v=v: v if (m, sp) == (metric, split) else float("nan"))
            for s, v in enumerate(values)]


def test_a_clear_winner_is_chosen_and_its_paired_gain_matches_numpy():
    off, lam = [0.50, 0.52, 0.51, 0.49, 0.50], [0.55, 0.58, 0.56, 0.53, 0.56]
    c = choose({"off": _runs(off), 0.1: _runs(lam)})
    assert c.chosen == 0.1 and not c.off_won
    d = np.subtract(lam, off)
    assert c.leader_vs_off.mean == pytest.approx(d.mean())
    half = 2.776445105 * d.std(ddof=1) / np.sqrt(5)  # t(0.975, 4)
    assert c.leader_vs_off.low == pytest.approx(d.mean() - half, rel=1e-6)
    assert "clearly above" in c.sentence()


def test_a_leader_that_is_not_clearly_better_loses_to_off():
    off, lam = [0.50, 0.52, 0.51, 0.49, 0.50], [0.53, 0.49, 0.54, 0.48, 0.52]  # higher mean, noisy
    c = choose({"off": _runs(off), 1.0: _runs(lam)})
    assert c.leader == 1.0 and c.chosen == "off" and c.off_won
    assert "keeps off" in c.sentence()


def test_off_wins_when_it_leads_and_ties_go_to_the_first_listed():
    c = choose({"off": _runs([0.6, 0.6, 0.6]), "a": _runs([0.5, 0.55, 0.52])})
    assert c.chosen == "off" and c.leader_vs_off is None and "stays off" in c.sentence()
    tie = choose({"off": _runs([0.5, 0.6]), "a": _runs([0.5, 0.6])})
    assert tie.leader == "off"


def test_a_candidate_with_a_diverged_run_never_leads_and_a_diverged_off_is_refused():
    off = _runs([0.50, 0.52, 0.51])
    broken = _runs([0.70, 0.72, 0.71])  # the best mean, but one seed collapsed (stored as diverged)
    broken[1].diverged = "loss flat at 0.1 over the last quarter of training"
    healthy = _runs([0.56, 0.59, 0.57])
    c = choose({"off": off, "broken": broken, "healthy": healthy})
    assert c.leader == "healthy" and c.chosen == "healthy" and c.diverged == ("broken",)
    assert "broken diverged" in c.sentence() and "broken" in c.means
    only = choose({"off": off, "broken": broken})  # nothing healthy besides off: off leads
    assert only.chosen == "off" and only.leader == "off"
    bad_off = _runs([0.5, 0.5, 0.5])
    bad_off[0].diverged = "batch-norm statistics above 1e4"
    for r, s in zip(bad_off, range(3)):
        r.config.name = f"off-s{s}"
    with pytest.raises(ValueError, match="'off' has diverged run"):
        choose({"off": bad_off, "healthy": healthy})


def test_off_is_required_and_seeds_must_match():
    with pytest.raises(ValueError, match="'off' is always a candidate"):
        choose({0.1: _runs([0.5, 0.6]), 0.2: _runs([0.5, 0.6])})
    with pytest.raises(ValueError, match="same seeds"):
        choose({"off": _runs([0.5, 0.6, 0.7]), 0.1: _runs([0.5, 0.6])})


def test_choose_on_validation_reads_a_recorded_grid_with_off_first_and_applies_the_rule():
    """The real profile's recorded CML-triplet validation grid (3 seeds, 30% of the seen classes held out): the
    grid adds "off" (the triplet loss alone) and its choice is the rule applied by hand to the records' numbers."""
    from zslib.engine.config import Config
    from zslib.engine.grid import choose_on_validation
    from zslib.engine.stats import paired

    base = Config.from_profile("real", method="cml", loss="triplet", normalize=False)
    lambdas = (0.2, 2.0, 20.0)
    grid = {lam: base.replace(method_params={"lambda1": lam, "lambda2": 0.0, "scale": "paper"}) for lam in lambdas}
    choice, runs = choose_on_validation(grid, seeds=(0, 1, 2), train=False)
    assert list(runs) == ["off", *lambdas]
    assert all(r.config.method == "baseline" and r.config.validation_fraction == 0.3 for r in runs["off"])
    means = {k: np.mean([r.metric("R@1", "val") for r in rs]) for k, rs in runs.items()}
    leader = max(means, key=means.get)
    assert choice.leader == leader
    if leader == "off":
        assert choice.chosen == "off"
    else:
        verdict = paired(runs["off"], runs[leader], "R@1", "val").verdict
        assert choice.chosen == (leader if verdict == "up" else "off")
    with pytest.raises(ValueError, match="not both"):
        choose_on_validation({"off": base, 1: base}, off=base, train=False)


def _scored_run(main: dict, embedding: dict, reason):
    """A stored run as ZSML writes one: its scorer's metrics and, under "input ", the embedding's it scored."""
    metrics = {"unseen": {**main, **{f"input {k}": v for k, v in embedding.items()}}}
    return SimpleNamespace(config=SimpleNamespace(seed=0), metrics=metrics, diverged=reason,
                           history=SimpleNamespace(evals=[]), metric=lambda name, split: metrics[split][name])


def test_a_view_through_a_prefix_is_judged_by_the_metrics_it_reads():
    flat = {"R@1": 0.02, "R@2": 0.02, "R@4": 0.02, "R@8": 0.02}
    healthy = {"R@1": 0.85, "R@2": 0.91, "R@4": 0.95, "R@8": 0.97}
    # the scorer collapsed (stored as diverged); the embedding it scored is sound: the baseline view is not diverged
    run = _scored_run(flat, healthy, "every Recall@K on the unseen classes is 0.0200")
    view = Prefixed(run, "input ")
    assert view.diverged is None and view.metric("R@1") == 0.85
    assert run_stability(view).diverged is None and run_stability(run).diverged
    assert "diverged" not in stability_label([view]) and "diverged" in stability_label([run])
    # an embedding whose own Recall@K are ties, or not finite, is a diverged view whatever the run says
    assert "collapsed onto ties" in Prefixed(_scored_run(healthy, flat, None), "input ").diverged
    broken = Prefixed(_scored_run(healthy, {**healthy, "MAP@R": float("nan")}, None), "input ")
    assert "input MAP@R on the unseen classes is nan" == broken.diverged
