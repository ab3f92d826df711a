"""JRD: distance metric learning with joint representation diversification (Chu, Lin, Wang, Wang, Yu, Gao
and Tong, ICML 2020; ``chu2020jrd``).

Two methods of the registry come from this paper.

:class:`JRD` (``"jrd"``) is the paper's method, Eq. 11::

    L = L_AMS + alpha / N_pairs * L_JRS,

AM-Softmax plus the joint representation similarity of every pair of different classes of the batch, over
three representations of each image: the pooled backbone feature, the L2-normalized embedding and the
class-level cosines to the AM-Softmax proxies (Eq. 9). The math is in :mod:`zslib.methods.jrd.diversification`
(:func:`~zslib.methods.jrd.diversification.jrd_representations` picks the layers and kernels,
:func:`~zslib.methods.jrd.diversification.jrs_regularizer` is Eqs. 10-11); this file says which features feed it and
holds the paper's settings. The method's parameters also give the paper's comparisons: the variants of
Table 2 (MRD, JRD-C, JRD-pooling), the regularizers of Fig. 5 and Table 3 (JMMD, Eq. 15; JIntra, Eq. 16),
the mixture sizes ``(K, K')`` of Fig. 6 (``mixture``) and the kernels of Table 4.

Where the features come from. One forward pass gives both the pooled feature and the embedding:
``u = model.pooled(x)``, then ``model.embed_pooled(u)``. The pooled feature enters the regularizer raw,
as the released code does. On the ``real`` profile the backbone is frozen and its pooled feature is read
from the feature cache, so the pooling representation does not move: its kernel is then a fixed weight on
each pair of images (pairs that look alike to ImageNet features count more in the joint similarity), and
JRD-pooling differs from JRD only by that weighting. This is the closest faithful variant without
fine-tuning the backbone; the chapter says so where it compares them.

:class:`IntraClassPenalty` (``"intra"``) is the motivating experiment of Section 2 (Fig. 2): AM-Softmax
plus an *explicit* penalty on intra-class distances (Eq. 4), with two readings of Eq. 4 (see ``form``).
"""
from __future__ import annotations

import math

from zslib.engine.checks import finite_number
from zslib.methods.jrd.diversification import (JRD_SETTINGS, KERNELS, PAPER_MIXTURE, REGULARIZERS, VARIANTS,
                                               jrd_representations)
from zslib.methods.jrd.intra import gaussian_intra_class_distance, intra_class_distance
from zslib.engine.registry import register
from zslib.engine.method import Method, Param, number, one_of

__all__ = ["JRD", "IntraClassPenalty", "JRD_PRESETS", "jrd_method", "jrd_preset"]


def _optional_positive(value, name="value"):
    """A check: ``None`` or a positive finite number."""
    return None if value is None else finite_number(value, name, low=0.0, low_open=True)


# what the command line's catalog (zslib/catalog.py) checks without importing torch: a positive number, or None
_optional_positive.spec = {"kind": "number", "low": 0.0, "high": None, "low_open": True, "integer": False,
                           "optional": True}


def _mixture(value, name="value"):
    """A check: ``[K, K']``, two whole numbers >= 1 (the Gaussians of the pooling and the embedding layer)."""
    if (isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
        raise ValueError(f"{name} must be [K, K'], two whole numbers >= 1 (Gaussians of the pooling and the "
                         f"embedding layer), got {value!r}")
    return [int(v) for v in value]


_mixture.spec = {"kind": "sizes", "length": 2}


@register
class JRD(Method):
    name = "jrd"
    title = ("AM-Softmax plus the joint representation similarity (JRS) regularizer over the pooling, "
             "embedding and class-level representations")
    paper = "chu2020jrd"
    equations = ("Eq. 6-8 (kernel mean embeddings, JRS), Eq. 9 (representations), Eq. 10, Eq. 11 (regularizer and "
                 "objective), Eq. 15-16 (JMMD, JIntra), Table 2 (variants), Fig. 6 (mixture sizes), Table 4 (kernels)")
    params = {
        "alpha": Param(1.0, "weight of the regularizer (Eq. 11: 1 on CUB and Cars, 0.4 on SOP); 0 leaves the "
                            "loss alone", number(low=0.0)),
        "variant": Param("jrd", "which layers and how they combine (Table 2): jrd (pooling, embedding, class "
                                "level, product), mrd (embedding only), mrd_sum (sum of the three per-layer "
                                "similarities), jrd_c (no class level), jrd_pooling (no pooling level)",
                         one_of(*VARIANTS)),
        "regularizer": Param("jrs", "jrs (inner products of class embeddings, Eq. 10-11, minimized), jmmd (their "
                                    "MMD, Eq. 15, maximized) or jintra (their norms, Eq. 16, maximized)",
                             one_of(*REGULARIZERS)),
        "kernel": Param("gaussian_mixture", "the kernel of every layer: gaussian_mixture (Sec. 5.1), gaussian, "
                                            "laplace, polynomial2, polynomial5, exponential (Table 4)",
                        one_of(*KERNELS)),
        "adam_eps": Param(None, "Adam's epsilon for every parameter group of the run (None: torch's 1e-8; the "
                                "released code uses 0.01)", _optional_positive),
        "mixture": Param(list(PAPER_MIXTURE), "[K, K']: the number of Gaussians of the pooling and of the embedding "
                                              "layer's mixture (kernel gaussian_mixture only; Sec. 5.3 and Fig. 6; "
                                              "the paper's [3, 3] is the default; bandwidths "
                                              "tau * 2^(i - K//2), i < K, as in the released code)",
                         _mixture, omit_default=True),
    }

    @classmethod
    def validate(cls, params):
        """The parameters checked; ``mixture`` only goes with the Gaussian mixture. It is an ``omit_default``
        parameter, added after JRD runs were recorded: at its default ``[3, 3]`` it is left out of
        ``method_params``, so those runs keep their config hash."""
        p = super().validate(params)
        if "mixture" in p and p["kernel"] != "gaussian_mixture":
            raise ValueError(f"jrd parameter mixture {p['mixture']!r} sets the sizes of the Gaussian mixture; kernel "
                             f"{p['kernel']!r} has none (use kernel='gaussian_mixture')")
        return p

    def __init__(self, config, model, num_classes):
        super().__init__(config, model, num_classes)
        self.uses_proxies = "c" in VARIANTS[self.p["variant"]][0] and self.p["alpha"] > 0
        if self.uses_proxies and self._proxies() is None:
            raise ValueError(f"JRD variant {self.p['variant']!r} uses the class-level representation (Eq. 9), i.e. "
                             f"the class proxies of a classification loss, but the loss {config.loss!r} has none; "
                             "use loss='am_softmax' (jrd_method() gives the paper's s = 20, m = 0.1) or a variant "
                             "without the class level (jrd_c, mrd)")

    def _proxies(self):
        """The class proxies of the metric loss: AM-Softmax's ``weight`` or Proxy-NCA's ``proxies``."""
        for attribute in ("weight", "proxies"):
            value = getattr(self.loss, attribute, None)
            if value is not None:
                return value
        return None

    def param_groups(self, phase, model, settings):
        groups = super().param_groups(phase, model, settings)
        if self.p["adam_eps"] is not None:
            groups = [{**g, "eps": self.p["adam_eps"]} for g in groups]
        return groups

    def terms(self, phase, model, images, labels):
        pooled = model.pooled(images)  # one forward pass: the embedding is computed from this feature
        emb = model.embed_pooled(pooled)
        terms = {self.loss_name: self.loss(emb, labels)}
        if self.p["alpha"] > 0:
            r = jrd_representations(pooled, emb, self._proxies() if self.uses_proxies else None,
                                    self.p["variant"], self.p["kernel"], self.p["mixture"])
            regularizer = REGULARIZERS[self.p["regularizer"]]
            terms[self.p["regularizer"]] = regularizer(r.layers, labels, r.kernels, r.combine, alpha=self.p["alpha"])
        return terms


@register
class IntraClassPenalty(Method):
    """Section 2 of JRD motivates the method with an experiment on the *explicit* penalty on intra-class
    distances (Eq. 4) added to a classification loss: the stronger the penalty, the more compact the seen
    classes, the worse the error of an ideal joint hypothesis (Fig. 2). This is that objective,
    ``L_m + alpha * D_intra``.

    ``form`` chooses the reading of Eq. 4, whose symbols the extracted text lost:
    ``"squared"`` (half the squared distance of same-class pairs,
    :func:`zslib.methods.jrd.intra.intra_class_distance`) or ``"gaussian"`` (one minus the Gaussian kernel
    ``exp(-||x_i - x_j||^2 / 2)`` of those pairs, :func:`zslib.methods.jrd.intra.gaussian_intra_class_distance`).
    The surviving characters of Eq. 4 ("e 1 2 (x_i - x_j)^2") and Sec. 4.3.2, which names this very kernel
    when it recalls Section 2, make the Gaussian form the more probable one; the squared form is its first
    Taylor term and stays the default so that earlier runs keep their meaning.
    """

    name = "intra"
    title = "a metric loss plus an explicit penalty on intra-class distances (JRD's motivating experiment)"
    paper = "chu2020jrd"
    equations = "Sec. 2, Eq. 4 and Fig. 2: L = L_m + alpha * D_intra"
    params = {
        "alpha": Param(0.0, "weight of the intra-class distance penalty", number(low=0.0)),
        "reduction": Param("mean", "'mean' or 'sum' over the classes of the batch (the extracted text of Eq. 4 "
                                   "lost its summation sign)", one_of("mean", "sum")),
        "form": Param("squared", "Eq. 4 as half the squared distance ('squared') or as one minus the Gaussian "
                                 "kernel exp(-d^2 / 2) ('gaussian', the more probable reading)",
                      one_of("squared", "gaussian")),
    }

    def terms(self, phase, model, images, labels):
        emb = model(images)
        penalty = gaussian_intra_class_distance if self.p["form"] == "gaussian" else intra_class_distance
        return {self.loss_name: self.loss(emb, labels),
                "intra": self.p["alpha"] * penalty(emb, labels, reduction=self.p["reduction"])}


# ----------------------------------------------------------------------------------------------------
# The paper's settings (Sec. 5.1 and the released code), as Config overrides


def _epochs_to_steps(images: int, batch: int, epochs: int) -> int:
    return epochs * math.ceil(images / batch)


#: Per dataset (zslib.engine.data's names): training images of the seen classes, batch size, epochs, learning-rate
#: decay period in epochs, alpha, AM-Softmax margin and the proxies' learning rate (JRD Sec. 5.1).
_DATASETS = {
    "cub200": {"images": 5864, "batch": 100, "epochs": 50, "decay": 20, "alpha": 1.0, "margin": 0.1, "proxy_lr": 1e-2},
    "cars196": {"images": 8054, "batch": 50, "epochs": 50, "decay": 20, "alpha": 1.0, "margin": 0.05, "proxy_lr": 1e-2},
    "sop": {"images": 59551, "batch": 120, "epochs": 80, "decay": 40, "alpha": 0.4, "margin": 0.1, "proxy_lr": 1e-1},
}

#: Datasets the paper does not train on, with the paper's dataset whose settings the book applies to them (stated
#: in the preset's ``source``): In-Shop's 25,882 training images of 3,997 items are, like SOP's, thousands of classes
#: of a few images each, so In-Shop takes SOP's alpha, margin, proxies' rate, batch and epochs.
_BORROWED = {"inshop": ("sop", 25882)}

_PAPER_SOURCE = "chu2020jrd Sec. 5.1; Adam eps and weight decay from the released code (github.com/YangLin122/JRD)"


def _preset(v: dict, images: int, source: str) -> dict:
    return {"alpha": v["alpha"], "scale": JRD_SETTINGS["am_softmax_scale"], "margin": v["margin"],
            "proxy_lr": v["proxy_lr"], "batch_size": v["batch"],
            "iterations": _epochs_to_steps(images, v["batch"], v["epochs"]),
            "decay_every": _epochs_to_steps(images, v["batch"], v["decay"]), "source": source}


#: ``JRD_PRESETS[dataset]``: the paper's alpha, AM-Softmax scale and margin, batch, training length and
#: learning-rate schedule in steps, with the source; for a dataset of :data:`_BORROWED` (In-Shop, not in the paper)
#: the settings of the paper's dataset named in its source, over its own training images.
JRD_PRESETS: dict = {d: _preset(v, v["images"], _PAPER_SOURCE) for d, v in _DATASETS.items()}
JRD_PRESETS.update({
    d: _preset(_DATASETS[like], images, f"not in chu2020jrd (CUB-200-2011, Cars196 and SOP only): the book applies "
                                        f"the paper's {like.upper()} settings ({_PAPER_SOURCE}) to {d}'s {images:,} "
                                        "training images")
    for d, (like, images) in _BORROWED.items()})


def _dataset(dataset: str) -> str:
    d = str(dataset).lower()
    if d not in JRD_PRESETS:
        raise KeyError(f"no JRD preset for dataset {dataset!r}; the paper covers {sorted(_DATASETS)}, and the book "
                       f"adds {sorted(_BORROWED)} with the settings of the paper's dataset most like it")
    return d


def jrd_method(dataset: str = "cub200", alpha: float | None = None, variant: str = "jrd", regularizer: str = "jrs",
               kernel: str = "gaussian_mixture", **method_params) -> dict:
    """Config overrides for JRD's loss and regularizer: AM-Softmax with the paper's ``s = 20`` and margin
    (0.1; 0.05 on Cars), ``method="jrd"`` with ``alpha`` (default: the paper's for ``dataset``) and the
    other method parameters. ``alpha=0`` is AM-Softmax alone, trained exactly as JRD is (same optimizer
    settings), the baseline of every comparison of the paper."""
    preset = JRD_PRESETS[_dataset(dataset)]
    alpha = preset["alpha"] if alpha is None else alpha
    return {"loss": "am_softmax", "loss_params": {"scale": preset["scale"], "margin": preset["margin"]},
            "method": "jrd", "method_params": {"alpha": float(alpha), "variant": variant, "regularizer": regularizer,
                                               "kernel": kernel, **method_params}}


def jrd_preset(dataset: str = "cub200", **method_changes) -> dict:
    """:func:`jrd_method` plus the paper's training settings: ImageNet-pretrained BN-Inception with frozen
    BatchNorm, 512-d embedding, Adam at 1e-4 (backbone and embedding) and the proxies' rate through
    ``objective_lr`` (1e-2; 1e-1 on SOP), ``eps = 0.01`` and weight decay 1e-4 (released code), rates
    divided by 10 every 20 epochs (40 on SOP), 50 epochs (80 on SOP), 224-px crops of 256-px resizes.

    ``Config.from_profile("full", dataset="cub200", **jrd_preset("cub200"))`` is the paper's CUB run.

    One difference remains: the released code draws batches uniformly at random, the trainer draws P classes
    x K images. We take K = 2 and P = batch / 2: a uniform batch of 100 images from CUB's 100 seen classes
    holds about 49.5 same-class pairs in expectation, 50 x 2 exactly 50 (on Cars a uniform batch of 50 from
    98 classes holds about 12.5, 25 x 2 holds 25).
    """
    d = _dataset(dataset)
    p = JRD_PRESETS[d]
    method = jrd_method(d, **{"adam_eps": JRD_SETTINGS["adam_eps"], **method_changes})
    return {"backbone": "bninception", "pretrained": True, "freeze_bn": True, "embedding_dim": 512,
            "image_size": 224, "resize_size": 256, "lr": JRD_SETTINGS["lr"], "new_layer_mult": 1.0,
            "objective_lr": p["proxy_lr"], "weight_decay": JRD_SETTINGS["weight_decay"],
            "batch_classes": p["batch_size"] // 2, "batch_per_class": 2, "iterations": p["iterations"],
            "schedule": {"name": "step", "every": p["decay_every"], "gamma": 0.1}, **method}
