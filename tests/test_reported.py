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
    from zslib.methods.cml.method import CML_PRESETS

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


def test_deml_tables_are_consistent_with_the_papers_text():
    """DeML (chen2019deml): the cross-references its text makes between tables hold in the transcription."""
    from zslib.reported import DEML_TABLES

    assert sorted(DEML_TABLES) == ["1", "2-CARS196", "2-CUB200", "3", "4-CARS196", "4-CUB200"]
    for key, t in DEML_TABLES.items():
        assert t["paper"] == "chen2019deml" and "CVPR 2019" in t["citation"]
        for row in t["rows"]:
            for col in t["columns"]:
                v = row[col]
                assert v is None or (math.isfinite(v) and (-1.0 <= v <= 1.0 if col == "sim" else 0 <= v <= 100))
    # Sec. 4.1: "56.2% vs. 56.1% on CUB, 77.6% vs. 77.9% on CARS" for U512+L_act vs DeML(1,1)
    assert reported_value("1", "U512+L_act", "CUB R@1", "chen2019deml") == 56.2
    assert reported_value("2-cub200", "DeML(1,1)", "H", "chen2019deml") == 56.1
    assert reported_value("2-cars196", "DeML(1,1)", "H", "chen2019deml") == 77.9
    # Table 3's baseline is Table 1's U512 and its DeML(3,3) is Table 2's; Table 4's DeML(1,8) is Table 2's
    assert reported_value("3", "baseline(U512)", "CUB R@1", "chen2019deml") == reported_value(
        "1", "U512", "CUB R@1", "chen2019deml")
    assert reported_value("3", "DeML(3,3)", "CARS R@1", "chen2019deml") == reported_value(
        "2-cars196", "DeML(3,3)", "H", "chen2019deml")
    for d in ("cub200", "cars196"):
        assert reported_value(f"4-{d}", "DeML(1,8)", "R@1", "chen2019deml") == reported_value(
            f"2-{d}", "DeML(1,8)", "H", "chen2019deml")
    assert reported_table("4-cub200", "chen2019deml")["std"]["DeML(1,8)"]["sim"] == 0.01
    with pytest.raises(KeyError, match="available"):
        reported_table("5", "chen2019deml")


# ---- JRD (chu2020jrd) -------------------------------------------------------------------------------

def test_parse_cell_reads_parenthesized_half_widths():
    assert parse_cell("50.7(1.1)") == (50.7, 1.1)
    assert parse_cell("0.9275(0.003)") == (0.9275, 0.003)


def test_jrd_tables_well_formed_and_monotone():
    from zslib.reported import JRD_TABLES, TABLES

    assert sorted(JRD_TABLES) == ["1", "2", "3", "4"]
    for key, t in JRD_TABLES.items():
        assert TABLES[("chu2020jrd", key)] is t and t["paper"] == "chu2020jrd" and f"Table {key}" in t["citation"]
        for row in t["rows"]:
            assert set(row) == {"method", *t["columns"]}
            values = [row[c] for c in t["columns"]]
            assert all(v is None or (isinstance(v, float) and 0.0 <= v <= 100.0) for v in values)
            if key == "3":  # fractions, as printed
                assert all(0.0 < v < 1.0 for v in values)
            for prefix in ("CUB R@", "CARS R@", "SOP R@", "R@"):  # Recall@K can only grow with K
                series = [row[c] for c in t["columns"] if c.startswith(prefix) and row[c] is not None]
                assert series == sorted(series), (key, row["method"], prefix)
    # the tables printing 95% half-widths keep them apart from standard deviations
    for key in ("2", "3"):
        t = JRD_TABLES[key]
        assert all(v is None for s in t["std"].values() for v in s.values())
        assert all(t["ci95"][r["method"]][c] is not None for r in t["rows"] for c in t["columns"]
                   if not c.startswith("SOP"))
    assert "ci95" not in JRD_TABLES["1"] and "ci95" not in JRD_TABLES["4"]


def test_jrd_tables_agree_with_each_other():
    """Same runs, different tables: SOP of JRD in Tables 1 and 2; Table 3's JRD R@1 (fraction, ten-subset
    protocol) against Table 2's; Table 4's Gaussian R@1 against Table 1's; JRD beats its variants in Table 2."""
    for col in ("SOP R@1", "SOP R@10", "SOP R@100"):
        assert reported_value("1", "JRD", col, paper="chu2020jrd") == reported_value("2", "JRD", col, paper="chu2020jrd")
    t2 = reported_value("2", "JRD", "CUB R@1", paper="chu2020jrd")
    t3 = reported_value("3", "JRD (alpha 1)", "Recall@1", paper="chu2020jrd")
    assert abs(100 * t3 - t2) <= reported_table("2", "chu2020jrd")["ci95"]["JRD"]["CUB R@1"]
    table4 = reported_value("4", "Gaussian (alpha 1)", "R@1", paper="chu2020jrd")
    assert table4 == reported_value("1", "JRD", "CUB R@1", paper="chu2020jrd")
    for variant in ("MRD", "JRD-C", "JRD-Pooling"):
        assert reported_value("2", variant, "CUB R@1", paper="chu2020jrd") < t2
    frame = reported_frame("2", paper="chu2020jrd", with_std=True)
    assert frame.loc["JRD", "CUB R@1 ci95"] == 1.1 and "chu2020jrd" in frame.attrs["citation"]


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


def test_zsml_tables_agree_across_the_paper():
    """ZSML (xu2019zsml): the same experiment printed in several tables carries the same numbers."""
    from zslib.reported import ZSML_TABLES

    assert sorted(ZSML_TABLES, key=int) == ["3", "4", "5", "6", "7", "8", "9"]
    z = "xu2019zsml"
    for m in ("ACC", "NMI", "Purity"):
        # Ours with k = 96 and alpha = 0.3 is the default model of Tables 4-5 and the chosen row of Tables 7-8
        assert reported_value("7", "k = 96", f"Caltech->ImageNet {m}", z) == reported_value(
            "8", "alpha = 0.3", f"Caltech->ImageNet {m}", z) == reported_value("4", "Ours", f"Caltech->ImageNet {m}", z)
        assert reported_value("7", "k = 96", f"Caltech->MSRC {m}", z) == reported_value("5", "Ours", f"Caltech->MSRC {m}", z)
        for method in ("LMNN", "GMML"):  # Table 9 repeats Table 4's comparison rows
            for d in ("Caltech->COIL", "Caltech->ImageNet"):
                assert reported_value("9", method, f"{d} {m}", z) == reported_value("4", method, f"{d} {m}", z)
        # the Euclidean metric needs no training: the same test set gives the same numbers
        assert reported_value("3", "Euclidean", f"Caltech->Caltech {m}", z) == reported_value(
            "5", "Euclidean", f"ImageNet->Caltech {m}", z)
    assert reported_frame("6", paper=z).loc["Lifted", "R@1"] == reported_value("IV", "Lifted", "R@1") == 47.2
    assert reported_table("7", z)["citation"].startswith("Xu, Cao, Yang, Yang and Deng")
    for t in ZSML_TABLES.values():
        for row in t["rows"]:
            assert all(0 <= row[c] <= 100 for c in t["columns"])
