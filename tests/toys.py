"""In-memory toy datasets for the trainer and method tests (no files, no downloads)."""
from __future__ import annotations

import numpy as np
import torch


class Blocks(torch.utils.data.Dataset):
    """``n_classes`` classes of ``per_class`` 3x2x2 "images": one random centre per class plus small noise,
    so a few training steps can separate them; the same tensors for every instance (seeded)."""

    def __init__(self, n_classes=4, per_class=6):
        g = torch.Generator().manual_seed(0)
        self.labels = np.repeat(np.arange(n_classes), per_class)
        self.x = torch.randn(n_classes, 3, 2, 2, generator=g)[self.labels] + 0.3 * torch.randn(
            len(self.labels), 3, 2, 2, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], int(self.labels[i])
