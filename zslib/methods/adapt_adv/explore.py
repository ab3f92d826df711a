"""Adapt-Adv's explorer (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022; ``alkaabi2022adaptadv``): the
adaptive weight lambda of Eq. 22 along a training run, epoch by epoch, built on the book's explorer framework
(:mod:`zslib.analysis.explorers`).
"""
from __future__ import annotations

import html
import math

import matplotlib.pyplot as plt
import numpy as np

from zslib.analysis.explorers import QUERY, WRONG, Control, Explorer, Frame, figure_uri
from zslib.methods.adapt_adv.analyses import seen_class_count
from zslib.methods.adapt_adv.class_adversary import adaptive_lambda
from zslib.methods.adapt_adv.method import AdaptAdv, lambda_trace

__all__ = ["adapt_adv_lambda"]


def adapt_adv_lambda(run, num_classes: int | None = None, *, title: str | None = None) -> Explorer:
    """Adapt-Adv Eq. 22, :math:`\\lambda = -\\tanh(\\mathcal{L}_c - l_{thresh})\\,\\lambda_0`, along a training run.

    ``run``: an Adapt-Adv run with its adversary (a :class:`zslib.engine.store.Result` whose history logs
    every step); ``num_classes``: its number of training classes (default: its config's seen classes,
    :func:`zslib.methods.adapt_adv.analyses.seen_class_count`). The run's lambda at every step is
    replayed from its logged classifier losses by :func:`zslib.methods.adapt_adv.method.lambda_trace`,
    exactly as training set it: each epoch's lambda is Eq. 22 of the *previous* epoch's mean L_c (the
    first epoch's of chance level, ln C). The slider moves through the epochs: the left plot is Eq. 22
    (:func:`zslib.methods.adapt_adv.class_adversary.adaptive_lambda`) with the epoch's point, the right one
    the L_c trace and lambda up to that epoch.
    """
    if num_classes is None:
        num_classes = seen_class_count(run.config)
    params = AdaptAdv.validate(run.config.method_params)
    lambda0, l_thresh, epoch_steps = params["lambda0"], params["l_thresh"], params["epoch_steps"]
    trace = lambda_trace(run.history, num_classes, run.config.method_params)
    steps, lc, lam = trace["step"], trace["classifier_ce"], trace["lambda"]
    if lc.size == 0:
        raise ValueError("the run's history logs no classifier loss; give an Adapt-Adv run trained with its adversary")
    epochs = math.ceil(lc.size / epoch_steps)
    # the L_c that set each epoch's lambda: chance level for the first, the previous epoch's mean after
    setting = [math.log(num_classes)] + [float(lc[e * epoch_steps:(e + 1) * epoch_steps].mean())
                                         for e in range(epochs - 1)]
    lams = [float(lam[e * epoch_steps]) for e in range(epochs)]
    grid = np.linspace(0, max(4.0, float(lc.max()) * 1.05, setting[0] * 1.05), 200)
    curve = [adaptive_lambda(v, l_thresh, lambda0) for v in grid]

    def render(epoch):
        fig, (a, b) = plt.subplots(1, 2, figsize=(8.6, 3.0))
        a.plot(grid, curve, color="#444")
        a.axvline(l_thresh, color="#999", ls=":")
        a.axhline(0, color="#999", lw=0.8)
        a.plot(setting[:epoch + 1], lams[:epoch + 1], "o", color="#bbb", ms=4)
        a.plot([setting[epoch]], [lams[epoch]], "o", color=WRONG if lams[epoch] > 0 else QUERY, ms=9)
        a.set(xlabel="$L_c$ (mean of the previous epoch)", ylabel=r"$\lambda$ (Eq. 22)",
              title=f"epoch {epoch + 1}: $\\lambda$ = {lams[epoch]:+.3f}")
        end = min(lc.size, (epoch + 1) * epoch_steps)
        b.plot(steps, lc, color="#ddd")
        b.plot(steps[:end], lc[:end], color=QUERY, lw=0.8, label="$L_c$")
        b.axhline(l_thresh, color="#999", ls=":")
        b2 = b.twinx()
        b2.step(steps[:end], lam[:end], color=WRONG, where="post", label=r"$\lambda$")
        b2.set_ylim(-1.05 * lambda0, 1.05 * lambda0)
        b.set(xlabel="step", ylabel="$L_c$", title="the run: classifier loss and lambda")
        fig.tight_layout()
        mode = ("adversarial: the extractor works against the classifier" if lams[epoch] > 0 else
                "cooperative: the extractor helps the classifier" if lams[epoch] < 0 else "neutral")
        text = (f"epoch {epoch + 1} of {epochs}: L_c = {setting[epoch]:.3f} sets lambda = {lams[epoch]:+.3f} "
                f"(lambda0 = {lambda0:g}, l_thresh = {l_thresh:g}); {mode}")
        return Frame(f'<img alt="Eq. 22 and the run\'s trace" src="{figure_uri(fig)}"><div>{html.escape(text)}</div>',
                     {"epoch": epoch, "setting_lc": setting[epoch], "lambda": lams[epoch]})

    static = sorted(set(np.linspace(0, epochs - 1, min(epochs, 8)).round().astype(int).tolist()))
    control = Control("epoch", [(str(e + 1), e) for e in range(epochs)], "slider", static=static)
    return Explorer(title or "Adapt-Adv Eq. 22: the weight lambda follows the classifier loss", [control], render,
                    note=f"{epochs} epochs of {epoch_steps} steps live; {len(static)} on the static page.")
