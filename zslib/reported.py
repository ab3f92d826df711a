"""Reported results of the papers, as data (CML: Chen et al., TNNLS 2022, ``chen2022cml``; DeML: Chen and
Deng, CVPR 2019, ``chen2019deml``; JRD: Chu et al., ICML 2020, ``chu2020jrd``; Adapt-Adv: Al-Kaabi et al.,
Applied Intelligence 2022, ``alkaabi2022adaptadv``).

Each table is a plain dict, ready for a DataFrame::

    {"paper": "chen2022cml", "table": "II", "dataset": "cars196", "caption": ...,
     "columns": ["R@1", "R@2", ...],
     "rows": [{"method": "Triplet", "R@1": 68.4, ...}, ...],
     "std": {"Triplet": {"R@1": 0.15, ...}, ...},     # the "mean ± std over five runs" of the paper
     "notes": [...]}

Values are percentages (Recall@K, NMI, F1) exactly as printed, except CML Table X's diversities and JRD
Table 3 (plain numbers, as printed). JRD's Table 2 prints 95% confidence half-widths in parentheses
instead of standard deviations: they go to ``"ci95"``, and ``"std"`` stays empty for those tables. ``None`` marks a
value the paper does not give ("-") or one the text extraction we read from

ZSML's Tables 3-9 (Xu et al., IJCAI 2019, ``xu2019zsml``) are in :data:`ZSML_TABLES` (ask with
``paper="xu2019zsml"``, e.g. ``reported_frame("7", paper="xu2019zsml")``): ACC, NMI and purity in %.
garbled (each such case is explained in ``notes``); no number is ever guessed. The numbers were read
from the papers' text (``/work/shared/seeds/CML_confusion_based_metric_learning.txt``,
``JRD_joint_representation_diversification.txt``).

Use :func:`reported_table` for a deep copy, :func:`reported_frame` for a pandas DataFrame and
:func:`reported_value` for one number.
"""
from __future__ import annotations

import copy

import pandas as pd

__all__ = ["paper_tables", "CML_TABLES", "DEML_TABLES", "JRD_TABLES", "ADAPT_ADV_TABLES", "ZSML_TABLES", "TABLES",
           "reported_table", "reported_frame", "reported_value", "parse_cell", "CONTEXT_ZOO", "context_frame"]


def parse_cell(cell: str):
    """``"68.4±0.15"`` -> ``(68.4, 0.15)``; ``"50.7(1.1)"`` -> ``(50.7, 1.1)``; ``"49.0"`` -> ``(49.0, None)``;
    ``"-"`` -> ``(None, None)``."""
    cell = cell.strip().replace("\\pm", "±").replace(" ", "")
    if cell in ("-", "", "?"):
        return None, None
    if "±" in cell:
        mean, std = cell.split("±")
        return float(mean), float(std)
    if cell.endswith(")") and "(" in cell:
        mean, half = cell[:-1].split("(")
        return float(mean), float(half)
    return float(cell), None


def _table(table, dataset, caption, columns, text, notes=(), paper="chen2022cml", spread="std",
           citation="Chen, Deng, Wang and Zhang, TNNLS 2022"):
    rows, stds = [], {}
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != len(columns) + 1:
            raise ValueError(f"Table {table}: row {line!r} has {len(parts) - 1} values for {len(columns)} columns")
        method, cells = parts[0], parts[1:]
        row, std = {"method": method}, {}
        for col, cell in zip(columns, cells):
            row[col], std[col] = parse_cell(cell)
        rows.append(row)
        stds[method] = std
    out = {"paper": paper, "table": table, "dataset": dataset, "caption": caption,
           "columns": list(columns), "rows": rows, "std": stds, "notes": list(notes),
           "citation": f"{citation} ({paper}), Table {table}"}
    if spread == "ci95":  # the values in parentheses are 95% confidence half-widths, not standard deviations
        out["ci95"], out["std"] = stds, {m: {c: None for c in columns} for m in stds}
    return out


_BASELINES_MAIN = ("Triplet", "N-Pair", "Binomial")

CML_TABLES: dict[str, dict] = {
    "II": _table("II", "cars196", "Comparison with the state of the art on CARS; mean ± std of five runs. "
                 "lambda1 = 0.02 / 0.3 / 0.13 and lambda2 = 0.04 / 0.02 / 0.03 for Tri / N-Pair / Binomial.",
                 ["R@1", "R@2", "R@4", "NMI", "F1"], """
Lifted | 49.0 | 60.3 | 72.1 | 55.1 | 21.5
Clustering | 58.1 | 70.6 | 80.3 | 59.0 | -
Angular | 71.3 | 80.7 | 87.0 | 62.4 | 31.8
ALMN | 71.6 | 81.3 | 88.2 | 62.0 | 29.4
DAML | 75.1 | 83.8 | 89.7 | 66.0 | 36.4
HORDE* | 80.7 | 88.1 | 92.6 | 67.9 | 37.2
Triplet | 68.4±0.15 | 78.3±0.07 | 86.2±0.01 | 58.8±0.25 | 26.7±0.18
CML-e (Tri) | 81.2±0.17 | 88.0±0.06 | 92.8±0.00 | 66.0±0.19 | 32.8±0.23
CML-d (Tri) | 82.4±0.14 | 89.5±0.07 | 93.5±0.00 | 67.8±0.25 | 36.9±0.16
CML (Tri) | 83.0±0.16 | 89.7±0.03 | 93.8±0.00 | 67.7±0.12 | 38.3±0.07
N-Pair | 74.5±0.26 | 83.7±0.11 | 90.2±0.08 | 60.7±0.26 | 29.7±0.22
CML-e (N-Pair) | 80.3±0.18 | 88.2±0.06 | 92.4±0.00 | 64.7±0.15 | 32.2±0.08
CML-d (N-Pair) | 78.9±0.14 | 86.9±0.07 | 91.9±0.00 | 66.3±0.12 | 36.1±0.10
CML (N-Pair) | 81.2±0.15 | 88.6±0.05 | 92.7±0.00 | 66.7±0.17 | 36.6±0.13
Binomial | 74.2±0.12 | 83.1±0.04 | 86.7±0.00 | 61.7±0.09 | 28.8±0.04
CML-e (Binomial) | 84.4±0.12 | 90.4±0.05 | 93.8±0.00 | 68.4±0.11 | 38.2±0.05
CML-d (Binomial) | 83.4±0.14 | 89.7±0.02 | 93.6±0.00 | 68.4±0.09 | 37.2±0.14
CML (Binomial) | 85.1±0.14 | 90.8±0.04 | 94.0±0.00 | 69.3±0.14 | 39.1±0.08
""", notes=["Binomial R@4 = 86.7 is below its own R@2-to-R@8 trend but is printed so in Tables II, VI and IX; "
            "kept as printed.", "'-': not reported by the paper."]),
    "III": _table("III", "sop", "Comparison with the state of the art on Stanford Online Products; mean ± std of "
                  "five runs. lambda1 = 0.002 / 0.03 / 0.013 and lambda2 = 0.01 / 0.02 / 0.01.",
                  ["R@1", "R@10", "R@100", "NMI", "F1"], """
Lifted | 62.1 | 79.8 | 91.3 | 87.4 | 24.7
Clustering | 67.0 | 83.7 | 93.2 | 89.5 | -
Angular | 70.9 | 85.0 | 93.5 | 87.8 | 26.5
ALMN | 69.9 | 84.8 | 92.8 | - | -
DAML | 68.4 | 83.5 | 92.3 | 89.4 | 32.4
HORDE* | 71.4 | 85.6 | 93.6 | 89.7 | 32.5
Triplet | 57.8±0.03 | 75.6±0.01 | 88.5±0.00 | 86.8±0.05 | 20.8±0.04
CML-e (Tri) | 64.9±0.02 | 80.0±0.01 | 90.5±0.00 | 86.8±0.06 | 23.4±0.07
CML-d (Tri) | 65.1±0.01 | 80.2±0.01 | 90.7±0.00 | 87.2±0.12 | 23.0±0.05
CML (Tri) | 66.3±0.01 | 80.8±0.00 | 91.0±0.00 | 87.3±0.05 | 24.3±0.07
N-Pair | 68.0±0.01 | 84.0±0.00 | 93.1±0.00 | 87.5±0.08 | 25.8±0.02
CML-e (N-Pair) | 69.8±0.01 | 84.7±0.00 | 93.2±0.00 | 88.1±0.03 | 27.5±0.06
CML-d (N-Pair) | 69.8±0.00 | 85.1±0.00 | 93.4±0.00 | 88.1±0.01 | 27.8±0.00
CML (N-Pair) | 70.5±0.01 | 85.2±0.00 | 93.4±0.00 | 88.1±0.02 | 28.0±0.03
Binomial | 68.5±0.02 | 84.0±0.00 | 93.1±0.00 | 88.5±0.08 | 29.9±0.05
CML-e (Binomial) | 71.3±0.03 | 85.6±0.01 | 93.6±0.01 | 89.9±0.16 | 32.7±0.14
CML-d (Binomial) | 71.2±0.02 | 85.4±0.01 | 93.5±0.00 | 89.7±0.15 | 32.6±0.09
CML (Binomial) | 72.2±0.05 | 85.9±0.02 | 93.7±0.01 | 89.9±0.11 | 32.6±0.05
""", notes=["'-': not reported by the paper."]),
    "IV": _table("IV", "cub200", "Comparison with the state of the art on CUB-200-2011; mean ± std of five runs. "
                 "lambda1 = 0.02 / 0.3 / 0.13 and lambda2 = 0.01 / 0.02 / 0.03 for Tri / N-Pair / Binomial.",
                 ["R@1", "R@2", "R@4", "NMI", "F1"], """
Lifted | 47.2 | 58.9 | 70.2 | 56.2 | 22.7
Clustering | 48.2 | 61.4 | 71.8 | 59.2 | -
Angular | 53.6 | 65.0 | 75.3 | 61.0 | 30.2
ALMN | 52.4 | 64.8 | 75.4 | 60.7 | 28.5
DAML | 52.7 | 65.4 | 75.5 | 61.3 | 29.5
HORDE* | 55.7 | 66.9 | 77.0 | 61.8 | 31.1
Triplet | 48.9±0.24 | 62.1±0.18 | 73.0±0.07 | 56.9±0.33 | 24.7±0.25
CML-e (Tri) | 53.8±0.22 | 64.6±0.13 | 75.2±0.08 | 59.4±0.14 | 27.0±0.21
CML-d (Tri) | 55.2±0.19 | 66.8±0.09 | 76.3±0.04 | 60.8±0.22 | 29.0±0.27
CML (Tri) | 55.3±0.13 | 67.1±0.04 | 76.5±0.01 | 61.5±0.25 | 29.2±0.18
N-Pair | 51.2±0.27 | 63.1±0.15 | 73.8±0.03 | 58.4±0.34 | 26.8±0.19
CML-e (N-Pair) | 53.4±0.22 | 65.0±0.10 | 75.5±0.05 | 60.1±0.21 | 28.6±0.18
CML-d (N-Pair) | 53.3±0.24 | 65.8±0.14 | 76.4±0.05 | 60.3±0.22 | 28.6±0.16
CML (N-Pair) | 54.6±0.17 | 66.1±0.10 | 76.8±0.03 | 60.9±0.23 | 29.3±0.21
Binomial | 53.1±0.13 | 65.1±0.09 | 75.3±0.02 | 59.4±0.28 | 26.5±0.24
CML-e (Binomial) | 55.7±0.17 | 66.5±0.08 | 76.7±0.04 | 61.8±0.25 | 30.5±0.16
CML-d (Binomial) | 56.2±0.16 | 66.9±0.04 | 76.9±0.01 | 61.3±0.18 | 31.1±0.12
CML (Binomial) | 56.7±0.13 | 67.3±0.02 | 77.1±0.00 | 62.8±0.12 | 31.7±0.09
""", notes=["'-': not reported by the paper."]),
    "V": _table("V", "inshop", "Comparison with the state of the art on In-Shop Clothes; mean ± std of five runs. "
                "lambda1 = 0.002 / 0.03 / 0.013 and lambda2 = 0.01 / 0.02 / 0.01.",
                ["R@1", "R@10", "R@20", "R@30", "R@40"], """
Joints | 41 | 64 | 68 | 71 | 73
Poselets | 42 | 65 | 70 | 72 | 74
FashionNet | 53 | 73 | 76 | 77 | 79
HDC | 62.1 | 84.9 | 89.0 | 91.2 | 92.3
BIER | 76.9 | 92.8 | 95.2 | 96.2 | 96.7
HORDE* | 83.9 | 94.8 | 96.5 | 97.5 | 97.7
Triplet | 64.6±0.17 | 87.3±0.10 | 90.9±0.05 | 92.7±0.04 | 93.9±0.01
CML-e (Tri) | 68.3±0.22 | 90.0±0.14 | 93.3±0.04 | 94.8±0.01 | 95.7±0.00
CML-d (Tri) | 69.6±0.17 | 90.2±0.09 | 94.1±0.04 | 95.4±0.01 | 95.8±0.01
CML (Tri) | 70.4±0.15 | 90.6±0.04 | 94.2±0.03 | 95.4±0.01 | 95.8±0.00
N-Pair | 77.9±0.18 | 94.0±0.09 | 96.1±0.06 | 96.9±0.02 | 97.4±0.00
CML-e (N-Pair) | 79.5±0.21 | 94.6±0.16 | 96.1±0.11 | 97.0±0.01 | 97.4±0.00
CML-d (N-Pair) | 78.7±0.13 | 94.0±0.08 | 95.9±0.03 | 96.9±0.03 | 97.3±0.00
CML (N-Pair) | 79.6±0.17 | 94.5±0.13 | 96.2±0.08 | 97.1±0.04 | 97.5±0.01
Binomial | 82.0±0.23 | 94.6±0.14 | 96.2±0.08 | 97.2±0.02 | 97.6±0.01
CML-e (Binomial) | 83.9±0.17 | 95.2±0.11 | 96.5±0.06 | 97.3±0.05 | 97.7±0.02
CML-d (Binomial) | 83.2±0.22 | 95.0±0.15 | 96.4±0.11 | 97.3±0.06 | 97.7±0.02
CML (Binomial) | 84.4±0.18 | 95.3±0.14 | 96.7±0.06 | 97.5±0.04 | 97.7±0.00
"""),
    "VI": _table("VI", "cars196", "Dropout (before the embedding layer, ratios 0.1 / 0.25 / 0.4) versus confusion, "
                 "binomial loss on CARS.", ["R@1", "R@2", "R@4", "R@8"], """
Binomial | 74.2±0.12 | 83.1±0.04 | 86.7±0.00 | 92.9±0.00
Dropout (Binomial, 0.1) | 73.3±0.26 | 82.2±0.18 | 88.7±0.07 | 92.5±0.04
Dropout (Binomial, 0.25) | 74.8±0.31 | 83.6±0.24 | 85.9±0.15 | 92.6±0.10
Dropout (Binomial, 0.4) | 72.3±0.44 | 81.0±0.27 | 87.3±0.22 | 92.4±0.16
CML-e (Binomial) | 84.4±0.12 | 90.4±0.05 | 93.8±0.00 | 96.6±0.00
CML-d (Binomial) | 83.4±0.14 | 89.7±0.02 | 93.6±0.00 | 96.2±0.00
CML (Binomial) | 85.1±0.14 | 90.8±0.04 | 94.0±0.00 | 96.7±0.00
"""),
    "VII": _table("VII", "cars196", "Ablation of lambda1 with lambda2 = 0 (CML-e), CARS R@1. Columns are the "
                  "positions of the lambda1 grid, which differs per loss: see 'lambdas'.",
                  ["l0", "l1", "l2", "l3", "l4", "l5"], """
CML-e (Tri) | 68.3 | 74.6 | 80.1 | 81.2 | 72.3 | 59.3
CML-e (N-Pair) | 74.3 | 77.4 | 79.6 | 80.3 | 78.6 | 73.7
CML-e (Binomial) | 74.2 | 76.3 | 83.1 | 84.4 | 84.3 | 69.7
""", notes=["lambda = 0 is the plain loss; its R@1 here (Triplet 68.3, N-Pair 74.3) differs by 0.1-0.2 "
            "from Table II (68.4, 74.5) in the paper itself."]),
    "VIII": _table("VIII", "cars196", "Ablation of lambda2 with lambda1 = 0 (CML-d), CARS R@1. Columns are the "
                   "positions of the lambda2 grid: see 'lambdas'.", ["l0", "l1", "l2", "l3", "l4", "l5"], """
CML-d (Tri) | 68.3 | 80.5 | 81.3 | 82.0 | 82.4 | 81.4
CML-d (N-Pair) | 74.3 | 77.0 | 78.9 | 78.1 | 76.7 | 73.4
CML-d (Binomial) | 74.2 | 78.4 | 82.2 | 83.4 | 80.1 | 79.5
"""),
    "IX": _table("IX", "cars196", "Embedding size, binomial loss with and without CML, CARS.",
                 ["R@1", "R@2", "R@4", "NMI"], """
Binomial-128 | 70.4±0.23 | 80.6±0.10 | 87.2±0.06 | 60.8±0.21
CML (Binomial)-128 | 79.7±0.26 | 87.7±0.11 | 91.9±0.05 | 64.5±0.17
Binomial-256 | 73.3±0.19 | 82.4±0.04 | 88.5±0.01 | 61.5±0.15
CML (Binomial)-256 | 82.8±0.23 | 88.9±0.02 | 92.7±0.01 | 66.9±0.14
Binomial-384 | 74.0±0.15 | 82.5±0.03 | 88.8±0.01 | 61.9±0.18
CML (Binomial)-384 | 84.0±0.12 | 90.1±0.06 | 93.9±0.02 | 67.7±0.15
Binomial-512 | 74.2±0.12 | 83.1±0.04 | 86.7±0.00 | 61.7±0.09
CML (Binomial)-512 | 85.1±0.14 | 90.8±0.04 | 94.0±0.00 | 69.3±0.14
""", notes=["The extracted text has a stray '39.1±0.08' under the table with no column header (it is the "
            "F1 of CML (Binomial)-512 in Table II); an F1 column cannot be recovered, so none is given."]),
    "X": _table("X", "cars196", "Diversity (trace of the feature covariance) on the seen and unseen classes of CARS, "
                "and unseen R@1 (%).", ["seen diversity", "unseen diversity", "R@1"], """
Binomial | 1.67 | 1.24 | 74.2
CML-d (Binomial) | 1.54 | 1.49 | 83.5
""", notes=["CML-d (Binomial) R@1 is 83.5 here but 83.4 in Tables II and VI, in the paper itself."]),
    "XI": _table("XI", "cars196", "Compatibility with random erasing (RE), binomial loss on CARS.",
                 ["R@1", "R@2", "R@4", "R@8", "NMI", "F1"], """
RE | 82.1±0.29 | 89.3±0.15 | 93.5±0.02 | 96.0±0.01 | 68.4±0.23 | 37.9±0.17
CML | 85.1±0.14 | 90.8±0.04 | 94.0±0.00 | 96.7±0.00 | 69.3±0.14 | 39.1±0.08
CML+RE | 86.8±0.20 | 91.0±0.13 | 94.0±0.01 | 96.7±0.00 | 69.7±0.21 | 39.5±0.17
""", notes=["The extracted header is laid out as 'R@1 R@2 R@4 R@8' then 'NMI F1'; every row has six values, "
            "read in that order."]),
}
CML_TABLES["VII"]["lambdas"] = {"CML-e (Tri)": [0, 0.001, 0.01, 0.02, 0.1, 1],
                                "CML-e (N-Pair)": [0, 0.1, 0.2, 0.3, 0.4, 0.5],
                                "CML-e (Binomial)": [0, 0.01, 0.1, 0.13, 0.15, 0.5]}
CML_TABLES["VIII"]["lambdas"] = {m: [0, 0.01, 0.02, 0.03, 0.04, 0.05]
                                 for m in ("CML-d (Tri)", "CML-d (N-Pair)", "CML-d (Binomial)")}

# ----------------------------------------------------------------------------------------------------
# DeML (Chen and Deng, CVPR 2019, ``chen2019deml``), read from
# /work/shared/seeds/DeML_hybrid_attention_decoupled_metric_learning.txt. Its tables are single runs (no std).


def _deml(table, dataset, caption, columns, text, notes=()):
    return _table(table, dataset, caption, columns, text, notes, paper="chen2019deml",
                  citation="Chen and Deng, CVPR 2019")


#: DeML's Tables 1-4. Table 2 is split by dataset (``"2-cub200"``, ``"2-cars196"``); its "O" columns are the
#: object-attention root learners of scales 1-3 ("-" where the model has fewer scales). Table 3 keeps the
#: CUB and CARS columns. Table 4 is split by dataset too; "sim" is the mean cosine similarity between the
#: channel-attention learners (its +-std in ``std``).
DEML_TABLES: dict[str, dict] = {
    "1": _deml("1", "cub200+cars196", "Effect of the activation decay L_act on the unified metric U_d (d dimensions).",
               ["CUB R@1", "CARS R@1"], """
U64 | 50.0 | 65.4
U64+L_act | 50.9 | 67.1
U192 | 52.4 | 68.3
U192+L_act | 54.9 | 74.6
U384 | 53.0 | 69.1
U384+L_act | 55.6 | 77.4
U512 | 52.9 | 68.4
U512+L_act | 56.2 | 77.6
"""),
    "2-CUB200": _deml("2-CUB200", "cub200", "Effect of the attention modules on CUB (R@1): H the holistic "
                      "embedding, O the object-attention root learners of scales 1-3.",
                      ["H", "O1", "O2", "O3"], """
DeML(1,1) | 56.1 | - | - | -
DeML(1,4) | 56.6 | - | - | -
DeML(1,8) | 59.0 | - | - | -
DeML(2,1) | 60.9 | 54 | 58.8 | -
DeML(2,4) | 61.7 | 54.9 | 59.7 | -
DeML(3,1) | 64.9 | 54 | 58 | 60.1
DeML(3,3) | 65.4 | 54.1 | 58.4 | 60.6
""", notes=["'-': the model has no such scale."]),
    "2-CARS196": _deml("2-CARS196", "cars196", "Effect of the attention modules on CARS (R@1): H the holistic "
                       "embedding, O the object-attention root learners of scales 1-3.",
                       ["H", "O1", "O2", "O3"], """
DeML(1,1) | 77.9 | - | - | -
DeML(1,4) | 81.1 | - | - | -
DeML(1,8) | 82.5 | - | - | -
DeML(2,1) | 83.4 | 76.9 | 79.2 | -
DeML(2,4) | 84.8 | 77.7 | 79.9 | -
DeML(3,1) | 85.6 | 75.4 | 77.5 | 78.9
DeML(3,3) | 86.3 | 75.3 | 78.9 | 80.4
""", notes=["'-': the model has no such scale."]),
    "3": _deml("3", "cub200+cars196", "Retrieval on CUB and CARS against the state of the art (single runs).",
               ["CUB R@1", "CUB R@2", "CUB R@4", "CUB R@8", "CARS R@1", "CARS R@2", "CARS R@4", "CARS R@8"], """
Lifted | 47.2 | 58.9 | 70.2 | 80.2 | 49.0 | 60.3 | 72.1 | 81.5
N-pair | 51.0 | 63.3 | 74.3 | 83.2 | 71.1 | 79.7 | 86.5 | 91.6
Angular | 53.6 | 65.0 | 75.3 | 83.7 | 71.3 | 80.7 | 87.0 | 91.8
Proxy NCA | 49.2 | 61.9 | 67.9 | 72.4 | 73.2 | 82.4 | 86.4 | 88.7
ALMN | 52.4 | 64.8 | 75.4 | 84.3 | 71.6 | 81.3 | 88.2 | 93.4
ECAML | 55.7 | 66.5 | 76.7 | 85.1 | 84.5 | 90.4 | 93.8 | 96.6
HDC | 53.6 | 65.7 | 77.0 | 85.6 | 73.7 | 83.2 | 89.5 | 93.8
BIER | 55.3 | 67.2 | 76.9 | 85.1 | 78.0 | 85.8 | 91.1 | 95.1
ABE | 58.6 | 69.9 | 79.4 | 87.1 | 82.7 | 88.8 | 93.1 | 96.0
A-BIER | 57.5 | 68.7 | 78.3 | 86.0 | 82.0 | 89.0 | 93.2 | 96.1
baseline(U512) | 52.9 | 65.0 | 75.4 | 83.6 | 68.4 | 78.7 | 86.0 | 91.2
DeML(3,3) | 65.4 | 75.3 | 83.7 | 89.5 | 86.3 | 91.2 | 94.3 | 97.0
""", notes=["The Stanford Online Products and In-Shop columns of the paper's table are not transcribed."]),
    "4-CUB200": _deml("4-CUB200", "cub200", "Effect of the adversary loss on CUB; sim: mean cosine similarity "
                      "between the channel-attention learners.", ["R@1", "R@2", "R@4", "R@8", "sim"], """
DeML(1,8) | 59.0 | 70.2 | 79.7 | 87.4 | -0.08±0.01
DeML(1,8) without L_adv | 52.0 | 63.9 | 74.0 | 82.3 | 0.92±0.02
U64+L_adv | 50.9 | 62.8 | 74.0 | 82.6 | -
""", notes=["'U64+L_adv' is printed so; with one learner there is no adversary, and its numbers equal Table 1's "
            "U64+L_act on CUB (50.9): most likely L_act is meant."]),
    "4-CARS196": _deml("4-CARS196", "cars196", "Effect of the adversary loss on CARS; sim: mean cosine similarity "
                       "between the channel-attention learners.", ["R@1", "R@2", "R@4", "R@8", "sim"], """
DeML(1,8) | 82.5 | 89.5 | 93.5 | 96.1 | -0.09±0.01
DeML(1,8) without L_adv | 68.2 | 78.3 | 85.4 | 90.9 | 0.95±0.01
U64+L_adv | 67.1 | 77.6 | 85.0 | 90.6 | -
""", notes=["'U64+L_adv' is printed so; its R@1 equals Table 1's U64+L_act on CARS (67.1): most likely L_act is "
            "meant."]),
}


_JRD = {"paper": "chu2020jrd", "citation": "Chu, Lin, Wang, Wang, Yu, Gao and Tong, ICML 2020"}
_RK_CUB_CARS = ["CUB R@1", "CUB R@2", "CUB R@4", "CUB R@8", "CARS R@1", "CARS R@2", "CARS R@4", "CARS R@8"]
_RK_SOP = ["SOP R@1", "SOP R@10", "SOP R@100"]

JRD_TABLES: dict[str, dict] = {
    "1": _table("1", "cub200, cars196, sop", "Recall@K (%) of JRD and the state of the art with BN-Inception and "
                "512-d embeddings, standard test splits (one number per cell).", _RK_CUB_CARS + _RK_SOP, """
DE-DSP | 53.6 | 65.5 | 76.9 | - | 72.9 | 81.6 | 88.8 | - | 68.9 | 84.0 | 92.6
HDML | 53.7 | 65.7 | 76.7 | 85.7 | 79.1 | 87.1 | 92.1 | 95.5 | 68.7 | 83.2 | 92.4
DAMLRRM | 55.1 | 66.5 | 76.8 | 85.3 | 73.5 | 82.6 | 89.1 | 93.5 | 69.7 | 85.2 | 93.2
ECAML | 55.7 | 66.5 | 76.7 | 85.1 | 84.5 | 90.4 | 93.8 | 96.6 | 71.3 | 85.6 | 93.6
DeML | 65.4 | 75.3 | 83.7 | 89.5 | 86.3 | 91.2 | 94.3 | 97.0 | 76.1 | 88.4 | 94.9
SoftTriple | 65.4 | 76.4 | 84.5 | 90.4 | 84.5 | 90.7 | 94.5 | 96.9 | 78.3 | 90.3 | 95.9
MS | 65.7 | 77.0 | 86.3 | 91.2 | 84.1 | 90.4 | 94.0 | 96.5 | 78.2 | 90.5 | 96.0
JRD | 67.9 | 78.7 | 86.2 | 91.3 | 84.7 | 90.7 | 94.4 | 97.2 | 79.2 | 90.5 | 96.0
""", notes=["'-': not reported by the paper.", "ECAML is the conference version of CML (chen2022cml)."], **_JRD),
    "2": _table("2", "cub200, cars196, sop", "Recall@K (%) of JRD and its variants: MRD (embedding only), JRD-C "
                "(no class level), JRD-Pooling (no pooling level). CUB and CARS: mean over ten disjoint subsets of "
                "the test set, each holding every test class, with 95% confidence half-widths; SOP: the standard "
                "test split.", _RK_CUB_CARS + _RK_SOP, """
JRD | 50.7(1.1) | 63.7(1.1) | 74.8(1.2) | 84.1(1.2) | 61.2(1.3) | 72.6(0.9) | 82.2(0.6) | 89.2(0.7) | 79.2 | 90.5 | 96.0
MRD | 49.4(1.1) | 62.3(1.1) | 74.5(1.2) | 83.6(1.2) | 59.8(1.3) | 71.5(1.2) | 80.6(0.9) | 88.0(0.9) | 78.8 | 90.4 | 95.9
JRD-C | 48.6(1.5) | 61.4(1.4) | 73.4(1.5) | 83.0(1.4) | 58.5(1.5) | 69.6(1.3) | 79.1(0.7) | 86.6(0.9) | 77.7 | 89.8 | 95.6
JRD-Pooling | 49.4(1.2) | 62.2(1.0) | 74.1(1.2) | 83.3(1.0) | 59.1(1.5) | 70.7(1.2) | 80.3(0.5) | 87.7(0.6) | 79.0 | 90.4 | 95.9
""", notes=["The CUB and CARS columns are lower than Table 1 because each subset holds a tenth of the test "
            "images: fewer same-class neighbours for every query.", "The SOP row of JRD equals Table 1."],
                spread="ci95", **_JRD),
    "3": _table("3", "cub200", "Recall@1, error of the ideal joint hypothesis lambda_NN and H-divergence d_H_NN, "
                "with 95% confidence half-widths, of JMMD (alpha = 0.1) and JRD (alpha = 1) on CUB (fractions, "
                "as printed).", ["Recall@1", "lambda", "d_H"], """
JMMD (alpha 0.1) | 0.486(0.015) | 0.321(0.006) | 0.9275(0.003)
JRD (alpha 1) | 0.506(0.013) | 0.310(0.006) | 0.934(0.004)
""", notes=["The caption's 'JRM' is read as JRD.", "Recall@1 is on the ten-subset protocol of Table 2 "
            "(JRD 0.506 here, 50.7 there)."], spread="ci95", **_JRD),
    "4": _table("4", "cub200", "Recall@K (%) of JRD with common reproducing kernels on CUB; alpha searched per "
                "kernel.", ["R@1", "R@2", "R@4", "R@8"], """
Gaussian (alpha 1) | 67.9 | 78.5 | 86.1 | 91.2
Laplace (alpha 1) | 68.1 | 78.2 | 86.4 | 91.8
Polynomial p=2 (alpha 1e-3) | 66.1 | 77.0 | 85.3 | 90.9
Polynomial p=5 (alpha 1e-3) | 65.2 | 76.2 | 86.4 | 90.7
Exponential (alpha 1e-3) | 66.1 | 76.7 | 85.4 | 91.1
""", notes=["The Gaussian row has Table 1's JRD R@1 (67.9) but R@2-R@8 lower by 0.1-0.2.",
            "Polynomial p=5 R@4 (86.4) is above Gaussian's although its R@1 is the lowest; kept as printed."],
                **_JRD),
}
JRD_TABLES["4"]["alphas"] = {"Gaussian (alpha 1)": 1.0, "Laplace (alpha 1)": 1.0, "Polynomial p=2 (alpha 1e-3)": 1e-3,
                             "Polynomial p=5 (alpha 1e-3)": 1e-3, "Exponential (alpha 1e-3)": 1e-3}

#: All reported tables, keyed by ``(paper key, table number)``.
TABLES: dict[tuple[str, str], dict] = {("chen2022cml", k): v for k, v in CML_TABLES.items()}
TABLES.update({("chen2019deml", k): v for k, v in DEML_TABLES.items()})
TABLES.update({("chu2020jrd", k): v for k, v in JRD_TABLES.items()})

_ADAPT_ADV = dict(paper="alkaabi2022adaptadv", citation="Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022")
_ADAPT_ADV_NOTE = ("Means of five runs (Sec. 5.4); the paper prints no spread. GoogLeNet (Inception) backbone pretrained on "
                   "ImageNet; Flowers-102 classes 1-51 train, 52-102 evaluation (its Table 1), as zslib's real profile.")

#: Adapt-Adv's Flowers-102 tables (Al-Kaabi et al. 2022, ``alkaabi2022adaptadv``), read from
#: ``/work/shared/seeds/AdaptAdv_general_discriminative_feature_class_adversarial.txt``. Rows are
#: ``"<loss> / <extension>"``; "Energy" is CML's energy confusion (ECAML) added to the loss.
ADAPT_ADV_TABLES: dict[str, dict] = {
    "5": _table("5", "flowers102", "Information retrieval in a zero-shot setting on Oxford 102 Flowers (unseen classes).",
                ["R@1", "R@2", "R@4", "R@8", "kNN-Acc", "NMI"], """
Triplet / Base | 81.55 | 88.89 | 93.59 | 96.58 | 82.22 | 70.16
Triplet / Energy | 78.24 | 86.28 | 92.02 | 96.05 | 80.24 | 68.42
Triplet / Adapt-Adv | 89.32 | 94.26 | 96.48 | 97.84 | 90.39 | 76.59
Angular / Base | 84.89 | 90.89 | 94.63 | 97.12 | 86.17 | 72.39
Angular / Energy | 85.21 | 90.81 | 94.31 | 96.8 | 85.93 | 71.39
Angular / Adapt-Adv | 89.64 | 93.94 | 96.56 | 98.16 | 90.31 | 76.05
Proxy-NCA / Base | 86.3 | 91.24 | 95.33 | 97.38 | 88.38 | 73.79
Proxy-NCA / Energy | 87.42 | 92.26 | 95.59 | 97.68 | 88.44 | 75.42
Proxy-NCA / Proxy-Syn | 87.76 | 93.38 | 95.91 | 97.7 | 88.54 | 74.27
Proxy-NCA / Adapt-Adv | 91.67 | 95.27 | 97.62 | 98.69 | 92.42 | 80.46
""", notes=[_ADAPT_ADV_NOTE], **_ADAPT_ADV),
    "6": _table("6", "flowers102", "Ablation of general discriminative feature learning (GDFL) and the class adversarial "
                "module, triplet loss, Oxford 102 Flowers (unseen classes).",
                ["NMI", "R@1", "R@2", "R@4", "R@8", "kNN-Acc"], """
Triplet / Base | 70.16 | 81.55 | 88.89 | 93.59 | 96.58 | 82.22
Triplet / +GDFL | 73.66 | 86.41 | 91.86 | 95.09 | 97.6 | 88.12
Triplet / +Adv | 72.73 | 84.54 | 90.68 | 94.71 | 97.36 | 86.03
Triplet / Adapt-Adv | 76.59 | 89.32 | 94.26 | 96.48 | 97.84 | 90.39
""", notes=[_ADAPT_ADV_NOTE, "The paper's row names are Base, Tri+GDFL, Tri+Adv and Adapt-Adv."], **_ADAPT_ADV),
}

#: All reported tables, keyed by ``(paper key, table number)``.
TABLES.update({("alkaabi2022adaptadv", k): v for k, v in ADAPT_ADV_TABLES.items()})


# ----------------------------------------------------------------------------------------------------
# ZSML (Xu, Cao, Yang, Yang and Deng, IJCAI 2019, ``xu2019zsml``): clustering of fixed HOG+GIST+LBP features
# (ACC / NMI / purity in %), "A -> B" = trained on A, tested on B. Tables are numbered in arabic as printed.


def _pair_columns(first: str, second: str) -> list[str]:
    return [f"{d} {m}" for d in (first, second) for m in ("ACC", "NMI", "Purity")]


def _zsml(table, dataset, caption, columns, text, notes=()):
    return _table(table, dataset, caption, columns, text, notes, paper="xu2019zsml",
                  citation="Xu, Cao, Yang, Yang and Deng, IJCAI 2019")


_ZSML_MLCA_NOTE = ("MLCA's purity on Caltech -> COIL (1.97) is below 1/20, the least any clustering of 20 balanced "
                   "classes can reach, so at least that cell is a typo; kept as printed.")

ZSML_TABLES: dict[str, dict] = {
    "3": _zsml("3", "caltech101, imagenet20", "Intra-dataset transfer: trained on some classes, clustered the 7 "
               "held-out classes of the same dataset.", _pair_columns("Caltech->Caltech", "ImageNet->ImageNet"), """
Euclidean | 53.66 | 43.76 | 83.65 | 39.43 | 19.68 | 39.52
ITML | 42.74 | 5.76 | 54.14 | 21.02 | 13.26 | 25.38
LMNN | 52.37 | 44.54 | 83.58 | 45.81 | 29.56 | 33.22
GMML | 66.28 | 54.03 | 86.77 | 43.12 | 27.58 | 31.92
MLCA | 52.51 | 14.98 | 56.72 | 38.46 | 22.34 | 34.11
Ours | 66.28 | 58.11 | 90.57 | 51.81 | 33.79 | 51.81
"""),
    "4": _zsml("4", "coil20, imagenet20", "Inter-dataset transfer: trained on Caltech, clustered COIL and ImageNet.",
               _pair_columns("Caltech->COIL", "Caltech->ImageNet"), """
Euclidean | 61.81 | 75.86 | 67.22 | 39.43 | 19.68 | 39.52
ITML | 12.92 | 10.21 | 13.89 | 18.38 | 3.24 | 18.95
LMNN | 58.33 | 79.01 | 69.10 | 46.00 | 31.93 | 49.62
GMML | 71.94 | 89.75 | 80.00 | 36.00 | 21.27 | 39.62
MLCA | 9.86 | 8.85 | 1.97 | 20.00 | 3.82 | 20.67
Ours | 75.97 | 88.63 | 83.13 | 57.72 | 40.24 | 58.29
""", notes=(_ZSML_MLCA_NOTE,)),
    "5": _zsml("5", "msrc_v1, caltech101", "Inter-dataset transfer: trained on Caltech (ImageNet), clustered MSRC "
               "(Caltech).", _pair_columns("Caltech->MSRC", "ImageNet->Caltech"), """
Euclidean | 63.75 | 63.41 | 68.75 | 53.66 | 43.76 | 83.65
ITML | 16.25 | 4.68 | 17.08 | 11.13 | 2.08 | 7.88
LMNN | 75.00 | 74.96 | 80.83 | 45.00 | 43.66 | 40.62
GMML | 63.75 | 63.41 | 68.75 | 43.25 | 43.41 | 40.29
MLCA | 16.67 | 6.45 | 18.75 | 21.61 | 13.42 | 20.75
Ours | 84.58 | 78.49 | 84.58 | 55.32 | 46.36 | 85.89
"""),
    "6": _zsml("6", "cub200", "ZSML on top of a Lifted-structure embedding, CUB-200-2011 seen -> unseen classes "
               "(Recall@K in %, Lifted's protocol).", ["R@1", "R@2", "R@4", "R@8"], """
Lifted | 47.2 | 58.9 | 70.2 | 80.2
Lifted+Ours | 48.9 | 59.3 | 72.1 | 83.9
"""),
    "7": _zsml("7", "imagenet20, msrc_v1", "Number of relation kernels k (alpha = 0.3), inter-dataset transfer.",
               _pair_columns("Caltech->ImageNet", "Caltech->MSRC"), """
k = 16 | 49.71 | 35.00 | 52.59 | 81.22 | 76.56 | 77.33
k = 64 | 51.88 | 38.48 | 54.47 | 81.36 | 72.11 | 79.13
k = 96 | 57.72 | 40.24 | 58.29 | 84.58 | 78.49 | 84.58
k = 128 | 52.14 | 40.72 | 55.29 | 84.50 | 77.29 | 83.23
"""),
    "8": _zsml("8", "imagenet20, msrc_v1", "Label range alpha (beta = 1 - alpha, k = 96), inter-dataset transfer.",
               _pair_columns("Caltech->ImageNet", "Caltech->MSRC"), """
alpha = 0.1 | 52.48 | 35.69 | 52.57 | 66.25 | 64.27 | 66.25
alpha = 0.2 | 52.61 | 38.47 | 48.94 | 78.96 | 77.26 | 78.90
alpha = 0.3 | 57.72 | 40.24 | 58.29 | 84.58 | 78.49 | 84.58
alpha = 0.4 | 54.88 | 38.48 | 54.47 | 83.53 | 76.84 | 84.02
"""),
    "9": _zsml("9", "coil20, imagenet20", "Linear relation (x_i - x_j) with the regression loss, against LMNN and "
               "GMML.", _pair_columns("Caltech->COIL", "Caltech->ImageNet"), """
LMNN | 58.33 | 79.01 | 69.10 | 46.00 | 31.93 | 49.62
GMML | 71.94 | 89.75 | 80.00 | 36.00 | 21.27 | 39.62
LR+Reloss | 77.57 | 91.46 | 84.44 | 49.62 | 32.95 | 49.62
"""),
}

#: All reported tables, keyed by ``(paper key, table number)``.
TABLES.update({("xu2019zsml", k): v for k, v in ZSML_TABLES.items()})


def reported_table(table: str, paper: str = "chen2022cml") -> dict:
    """A deep copy of one reported table, e.g. ``reported_table("IV")`` (CML's CUB table)."""
    key = (str(paper), str(table).upper())
    if key not in TABLES:
        known = sorted(t for p, t in TABLES if p == paper)
        raise KeyError(f"no reported Table {table!r} for paper {paper!r}; available: {known}")
    return copy.deepcopy(TABLES[key])


def reported_value(table: str, method: str, column: str, paper: str = "chen2022cml"):
    """One reported number (``None`` when the paper gives none), e.g. ``reported_value("IV", "CML (Tri)", "R@1")``."""
    t = reported_table(table, paper)
    if column not in t["columns"]:
        raise KeyError(f"Table {table} has no column {column!r}; it has {t['columns']}")
    for row in t["rows"]:
        if row["method"] == method:
            return row[column]
    raise KeyError(f"Table {table} has no row {method!r}; rows: {[r['method'] for r in t['rows']]}")


def reported_frame(table: str, paper: str = "chen2022cml", with_std: bool = False):
    """The table as a pandas DataFrame indexed by method; ``with_std`` adds ``"<col> std"`` columns (and
    ``"<col> ci95"`` for tables that print 95% confidence half-widths)."""
    t = reported_table(table, paper)
    frame = pd.DataFrame(t["rows"]).set_index("method")
    if with_std:
        for col in t["columns"]:
            frame[f"{col} std"] = [t["std"][m][col] for m in frame.index]
            if "ci95" in t:
                frame[f"{col} ci95"] = [t["ci95"][m][col] for m in frame.index]
    frame.attrs["citation"] = t["citation"]
    return frame


#: Context, not one of the five papers: Recall@1 (CMC@1) of *frozen* off-the-shelf features and of a ViT-S/16 trained
#: on each dataset's seen classes, as the Open Metric Learning project reports them for 224 x 224 px images (README,
#: "Zoo"; ``oml2023zoo``). Its splits and bounding-box use may differ from the papers' (the project says so).
CONTEXT_ZOO: dict = {
    "citation": "oml2023zoo",
    "columns": ["CUB-200", "Cars196", "SOP", "In-Shop"],
    "rows": [
        {"features": "ViT-S/16 trained on the dataset's seen classes", "kind": "trained",
         "CUB-200": 0.837, "Cars196": 0.907, "SOP": 0.866, "In-Shop": 0.921},
        {"features": "DINOv2 ViT-B/14, frozen", "kind": "frozen",
         "CUB-200": 0.842, "Cars196": 0.644, "SOP": 0.565, "In-Shop": 0.342},
        {"features": "DINOv2 ViT-L/14 with registers, frozen", "kind": "frozen",
         "CUB-200": 0.840, "Cars196": 0.871, "SOP": 0.571, "In-Shop": 0.340},
        {"features": "CLIP ViT-L/14 (OpenAI), frozen", "kind": "frozen",
         "CUB-200": 0.745, "Cars196": 0.844, "SOP": 0.670, "In-Shop": 0.675},
        {"features": "ResNet-50 ImageNet-1k, frozen", "kind": "frozen",
         "CUB-200": 0.455, "Cars196": 0.247, "SOP": 0.515, "In-Shop": 0.284},
    ],
}


def context_frame():
    """:data:`CONTEXT_ZOO` as a DataFrame in percent, with a last row per dataset: the trained row minus the best
    frozen row (positive: training on the seen classes still pays there)."""
    t = CONTEXT_ZOO
    frame = pd.DataFrame(t["rows"]).set_index("features")
    cols = t["columns"]
    frame[cols] = 100 * frame[cols]
    trained = frame[frame.kind == "trained"][cols].max()
    frozen = frame[frame.kind == "frozen"][cols].max()
    frame.loc["trained minus best frozen (points)"] = ["", *(trained - frozen).round(1)]
    frame.attrs["citation"] = t["citation"]
    return frame


def paper_tables(bibkey: str) -> dict:
    """``{table: data}``: the reported tables of the paper ``bibkey`` (what its :class:`~zslib.engine.paper.Paper`
    record's ``reported()`` returns)."""
    return {table: data for (paper, table), data in TABLES.items() if paper == bibkey}
