"""A tiny fabricated Oxford Flowers-102 tree in the official layout, for ``python -m zslib finetune --smoke``.

``jpg/image_00001.jpg ...``, ``imagelabels.mat`` (a ``1 x n`` row of class ids 1-102) and ``setid.mat``, as the
official files unpack: the smoke run reads it through the same loader, image cache and splits as the real
dataset (classes 1-51 seen, 52-102 unseen). The images are random colours, 24 x 18 px; nothing is learned
from them, they only exercise the path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

__all__ = ["fabricate_flowers"]


def fabricate_flowers(root, seen: int = 8, unseen: int = 6, per_class: int = 5, seed: int = 0) -> Path:
    """Write the tree under ``root/flowers102`` (if it is not there yet) and return ``root``. ``seen`` classes
    from 1 and ``unseen`` from 52, ``per_class`` images each: enough for Recall@8 on the validation and unseen
    splits (each needs at least 9 images)."""
    folder = Path(root) / "flowers102"
    labels = [c for c in range(1, seen + 1) for _ in range(per_class)]
    labels += [c for c in range(52, 52 + unseen) for _ in range(per_class)]
    if (folder / "imagelabels.mat").is_file():
        return Path(root)
    rng = np.random.default_rng(seed)
    (folder / "jpg").mkdir(parents=True, exist_ok=True)
    for i in range(1, len(labels) + 1):
        pixels = (rng.uniform(0, 1, (18, 24, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / "jpg" / f"image_{i:05d}.jpg", quality=90)
    scipy.io.savemat(folder / "setid.mat", {"trnid": np.array([[1]]), "valid": np.array([[2]]),
                                            "tstid": np.arange(3, len(labels) + 1)[None]})
    scipy.io.savemat(folder / "imagelabels.mat", {"labels": np.array(labels, dtype=np.uint8)[None]})  # last: marks done
    return Path(root)
