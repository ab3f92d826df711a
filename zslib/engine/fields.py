"""The fields of a run, declared once: :class:`TrainFields` (what the training loop reads) and :class:`ProfileFields`
(what a profile sets: those and the data and the network).

:class:`~zslib.engine.config.Config` (a run), :class:`~zslib.engine.profile.Profile` (a size preset of runs) and
:class:`~zslib.engine.train.TrainSpec` (one call of the loop) inherit them, so a field added here is a field of
each, an option of ``python -m zslib train`` (its ``help``) and copied from a config into its profile and its spec
with no other change. Every field defaults to ``None``, meaning "not set here": a config takes the profile's
value, a profile must set it (or has a default of its own), a spec takes the loop's default.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields

__all__ = ["TrainFields", "ProfileFields", "names", "helped"]


def helped(text: str, choices=None, **options):
    """A dataclass field (default ``None`` unless ``options`` give another) with ``help`` (what ``python -m zslib
    train --help`` says of it) and ``choices`` in its metadata."""
    if "default_factory" not in options:
        options.setdefault("default", None)
    metadata = {"help": text, **({"choices": tuple(choices)} if choices is not None else {})}
    return field(metadata=metadata, **options)


@dataclass(frozen=True, kw_only=True)
class TrainFields:
    """What :func:`zslib.engine.train.train` reads of a run: its length, batches, learning rates, evaluation and
    loading."""

    iterations: int | None = helped("training steps")
    batch_classes: int | None = helped("P: classes per batch")
    batch_per_class: int | None = helped("K: images per class in a batch")
    lr: float | None = helped("the learning rate of the pretrained layers (the new layers get new_layer_mult times it)")
    weight_decay: float | None = helped("weight decay")
    new_layer_mult: float | None = helped("the new layers (the embedding head) learn at this many times lr")
    objective_lr: float | None = helped("the learning rate of the method's own parameters (default: new_layer_mult "
                                        "x lr)")
    schedule: str | dict | None = helped("the learning-rate schedule: constant (default), cosine, or "
                                         "step:EVERY[:GAMMA]")
    eval_every: int | None = helped("evaluate every this many steps")
    eval_batch_size: int | None = helped("images per batch when the model embeds for evaluation")
    amp: bool | None = helped("mixed precision (CUDA only)")
    num_workers: int | None = helped("data-loading worker processes")

    def replace(self, **changes):
        """A copy with some fields changed (e.g. ``get_profile().replace(iterations=200)``), checked as a new one."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class ProfileFields(TrainFields):
    """What a profile sets: the training fields, the data and the network."""

    dataset: str | None = helped("synthparts, cub200, cars196, sop, inshop or flowers102")
    image_size: int | None = helped("the side in pixels of the square crop the network sees")
    resize_size: int | None = helped("the side in pixels an image is resized to before the crop")
    synth_images_per_class: int | None = helped("SynthParts images per class")
    image_cache: bool | None = helped("read real datasets through the pre-resized image cache")
    backbone: str | None = helped("smallcnn, googlenet, resnet50, bninception, efficientnet_lite0 or "
                                  "tf_efficientnet_lite0")
    backbone_params: dict | None = helped("a setting of the backbone, e.g. widths=[16,32,64,128] (repeatable)")
    pretrained: bool | None = helped("start the backbone from its ImageNet weights")
    feature_stages: list | tuple | None = helped("the backbone maps read from the feature cache (real profile), e.g. "
                                                 "block4,block5,head")
    embedding_dim: int | None = helped("the size of the embedding")


def names(cls) -> tuple[str, ...]:
    """The names of the fields of ``cls`` (:class:`TrainFields` or :class:`ProfileFields`), in order."""
    return tuple(f.name for f in fields(cls))
