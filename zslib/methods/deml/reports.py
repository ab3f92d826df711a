"""The DeML chapter's report plumbing (Chen & Deng, CVPR 2019): tables, figures and text made from runs.

A chapter calls these in one line; the paper's math stays in the modules beside this one. The main page
(``book/deml.ipynb``) uses the random-walk check, the quick experiment (Tables 1, 2 and 4 in miniature), the
learners' similarity (Table 4) and the real-profile comparison; the experiments page
(``book/deml_experiments.ipynb``) uses the rest: the paper's tables in full, the object attention scored on
SynthParts, the attribute probes, the validation check of the adversary's weight, the two extra arms, and
Fig. 4 (a) and (b) on photographs. Every sentence a page states is written here from the numbers.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from zslib.methods.deml.recipes import (BASE, DEML4, DEML8, FLOOR, LAMBDA0S, VAL_SEEDS, VALIDATION,
                                      real_arm_configs, real_configs)

__all__ = ["QUICK_ARMS", "quick_grid", "walk_map", "walk_check", "quick_table", "paper_gains", "paper_comparison",
           "reported_tables", "learner_similarity", "learner_similarities", "similarity_text",
           "localization_table", "localization_text", "attention_figure", "hard_attribute_probe", "probe_text",
           "real_configs", "real_arm_configs", "real_runs", "real_table", "real_text", "real_runs_table",
           "lambda0_check", "arms_table", "photo_figures", "full_profile_text", "oam_on_photographs",
           "attention_explorer", "cam_records", "cam_table", "cam_text", "cam_figure", "main_found",
           "experiments_found", "key_findings"]

#: The quick experiment's arms: ``method_params`` of ``method="deml"`` (Tables 1, 2 and 4 in miniature).
QUICK_ARMS = {
    "U_d": {"cam": False, "lambda1": 0.0, "lambda2": 0.0},
    "U_d + L_act": {"cam": False},
    "DeML(1,4)": {"learners": 4},
    "DeML(1,4) no L_adv": {"learners": 4, "adversary": "none"},
}

#: The object-attention variants scored on SynthParts: (layers, options of ``object_attention_map``).
LOC_VARIANTS = {"stage3, T=10": (["stage3"], {}), "stage4, T=10": (["stage4"], {}),
                "both, T=1": (["stage3", "stage4"], {"steps": 1}), "both, T=10 (paper)": (["stage3", "stage4"], {}),
                "both, exact pi": (["stage3", "stage4"], {"steps": None}),
                "both, T=10, Gaussian 0.15": (["stage3", "stage4"], {"spatial_sigma": 0.15}),
                "literal Eq. 3": (["stage3", "stage4"], {"reading": "literal"})}

#: The rows of the CAM table: label -> key of the ``learner_attention`` analysis records.
CAM_ROWS = {"channel corr., two learners, same image": "channel_corr",
            "channel corr., one learner, two images": "channel_corr_images",
            "spread of a CAM's weights (sd)": "weight_spread",
            "top-64 channel overlap (Jaccard)": "top_overlap",
            "evidence-map corr., two learners": "map_corr",
            "evidence-map corr., learner vs unweighted map": "map_corr_activation"}

_MOVED = {"up": "raised", "down": "lowered"}


def _md(text: str):
    from IPython.display import Markdown

    return Markdown(text)


def _show(obj) -> None:
    from IPython.display import display

    display(obj)


def _fmt3(iv) -> str:
    from zslib.engine.stats import format_interval

    return format_interval(iv, scale=1, digits=3)


def _training_real() -> bool:
    """Whether this build trains the real-profile runs (it does under ``ZS_PROFILE=real``)."""
    from zslib.engine.profile import get_profile

    return get_profile().name == "real"


# -- the quick experiment -------------------------------------------------------------------------------------

def quick_grid(profile) -> dict:
    """``{arm: Config}`` of the quick experiment: the profile's network and steps with Eq. 5's loss
    (``binomial_deml``), evaluated once at the end, ``method="deml"`` with :data:`QUICK_ARMS`; on the full
    profile the paper's training settings (``DEML_TRAINING``, 504 dimensions so that nine learners get 56 each)."""
    from zslib.engine.config import Config

    base = Config.from_profile(profile, eval_every=profile.iterations, loss="binomial_deml", method="deml")
    if profile.name == "full":
        from zslib.methods.deml.method import DEML_TRAINING

        base = Config.from_profile(profile, **{**DEML_TRAINING, "embedding_dim": 504}, method="deml")
    return {name: base.replace(method_params=p) for name, p in QUICK_ARMS.items()}


def _synth_normalize(x: torch.Tensor) -> torch.Tensor:
    """SynthParts images normalized as the SmallCNN reads them."""
    from zslib.engine.models import normalization

    mean, std = (torch.tensor(v)[:, None, None] for v in normalization("smallcnn"))
    return (x - mean) / std


def walk_map() -> torch.Tensor:
    """The map the random-walk section checks Eqs. 2-3 on: one SynthParts image of the unseen classes (48 px)
    through an untrained SmallCNN (torch seed 0), its ``stage3`` map ``(1, 64, 6, 6)`` in float64."""
    from zslib.engine.data import SynthParts
    from zslib.engine.models import build_model

    torch.manual_seed(0)
    x, _ = SynthParts("unseen", image_size=48, images_per_class=2).tensors()
    torch.manual_seed(0)
    cnn = build_model("smallcnn", 64, widths=[16, 32, 64, 128]).eval()
    with torch.no_grad():
        return cnn.features(_synth_normalize(x[:1]), ["stage3"])["stage3"].double()


def walk_check(fmap: torch.Tensor, P: np.ndarray):
    """The random walk of DeML's OAM (Eqs. 2-3) checked on ``fmap`` against an independent computation: the
    rows of ``P`` (the transition matrix of Eq. 2's graph) sum to one; the literal reading ``M <- P M`` leaves
    the uniform start where it is; the walk ``m <- P^T m`` reaches the closed-form limit ``pi = d / 1^T d``,
    which equals the eigenvector of ``P^T`` for the eigenvalue 1; and the gap to ``pi`` shrinks with the
    second eigenvalue. Raises if any of it fails; returns the outcome as Markdown."""
    from zslib.methods.deml.object_attention import convergence_gap, object_attention

    vals, vecs = np.linalg.eig(P.T)
    top = np.argmax(vals.real)
    eigen_pi = np.abs(vecs[:, top].real) / np.abs(vecs[:, top].real).sum()
    literal = object_attention(fmap, 10, reading="literal").flatten().numpy()
    walk10 = object_attention(fmap, 10).flatten().numpy()
    exact = object_attention(fmap, None).flatten().numpy()
    n = P.shape[0]
    still, exact_err = np.abs(literal - 1 / n).max(), np.abs(exact - eigen_pi).max()
    assert np.allclose(P.sum(1), 1) and abs(vals[top].real - 1) < 1e-10
    assert still < 1e-12 and exact_err < 1e-10
    second = np.sort(np.abs(vals))[-2]
    gaps = {t: float(convergence_gap(fmap, t)[0]) for t in (1, 2, 5, 10)}
    per_step = (gaps[10] / gaps[1]) ** (1 / 9)  # the gap's mean shrinking factor per step from T = 1 to T = 10
    return _md(
        f"On this map ({n} positions) every row of P sums to one and the dominant eigenvalue of Pᵀ is "
        f"{vals[top].real:.6f}. The literal reading M ← P M stays at the uniform 1/n for 10 steps (largest "
        f"deviation {still:.1e}, rounding). The walk m ← Pᵀ m has the closed-form limit π = d / 1ᵀd, which matches "
        f"the eigenvector to {exact_err:.1e}, and after T = 10 steps the walk is "
        f"{np.abs(walk10 - eigen_pi).max():.1e} from it. The total-variation gap to π after T steps is "
        + ", ".join(f"{g:.1e} (T = {t})" for t, g in gaps.items())
        + f": it shrinks by a factor of about {per_step:.2f} per step, against the second eigenvalue's modulus "
        f"{second:.3f}."
        + (" On a complete graph of dissimilarities the chain mixes within a few steps, so the paper's T = 10 is, "
           "in practice, the stationary distribution." if gaps[10] < 1e-6 else ""))


def _row(name: str, rs, versus: Mapping, metrics=(("unseen", "R@1"), ("seen", "R@1"))) -> dict:
    """One table row: ``metrics`` of the runs ``rs`` (95% intervals over seeds), then for each ``(label, runs)`` of
    ``versus`` the paired difference ``rs - runs`` in points and its verdict (empty where ``runs`` is ``rs``)."""
    from zslib.engine.stats import format_interval, paired, summarize

    row = {"variant": name}
    row.update({f"{split} {metric} %": format_interval(summarize(rs, metric, split)) for split, metric in metrics})
    for k, (label, other) in enumerate(versus.items()):
        p = None if other is None or other is rs else paired(other, rs)
        row[f"vs {label} (pts)"] = format_interval(p.diff, signed=True) if p else ""
        row["verdict" + " " * k] = p.verdict if p else ""
    return row


def quick_table(runs: Mapping):
    """The quick experiment per arm: unseen Recall@1 and NMI, seen Recall@1 (95% intervals over seeds) and
    the paired difference to U_d with its verdict (the analogue of the paper's Tables 1, 2 and 4)."""
    import pandas as pd

    metrics = (("unseen", "R@1"), ("unseen", "NMI"), ("seen", "R@1"))
    rows = [_row(name, rs, {"U_d": runs["U_d"]}, metrics) for name, rs in runs.items()]
    return pd.DataFrame(rows).rename(columns={"variant": "arm"}).set_index("arm")


def _quick_pairs(runs: Mapping) -> dict:
    """The paired comparisons the chapter reads off the quick experiment (each: second arm minus first)."""
    from zslib.engine.stats import paired

    return {"L_act": paired(runs["U_d"], runs["U_d + L_act"]), "J=4": paired(runs["U_d"], runs["DeML(1,4)"]),
            "L_adv": paired(runs["DeML(1,4) no L_adv"], runs["DeML(1,4)"]),
            "J=4 vs L_act": paired(runs["U_d + L_act"], runs["DeML(1,4)"])}


def paper_gains() -> dict:
    """The paper's gains on CUB in Recall@1 points (``zslib.reported``): activation decay (Table 1, U512),
    four and eight CAM learners and a second scale over DeML(1, 1) (Table 2, column H), the adversary for
    J = 8 (Table 4)."""
    from zslib.reported import reported_frame

    t1, t2, t4 = (reported_frame(t, "chen2019deml") for t in ("1", "2-cub200", "4-cub200"))
    return {"L_act": float(t1.loc["U512+L_act", "CUB R@1"] - t1.loc["U512", "CUB R@1"]),
            "J=4": float(t2.loc["DeML(1,4)", "H"] - t2.loc["DeML(1,1)", "H"]),
            "I=2": float(t2.loc["DeML(2,1)", "H"] - t2.loc["DeML(1,1)", "H"]),
            "J=8 over J=4": float(t2.loc["DeML(1,8)", "H"] - t2.loc["DeML(1,4)", "H"]),
            "L_adv": float(t4.loc["DeML(1,8)", "R@1"] - t4.loc["DeML(1,8) without L_adv", "R@1"])}


def paper_comparison(runs: Mapping):
    """Each of the paper's claims the quick experiment tests, beside the paper's gain on CUB (Tables 1, 2 and
    4): this run's paired difference in unseen Recall@1 points, its 95% interval and verdict."""
    import pandas as pd

    from zslib.engine.stats import format_interval

    pairs, gain = _quick_pairs(runs), paper_gains()
    rows = [("activation decay (U_d + L_act minus U_d)", gain["L_act"], pairs["L_act"]),
            ("four CAM learners (DeML(1,4) minus U_d)", gain["J=4"], pairs["J=4"]),
            ("four CAM learners (DeML(1,4) minus U_d + L_act)", None, pairs["J=4 vs L_act"]),
            ("the adversary (DeML(1,4) minus DeML(1,4) no L_adv)", gain["L_adv"], pairs["L_adv"]),
            ("a second scale (DeML(2,1) minus DeML(1,1))", gain["I=2"], None)]
    return pd.DataFrame([{"claim": claim, "paper, CUB (pts)": "" if g is None else f"{g:+.1f}",
                          "this run (pts)": "not trained" if p is None else format_interval(p.diff, signed=True),
                          "verdict": "" if p is None else p.verdict} for claim, g, p in rows]).set_index("claim")


def reported_tables() -> None:
    """The paper's Tables 1, 2 (CUB) and 4 (CUB) as data (``zslib.reported``), each under its citation."""
    from zslib.reported import reported_frame

    for table in ("1", "2-cub200", "4-cub200"):
        frame = reported_frame(table, "chen2019deml")
        _show(_md(f"*{frame.attrs['citation']}*"))
        _show(frame)


def learner_similarity(model, e: torch.Tensor) -> float:
    """Table 4's similarity: the mean cosine between the unit-length outputs of two different learners of
    the same image (``e``: the model's evaluation embeddings), averaged over the pairs and the images."""
    from zslib.methods.deml.method import split_learners

    parts = split_learners(e, model.num_scales, model.num_learners)[:, 0]  # (n, J, d_l), unit rows
    cos = torch.einsum("njd,nkd->njk", parts, parts)
    j = parts.shape[1]
    return float((cos.sum((1, 2)) - j).mean() / (j * (j - 1)))


def learner_similarities(runs: Mapping) -> dict:
    """``{arm: [similarity per seed]}`` of :func:`learner_similarity` on the unseen classes, for DeML(1, 4)
    with and without the adversary (Table 4's comparison)."""
    from zslib.methods.deml.analyses import unseen_embeddings

    names = ("DeML(1,4)", "DeML(1,4) no L_adv")
    models, embedded, _ = unseen_embeddings(runs, names, runs["U_d"][0])
    return {name: [learner_similarity(m, e) for m, (e, _) in zip(models[name], embedded[name])] for name in names}


def similarity_text(sim: Mapping):
    """The learners' mean cosine similarity with and without the adversary (95% intervals over seeds) and
    the paired difference, beside the paper's Table 4 (-0.08 and 0.92), as Markdown."""
    from zslib.engine.stats import format_interval, interval, summarize, verdict

    with_, without = sim["DeML(1,4)"], sim["DeML(1,4) no L_adv"]
    diff = interval([a - b for a, b in zip(with_, without)])
    iv = lambda v: format_interval(summarize(v), scale=1, digits=2)  # noqa: E731
    return _md(f"Mean cosine between the learners of an unseen image, over {len(with_)} seeds: "
               f"**{iv(with_)}** with the adversary and **{iv(without)}** without it (the paper: -0.08 and 0.92). "
               f"With minus without, paired by seed: {format_interval(diff, scale=1, digits=2, signed=True)} "
               f"({verdict(diff)}).")


# -- the object attention on SynthParts -----------------------------------------------------------------------

def _loc_images():
    from zslib.engine.data import SynthParts

    loc_set = SynthParts("unseen", image_size=48, images_per_class=4)
    xs, _ = loc_set.tensors()
    return xs, loc_set.object_masks(), loc_set.boxes


def localization_table(runs: Mapping) -> tuple:
    """Does the OAM find the bird (the paper's Fig. 4, scored)? The object attention of the trained U_d
    networks (one per seed) on SynthParts images of the unseen classes, for each of :data:`LOC_VARIANTS`
    (layers, steps T, the released code's Gaussian, the literal reading of Eq. 3), scored against the birds'
    masks and boxes (:func:`zslib.analysis.localization.localization_scores`), means over seeds. Returns the
    table and the chance levels with the counts (``seeds``, ``images``)."""
    import pandas as pd

    from zslib.analysis.localization import localization_scores
    from zslib.methods.deml.analyses import backbone_maps
    from zslib.methods.deml.object_attention import object_attention_map

    xs, masks, obj_boxes = _loc_images()
    loc_rows: dict = {}
    for r in runs["U_d"]:
        feats = backbone_maps(r, _synth_normalize(xs), ["stage3", "stage4"])
        for label, (layers, opts) in LOC_VARIANTS.items():
            att = object_attention_map([feats[l] for l in layers], 48, **opts)
            loc_rows.setdefault(label, []).append(localization_scores(att, masks, obj_boxes))
    table = pd.DataFrame({label: {"mass on bird": np.mean([s["mass_on_object"] for s in ss]),
                                  "lift over chance": np.mean([s["lift"] for s in ss]),
                                  "peak on bird": np.mean([s["peak_on_object"] for s in ss]),
                                  "crop IoU": np.mean([s["box_iou"] for s in ss])}
                          for label, ss in loc_rows.items()}).T
    chance = {**loc_rows["both, T=10 (paper)"][0], "seeds": len(runs["U_d"]), "images": len(xs)}
    return table, chance


def localization_text(table, chance: Mapping):
    """The chance levels of :func:`localization_table` and what the table shows, as Markdown."""
    return _md(f"Chance: a mass of {chance['area_share']:.3f} on the bird (its area share) and a crop IoU of "
               f"{chance['box_iou_full_image']:.3f} (the whole image). Means over {chance['seeds']} seeds and "
               f"{chance['images']} unseen images.")


def attention_figure(run):
    """Six SynthParts images with the OAM's crop box (T = 10, ``stage3`` and ``stage4`` of the trained U_d
    network ``run``), the attention map, and the zoomed crop a second scale would see."""
    import matplotlib.pyplot as plt

    from zslib.analysis.viz import attention_panels
    from zslib.methods.deml.analyses import backbone_maps
    from zslib.methods.deml.attention_crop import zoom_to_attention
    from zslib.methods.deml.object_attention import object_attention_map

    xs = _loc_images()[0][:6]
    f6 = backbone_maps(run, _synth_normalize(xs), ["stage3", "stage4"])
    att_show = object_attention_map([f6["stage3"], f6["stage4"]], 48)
    zoomed, crop_boxes = zoom_to_attention(xs, att_show, size=(48, 48))  # what a second scale would see
    attention_panels({"image + crop box": xs, "OAM (T=10)": att_show, "scale 2 input": zoomed},
                     {"image + crop box": [(crop_boxes, "yellow")]}, panels_as="rows", size=1.85)
    plt.show()


# -- partial learning: attribute probes -----------------------------------------------------------------------

def hard_attribute_probe(runs: Mapping) -> dict:
    """Partial learning, measured: a linear probe (:func:`zslib.analysis.probe.attribute_probe`, class-disjoint
    folds) reads each SynthParts attribute from the unseen-class embeddings of U_d + L_act and DeML(1, 4).
    Returns ``{"hard": [names], arm: [mean accuracy on the hard attributes, per seed]}`` (the hard
    attributes: all but the shortcut colours)."""
    from zslib.analysis.probe import attribute_probe
    from zslib.methods.deml.analyses import unseen_embeddings

    names = ("U_d + L_act", "DeML(1,4)")
    _, embedded, unseen = unseen_embeddings(runs, names, runs["U_d"][0])
    hard = [a for a in unseen.attribute_names if a not in unseen.shortcut_attributes]

    def hard_accuracy(e, lab):
        rep = attribute_probe(e, unseen.attributes, names=list(unseen.attribute_names), groups=lab.numpy(), folds=5,
                              C=0.1, max_per_group=10)
        return float(np.mean([rep.accuracy[a] for a in hard]))

    return {"hard": hard, **{name: [hard_accuracy(e, lab) for e, lab in embedded[name]] for name in names}}


def _probe_diff(probe: Mapping):
    from zslib.engine.stats import summarize

    return summarize([a - b for a, b in zip(probe["DeML(1,4)"], probe["U_d + L_act"])])


def probe_text(probe: Mapping):
    """The probe's mean accuracy on the hard attributes per arm and the paired difference, as Markdown."""
    from zslib.engine.stats import format_interval

    return _md(f"Hard attributes ({', '.join(f'`{a}`' for a in probe['hard'])}): mean probe accuracy "
               f"{np.mean(probe['U_d + L_act']):.3f} for U_d + L_act and {np.mean(probe['DeML(1,4)']):.3f} for "
               f"DeML(1,4); DeML(1,4) minus U_d + L_act, paired by seed: "
               f"{format_interval(_probe_diff(probe), scale=1, digits=3, signed=True)}.")


# -- the real profile ------------------------------------------------------------------------------------------

def real_runs(arms: bool = False) -> tuple:
    """``(floor, runs)`` of the real profile: ``floor`` ``{"pretrained": [run]}`` (seed 0) and ``runs``
    ``{"baseline": [...], "DeML(1,4)": [...]}`` (plus :func:`real_arm_configs` with ``arms``), each trained
    under ``ZS_PROFILE=real`` and read from the recorded runs otherwise; a row not recorded is left out (with a
    note) and ``floor`` is then ``None``."""
    from zslib.engine.grid import recorded_grid

    configs = real_configs()
    train = _training_real()
    floor = recorded_grid({FLOOR: configs[FLOOR]}, "the untrained features", (0,), train=train)
    runs = {}
    for name, config in {BASE: configs[BASE], DEML4: configs[DEML4], **(real_arm_configs() if arms else {})}.items():
        runs.update(recorded_grid({name: config}, name, train=train) or {})
    return floor, runs


def real_table(floor: Mapping | None, runs: Mapping):
    """The real-profile comparison: the untrained features (one run), then each trained row with unseen and
    seen Recall@1 (95% intervals over seeds) and its paired difference to the baseline head."""
    import pandas as pd

    rows = []
    if floor is not None:
        raw = floor["pretrained"][0]
        rows.append({"variant": "pretrained features, no training", "unseen R@1 %": f"{100 * raw.metric('R@1'):.1f}",
                     "seen R@1 %": f"{100 * raw.metric('R@1', 'seen'):.1f}", "vs baseline (pts)": "", "verdict": ""})
    rows += [_row(name, rs, {"baseline": runs.get("baseline")}) for name, rs in runs.items()]
    return pd.DataFrame(rows).set_index("variant")


def _provenance_line(name: str, rs) -> str:
    from zslib.engine.store import short_commit, utc_minute

    pv = rs[0].provenance
    trained = [r.provenance.get("train_seconds") or 0.0 for r in rs]
    threads = pv.get("torch_threads")
    return (f"**{name}**: {len(rs)} seeds, made on {pv.get('device')} with zslib {pv.get('zslib_version')}, commit "
            f"`{short_commit(pv.get('git_commit'))}`, {utc_minute(pv.get('timestamp'))}; {min(trained):.0f} to "
            f"{max(trained):.0f} s of training per run" + (f" ({threads} thread(s))" if threads else ""))


def real_text(floor: Mapping | None, runs: Mapping):
    """Where the real-profile runs come from (device, code, training time per row) and what training the
    head alone moved against the untrained features, as Markdown; what is missing when a row is not recorded."""
    from zslib.analysis.findings import Findings
    from zslib.engine.stats import summarize

    lines = [_provenance_line(name, rs) for name, rs in runs.items()]
    if floor is not None and "baseline" in runs:
        raw = floor["pretrained"][0].metric("R@1")
        lines.append(f"The trained baseline head against the untrained features: "
                     f"{100 * (summarize(runs['baseline'])[0] - raw):+.1f} points of unseen Recall@1.")
    if "DeML(1,4)" not in runs:
        lines.append("The DeML(1,4) runs of the real profile are not recorded in this copy (a DeML run reads the "
                     "cached 1280 x 7 x 7 maps of every image and takes minutes on one core): run the chapter with "
                     "`ZS_PROFILE=real` to train them.")
    return Findings(lines, None, None)


def real_runs_table(floor: Mapping | None, runs: Mapping):
    """Every recorded real-profile run of the chapter, one row per seed: unseen and seen Recall@1, training
    time, commit and date (the full grid behind :func:`real_table`)."""
    import pandas as pd

    from zslib.engine.store import short_commit, utc_minute

    rows = []
    for name, rs in {**({"pretrained features": floor["pretrained"]} if floor else {}), **runs}.items():
        for r in sorted(rs, key=lambda r: r.config.seed):
            pv = r.provenance
            rows.append({"variant": name, "seed": r.config.seed, "unseen R@1 %": round(100 * r.metric("R@1"), 2),
                         "seen R@1 %": round(100 * r.metric("R@1", "seen"), 2),
                         "training s": round(float(pv.get("train_seconds") or 0.0)),
                         "commit": short_commit(pv.get("git_commit")), "date": utc_minute(pv.get("timestamp"))})
    return pd.DataFrame(rows)


def lambda0_check(values=LAMBDA0S, seeds=VAL_SEEDS):
    """The adversary's weight lambda0 of DeML(1, 4) compared on a class-disjoint validation split of the seen
    classes (30% held out; never the unseen classes): validation Recall@1 per value and the paired
    difference, as Markdown, and the numbers (``None`` when the runs are not recorded)."""
    from zslib.engine.grid import recorded_grid
    from zslib.engine.stats import format_interval, paired, summarize

    deml4 = real_configs()[DEML4]
    val = deml4.replace(validation_fraction=VALIDATION)
    sweep = recorded_grid({v: val.replace(method_params={**deml4.method_params, "lambda0": v}) for v in values},
                          "the validation comparison of lambda0", seeds, train=_training_real())
    if sweep is None:
        return None, None
    best = max(values, key=lambda v: summarize(sweep[v], "R@1", "val")[0])
    p = paired(sweep[values[0]], sweep[values[-1]], "R@1", "val")
    per_value = "; ".join(f"λ₀ = {v:g}: {format_interval(summarize(sweep[v], 'R@1', 'val'))} %" for v in values)
    text = (f"Validation Recall@1 over seeds {', '.join(map(str, seeds))}: {per_value}. λ₀ = {values[-1]:g} minus "
            f"λ₀ = {values[0]:g}, paired by seed: {format_interval(p.diff, signed=True)} points ({p.verdict}); "
            f"the higher mean is λ₀ = {best:g}"
            + ("." if best == 1.0 else ": the test table uses the paper's 1, not the validation choice."))
    rule = _lambda0_rule(sweep, val, seeds)
    if rule is not None:
        said = rule.sentence(lambda k: "the binomial baseline (DeML off)" if k == "off" else f"λ₀ = {k:g}")
        text += (f" With DeML switched off as a candidate, the book's choice rule reads: {said}"
                 + (" So on validation classes DeML is not chosen, and its rows in this chapter show what it does as "
                    "an ablation." if rule.off_won else ""))
    return _md(text), {"values": tuple(values), "best": best, "paired": p, "rule": rule}


def _lambda0_rule(sweep: Mapping, val, seeds):
    """The book's one choice rule (:func:`zslib.engine.choice.choose`) over the lambda0 values with DeML switched off
    (the same binomial loss alone on the same validation split) as "off"; ``None`` when "off" is not recorded."""
    from zslib.engine.choice import OFF, choose
    from zslib.engine.grid import recorded_grid

    off = recorded_grid({OFF: real_configs()[BASE].replace(validation_fraction=val.validation_fraction)},
                        "the validation runs of the binomial baseline", seeds, train=_training_real())
    return None if off is None else choose({OFF: off[OFF], **sweep})


def _arm_pairs(runs: Mapping) -> dict:
    """name -> (paired against the baseline, paired against DeML(1,4)) for each extra real-profile arm."""
    from zslib.engine.stats import paired

    return {name: (paired(runs["baseline"], runs[name]), paired(runs["DeML(1,4)"], runs[name]))
            for name in real_arm_configs() if name in runs and "baseline" in runs and "DeML(1,4)" in runs}


def arms_table(runs: Mapping):
    """DeML(1, 4) and the two extra arms (:func:`real_arm_configs`) on the real profile: unseen and seen
    Recall@1 with their paired differences to the baseline head and to DeML(1, 4), or ``None`` when they are
    not recorded."""
    import pandas as pd

    names = [n for n in real_arm_configs() if n in _arm_pairs(runs)]
    if not names:
        return None
    versus = {"baseline": runs["baseline"], "DeML(1,4)": runs["DeML(1,4)"]}
    return pd.DataFrame([_row(name, runs[name], versus) for name in ("DeML(1,4)", *names)]).set_index("variant")


def photo_figures(floor: Mapping | None, runs: Mapping | None):
    """The retrieval grid and t-SNE on Flowers-102 photographs for the DeML chapter's real section: the untrained
    pretrained features against the trained baseline head (Eq. 5's loss), seed 0 of each, both trained again
    from their recorded configs (:func:`zslib.analysis.photos.retrieval_section`). DeML(1, 4) itself is not
    retrained for the picture: a DeML run reads the cached 1280 x 7 x 7 maps and took 2.5 to 5 minutes of
    training when it was recorded (its provenance), more than the chapter's time budget; its object attention
    is drawn on the photographs on the chapter's experiments page."""
    from zslib.analysis.photos import retrieval_section

    if not floor or not runs or "baseline" not in runs:
        _show(_md("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*"))
        return None
    deml = runs.get("DeML(1,4)")
    seconds = [r.provenance.get("train_seconds") or 0 for r in deml] if deml else []
    note = ("DeML(1, 4) is not in the picture: recorded runs keep no weights, and training one again took "
            f"{min(seconds) / 60:.1f} to {max(seconds) / 60:.1f} minutes per run when it was recorded, more than "
            "this page may spend." if seconds else "")
    results = {"untrained features": floor["pretrained"][0], "baseline head": runs["baseline"][0]}
    retrieval_section(results, tsne_of="baseline head", note=note)


# -- Fig. 4 (a) on photographs: the object attention of a pretrained network ------------------------------------

def _flowers_test(real):
    """The Flowers-102 test images (the unseen classes) with the real profile's test-time transform and
    normalization, in the dataset's order; raises ``MissingDataError`` when the files are not here."""
    from zslib.engine.data import get_dataset_class, test_transform
    from zslib.engine.models import normalization

    mean, std = normalization(real.backbone)
    return get_dataset_class(real.dataset)(split="test", transform=test_transform(real.image_size, real.resize_size,
                                                                                  mean, std))


def _side_of(iv, level: float) -> str:
    return "above" if iv.low > level else "below" if iv.high < level else "not clearly different from"


def oam_on_photographs() -> dict | None:
    """DeML's Fig. 4 (a) on photographs: the object attention (Eqs. 2-3, T = 10) of the real profile's frozen,
    ImageNet-pretrained EfficientNet-Lite0 on the first test image of each unseen Flowers-102 class (scale 1)
    and on the crop it selects, zoomed back to 224 px (scale 2), with the paper's plain graph (Eq. 2) and the
    released code's spatial Gaussian (sigma 0.15). Scored by the share of the mass in the central quarter of the
    frame, on the photographs and on the same maps with shuffled positions (a null without layout), the crop's
    area and the two graphs' crop overlap (95% intervals over the images, differences paired by image).
    Displays the table, the outcome as Markdown and the figure; returns the numbers (with the first image and
    its maps, for the explorer), or ``None`` after a note when the photographs or the weights are missing."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from zslib.analysis.localization import box_iou, central_mask, central_mass
    from zslib.analysis.photos import photos_unavailable
    from zslib.analysis.viz import attention_panels
    from zslib.engine.config import Config
    from zslib.engine.data.errors import MissingDataError
    from zslib.engine.models import build_model, normalization
    from zslib.engine.stats import interval, verdict
    from zslib.methods.deml.analyses import _first_of_each_class
    from zslib.methods.deml.attention_crop import attention_boxes, crop_and_zoom
    from zslib.methods.deml.object_attention import object_attention_map, shuffle_positions

    real = Config.from_profile("real")
    real_mean, real_std = normalization(real.backbone)
    missing = []
    try:  # never downloads
        flowers = _flowers_test(real)
    except MissingDataError:
        missing.append("the Flowers-102 images (set ZS_DATA to the folder that holds flowers102/)")
    try:
        lite0 = build_model(real.backbone, 8, pretrained=True, download=False).backbone.eval()
    except (FileNotFoundError, ImportError) as err:
        how = str(err).splitlines()[-1].strip()  # the error's last line says how to get them
        missing.append(f"the ImageNet weights of EfficientNet-Lite0 ({how[:1].lower() + how[1:]})")
    if missing:
        _show(photos_unavailable("The Fig. 4 analogue", "this machine lacks " + " and ".join(missing)))
        return None
    stages = list(lite0.roles["object_attention"])
    sigmas = {"Eq. 2": None, "Gaussian 0.15": 0.15}
    side = real.image_size
    first = [int(i) for i in _first_of_each_class(flowers.labels)]
    x_real = torch.stack([flowers[i][0] for i in first])
    with torch.no_grad():
        maps1 = lite0.features(x_real, stages)
    att1 = {v: object_attention_map(maps1, side, spatial_sigma=s) for v, s in sigmas.items()}
    null_maps = shuffle_positions(maps1, seed=0)  # the null: the same vectors, the image's layout removed
    att_null = {v: object_attention_map(null_maps, side, spatial_sigma=s) for v, s in sigmas.items()}
    boxes1 = {v: attention_boxes(a) for v, a in att1.items()}
    area = {v: ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) / side ** 2).double() for v, b in boxes1.items()}
    centre = {v: central_mass(a).double() for v, a in att1.items()}
    centre_null = {v: central_mass(a).double() for v, a in att_null.items()}
    uniform = float(central_mask(side, side).float().mean())
    crop_iou = box_iou(boxes1["Eq. 2"], boxes1["Gaussian 0.15"])
    fig4 = {"n": len(first), "uniform": uniform, "iou": interval(crop_iou.tolist()),
            "iou_below_half": int((crop_iou < 0.5).sum()),
            "centre": {v: interval(c.tolist()) for v, c in centre.items()},
            "centre_null": {v: interval(c.tolist()) for v, c in centre_null.items()},
            "area": {v: interval(a.tolist()) for v, a in area.items()},
            "image": x_real[0], "maps": {k: m[:1] for k, m in maps1.items()}, "mean": real_mean, "std": real_std}
    for key, values in (("d_centre", centre), ("d_centre_null", centre_null), ("d_area", area)):
        fig4[key] = interval((values["Gaussian 0.15"] - values["Eq. 2"]).tolist())
        fig4[key + "_verdict"] = verdict(fig4[key])

    shapes = ", ".join(f"`{k}` {tuple(m.shape[1:])}" for k, m in maps1.items())
    _show(_md(f"{fig4['n']} images (the first test image of each unseen class); the OAM reads {shapes}, T = 10; "
              f"the central region is the middle half of each side, {uniform:.2f} of the image."))
    _show(pd.DataFrame({v: {"mass in the centre": _fmt3(fig4["centre"][v]),
                            "same, shuffled positions": _fmt3(fig4["centre_null"][v]),
                            "crop area / image": _fmt3(fig4["area"][v])} for v in sigmas}).T)
    _show(_oam_text(fig4))

    show = np.linspace(0, len(first) - 1, 6).round().astype(int)
    x6 = x_real[show]
    centre_box = torch.tensor([[side / 4, side / 4, 3 * side / 4, 3 * side / 4]]).expand(len(show), 4)
    panels = {"scale 1": x6}
    boxes_drawn = {"scale 1": [(boxes1["Eq. 2"][show], "yellow"), (boxes1["Gaussian 0.15"][show], "cyan")]}
    for v, s in sigmas.items():
        crops = crop_and_zoom(x6, boxes1[v][show])  # scale 2's input: the crop zoomed to 224 px
        with torch.no_grad():
            att2 = object_attention_map(lite0.features(crops, stages), side, spatial_sigma=s)
        colour, name = ("yellow", "Eq. 2") if s is None else ("cyan", "Gaussian")
        panels[f"OAM, {name}"] = att1[v][show]
        boxes_drawn[f"OAM, {name}"] = [(centre_box, "white")]
        panels[f"scale 2, {name}"] = crops
        boxes_drawn[f"scale 2, {name}"] = [(attention_boxes(att2), colour)]
        panels[f"its OAM, {name}"] = att2
    attention_panels(panels, boxes_drawn, mean=real_mean, std=real_std, size=1.7,
                     titles=[f"class {flowers.class_names[flowers.labels[first[k]]]}" for k in show])
    plt.show()
    return fig4


def _oam_text(fig4: Mapping):
    """What :func:`oam_on_photographs` measured, as a Markdown list."""
    from zslib.analysis.findings import Findings
    from zslib.engine.stats import format_interval

    n, uniform = fig4["n"], fig4["uniform"]
    lines = [f"Gaussian minus Eq. 2, {what}: {format_interval(fig4[key], scale=1, digits=3, signed=True)} "
             f"({fig4[key + '_verdict']}; paired over the {n} images)."
             for key, what in (("d_centre", "mass in the centre"), ("d_centre_null", "mass in the centre, shuffled maps"),
                               ("d_area", "crop area share"))]
    lines.append(f"IoU of the two crops of the same image: {_fmt3(fig4['iou'])}, {fig4['iou_below_half']} of {n} "
                 "below 0.5.")
    plain, plain_null = fig4["centre"]["Eq. 2"], fig4["centre_null"]["Eq. 2"]
    null_flat = _side_of(plain_null, uniform).startswith("not")
    lines.append(f"With Eq. 2 the centre's share is {_side_of(plain, uniform)} the uniform {uniform:.2f} on the "
                 f"photographs and {_side_of(plain_null, uniform)} it on shuffled maps"
                 + ("; the plain graph has no preference for the centre of its own, so its centre share comes from "
                    "what the photographs show there (a flower or not)." if null_flat
                    else "; the plain graph itself shifts mass relative to the centre."))
    lines.append(f"The Gaussian {_MOVED.get(fig4['d_centre_verdict'], 'did not clearly change')} the share on the "
                 f"photographs and {_MOVED.get(fig4['d_centre_null_verdict'], 'did not clearly change')} it on "
                 "shuffled maps"
                 + (", where no image layout is left: a preference for the centre that needs no image, so a higher "
                    "centre share with the Gaussian is no evidence that it finds the flower better."
                    if fig4["d_centre_null_verdict"] == "up" else "."))
    return Findings(lines, None, None)


def attention_explorer(fig4: Mapping | None, runs: Mapping):
    """The interactive view (:func:`zslib.analysis.explorers.deml_attention`, returned for the notebook to show) of
    the object attention of one photograph as the walk runs longer (T = 10 is the paper's setting); without the
    photographs, of one SynthParts image under seed 0 of U_d."""
    from zslib.analysis import explorers
    from zslib.methods.deml.analyses import backbone_maps

    if fig4 is not None:
        return explorers.deml_attention(fig4["image"], fig4["maps"], mean=fig4["mean"], std=fig4["std"])
    x = _loc_images()[0][:1]
    f = backbone_maps(runs["U_d"][0], _synth_normalize(x), ["stage3", "stage4"])
    return explorers.deml_attention(x[0], [f["stage3"], f["stage4"]])


# -- Fig. 4 (b) on photographs: what the channel-attention learners select ---------------------------------------

def cam_records() -> dict:
    """The ``learner_attention`` analysis records (:func:`zslib.methods.deml.analyses.learner_attention`) of
    DeML(1, 4) and the two extra arms on the real profile, ``{name: [record per seed]}``; a variant whose
    records are not stored is left out (made under ``ZS_PROFILE=real``)."""
    from zslib.methods.deml.analyses import learner_attention_records

    return learner_attention_records({DEML4: real_configs()[DEML4], **real_arm_configs()}, train=_training_real())


def _att_iv(records, key):
    from zslib.engine.stats import interval

    return interval([r[key] for r in records])


def _att_change(records, key):
    """Trained minus initialization, paired by seed."""
    from zslib.engine.stats import interval

    return interval([r[key] - r[key + "_init"] for r in records])


def cam_table(cam_att: Mapping):
    """Whether the CAM learners differ (Fig. 4 (b), measured): per variant, each of :data:`CAM_ROWS` trained,
    at initialization, and the change (paired by seed) with its verdict; ``None`` without records."""
    import pandas as pd

    from zslib.engine.stats import format_interval, verdict

    if not cam_att:
        return None
    rows = []
    for name, recs in cam_att.items():
        for what, key in CAM_ROWS.items():
            d = _att_change(recs, key)
            rows.append({"variant": name, "quantity": what, "trained": _fmt3(_att_iv(recs, key)),
                         "at initialization": _fmt3(_att_iv(recs, key + "_init")),
                         "trained - init": format_interval(d, scale=1, digits=3, signed=True), "verdict": verdict(d)})
    return pd.DataFrame(rows).set_index(["variant", "quantity"])


def _cam_numbers(a4) -> dict:
    return {"ch_c": _att_iv(a4, "channel_corr"), "ch_i": _att_iv(a4, "channel_corr_images"),
            "ch_c0": _att_iv(a4, "channel_corr_init"), "spread": _att_iv(a4, "weight_spread"),
            "spread0": _att_iv(a4, "weight_spread_init"), "d_spread": _att_change(a4, "weight_spread"),
            "top": _att_iv(a4, "top_overlap"), "top_chance": a4[0]["top_overlap_chance"],
            "map_c": _att_iv(a4, "map_corr"), "map_c0": _att_iv(a4, "map_corr_init"),
            "map_a": _att_iv(a4, "map_corr_activation"), "d_map": _att_change(a4, "map_corr")}


def cam_text(cam_att: Mapping):
    """What the CAM records say, as a Markdown list: the counts and checks behind :func:`cam_table`; for
    DeML(1, 4) whether the learners keep channel selections of their own and whether they look at different
    regions; the main numbers of the other variants."""
    from zslib.analysis.findings import Findings
    from zslib.engine.stats import verdict

    if not cam_att:
        return None
    rec0 = cam_att["DeML(1,4)"][0] if "DeML(1,4)" in cam_att else next(iter(cam_att.values()))[0]
    lines = [f"{int(rec0['images'])} unseen images, {len(next(iter(cam_att.values())))} seeds per variant; random "
             f"sets of {int(rec0['top'])} of the {int(rec0['channels'])} channels overlap by "
             f"{rec0['top_overlap_chance']:.3f}; largest error of the evidence decomposition: "
             f"{max(r['evidence_error'] for rs in cam_att.values() for r in rs):.1e}."]
    if "DeML(1,4)" in cam_att:
        c = _cam_numbers(cam_att["DeML(1,4)"])
        lines.append(
            f"Channels: two CAMs of DeML(1,4) weight the channels of the same image with correlation {_fmt3(c['ch_c'])} "
            f"(at initialization {_fmt3(c['ch_c0'])}), while one CAM's weights on two different flowers correlate "
            f"{_fmt3(c['ch_i'])}"
            + (": the learners differ from each other more than a learner differs from image to image, so each "
               "keeps a channel selection of its own." if c["ch_c"].high < c["ch_i"].low else
               ": a learner's choice does not differ from the other learners' more than it changes with the image."))
        lines.append(
            f"Training {_MOVED.get(verdict(c['d_spread']), 'did not clearly change')} the spread of a CAM's weights "
            f"over the channels ({_fmt3(c['spread0'])} at initialization, {_fmt3(c['spread'])} trained), and two "
            f"learners' 64 highest-weighted channels overlap by {_fmt3(c['top'])} (Jaccard), "
            f"{_side_of(c['top'], c['top_chance'])} the {c['top_chance']:.3f} of random sets.")
        lines.append(
            f"Regions: two learners' evidence maps of the same image correlate {_fmt3(c['map_c'])} (at initialization "
            f"{_fmt3(c['map_c0'])}; training {_MOVED.get(verdict(c['d_map']), 'did not clearly change')} it) and each "
            f"learner's map correlates {_fmt3(c['map_a'])} with the unweighted activation map"
            + (": above 0.9, the learners look at nearly the same places. On this backbone a CAM can only reweight "
               "channels of the last map, after which the positions are averaged, so different channel selections "
               "change what a learner sums over the image much more than where it looks."
               if c["map_c"].low > 0.9 else "."))
    for name in [n for n in cam_att if n != "DeML(1,4)"]:
        recs = cam_att[name]
        lines.append(f"{name}: channel corr. between learners {_fmt3(_att_iv(recs, 'channel_corr'))}, of one learner "
                     f"across images {_fmt3(_att_iv(recs, 'channel_corr_images'))}, weight spread "
                     f"{_fmt3(_att_iv(recs, 'weight_spread'))}, evidence-map corr. between learners "
                     f"{_fmt3(_att_iv(recs, 'map_corr'))}.")
    return Findings(lines, None, None)


def cam_figure(cam_att: Mapping) -> None:
    """The picture of Fig. 4 (b), seed 0 of DeML(1, 4): six of the images (evenly spaced over the classes) with
    the unweighted activation map and each learner's evidence map (each scaled to its own range); then every
    CAM's weight of each channel averaged over the images, channels grouped by the learner that weights them most
    (grouping by the largest weight makes blocks by construction; what to read is how far a CAM's favoured
    channels sit above its others), with the count of channels each CAM weights most as the caption."""
    import matplotlib.pyplot as plt

    from zslib.analysis.viz import attention_panels
    from zslib.engine.config import Config
    from zslib.engine.data.errors import MissingDataError
    from zslib.engine.models import normalization

    if "DeML(1,4)" not in cam_att:
        return None
    real = Config.from_profile("real")
    rec = cam_att["DeML(1,4)"][0]
    shown, shown_labels = np.asarray(rec["shown"], dtype=int), np.asarray(rec["shown_labels"]).astype(int)
    try:
        flowers = _flowers_test(real)
    except MissingDataError:
        flowers = None
    # the feature cache keeps the test images in the dataset's order: the same photographs
    photos = flowers is not None and np.array_equal(flowers.labels[shown], shown_labels)
    maps, act = torch.tensor(rec["maps"]), torch.tensor(rec["activation"])
    panels = {"image": torch.stack([flowers[int(i)][0] for i in shown])} if photos else {}
    panels["unweighted map"] = act
    for j in range(maps.shape[0]):
        panels[f"learner {j + 1}"] = maps[j]
    titles = [f"class {flowers.class_names[int(c)]}" if photos else f"class {int(c)}" for c in shown_labels]
    mean, std = normalization(real.backbone)
    attention_panels(panels, mean=mean, std=std, size=1.5, titles=titles)
    plt.show()
    w = np.asarray(rec["mean_weights"])  # (J, 1280)
    owner = w.argmax(0)
    order = np.lexsort((-w.max(0), owner))
    fig, ax = plt.subplots(figsize=(9, 1.8))
    im = ax.imshow(w[:, order], aspect="auto", cmap="magma", interpolation="nearest")
    ax.set_yticks(range(len(w)), [f"CAM {j + 1}" for j in range(len(w))])
    ax.set_xlabel("channel of the head map (grouped by the CAM that weights it most)")
    fig.colorbar(im, ax=ax, label="mean weight")
    plt.show()
    _show(_md(f"Channels each CAM weights most: {', '.join(map(str, np.bincount(owner, minlength=len(w))))} of "
              f"{w.shape[1]}."))
    return None


# -- what we found ---------------------------------------------------------------------------------------------

def full_profile_text(full_runs, paper_config):
    """The full-profile DeML(3, 3) runs on CUB (the paper's headline model) against the paper's Table 3, with
    where and when each was made; without one, the paper's setting and how to make the run. Markdown."""
    from zslib.analysis.findings import Findings
    from zslib.engine.store import short_commit, utc_minute
    from zslib.reported import reported_frame

    if not full_runs:
        c, mp = paper_config, paper_config.method_params
        return _md(f"No full-profile DeML run is recorded in `results/recorded/`: run this notebook with "
                   f"`ZS_PROFILE=full` on a GPU to make one. The paper's setting: DeML({mp['scales']}, {mp['learners']}) "
                   f"on `{c.dataset}` with `{c.backbone}`, {c.embedding_dim} dimensions, learning rate {c.lr:g}, "
                   f"{c.iterations:,} iterations, loss `{c.loss}`.")
    paper = reported_frame("3", "chen2019deml").loc["DeML(3,3)", "CUB R@1"]
    lines = [f"**{r.config.name}**: unseen Recall@1 {100 * r.metric('R@1'):.1f} % (the paper, Table 3: {paper} %); "
             f"made {utc_minute(r.provenance.get('timestamp'))} on {r.provenance.get('device')} with zslib "
             f"{r.provenance.get('zslib_version')}, commit `{short_commit(r.provenance.get('git_commit'))}`, "
             f"{r.provenance.get('train_seconds')} s of training." for r in full_runs]
    return Findings(lines, None, None)


def main_found(runs: Mapping, sim: Mapping, floor: Mapping | None, real: Mapping):
    """The main page's "What we found": the quick experiment's three claims beside the paper's gains, the
    learners' similarity (Table 4), DeML(1, 4) on the photographs, and which claims this run does not
    reproduce; every sentence from the numbers."""
    from zslib.analysis.findings import found_list, verdict_words
    from zslib.engine.stats import format_interval, paired

    pairs, gain = _quick_pairs(runs), paper_gains()
    p_act, p_j, p_adv = pairs["L_act"], pairs["J=4"], pairs["L_adv"]
    found = [
        f"On the quick profile, activation decay {verdict_words(p_act.verdict)} unseen Recall@1 over U_d "
        f"({format_interval(p_act.diff, signed=True)} points; the paper: {gain['L_act']:+.1f} on CUB).",
        f"Four CAM learners with the adversary {verdict_words(p_j.verdict)} it ({format_interval(p_j.diff, signed=True)}; "
        f"paper {gain['J=4']:+.1f}); a second scale (paper {gain['I=2']:+.1f}) was not trained here.",
        f"Keeping the adversary in DeML(1,4) changed unseen Recall@1 by {format_interval(p_adv.diff, signed=True)} "
        f"points against removing it (the paper: {gain['L_adv']:+.1f} for J=8); the learners' mean cosine "
        f"similarity was {np.mean(sim['DeML(1,4)']):.2f} with it and {np.mean(sim['DeML(1,4) no L_adv']):.2f} without "
        "(paper: -0.08 and 0.92)."]
    if floor is not None and "baseline" in real and "DeML(1,4)" in real:
        p = paired(real["baseline"], real["DeML(1,4)"])
        found.append(f"On Flowers-102 with frozen pretrained features, DeML(1,4) with the paper's weights "
                     f"{verdict_words(p.verdict)} unseen Recall@1 against the baseline head "
                     f"({format_interval(p.diff, signed=True)} points); the untrained features reach "
                     f"{100 * floor['pretrained'][0].metric('R@1'):.1f}%.")
    missed = [k for k, p in (("activation decay", p_act), ("J = 4 learners", p_j), ("the adversary", p_adv))
              if p.verdict != "up"]
    found.append("Claims of the paper that this quick run does not reproduce (no clear gain): "
                 + (", ".join(missed) if missed else "none") + ".")
    return found_list(found)


def _fig4_sentence(fig4: Mapping) -> str:
    from zslib.engine.stats import format_interval

    c0, d, d0 = fig4["centre"]["Eq. 2"], fig4["d_centre"], fig4["d_centre_null"]
    return (f"On {fig4['n']} Flowers-102 photographs of unseen classes, the frozen pretrained network's OAM (Eq. 2) put "
            f"{format_interval(c0, scale=1, digits=2)} of its mass in the central quarter of the image (uniform "
            f"{fig4['uniform']:.2f}, the same maps shuffled {fig4['centre_null']['Eq. 2'].mean:.2f}); the released "
            f"code's Gaussian changed that by {format_interval(d, scale=1, digits=3, signed=True)} on the photographs "
            f"and by {format_interval(d0, scale=1, digits=3, signed=True)} on shuffled maps"
            + (", so the centre preference it adds is smaller on photographs than with no image layout at all"
               if d0.low > d.high else "")
            + "; its crops were " + {"up": "larger than", "down": "smaller than"}.get(fig4["d_area_verdict"],
                                                                               "not clearly different in area from")
            + f" those of Eq. 2 and overlapped them with IoU {fig4['iou'].mean:.2f} on average. Without flower masks "
            "this says where the attention sits in the frame, not whether it finds the flower.")


def experiments_found(loc: tuple, probe: Mapping, real: Mapping, lambda0: Mapping | None, cam_att: Mapping,
                      fig4: Mapping | None):
    """The experiments page's "What we found": the OAM scored on SynthParts (``loc``: the result of
    :func:`localization_table`), the attribute probe, the validation check of lambda0, the two extra real arms
    beside the paper's Table 2, the CAM learners and Fig. 4 (a) on photographs; every sentence from the numbers."""
    from zslib.analysis.findings import found_list, verdict_words
    from zslib.engine.stats import format_interval

    table, chance = loc
    paper = table.loc["both, T=10 (paper)"]
    diff = _probe_diff(probe)
    found = [
        f"The OAM put {paper['mass on bird']:.2f} of its mass on the bird (chance {chance['area_share']:.2f}, "
        f"{paper['lift over chance']:.1f}x) and its crop box reached IoU {paper['crop IoU']:.2f} with the bird "
        f"(whole image {chance['box_iou_full_image']:.2f}); the literal reading of Eq. 3 gives uniform attention "
        f"(mass {table.loc['literal Eq. 3', 'mass on bird']:.2f}).",
        f"The hard-attribute probe moved by {format_interval(diff, scale=1, digits=3, signed=True)} from U_d + L_act "
        "to DeML(1,4): " + ("more hard attributes kept, as the paper's story predicts." if diff[1] > 0
                            else "no clear evidence that decoupling keeps more of them.")]
    if lambda0 is not None:
        p, (low, high) = lambda0["paired"], (lambda0["values"][0], lambda0["values"][-1])
        found.append(f"On the validation classes, λ₀ = {high:g} {verdict_words(p.verdict)} Recall@1 against "
                     f"λ₀ = {low:g} ({format_interval(p.diff, signed=True)} points, paired); the higher mean is "
                     f"λ₀ = {lambda0['best']:g}, and the test tables use the paper's 1.")
    j8 = paper_gains()["J=8 over J=4"]
    for name, (p_b, p_d) in _arm_pairs(real).items():
        found.append(f"{name} {verdict_words(p_b.verdict)} unseen Recall@1 against the baseline head "
                     f"({format_interval(p_b.diff, signed=True)} points) and {verdict_words(p_d.verdict)} it against "
                     f"DeML(1,4) with the adversary ({format_interval(p_d.diff, signed=True)})"
                     + (f"; the paper: DeML(1,8) {j8:+.1f} over DeML(1,4) on CUB." if name == "DeML(1,8)" else "."))
    if "DeML(1,4)" in cam_att:
        c = _cam_numbers(cam_att["DeML(1,4)"])
        own = c["ch_c"].high < c["ch_i"].low
        found.append("The four CAMs of DeML(1,4) learned " + ("channel selections of their own" if own else
                                                            "channel selections that are not clearly their own")
                     + f" (correlation between learners {_fmt3(c['ch_c'])}, of one learner across images "
                     f"{_fmt3(c['ch_i'])}; spread of the weights {_fmt3(c['spread'])}, at initialization "
                     f"{_fmt3(c['spread0'])}); the learners' evidence maps of an image correlate {_fmt3(c['map_c'])}: "
                     + ("different channels, nearly the same regions." if own and c["map_c"].low > 0.9 else
                        "nearly the same regions." if c["map_c"].low > 0.9 else "the regions differ too."))
    found.append(_fig4_sentence(fig4) if fig4 is not None else
                 "The Fig. 4 analogue on photographs was not computed on this machine (its section says what is missing).")
    return found_list(found)


def key_findings():
    """The "Key findings" box the DeML chapter opens with, generated from the recorded real-profile runs."""
    from zslib.analysis.findings import findings_box, not_recorded_box, real_comparison, recorded, verdict_words
    from zslib.engine.stats import format_interval, paired

    c = real_configs()
    floor, runs = recorded({"f": c[FLOOR]}, (0,)), recorded({"b": c[BASE], "4": c[DEML4], "8": c[DEML8]})
    if floor is None or runs is None:
        return not_recorded_box()
    p8 = paired(runs["4"], runs["8"])
    from zslib.analysis.compare import rule_status

    return findings_box(real_comparison(floor["f"][0], runs["b"], runs["4"], "DeML(1, 4)",
                                        status=rule_status("DeML", c[DEML4])) + [
        f"Eight learners instead of four {verdict_words(p8.verdict)} it ({format_interval(p8.diff, signed=True)} "
        "points, paired): with a frozen backbone the CAMs can only re-weight the channels of one fixed map."])
