"""The CML tables in zslib.reported: internal consistency and cross-table agreement of the paper."""
import math

import pytest

from zslib.reported import CML_TABLES, parse_cell, reported_frame, reported_table, reported_value


def test_parse_cell():
    assert parse_cell("68.4±0.15") == (68.4, 0.15)
    assert parse_cell("64.6 \\pm 0.17") == (64.6, 0.17)
    assert parse_cell("49.0") == (49.0, None)
    assert parse_cell("-") == (None, None)


def test_all_tables_present_and_well_formed():
    assert sorted(CML_TABLES) == sorted(["II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI"])
    for key, t in CML_TABLES.items():
        assert t["table"] == key and t["paper"] == "chen2022cml" and f"Table {key}" in t["citation"]
        for row in t["rows"]:
            assert set(row) == {"method", *t["columns"]}
            for col in t["columns"]:
                v = row[col]
                assert v is None or (isinstance(v, float) and math.isfinite(v))
                if key != "X" or col == "R@1":
                    assert v is None or 0.0 <= v <= 100.0


def test_recall_is_monotone_in_k():
    """R@K can only grow with K: a check on the transcription."""
    exceptions = set()
    for key, t in CML_TABLES.items():
        rcols = [c for c in t["columns"] if c.startswith("R@")]
        for row in t["rows"]:
            vals = [row[c] for c in rcols if row[c] is not None]
            for a, b in zip(vals, vals[1:]):
                if b < a:
                    exceptions.add((key, row["method"]))
    assert exceptions == set(), exceptions


def test_same_runs_agree_across_tables():
    """The CARS binomial / CML (binomial) runs appear in Tables II, VI, IX and XI with the same numbers."""
    for col in ("R@1", "R@2", "R@4"):
        assert reported_value("II", "Binomial", col) == reported_value("VI", "Binomial", col) \
            == reported_value("IX", "Binomial-512", col)
        assert reported_value("II", "CML (Binomial)", col) == reported_value("VI", "CML (Binomial)", col) \
            == reported_value("IX", "CML (Binomial)-512", col) == reported_value("XI", "CML", col)
    # the lambda ablations contain the Table II CML-e / CML-d values at the chosen lambdas
    vii, viii = reported_table("VII"), reported_table("VIII")
    for name, lam, value in (("CML-e (Tri)", 0.02, 81.2), ("CML-e (N-Pair)", 0.3, 80.3), ("CML-e (Binomial)", 0.13, 84.4)):
        row = next(r for r in vii["rows"] if r["method"] == name)
        assert row[f"l{vii['lambdas'][name].index(lam)}"] == value == reported_value("II", name, "R@1")
    for name, lam, value in (("CML-d (Tri)", 0.04, 82.4), ("CML-d (N-Pair)", 0.02, 78.9), ("CML-d (Binomial)", 0.03, 83.4)):
        row = next(r for r in viii["rows"] if r["method"] == name)
        assert row[f"l{viii['lambdas'][name].index(lam)}"] == value == reported_value("II", name, "R@1")


def test_lambda_captions_match_regularizer_presets():
    from zslib.methods.cml import CML_PRESETS

    for key, ds in (("II", "cars196"), ("III", "sop"), ("IV", "cub200"), ("V", "inshop")):
        caption = CML_TABLES[key]["caption"]
        for loss in ("triplet", "npair", "binomial"):
            assert f"{CML_PRESETS[ds][loss]['lambda1']:g}" in caption
            assert f"{CML_PRESETS[ds][loss]['lambda2']:g}" in caption


def test_copies_and_frame():
    t = reported_table("iv")
    t["rows"][0]["R@1"] = -1
    assert reported_value("IV", "Lifted", "R@1") == 47.2
    frame = reported_frame("IV", with_std=True)
    assert frame.loc["CML (Binomial)", "R@1"] == 56.7 and frame.loc["CML (Binomial)", "R@1 std"] == 0.13
    with pytest.raises(KeyError, match="available"):
        reported_table("XII")
    with pytest.raises(KeyError, match="no row"):
        reported_value("II", "Nope", "R@1")


def test_adapt_adv_flowers_tables_agree_with_each_other():
    """Adapt-Adv's Table 6 repeats Table 5's triplet Base and Adapt-Adv rows (same runs), in another column order."""
    from zslib.reported import ADAPT_ADV_TABLES

    assert sorted(ADAPT_ADV_TABLES) == ["5", "6"]
    for key, t in ADAPT_ADV_TABLES.items():
        assert t["paper"] == "alkaabi2022adaptadv" and t["dataset"] == "flowers102" and f"Table {key}" in t["citation"]
        for row in t["rows"]:
            assert all(isinstance(row[c], float) and 0.0 < row[c] < 100.0 for c in t["columns"])
            recalls = [row[c] for c in ("R@1", "R@2", "R@4", "R@8")]
            assert recalls == sorted(recalls)
    for name in ("Triplet / Base", "Triplet / Adapt-Adv"):
        for col in ("NMI", "R@1", "R@2", "R@4", "R@8", "kNN-Acc"):
            assert reported_value("5", name, col, paper="alkaabi2022adaptadv") == \
                reported_value("6", name, col, paper="alkaabi2022adaptadv")
    frame = reported_frame("5", paper="alkaabi2022adaptadv")
    # the paper's claim: Adapt-Adv beats Base for all three losses on every column
    for loss in ("Triplet", "Angular", "Proxy-NCA"):
        assert (frame.loc[f"{loss} / Adapt-Adv"] > frame.loc[f"{loss} / Base"]).all()
    assert reported_value("6", "Triplet / Adapt-Adv", "R@1", paper="alkaabi2022adaptadv") == 89.32
