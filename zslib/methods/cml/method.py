"""CML: confusion-based metric learning (Chen, Deng, Wang and Zhang, IEEE TNNLS 2022; ``chen2022cml``).

CML adds two confusion terms to a metric loss ``L_m`` and minimizes the sum with one optimizer (Eq. 11)::

    L = L_m + lambda1 * L_ec + lambda2 * v,        lambda1, lambda2 >= 0,

with the energy confusion ``L_ec`` of one random pair of classes of the batch (Eq. 3) and the diversity
confusion ``v`` (Eq. 10). The terms themselves are :func:`zslib.methods.cml.confusion.energy_confusion` and
:func:`zslib.methods.cml.confusion.diversity_confusion`; this file holds the method (which features the terms see,
how they are weighted) and the paper's settings. CML-e is ``lambda2 = 0``, CML-d ``lambda1 = 0``.

**The scale of L_m (parameter ``scale``).** The paper's metric losses are *sums* over the batch: Eq. 12 sums
the triplet loss over the N anchors (one triplet each), Eq. 13 sums N-pair over all N samples, Eq. 14 sums
the binomial deviance over all pairs. zslib's triplet and N-pair losses *average* over anchors, so with
the paper's lambdas the confusion terms would weigh N times more than in the paper. ``scale="paper"`` (the
default) divides lambda1 and lambda2 by the batch size for those two losses, which gives exactly the
paper's relative weight of ``L_m`` and the confusion terms (the overall factor N does not matter to Adam,
whose steps do not depend on the scale of the loss). The binomial deviance is already the paper's sum.
``scale="mean"`` uses the lambdas as given (what the book's quick-profile chapters used before this
option existed).

**Which features.** EC and DC see the embedding as the network outputs it. On unit-norm embeddings DC is
the constant 1 and has no gradient, so CML configs use ``normalize=False`` and let the triplet and
binomial losses normalize inside (the paper's Table X diversities, 1.67 and 1.24, are above 1: its
features were not unit-norm).
"""
from __future__ import annotations

import warnings

import torch.nn.functional as F

from zslib.methods.cml.confusion import diversity_confusion, energy_confusion
from zslib.engine.registry import register
from zslib.engine.method import Method, Param, number, one_of

__all__ = ["CML", "CML_TRAINING", "CML_PRESETS", "PAPER_LOSSES", "cml_method", "cml_preset", "with_confusion"]

#: The paper's metric losses (Sec. III-D) in zslib's loss registry: name -> (registry name, parameters).
PAPER_LOSSES: dict[str, tuple[str, dict]] = {
    "triplet": ("triplet", {}),  # Eq. 12: squared distances of L2-normalized features, margin 0.1
    "npair": ("n_pair", {"negatives": "all"}),  # Eq. 13: inner products, every other class of the batch
    "binomial": ("binomial_deviance", {}),  # Eq. 14: cosine, alpha 2, beta 0.5, eta 1 / 25, summed over pairs
}
_BATCH_MEAN_LOSSES = {"triplet", "n_pair"}  # averaged in zslib, summed over the N samples in the paper
_ALIASES = {"n_pair": "npair", "binomial_deviance": "binomial"}


@register
class CML(Method):
    name = "cml"
    title = "confusion-based metric learning: energy and diversity confusion added to a metric loss"
    paper = "chen2022cml"
    equations = "Eq. 3 (energy confusion), Eq. 10 (diversity confusion), Eq. 11 (objective), Eq. 12-14 (L_m)"
    params = {
        "lambda1": Param(0.0, "weight of the energy confusion (Eq. 11); 0 gives CML-d", number(low=0.0)),
        "lambda2": Param(0.0, "weight of the diversity confusion (Eq. 11); 0 gives CML-e", number(low=0.0)),
        "ec_pairs": Param("random", "'random': one pair of classes per batch, as the paper; 'all': the mean "
                                    "over every pair", one_of("random", "all")),
        "scale": Param("paper", "'paper': lambdas divided by the batch size for the losses zslib averages "
                                "(triplet, n_pair), the paper's weighting; 'mean': lambdas as given",
                       one_of("paper", "mean")),
        "ec_features": Param("raw", "what the energy confusion (Eq. 3) reads: 'raw', the embedding as the network "
                                    "outputs it (with normalize=False its norm is free, so the term can also "
                                    "fall by shrinking norms); 'unit', the L2-normalized embedding that the "
                                    "cosine losses and the evaluation see", one_of("raw", "unit"),
                             omit_default=True),
    }

    def __init__(self, config, model, num_classes):
        super().__init__(config, model, num_classes)
        if self.p["scale"] == "paper" and config.loss not in ("triplet", "n_pair", "binomial_deviance"):
            raise ValueError(f"CML's scale='paper' is defined for the paper's losses (triplet, n_pair, "
                             f"binomial_deviance), not {config.loss!r}; use method_params scale='mean'")
        self.per_sample = self.p["scale"] == "paper" and config.loss in _BATCH_MEAN_LOSSES
        self._checked_norms = False

    def terms(self, phase, model, images, labels):
        emb = model(images)
        terms = {self.loss_name: self.loss(emb, labels)}
        lam1, lam2 = self.p["lambda1"], self.p["lambda2"]
        if self.per_sample:
            lam1, lam2 = lam1 / len(labels), lam2 / len(labels)
        if lam1 > 0:
            ec_in = F.normalize(emb, dim=1) if self.p["ec_features"] == "unit" else emb
            terms["ec"] = lam1 * energy_confusion(ec_in, labels, pairs=self.p["ec_pairs"])
        if lam2 > 0:
            if not self._checked_norms:
                self._checked_norms = True
                norms = emb.detach().float().norm(dim=1)
                if bool(((norms - 1).abs() < 1e-3).all()):
                    warnings.warn("the model outputs unit-norm embeddings: diversity confusion is then the constant "
                                  "1 and has no gradient. Use normalize=False (the losses normalize inside).",
                                  stacklevel=2)
            terms["dc"] = lam2 * diversity_confusion(emb)
        return terms


# ----------------------------------------------------------------------------------------------------
# The paper's settings (Sec. IV-A and Tables II-V), as Config overrides

#: Training settings shared by every CML run of the paper (Sec. IV-A): GoogLeNet V1 pretrained on ImageNet
#: with a new embedding layer, Adam at 1e-5 (10x on the new layer), weight decay 2e-4 (also for the
#: baselines, footnote 6), batches of 64 classes x 2 images. The preprocessing is "exactly the same as
#: [Song et al. 2016]"; CML does not spell out crop sizes, so none are set here.
CML_TRAINING: dict = {"backbone": "googlenet", "pretrained": True, "embedding_dim": 512, "lr": 1e-5,
                      "weight_decay": 2e-4, "new_layer_mult": 10.0, "batch_classes": 64, "batch_per_class": 2}

#: (Table, training iterations) per dataset; keys follow zslib.engine.data's names.
_DATASETS = {"cars196": ("II", 10_000), "sop": ("III", 20_000), "cub200": ("IV", 5_000), "inshop": ("V", 20_000)}

#: (lambda1, lambda2) per dataset and loss, from the captions of Tables II-V, which list them in the order
#: (Tri, N-Pair, Binomial). The CARS values agree with the optima of the ablations (Tables VII-VIII: lambda1
#: peaks at 0.02 / 0.3 / 0.13, lambda2 at 0.04 / 0.02 / 0.03). The SOP and In-Shop captions give the same values.
_LAMBDAS = {
    "cars196": {"triplet": (0.02, 0.04), "npair": (0.3, 0.02), "binomial": (0.13, 0.03)},
    "sop": {"triplet": (0.002, 0.01), "npair": (0.03, 0.02), "binomial": (0.013, 0.01)},
    "cub200": {"triplet": (0.02, 0.01), "npair": (0.3, 0.02), "binomial": (0.13, 0.03)},
    "inshop": {"triplet": (0.002, 0.01), "npair": (0.03, 0.02), "binomial": (0.013, 0.01)},
}

#: ``CML_PRESETS[dataset][loss]``: lambda1, lambda2, the training iterations and the source table.
#: Losses in the paper's naming: ``triplet``, ``npair``, ``binomial``.
CML_PRESETS: dict = {
    dataset: {loss: {"lambda1": l1, "lambda2": l2, "iterations": _DATASETS[dataset][1],
                     "source": f"chen2022cml, Table {_DATASETS[dataset][0]} caption and Sec. IV-A"}
              for loss, (l1, l2) in losses.items()}
    for dataset, losses in _LAMBDAS.items()
}

_VARIANTS = {"cml": (1, 1), "cml-e": (1, 0), "cml-d": (0, 1), "baseline": (0, 0)}


def _keys(dataset: str, loss: str, variant: str) -> tuple[str, str, str]:
    d, l, v = str(dataset).lower(), _ALIASES.get(str(loss).lower(), str(loss).lower()), str(variant).lower()
    if d not in CML_PRESETS:
        raise KeyError(f"no CML preset for dataset {dataset!r}; the paper covers {sorted(CML_PRESETS)}")
    if l not in CML_PRESETS[d]:
        raise KeyError(f"no CML preset for loss {loss!r}; the paper covers {sorted(PAPER_LOSSES)} "
                       "(registry names triplet, n_pair, binomial_deviance)")
    if v not in _VARIANTS:
        raise KeyError(f"unknown variant {variant!r}; use one of {sorted(_VARIANTS)}")
    return d, l, v


def cml_method(dataset: str, loss: str, variant: str = "cml", scale: str = "paper") -> dict:
    """Config overrides for the paper's loss and CML weights on ``dataset``: ``loss``, ``loss_params``,
    ``normalize=False``, ``method`` and ``method_params`` (``"baseline"`` for the baseline variant).
    ``variant``: ``"cml"``, ``"cml-e"`` (lambda2 = 0), ``"cml-d"`` (lambda1 = 0) or ``"baseline"``."""
    d, l, v = _keys(dataset, loss, variant)
    keep1, keep2 = _VARIANTS[v]
    preset = CML_PRESETS[d][l]
    name, loss_params = PAPER_LOSSES[l]
    overrides = {"loss": name, "loss_params": dict(loss_params), "normalize": False}
    if v == "baseline":
        return {**overrides, "method": "baseline", "method_params": {}}
    return {**overrides, "method": "cml", "method_params": {
        "lambda1": preset["lambda1"] * keep1, "lambda2": preset["lambda2"] * keep2, "scale": scale}}


def cml_preset(dataset: str, loss: str, variant: str = "cml", scale: str = "paper") -> dict:
    """:func:`cml_method` plus the paper's training settings (:data:`CML_TRAINING`, the dataset's
    iterations): ``Config.from_profile("full", dataset=dataset, **cml_preset(dataset, loss))`` is the
    paper's run."""
    d, l, _ = _keys(dataset, loss, variant)
    return {**CML_TRAINING, "iterations": CML_PRESETS[d][l]["iterations"], **cml_method(dataset, loss, variant, scale)}


def with_confusion(config, lambda1: float = 0.0, lambda2: float = 0.0, scale: str = "paper", **changes):
    """``config`` as a CML run with the energy- and diversity-confusion weights ``lambda1`` and ``lambda2``
    of Eq. 11 (both 0: the baseline method), plus any other ``changes``."""
    for name, lam in (("lambda1", lambda1), ("lambda2", lambda2)):
        if not lam >= 0:
            raise ValueError(f"{name} must be a non-negative weight, got {lam!r}")
    if lambda1 == 0 and lambda2 == 0:
        return config.replace(method="baseline", method_params={}, **changes)
    return config.replace(method="cml", method_params={"lambda1": float(lambda1), "lambda2": float(lambda2),
                                                       "scale": scale}, **changes)
