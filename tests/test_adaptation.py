"""The adapted regime's stage rate: its grid (the 1e-4 candidate is the recorded adapted runs' config, "off" the
frozen regime's), and the rule's choice and sentence recomputed from the recorded JSON by an independent oracle."""
from __future__ import annotations

import json

import pytest
from rule_oracle import expected_choice

from zslib.analysis import adaptation as A
from zslib.analysis.compare import ENTRIES, regime_config, validation_grid
from zslib.engine.choice import OFF, VALIDATION_SEEDS
from zslib.engine.store import recorded_dir


def test_the_grid_holds_the_head_rate_and_reuses_the_recorded_configs():
    grid = A.rate_grid()
    cml = next(e for e in ENTRIES if e.name == "CML")
    assert grid[OFF].hash == validation_grid(cml, regime_config("real frozen"), "real frozen")[OFF].hash
    assert grid["stages at 0.0001"].hash == validation_grid(cml, regime_config("real adapted"), "real adapted")[OFF].hash
    for rate in A.STAGE_RATES:
        c = grid[f"stages at {rate:g}"]
        assert c.lr == rate and c.lr * c.new_layer_mult == pytest.approx(1e-4)  # the head's rate never moves
        assert c.train_stages and c.validation_fraction == grid[OFF].validation_fraction > 0
    assert not grid[OFF].train_stages


def _recorded_val_r1(config) -> list[float]:
    out = []
    for seed in VALIDATION_SEEDS:
        c = config.replace(seed=seed)
        found = sorted(recorded_dir().glob(f"*-s{seed}-{c.hash}.json"))
        assert len(found) == 1, f"the run {c.hash} (seed {seed}) is not recorded"
        path = found[0]
        d = json.loads(path.read_text())
        assert d["config"]["seed"] == seed
        out.append(d["metrics"]["val"]["R@1"])
    return out


def test_the_rule_and_its_sentence_follow_the_recorded_runs():
    values = {k: _recorded_val_r1(c) for k, c in A.rate_grid().items()}
    expected = expected_choice(values, OFF)
    choice = A.rate_choice()
    assert choice is not None and choice.chosen == expected
    sentence = A.rate_sentence(choice)
    leader = max(values, key=lambda k: sum(values[k]))
    assert f"({100 * sum(values[leader]) / len(values[leader]):.2f})" in sentence
    if expected == "stages at 0.0001":
        assert "trained at that rate" in sentence
    elif expected == OFF:
        assert "adapting is not chosen" in sentence
    else:
        assert "not at the chosen rate" in sentence
