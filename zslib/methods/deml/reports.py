"""The DeML chapter's report plumbing (Chen & Deng, CVPR 2019): figures and text made from recorded runs.

A chapter calls these in one line; the paper's math stays in the modules beside this one.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["photo_figures", "real_configs", "key_findings"]


def photo_figures(floor: Mapping | None, runs: Mapping | None):
    """The retrieval grid and t-SNE on Flowers-102 photographs for the DeML chapter's real section: the untrained
    pretrained features against the trained baseline head (Eq. 5's loss), seed 0 of each, both trained again
    from their recorded configs (:func:`zslib.analysis.photos.retrieval_section`). DeML(1, 4) itself is not
    retrained for the picture: a DeML run reads the cached 1280 x 7 x 7 maps and took 2.5 to 5 minutes of
    training when it was recorded (its provenance), more than the chapter's time budget; its object attention
    is drawn on the photographs in the Fig. 4 section below."""
    from IPython.display import Markdown, display

    from zslib.analysis.photos import retrieval_section

    if not floor or not runs or "baseline" not in runs:
        display(Markdown("*The real-profile runs are not recorded in this copy, so there is no retrieval figure.*"))
        return None
    deml = runs.get("DeML(1,4)")
    seconds = [r.provenance.get("train_seconds") or 0 for r in deml] if deml else []
    note = ("DeML(1, 4) is not in the picture: recorded runs keep no weights, and training one again took "
            f"{min(seconds) / 60:.1f} to {max(seconds) / 60:.1f} minutes per run when it was recorded, more than "
            "this page may spend." if seconds else "")
    results = {"untrained features": floor["pretrained"][0], "baseline head": runs["baseline"][0]}
    retrieval_section(results, tsne_of="baseline head", note=note)


def real_configs():
    """The recorded real-profile rows of the DeML chapter: the untrained features, the baseline head with Eq. 5's
    loss, DeML(1, 4) with the paper's weights (lambda0 = 1) and DeML(1, 8)."""
    from zslib.engine.config import Config

    real = Config.from_profile("real")
    base = real.replace(loss="binomial_deml", method="baseline", method_params={})
    deml = {j: real.replace(loss="binomial_deml", method="deml", method_params={"learners": j, "lambda0": 1.0})
            for j in (4, 8)}
    return real.replace(method="pretrained"), base, deml[4], deml[8]


def key_findings():
    """The "Key findings" box the DeML chapter opens with, generated from the recorded real-profile runs."""
    from zslib.analysis.findings import findings_box, not_recorded_box, real_comparison, recorded, verdict_words
    from zslib.engine.stats import format_interval, paired

    floor_c, base_c, deml4_c, deml8_c = real_configs()
    floor, runs = recorded({"f": floor_c}, (0,)), recorded({"b": base_c, "4": deml4_c, "8": deml8_c})
    if floor is None or runs is None:
        return not_recorded_box()
    p8 = paired(runs["4"], runs["8"])
    return findings_box(real_comparison(floor["f"][0], runs["b"], runs["4"], "DeML(1, 4)") + [
        f"Eight learners instead of four {verdict_words(p8.verdict)} it ({format_interval(p8.diff, signed=True)} "
        "points, paired): with a frozen backbone the CAMs can only re-weight the channels of one fixed map."])
