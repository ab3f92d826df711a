"""ZSML's continuous labels and cross-update regression loss (Xu, Cao, Yang, Yang and Deng,
"Zero-shot Metric Learning", IJCAI 2019, Sec. 3.3-4; ``xu2019zsml``).

ZSML regresses a predicted similarity ``s_ij`` (:class:`zslib.methods.zsml.relation.PairSimilarity`) onto a
*continuous* label ``y_ij``. A positive pair's label lies in ``(beta, 1)`` and a negative pair's in
``(0, alpha)``. The label starts from the pair's distance (Eq. 3). It is then tuned together with the
network by alternating two squared-error problems with squared-hinge range penalties:

* network step (Eq. 4 -> 7, Algorithm 1 steps 5-6): fix ``y``, minimize :func:`similarity_loss` over
  the network parameters;
* label step (Eq. 5 -> 8, Algorithm 1 step 4): fix ``s``, take one gradient step on
  :func:`label_loss` with step size ``lr * lam`` (:func:`label_step`).

Hyperparameters (Sec. 5.1): ``lam = 0.1``, ``k = 96``, ``alpha = 0.3``, ``beta = 1 - alpha = 0.7``,
base learning rate 0.002, 20,000 iterations (:data:`ZSML_HYPERPARAMETERS`).

**Labels are state, kept per pair.** Sec. 3.1 fixes a set ``P`` of ``N`` random pairs (:func:`random_pairs`).
Algorithm 1 lists ``y^c = {y_ij | (x_i, x_j) in P}`` among the *initialized parameters of the loss
layer*, and Eq. 5 minimizes over ``y^c``. So ``y^c`` is a variable of the problem, like the network
weights: set once by Eq. 3, then moved by every label step. It is not recomputed for each batch.
A method therefore keeps a length-``N`` label tensor indexed by pair id. Each step reads the labels of
the pairs in its batch, and the label step writes them back. Recomputing Eq. 3 for every batch would
discard each label step as soon as it was taken, so the cross-update would never happen.

**What the label step does** (derived here, not stated in the paper). Inside the allowed range the
hinge terms vanish and one step is ``y <- y + eta * (s - y)`` with ``eta = 2 * lr * lam / N``. This is
an exponential moving average of the network's own predictions. With ``s`` fixed, repeated steps
converge to the minimizer of Eq. 8, :func:`label_fixed_point`: ``s`` itself when ``s`` is in range,
and halfway between ``s`` and the violated bound when it is not. Eq. 8 has no term that ties ``y`` to
its Eq. 3 start. Only the small step (``lam = 0.1``, "we only finely tune y^c") keeps the labels near
Eq. 3. If the network could set every ``s_ij`` freely, the two steps would be at rest together exactly
when ``s = y`` inside the range (adding the two stationarity conditions rules out every other
case). The step is small. With the paper's ``lr = 0.002`` and ``lam = 0.1`` and a batch of
``N = 128`` pairs, ``eta = 3e-6`` per visit, so over 20,000 iterations a pair's label moves only a
small fraction of the way from Eq. 3 towards the prediction.

**Order within an iteration.** Algorithm 1 computes the loss once (step 3) and then takes both
gradients at iteration ``t``: ``dL_y/dy^t`` (step 4) and ``dL_s/ds^t`` (step 5). We read this as both
steps using the same forward pass. The label step sees this iteration's ``s``, and the network step
regresses onto the labels *before* this iteration's label step. That is what a Caffe loss layer
holding ``y`` as a learnable blob would do. Since ``eta`` is tiny, the other order would give almost
the same result.

**Eq. 9-10 as printed.** Differentiating Eq. 7 gives, per pair (``lo, hi`` = the pair's range)::

    dL_s/ds_ij = (2/N) * ( s_ij - y_ij + [s_ij - hi]_+ - [lo - s_ij]_+ )

The printed Eq. 9 has ``1/(2N)`` instead of ``2/N``. That is a positive factor the learning rate
absorbs. More importantly, it *adds* the lower-bound terms ``[beta - s]_+`` and ``[-s]_+``, whose
derivative carries a minus sign. With a plus, the hinge cancels the regression term below the
range: for every ``s < beta`` the printed gradient is ``(beta - y) / (2N)``, whatever ``s`` is. A
prediction far below the range would then feel no more pull than one just under it, against the
paper's own remark that a larger violation gets a larger gradient. Eq. 10 has the same slip. We
implement Eq. 7-8 and let autograd differentiate them. :func:`cross_update_gradient` is the
corrected closed form, and the tests check it against autograd.

**Reading of Eq. 3.** "``d_ij`` is the normalized Euclidean distance" does not say how it is
normalized. We divide the squared distance by its largest value over the pair set
(:func:`normalized_sq_distances`), so ``d^2`` fills ``[0, 1]`` and the labels fill the two ranges.
The farthest pair lands exactly on a bound, where the hinge penalty is zero. Only for a pair at
distance 0 or at the maximum is the paper's open interval closed.
"""
from __future__ import annotations

import numpy as np
import torch

from zslib.engine import checks

__all__ = [
    "ZSML_HYPERPARAMETERS",
    "random_pairs",
    "uniform_positive_share",
    "normalized_sq_distances",
    "continuous_labels",
    "label_bounds",
    "range_penalty",
    "range_penalty_grad",
    "similarity_loss",
    "label_loss",
    "cross_update_objective",
    "cross_update_gradient",
    "label_step",
    "label_fixed_point",
]

#: ZSML Sec. 5.1: lambda, k, alpha, beta (= 1 - alpha); Caffe base learning rate and iterations.
ZSML_HYPERPARAMETERS = {"lam": 0.1, "k": 96, "alpha": 0.3, "beta": 0.7, "lr": 0.002, "iterations": 20_000}


# ----------------------------------------------------------------------------------------------------
# checks


def _alpha_beta(alpha, beta) -> tuple[float, float]:
    alpha = checks.finite_number(alpha, "alpha", low=0.0, high=1.0, low_open=True)
    beta = 1.0 - alpha if beta is None else checks.finite_number(beta, "beta", low=0.0, high=1.0)
    if not alpha <= beta < 1.0:
        raise ValueError(f"need 0 < alpha <= beta < 1 (negatives in (0, alpha), positives in (beta, 1)); "
                         f"got alpha={alpha}, beta={beta}")
    return alpha, beta


def _values(v, name: str) -> torch.Tensor:
    if not torch.is_tensor(v) or not v.is_floating_point() or v.dim() != 1:
        raise TypeError(f"{name} must be a 1-D floating-point tensor (one value per pair), got "
                        f"{type(v).__name__} {tuple(v.shape) if torch.is_tensor(v) else ''}")
    return v


def _positive(positive, like: torch.Tensor) -> torch.Tensor:
    p = torch.as_tensor(positive, device=like.device)
    if p.dtype != torch.bool:
        raise TypeError(f"positive must be a boolean tensor (True for same-class pairs), got dtype {p.dtype}")
    if p.shape != like.shape:
        raise ValueError(f"positive has shape {tuple(p.shape)} but the pair values have {tuple(like.shape)}; "
                         "pass one flag per pair")
    return p


def _pair(a, b, names) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = _values(a, names[0]), _values(b, names[1])
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have one value per pair each, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    return a, b


# ----------------------------------------------------------------------------------------------------
# the pair set and the initial labels (Sec. 3.1, Eq. 3)


def random_pairs(labels, n_pairs: int, *, positive_fraction: float | None = None, seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """ZSML Sec. 3.1: the set ``P`` of ``N`` pairs "randomly built up" from the training set.

    Returns index arrays ``(first, second)`` of length ``n_pairs`` (ordered pairs of two *different*
    samples, drawn with replacement). ``positive_fraction=None`` draws uniformly over all pairs of
    distinct samples, which is the paper's wording. With many classes almost all of these pairs are
    negative. The paper gives no ratio. ``positive_fraction=f`` makes ``round(f * N)`` pairs
    same-class (a random sample that has a classmate, and a random classmate of it) and the rest
    different-class.
    """
    y = checks.class_id_array(labels)
    n = y.shape[0]
    n_pairs = checks.finite_number(n_pairs, "n_pairs", low=1, integer=True)
    if n < 2:
        raise ValueError(f"need at least 2 samples to build pairs, got {n}")
    rng = np.random.default_rng(seed)
    if positive_fraction is None:
        first = rng.integers(0, n, n_pairs)
        second = (first + rng.integers(1, n, n_pairs)) % n  # uniform over the other n - 1 samples
        return first.astype(np.int64), second.astype(np.int64)
    f = checks.finite_number(positive_fraction, "positive_fraction", low=0.0, high=1.0)
    n_pos = int(round(f * n_pairs))
    order = np.argsort(y, kind="stable")
    classes, start, size = np.unique(y[order], return_index=True, return_counts=True)
    slot = np.searchsorted(classes, y)  # each sample's class, as an index into classes
    has_mate = size[slot] >= 2
    if n_pos and not has_mate.any():
        raise ValueError("positive_fraction > 0 but no class has two samples; there are no positive pairs")
    if n_pairs - n_pos and len(classes) < 2:
        raise ValueError("only one class: there are no negative pairs; use positive_fraction=1")
    # positives: an anchor with a classmate, then a uniform other member of its class
    a = rng.choice(np.flatnonzero(has_mate), n_pos)
    sa, ca = start[slot[a]], size[slot[a]]
    rank = np.empty(n, dtype=np.int64)  # each sample's position within its class in `order`
    rank[order] = np.arange(n) - np.repeat(start, size)
    b = order[sa + (rank[a] + rng.integers(1, ca, n_pos)) % ca]
    # negatives: an anchor and a uniform sample of another class, by rejection
    n_neg = n_pairs - n_pos
    c = rng.integers(0, n, n_neg)
    d = rng.integers(0, n, n_neg)
    clash = y[c] == y[d]
    while clash.any():
        d[clash] = rng.integers(0, n, int(clash.sum()))
        clash = y[c] == y[d]
    first = np.concatenate([a, c]).astype(np.int64)
    second = np.concatenate([b, d]).astype(np.int64)
    perm = rng.permutation(n_pairs)
    return first[perm], second[perm]


def uniform_positive_share(labels) -> float:
    """The share of same-class pairs that :func:`random_pairs` draws with ``positive_fraction=None``: the
    probability that a uniform ordered pair of two different samples shares its class,
    ``sum_c n_c (n_c - 1) / (n (n - 1))`` over the class sizes ``n_c`` (about ``1 / C`` for ``C`` classes
    of equal size)."""
    y = checks.class_id_array(labels)
    n = y.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 samples to build pairs, got {n}")
    sizes = np.unique(y, return_counts=True)[1].astype(np.float64)
    return float((sizes * (sizes - 1)).sum() / (n * (n - 1)))


def normalized_sq_distances(xa, xb, scale: float | None = None) -> torch.Tensor:
    """``d_ij^2`` of ZSML Eq. 3: ``||x_i - x_j||^2 / scale`` for the pairs ``(xa[p], xb[p])``.

    ``scale`` defaults to the largest squared distance among the given pairs, so the result fills
    ``[0, 1]``. Pass the whole pair set ``P`` at once, as the labels are initialized once. To label
    other pairs on the same scale, pass ``scale`` explicitly. A pair farther than ``scale`` raises an
    error, since Eq. 3 would give it a label outside its range.
    """
    xa = checks.features(xa, "xa", detach=True)
    xb = checks.features(xb, "xb", detach=True)
    checks.same_dimension(xa, xb, ("xa", "xb"))
    if xa.shape[0] != xb.shape[0]:
        raise ValueError(f"xa and xb must hold the same number of pairs, got {xa.shape[0]} and {xb.shape[0]}")
    d2 = (xa - xb).pow(2).sum(1)
    top = float(d2.max())
    if scale is None:
        scale = top if top > 0 else 1.0
    scale = checks.finite_number(scale, "scale", low=0.0, low_open=True)
    if top > scale * (1 + 1e-6):
        raise ValueError(f"a pair's squared distance {top:.4g} exceeds scale={scale:.4g}; Eq. 3 needs "
                         "d^2 <= 1 -- use the largest squared distance of the pair set as the scale")
    return (d2 / scale).clamp_(max=1.0)


def continuous_labels(sq_dist, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """ZSML Eq. 3: the initial continuous label of each pair from its normalized squared distance.

    ::

        y_ij = alpha * (1 - d_ij^2)            if the pair is negative   -> in [0, alpha]
        y_ij = 1 - (1 - beta) * d_ij^2         if the pair is positive   -> in [beta, 1]

    Both decrease with distance: near pairs are more similar. ``sq_dist`` is ``d^2`` in ``[0, 1]``
    (:func:`normalized_sq_distances`), ``positive`` a boolean per pair, ``beta`` defaults to
    ``1 - alpha`` (Sec. 5.1). The paper writes open intervals. Here the ends are reached only at
    ``d = 0`` and ``d = 1``.
    """
    alpha, beta = _alpha_beta(alpha, beta)
    d2 = _values(sq_dist, "sq_dist").detach()
    pos = _positive(positive, d2)
    if bool(((d2 < 0) | (d2 > 1)).any()):
        raise ValueError("sq_dist must lie in [0, 1] (a normalized squared distance); use normalized_sq_distances")
    return torch.where(pos, 1.0 - (1.0 - beta) * d2, alpha * (1.0 - d2))


# ----------------------------------------------------------------------------------------------------
# the cross-update regression loss (Eq. 4-8) and its gradients (Eq. 9-10)


def label_bounds(positive, *, alpha: float = 0.3, beta: float | None = None, like: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The allowed range ``(lo, hi)`` of each pair: ``(beta, 1)`` if positive, ``(0, alpha)`` if
    negative (the constraints of ZSML Eq. 4-6)."""
    alpha, beta = _alpha_beta(alpha, beta)
    pos = torch.as_tensor(positive) if like is None else _positive(positive, like)
    dtype = like.dtype if like is not None else torch.get_default_dtype()
    lo = torch.where(pos, beta, 0.0).to(dtype)
    hi = torch.where(pos, 1.0, alpha).to(dtype)
    return lo, hi


def range_penalty(v, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """The squared-hinge constraint terms of ZSML Eq. 7-8, per pair (no reduction)::

        positive: [v - 1]_+^2 + [beta - v]_+^2        negative: [v - alpha]_+^2 + [-v]_+^2

    zero inside the range, growing quadratically outside. ``v`` is a prediction ``s`` (Eq. 7)
    or a label ``y`` (Eq. 8).
    """
    v = _values(v, "v")
    lo, hi = label_bounds(positive, alpha=alpha, beta=beta, like=v)
    return (v - hi).clamp(min=0).pow(2) + (lo - v).clamp(min=0).pow(2)


def range_penalty_grad(v, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """Derivative of :func:`range_penalty` per pair: ``2 [v - hi]_+ - 2 [lo - v]_+``.

    The lower-bound term enters with a *minus* sign. Eq. 9-10 as printed add it (see the module
    docstring).
    """
    v = _values(v, "v").detach()
    lo, hi = label_bounds(positive, alpha=alpha, beta=beta, like=v)
    return 2 * (v - hi).clamp(min=0) - 2 * (lo - v).clamp(min=0)


def _regression(value, target, positive, alpha, beta) -> torch.Tensor:
    return ((value - target) ** 2 + range_penalty(value, positive, alpha=alpha, beta=beta)).mean()


def similarity_loss(s, y, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """ZSML Eq. 7 (Eq. 4 with its constraints as squared hinges): the network's loss ``L_s``.

    ::

        L_s = 1/N sum_P (s_ij - y_ij)^2 + [s_ij - hi_ij]_+^2 + [lo_ij - s_ij]_+^2

    ``N`` is the number of pairs passed (a batch mean, as a Caffe loss layer normalizes). The
    labels ``y`` are held fixed (detached; Algorithm 1 step 5, "Fix y"), so the gradient reaches
    only ``s`` and the network behind it.
    """
    s, y = _pair(s, y, ("s", "y"))
    return _regression(s, y.detach(), positive, alpha, beta)


def label_loss(y, s, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """ZSML Eq. 8 (Eq. 5 with its constraints as squared hinges): the labels' loss ``L_y``.

    Same form as :func:`similarity_loss` with the roles swapped. The hinge terms bound ``y``, and
    the predictions ``s`` are held fixed (detached; Algorithm 1 step 4, "Fix s").
    """
    y, s = _pair(y, s, ("y", "s"))
    return _regression(y, s.detach(), positive, alpha, beta)


def cross_update_objective(s, y, positive, *, lam: float = 0.1, alpha: float = 0.3,
                           beta: float | None = None) -> torch.Tensor:
    """ZSML Eq. 6 in its hinge form: ``L = L_s + lam * L_y``, the value Algorithm 1 step 3 computes.

    For reporting only. Each half is minimized over its own variable (:func:`similarity_loss`,
    :func:`label_step`). Inside the ranges it equals ``(1 + lam)/N sum (s - y)^2``, as Eq. 6 prints.
    """
    lam = checks.finite_number(lam, "lam", low=0.0)
    return (similarity_loss(s, y, positive, alpha=alpha, beta=beta)
            + lam * label_loss(y, s, positive, alpha=alpha, beta=beta))


def cross_update_gradient(value, target, positive, *, alpha: float = 0.3, beta: float | None = None
                          ) -> torch.Tensor:
    """ZSML Eq. 9-10, corrected: the derivative of Eq. 7 (``value = s``, ``target = y``) or of Eq. 8
    (``value = y``, ``target = s``) with respect to ``value``, per pair::

        (2/N) * (value - target + [value - hi]_+ - [lo - value]_+)
    """
    value, target = _pair(value, target, ("value", "target"))
    value, target = value.detach(), target.detach()
    n = value.shape[0]
    return (2 * (value - target) + range_penalty_grad(value, positive, alpha=alpha, beta=beta)) / n


def label_step(y, s, positive, *, lr: float, lam: float = 0.1, alpha: float = 0.3,
               beta: float | None = None) -> torch.Tensor:
    """ZSML Algorithm 1 step 4: ``y <- y - lr * lam * dL_y/dy`` with ``s`` fixed; returns the new labels.

    ``y`` and ``s`` are the labels and the current predictions of the same ``N`` pairs (``s`` from
    the forward pass of this iteration). The gradient is Eq. 8's (:func:`cross_update_gradient`).
    With ``eta = 2 lr lam / N``, a label inside its range becomes ``(1 - eta) y + eta s``. A label
    outside it is also pulled back by ``eta`` times the violation. Nothing changes when ``y = s``
    inside the range. The result is detached: labels are not trained by backpropagation.
    """
    lr = checks.finite_number(lr, "lr", low=0.0)
    lam = checks.finite_number(lam, "lam", low=0.0)
    return y.detach() - lr * lam * cross_update_gradient(y, s, positive, alpha=alpha, beta=beta)


def label_fixed_point(s, positive, *, alpha: float = 0.3, beta: float | None = None) -> torch.Tensor:
    """The minimizer of Eq. 8 over ``y`` for fixed ``s``, in closed form. Repeated label steps
    converge to it (for ``2 lr lam / N < 1``).

    Per pair, ``(y - s)^2 + [y - hi]_+^2 + [lo - y]_+^2`` is minimized by ``y = s`` when
    ``lo <= s <= hi``, by ``(s + hi) / 2`` when ``s > hi`` and by ``(s + lo) / 2`` when ``s < lo``.
    The squared hinge is a soft wall, so the label ends halfway between the prediction and the bound.
    """
    s = _values(s, "s").detach()
    lo, hi = label_bounds(positive, alpha=alpha, beta=beta, like=s)
    return torch.where(s > hi, 0.5 * (s + hi), torch.where(s < lo, 0.5 * (s + lo), s))
