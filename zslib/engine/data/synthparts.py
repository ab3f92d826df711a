"""SynthParts: a procedurally rendered image set of part-based "birds" with a designed shortcut.

Why it exists
-------------
All five papers of the book argue that a network trained on the *seen* classes learns only the
easiest cues that separate those classes ("partial" or "biased" learning: Chen & Deng, DeML, CVPR
2019, Sec. 1; Chen et al., CML, TNNLS 2022, Sec. 1; Al-Kaabi et al., Adapt-Adv, 2022, Sec. 1) and
then fails on the *unseen* classes. On a real dataset nobody knows which cues are "easy". SynthParts
controls them, renders in a second without any download, and ships the ground truth later chapters
score against (object boxes, part masks, attribute values).

The object
----------
A stylised bird facing right in its own frame (x to the right, y down, body centred at the origin),
made of six parts, painted back to front: tail, legs, body, wing, head (with an eye), beak.
Seven attributes, each a property of one part, define a class:

=============  =====  ============================================================  =========
attribute      part   values                                                        salience
=============  =====  ============================================================  =========
body_color     body   8 saturated colours: the corners of the RGB cube               shortcut
head_color     head   the same 8 colours                                            shortcut
wing_color     wing   6 muted colours (brown, grey, olive, teal, maroon, navy)      hard
wing_pattern   wing   solid, stripes, spots, checker                                hard
tail_shape     tail   fan, pointed, forked, square                                  hard
tail_color     tail   the 6 muted colours                                           hard
beak_shape     beak   short, long, wide                                             hard
=============  =====  ============================================================  =========

The designed shortcut
---------------------
* **Seen classes** (default 50, global ids ``0 .. 49``) each get a *different* pair
  (body_color, head_color) out of the 8 x 8 = 64 pairs: the two largest, most saturated parts alone
  tell every seen class apart. Their hard attributes are drawn at random, so every hard value
  occurs among the seen classes (a model *can* learn them), but nothing forces it to.
* **Unseen classes** (default 50, global ids ``50 .. 99``) reuse the same 8 colours in *new* pairs
  that no seen class has: only ``unseen_groups`` (default 10) pairs, each shared by 5 unseen
  classes, which differ from one another in at least two hard attributes. A model that learned the
  colour pair only can at best tell the 10 groups apart; one that learned every part separates all 50.

:func:`shortcut_probe` measures this: a logistic-regression probe that sees only the measured colour
of the shortcut parts scores near 100 % on held-out images of the seen classes and near 1/5 on the
unseen ones; given every attribute it scores near 100 % on both.

Nuisances (per image, from the seed)
------------------------------------
Random position, scale (the object spans about 50-75 % of the image), in-plane rotation (+-35 deg)
and horizontal flip; a background of a random colour with a gradient and seven clutter shapes whose
colours are mostly drawn from the same palettes as the bird (so colour alone does not localise it);
global brightness, per-part colour jitter and pixel noise.

Determinism
-----------
The class design depends only on ``design_seed`` (and the class counts); the nuisances of image ``j``
of class ``c`` depend only on ``(seed, c, j)``: they are the same at every resolution, and
``images_per_class=10`` gives the first 10 images of ``images_per_class=40``. Rendering is
vectorised over images in torch (float32 on the CPU, in cache-sized chunks on one thread), the bird's
edges anti-aliased from signed distances (the clutter is hard-edged).
"""
from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch.utils.data import Dataset

from zslib.engine.cache import ArrayCache, source_fingerprint
from zslib.engine.threads import one_thread

__all__ = [
    "SynthParts",
    "generator_identity",
    "SynthPartsDesign",
    "design_classes",
    "ProbeResult",
    "shortcut_probe",
    "probe_features",
    "PART_NAMES",
    "ATTRIBUTES",
    "ATTRIBUTE_NAMES",
    "SHORTCUT_ATTRIBUTES",
    "SHORTCUT_COLORS",
    "MUTED_COLORS",
]

PART_NAMES: tuple[str, ...] = ("body", "head", "wing", "tail", "legs", "beak")
"""Part ``k`` (1-based) has value ``k`` in :attr:`SynthParts.part_map`; 0 is the background."""

# The corners of the RGB cube (pulled in from 0/1): every colour is an extreme point of the
# palette's convex hull, so a *linear* probe on measured RGB can single out each one.
SHORTCUT_COLORS: dict[str, tuple[float, float, float]] = {
    "black": (0.08, 0.08, 0.08),
    "red": (0.92, 0.10, 0.10),
    "green": (0.10, 0.80, 0.15),
    "blue": (0.12, 0.20, 0.92),
    "yellow": (0.95, 0.90, 0.12),
    "magenta": (0.90, 0.12, 0.85),
    "cyan": (0.12, 0.88, 0.90),
    "white": (0.96, 0.96, 0.96),
}
MUTED_COLORS: dict[str, tuple[float, float, float]] = {
    "brown": (0.45, 0.28, 0.12),
    "grey": (0.50, 0.50, 0.50),
    "olive": (0.45, 0.45, 0.12),
    "teal": (0.08, 0.45, 0.45),
    "maroon": (0.48, 0.08, 0.20),
    "navy": (0.14, 0.14, 0.48),
}
WING_PATTERNS = ("solid", "stripes", "spots", "checker")
TAIL_SHAPES = ("fan", "pointed", "forked", "square")
BEAK_SHAPES = ("short", "long", "wide")

# (name, part, kind, value names). kind "color" is read from pixels by the probe.
ATTRIBUTES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("body_color", "body", "color", tuple(SHORTCUT_COLORS)),
    ("head_color", "head", "color", tuple(SHORTCUT_COLORS)),
    ("wing_color", "wing", "color", tuple(MUTED_COLORS)),
    ("wing_pattern", "wing", "pattern", WING_PATTERNS),
    ("tail_shape", "tail", "shape", TAIL_SHAPES),
    ("tail_color", "tail", "color", tuple(MUTED_COLORS)),
    ("beak_shape", "beak", "shape", BEAK_SHAPES),
)
ATTRIBUTE_NAMES: tuple[str, ...] = tuple(a[0] for a in ATTRIBUTES)
SHORTCUT_ATTRIBUTES: tuple[str, ...] = ("body_color", "head_color")
_HARD = tuple(i for i, a in enumerate(ATTRIBUTES) if a[0] not in SHORTCUT_ATTRIBUTES)
_SIZES = tuple(len(a[3]) for a in ATTRIBUTES)

_SHORTCUT_RGB = np.array(list(SHORTCUT_COLORS.values()), dtype=np.float32)
_MUTED_RGB = np.array(list(MUTED_COLORS.values()), dtype=np.float32)
_LEG_RGB = (0.30, 0.27, 0.25)
_BEAK_RGB = (0.86, 0.62, 0.20)
_EYE_RGB = (0.03, 0.03, 0.03)
_INK_RGB = (0.93, 0.93, 0.90)  # pattern ink on the (dark, muted) wing colours
_N_CLUTTER = 7


# ----------------------------------------------------------------------------------------------
# Class design
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SynthPartsDesign:
    """Which attribute values each class has. Global class ids: seen first, then unseen.

    ``class_attributes[c, a]`` is the value index of attribute ``ATTRIBUTE_NAMES[a]`` for class ``c``;
    ``unseen_group[c - num_seen]`` is the shortcut group of unseen class ``c`` (classes of one group
    share body and head colours).
    """

    num_seen: int
    num_unseen: int
    unseen_groups: int
    design_seed: int
    class_attributes: np.ndarray = field(repr=False)
    unseen_group: np.ndarray = field(repr=False)

    @property
    def num_classes(self) -> int:
        return self.num_seen + self.num_unseen

    def class_description(self, c: int) -> str:
        """A readable description of global class ``c``, e.g. ``'red body, white head, ...'``."""
        vals = self.class_attributes[int(c)]
        return ", ".join(f"{ATTRIBUTES[a][3][v]} {ATTRIBUTES[a][0].replace('_', ' ')}"
                         for a, v in enumerate(vals))


def design_classes(num_seen: int = 50, num_unseen: int = 50, unseen_groups: int = 10,
                   design_seed: int = 0) -> SynthPartsDesign:
    """Draw the class design (see the module docstring for the shortcut it builds in)."""
    n_pairs = len(SHORTCUT_COLORS) ** 2
    if num_seen < 2 or num_unseen < 1 or unseen_groups < 1:
        raise ValueError("SynthParts needs num_seen >= 2, num_unseen >= 1 and unseen_groups >= 1")
    if num_seen + unseen_groups > n_pairs:
        raise ValueError(
            f"num_seen + unseen_groups = {num_seen + unseen_groups} exceeds the {n_pairs} "
            "(body, head) colour pairs; lower num_seen or unseen_groups")
    per_group = math.ceil(num_unseen / unseen_groups)
    n_hard = int(np.prod([_SIZES[a] for a in _HARD]))
    if per_group > n_hard // 4:
        raise ValueError(f"{per_group} unseen classes per group is too many; raise unseen_groups")
    rng = np.random.default_rng([int(design_seed), 0x5EED])
    k = len(SHORTCUT_COLORS)
    for _ in range(1000):
        pairs = rng.permutation(n_pairs)
        seen_pairs = pairs[:num_seen]
        group_pairs = pairs[num_seen:num_seen + unseen_groups]
        # every colour must occur among the seen classes, so unseen pairs reuse known values
        if len(np.unique(seen_pairs // k)) == k and len(np.unique(seen_pairs % k)) == k:
            break
    else:  # pragma: no cover - only for tiny num_seen
        raise ValueError("could not give every shortcut colour to a seen class; raise num_seen")
    attrs = np.zeros((num_seen + num_unseen, len(ATTRIBUTES)), dtype=np.int64)
    attrs[:num_seen, 0] = seen_pairs // k
    attrs[:num_seen, 1] = seen_pairs % k
    # seen classes: random hard attributes, every value present
    for _ in range(1000):
        hard = np.stack([rng.integers(0, _SIZES[a], num_seen) for a in _HARD], axis=1)
        if all(len(np.unique(hard[:, j])) == _SIZES[a] for j, a in enumerate(_HARD)):
            break
    attrs[:num_seen, list(_HARD)] = hard
    # unseen classes: round-robin over groups; within a group, hard tuples differ in >= 2 attributes
    group = np.arange(num_unseen) % unseen_groups
    for g in range(unseen_groups):
        members = np.flatnonzero(group == g)
        chosen: list[np.ndarray] = []
        while len(chosen) < len(members):
            cand = np.array([rng.integers(0, _SIZES[a]) for a in _HARD])
            if all((cand != c).sum() >= 2 for c in chosen):
                chosen.append(cand)
        rows = num_seen + members
        attrs[rows, 0] = group_pairs[g] // k
        attrs[rows, 1] = group_pairs[g] % k
        attrs[np.ix_(rows, list(_HARD))] = np.stack(chosen)
    return SynthPartsDesign(num_seen, num_unseen, unseen_groups, int(design_seed), attrs, group)


# ----------------------------------------------------------------------------------------------
# Nuisance parameters (numpy, per class: independent of resolution and of images_per_class)
# ----------------------------------------------------------------------------------------------
_BLOCK = 16  # images drawn per random stream, so a class's first n images never depend on n


def _sample_nuisances(global_class: int, n: int, seed: int) -> dict[str, np.ndarray]:
    """Nuisances of images ``0 .. n-1`` of a class: blocks of 16 images, each from its own stream."""
    blocks = [_sample_block(global_class, b, seed) for b in range((n + _BLOCK - 1) // _BLOCK)]
    return {k: np.concatenate([blk[k] for blk in blocks])[:n] for k in blocks[0]}


def _sample_block(global_class: int, block: int, seed: int) -> dict[str, np.ndarray]:
    n = _BLOCK
    rng = np.random.default_rng([int(seed), int(global_class), int(block), 0xB12D])
    s = rng.uniform(0.20, 0.30, n)
    reach = 1.3 * s  # keeps the object (radius about 1.45 units) essentially inside the frame
    cx = reach + rng.uniform(0, 1, n) * (1 - 2 * reach)
    cy = reach + rng.uniform(0, 1, n) * (1 - 2 * reach)
    out = {
        "center": np.stack([cx, cy], 1),
        "scale": s,
        "angle": rng.uniform(-35, 35, n) * (math.pi / 180),
        "flip": np.where(rng.uniform(0, 1, n) < 0.5, -1.0, 1.0),
        "brightness": rng.uniform(0.8, 1.15, n),
        "jitter": rng.uniform(-0.05, 0.05, (n, len(PART_NAMES), 3)),
        "bg_color": rng.uniform(0.25, 0.75, (n, 3)),
        "bg_grad_angle": rng.uniform(0, 2 * math.pi, n),
        "bg_grad_strength": rng.uniform(0.0, 0.3, n),
        "clutter_center": rng.uniform(0, 1, (n, _N_CLUTTER, 2)),
        "clutter_size": rng.uniform(0.03, 0.14, (n, _N_CLUTTER, 2)),
        "clutter_angle": rng.uniform(0, math.pi, (n, _N_CLUTTER)),
        "clutter_box": rng.uniform(0, 1, (n, _N_CLUTTER)) < 0.5,
        "noise_seed": rng.uniform(0, 100, n),
    }
    palette = np.concatenate([_SHORTCUT_RGB, _MUTED_RGB])
    pick = palette[rng.integers(0, len(palette), (n, _N_CLUTTER))]
    random_rgb = rng.uniform(0, 1, (n, _N_CLUTTER, 3))
    use_palette = rng.uniform(0, 1, (n, _N_CLUTTER, 1)) < 0.7
    out["clutter_color"] = np.where(use_palette, pick, random_rgb)
    return out


# ----------------------------------------------------------------------------------------------
# Vectorised rendering (torch)
# ----------------------------------------------------------------------------------------------
def _ellipse(x, y, cx, cy, rx, ry, rot=0.0):
    """Approximate signed distance to an ellipse (negative inside), in the units of x, y."""
    x = x - cx
    y = y - cy
    if rot:
        c, s = math.cos(rot), math.sin(rot)
        x, y = c * x + s * y, -s * x + c * y
    k = torch.sqrt((x / rx) ** 2 + (y / ry) ** 2)
    return (k - 1.0) * min(rx, ry)


def _circle(x, y, cx, cy, r):
    return torch.sqrt((x - cx) ** 2 + (y - cy) ** 2) - r


def _box(x, y, cx, cy, hx, hy):
    qx = (x - cx).abs() - hx
    qy = (y - cy).abs() - hy
    outside = torch.sqrt(qx.clamp(min=0) ** 2 + qy.clamp(min=0) ** 2)
    return outside + torch.maximum(qx, qy).clamp(max=0)


def _polygon(x, y, pts):
    """Signed distance (exact inside and along edges) to a convex polygon given by its vertices."""
    pts = [(float(a), float(b)) for a, b in pts]
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    d = None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1]):
        nx, ny = y1 - y0, -(x1 - x0)
        norm = math.hypot(nx, ny)
        nx, ny = nx / norm, ny / norm
        if nx * (mx - x0) + ny * (my - y0) > 0:  # make the normal point outward
            nx, ny = -nx, -ny
        e = (x - x0) * nx + (y - y0) * ny
        d = e if d is None else torch.maximum(d, e)
    return d


def _select(index, builders):
    """Per-image choice among shape variants: ``builders[k]()`` gives variant ``k`` as (B, H, W).

    Only the variants that occur in ``index`` (a (B,) long tensor) are computed; images are stored
    grouped by class, so a rendering chunk usually needs one variant only.
    """
    present = torch.unique(index).tolist()
    out = builders[present[0]]()
    for k in present[1:]:
        out = torch.where((index == k)[:, None, None], builders[k](), out)
    return out


def _tail_sdf(x, y, shape):
    return _select(shape, [
        lambda: _polygon(x, y, [(-0.45, -0.10), (-1.30, -0.48), (-1.30, 0.38), (-0.45, 0.10)]),  # fan
        lambda: _polygon(x, y, [(-0.45, -0.13), (-1.42, 0.0), (-0.45, 0.13)]),  # pointed
        lambda: torch.minimum(  # forked
            _polygon(x, y, [(-0.45, -0.13), (-1.32, -0.42), (-1.05, -0.02), (-0.45, 0.02)]),
            _polygon(x, y, [(-0.45, -0.02), (-1.05, 0.02), (-1.32, 0.42), (-0.45, 0.13)])),
        lambda: _box(x, y, -0.85, 0.0, 0.40, 0.19),  # square
    ])


def _beak_sdf(x, y, shape):
    return _select(shape, [
        lambda: _polygon(x, y, [(0.80, -0.52), (1.08, -0.42), (0.80, -0.33)]),  # short
        lambda: _polygon(x, y, [(0.80, -0.49), (1.34, -0.42), (0.80, -0.36)]),  # long
        lambda: _polygon(x, y, [(0.78, -0.60), (1.12, -0.40), (0.78, -0.24)]),  # wide
    ])


def _legs_sdf(x, y):
    d = _box(x, y, -0.14, 0.55, 0.05, 0.24)
    d = torch.minimum(d, _box(x, y, 0.16, 0.55, 0.05, 0.24))
    d = torch.minimum(d, _box(x, y, -0.08, 0.78, 0.11, 0.035))
    return torch.minimum(d, _box(x, y, 0.22, 0.78, 0.11, 0.035))


def _wing_ink(x, y, pattern):
    """Pattern coverage in [0, 1] inside the wing, in wing-local coordinates."""
    c, s = math.cos(-0.2), math.sin(-0.2)
    qx = c * (x + 0.10) + s * (y + 0.06)
    qy = -s * (x + 0.10) + c * (y + 0.06)

    def spots():
        fx = torch.remainder(qx, 0.22) - 0.11
        fy = torch.remainder(qy, 0.22) - 0.11
        return ((0.065 - torch.sqrt(fx * fx + fy * fy)) * 30).clamp(0, 1)

    return _select(pattern, [
        lambda: torch.zeros_like(qx),  # solid
        lambda: (torch.sin(qx * (2 * math.pi / 0.24)) * 3.0).clamp(0, 1),  # stripes
        spots,
        lambda: (torch.floor(qx / 0.2) + torch.floor(qy / 0.2)).remainder(2),  # checker
    ])


def _hash_noise(size: int, seeds: torch.Tensor) -> torch.Tensor:
    """Per-image white noise in [-0.5, 0.5) from a per-image seed, independent of batching."""
    i = torch.arange(size, dtype=torch.float32)
    xy = i[None, :] * 12.9898 + i[:, None] * 78.233  # (H, W)
    v = torch.sin(xy[None] * 0.731 + seeds[:, None, None]) * 43758.5453
    return v - torch.floor(v) - 0.5


def _render(nz: dict[str, torch.Tensor], attrs: torch.Tensor, size: int):
    """Render a batch. ``nz`` holds (B, ...) float32 nuisance tensors, ``attrs`` (B, A) long.

    Returns images (B, 3, S, S) float32 in [0, 1] and the part map (B, S, S) uint8.
    """
    B = attrs.shape[0]
    u = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    X = u[None, None, :].expand(1, size, size)
    Y = u[None, :, None].expand(1, size, size)

    # background: colour + linear gradient + clutter shapes (image coordinates)
    ga = nz["bg_grad_angle"][:, None, None]
    grad = (X * torch.cos(ga) + Y * torch.sin(ga) - 0.5) * nz["bg_grad_strength"][:, None, None]
    canvas = nz["bg_color"][:, :, None, None] + grad[:, None]
    for m in range(_N_CLUTTER):
        ccx = nz["clutter_center"][:, m, 0, None, None]
        ccy = nz["clutter_center"][:, m, 1, None, None]
        hx = nz["clutter_size"][:, m, 0, None, None]
        hy = nz["clutter_size"][:, m, 1, None, None]
        a = nz["clutter_angle"][:, m, None, None]
        dx, dy = X - ccx, Y - ccy
        qx = torch.cos(a) * dx + torch.sin(a) * dy
        qy = -torch.sin(a) * dx + torch.cos(a) * dy
        ell = (qx / hx) ** 2 + (qy / hy) ** 2 <= 1.0
        box = (qx.abs() <= hx) & (qy.abs() <= hy)
        alpha = torch.where(nz["clutter_box"][:, m, None, None] > 0.5, box, ell).float()[:, None]
        canvas = canvas + alpha * (nz["clutter_color"][:, m, :, None, None] - canvas)

    # object frame
    cx = nz["center"][:, 0, None, None]
    cy = nz["center"][:, 1, None, None]
    s = nz["scale"][:, None, None]
    th = nz["angle"][:, None, None]
    dx, dy = X - cx, Y - cy
    ox = (torch.cos(th) * dx + torch.sin(th) * dy) / s * nz["flip"][:, None, None]
    oy = (-torch.sin(th) * dx + torch.cos(th) * dy) / s
    pix = 1.0 / (size * s)  # one pixel in object units, (B, 1, 1)
    part_map = torch.zeros(B, size, size, dtype=torch.uint8)

    bright = nz["brightness"][:, None]
    jit = nz["jitter"]

    def part_colour(rgb, part):  # (B, 3)
        return ((rgb * bright) + jit[:, PART_NAMES.index(part)]).clamp(0, 1)

    def paint(d, colour, part=None):
        nonlocal canvas, part_map
        alpha = (0.5 - d / pix).clamp(0, 1)
        if colour.dim() == 2:
            colour = colour[:, :, None, None]
        canvas = canvas + alpha[:, None] * (colour - canvas)
        if part is not None:
            part_map = torch.where(alpha > 0.5, torch.tensor(PART_NAMES.index(part) + 1, dtype=torch.uint8),
                                   part_map)

    shortcut = torch.from_numpy(_SHORTCUT_RGB)
    muted = torch.from_numpy(_MUTED_RGB)
    const = lambda rgb: torch.tensor(rgb, dtype=torch.float32).expand(B, 3)  # noqa: E731

    paint(_tail_sdf(ox, oy, attrs[:, 4]), part_colour(muted[attrs[:, 5]], "tail"), "tail")
    paint(_legs_sdf(ox, oy), part_colour(const(_LEG_RGB), "legs"), "legs")
    paint(_ellipse(ox, oy, 0.0, 0.0, 0.62, 0.40), part_colour(shortcut[attrs[:, 0]], "body"), "body")
    wing = part_colour(muted[attrs[:, 2]], "wing")[:, :, None, None]
    ink = _wing_ink(ox, oy, attrs[:, 3])[:, None]
    wing_pix = wing + ink * (torch.tensor(_INK_RGB)[None, :, None, None] * bright[:, :, None, None] - wing)
    paint(_ellipse(ox, oy, -0.10, -0.06, 0.46, 0.22, rot=-0.2), wing_pix, "wing")
    paint(_circle(ox, oy, 0.62, -0.42, 0.27), part_colour(shortcut[attrs[:, 1]], "head"), "head")
    paint(_beak_sdf(ox, oy, attrs[:, 6]), part_colour(const(_BEAK_RGB), "beak"), "beak")
    paint(_circle(ox, oy, 0.72, -0.49, 0.055), const(_EYE_RGB))  # the eye stays part of the head

    canvas = canvas + 0.04 * _hash_noise(size, nz["noise_seed"])[:, None]
    return canvas.clamp(0, 1), part_map


def _boxes_from_map(part_map: torch.Tensor) -> torch.Tensor:
    """Tight object boxes (x_min, y_min, x_max, y_max) in pixels, max exclusive, from a part map."""
    obj = part_map > 0
    B, H, W = obj.shape
    cols = obj.any(1)  # (B, W)
    rows = obj.any(2)  # (B, H)
    ar_w = torch.arange(W)
    ar_h = torch.arange(H)
    big = 10 ** 6
    x0 = torch.where(cols, ar_w, big).min(1).values
    x1 = torch.where(cols, ar_w, -1).max(1).values + 1
    y0 = torch.where(rows, ar_h, big).min(1).values
    y1 = torch.where(rows, ar_h, -1).max(1).values + 1
    boxes = torch.stack([x0, y0, x1, y1], 1).float()
    boxes[~cols.any(1)] = 0.0
    return boxes


# ----------------------------------------------------------------------------------------------
# The dataset
# ----------------------------------------------------------------------------------------------
# The last few splits rendered in this process, shared (read-only) by datasets built with the same
# arguments: a chapter that builds the quick-profile splits several times renders them once.
_RENDERED: "OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]" = OrderedDict()
_RENDERED_MAX = 6

_SPLIT_ALIASES = {"seen": "seen", "train": "seen", "unseen": "unseen", "test": "unseen", "all": "all"}

_FINGERPRINT: list[str] = []


def _code_fingerprint() -> str:
    """A fingerprint of this file's source, read once per process (the code that renders the cached images)."""
    if not _FINGERPRINT:
        _FINGERPRINT.append(source_fingerprint(__file__))
    return _FINGERPRINT[0]


def generator_identity(image_size: int, images_per_class: int, seed: int = 0, num_seen: int = 50,
                       num_unseen: int = 50, unseen_groups: int = 10, design_seed: int = 0) -> str:
    """16 hex digits identifying the SynthParts images these arguments render (the arguments of
    :class:`SynthParts` and a fingerprint of this file, which renders them): SynthParts' data identity
    (:mod:`zslib.engine.data.identity`), computed without rendering anything."""
    args = (int(image_size), int(images_per_class), int(seed), int(num_seen), int(num_unseen), int(unseen_groups),
            int(design_seed))
    return hashlib.sha256(repr((args, _code_fingerprint())).encode()).hexdigest()[:16]


class SynthParts(Dataset):
    """The SynthParts image set (see the module docstring for the design).

    ``ds[i]`` is ``(image, label)``: a float tensor ``3 x S x S`` in ``[0, 1]`` (or whatever
    ``transform`` makes of it) and the **global** class id, an ``int``. Seen classes have ids
    ``0 .. num_seen-1`` and unseen ones ``num_seen .. num_seen+num_unseen-1``, so the seen split's
    labels are already ``0 .. C-1`` (ready for a classifier head) and the two splits never share an id.

    Images are stored grouped by class: image ``j`` of the ``k``-th class of the split has index
    ``k * images_per_class + j``.

    Ground truth (all aligned with the indices):

    * :attr:`labels` (N,) int64 numpy; :attr:`classes` the global ids in this split;
    * :attr:`attributes` (N, 7) int64 numpy, value indices of :data:`ATTRIBUTE_NAMES`
      (:meth:`attribute_value_names` turns them into names);
    * :attr:`part_map` (N, S, S) uint8 tensor, 0 background and ``k`` the part ``PART_NAMES[k-1]``
      as visible after occlusion; :meth:`part_masks` gives one image's boolean masks (6, S, S);
    * :attr:`boxes` (N, 4) float tensor ``(x_min, y_min, x_max, y_max)`` in pixels, max exclusive:
      the tight box of all visible object pixels;
    * :attr:`nuisances` a dict of numpy arrays (centre, scale, angle, flip, ...).

    ``lazy=None`` renders everything at construction when it fits in about 1 GiB (always in the quick
    profile: 2,000 images of 48 px take about three seconds on one core), else renders images on access.
    A split rendered whole is stored on disk by :mod:`zslib.engine.cache` (keyed by its arguments and this
    file's source, checksummed), so later processes load it in milliseconds; the last few splits are
    also kept per process and shared (treat the tensors as read-only).
    :meth:`tensors` returns the whole split as one tensor.
    """

    def __init__(self, split: str = "seen", image_size: int = 64, images_per_class: int = 40,
                 seed: int = 0, transform=None, *, num_seen: int = 50, num_unseen: int = 50,
                 unseen_groups: int = 10, design_seed: int = 0, lazy: bool | None = None,
                 chunk_pixels: int = 2 ** 16):
        key = str(split).lower()
        if key not in _SPLIT_ALIASES:
            raise ValueError(f"unknown SynthParts split {split!r}; use 'seen' (= 'train'), "
                             "'unseen' (= 'test') or 'all'")
        if not (isinstance(image_size, (int, np.integer)) and 16 <= int(image_size) <= 512):
            raise ValueError(f"image_size must be an integer between 16 and 512 (32-224 is the "
                             f"tested range), got {image_size!r}")
        if int(images_per_class) < 1:
            raise ValueError(f"images_per_class must be >= 1, got {images_per_class!r}")
        self.split = _SPLIT_ALIASES[key]
        self.image_size = int(image_size)
        self.images_per_class = int(images_per_class)
        self.seed = int(seed)
        self.transform = transform
        self.design = design_classes(num_seen, num_unseen, unseen_groups, design_seed)
        d = self.design
        if self.split == "seen":
            self.classes = np.arange(d.num_seen, dtype=np.int64)
        elif self.split == "unseen":
            self.classes = np.arange(d.num_seen, d.num_classes, dtype=np.int64)
        else:
            self.classes = np.arange(d.num_classes, dtype=np.int64)
        n = self.images_per_class
        self.labels = np.repeat(self.classes, n).astype(np.int64)
        self.attributes = d.class_attributes[self.labels].copy()
        self.class_attributes = d.class_attributes[self.classes].copy()
        per_class = [_sample_nuisances(int(c), n, self.seed) for c in self.classes]
        self.nuisances = {k: np.concatenate([p[k] for p in per_class]) for k in per_class[0]}
        self._chunk = max(1, int(chunk_pixels) // (self.image_size ** 2))
        self._cache_key = (self.split, self.image_size, self.images_per_class, self.seed, d.num_seen,
                           d.num_unseen, d.unseen_groups, d.design_seed)
        total_bytes = len(self.labels) * self.image_size ** 2 * 4
        self.lazy = bool(lazy) if lazy is not None else total_bytes > 2 ** 30
        self._images: torch.Tensor | None = None
        self._part_map: torch.Tensor | None = None
        self._boxes: torch.Tensor | None = None
        if not self.lazy:
            self._render_all()

    # -- facts --------------------------------------------------------------------------------
    attribute_names = ATTRIBUTE_NAMES
    part_names = PART_NAMES
    shortcut_attributes = SHORTCUT_ATTRIBUTES
    attribute_values = {a[0]: a[3] for a in ATTRIBUTES}

    @property
    def num_classes(self) -> int:
        """Number of classes in this split (the labels themselves are global ids)."""
        return len(self.classes)

    @property
    def num_seen(self) -> int:
        return self.design.num_seen

    @property
    def seen_mask(self) -> np.ndarray:
        """(N,) bool: whether each image belongs to a seen class."""
        return self.labels < self.design.num_seen

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return (f"SynthParts(split={self.split!r}, image_size={self.image_size}, "
                f"images_per_class={self.images_per_class}, classes={self.num_classes}, "
                f"images={len(self)}, seed={self.seed})")

    # -- rendering ------------------------------------------------------------------------------
    def _nuisance_tensors(self, idx: np.ndarray) -> dict[str, torch.Tensor]:
        return {k: torch.as_tensor(v[idx], dtype=torch.float32) for k, v in self.nuisances.items()}

    def render(self, indices) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Render the given images afresh: (uint8 images (B,3,S,S), part map (B,S,S), boxes (B,4))."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"indices must lie in [0, {len(self)}), got {idx.min()}..{idx.max()}")
        s = self.image_size
        images = torch.empty(len(idx), 3, s, s, dtype=torch.uint8)
        part_map = torch.empty(len(idx), s, s, dtype=torch.uint8)
        threads = torch.get_num_threads()
        # small chunks stay in cache; one thread avoids OpenMP overhead on tiny tensors
        torch.set_num_threads(1)
        try:
            for start in range(0, len(idx), self._chunk):
                part = idx[start:start + self._chunk]
                img, pm = _render(self._nuisance_tensors(part),
                                  torch.from_numpy(self.attributes[part]), s)
                images[start:start + len(part)] = (img * 255).round_()
                part_map[start:start + len(part)] = pm
            boxes = _boxes_from_map(part_map)
        finally:
            torch.set_num_threads(threads)
        return images, part_map, boxes

    def _render_all(self):
        key = self._cache_key
        if key in _RENDERED:
            _RENDERED.move_to_end(key)
        else:
            _RENDERED[key] = self._from_disk_or_render()
            while len(_RENDERED) > _RENDERED_MAX:
                _RENDERED.popitem(last=False)
        self._images, self._part_map, self._boxes = _RENDERED[key]

    def _from_disk_or_render(self):
        """The whole split from the on-disk cache (:mod:`zslib.engine.cache`), keyed by the split's arguments
        and a fingerprint of this file, or rendered now and stored there for the next process."""
        names = ("split", "image_size", "images_per_class", "seed", "num_seen", "num_unseen", "unseen_groups",
                 "design_seed")
        entry = ArrayCache("synthparts", {**dict(zip(names, self._cache_key)), "code": _code_fingerprint()})
        stored = entry.load()
        if stored is not None:
            return (torch.from_numpy(stored["images"]), torch.from_numpy(stored["part_map"]),
                    torch.from_numpy(stored["boxes"]))
        images, part_map, boxes = self.render(np.arange(len(self)))
        entry.save({"images": images.numpy(), "part_map": part_map.numpy(), "boxes": boxes.numpy()})
        return images, part_map, boxes

    def _ground_truth_maps(self):
        if self._part_map is None:  # lazy: render once for the masks, keep the masks only
            _, self._part_map, self._boxes = self.render(np.arange(len(self)))
        return self._part_map, self._boxes

    # -- access ---------------------------------------------------------------------------------
    def image_uint8(self, i: int) -> torch.Tensor:
        """Image ``i`` as a uint8 tensor (3, S, S), no transform."""
        i = self._check_index(i)
        if self._images is not None:
            return self._images[i]
        return self.render([i])[0][0]

    def __getitem__(self, i):
        i = self._check_index(i)
        img = self.image_uint8(i).float().div_(255.0)
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[i])

    def _check_index(self, i) -> int:
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"index {i} out of range for a SynthParts split of {len(self)} images")
        return i

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole split: images (N, 3, S, S) float32 in [0, 1] (no transform) and labels (N,) int64."""
        images = self._images if self._images is not None else self.render(np.arange(len(self)))[0]
        return images.float().div_(255.0), torch.from_numpy(self.labels.copy())

    @property
    def part_map(self) -> torch.Tensor:
        """(N, S, S) uint8: 0 background, ``k`` = visible pixels of part ``PART_NAMES[k-1]``."""
        return self._ground_truth_maps()[0]

    @property
    def boxes(self) -> torch.Tensor:
        """(N, 4) float32 object boxes ``(x_min, y_min, x_max, y_max)`` in pixels, max exclusive."""
        return self._ground_truth_maps()[1]

    def part_masks(self, i: int) -> torch.Tensor:
        """(6, S, S) bool masks of the visible parts of image ``i``, in the order of ``PART_NAMES``."""
        pm = self.part_map[self._check_index(i)]
        return pm[None] == torch.arange(1, len(PART_NAMES) + 1, dtype=torch.uint8)[:, None, None]

    def object_masks(self) -> torch.Tensor:
        """(N, S, S) bool: pixels of the object (any part)."""
        return self.part_map > 0

    def attribute_value_names(self, i: int) -> dict[str, str]:
        """The attribute values of image ``i`` by name, e.g. ``{'body_color': 'red', ...}``."""
        vals = self.attributes[self._check_index(i)]
        return {a[0]: a[3][v] for a, v in zip(ATTRIBUTES, vals)}

    def ground_truth(self, i: int) -> dict:
        """Everything known about image ``i``: label, box, part masks, attributes, nuisances."""
        i = self._check_index(i)
        return {
            "label": int(self.labels[i]),
            "seen": bool(self.seen_mask[i]),
            "box": self.boxes[i].clone(),
            "part_masks": self.part_masks(i),
            "attributes": self.attribute_value_names(i),
            "nuisances": {k: v[i] for k, v in self.nuisances.items()},
        }


# ----------------------------------------------------------------------------------------------
# The shortcut probe
# ----------------------------------------------------------------------------------------------
def probe_features(ds: SynthParts, attributes=SHORTCUT_ATTRIBUTES) -> np.ndarray:
    """Per-image features that carry only the given attributes, as a network could read them.

    A colour attribute contributes the *measured* mean RGB of its part's visible pixels (from the
    rendered image and the ground-truth part mask, eroded by one pixel so that edges blended with a
    neighbouring part do not leak that part's attributes; brightness, jitter and noise included); a shape
    or pattern attribute contributes the one-hot of its ground-truth value.
    """
    unknown = [a for a in attributes if a not in ATTRIBUTE_NAMES]
    if unknown:
        raise ValueError(f"unknown attributes {unknown}; choose from {ATTRIBUTE_NAMES}")
    images, _ = ds.tensors()
    pm = ds.part_map
    cols = []

    def erode(mask):  # keep pixels whose 4 neighbours are inside too: no colour blended from a neighbour
        inner = mask.clone()
        inner[:, 1:] *= mask[:, :-1]
        inner[:, :-1] *= mask[:, 1:]
        inner[:, :, 1:] *= mask[:, :, :-1]
        inner[:, :, :-1] *= mask[:, :, 1:]
        return torch.where(inner.sum((1, 2), keepdim=True) > 0, inner, mask)

    for name in attributes:
        a = ATTRIBUTE_NAMES.index(name)
        _, part, kind, values = ATTRIBUTES[a]
        if kind == "color":
            mask = erode((pm == PART_NAMES.index(part) + 1).float())[:, None]  # (N,1,S,S)
            area = mask.sum((2, 3))
            mean = (images * mask).sum((2, 3)) / area.clamp(min=1)
            cols.append(mean.numpy())
            cols.append((area == 0).float().numpy())  # part hidden: flagged, not guessed
        else:
            cols.append(np.eye(len(values), dtype=np.float32)[ds.attributes[:, a]])
    return np.concatenate(cols, 1).astype(np.float64)


@dataclass(frozen=True)
class ProbeResult:
    """Held-out accuracy of a linear probe on the seen and on the unseen classes."""

    attributes: tuple[str, ...]
    seen_accuracy: float
    unseen_accuracy: float
    seen_chance: float
    unseen_chance: float
    n_train: int
    n_test: int

    def __str__(self) -> str:
        return (f"probe on {', '.join(self.attributes)}: seen {self.seen_accuracy:.3f} "
                f"(chance {self.seen_chance:.3f}), unseen {self.unseen_accuracy:.3f} "
                f"(chance {self.unseen_chance:.3f})")


def _probe_one(ds: SynthParts, attributes, train_fraction: float, C: float) -> tuple[float, int, int]:
    X = probe_features(ds, attributes)
    y = ds.labels
    j = np.arange(len(y)) % ds.images_per_class  # images are grouped by class
    n_tr = max(1, int(round(train_fraction * ds.images_per_class)))
    if n_tr >= ds.images_per_class:
        raise ValueError("the probe needs at least 2 images per class (one to fit, one to test)")
    tr, te = j < n_tr, j >= n_tr

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=3000))
    with one_thread():  # a small problem: BLAS threads only add overhead (and spin when shared)
        clf.fit(X[tr], y[tr])
        acc = float((clf.predict(X[te]) == y[te]).mean())
    return acc, int(tr.sum()), int(te.sum())


def shortcut_probe(seen: SynthParts | None = None, unseen: SynthParts | None = None,
                   attributes=SHORTCUT_ATTRIBUTES, *, train_fraction: float = 0.5,
                   C: float = 1.0) -> ProbeResult:
    """Measure the designed shortcut with a linear (multinomial logistic-regression) probe.

    Within each split the probe is fitted on the first ``train_fraction`` of every class's images and
    scored on the rest, using only :func:`probe_features` of ``attributes``. With the default
    (the shortcut attributes) it separates the seen classes almost perfectly and the unseen classes
    poorly (their 50 classes share 10 colour pairs); with ``attributes=ATTRIBUTE_NAMES`` it separates
    both. ``seen`` / ``unseen`` default to 20 images per class at 48 px.
    """
    seen = seen if seen is not None else SynthParts("seen", 48, 20)
    unseen = unseen if unseen is not None else SynthParts("unseen", 48, 20)
    attributes = tuple(attributes)
    acc_s, n1, m1 = _probe_one(seen, attributes, train_fraction, C)
    acc_u, n2, m2 = _probe_one(unseen, attributes, train_fraction, C)
    return ProbeResult(attributes, acc_s, acc_u, 1.0 / seen.num_classes, 1.0 / unseen.num_classes,
                       n1 + n2, m1 + m2)
