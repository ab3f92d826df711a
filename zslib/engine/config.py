"""The configuration of a training run: everything its result depends on, and the hash that names it.

A :class:`Config` is built from a profile (:meth:`Config.from_profile`) and changed with
:meth:`Config.replace`. Fields left out take the value of the profile named by ``profile`` -- the
profile is the only source of defaults, so ``Config()`` is the quick profile's recipe. ``method`` names
a method of :data:`zslib.engine.registry.METHODS` and ``method_params`` its hyperparameters, completed with the
method's defaults and checked when the config is made (an unknown key lists the accepted ones).

:func:`config_hash` names a run: 12 hex digits of the SHA-256 of every field but those of :data:`NOT_HASHED`
(``name``, a label, and ``image_cache``, which changes how fast images are read but never their values), and
those of :data:`HASHED_UNLESS_DEFAULT` while they hold their defaults (fields added later: old runs keep their hash).
Two configs with the same hash are the same experiment; a stored result is found by it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zslib.engine.fields import ProfileFields, helped, names
from zslib.engine.profile import PROFILES, Profile, get_profile
from zslib.engine.registry import get_method

__all__ = ["Config", "config_hash", "PROFILE_FIELDS", "NOT_HASHED", "HASHED_UNLESS_DEFAULT", "TRAIN_BN"]

#: Config fields whose default is the value of the profile of the same name (those of
#: :class:`~zslib.engine.fields.ProfileFields`, which Config and Profile inherit).
PROFILE_FIELDS = names(ProfileFields)

#: Config fields that change how fast a run goes, never its numbers: left out of :func:`config_hash`.
#: ``image_cache`` gives bitwise the same images as decoding the files (see :mod:`zslib.engine.data.image_cache`), and
#: ``device_images`` bitwise the same batches as the loader (see :mod:`zslib.engine.data.device_images`).
NOT_HASHED = ("name", "image_cache", "device_images")

#: Config fields left out of :func:`config_hash` while they hold these defaults: fields added after runs were
#: recorded, whose default is what those runs did, so that every recorded run keeps its hash.
#: ``train_stages`` () is the frozen regime; ``train_bn`` only matters when stages train.
HASHED_UNLESS_DEFAULT = {"train_stages": [], "train_bn": "frozen"}

#: How the BatchNorm layers of the trained stages (``Config.train_stages``) behave in training:
#: ``"frozen"``: normalized with the ImageNet running statistics (eval mode, never updated), scale and shift
#: trained; ``"batch"``: normalized with each batch's statistics, running statistics updated (PyTorch's default).
TRAIN_BN = ("frozen", "batch")


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _same_kind(value, default, name: str) -> None:
    """``value`` of the kind of ``default`` (true/false, a number, a word), else ``TypeError`` naming both."""
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, (int, float)):
        ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif isinstance(default, str):
        ok, kind = isinstance(value, str), "a word"
    else:
        return
    if not ok:
        raise TypeError(f"{name} must be {kind} (default {default!r}), got {value!r}")


def _check_possible(config, parametric_loss: bool) -> None:
    """Refuse, naming the setting, a config that cannot train or be scored, before any data is built: a pair loss
    with one image per class in a batch has no positive pair to learn from (its loss is constant, and the run would
    end "diverged", blaming the learning rate), and SynthParts with one image per class has no second image of an
    unseen class for a query to retrieve. Only refuses: the fields and their hash are untouched."""
    if config.batch_per_class < 2 and not parametric_loss:
        raise ValueError(f"Config.batch_per_class={config.batch_per_class}: a batch then holds one image per class, "
                         f"so loss {config.loss!r} has no positive pair to learn from; use batch_per_class >= 2 "
                         "(--batch-per-class 2), or a proxy loss (proxy_nca, am_softmax)")
    if str(config.dataset).lower() == "synthparts" and config.synth_images_per_class < 2:
        raise ValueError(f"Config.synth_images_per_class={config.synth_images_per_class}: each class then has one "
                         "image, so no query has an image of its own class to retrieve and no batch a positive pair; "
                         "use synth_images_per_class >= 2 (--synth-images-per-class 2)")


@dataclass(frozen=True, kw_only=True)
class Config(ProfileFields):
    """Everything that determines a training run (and therefore its result file).

    ``method`` / ``method_params``: the method and its hyperparameters (``"baseline"``: the metric loss
    alone). ``validation_fraction`` > 0 holds out that share of the *training classes* as a class-disjoint
    validation set on which hyperparameters should be chosen (Musgrave et al. 2020). ``objective_lr``: the
    learning rate of the method's own parameters (class proxies, adversaries); default ``new_layer_mult * lr``.
    ``train_stages``: on a cached-feature profile (``real``), the last stages of the pretrained backbone that
    train from their ImageNet weights (e.g. ``("block6", "head")``, the adapted regime); the cache then holds
    the map entering the first of them in two views (:func:`zslib.engine.data.features.view_cache`) instead of
    ``feature_stages``. Empty (default): the frozen regime. ``train_bn``: their BatchNorm (:data:`TRAIN_BN`).
    ``image_cache``: read real datasets through the pre-resized image cache (:func:`zslib.engine.data.cached`; default
    from the profile: on in ``full``). ``device_images``: hold those pixels on the training device and crop, flip
    and normalize every batch there (:mod:`zslib.engine.data.device_images`; the same batches, made faster).
    ``name`` is a label only. None of the three is part of :func:`config_hash`.
    """

    profile: str = helped("the size profile that fills every field left out (default: $ZS_PROFILE, else quick)",
                          choices=sorted(PROFILES), default="quick")
    weights_path: str | None = helped("a weight file for the backbone")
    normalize: bool = helped("L2-normalize the embedding", default=True)
    dropout: float = helped("dropout on the backbone's feature before the embedding layer, in [0, 1)", default=0.0)
    freeze_bn: bool = helped("keep the backbone's BatchNorm layers in eval mode, their scale and shift frozen",
                             default=False)
    loss: str = helped("the metric loss (zslib.engine.losses.LOSSES)", default="triplet")
    loss_params: dict = helped("a loss hyperparameter, e.g. margin=0.1 (repeatable)", default_factory=dict)
    method: str = helped("the method (python -m zslib methods lists them)", default="baseline")
    method_params: dict = helped("a method hyperparameter, e.g. lambda1=0.02 (repeatable)", default_factory=dict)
    validation_fraction: float = helped("hold out this share of the seen classes as validation classes", default=0.0)
    seed: int = helped("the random seed", default=0)
    train_stages: tuple = helped("the last pretrained stages that train on a cached-feature profile, e.g. block6,head",
                                 default=())
    train_bn: str = helped("BatchNorm of the trained stages (TRAIN_BN)", choices=TRAIN_BN, default="frozen")
    device_images: bool = helped("hold the pre-resized pixels on the training device and crop them there (same "
                                 "batches as the loader)", default=False)
    name: str = helped("a label of the run, not hashed (default: method-loss-dataset-sSEED)", default="")

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"Config.profile {self.profile!r} is not a profile; use one of {sorted(PROFILES)}")
        profile = PROFILES[self.profile]
        for key in PROFILE_FIELDS:
            if getattr(self, key) is None:
                object.__setattr__(self, key, getattr(profile, key))
        from zslib.engine.checks import finite_number  # imports torch: here, so that the command line starts at once

        object.__setattr__(self, "feature_stages", [str(s) for s in self.feature_stages])
        for key in ("backbone_params", "loss_params", "method_params"):
            value = getattr(self, key)
            if not isinstance(value, Mapping):
                raise TypeError(f"Config.{key} must be a dict, got {type(value).__name__}")
            # a JSON round trip: tuples become lists, so a config equals itself after save and load
            object.__setattr__(self, key, json.loads(json.dumps(dict(value), default=_json_default)))
        for key in ("iterations", "batch_classes", "batch_per_class", "embedding_dim", "image_size",
                    "eval_every", "seed", "eval_batch_size", "synth_images_per_class"):
            finite_number(getattr(self, key), f"Config.{key}", low=0 if key == "seed" else 1, integer=True)
        for key in ("lr", "new_layer_mult"):
            finite_number(getattr(self, key), f"Config.{key}", low=0.0, low_open=True)
        finite_number(self.weight_decay, "Config.weight_decay", low=0.0)
        if self.objective_lr is not None:
            finite_number(self.objective_lr, "Config.objective_lr", low=0.0, low_open=True)
        object.__setattr__(self, "train_stages", tuple(str(s) for s in (self.train_stages or ())))
        if self.train_bn not in TRAIN_BN:
            raise ValueError(f"Config.train_bn must be one of {TRAIN_BN}, got {self.train_bn!r}")
        if self.train_stages:
            from zslib.engine.models.adapted import check_train_stages  # imports torch: as checks above

            if not self.feature_stages:
                raise ValueError("Config.train_stages needs a cached-feature profile (profile='real'): the "
                                 "stages before them are read from a cache")
            check_train_stages(self.backbone, self.train_stages)
        if not isinstance(self.image_cache, bool):
            raise TypeError(f"Config.image_cache must be true or false, got {self.image_cache!r}")
        if not isinstance(self.device_images, bool):
            raise TypeError(f"Config.device_images must be true or false, got {self.device_images!r}")
        if self.device_images and not self.image_cache:
            raise ValueError("Config.device_images moves the pre-resized image cache to the device: it needs "
                             "image_cache=True")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Config.dropout must be in [0, 1), got {self.dropout!r}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"Config.validation_fraction must be in [0, 1), got {self.validation_fraction!r}")
        from zslib.engine.losses import LOSSES  # imports torch: here, as checks above

        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose one of {sorted(LOSSES)}")
        unknown = sorted(set(self.loss_params) - set(LOSSES[self.loss].defaults))
        if unknown:
            raise ValueError(f"loss {self.loss!r} has no parameter(s) {unknown}; it accepts "
                             f"{sorted(LOSSES[self.loss].defaults)}")
        for key, value in self.loss_params.items():
            _same_kind(value, LOSSES[self.loss].defaults[key], f"loss {self.loss!r} parameter {key}")
        _check_possible(self, LOSSES[self.loss].parametric)
        object.__setattr__(self, "method_params", get_method(self.method).validate(self.method_params))
        if not self.name:
            object.__setattr__(self, "name", f"{self.method}-{self.loss}-{self.dataset}-s{self.seed}")

    @classmethod
    def from_profile(cls, profile: str | Profile | None = None, **overrides) -> "Config":
        """A config with the sizes of ``profile`` (default: the active one), then ``overrides``."""
        if profile is None:
            profile = get_profile()
        elif isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"unknown profile {profile!r}; use one of {sorted(PROFILES)}")
            profile = PROFILES[profile]
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise TypeError(f"Config has no field(s) {unknown}; the fields are {sorted(fields)}")
        values = {k: getattr(profile, k) for k in PROFILE_FIELDS}
        values["profile"] = profile.name
        values["seed"] = profile.seeds[0] if profile.seeds else 0
        values.update(overrides)
        return cls(**values)

    def replace(self, **changes) -> "Config":
        """A copy with some fields changed. The automatic name follows seed / loss / method changes; a
        change of method without new ``method_params`` starts from the new method's defaults."""
        if "name" not in changes and self.name == f"{self.method}-{self.loss}-{self.dataset}-s{self.seed}":
            changes["name"] = ""
        if "method" in changes and changes["method"] != self.method and "method_params" not in changes:
            changes["method_params"] = {}
        return super().replace(**changes)

    @classmethod
    def from_dict(cls, d: Mapping) -> "Config":
        """Rebuild a config from :meth:`as_dict` output; unknown keys (from other versions) are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})

    def to_profile(self) -> Profile:
        """The profile the data builders see: the named profile with this config's sizes."""
        values = {k: getattr(self, k) for k in PROFILE_FIELDS}
        values["feature_stages"] = tuple(values["feature_stages"])
        return PROFILES[self.profile].replace(**values, seeds=(self.seed,))

    @property
    def hash(self) -> str:
        return config_hash(self)


def config_hash(config: Config) -> str:
    """12 hex digits of the SHA-256 of the config's canonical JSON (the fields of :data:`NOT_HASHED` excluded)."""
    d = config.as_dict()
    for key in NOT_HASHED:
        d.pop(key)
    for key, default in HASHED_UNLESS_DEFAULT.items():
        if json.loads(json.dumps(d[key])) == default:
            d.pop(key)
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
