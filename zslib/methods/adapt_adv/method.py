r"""Adapt-Adv: general discriminative features and an adaptive class adversary (Al-Kaabi, Monsefi and
Zabihzadeh, Applied Intelligence 2022; ``alkaabi2022adaptadv``).

Two additions to any metric loss :math:`\mathcal{L}_m`, each switched on by a parameter, so that the four rows
of the paper's ablation (its Table 6: base, +GDFL, +Adv, Adapt-Adv) are four parameter settings of one method:

* **GDFL** (``use_gdfl``, Sec. 3.1): the embedding reads attention-pooled intermediate maps instead of the
  pooled last map ``u``. :meth:`AdaptAdv.attach` turns the network into a :class:`~zslib.methods.adapt_adv.gdfl.GDFLNet` over
  ``layers`` (default: the backbone's ``roles["intermediate"]``) with the attention ``form`` of Eq. 9, 11 or 12
  (Eqs. 13-16 normalize and pool); the fused vector :math:`f = [p^{(1)}; \dots; p^{(m)}]` feeds the embedding
  layer :math:`g(\theta_m; f)`.
* **The class adversary** (``use_adversary``, Secs. 3.4-3.5 and 4): a classifier
  :math:`h(\theta_c; f)` over the seen classes (:class:`~zslib.methods.adapt_adv.class_adversary.AdversarialClassifier`) and the
  alternating updates of Algorithm 1, as two phases of the trainer:

  1. ``"extractor"`` (steps 2.3-2.4, the classifier frozen): minimize
     :math:`R_{adv} = \mathcal{L}_m - \lambda\,\mathcal{L}_c` (Eqs. 19-20,
     :func:`~zslib.methods.adapt_adv.class_adversary.extractor_objective`) over the extractor and the embedding layer (and a
     loss's class proxies); logged as the metric loss's name and ``"adv"`` (:math:`-\lambda\mathcal{L}_c`).
  2. ``"classifier"`` (steps 2.5-2.6, the extractor frozen): minimize the classifier's own cross-entropy
     :math:`\mathcal{L}_c` (Eq. 18) on the same batch's features, detached; logged as ``"classifier_ce"``.

  :math:`\lambda = -\tanh(\mathcal{L}_c - l_{thresh})\,\lambda_0` (Eq. 22) is constant for an epoch and set
  from the previous epoch's mean classification loss (Sec. 4), chance level :math:`\ln C` before the first
  epoch ends (:class:`~zslib.methods.adapt_adv.class_adversary.EpochLambda`): cooperative (:math:`\lambda < 0`) while the
  classifier is bad, adversarial once its loss drops below ``l_thresh``. The schedule is state of the method,
  saved in checkpoints (a resumed run continues with the same :math:`\lambda`).

Readings taken here (the paper leaves them open; :mod:`zslib.methods.adapt_adv.class_adversary` argues each one):

* The classifier reads ``f``, the extractor's output before the embedding layer: the fused GDFL vector, or
  the pooled last map ``u`` without GDFL (the paper's "Tri+Adv"). The embedding layer gets no gradient from
  :math:`\mathcal{L}_c`.
* The classifier always *minimizes* :math:`\mathcal{L}_c` (Eq. 21 read as the GRL of Sec. 4 implements it);
  :func:`~zslib.engine.models.grl.grad_reverse` accepts only :math:`\lambda \ge 0`, so the extractor phase writes
  Eq. 20 directly, which covers both signs.
* One forward pass per step, as the GRL implementation has: the classifier phase trains on the features the
  extractor phase computed (before the extractor's update), detached.
* "An epoch" is ``epoch_steps`` training steps (the trainer draws class-balanced batches, not passes over the
  data): the default 32 is one pass over the quick profile's 2,000 seen images at 64 per batch, and two
  thirds of one over Flowers-102's seen classes.
* The classifier learns at ``classifier_lr`` (default: the rate of the method's own parameters, ``objective_lr``
  or ``new_layer_mult * lr``); the paper gives no rate for it.

On the ``real`` profile the backbone is frozen and its maps come from a cache, so :math:`\theta_f` is the
attention modules alone. Without GDFL, ``f = u`` is then a fixed feature and the adversary has nothing to move:
"+Adv" trains exactly what the base trains, with the same gradients (the chapter shows it). The attention
reads the cached ``block4``, ``block5`` and ``head`` maps of EfficientNet-Lite0 (:meth:`AdaptAdv.reads_maps`).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from zslib.methods.adapt_adv.class_adversary import (L_THRESH, AdversarialClassifier, EpochLambda, adversarial_term,
                                                     classification_loss, replay_lambda)
from zslib.engine.method import Method, Param, boolean, number, one_of
from zslib.engine.registry import register
from zslib.engine.train.optim import model_groups, own_parameters_group
from zslib.methods.adapt_adv.gdfl import GDFLNet
from zslib.methods.adapt_adv.spatial_attention import ATTENTION_FORMS

__all__ = ["AdaptAdv", "lambda_trace", "PAPER_TRIPLET"]

#: The metric loss of Adapt-Adv's experiments as the paper states it (Sec. 5.3): the triplet loss with semi-hard
#: mining and margin 0.01, as ``Config(loss="triplet", loss_params=PAPER_TRIPLET)``. The triplet's defaults in
#: zslib (every valid triplet of the batch, margin 0.1, CML Eq. 12) are a different loss.
PAPER_TRIPLET = {"mining": "semihard", "margin": 0.01}


def _layer_names(value, name="layers"):
    """A check: ``None`` (the backbone's ``roles["intermediate"]``) or one or more distinct map names."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be null (the backbone's intermediate maps) or a list of map names, got {value!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"{name} must name distinct maps, got {value!r}")
    return list(value)


def _optional_rate(value, name="classifier_lr"):
    """A check: ``None`` (the rate of the method's own parameters) or a positive learning rate."""
    return None if value is None else number(low=0.0, low_open=True)(value, name)


_layer_names.spec = {"kind": "names", "optional": True}  # as zslib.engine.catalog checks it without importing torch
_optional_rate.spec = {"kind": "optional", "of": number(low=0.0, low_open=True).spec}


@register
class AdaptAdv(Method):
    name = "adapt_adv"
    title = "attention over intermediate maps (GDFL) and an adaptive class adversary, trained alternately"
    paper = "alkaabi2022adaptadv"
    equations = ("Eqs. 9 / 11 / 12 and 13-16 (attention), Eq. 18 (L_c), Eqs. 19-21 (objective), Eq. 22 (lambda), "
                 "Algorithm 1")
    params = {
        "use_gdfl": Param(True, "embed attention-pooled intermediate maps (GDFL, Sec. 3.1); false: the pooled "
                                "last map, as the base network", boolean),
        "form": Param("additive", "the attention score: multiplicative (Eq. 9), additive (Eq. 11, the paper's "
                                  "choice) or multidimensional (Eq. 12)", one_of(*ATTENTION_FORMS)),
        "layers": Param(None, "maps to attend over; null: the backbone's roles['intermediate'] (the paper: "
                              "inception_4d/4e/5a)", _layer_names),
        "use_adversary": Param(True, "train the class-adversarial classifier and add -lambda L_c (Eq. 19)", boolean),
        "lambda0": Param(0.5, "scale of the adaptive weight (Eq. 22); the paper picks it from {0.1, 0.5, 1}",
                         number(low=0.0)),
        "l_thresh": Param(L_THRESH, "classification loss at which lambda changes sign (Eq. 22; 1.5 in the paper)",
                          number(low=0.0)),
        "dropout": Param(0.1, "dropout rate of the classifier's hidden layer (0.1 in the paper)",
                         number(low=0.0, high=0.99)),
        "hidden": Param(512, "width of the classifier's hidden layer (not given by the paper)",
                        number(low=1, integer=True)),
        "epoch_steps": Param(32, "training steps per lambda update (the paper: one epoch)", number(low=1, integer=True)),
        "classifier_lr": Param(None, "the classifier's learning rate; null: objective_lr, else new_layer_mult * lr",
                               _optional_rate),
    }
    phases = ("extractor", "classifier")
    uses_maps = True

    @classmethod
    def reads_maps(cls, params: Mapping | None = None) -> bool:
        """Only GDFL reads the intermediate maps; without it the run needs the pooled feature alone."""
        return bool(cls.validate(params)["use_gdfl"])

    @classmethod
    def attach(cls, model, params):
        """The network: a :class:`~zslib.methods.adapt_adv.gdfl.GDFLNet` over ``model``'s backbone when ``use_gdfl``,
        else ``model``."""
        p = cls.validate(params)
        if not p["use_gdfl"]:
            return model
        return GDFLNet.from_embedding_net(model, layers=p["layers"], form=p["form"])

    def __init__(self, config, model, num_classes):
        super().__init__(config, model, num_classes)
        self.gdfl = self.p["use_gdfl"]
        if self.gdfl and not hasattr(model, "extract"):
            raise TypeError(f"adapt_adv with use_gdfl needs the network AdaptAdv.attach builds (a GDFLNet), got "
                            f"{type(model).__name__}")
        self.classifier = None
        self.phases = ("extractor", "classifier") if self.p["use_adversary"] else ("extractor",)
        if self.p["use_adversary"]:
            width = model.fused_dim if self.gdfl else model.feature_dim
            self.classifier = AdversarialClassifier(width, num_classes, hidden=self.p["hidden"],
                                                    dropout=self.p["dropout"])
            self.schedule = EpochLambda(num_classes, lambda0=self.p["lambda0"], l_thresh=self.p["l_thresh"])
        self.steps = 0  # classifier steps taken (epoch boundaries of the lambda schedule)
        self._features = None

    # ----- state: the lambda schedule travels with the checkpoint --------------------------------------
    def get_extra_state(self):
        if self.classifier is None:
            return {"steps": self.steps}
        return {"steps": self.steps, "schedule": self.schedule.state_dict()}

    def set_extra_state(self, state):
        self.steps = int(state["steps"])
        if self.classifier is not None:
            self.schedule.load_state_dict(state["schedule"])

    @property
    def lam(self) -> float:
        """The current adaptive weight :math:`\\lambda` (Eq. 22); 0 without the adversary."""
        return self.schedule.value if self.classifier is not None else 0.0

    # ----- a training step -------------------------------------------------------------------------------
    def param_groups(self, phase, model, settings):
        if phase == "extractor":  # theta_f and theta_m (and a loss's class proxies); the classifier is frozen
            return model_groups(model, settings) + own_parameters_group(self.loss, settings, name="loss")
        rate = self.p["classifier_lr"] if self.p["classifier_lr"] is not None else settings.method_lr
        return [{"params": list(self.classifier.parameters()), "lr": rate, "weight_decay": 0.0, "name": "classifier"}]

    def features(self, model, images):
        """``(f, embedding)`` of a batch: ``f`` is what the classifier reads (the fused GDFL vector, or the pooled
        last map ``u``), the embedding is the embedding layer applied to it."""
        if self.gdfl:
            f = model.extract(images)
            return f, model.embed_features(f)
        f = model.pooled(images)
        return f, model.embed_pooled(f)

    def terms(self, phase, model, images, labels):
        if phase == "extractor":
            f, emb = self.features(model, images)
            terms = {self.loss_name: self.loss(emb, labels)}
            if self.classifier is not None:
                self._features = f.detach()
                lc = classification_loss(self.classifier(f), labels)
                terms["adv"] = adversarial_term(lc, self.schedule.value)  # Eq. 20's -lambda L_c
            return terms
        if self._features is None:
            raise RuntimeError("the classifier phase runs after the extractor phase on the same batch")
        lc = classification_loss(self.classifier(self._features), labels)  # Eq. 18, minimized (step 2.6)
        self._features = None
        self.schedule.update(lc, len(labels))
        self.steps += 1
        if self.steps % self.p["epoch_steps"] == 0:
            self.schedule.end_epoch()
        return {"classifier_ce": lc}


def lambda_trace(history, num_classes: int, params: Mapping) -> dict[str, np.ndarray]:
    r"""The :math:`\lambda` an Adapt-Adv run used at every step, replayed from its logged classification losses.

    ``history``: the run's :class:`~zslib.engine.train.History` (every step logged, as :func:`zslib.engine.runner.run` does);
    ``num_classes``: its number of training classes (chance level :math:`\ln C` sets the first epoch's
    :math:`\lambda`); ``params``: its ``method_params``. Returns ``{"step", "lambda", "classifier_ce"}`` arrays,
    one entry per step: ``lambda[t]`` is the weight of step ``t``'s extractor update, ``classifier_ce[t]`` the
    classifier's loss at that step. Eq. 22 applied to per-epoch means, exactly as :class:`AdaptAdv` does.
    """
    p = AdaptAdv.validate(params)
    if not p["use_adversary"]:
        raise ValueError("this run has no adversary (use_adversary is false): lambda is 0 throughout")
    steps, ce = history.loss_curve("classifier_ce")
    steps = np.asarray(steps)
    if len(steps) and not np.array_equal(steps, np.arange(1, len(steps) + 1)):
        raise ValueError("the history must log every step (log_every=1) to replay the schedule")
    lam = np.asarray(replay_lambda(ce, p["epoch_steps"], num_classes, p["lambda0"], p["l_thresh"]), dtype=float)
    return {"step": steps, "lambda": lam, "classifier_ce": np.asarray(ce, dtype=float)}
