"""Random-walk object attention: DeML's object-attention module, OAM (Chen & Deng, CVPR 2019, Sec. 3.1).

A convolutional map ``U`` of one image, ``C x h x w``, is read as a fully connected directed graph over
its ``n = h w`` positions. The edge from position ``a`` to position ``b`` weighs the Euclidean distance
of their feature vectors (DeML Eq. 2); each node's out-bound weights are normalized to one, which
makes the weight matrix a Markov transition matrix ``P`` (rows sum to 1). A mass map ``M`` starts
uniform, ``1/n`` everywhere, and is propagated ``T = 10`` times (Eq. 3). Maps from several layers are
resized to the image and averaged into one object-attention proposal.

Which way the mass flows
------------------------
The paper writes the update as ``M <- D M`` with ``D`` row-normalized. Read literally this does
nothing: every row of ``D`` sums to one, so ``D`` times a constant vector is that constant vector and
the uniform start is a fixed point (``reading="literal"`` keeps this reading so that the book can show
it). The text around Eq. 3 describes a walker: "the node receives and diffuses mass via the inbound
and outbound directed edges", transitions "into" dissimilar sub-graphs are likely. That is the
distribution of a random walker, ``m_{t+1}[b] = sum_a m_t[a] P[a, b]``, i.e. ``M <- P^T M``
(``reading="walk"``, the default). The authors' released Caffe code does exactly this: it normalizes
the *columns* of the symmetric weight matrix and multiplies ``D M`` -- the same update written with
the transpose.

Where the walk ends
-------------------
The weights are symmetric (the distance from ``a`` to ``b`` is the distance from ``b`` to ``a``), so
the chain is reversible and its stationary distribution has a closed form: the degree of each node
over the total, ``pi[a] = sum_b W[a, b] / sum_{a', b} W[a', b]``. A position collects mass in
proportion to its summed dissimilarity to all other positions: what differs from most of the map
(the object on a homogeneous background) is highlighted. ``steps=None`` returns ``pi`` exactly
(:func:`stationary_distribution`, checked against a numerical eigenvector in the tests), and
:func:`convergence_gap` measures how far ``T`` steps are from it (total variation).

The paper calls the chain ergodic because the graph is strongly connected (Sec. 3.1, Remark). That
needs one more condition, aperiodicity, and positive weights: a map with exactly two distinct feature
vectors gives a bipartite graph (zero weight inside each group), the walk oscillates with period 2 and
returns to the uniform map at every even ``T`` (a test shows it). Real feature maps have no exact ties
and the complete graph mixes within a few steps. Measured on SynthParts' unseen classes with the quick
profile's SmallCNN (``benchmarks/oam_localization.py``, largest gap over 200 images): on the plain graph
of Eq. 2, ``T = 10`` is within 1e-5 of ``pi`` for the untrained network and within 1e-3 (48 px) to 1e-2
(96 px, the 6 x 6 ``stage4``) after 200 triplet steps; T = 1, 2, 10 and the exact ``pi`` localize the
object equally well there. On 16 Flowers-102 images through the ImageNet-pretrained EfficientNet-Lite0
(``block4`` 14 x 14 x 112, ``block5`` 7 x 7 x 192, ``head`` 7 x 7 x 1280), ``T = 10`` is within 5e-5 of
``pi``. With the spatial Gaussian below the graph is local and mixes more slowly: ``T = 10`` leaves
total-variation gaps of 0.02-0.08 on SynthParts and up to 0.013 on the flowers.

The spatial Gaussian (released code, not the paper)
---------------------------------------------------
The released code multiplies each edge weight by ``exp(-g^2 / (2 s^2))``, ``g`` the grid distance of
the two positions and ``s = 0.15`` of the map side, as in graph-based visual saliency (Harel, Koch &
Perona 2006). ``spatial_sigma=0.15`` switches it on (default ``None``: the paper's plain Eq. 2). For a
non-square map we take the side as ``sqrt(h w)`` (the released code only handles square maps).
Measured on SynthParts' unseen classes (quick profile, stage3 and stage4 averaged, T = 10): it puts
the attention maximum on the bird far more often (0.21 -> 0.61 of the images untrained, 0.43 -> 0.68
after 200 triplet steps, 48 px) but spreads the mass: the share of mass on the bird rises for the
untrained network (0.126 -> 0.153) and falls after training (0.177 -> 0.166 at 48 px, 0.331 -> 0.241
at 96 px); the crop box's IoU with the bird's box moves by -0.05 to +0.02.

Several layers
--------------
The paper resizes each layer's map to the image and averages them (it uses Incep4e and Incep5b).
Each layer's map is first rescaled (``rescale``): ``"minmax"`` to ``[0, 1]`` per image, as the released
code does, or ``"uniform"``: divided by the uniform mass ``1/n`` (mean 1, so maps of different sizes
are comparable). A constant map (no information; for ``"minmax"`` also a map flat to within 1e-4 of
its maximum, e.g. the literal reading's output) becomes all ones. The released code differs
in one more way that we do not follow: it starts the second layer's walk from the first layer's
result instead of the uniform map, and then keeps only the last layer's map (no average); with an
ergodic chain the start is forgotten anyway.

Attention is parameter-free and not trained (DeML Sec. 3.1): everything here runs without gradients.
"""
from __future__ import annotations

import math
from typing import Mapping

import torch
import torch.nn.functional as F

from zslib.engine.checks import finite_number

__all__ = [
    "READINGS",
    "RESCALES",
    "dissimilarity_graph",
    "transition_matrix",
    "random_walk",
    "stationary_distribution",
    "object_attention",
    "convergence_gap",
    "object_attention_map",
    "shuffle_positions",
]

READINGS = ("walk", "literal")
RESCALES = ("minmax", "uniform")
_MAX_POWER_STEPS = 100_000
_FLAT = 1e-4


def _check_map(fmap, name: str = "fmap") -> torch.Tensor:
    if not torch.is_tensor(fmap) or fmap.dim() != 4:
        shape = tuple(fmap.shape) if torch.is_tensor(fmap) else type(fmap).__name__
        raise ValueError(f"{name} must be a batch of feature maps shaped (B, C, h, w), got {shape}")
    if not fmap.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {fmap.dtype}")
    if min(fmap.shape) == 0:
        raise ValueError(f"{name} is empty (shape {tuple(fmap.shape)})")
    # finiteness is checked on the graph's degrees (NaN and inf propagate there): one pass less
    return fmap.detach().float() if fmap.dtype in (torch.float16, torch.bfloat16) else fmap.detach()


def _check_steps(steps):
    if steps is None:
        return None
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a whole number >= 0 (the paper uses T = 10) or None for the "
                         f"stationary distribution, got {steps!r}")
    return steps


def _check_choice(value, allowed, name):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _graph(fmap: torch.Tensor, spatial_sigma) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge weights ``(B, n, n)`` and degrees ``(B, n)`` of checked maps; see :func:`dissimilarity_graph`."""
    b, c, h, w = fmap.shape
    u = fmap.reshape(b, c, h * w)  # (B, C, n); reshape, not view: the map may be channels_last
    u = u - u.mean(dim=2, keepdim=True)
    sq = u.pow(2).sum(1)  # (B, n)
    # |u_a|^2 + |u_b|^2 - 2 <u_a, u_b> in one fused batched product
    dist2 = torch.baddbmm(sq[:, :, None] + sq[:, None, :], u.transpose(1, 2), u, alpha=-2.0)
    dist2.diagonal(dim1=1, dim2=2).zero_()
    weights = dist2.clamp_min_(0).sqrt_()
    if spatial_sigma is not None:
        finite_number(spatial_sigma, "spatial_sigma (a fraction of the map side; 0.15 in the released code)",
                      low=0, low_open=True)
        ys, xs = torch.meshgrid(torch.arange(h, device=fmap.device, dtype=weights.dtype),
                                torch.arange(w, device=fmap.device, dtype=weights.dtype), indexing="ij")
        grid = torch.stack([ys.reshape(-1), xs.reshape(-1)], 1)
        g2 = (grid[:, None, :] - grid[None, :, :]).pow(2).sum(-1)
        s = spatial_sigma * math.sqrt(h * w)
        weights = weights.mul_(torch.exp(-g2 / (2 * s * s)))
    degree = weights.sum(-1)
    if not bool(torch.isfinite(degree).all()):
        raise ValueError("the feature maps contain NaN or infinite values; check the network output")
    return weights, degree


@torch.no_grad()
def dissimilarity_graph(fmap: torch.Tensor, spatial_sigma: float | None = None) -> torch.Tensor:
    r"""Edge weights of the graph over a map's positions (DeML Eq. 2), batched over images.

    :math:`W_{ab} = \lVert u_a - u_b \rVert_2` for the feature vectors :math:`u_a, u_b \in \mathbb{R}^C`
    at positions ``a = h_a w + w_a`` (row-major, as the paper indexes them). With ``spatial_sigma``
    (the released code's option, 0.15 there) each weight is multiplied by
    :math:`\exp(-g_{ab}^2 / (2 s^2))`, ``g`` the grid distance and ``s = spatial_sigma * sqrt(h w)``.

    ``fmap``: ``(B, C, h, w)``, any memory format. Returns ``(B, n, n)``, ``n = h w``: zero diagonal,
    symmetric up to rounding. Distances are computed from features centred per image (distances do
    not change, the rounding error of the Gram-matrix formula does), so a map whose feature vectors
    are all equal gives exactly zero weights.
    """
    return _graph(_check_map(fmap), spatial_sigma)[0]


@torch.no_grad()
def transition_matrix(weights: torch.Tensor, degree: torch.Tensor | None = None) -> torch.Tensor:
    """Normalize each node's out-bound weights to one (DeML Sec. 3.1, before Eq. 3): ``P = W / W 1``.

    ``weights``: ``(B, n, n)`` non-negative (``degree``: their row sums, if already at hand). A row
    whose weights are all zero (a node at distance zero from every other node, i.e. a map whose
    feature vectors are all equal) gets the uniform row ``1/n``: with nothing to tell the positions
    apart, attention stays uniform instead of becoming NaN.
    """
    if not torch.is_tensor(weights) or weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must be (B, n, n), got {tuple(getattr(weights, 'shape', ()))}")
    n = weights.shape[-1]
    total = (weights.sum(-1) if degree is None else degree)[:, :, None]
    empty = total <= 0
    p = weights / torch.where(empty, torch.ones_like(total), total)
    if bool(empty.any()):
        p = p + empty.to(p.dtype) / n
    return p


@torch.no_grad()
def random_walk(transition: torch.Tensor, steps: int | None = 10, reading: str = "walk",
                start: torch.Tensor | None = None, tol: float = 1e-9) -> torch.Tensor:
    """Propagate a mass map ``steps`` times over a row-stochastic ``transition`` (DeML Eq. 3).

    * ``reading="walk"`` (default): ``m <- P^T m``, mass moves along the edges (the distribution of a
      random walker; the released code's update);
    * ``reading="literal"``: ``m <- P m`` as Eq. 3 is printed; from the uniform start nothing moves.

    ``start`` defaults to the uniform map ``1/n`` (the paper's initialization). ``steps=None`` iterates
    until the largest per-image L1 change is below ``tol`` (at most 100,000 steps). Returns ``(B, n)``.
    """
    _check_choice(reading, READINGS, "reading")
    steps = _check_steps(steps)
    if not torch.is_tensor(transition) or transition.dim() != 3 or transition.shape[1] != transition.shape[2]:
        raise ValueError(f"transition must be (B, n, n), got {tuple(getattr(transition, 'shape', ()))}")
    b, n, _ = transition.shape
    m = torch.full((b, n), 1.0 / n, dtype=transition.dtype, device=transition.device) if start is None \
        else start.to(transition.dtype).reshape(b, n).clone()

    def step(m):
        if reading == "walk":
            return torch.bmm(m[:, None, :], transition)[:, 0]
        return torch.bmm(transition, m[:, :, None])[:, :, 0]

    if steps is not None:
        for _ in range(steps):
            m = step(m)
        return m
    for _ in range(_MAX_POWER_STEPS):
        nxt = step(m)
        if float((nxt - m).abs().sum(-1).max()) < tol:
            return nxt
        m = nxt
    return m


@torch.no_grad()
def stationary_distribution(weights: torch.Tensor | None, degree: torch.Tensor | None = None) -> torch.Tensor:
    """The stationary distribution of the walk on symmetric ``weights``: degree over total degree.

    For symmetric ``W`` and ``P = W / W 1``, ``pi[a] = d_a / sum d`` with ``d = W 1`` satisfies
    ``pi^T P = pi^T`` (detailed balance: ``pi_a P_ab = W_ab / sum d = pi_b P_ba``), and it is the only
    such distribution when the graph is connected. All-zero weights give the uniform distribution.
    ``degree``: the row sums ``W 1``, if already at hand (then ``weights`` may be ``None``).
    Returns ``(B, n)``.
    """
    degree = weights.sum(-1) if degree is None else degree
    total = degree.sum(-1, keepdim=True)
    n = degree.shape[-1]
    return torch.where(total > 0, degree / torch.where(total > 0, total, torch.ones_like(total)),
                       torch.full_like(degree, 1.0 / n))


@torch.no_grad()
def object_attention(fmap: torch.Tensor, steps: int | None = 10, *, spatial_sigma: float | None = None,
                     reading: str = "walk") -> torch.Tensor:
    """Object-attention proposal of one layer (DeML Eqs. 2-3), batched over images.

    ``fmap``: ``(B, C, h, w)``. Builds the graph (:func:`dissimilarity_graph`), normalizes out-bound
    weights (:func:`transition_matrix`) and propagates the uniform map ``steps`` times
    (:func:`random_walk`; ``steps=None``: the exact stationary distribution for ``reading="walk"``,
    power iteration to convergence for ``"literal"``). Returns ``(B, h, w)``, each map summing to one.
    """
    _check_choice(reading, READINGS, "reading")
    steps = _check_steps(steps)
    fmap = _check_map(fmap)
    b, _, h, w = fmap.shape
    weights, degree = _graph(fmap, spatial_sigma)
    if steps is None and reading == "walk":
        m = stationary_distribution(None, degree)
    else:
        m = random_walk(transition_matrix(weights, degree), steps, reading)
    return m.reshape(b, h, w)


@torch.no_grad()
def convergence_gap(fmap: torch.Tensor, steps: int = 10, *, spatial_sigma: float | None = None) -> torch.Tensor:
    """Total-variation distance between the walk after ``steps`` steps and its stationary distribution.

    ``0.5 * sum_a |m_T[a] - pi[a]|`` per image, ``(B,)``: how much of the attention mass ``T`` steps
    leave misplaced compared with walking forever.
    """
    steps = _check_steps(steps)
    if steps is None:
        raise ValueError("convergence_gap needs a whole number of steps")
    fmap = _check_map(fmap)
    weights, degree = _graph(fmap, spatial_sigma)
    m = random_walk(transition_matrix(weights, degree), steps, "walk")
    return 0.5 * (m - stationary_distribution(None, degree)).abs().sum(-1)


def _rescale(maps: torch.Tensor, how: str) -> torch.Tensor:
    flat = maps.flatten(1)
    n = flat.shape[1]
    if how == "uniform":
        return maps * n
    lo, hi = flat.min(1).values, flat.max(1).values
    span = (hi - lo)[:, None, None]
    # a map flat to within 1e-4 of its maximum is uniform attention plus rounding noise (the literal
    # reading's output, a constant feature map): min-max scaling would blow the noise up to [0, 1]
    constant = span <= _FLAT * hi.abs().clamp_min(1e-30)[:, None, None]
    scaled = (maps - lo[:, None, None]) / torch.where(constant, torch.ones_like(span), span)
    return torch.where(constant, torch.ones_like(maps), scaled)


@torch.no_grad()
def object_attention_map(fmaps, size, steps: int | None = 10, *, spatial_sigma: float | None = None,
                         reading: str = "walk", rescale: str = "minmax") -> torch.Tensor:
    """DeML's object-attention proposal from several layers: per-layer maps, rescaled, resized, averaged.

    ``fmaps``: a sequence (or a mapping, e.g. the dict of ``model.features(x, names)``) of maps
    ``(B, C_k, h_k, w_k)`` of the same images. ``size``: ``(H, W)`` of the output (the image) or one
    int. Each layer gives :func:`object_attention`, rescaled per image (``rescale``: ``"minmax"`` to
    [0, 1] as the released code, or ``"uniform"``: relative to uniform mass; see the module docstring),
    bilinearly resized to ``size`` and averaged over layers. The walk of layers of equal size runs as
    one batch. Returns ``(B, H, W)`` float32.
    """
    _check_choice(rescale, RESCALES, "rescale")
    _check_choice(reading, READINGS, "reading")
    steps = _check_steps(steps)
    maps = list(fmaps.values()) if isinstance(fmaps, Mapping) else list(fmaps)
    if not maps:
        raise ValueError("fmaps is empty; give at least one feature map (B, C, h, w)")
    maps = [_check_map(m, f"fmaps[{k}]") for k, m in enumerate(maps)]
    if len({m.shape[0] for m in maps}) != 1:
        raise ValueError(f"all maps must hold the same images; got batch sizes {[m.shape[0] for m in maps]}")
    size = (int(size), int(size)) if isinstance(size, int) else tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"size must be (H, W) with positive entries, got {size!r}")
    b = maps[0].shape[0]
    # layers whose maps have the same spatial size share one batched walk
    groups: dict[tuple[int, int], list[int]] = {}
    for k, m in enumerate(maps):
        groups.setdefault(tuple(m.shape[-2:]), []).append(k)
    total = torch.zeros(b, *size, dtype=torch.float32, device=maps[0].device)
    for (h, w), members in groups.items():
        graphs = [_graph(maps[k], spatial_sigma) for k in members]
        weights = torch.cat([g[0] for g in graphs]).float() if len(graphs) > 1 else graphs[0][0].float()
        degree = torch.cat([g[1] for g in graphs]).float() if len(graphs) > 1 else graphs[0][1].float()
        if steps is None and reading == "walk":
            m = stationary_distribution(None, degree)
        else:
            m = random_walk(transition_matrix(weights, degree), steps, reading)
        m = _rescale(m.reshape(-1, h, w), rescale)
        # bilinear resizing is separable: rows then columns, two small matrix products
        up = _resize_matrix(h, size[0], m).T @ m @ _resize_matrix(w, size[1], m)
        total += up.reshape(len(members), b, *size).sum(0)
    return total / len(maps)


@torch.no_grad()
def shuffle_positions(fmaps, seed: int = 0):
    """The same feature maps with their positions permuted at random: a null without spatial layout.

    ``fmaps``: a sequence or mapping of maps ``(B, C_k, h_k, w_k)`` (as :func:`object_attention_map`
    takes them); returns the same container type with each image's feature vectors moved to random
    positions. Every image gets its own permutation; layers of the same size share it (their positions
    stay aligned), and ``seed`` fixes them all. On the plain graph of Eq. 2 the object attention of the
    shuffled map is the shuffled attention (the graph does not know where a position is); with
    ``spatial_sigma`` it is not, and what the attention of shuffled maps still prefers (e.g. the centre
    of the frame, because positions near the border have fewer near neighbours) comes from the graph
    itself, not from the image.
    """
    items = list(fmaps.items()) if isinstance(fmaps, Mapping) else list(enumerate(fmaps))
    if not items:
        raise ValueError("fmaps is empty; give at least one feature map (B, C, h, w)")
    checked = [(k, _check_map(m, f"fmaps[{k!r}]")) for k, m in items]
    if len({m.shape[0] for _, m in checked}) != 1:
        raise ValueError(f"all maps must hold the same images; got batch sizes {[m.shape[0] for _, m in checked]}")
    gen = torch.Generator().manual_seed(int(seed))
    perms: dict[tuple[int, int], torch.Tensor] = {}
    out = []
    for k, m in checked:
        b, c, h, w = m.shape
        if (h, w) not in perms:
            perms[(h, w)] = torch.stack([torch.randperm(h * w, generator=gen) for _ in range(b)]).to(m.device)
        idx = perms[(h, w)][:, None, :].expand(b, c, h * w)
        out.append((k, torch.gather(m.reshape(b, c, h * w), 2, idx).reshape(b, c, h, w)))
    if isinstance(fmaps, Mapping):
        return dict(out)
    return [m for _, m in out]


def _resize_matrix(n_in: int, n_out: int, like: torch.Tensor) -> torch.Tensor:
    """``(n_in, n_out)``: 1-D linear interpolation (``align_corners=False``) as a matrix, so that
    ``A_h^T M A_w`` equals ``F.interpolate(M, mode="bilinear", align_corners=False)``."""
    eye = torch.eye(n_in, dtype=like.dtype, device=like.device)[None]
    return F.interpolate(eye, size=n_out, mode="linear", align_corners=False)[0]
