"""Run profiles: one code path, three sizes.

Every chapter asks the active profile for its sizes instead of hard-coding them:

* ``quick`` (the default): the procedurally generated SynthParts image set, a small CNN, the CPU.
  Each chapter executes in at most three minutes on a 2-core machine.
* ``real``: real photographs on a laptop CPU. Oxford Flowers-102 with the zero-shot split of Adapt-Adv
  (classes 1-51 seen, 52-102 unseen) and an ImageNet-pretrained EfficientNet-Lite0 kept frozen: its maps
  are computed once per image and cached on disk (:mod:`zslib.engine.data.features`), and what trains is the embedding
  head and each method's own modules. A run takes seconds after a one-off cache build of a few minutes.
* ``full``: the real benchmark datasets, an ImageNet-pretrained backbone fine-tuned end to end and the
  papers' hyperparameters, on CUDA (for example a Colab GPU).

The profile is chosen by the environment variable ``ZS_PROFILE`` (``quick``, ``real`` or ``full``) or by
:func:`set_profile`. A chapter adapts a profile with :meth:`Profile.replace`, never by editing it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from zslib.engine.choice import TEST_SEEDS
from zslib.engine.fields import ProfileFields, names

__all__ = ["Profile", "PROFILES", "ADAPTED_REAL", "get_profile", "set_profile", "device", "repository_root",
           "resolve_folder", "downloads_allowed", "DOWNLOAD_ENV"]

DOWNLOAD_ENV = "ZS_DOWNLOAD"  # "1": a missing dataset or pretrained weights file may be downloaded


#: What a profile may leave out, and the value it then has.
_PROFILE_DEFAULTS = {"objective_lr": None, "schedule": None, "eval_batch_size": 256, "feature_stages": (),
                     "image_cache": False}


@dataclass(frozen=True, kw_only=True)
class Profile(ProfileFields):
    """The sizes a chapter needs: the fields of :class:`~zslib.engine.fields.ProfileFields` (the data, the network,
    the training's length and rates: every field a config takes from its profile), a ``name`` and the ``seeds`` of
    repeated runs (confidence intervals). All plain values, so a profile prints and serializes."""

    name: str
    seeds: tuple[int, ...]

    def __post_init__(self):
        for key in names(ProfileFields):
            if getattr(self, key) is None:
                if key not in _PROFILE_DEFAULTS:
                    raise TypeError(f"profile {self.name!r} sets no {key}")
                object.__setattr__(self, key, _PROFILE_DEFAULTS[key])

    @property
    def batch_size(self) -> int:
        return self.batch_classes * self.batch_per_class


PROFILES: dict[str, Profile] = {
    # The quick recipe (its times and numbers: the README): 48-px SynthParts, a narrow SmallCNN (widths 16-128)
    # trained from scratch, so the head needs no larger learning rate than the rest; 300 steps of Adam at 2e-3 leave
    # unseen Recall@1 far above chance.
    "quick": Profile(
        name="quick",
        dataset="synthparts",
        image_size=48,
        resize_size=54,
        backbone="smallcnn",
        backbone_params={"widths": [16, 32, 64, 128]},
        pretrained=False,
        embedding_dim=64,
        batch_classes=16,
        batch_per_class=4,
        iterations=300,
        eval_every=100,
        lr=2e-3,
        new_layer_mult=1.0,
        weight_decay=5e-4,
        num_workers=0,
        amp=False,
        seeds=(0, 1, 2),
        synth_images_per_class=40,
    ),
    # The papers' common setting (CML, DeML): GoogLeNet / BN-Inception, 224 px crops of 256 px
    # resizes, batch 128 = 64 classes x 2 images, Adam 1e-5 with weight decay 2e-4, embedding 512.
    "full": Profile(
        name="full",
        dataset="cub200",
        image_size=224,
        resize_size=256,
        backbone="googlenet",
        backbone_params={},
        pretrained=True,
        embedding_dim=512,
        batch_classes=64,
        batch_per_class=2,
        iterations=5000,
        eval_every=500,
        lr=1e-5,
        new_layer_mult=10.0,
        weight_decay=2e-4,
        num_workers=4,
        amp=True,
        seeds=(0,),
        synth_images_per_class=100,
        image_cache=True,  # decode each JPEG once: a GPU outruns the decoding of full-size photos
    ),
}
# The real recipe: a frozen ImageNet EfficientNet-Lite0 at 224 px (ImageNet's resize-256, centre-crop-224), its
# maps cached once, and a trained 512-d embedding head, 16 classes x 4 images per batch, five seeds. The learning
# rate and length were chosen with the triplet loss on a class-disjoint validation split of the seen classes (the
# numbers: the README).
PROFILES["real"] = Profile(
    name="real",
    dataset="flowers102",
    image_size=224,
    resize_size=256,
    backbone="efficientnet_lite0",
    backbone_params={},
    pretrained=True,
    embedding_dim=512,
    batch_classes=16,
    batch_per_class=4,
    iterations=200,
    eval_every=50,
    lr=1e-4,
    new_layer_mult=1.0,
    weight_decay=0.0,
    num_workers=0,
    amp=False,
    seeds=TEST_SEEDS,
    synth_images_per_class=40,
    feature_stages=("block4", "block5", "head"),
)

#: The adapted regime of the real profile, as Config overrides (``Config.from_profile("real", **ADAPTED_REAL)``): the
#: last MBConv block and the 1x1 head convolution of EfficientNet-Lite0 (``block6``, ``head``, with their
#: BatchNorms) train from the ImageNet weights at the profile's rate (1e-4, like the embedding head) on a two-view
#: cache of the ``block5`` maps that enter them (:func:`zslib.engine.data.features.view_cache`: centre crop and
#: its mirror image, float16, 294 MB), BatchNorm with the ImageNet statistics (``train_bn="frozen"``; its scale
#: and shift train). One evaluation at the end (``eval_every`` = the 200 steps): no stopping step is read from a
#: curve (its cost: the README). Whether the stages should move at all, and how fast, is checked on validation classes by
#: :mod:`zslib.analysis.adaptation` (the frozen network is "off" there).
ADAPTED_REAL = {"train_stages": ("block6", "head"), "eval_every": 200}

_active: Profile | None = None


def _from_env() -> Profile:
    name = os.environ.get("ZS_PROFILE", "quick").strip().lower() or "quick"
    if name not in PROFILES:
        raise ValueError(
            f"ZS_PROFILE={name!r} is not a known profile; use one of {sorted(PROFILES)} "
            "(for example `export ZS_PROFILE=quick`)."
        )
    return PROFILES[name]


def get_profile() -> Profile:
    """The active profile: the one last passed to :func:`set_profile`, else ``$ZS_PROFILE``, else quick."""
    return _active if _active is not None else _from_env()


def set_profile(profile: str | Profile | None) -> Profile:
    """Make ``profile`` (a name, a :class:`Profile`, or ``None`` to follow ``$ZS_PROFILE``) active."""
    global _active
    if profile is None:
        _active = None
        return get_profile()
    if isinstance(profile, str):
        key = profile.strip().lower()
        if key not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; use one of {sorted(PROFILES)}")
        profile = PROFILES[key]
    if not isinstance(profile, Profile):
        raise TypeError(f"expected a profile name or a Profile, got {type(profile).__name__}")
    _active = profile
    return profile


def device(prefer: str | None = None):
    """The device to compute on: ``$ZS_DEVICE`` or ``prefer`` if given, else CUDA when present, else CPU."""
    import torch  # `import zslib` imports this module: it stays free of torch

    choice = prefer or os.environ.get("ZS_DEVICE")
    if choice:
        source = f"device {choice!r}" if prefer else f"ZS_DEVICE={choice!r}"
        try:
            dev = torch.device(choice)
        except (RuntimeError, ValueError, TypeError):
            raise ValueError(f"{source} is not a device; use cpu, cuda or cuda:N (or unset ZS_DEVICE)") from None
        if dev.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"{source} is not a device zslib computes on; use cpu, cuda or cuda:N "
                             "(or unset ZS_DEVICE)")
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                f"device {choice!r} was requested but CUDA is not available here; "
                "unset ZS_DEVICE or choose 'cpu'."
            )
        return dev
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def repository_root() -> Path | None:
    """The book's source checkout zslib was imported from, or ``None`` for an installed package.

    Default folders that belong to a checkout (``data/``, ``results/``) are resolved against it.
    """
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() and (here / "zslib").is_dir() else None


def resolve_folder(path, env_var: str, in_checkout: str | None, fallback: str | os.PathLike) -> Path:
    """A default folder by one rule: ``path`` if given, else ``$env_var``, else ``<checkout>/in_checkout``
    when zslib runs from the book's repository (and ``in_checkout`` is not ``None``), else ``fallback``."""
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    env = os.environ.get(env_var, "").strip()
    if env:
        return Path(env).expanduser()
    repo = repository_root() if in_checkout is not None else None
    return repo / in_checkout if repo is not None else Path(fallback).expanduser()


def downloads_allowed(download: bool | None = None) -> bool:
    """Whether a missing dataset or weights file may be downloaded: ``download`` when given, else
    ``$ZS_DOWNLOAD`` (``1``/``true``/``yes``/``on`` allow; unset, empty, ``0``/``false``/``no``/``off`` do
    not). The chapters' Colab setup cell sets ``ZS_DOWNLOAD=1``; tests never download."""
    if download is not None:
        return bool(download)
    value = os.environ.get(DOWNLOAD_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"${DOWNLOAD_ENV}={value!r} is not understood; set it to 1 (download missing datasets and "
                     "weights files) or 0 (never download).")
