"""zslib.present.deml: what the DeML pages state is what the recorded runs say.

The numbers below are recomputed from the recorded result files themselves (read as JSON, paired by the seed in
each file, intervals from scipy), not through the report functions' own path, and compared with the tables and
sentences the pages show.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from zslib.engine.config import Config, config_hash
from zslib.engine.store import Result
from zslib.engine.train.history import History
from zslib.methods.deml import recipes
from zslib.present import deml as present
from zslib.present.deml.study import DemlStudy

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "results" / "recorded"


@pytest.fixture(autouse=True)
def _the_checkouts_results(monkeypatch):
    """The reports read the runs recorded in this checkout, the same files the tests read."""
    monkeypatch.setenv("ZS_RESULTS", str(REPO / "results"))


def _files(config: Config) -> dict[int, dict]:
    """{seed: stored result} of every recorded file of ``config`` (any seed), found by the hash in its name."""
    out = {}
    for seed in range(10):
        h = config_hash(config.replace(seed=seed))
        for path in RECORDED.glob(f"*-s{seed}-{h}.json"):
            out[seed] = json.loads(path.read_text())
    return out


def _r1(stored: dict, split: str = "unseen") -> float:
    return stored["metrics"][split]["R@1"]


def _paired_text(a: dict[int, dict], b: dict[int, dict], split: str = "unseen") -> tuple[str, str]:
    """``b - a`` per seed in points as the pages print it, "m [lo, hi]", and its verdict, computed here."""
    assert set(a) == set(b) and len(a) >= 2
    d = np.array([100 * (_r1(b[s], split) - _r1(a[s], split)) for s in sorted(a)])
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    m, lo, hi = d.mean(), d.mean() - half, d.mean() + half
    word = "up" if lo > 0 else "down" if hi < 0 else "no clear effect"
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]", word


def _real():
    configs = recipes.real_configs()
    files = {"baseline": _files(configs["baseline"]), "DeML(1,4)": _files(configs["DeML(1,4)"]),
             **{name: _files(c) for name, c in recipes.real_arm_configs().items()}}
    if not all(files.values()):
        pytest.skip("the real-profile DeML runs are not recorded in this checkout")
    return files


def test_the_real_table_states_the_paired_difference_of_the_recorded_files():
    files = _real()
    section = present.real_section(DemlStudy(train=False))
    row = section.table.loc["DeML(1,4)"]
    assert (row["vs baseline (pts)"], row["verdict"]) == _paired_text(files["baseline"], files["DeML(1,4)"])
    raw = _r1(_files(recipes.real_configs()["pretrained"])[0])
    assert section.table.loc["pretrained features, no training", "unseen R@1 %"] == f"{100 * raw:.1f}"
    assert f"{100 * (np.mean([_r1(f) for f in files['baseline'].values()]) - raw):+.1f} points" in section.markdown()


def test_the_arms_and_their_sentences_state_the_recorded_differences():
    files = _real()
    study = DemlStudy(train=False)
    runs = study.runs(arms=True)
    table = present.arms_section(study).table
    for name in recipes.real_arm_configs():
        vs_base, vs_deml4 = _paired_text(files["baseline"], files[name]), _paired_text(files["DeML(1,4)"], files[name])
        assert (table.loc[name, "vs baseline (pts)"], table.loc[name, "verdict"]) == vs_base
        assert (table.loc[name, "vs DeML(1,4) (pts)"], table.loc[name, "verdict "]) == vs_deml4
    # the closing list: given a localization table and probe numbers, it states the recorded arms' differences
    import pandas as pd

    loc = pd.DataFrame({"mass on bird": [0.2, 0.1], "lift over chance": [2.0, 1.0], "crop IoU": [0.3, 0.2]},
                       index=["both, T=10 (paper)", "literal Eq. 3"])
    found = present.experiments_found((loc, {"area_share": 0.1, "box_iou_full_image": 0.2}),
                                      {"U_d + L_act": [0.2, 0.3], "DeML(1,4)": [0.3, 0.5]}, runs, None, {}, None)
    eight = next(s for s in found.sentences if s.startswith("DeML(1,8)"))
    assert _paired_text(files["DeML(1,4)"], files["DeML(1,8)"])[0] in eight
    assert "+2.4 over DeML(1,4) on CUB" in eight  # Table 2, H: 59.0 - 56.6
    assert found.sentences[0].startswith("The OAM put 0.20 of its mass on the bird (chance 0.10, 2.0x)")


def test_the_runs_table_lists_every_recorded_seed_with_its_numbers():
    files = _real()
    table = present.real_runs_table(DemlStudy(train=False))
    for name, by_seed in files.items():
        rows = table[table["variant"] == name]
        assert sorted(rows["seed"]) == sorted(by_seed), name
        for _, row in rows.iterrows():
            assert row["unseen R@1 %"] == round(100 * _r1(by_seed[row["seed"]]), 2)
            assert row["seen R@1 %"] == round(100 * _r1(by_seed[row["seed"]], "seen"), 2)
    assert list(table[table["variant"] == "pretrained features"]["seed"]) == [0]


def test_the_validation_check_of_lambda0_states_the_paired_difference():
    deml4 = recipes.real_configs()["DeML(1,4)"].replace(validation_fraction=0.3)
    files = {v: {s: f for s, f in _files(deml4.replace(method_params={"learners": 4, "lambda0": v})).items() if s < 3}
             for v in (0.1, 1.0)}
    if not all(files.values()):
        pytest.skip("the validation runs of lambda0 are not recorded in this checkout")
    numbers, section = present.lambda0_check(DemlStudy(train=False))
    diff, word = _paired_text(files[0.1], files[1.0], split="val")
    assert f"paired by seed: {diff} points ({word})" in section.markdown()
    means = {v: np.mean([_r1(f, "val") for f in fs.values()]) for v, fs in files.items()}
    assert numbers["best"] == max(means, key=means.get)


def _fake(seed: int, r1: float) -> Result:
    config = Config.from_profile("quick", method="deml", seed=seed)
    return Result(config, {"unseen": {"R@1": r1, "NMI": 0.5}, "seen": {"R@1": r1}}, History(), {})


def test_the_quick_table_pairs_the_arms_by_seed_not_by_position():
    u_d = [_fake(0, 0.10), _fake(1, 0.20), _fake(2, 0.30)]
    # listed in another order: seed 2, 0, 1; per seed the arm is 1, 1.5 and 2 points above U_d
    arm = [_fake(2, 0.32), _fake(0, 0.11), _fake(1, 0.215)]
    row = present.quick_section({"U_d": u_d, "U_d + L_act": arm}).table.loc["U_d + L_act"]
    d = np.array([1.0, 1.5, 2.0])
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert row["vs U_d (pts)"] == f"{d.mean():+.1f} [{d.mean() - half:+.1f}, {d.mean() + half:+.1f}]"
    assert row["verdict"] == "up"


def test_the_paper_gains_are_the_differences_of_the_paper_tables():
    gain = present.paper_gains()
    expected = {"L_act": 56.2 - 52.9, "J=4": 56.6 - 56.1, "I=2": 60.9 - 56.1, "J=8 over J=4": 59.0 - 56.6,
                "L_adv": 59.0 - 52.0}  # Tables 1 (U512, CUB), 2 (CUB, H) and 4 (CUB) of Chen and Deng, CVPR 2019
    assert gain == pytest.approx(expected, abs=1e-9)


def test_the_walk_check_states_the_measured_mixing_and_rejects_a_wrong_matrix():
    from zslib.methods.deml.object_attention import dissimilarity_graph, object_attention, transition_matrix

    fmap = present.walk_map()
    P = transition_matrix(dissimilarity_graph(fmap))[0].numpy()
    second = np.sort(np.abs(np.linalg.eigvals(P)))[-2]
    pi = object_attention(fmap, None).flatten().numpy()
    assert f"second eigenvalue's modulus {second:.3f}" in present.walk_section(fmap, P, pi).markdown()
    W = dissimilarity_graph(fmap)[0].numpy()  # the graph itself: its rows do not sum to one
    with pytest.raises(AssertionError):
        present.walk_section(fmap, W, pi)


def test_the_walk_figure_puts_more_than_the_uniform_share_of_mass_on_the_birds():
    import re

    section = present.walk_figure(count=2)
    text = section.markdown()
    uniform = int(re.search(r"The bird covers (\d+)%", text).group(1))
    shares = {name: int(v) for v, name in re.findall(r"(\d+)% \(([^)]+)\)", text)}
    assert shares["as printed, T = 10"] == uniform  # the literal reading stays at the uniform start
    assert shares["limit π"] > uniform  # the walk on dissimilarities moves mass onto the objects


def test_the_cam_sentences_state_the_means_of_the_records():
    records = DemlStudy(train=False).cam_records()
    if "DeML(1,4)" not in records:
        pytest.skip("the learner_attention records are not recorded in this checkout")
    text = present.cam_section(records).markdown()
    for key in ("channel_corr", "channel_corr_images", "map_corr"):
        values = [r[key] for r in records["DeML(1,4)"]]
        assert f"{np.mean(values):.3f} [" in text, key
    assert f"{len(records['DeML(1,4)'])} seeds per variant" in text
    assert torch.is_tensor(torch.tensor(records["DeML(1,4)"][0]["maps"]))  # the picture's maps are stored


def test_the_lambda0_check_offers_deml_switched_off_and_applies_the_one_rule():
    """The binomial baseline on the same validation split is a candidate of the lambda0 choice; the rule's outcome
    equals a recomputation from the recorded JSON (scipy's t quantile)."""
    import json

    import numpy as np
    from rule_oracle import expected_choice

    from zslib.engine.config import config_hash
    from zslib.engine.store import recorded_dir
    info, _ = present.lambda0_check(DemlStudy(train=False))
    if info is None or info["rule"] is None:
        pytest.skip("the lambda0 check's runs are not recorded in this copy")
    base, deml4 = recipes.real_configs()["baseline"], recipes.real_configs()["DeML(1,4)"]

    def val_r1(config, seed):
        (path,) = recorded_dir().glob(f"*-{config_hash(config.replace(validation_fraction=0.3, seed=seed))}.json")
        return json.loads(path.read_text())["metrics"]["val"]["R@1"]

    seeds = (0, 1, 2)
    values = {"off": np.array([val_r1(base, s) for s in seeds])}
    values.update({v: np.array([val_r1(deml4.replace(method_params={**deml4.method_params, "lambda0": v}), s)
                                for s in seeds]) for v in info["values"]})
    assert info["rule"].chosen == expected_choice(values, "off")


def test_a_study_without_the_runs_names_each_missing_row_and_leaves_it_out(tmp_path, monkeypatch):
    """Against an empty results folder (no recorded runs installed either), every real-profile row is left out and
    named, and the sections say so instead of failing."""
    import zslib.engine.store

    monkeypatch.setenv("ZS_RESULTS", str(tmp_path))
    monkeypatch.setattr(zslib.engine.store, "installed_recorded_dir", lambda: tmp_path / "none")
    study = DemlStudy(train=False)
    assert study.floor() is None and study.runs(arms=True) == {}
    assert set(study.missing) == {"the untrained features", *recipes.real_configs(), *recipes.real_arm_configs()} - {
        recipes.FLOOR}
    section = present.real_section(study)
    assert section.caption.startswith("*the untrained features: not shown, ") and "not recorded in this copy" in (
        section.markdown())
    numbers, note = present.lambda0_check(study)
    assert numbers is None and note.caption.startswith("*the validation comparison of lambda0: not shown, ")
    assert present.arms_section(study).table is None


def test_the_deviations_table_describes_the_deml4_row_by_its_name_not_its_position(monkeypatch):
    """The deviations table's config is the recipes' DeML(1, 4) row, found by name: listing the rows in another
    order leaves it the same run."""
    from zslib.engine.config import config_hash
    from zslib.methods.deml.deviations import chapter_config

    rows = recipes.real_configs()
    assert config_hash(chapter_config()) == config_hash(rows[recipes.DEML4])
    monkeypatch.setattr(recipes, "real_configs", lambda: dict(reversed(list(rows.items()))))
    assert config_hash(chapter_config()) == config_hash(rows[recipes.DEML4])


def test_the_deml_folder_keeps_no_presentation_and_no_file_over_700_lines():
    folder = REPO / "zslib" / "methods" / "deml"
    assert not (folder / "reports.py").exists()
    long = {p.name: n for p in folder.glob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long
