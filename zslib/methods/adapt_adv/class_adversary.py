r"""Adapt-Adv's class-adversarial module: a classifier on the features, an adaptive weight, two objectives.

Adapt-Adv (Al-Kaabi, Monsefi and Zabihzadeh, Applied Intelligence 2022, ``alkaabi2022adaptadv``,
Secs. 3.4-3.5 and 4, Algorithm 1) adds a classifier :math:`h(\theta_c; f)` over the seen classes on top of
the feature extractor's output ``f`` and plays a game with it whose sign depends on how well it classifies:

* :class:`AdversarialClassifier` -- one hidden layer, dropout 0.1, softmax output (Sec. 4, Fig. 11);
* :func:`classification_loss` -- its cross-entropy :math:`\mathcal{L}_c` (Eq. 18), which is also the
  classifier's own objective (Algorithm 1, step 2.6);
* :func:`adaptive_lambda` -- :math:`\lambda = -\tanh(\mathcal{L}_c - l_{thresh})\,\lambda_0` (Eq. 22);
* :func:`adversarial_term` -- :math:`-\lambda\,\mathcal{L}_c`, the classifier's term in the extractor's loss;
* :func:`extractor_objective` -- :math:`\mathcal{L}_m - \lambda\,\mathcal{L}_c` (Eqs. 19-20), what the
  extractor and the metric embedding layer minimize with the classifier frozen (Algorithm 1, step 2.4);
* :class:`EpochLambda` -- the bookkeeping of Sec. 4: :math:`\lambda` is set once per epoch from that
  epoch's classification loss.

The sign logic (why :math:`\lambda` changes sign and what the tanh schedule does)
---------------------------------------------------------------------------------
With the classifier frozen, the extractor's gradient from the classifier term is
:math:`\nabla_f(-\lambda \mathcal{L}_c) = -\lambda\,\nabla_f \mathcal{L}_c` (``lambda`` is a number fixed
for the epoch, not differentiated). So a descent step on the extractor moves ``f`` *down*
:math:`\mathcal{L}_c` when :math:`\lambda < 0` and *up* :math:`\mathcal{L}_c` when :math:`\lambda > 0`.

* **Cooperative regime**, :math:`\mathcal{L}_c > l_{thresh}`: :math:`\tanh(\cdot) > 0`, :math:`\lambda < 0`, the
  objective is :math:`\mathcal{L}_m + |\lambda|\mathcal{L}_c`: the extractor helps the classifier and learns
  class-discriminative features (early training, when the paper observes that this helps).
* **Neutral point**, :math:`\mathcal{L}_c = l_{thresh}`: :math:`\lambda = 0`, only the metric loss acts.
* **Adversarial regime**, :math:`\mathcal{L}_c < l_{thresh}`: :math:`\lambda > 0`, the objective is
  :math:`\mathcal{L}_m - \lambda\mathcal{L}_c`: the extractor now *raises* the loss of a classifier that keeps
  minimizing it: a min-max game that removes from ``f`` whatever separates the seen classes beyond what
  the metric loss needs, pushing ``f`` towards content that is not specific to the seen classes.

Over training the classifier's loss falls from chance level (``ln C``) towards zero; as soon as it drops
below the threshold the extractor fights back, and if it rises above the threshold again the extractor
cooperates again. The schedule is a negative feedback that holds :math:`\mathcal{L}_c` near
:math:`l_{thresh}` (the fixed point where :math:`\lambda = 0`): near it :math:`\lambda \approx
\lambda_0 (l_{thresh} - \mathcal{L}_c)`, a push proportional to the gap; far from it ``tanh`` saturates, so
the push never exceeds :math:`\lambda_0`. Because :math:`\mathcal{L}_c \ge 0`, the adversarial weight is at
most :math:`\lambda_0 \tanh(l_{thresh})` (0.905 :math:`\lambda_0` for 1.5), the cooperative one approaches
:math:`\lambda_0`.

Worked example (:math:`\lambda_0 = 1`, :math:`l_{thresh} = 1.5`, 51 seen classes as Flowers-102's split):

=================================  ==========================  ================================
:math:`\mathcal{L}_c`              :math:`\lambda`             extractor minimizes
=================================  ==========================  ================================
``ln 51 = 3.93`` (chance, start)   ``-tanh(2.43) = -0.985``    :math:`\mathcal{L}_m + 0.985\mathcal{L}_c`
``2.5``                            ``-tanh(1) = -0.762``       :math:`\mathcal{L}_m + 0.762\mathcal{L}_c`
``1.5``                            ``0``                       :math:`\mathcal{L}_m`
``0.5``                            ``+0.762``                  :math:`\mathcal{L}_m - 0.762\mathcal{L}_c`
``0`` (perfect classifier)         ``+tanh(1.5) = +0.905``     :math:`\mathcal{L}_m - 0.905\mathcal{L}_c`
=================================  ==========================  ================================

Readings of the paper taken here
--------------------------------
* **The classifier minimizes its own cross-entropy in both regimes.** Eq. 21 writes the classifier step
  as :math:`\arg\min_{\theta_c} \frac{\lambda}{n}\sum \mathcal{L}_c`; taken literally, with
  :math:`\lambda < 0` the classifier would *maximize* its loss, which contradicts the text ("the classifier
  tries to minimize the classification loss", trained "using the standard Cross-Entropy loss") and the
  implementation of Sec. 4, a gradient reversal layer between the extractor and the classifier: a GRL
  scales only the gradient that reaches the extractor (by :math:`-\lambda`) and leaves the classifier's
  own gradient :math:`\nabla_{\theta_c}\mathcal{L}_c` unscaled. So step 2.6 minimizes
  :func:`classification_loss`. (zslib's :func:`~zslib.engine.models.grl.grad_reverse` accepts only
  :math:`\lambda \ge 0`, the adversarial regime; :func:`extractor_objective` covers both signs.)
* **The classifier reads ``f``**, the feature extractor's output before the metric embedding layer
  (Sec. 3.4: :math:`h(\theta_c; f_i)`, :math:`f_i = f(\theta_f; x_i)`; Sec. 4: the GRL sits "between the
  classification module and the feature extractor"): the fused GDFL vector with GDFL, the pooled last
  feature ``u`` without it (the "Tri+Adv" ablation). The embedding layer :math:`\theta_m` gets no gradient
  from :math:`\mathcal{L}_c`.
* **Architecture.** "One hidden layer followed by a dropout operation" (Sec. 4): Linear, ReLU, Dropout,
  Linear. Neither the hidden width nor the activation is given; we use ReLU and 512 units by default.
* **Dropout stays on in the extractor step.** The paper motivates dropout as raising the loss of many
  thinned classifiers at once (Sec. 4), so "freeze" means "do not update", not "switch to eval mode".
* **Which** :math:`\mathcal{L}_c` **sets** :math:`\lambda`. Sec. 4 adjusts :math:`\lambda` "based on the
  classification loss in each epoch": :class:`EpochLambda` uses the mean training cross-entropy of the
  previous epoch and, before any epoch has ended, chance level ``ln C`` (an untrained classifier's loss),
  which gives the cooperative start the paper describes.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zslib.engine import checks

__all__ = ["AdversarialClassifier", "classification_loss", "adaptive_lambda", "adversarial_term",
           "extractor_objective", "EpochLambda", "replay_lambda"]

L_THRESH = 1.5
"""The classification-loss threshold of Adapt-Adv (Sec. 5.3, Table 2), used in all of its experiments."""


class AdversarialClassifier(nn.Module):
    """The classification module :math:`h(\\theta_c; f)` of Adapt-Adv (Sec. 4, Fig. 11): Linear, ReLU,
    Dropout(``dropout``), Linear to ``num_classes`` logits (the softmax is inside the cross-entropy).

    ``in_features`` is the width of ``f`` (``GDFLNet.fused_dim`` or the backbone's ``feature_dim``);
    ``hidden`` (default 512) and the ReLU are our choices, the paper gives neither; ``dropout`` 0.1 is
    the paper's (Table 2).
    """

    def __init__(self, in_features: int, num_classes: int, hidden: int = 512, dropout: float = 0.1):
        super().__init__()
        in_features = checks.finite_number(in_features, "in_features", low=1, integer=True)
        num_classes = checks.finite_number(num_classes, "num_classes", low=2, integer=True)
        hidden = checks.finite_number(hidden, "hidden", low=1, integer=True)
        dropout = checks.finite_number(dropout, "dropout", low=0.0, high=0.99)
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(inplace=True), nn.Dropout(dropout), nn.Linear(hidden, num_classes),
        )
        self.in_features, self.num_classes = in_features, num_classes

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        f = checks.features(f, "f")
        if f.shape[1] != self.in_features:
            raise ValueError(f"the classifier expects {self.in_features}-dimensional features, got {f.shape[1]}; "
                             "build it with in_features equal to the width of the features it reads")
        return self.net(f)


def classification_loss(logits: torch.Tensor, labels) -> torch.Tensor:
    r"""Adapt-Adv Eq. 18: the mean cross-entropy :math:`\mathcal{L}_c = -\frac1n\sum_i \log p_{y_i}` of the
    classifier's logits ``(n, C)`` against seen-class ids ``0..C-1``. Minimized by the classifier in its
    own step (Algorithm 1, step 2.6; see the module docstring for why without :math:`\lambda`)."""
    logits = checks.features(logits, "logits")
    labels = checks.class_ids(labels, logits.shape[0], device=logits.device, of="logits")
    if int(labels.min()) < 0 or int(labels.max()) >= logits.shape[1]:
        raise ValueError(f"labels must be class ids in [0, {logits.shape[1]}) for {logits.shape[1]} logits, got "
                         f"{int(labels.min())}..{int(labels.max())}; map the seen classes to 0..C-1 first")
    return F.cross_entropy(logits, labels)


def adaptive_lambda(classification_loss_value, l_thresh: float = L_THRESH, lambda0: float = 1.0) -> float:
    r"""Adapt-Adv Eq. 22: :math:`\lambda = -\tanh(\mathcal{L}_c - l_{thresh})\,\lambda_0`.

    Negative (cooperative) while :math:`\mathcal{L}_c > l_{thresh}`, zero at the threshold, positive
    (adversarial) below it; decreasing in :math:`\mathcal{L}_c`, bounded by :math:`\lambda_0` in magnitude.
    The paper uses ``l_thresh = 1.5`` and ``lambda0`` in {0.1, 0.5, 1}. Returns a float: the weight is a
    constant of the extractor step (a tensor argument is read as a number, no gradient flows through it).
    """
    if torch.is_tensor(classification_loss_value):
        if classification_loss_value.numel() != 1:
            raise ValueError("classification_loss_value must be one number (the mean cross-entropy), got a tensor "
                             f"of shape {tuple(classification_loss_value.shape)}")
        classification_loss_value = float(classification_loss_value.detach())
    loss = checks.finite_number(classification_loss_value, "classification_loss_value", low=0.0)
    l_thresh = checks.finite_number(l_thresh, "l_thresh", low=0.0)
    lambda0 = checks.finite_number(lambda0, "lambda0", low=0.0)
    return -math.tanh(loss - l_thresh) * lambda0


def adversarial_term(classification_loss_value: torch.Tensor, lam: float) -> torch.Tensor:
    r"""The classifier's term of Adapt-Adv Eq. 19, :math:`-\lambda\,\mathcal{L}_c`, as a named loss term of the
    extractor step (Algorithm 1, step 2.4; the classifier frozen).

    ``classification_loss_value``: the scalar :func:`classification_loss` of the classifier's logits for the
    current features, with graph; ``lam``: the number from :func:`adaptive_lambda`. Its gradient on the
    features is :math:`-\lambda\nabla_f\mathcal{L}_c`: down the classification loss for :math:`\lambda < 0`,
    up it for :math:`\lambda > 0` (the module docstring works through both regimes).
    """
    if not torch.is_tensor(classification_loss_value) or classification_loss_value.numel() != 1:
        value = classification_loss_value
        raise ValueError("classification_loss_value must be a scalar tensor (a mean loss), got "
                         f"{tuple(value.shape) if torch.is_tensor(value) else type(value).__name__}")
    if torch.is_tensor(lam):
        raise TypeError("lam must be a plain number (from adaptive_lambda), not a tensor: it is a constant of the "
                        "extractor step and must not carry gradient")
    lam = checks.finite_number(lam, "lam")
    return -lam * classification_loss_value.reshape(())


def extractor_objective(metric_loss: torch.Tensor, classification_loss_value: torch.Tensor,
                        lam: float) -> torch.Tensor:
    r"""Adapt-Adv Eqs. 19-20: :math:`R_{adv} = \mathcal{L}_m - \lambda\,\mathcal{L}_c`, minimized over the
    extractor and the metric embedding layer with the classifier frozen (Algorithm 1, step 2.4): the metric
    loss plus :func:`adversarial_term`. ``metric_loss`` is a scalar tensor (any zslib metric loss)."""
    if not torch.is_tensor(metric_loss) or metric_loss.numel() != 1:
        raise ValueError("metric_loss must be a scalar tensor (a mean loss), got "
                         f"{tuple(metric_loss.shape) if torch.is_tensor(metric_loss) else type(metric_loss).__name__}")
    return metric_loss.reshape(()) + adversarial_term(classification_loss_value, lam)


class EpochLambda:
    r"""Per-epoch :math:`\lambda` (Adapt-Adv Sec. 4: "we adjust the :math:`\lambda` based on the classification
    loss in each epoch"): :attr:`value` is :func:`adaptive_lambda` of the previous epoch's mean training
    cross-entropy, and ``ln(num_classes)`` (chance level) before the first epoch ends.

    Call :meth:`update` after every classifier evaluation with the batch's mean loss and size, and
    :meth:`end_epoch` at the end of each epoch; :attr:`history` lists ``(mean loss, lambda)`` per epoch.
    """

    def __init__(self, num_classes: int, lambda0: float = 1.0, l_thresh: float = L_THRESH):
        num_classes = checks.finite_number(num_classes, "num_classes", low=2, integer=True)
        self.lambda0 = checks.finite_number(lambda0, "lambda0", low=0.0)
        self.l_thresh = checks.finite_number(l_thresh, "l_thresh", low=0.0)
        self.loss = math.log(num_classes)
        self.value = adaptive_lambda(self.loss, self.l_thresh, self.lambda0)
        self.history: list[tuple[float, float]] = []
        self._sum, self._count = 0.0, 0

    def update(self, loss, batch_size: int) -> None:
        """Add one batch's mean classification loss (a number or a scalar tensor) weighted by its size."""
        value = float(loss.detach()) if torch.is_tensor(loss) else loss
        value = checks.finite_number(value, "loss", low=0.0)
        batch_size = checks.finite_number(batch_size, "batch_size", low=1, integer=True)
        self._sum += value * batch_size
        self._count += batch_size

    def end_epoch(self) -> float:
        """Set :attr:`value` from this epoch's mean loss (unchanged if no batch was seen) and return it."""
        if self._count:
            self.loss = self._sum / self._count
            self.value = adaptive_lambda(self.loss, self.l_thresh, self.lambda0)
            self.history.append((self.loss, self.value))
        self._sum, self._count = 0.0, 0
        return self.value

    def state_dict(self) -> dict:
        """Everything :meth:`load_state_dict` needs to continue exactly: plain numbers and lists, so a
        checkpoint read with ``torch.load(weights_only=True)`` holds it (Adapt-Adv's method stores it there)."""
        return {"lambda0": self.lambda0, "l_thresh": self.l_thresh, "loss": self.loss, "value": self.value,
                "sum": self._sum, "count": self._count, "history": [list(h) for h in self.history]}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` of a schedule with the same ``lambda0`` and ``l_thresh``."""
        if (state["lambda0"], state["l_thresh"]) != (self.lambda0, self.l_thresh):
            raise ValueError(f"the saved schedule has lambda0={state['lambda0']}, l_thresh={state['l_thresh']}; this one "
                             f"has lambda0={self.lambda0}, l_thresh={self.l_thresh}")
        self.loss, self.value = float(state["loss"]), float(state["value"])
        self._sum, self._count = float(state["sum"]), int(state["count"])
        self.history = [(float(a), float(b)) for a, b in state["history"]]

    def __repr__(self) -> str:
        return f"EpochLambda(value={self.value:.4f}, loss={self.loss:.4f}, lambda0={self.lambda0}, l_thresh={self.l_thresh})"


def replay_lambda(losses, epoch_steps: int, num_classes: int, lambda0: float = 1.0,
                  l_thresh: float = L_THRESH) -> list[float]:
    r"""The :math:`\lambda` of every step of a run, from the classifier's loss at every step (equal batch sizes):
    :class:`EpochLambda` fed one loss per step, its epoch ended every ``epoch_steps`` steps. Step ``t`` uses the
    value set before it, so :math:`\lambda` is constant within an epoch, from chance level :math:`\ln C` in the
    first epoch and from Eq. 22 of the previous epoch's mean loss after it."""
    schedule = EpochLambda(num_classes, lambda0=lambda0, l_thresh=l_thresh)
    out = []
    for i, value in enumerate(losses):
        out.append(schedule.value)
        schedule.update(float(value), 1)  # equal batch sizes: the epoch mean is the plain mean of the losses
        if (i + 1) % epoch_steps == 0:
            schedule.end_epoch()
    return out
