"""The DeML main page's quick-profile results (Chen and Deng, CVPR 2019; ``chen2019deml``): the random walk of the
object attention checked (Eqs. 2-3), the quick experiment (Tables 1, 2 and 4 in miniature), the paper's gains beside
it and the learners' similarity (Table 4). Each ``*_section`` returns a :class:`~zslib.present.base.Section`; every
sentence is written from the numbers.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from zslib.engine.data import SynthParts
from zslib.engine.models import build_model, normalization
from zslib.engine.stats import format_interval, interval, paired, summarize, verdict
from zslib.methods.deml.analyses import unseen_embeddings
from zslib.methods.deml.method import split_learners
from zslib.methods.deml.object_attention import convergence_gap, object_attention
from zslib.present.base import Section, Sections
from zslib.reported import reported_frame

__all__ = ["synth_normalize", "walk_map", "walk_section", "table_row", "quick_table", "quick_section",
           "quick_pairs", "paper_gains", "comparison_section", "reported_section", "learner_similarity",
           "learner_similarities", "similarity_section"]


def synth_normalize(x: torch.Tensor) -> torch.Tensor:
    """SynthParts images normalized as the SmallCNN reads them."""
    mean, std = (torch.tensor(v)[:, None, None] for v in normalization("smallcnn"))
    return (x - mean) / std


def walk_map() -> torch.Tensor:
    """The map the random-walk section checks Eqs. 2-3 on: one SynthParts image of the unseen classes (48 px)
    through an untrained SmallCNN (torch seed 0), its ``stage3`` map ``(1, 64, 6, 6)`` in float64."""
    torch.manual_seed(0)
    x, _ = SynthParts("unseen", image_size=48, images_per_class=2).tensors()
    torch.manual_seed(0)
    cnn = build_model("smallcnn", 64, widths=[16, 32, 64, 128]).eval()
    with torch.no_grad():
        return cnn.features(synth_normalize(x[:1]), ["stage3"])["stage3"].double()


def walk_section(fmap: torch.Tensor, P: np.ndarray, eigen_pi: np.ndarray) -> Section:
    """How fast the random walk of DeML's OAM (Eqs. 2-3) reaches its limit on ``fmap``: ``P`` is the transition
    matrix of Eq. 2's graph (its rows must sum to one), ``eigen_pi`` the limit as the chapter computed it (the
    eigenvector of ``P^T`` for the eigenvalue 1). The walk's distance to it after 10 steps, the total-variation gap
    after T steps against the second eigenvalue's modulus; the outcome is the section's text."""
    assert np.allclose(P.sum(1), 1), "P must be a transition matrix: every row sums to one"
    walk10 = object_attention(fmap, 10).flatten().numpy()
    second = np.sort(np.abs(np.linalg.eigvals(P)))[-2]
    gaps = {t: float(convergence_gap(fmap, t)[0]) for t in (1, 2, 5, 10)}
    per_step = (gaps[10] / gaps[1]) ** (1 / 9)  # the gap's mean shrinking factor per step from T = 1 to T = 10
    return Section(notes=[
        f"After T = 10 steps the walk m ← Pᵀ m is {np.abs(walk10 - eigen_pi).max():.1e} from the eigenvector. "
        "The total-variation gap to π after T steps is "
        + ", ".join(f"{g:.1e} (T = {t})" for t, g in gaps.items())
        + f": it shrinks by a factor of about {per_step:.2f} per step, against the second eigenvalue's modulus "
        f"{second:.3f}."
        + (" On a complete graph of dissimilarities the chain mixes within a few steps, so the paper's T = 10 is, "
           "in practice, the stationary distribution." if gaps[10] < 1e-6 else "")])


def table_row(name: str, rs, versus: Mapping, metrics=(("unseen", "R@1"), ("seen", "R@1"))) -> dict:
    """One table row: ``metrics`` of the runs ``rs`` (95% intervals over seeds), then for each ``(label, runs)`` of
    ``versus`` the paired difference ``rs - runs`` in points and its verdict (empty where ``runs`` is ``rs``)."""
    row = {"variant": name}
    row.update({f"{split} {metric} %": format_interval(summarize(rs, metric, split)) for split, metric in metrics})
    for k, (label, other) in enumerate(versus.items()):
        p = None if other is None or other is rs else paired(other, rs)
        row[f"vs {label} (pts)"] = format_interval(p.diff, signed=True) if p else ""
        row["verdict" + " " * k] = p.verdict if p else ""
    return row


def quick_table(runs: Mapping) -> pd.DataFrame:
    """The quick experiment per arm: unseen Recall@1 and NMI, seen Recall@1 (95% intervals over seeds) and
    the paired difference to U_d with its verdict (the analogue of the paper's Tables 1, 2 and 4)."""
    metrics = (("unseen", "R@1"), ("unseen", "NMI"), ("seen", "R@1"))
    rows = [table_row(name, rs, {"U_d": runs["U_d"]}, metrics) for name, rs in runs.items()]
    return pd.DataFrame(rows).rename(columns={"variant": "arm"}).set_index("arm")


def quick_section(runs: Mapping) -> Section:
    """:func:`quick_table` as the page shows it."""
    return Section(table=quick_table(runs))


def quick_pairs(runs: Mapping) -> dict:
    """The paired comparisons the chapter reads off the quick experiment (each: second arm minus first)."""
    return {"L_act": paired(runs["U_d"], runs["U_d + L_act"]), "J=4": paired(runs["U_d"], runs["DeML(1,4)"]),
            "L_adv": paired(runs["DeML(1,4) no L_adv"], runs["DeML(1,4)"]),
            "J=4 vs L_act": paired(runs["U_d + L_act"], runs["DeML(1,4)"])}


def paper_gains() -> dict:
    """The paper's gains on CUB in Recall@1 points (``zslib.reported``): activation decay (Table 1, U512),
    four and eight CAM learners and a second scale over DeML(1, 1) (Table 2, column H), the adversary for
    J = 8 (Table 4)."""
    t1, t2, t4 = (reported_frame(t, "chen2019deml") for t in ("1", "2-cub200", "4-cub200"))
    return {"L_act": float(t1.loc["U512+L_act", "CUB R@1"] - t1.loc["U512", "CUB R@1"]),
            "J=4": float(t2.loc["DeML(1,4)", "H"] - t2.loc["DeML(1,1)", "H"]),
            "I=2": float(t2.loc["DeML(2,1)", "H"] - t2.loc["DeML(1,1)", "H"]),
            "J=8 over J=4": float(t2.loc["DeML(1,8)", "H"] - t2.loc["DeML(1,4)", "H"]),
            "L_adv": float(t4.loc["DeML(1,8)", "R@1"] - t4.loc["DeML(1,8) without L_adv", "R@1"])}


def comparison_section(runs: Mapping) -> Section:
    """Each of the paper's claims the quick experiment tests, beside the paper's gain on CUB (Tables 1, 2 and
    4): this run's paired difference in unseen Recall@1 points, its 95% interval and verdict."""
    pairs, gain = quick_pairs(runs), paper_gains()
    rows = [("activation decay (U_d + L_act minus U_d)", gain["L_act"], pairs["L_act"]),
            ("four CAM learners (DeML(1,4) minus U_d)", gain["J=4"], pairs["J=4"]),
            ("four CAM learners (DeML(1,4) minus U_d + L_act)", None, pairs["J=4 vs L_act"]),
            ("the adversary (DeML(1,4) minus DeML(1,4) no L_adv)", gain["L_adv"], pairs["L_adv"]),
            ("a second scale (DeML(2,1) minus DeML(1,1))", gain["I=2"], None)]
    return Section(table=pd.DataFrame([
        {"claim": claim, "paper, CUB (pts)": "" if g is None else f"{g:+.1f}",
         "this run (pts)": "not trained" if p is None else format_interval(p.diff, signed=True),
         "verdict": "" if p is None else p.verdict} for claim, g, p in rows]).set_index("claim"))


def reported_section() -> Sections:
    """The paper's Tables 1, 2 (CUB) and 4 (CUB) as data (``zslib.reported``), each under its citation."""
    return Sections(Section(paper=(("chen2019deml", table),)) for table in ("1", "2-cub200", "4-cub200"))


def learner_similarity(model, e: torch.Tensor) -> float:
    """Table 4's similarity: the mean cosine between the unit-length outputs of two different learners of
    the same image (``e``: the model's evaluation embeddings), averaged over the pairs and the images."""
    parts = split_learners(e, model.num_scales, model.num_learners)[:, 0]  # (n, J, d_l), unit rows
    cos = torch.einsum("njd,nkd->njk", parts, parts)
    j = parts.shape[1]
    return float((cos.sum((1, 2)) - j).mean() / (j * (j - 1)))


def learner_similarities(runs: Mapping) -> dict:
    """``{arm: [similarity per seed]}`` of :func:`learner_similarity` on the unseen classes, for DeML(1, 4)
    with and without the adversary (Table 4's comparison)."""
    names = ("DeML(1,4)", "DeML(1,4) no L_adv")
    models, embedded, _ = unseen_embeddings(runs, names, runs["U_d"][0])
    return {name: [learner_similarity(m, e) for m, (e, _) in zip(models[name], embedded[name])] for name in names}


def similarity_section(sim: Mapping) -> Section:
    """The learners' mean cosine similarity with and without the adversary (95% intervals over seeds) and
    the paired difference, beside the paper's Table 4 (-0.08 and 0.92)."""
    with_, without = sim["DeML(1,4)"], sim["DeML(1,4) no L_adv"]
    diff = interval([a - b for a, b in zip(with_, without)])

    def iv(v):
        return format_interval(summarize(v), scale=1, digits=2)

    return Section(notes=[
        f"Mean cosine between the learners of an unseen image, over {len(with_)} seeds: "
        f"**{iv(with_)}** with the adversary and **{iv(without)}** without it (the paper: -0.08 and 0.92). "
        f"With minus without, paired by seed: {format_interval(diff, scale=1, digits=2, signed=True)} "
        f"({verdict(diff)})."])
