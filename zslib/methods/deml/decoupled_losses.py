"""DeML's objective over its ``I x J`` decoupled learners (Chen & Deng, CVPR 2019, Sec. 3.3, Eqs. 5-6).

* :func:`decoupled_binomial_loss` -- Eq. 5, the balanced binomial deviance of every learner, averaged
  over the ``I J`` learners;
* :func:`activation_decay` -- Eq. 6, the squared learner outputs plus the non-trivial-solution term
  (:func:`nontrivial_term`) on the learners' weight matrices.

The adversary of Eq. 4 and the released code's hinge are in :mod:`zslib.methods.deml.learner_adversary`.
Learners are passed stacked, ``(L, B, d_l)`` with ``L = I J`` (or as a list of ``(B, d_l)`` tensors);
weight matrices as ``(L, d_l, d_1)`` (or a list), e.g. ``DeMLNet.learner_weights()``.
"""
from __future__ import annotations

import torch

from zslib.engine.checks import finite_number
from zslib.engine.losses import binomial_deviance_loss

__all__ = ["decoupled_binomial_loss", "activation_decay", "nontrivial_term", "NONTRIVIAL_FORMS"]

NONTRIVIAL_FORMS = ("hadamard", "frobenius")


def _stack(x, name: str, dims: int) -> torch.Tensor:
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError(f"{name} is empty; give at least one learner")
        x = torch.stack(list(x))
    if not torch.is_tensor(x) or x.dim() != dims or min(x.shape) < 1:
        what = "(L, B, d) learner embeddings" if dims == 3 else "(L, d_l, d_1) learner weight matrices"
        raise ValueError(f"{name} must be {what} (or a list of them), got {tuple(getattr(x, 'shape', ()))}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be floating point, got {x.dtype}")
    return x


def decoupled_binomial_loss(embeddings, labels, *, alpha: float = 2.0, beta: float = 0.5,
                            neg_weight: float = 35.0) -> torch.Tensor:
    r"""DeML Eq. 5: the balanced binomial deviance of each learner, averaged over the learners.

    .. math:: L_{metric} = \frac{1}{IJ}\sum_{i,j}\sum_{p,q} \frac{1}{w_{pq}}
              \log\bigl(1 + e^{-(2 s_{pq} - 1)\,\alpha\,(D^{(i,j)}_{pq} - \beta)\,\gamma_{pq}}\bigr)

    with ``D^{(i,j)}`` the cosine similarity at learner ``(i, j)`` (the paper calls it a distance),
    ``gamma = 1`` for positive and ``neg_weight`` (35) for negative pairs, ``w_pq`` the number of
    positive (negative) pairs. One learner's term is
    ``zslib.engine.losses.binomial_deviance_loss(..., reduction="balanced", neg_weight=35)``.
    ``embeddings``: ``(L, B, d_l)``, ``L = I J``; ``labels``: ``(B,)``.
    """
    z = _stack(embeddings, "embeddings", 3)
    terms = [binomial_deviance_loss(z[k], labels, alpha=alpha, beta=beta, pos_weight=1.0,
                                    neg_weight=neg_weight, reduction="balanced") for k in range(z.shape[0])]
    return torch.stack(terms).mean()


def nontrivial_term(weights, weight: float = 0.25, form: str = "hadamard") -> torch.Tensor:
    r"""DeML's :math:`L_{ntri} = \lambda_2 \sum_{i,j} \mathrm{tr}[(\omega\omega^T - I)\circ(\omega\omega^T - I)]`.

    ``weights``: the learners' matrices :math:`\omega_{ij} \in \mathbb{R}^{d_l \times d_1}` stacked,
    ``(L, d_l, d_1)``; ``weight``: :math:`\lambda_2` (0.25 in the paper).

    ``form="hadamard"`` (default) reads Eq. 6 as printed: the trace of a Hadamard square keeps only the
    diagonal, :math:`\sum_k (\lVert \omega_k \rVert^2 - 1)^2` over the rows :math:`\omega_k`, which keeps
    every output unit's weight vector at unit length -- enough to rule out the trivial all-zero solution
    the term is there for. The released code's gradient for it is exactly this row-norm penalty (its
    ``InnerProduct`` layer adds ``4 lambda (||w_k||^2 - 1) w_k``). ``form="frobenius"`` is the other
    plausible reading, :math:`\lVert \omega\omega^T - I \rVert_F^2` (orthonormal rows), offered for
    comparison.
    """
    if form not in NONTRIVIAL_FORMS:
        raise ValueError(f"form must be one of {NONTRIVIAL_FORMS}, got {form!r}")
    finite_number(weight, "weight", low=0)
    w = _stack(weights, "weights", 3)
    if form == "hadamard":
        return weight * (w.pow(2).sum(-1) - 1).pow(2).sum()
    gram = torch.bmm(w, w.transpose(1, 2))
    eye = torch.eye(w.shape[1], dtype=w.dtype, device=w.device)
    return weight * (gram - eye).pow(2).sum()


def activation_decay(embeddings, weights=None, *, lambda1: float = 0.014, lambda2: float = 0.25,
                     form: str = "hadamard") -> torch.Tensor:
    r"""DeML Eq. 6, activation decay with its non-trivial-solution term:

    .. math:: L_{act} = \frac{\lambda_1}{2IJN}\sum_{i,j}\sum_{n=1}^N \lVert CA_{(i,j)}[x_n]\rVert_2^2 + L_{ntri}

    ``embeddings``: the learners' raw (unnormalized) outputs ``(L, N, d_l)``, ``L = I J``; ``weights``:
    their matrices ``(L, d_l, d_1)`` for :func:`nontrivial_term` (``None`` leaves it out). Paper values
    ``lambda1 = 0.014``, ``lambda2 = 0.25``. (The released code normalizes differently: it averages the
    squared outputs over the batch and the ``d_l`` units, per scale, and applies it to one learner of
    each scale only.)
    """
    finite_number(lambda1, "lambda1", low=0)
    z = _stack(embeddings, "embeddings", 3)
    count, n = z.shape[0], z.shape[1]
    loss = lambda1 / (2 * count * n) * z.pow(2).sum()
    if weights is not None:
        loss = loss + nontrivial_term(weights, lambda2, form)
    return loss
