"""The standard deep metric learning losses, written as small composable functions.

Every loss here maps ``(embeddings, labels)`` to a scalar tensor:

* ``embeddings``: a float tensor of shape ``(B, D)``, one row per image;
* ``labels``: an integer tensor of shape ``(B,)`` with the class of each row.

Pair and triplet losses are pure functions whose hyperparameters are keyword-only arguments with
documented defaults. The two losses that own parameters (class proxies, class weight vectors) are
small :class:`torch.nn.Module` classes, :class:`ProxyNCA` and :class:`AMSoftmax`, that call the
pure functions :func:`proxy_nca_loss` and :func:`am_softmax_loss`.

Conventions shared by all losses
--------------------------------
* **Normalization is explicit.** Each loss has a ``normalize`` argument (or says in its docstring
  that it always works on cosine similarities). With ``normalize=True`` the rows are L2-normalized
  before any distance is taken, exactly like ``torch.nn.functional.normalize``.
* **Pairs are ordered and never self-pairs.** A positive pair is ``(i, j)`` with ``i != j`` and
  ``labels[i] == labels[j]``; a negative pair has different labels. Both ``(i, j)`` and ``(j, i)``
  are counted, so sums are twice the sum over unordered pairs and means are unchanged.
* **Reductions.** ``reduction`` is one of ``"mean"`` (over the valid terms), ``"sum"``, or
  ``"nonzero_mean"`` (mean over the strictly positive terms only: pytorch-metric-learning's
  ``AvgNonZeroReducer``). Some losses add their own paper-specific option (see
  :func:`binomial_deviance_loss`).
* **No valid pairs or triplets.** When a batch has nothing the loss can be computed on (for
  example every row has the same label, so there is no negative), the loss returns a zero that
  is still attached to the autograd graph (``embeddings.sum() * 0``): ``backward()`` works and
  gives zero gradients, never NaN. The same zero is returned by ``"nonzero_mean"`` when every
  term is zero.

The registry :data:`LOSSES` lists every loss with its default hyperparameters and where they come
from; :func:`get_loss` builds a ready-to-call ``loss(embeddings, labels)`` module from a name.

Papers: Hadsell et al. 2006 (contrastive); Schroff et al. 2015 (triplet, semi-hard mining);
Hermans et al. 2017 (batch-hard, generalized lifted structure); Sohn 2016 (N-pair); Yi et al. 2014
and CML (Chen et al. 2022) Eq. 14 / DeML (Chen et al. 2019) Eq. 5 (binomial deviance); Song et al.
2016 (lifted structured); Wang et al. 2017 (angular); Movshovitz-Attias et al. 2017 (Proxy-NCA);
Wang et al. 2018 (AM-Softmax); Wang et al. 2019 (multi-similarity).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    # shared helpers
    "check_inputs", "zero_loss", "pair_masks", "triplet_mask", "pairwise_distances",
    "cosine_similarities", "reduce_terms", "semihard_triplet_mask", "batch_hard_triplets",
    "multi_similarity_pair_masks", "n_pair_indices",
    # losses
    "contrastive_loss", "triplet_margin_loss", "n_pair_loss", "binomial_deviance_loss",
    "lifted_structure_loss", "generalized_lifted_structure_loss", "angular_loss",
    "proxy_nca_loss", "am_softmax_loss", "multi_similarity_loss",
    "ProxyNCA", "AMSoftmax", "FunctionalLoss",
    # registry
    "LossSpec", "LOSSES", "get_loss",
]

REDUCTIONS = ("mean", "sum", "nonzero_mean")


# --------------------------------------------------------------------------------------------
# Shared helpers: input checks, masks, distances, reductions
# --------------------------------------------------------------------------------------------
def check_inputs(embeddings: Tensor, labels: Tensor, loss_name: str = "loss") -> Tensor:
    """Validate a batch and return ``labels`` as a 1-D ``long`` tensor on the embeddings' device.

    Raises ``ValueError``/``TypeError`` that say what was wrong and how to fix it.
    """
    if not isinstance(embeddings, Tensor):
        raise TypeError(f"{loss_name}: embeddings must be a torch.Tensor of shape (B, D), "
                        f"got {type(embeddings).__name__}.")
    if embeddings.dim() != 2:
        raise ValueError(f"{loss_name}: embeddings must have shape (B, D); got shape "
                         f"{tuple(embeddings.shape)}. Flatten the features first (x.flatten(1)).")
    if not embeddings.is_floating_point():
        raise TypeError(f"{loss_name}: embeddings must be a floating-point tensor, got "
                        f"{embeddings.dtype}. Call .float() on them.")
    if not isinstance(labels, Tensor):
        labels = torch.as_tensor(labels)
    if labels.dim() != 1 or labels.shape[0] != embeddings.shape[0]:
        raise ValueError(f"{loss_name}: labels must have shape (B,) = ({embeddings.shape[0]},) "
                         f"to match the embeddings; got shape {tuple(labels.shape)}.")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{loss_name}: labels must be integer class ids, got dtype {labels.dtype}. "
                        "Convert them with labels.long().")
    if embeddings.shape[0] == 0:
        raise ValueError(f"{loss_name}: the batch is empty; pass at least one embedding.")
    return labels.to(device=embeddings.device, dtype=torch.long)


def zero_loss(*tensors: Tensor) -> Tensor:
    """The documented 'nothing to learn from' value: 0 that stays attached to the autograd graph.

    ``sum(t.sum() for t in tensors) * 0`` keeps ``requires_grad`` and gives zero gradients.
    """
    total = tensors[0].sum()
    for t in tensors[1:]:
        total = total + t.sum()
    return total * 0.0


def pair_masks(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Boolean ``(B, B)`` masks of positive pairs (same label, ``i != j``) and negative pairs."""
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return same & ~eye, ~same


def triplet_mask(labels: Tensor) -> Tensor:
    """Boolean ``(B, B, B)`` mask of valid triplets ``[a, p, n]``: ``(a, p)`` positive, ``(a, n)`` negative."""
    pos, neg = pair_masks(labels)
    return pos[:, :, None] & neg[:, None, :]


def _maybe_normalize(x: Tensor, normalize: bool) -> Tensor:
    return F.normalize(x, p=2, dim=1) if normalize else x


def pairwise_distances(x: Tensor, y: Tensor | None = None, squared: bool = False) -> Tensor:
    """Euclidean distances between the rows of ``x`` and of ``y`` (``x`` itself when ``y`` is None).

    Uses ``|x|^2 + |y|^2 - 2 x.y`` clamped at 0. The square root is taken only where the squared
    distance is positive, so coincident points (and the diagonal) give distance 0 with a zero
    gradient instead of the infinite derivative of ``sqrt`` at 0.
    """
    same = y is None
    y = x if same else y
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.t())
    sq = sq.clamp_min(0.0)
    if same:
        eye = torch.eye(x.shape[0], dtype=torch.bool, device=x.device)
        sq = sq.masked_fill(eye, 0.0)
    if squared:
        return sq
    positive = sq > 0
    safe = torch.where(positive, sq, torch.ones_like(sq))
    return torch.where(positive, safe.sqrt(), torch.zeros_like(sq))


def cosine_similarities(x: Tensor, y: Tensor | None = None) -> Tensor:
    """Cosine similarity matrix between the rows of ``x`` and of ``y`` (``x`` when None)."""
    xn = F.normalize(x, p=2, dim=1)
    yn = xn if y is None else F.normalize(y, p=2, dim=1)
    return xn @ yn.t()


def _check_reduction(reduction: str, allowed=REDUCTIONS, loss_name: str = "loss") -> None:
    if reduction not in allowed:
        raise ValueError(f"{loss_name}: reduction must be one of {allowed}, got {reduction!r}.")


def reduce_terms(terms: Tensor, reduction: str, embeddings: Tensor) -> Tensor:
    """Reduce a 1-D tensor of loss terms; an empty selection gives :func:`zero_loss`."""
    if reduction == "nonzero_mean":
        terms = terms[terms > 0]
    if terms.numel() == 0:
        return zero_loss(embeddings)
    if reduction == "sum":
        return terms.sum()
    return terms.mean()


# --------------------------------------------------------------------------------------------
# Contrastive
# --------------------------------------------------------------------------------------------
def contrastive_loss(embeddings: Tensor, labels: Tensor, *, pos_margin: float = 0.0,
                     neg_margin: float = 1.0, squared: bool = False, normalize: bool = True,
                     reduction: str = "mean") -> Tensor:
    """Contrastive loss (Hadsell, Chopra & LeCun 2006).

    For a positive pair the term is ``[d_ij - pos_margin]_+ ** q`` and for a negative pair
    ``[neg_margin - d_ij]_+ ** q``, with ``d`` the Euclidean distance and ``q = 2`` when
    ``squared=True`` (the squared-hinge form of Hadsell et al.) or ``q = 1`` otherwise (the form of
    pytorch-metric-learning's ``ContrastiveLoss``).

    The positive terms and the negative terms are reduced *separately* and the two results are
    added, so the many negative pairs of a batch do not drown the few positive ones.

    Defaults: ``pos_margin=0``, ``neg_margin=1`` on L2-normalized embeddings (``normalize=True``),
    where distances lie in ``[0, 2]``.
    """
    labels = check_inputs(embeddings, labels, "contrastive_loss")
    _check_reduction(reduction, loss_name="contrastive_loss")
    x = _maybe_normalize(embeddings, normalize)
    d = pairwise_distances(x)
    pos, neg = pair_masks(labels)
    if not pos.any() and not neg.any():
        return zero_loss(embeddings)
    power = 2 if squared else 1
    pos_terms = F.relu(d[pos] - pos_margin) ** power
    neg_terms = F.relu(neg_margin - d[neg]) ** power
    return reduce_terms(pos_terms, reduction, embeddings) + reduce_terms(neg_terms, reduction, embeddings)


# --------------------------------------------------------------------------------------------
# Triplet with mining
# --------------------------------------------------------------------------------------------
def semihard_triplet_mask(dist: Tensor, labels: Tensor, margin: float) -> Tensor:
    """Semi-hard triplets (Schroff et al. 2015, FaceNet Sec. 3.2): the negative is farther than
    the positive but inside the margin, ``0 < d_an - d_ap <= margin``. Returns a ``(B, B, B)`` mask.

    All semi-hard triplets of the batch are kept (the definition of pytorch-metric-learning's
    ``TripletMarginMiner(type_of_triplets="semihard")``), not one negative per anchor-positive pair.
    """
    with torch.no_grad():
        gap = dist[:, None, :] - dist[:, :, None]  # [a, p, n] = d_an - d_ap
        return triplet_mask(labels) & (gap > 0) & (gap <= margin)


def batch_hard_triplets(dist: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Batch-hard mining (Hermans, Beyer & Leibe 2017): for every anchor that has at least one
    positive and one negative, its farthest positive and its closest negative.

    Returns index tensors ``(anchors, positives, negatives)`` of equal length.
    """
    with torch.no_grad():
        pos, neg = pair_masks(labels)
        valid = pos.any(1) & neg.any(1)
        far_pos = dist.masked_fill(~pos, -math.inf).argmax(1)
        near_neg = dist.masked_fill(~neg, math.inf).argmin(1)
        anchors = torch.nonzero(valid, as_tuple=True)[0]
        return anchors, far_pos[anchors], near_neg[anchors]


def triplet_margin_loss(embeddings: Tensor, labels: Tensor, *, margin: float = 0.1,
                        mining: str = "all", squared: bool = True, normalize: bool = True,
                        reduction: str = "mean") -> Tensor:
    """Triplet margin loss ``[d(a, p) - d(a, n) + margin]_+`` (CML Eq. 12; Schroff et al. 2015).

    Defaults follow CML Sec. III-D: squared Euclidean distances between L2-normalized features
    (``squared=True, normalize=True``) and ``margin=0.1``.

    ``mining`` selects the triplets:

    * ``"all"``: every valid triplet of the batch;
    * ``"semihard"``: the triplets of :func:`semihard_triplet_mask`;
    * ``"batch_hard"``: one triplet per anchor, from :func:`batch_hard_triplets`.

    The terms of the selected triplets are reduced with ``reduction``. Mining itself carries no
    gradient (it only picks indices).
    """
    labels = check_inputs(embeddings, labels, "triplet_margin_loss")
    _check_reduction(reduction, loss_name="triplet_margin_loss")
    x = _maybe_normalize(embeddings, normalize)
    d = pairwise_distances(x, squared=squared)
    if mining == "batch_hard":
        a, p, n = batch_hard_triplets(d, labels)
        terms = F.relu(d[a, p] - d[a, n] + margin)
    elif mining in ("all", "semihard"):
        mask = triplet_mask(labels) if mining == "all" else semihard_triplet_mask(d, labels, margin)
        a, p, n = torch.nonzero(mask, as_tuple=True)
        terms = F.relu(d[a, p] - d[a, n] + margin)
    else:
        raise ValueError(f"triplet_margin_loss: mining must be 'all', 'semihard' or 'batch_hard', "
                         f"got {mining!r}.")
    return reduce_terms(terms, reduction, embeddings)


# --------------------------------------------------------------------------------------------
# N-pair
# --------------------------------------------------------------------------------------------
def n_pair_indices(labels: Tensor) -> tuple[Tensor, Tensor]:
    """One (anchor, positive) pair per class with at least two rows: the class's first and second
    row in batch order. Returns two index tensors, ordered by first appearance of the class."""
    first: dict[int, int] = {}
    anchors, positives = [], []
    for i, c in enumerate(labels.tolist()):
        if c not in first:
            first[c] = i
        elif first[c] >= 0:
            anchors.append(first[c])
            positives.append(i)
            first[c] = -1  # this class has its pair
    dev = labels.device
    return (torch.tensor(anchors, dtype=torch.long, device=dev),
            torch.tensor(positives, dtype=torch.long, device=dev))


def n_pair_loss(embeddings: Tensor, labels: Tensor, *, negatives: str = "pairs",
                l2_reg: float = 0.0, normalize: bool = False, reduction: str = "mean") -> Tensor:
    """Multi-class N-pair loss (Sohn 2016; CML Eq. 13) on inner products.

    From the batch, one ``(anchor, positive)`` pair per class is taken (:func:`n_pair_indices`).
    For anchor ``f_i`` with positive ``f_i+`` the term is
    ``log(1 + sum_j exp(f_i . f_j - f_i . f_i+))`` where the negatives ``f_j`` are

    * ``negatives="pairs"`` (Sohn 2016, pytorch-metric-learning ``NPairsLoss``): the *positives*
      of the other pairs, i.e. softmax cross-entropy of ``anchors @ positives.T`` with the
      diagonal as target;
    * ``negatives="all"`` (CML Eq. 13 as written): every row of the batch with another label.

    Sohn's loss is not symmetric: swapping which row of a class is the anchor changes the value.
    ``l2_reg`` adds ``l2_reg * mean_i ||f_i||^2`` over the rows used (Sohn regularizes the
    embedding norm instead of normalizing; default 0 = off). ``normalize=False`` by default.
    ``reduction`` applies over anchors (``"mean"`` or ``"sum"``). With fewer than one pair the
    loss is :func:`zero_loss`.
    """
    labels = check_inputs(embeddings, labels, "n_pair_loss")
    _check_reduction(reduction, ("mean", "sum"), "n_pair_loss")
    x = _maybe_normalize(embeddings, normalize)
    a, p = n_pair_indices(labels)
    if a.numel() == 0:
        return zero_loss(embeddings)
    sim_ap = (x[a] * x[p]).sum(1)  # f_i . f_i+
    if negatives == "pairs":
        others = x[a] @ x[p].t()
        keep = ~torch.eye(a.numel(), dtype=torch.bool, device=x.device)
    elif negatives == "all":
        others = x[a] @ x.t()
        keep = labels[a][:, None] != labels[None, :]
    else:
        raise ValueError(f"n_pair_loss: negatives must be 'pairs' or 'all', got {negatives!r}.")
    logits = (others - sim_ap[:, None]).masked_fill(~keep, -math.inf)
    zeros = torch.zeros_like(sim_ap)[:, None]
    terms = torch.logsumexp(torch.cat([logits, zeros], 1), dim=1)  # log(1 + sum exp)
    loss = terms.sum() if reduction == "sum" else terms.mean()
    if l2_reg:
        used = torch.cat([a, p])
        loss = loss + l2_reg * (x[used] ** 2).sum(1).mean()
    return loss


# --------------------------------------------------------------------------------------------
# Binomial deviance
# --------------------------------------------------------------------------------------------
def binomial_deviance_loss(embeddings: Tensor, labels: Tensor, *, alpha: float = 2.0,
                           beta: float = 0.5, pos_weight: float = 1.0, neg_weight: float = 25.0,
                           reduction: str = "sum") -> Tensor:
    """Binomial deviance loss on cosine similarities (Yi et al. 2014; CML Eq. 14; DeML Eq. 5).

    For every ordered pair ``i != j`` with cosine similarity ``D_ij`` and ``s_ij = 1`` when the
    labels agree (0 otherwise), the term is::

        log(1 + exp(-(2 s_ij - 1) * alpha * (D_ij - beta) * eta_ij))

    with the cost ``eta_ij = pos_weight`` for positive pairs and ``eta_ij = neg_weight`` for
    negative pairs. The cost multiplies the *exponent*: a large ``neg_weight`` makes the negative
    term a sharp hinge at ``D_ij = beta``.

    Paper values: ``alpha=2`` (scale), ``beta=0.5`` (translation), ``pos_weight=1``; the negative
    cost is 25 in CML (``eta``, Eq. 14) and 35 in DeML (``gamma``, Eq. 5).
    The embeddings are always compared by cosine similarity (L2 normalization is built in).

    ``reduction``:

    * ``"sum"`` (default): the plain sum over pairs of CML Eq. 14;
    * ``"balanced"``: DeML Eq. 5, each term divided by ``w_pq``, the number of positive pairs
      (for a positive term) or of negative pairs (for a negative term), i.e. the mean positive
      term plus the mean negative term;
    * ``"mean"``: the mean over all pairs.

    Self-pairs are excluded: their cosine is identically 1, so they would only add a constant.
    """
    labels = check_inputs(embeddings, labels, "binomial_deviance_loss")
    _check_reduction(reduction, ("sum", "balanced", "mean"), "binomial_deviance_loss")
    sim = cosine_similarities(embeddings)
    pos, neg = pair_masks(labels)
    if not pos.any() and not neg.any():
        return zero_loss(embeddings)
    pos_terms = F.softplus(-alpha * (sim[pos] - beta) * pos_weight)
    neg_terms = F.softplus(alpha * (sim[neg] - beta) * neg_weight)
    if reduction == "sum":
        return pos_terms.sum() + neg_terms.sum()
    if reduction == "mean":
        return torch.cat([pos_terms, neg_terms]).mean()
    return reduce_terms(pos_terms, "mean", embeddings) + reduce_terms(neg_terms, "mean", embeddings)


# --------------------------------------------------------------------------------------------
# Lifted structure
# --------------------------------------------------------------------------------------------
def lifted_structure_loss(embeddings: Tensor, labels: Tensor, *, neg_margin: float = 1.0,
                          pos_margin: float = 0.0, normalize: bool = True,
                          reduction: str = "mean") -> Tensor:
    """Lifted structured loss (Song et al. 2016, Eqs. 3-4).

    For a positive pair ``(i, j)`` with distance ``D_ij``::

        J_ij = log( sum_{k in N(i)} exp(neg_margin - D_ik) + sum_{l in N(j)} exp(neg_margin - D_jl) )
               + D_ij - pos_margin

    where ``N(i)`` are the negatives of ``i`` (Song's ``alpha`` is ``neg_margin``; ``pos_margin=0``
    is the paper). The per-pair term is ``[J_ij]_+^2 / 2`` over *ordered* positive pairs, so with
    ``reduction="mean"`` the result is exactly Song's ``1/(2|P|) sum_{(i,j) in P} [J_ij]_+^2`` over
    unordered pairs. Euclidean (not squared) distances; ``normalize=True`` by default (as in
    pytorch-metric-learning; Song et al. used unnormalized features, pass ``normalize=False``).
    Needs at least one positive and one negative pair, otherwise :func:`zero_loss`.
    """
    labels = check_inputs(embeddings, labels, "lifted_structure_loss")
    _check_reduction(reduction, loss_name="lifted_structure_loss")
    x = _maybe_normalize(embeddings, normalize)
    d = pairwise_distances(x)
    pos, neg = pair_masks(labels)
    if not pos.any() or not neg.any():
        return zero_loss(embeddings)
    # When a negative pair exists, every row has a negative, so each row's logsumexp is finite.
    row = torch.logsumexp((neg_margin - d).masked_fill(~neg, -math.inf), dim=1)
    i, j = torch.nonzero(pos, as_tuple=True)
    J = torch.logaddexp(row[i], row[j]) + d[i, j] - pos_margin
    terms = F.relu(J) ** 2 / 2
    return reduce_terms(terms, reduction, embeddings)


def generalized_lifted_structure_loss(embeddings: Tensor, labels: Tensor, *,
                                      neg_margin: float = 1.0, pos_margin: float = 0.0,
                                      normalize: bool = True, reduction: str = "mean") -> Tensor:
    """Generalized lifted structure loss (Hermans, Beyer & Leibe 2017, Sec. 2), one term per anchor::

        [ log sum_{p in P(a)} exp(D_ap - pos_margin) + log sum_{n in N(a)} exp(neg_margin - D_an) ]_+

    a smooth version of batch-hard. Anchors without a positive or without a negative are skipped
    (pytorch-metric-learning instead counts their missing log-sum-exp as 0; the two agree when
    every row has a positive and a negative). ``normalize=True`` by default.
    """
    labels = check_inputs(embeddings, labels, "generalized_lifted_structure_loss")
    _check_reduction(reduction, loss_name="generalized_lifted_structure_loss")
    x = _maybe_normalize(embeddings, normalize)
    d = pairwise_distances(x)
    pos, neg = pair_masks(labels)
    valid = pos.any(1) & neg.any(1)
    if not valid.any():
        return zero_loss(embeddings)
    d, pos, neg = d[valid], pos[valid], neg[valid]
    lse_pos = torch.logsumexp((d - pos_margin).masked_fill(~pos, -math.inf), dim=1)
    lse_neg = torch.logsumexp((neg_margin - d).masked_fill(~neg, -math.inf), dim=1)
    return reduce_terms(F.relu(lse_pos + lse_neg), reduction, embeddings)


# --------------------------------------------------------------------------------------------
# Angular
# --------------------------------------------------------------------------------------------
def angular_loss(embeddings: Tensor, labels: Tensor, *, alpha: float = 40.0,
                 normalize: bool = True, reduction: str = "mean") -> Tensor:
    """Angular loss, N-pair form (Wang et al. 2017, Eq. 8 with the smooth log-sum-exp).

    For a positive pair ``(a, p)`` and the negatives ``n`` of ``a``::

        f_apn = 4 tan^2(alpha) (x_a + x_p)^T x_n - 2 (1 + tan^2(alpha)) x_a^T x_p
        term_ap = log(1 + sum_n exp(f_apn))

    ``alpha`` is the angle bound in **degrees** (the paper uses 36-55; 40 is
    pytorch-metric-learning's default). Every ordered positive pair is an (anchor, positive)
    and every row of another class is a negative (the batch-wise generalization used by
    pytorch-metric-learning, rather than only the other pairs' positives). The derivation assumes
    unit-norm features: ``normalize=True`` by default. Terms are reduced over positive pairs.
    """
    labels = check_inputs(embeddings, labels, "angular_loss")
    _check_reduction(reduction, loss_name="angular_loss")
    x = _maybe_normalize(embeddings, normalize)
    pos, neg = pair_masks(labels)
    if not pos.any() or not neg.any():
        return zero_loss(embeddings)
    t2 = math.tan(math.radians(alpha)) ** 2
    s = x @ x.t()
    a, p = torch.nonzero(pos, as_tuple=True)
    f = 4.0 * t2 * (s[a] + s[p]) - 2.0 * (1.0 + t2) * s[a, p][:, None]
    f = f.masked_fill(~neg[a], -math.inf)
    terms = torch.logsumexp(torch.cat([f, torch.zeros_like(f[:, :1])], 1), dim=1)
    return reduce_terms(terms, reduction, embeddings)


# --------------------------------------------------------------------------------------------
# Multi-similarity
# --------------------------------------------------------------------------------------------
def multi_similarity_pair_masks(sim: Tensor, labels: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """Pair mining of the multi-similarity loss (Wang et al. 2019, Eqs. 5-6).

    A negative pair ``(i, k)`` is kept when ``S_ik + epsilon > min_{positives} S_ij``, a positive
    pair ``(i, j)`` when ``S_ij - epsilon < max_{negatives} S_ik``. Returns the boolean
    ``(pos_keep, neg_keep)`` masks; computed without gradient.
    """
    with torch.no_grad():
        pos, neg = pair_masks(labels)
        min_pos = sim.masked_fill(~pos, math.inf).min(1, keepdim=True).values
        max_neg = sim.masked_fill(~neg, -math.inf).max(1, keepdim=True).values
        return pos & (sim - epsilon < max_neg), neg & (sim + epsilon > min_pos)


def multi_similarity_loss(embeddings: Tensor, labels: Tensor, *, alpha: float = 2.0,
                          beta: float = 50.0, base: float = 0.5, epsilon: float | None = 0.1,
                          reduction: str = "mean") -> Tensor:
    """Multi-similarity loss (Wang et al. 2019, Eq. 9) on cosine similarities ``S``::

        L_i = 1/alpha log(1 + sum_{j in P_i} exp(-alpha (S_ij - base)))
            + 1/beta  log(1 + sum_{k in N_i} exp( beta (S_ik - base)))

    averaged over all anchors of the batch (anchors with no kept pair contribute 0, as in the
    authors' code and pytorch-metric-learning). ``P_i``/``N_i`` are the pairs kept by
    :func:`multi_similarity_pair_masks` with margin ``epsilon``; ``epsilon=None`` keeps every pair.
    Defaults ``alpha=2, beta=50, base=0.5, epsilon=0.1`` follow the authors' released
    configuration as mirrored by pytorch-metric-learning. L2 normalization is built in.
    """
    labels = check_inputs(embeddings, labels, "multi_similarity_loss")
    _check_reduction(reduction, ("mean", "sum"), "multi_similarity_loss")
    sim = cosine_similarities(embeddings)
    if epsilon is None:
        pos, neg = pair_masks(labels)
    else:
        pos, neg = multi_similarity_pair_masks(sim, labels, epsilon)
    if not pos.any() and not neg.any():
        return zero_loss(embeddings)
    zeros = torch.zeros_like(sim[:, :1])
    pos_lse = torch.logsumexp(torch.cat([(-alpha * (sim - base)).masked_fill(~pos, -math.inf), zeros], 1), 1)
    neg_lse = torch.logsumexp(torch.cat([(beta * (sim - base)).masked_fill(~neg, -math.inf), zeros], 1), 1)
    terms = pos_lse / alpha + neg_lse / beta
    return terms.sum() if reduction == "sum" else terms.mean()


# --------------------------------------------------------------------------------------------
# Losses with parameters: Proxy-NCA and AM-Softmax
# --------------------------------------------------------------------------------------------
def _check_class_labels(labels: Tensor, num_classes: int, loss_name: str) -> None:
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(f"{loss_name}: labels must lie in [0, {num_classes}) (one proxy or weight "
                         f"per training class); got labels in [{int(labels.min())}, "
                         f"{int(labels.max())}]. Remap the training classes to 0..C-1.")


def proxy_nca_loss(embeddings: Tensor, labels: Tensor, proxies: Tensor, *, scale: float = 1.0,
                   exclude_positive: bool = False, reduction: str = "mean") -> Tensor:
    """Proxy-NCA loss (Movshovitz-Attias et al. 2017, Eq. in Sec. 3.2 / Alg. 1).

    With ``x`` and the proxies L2-normalized and ``d`` the *squared* Euclidean distance::

        term = -log( exp(-scale d(x, p_y)) / sum_z exp(-scale d(x, p_z)) )

    i.e. softmax cross-entropy over ``-scale * d``. The paper's denominator runs over the other
    classes only (``exclude_positive=True``); the common implementation, including
    pytorch-metric-learning's ``ProxyNCALoss``, keeps the positive proxy in it
    (``exclude_positive=False``, the default; the loss is then bounded below by 0).
    ``scale=1`` is the paper (no scaling).
    """
    labels = check_inputs(embeddings, labels, "proxy_nca_loss")
    _check_reduction(reduction, ("mean", "sum"), "proxy_nca_loss")
    if proxies.dim() != 2 or proxies.shape[1] != embeddings.shape[1]:
        raise ValueError(f"proxy_nca_loss: proxies must have shape (C, {embeddings.shape[1]}); "
                         f"got {tuple(proxies.shape)}.")
    _check_class_labels(labels, proxies.shape[0], "proxy_nca_loss")
    d = pairwise_distances(F.normalize(embeddings, dim=1), F.normalize(proxies, dim=1), squared=True)
    logits = -scale * d
    target = logits.gather(1, labels[:, None]).squeeze(1)
    if exclude_positive:
        others = logits.scatter(1, labels[:, None], -math.inf)
        terms = torch.logsumexp(others, 1) - target
    else:
        terms = torch.logsumexp(logits, 1) - target
    return terms.sum() if reduction == "sum" else terms.mean()


def am_softmax_loss(embeddings: Tensor, labels: Tensor, weight: Tensor, *, scale: float = 30.0,
                    margin: float = 0.35, reduction: str = "mean") -> Tensor:
    """Additive-margin softmax (AM-Softmax; Wang et al. 2018, Eq. 6; = CosFace's LMCL).

    ``cos_j`` is the cosine between the embedding and the class weight ``w_j`` (both
    L2-normalized). The target logit is ``scale * (cos_y - margin)``, the others ``scale * cos_j``,
    and the loss is their softmax cross-entropy. Paper values ``scale=30, margin=0.35``.
    ``weight`` has shape ``(C, D)``.
    """
    labels = check_inputs(embeddings, labels, "am_softmax_loss")
    _check_reduction(reduction, ("mean", "sum"), "am_softmax_loss")
    if weight.dim() != 2 or weight.shape[1] != embeddings.shape[1]:
        raise ValueError(f"am_softmax_loss: weight must have shape (C, {embeddings.shape[1]}); "
                         f"got {tuple(weight.shape)}.")
    _check_class_labels(labels, weight.shape[0], "am_softmax_loss")
    cos = F.normalize(embeddings, dim=1) @ F.normalize(weight, dim=1).t()
    onehot = F.one_hot(labels, weight.shape[0]).to(cos.dtype)
    logits = scale * (cos - margin * onehot)
    return F.cross_entropy(logits, labels, reduction=reduction)


class ProxyNCA(nn.Module):
    """Proxy-NCA with one learnable proxy per training class (see :func:`proxy_nca_loss`).

    ``ProxyNCA(num_classes, embedding_dim, scale=1.0, exclude_positive=False)``; proxies are
    initialized from a standard normal (they are normalized inside the loss). Optimize
    ``loss.parameters()`` together with the network.
    """

    def __init__(self, num_classes: int, embedding_dim: int, *, scale: float = 1.0,
                 exclude_positive: bool = False, reduction: str = "mean"):
        super().__init__()
        _check_sizes(num_classes, embedding_dim, "ProxyNCA")
        self.num_classes, self.embedding_dim = num_classes, embedding_dim
        self.scale, self.exclude_positive, self.reduction = scale, exclude_positive, reduction
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_dim))

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return proxy_nca_loss(embeddings, labels, self.proxies.to(embeddings.dtype), scale=self.scale,
                              exclude_positive=self.exclude_positive, reduction=self.reduction)

    def extra_repr(self) -> str:
        return (f"num_classes={self.num_classes}, embedding_dim={self.embedding_dim}, "
                f"scale={self.scale}, exclude_positive={self.exclude_positive}")


class AMSoftmax(nn.Module):
    """AM-Softmax with a learnable ``(num_classes, embedding_dim)`` weight (see :func:`am_softmax_loss`).

    ``AMSoftmax(num_classes, embedding_dim, scale=30.0, margin=0.35)``; the weight is initialized
    with Xavier-normal values.
    """

    def __init__(self, num_classes: int, embedding_dim: int, scale: float = 30.0,
                 margin: float = 0.35, *, reduction: str = "mean"):
        super().__init__()
        _check_sizes(num_classes, embedding_dim, "AMSoftmax")
        self.num_classes, self.embedding_dim = num_classes, embedding_dim
        self.scale, self.margin, self.reduction = scale, margin, reduction
        self.weight = nn.Parameter(nn.init.xavier_normal_(torch.empty(num_classes, embedding_dim)))

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return am_softmax_loss(embeddings, labels, self.weight.to(embeddings.dtype), scale=self.scale,
                               margin=self.margin, reduction=self.reduction)

    def extra_repr(self) -> str:
        return (f"num_classes={self.num_classes}, embedding_dim={self.embedding_dim}, "
                f"scale={self.scale}, margin={self.margin}")


def _check_sizes(num_classes, embedding_dim, name: str) -> None:
    for arg, value in (("num_classes", num_classes), ("embedding_dim", embedding_dim)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}. "
                             f"Pass get_loss(..., num_classes=C, embedding_dim=D).")


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
class FunctionalLoss(nn.Module):
    """Wraps a pure loss function and its hyperparameters as a ``loss(embeddings, labels)`` module
    (it has no parameters; being a module lets a trainer treat every loss alike)."""

    def __init__(self, fn: Callable[..., Tensor], name: str | None = None, **hyper: Any):
        super().__init__()
        self.fn, self.name, self.hyper = fn, name or fn.__name__, dict(hyper)

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return self.fn(embeddings, labels, **self.hyper)

    def extra_repr(self) -> str:
        return f"{self.name}: " + ", ".join(f"{k}={v!r}" for k, v in self.hyper.items())


@dataclass(frozen=True)
class LossSpec:
    """One registry entry: the function or module class, its default hyperparameters, and the
    paper (with equation) the defaults come from. ``parametric`` losses need ``num_classes`` and
    ``embedding_dim``."""

    factory: Callable[..., Any]
    defaults: Mapping[str, Any]
    source: str
    parametric: bool = False


def _spec(factory, source, parametric=False, **defaults) -> LossSpec:
    return LossSpec(factory, MappingProxyType(dict(defaults)), source, parametric)


LOSSES: dict[str, LossSpec] = {
    "contrastive": _spec(contrastive_loss, "Hadsell et al. 2006; margins as pytorch-metric-learning",
                         pos_margin=0.0, neg_margin=1.0, squared=False, normalize=True, reduction="mean"),
    "triplet": _spec(triplet_margin_loss, "CML Eq. 12: squared distance, L2-normalized, m=0.1",
                     margin=0.1, mining="all", squared=True, normalize=True, reduction="mean"),
    "triplet_semihard": _spec(triplet_margin_loss, "CML Eq. 12 + semi-hard mining (Schroff et al. 2015)",
                              margin=0.1, mining="semihard", squared=True, normalize=True, reduction="mean"),
    "triplet_batch_hard": _spec(triplet_margin_loss, "CML Eq. 12 + batch-hard mining (Hermans et al. 2017)",
                                margin=0.1, mining="batch_hard", squared=True, normalize=True,
                                reduction="mean"),
    "n_pair": _spec(n_pair_loss, "Sohn 2016; CML Eq. 13 with negatives='all'",
                    negatives="pairs", l2_reg=0.0, normalize=False, reduction="mean"),
    "binomial_deviance": _spec(binomial_deviance_loss, "CML Eq. 14: alpha=2, beta=0.5, eta=1 (pos) / 25 (neg), plain sum",
                               alpha=2.0, beta=0.5, pos_weight=1.0, neg_weight=25.0, reduction="sum"),
    "binomial_deml": _spec(binomial_deviance_loss, "DeML Eq. 5: alpha=2, beta=0.5, gamma=1 (pos) / 35 (neg), 1/w_pq weights",
                           alpha=2.0, beta=0.5, pos_weight=1.0, neg_weight=35.0, reduction="balanced"),
    "lifted_structure": _spec(lifted_structure_loss, "Song et al. 2016 Eq. 4, alpha=1",
                              neg_margin=1.0, pos_margin=0.0, normalize=True, reduction="mean"),
    "generalized_lifted_structure": _spec(generalized_lifted_structure_loss, "Hermans et al. 2017",
                                          neg_margin=1.0, pos_margin=0.0, normalize=True,
                                          reduction="mean"),
    "angular": _spec(angular_loss, "Wang et al. 2017, alpha in 36-55 degrees (40 here)",
                     alpha=40.0, normalize=True, reduction="mean"),
    "multi_similarity": _spec(multi_similarity_loss, "Wang et al. 2019, authors' configuration",
                              alpha=2.0, beta=50.0, base=0.5, epsilon=0.1, reduction="mean"),
    "proxy_nca": _spec(ProxyNCA, "Movshovitz-Attias et al. 2017 (no scale)", parametric=True,
                       scale=1.0, exclude_positive=False, reduction="mean"),
    "am_softmax": _spec(AMSoftmax, "Wang et al. 2018: s=30, m=0.35", parametric=True,
                        scale=30.0, margin=0.35, reduction="mean"),
}


def get_loss(name: str, num_classes: int | None = None, embedding_dim: int | None = None,
             **hyper: Any) -> nn.Module:
    """Build ``loss(embeddings, labels) -> scalar`` from a :data:`LOSSES` name.

    ``hyper`` overrides the defaults of ``LOSSES[name].defaults``; unknown keys raise. Parametric
    losses (``proxy_nca``, ``am_softmax``) need ``num_classes`` and ``embedding_dim`` and return a
    module whose parameters must be optimized; the others return a parameter-free
    :class:`FunctionalLoss`.
    """
    if name not in LOSSES:
        raise ValueError(f"get_loss: unknown loss {name!r}; choose one of {sorted(LOSSES)}.")
    spec = LOSSES[name]
    unknown = set(hyper) - set(spec.defaults)
    if unknown:
        raise TypeError(f"get_loss({name!r}): unknown hyperparameter(s) {sorted(unknown)}; "
                        f"this loss accepts {sorted(spec.defaults)}.")
    kwargs = {**spec.defaults, **hyper}
    if spec.parametric:
        if num_classes is None or embedding_dim is None:
            raise ValueError(f"get_loss({name!r}): this loss learns one vector per class, so it "
                             "needs num_classes=<number of training classes> and "
                             "embedding_dim=<embedding size>.")
        return spec.factory(num_classes, embedding_dim, **kwargs)
    return FunctionalLoss(spec.factory, name=name, **kwargs)
