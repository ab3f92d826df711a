r"""General discriminative feature learning (GDFL): an embedding network over attended intermediate maps.

Adapt-Adv's feature extractor (Al-Kaabi et al. 2022, ``alkaabi2022adaptadv``, Sec. 3.1, Fig. 9, Sec. 4):
the backbone runs once; each chosen intermediate map :math:`M^{(i)}` is pooled by its own
:class:`~zslib.methods.adapt_adv.spatial_attention.SpatialAttention` guided by ``u``, the pooled output of the last
hidden layer, giving :math:`p^{(i)}`; the *inter-module fusion component* concatenates the
:math:`p^{(i)}` into the feature vector ``f``; the metric embedding layer :math:`g(\theta_m; \cdot)` (Sec. 3.3)
maps ``f`` to the embedding. The paper attends over ``inception_4d``, ``inception_4e`` and ``inception_5a``
of BN-Inception (608 x 14 x 14, 1056 x 7 x 7, 1024 x 7 x 7; ``u`` in :math:`\mathbb{R}^{1024}`) with the
additive form (Eq. 11). Every zslib backbone names its equivalent three maps in
``backbone.roles["intermediate"]``, the default layers here.

Readings of the paper taken here:

* ``f`` is the concatenation of the attended vectors only, :math:`f = [p^{(1)}; \dots; p^{(m)}]`: Sec. 3.1
  says the fusion component concatenates :math:`p^{(i)}, i = 1..m`, and the ablation "Tri+Adv" (Sec. 5.4.1)
  *replaces* the general discriminative features by the last hidden layer's output, so ``u`` guides the
  attention but is not itself part of ``f``. ``include_pooled=True`` appends ``u`` for experiments.
* The metric embedding layer is one linear layer from ``f`` to ``embedding_dim`` dimensions (64 in the
  paper, Sec. 5.3), L2-normalized when ``normalize`` (zslib's :class:`EmbeddingHead`, as for the base
  networks, so base and GDFL differ only in what feeds the head).
* ``f``, not the embedding, is what the class-adversarial classifier reads (Sec. 3.4:
  :math:`h(\theta_c; f_i)` with :math:`f_i = f(\theta_f; x_i)`); :meth:`GDFLNet.extract` returns it and
  :meth:`GDFLNet.embed_features` embeds it, so a method computes ``f`` once for both.
* On the ``real`` profile the backbone is a :class:`~zslib.engine.models.CachedBackbone`: the maps come from a
  feature cache by name, and the attention modules and the head are all that trains (:math:`\theta_f` is the
  attention). A tap (``forward_tapped``, Grad-CAM) there changes the tapped map where the attention and,
  for the last map, ``u`` read it, but cannot reach the maps after it: they were computed once, by the
  frozen network, when the cache was built.
* The attention modules are new layers: :meth:`param_groups` (inherited) puts them with the head at the
  faster learning rate (the paper gives only the backbone's 1e-4 and the embedding layer's 1e-3).
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from zslib.engine.models.backbones import Backbone
from zslib.engine.models.cached import CachedBackbone
from zslib.engine.models.embedding import EmbeddingHead, EmbeddingNet
from zslib.methods.adapt_adv.spatial_attention import SpatialAttention

__all__ = ["GDFLNet"]


class GDFLNet(EmbeddingNet):
    """An :class:`EmbeddingNet` whose embedding reads attended intermediate maps (Adapt-Adv Sec. 3.1).

    * ``forward(x)`` -> embeddings ``(B, d)``;
    * ``extract(x)`` -> the fused feature ``f`` ``(B, fused_dim)`` (the classifier's input);
    * ``embed_features(f)`` -> the embedding of an already extracted ``f``;
    * ``attention_maps(x)`` -> per attended layer, the normalized weights ``(B, H, V)`` (for the
      multi-dimensional form averaged over the channels, still summing to one over the positions);
    * ``forward_tapped(x, taps)`` -> embeddings, with ``taps[name]`` applied to stage ``name``'s map on
      its way through the network (how :func:`zslib.analysis.saliency.similarity_gradcam` reaches a map);
    * everything else as :class:`EmbeddingNet` (``param_groups``, ``freeze_bn``, ``features``, ...).

    Args:
        backbone: a zslib :class:`Backbone`.
        embedding_dim: width of the embedding.
        layers: stage names to attend over (default ``backbone.roles["intermediate"]``); the fused
            feature concatenates them in forward order.
        form: ``"multiplicative"``, ``"additive"`` (the paper's choice) or ``"multidimensional"``.
        activation: the attention's sigma (``"tanh"``, ``"relu"``, ``"elu"``).
        include_pooled: also append ``u`` to ``f`` (not the paper's reading; see the module docstring).
        normalize, freeze_bn, dropout: as for :class:`EmbeddingNet`.
    """

    def __init__(self, backbone: Backbone, embedding_dim: int, layers: Sequence[str] | None = None,
                 form: str = "additive", activation: str = "tanh", include_pooled: bool = False,
                 normalize: bool = True, freeze_bn: bool = False, dropout: float = 0.0):
        super().__init__(backbone, embedding_dim, normalize=normalize, freeze_bn=False, dropout=dropout)
        order = [n for n in backbone.stage_names if n != "pool"]
        if layers is None:
            layers = backbone.roles.get("intermediate", ())
        layers = [layers] if isinstance(layers, str) else list(layers)
        unknown = [n for n in layers if n not in order]
        if not layers or unknown or len(set(layers)) != len(layers):
            raise ValueError(f"layers must be distinct map names of {backbone.name} (one or more of {order}); "
                             f"got {layers}")
        self.layers = tuple(sorted(layers, key=order.index))
        self.attention = nn.ModuleDict({
            name: SpatialAttention(backbone.stage_channels[name], backbone.feature_dim, form, activation)
            for name in self.layers
        })
        self.form = form
        self.include_pooled = bool(include_pooled)
        self.fused_dim = sum(backbone.stage_channels[n] for n in self.layers)
        self.fused_dim += backbone.feature_dim if self.include_pooled else 0
        self.head = EmbeddingHead(self.fused_dim, embedding_dim, normalize, dropout)
        if freeze_bn:
            self.freeze_bn()

    @classmethod
    def from_embedding_net(cls, net: EmbeddingNet, layers: Sequence[str] | None = None, form: str = "additive",
                           activation: str = "tanh", include_pooled: bool = False) -> "GDFLNet":
        """A GDFLNet over ``net``'s backbone (its weights shared, not copied), with ``net``'s embedding width,
        normalization, dropout and BatchNorm freezing; the head is new (its input width changes)."""
        if not isinstance(net, EmbeddingNet):
            raise TypeError(f"net must be a zslib EmbeddingNet (build_model(...)), got {type(net).__name__}")
        dropout = net.head.dropout.p if isinstance(net.head.dropout, nn.Dropout) else 0.0
        return cls(net.backbone, net.embedding_dim, layers, form, activation, include_pooled,
                   normalize=net.normalize, freeze_bn=net.bn_frozen, dropout=dropout)

    # ----- computation ----------------------------------------------------------------------------
    def _attended(self, x: torch.Tensor, taps: Mapping[str, Callable] | None = None):
        """One pass: the attended maps by name and ``u``; ``taps[name]`` transforms a map in place of it."""
        taps = dict(taps or {})
        order = [n for n in self.backbone.stage_names if n != "pool"]
        unknown = [n for n in taps if n not in order]
        if unknown:
            raise ValueError(f"unknown stage(s) {unknown} to tap; choose from {order}")
        if not taps:  # one pass, by name: also how a cached backbone (the real profile) serves its maps
            maps = self.backbone.features(x, [*self.layers, "pool"])
            return {name: maps[name] for name in self.layers}, maps["pool"]
        if isinstance(self.backbone, CachedBackbone):  # nothing runs between cached maps
            wanted = sorted(set(self.layers) | set(taps) | {order[-1]}, key=order.index)
            maps = self.backbone.features(x, wanted)
            maps = {name: taps[name](m) if name in taps else m for name, m in maps.items()}
            return {name: maps[name] for name in self.layers}, self.backbone.pool(maps[order[-1]])
        maps, previous = {}, None
        for name in sorted(set(self.layers) | set(taps), key=order.index):
            x = self.backbone.run(x, start_after=previous, until=name)
            if name in taps:
                x = taps[name](x)
            if name in self.attention:
                maps[name] = x
            previous = name
        u = self.backbone.pool(self.backbone.run(x, start_after=previous))
        return maps, u

    def _fuse(self, maps: dict, u: torch.Tensor) -> torch.Tensor:
        """The inter-module fusion component: concatenate the attended vectors (and ``u`` if asked)."""
        parts = [self.attention[name](maps[name], u) for name in self.layers]
        return torch.cat(parts + ([u] if self.include_pooled else []), dim=1)

    def extract(self, x: torch.Tensor) -> torch.Tensor:
        """The fused feature ``f = [p^(1); ...; p^(m)]`` ``(B, fused_dim)`` (Adapt-Adv's f(theta_f; x))."""
        return self._fuse(*self._attended(x))

    def embed_features(self, f: torch.Tensor) -> torch.Tensor:
        """The metric embedding layer g(theta_m; f) applied to a fused feature ``f`` (Adapt-Adv Sec. 3.3)."""
        return self.head(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.extract(x))

    def forward_tapped(self, x: torch.Tensor, taps: Mapping[str, Callable]) -> torch.Tensor:
        """Embeddings with ``taps[name](map)`` replacing stage ``name``'s map wherever it is used next."""
        return self.head(self._fuse(*self._attended(x, taps)))

    def attention_maps(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per attended layer the normalized attention weights ``(B, H, V)`` (each summing to one); for the
        multi-dimensional form the mean over channels of the per-channel weights."""
        maps, u = self._attended(x)
        out = {}
        for name in self.layers:
            _, weights = self.attention[name](maps[name], u, return_weights=True)
            out[name] = weights.mean(1) if weights.dim() == 4 else weights
        return out

    def embed_pooled(self, u: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("a GDFLNet embeds attended intermediate maps, not the pooled feature alone; "
                                  "use model(x), or model.embed_features(model.extract(x))")

    def features(self, x: torch.Tensor, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """Maps by name (``stage_names``), ``"fused"`` (``f``) and ``"embedding"``, from one forward pass."""
        names = [names] if isinstance(names, str) else list(names)
        allowed = [*self.stage_names, "fused", "embedding"]
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise ValueError(f"unknown feature map name(s) {unknown}; choose from {allowed}")
        if not {"fused", "embedding"} & set(names):
            return self.backbone.features(x, names)
        stages = [n for n in names if n in self.stage_names and n != "pool"]
        out = {}

        def record(name):  # a tap that keeps the map it sees and passes it on unchanged
            def tap(fmap):
                out[name] = fmap
                return fmap
            return tap

        maps, u = self._attended(x, {n: record(n) for n in stages})
        out["pool"] = u
        out["fused"] = self._fuse(maps, u)
        if "embedding" in names:
            out["embedding"] = self.head(out["fused"])
        return {n: out[n] for n in names}

    def extra_repr(self) -> str:
        return f"layers={list(self.layers)}, form={self.form}, fused_dim={self.fused_dim}"
