"""What a training run leaves behind: its loss terms per step and its evaluations (JSON-friendly)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["History"]


@dataclass
class History:
    """Loss terms per step and evaluation metrics per evaluation step.

    ``losses`` is a list of rows ``{"step": t, "total": ..., "<term>": ...}`` (one every ``log_every``
    steps); ``evals`` a list of rows ``{"step": t, "<set>": {"R@1": ..., ...}, ...}``. ``elapsed`` is
    the training wall time in seconds and ``data_seconds`` the part of it the loop spent waiting for
    batches (loading, and copying them to the device); neither is compared by ``==`` (two identical runs
    differ in them).
    """

    losses: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    elapsed: float = field(default=0.0, compare=False)
    data_seconds: float = field(default=0.0, compare=False)

    def loss_curve(self, term: str = "total") -> tuple[list[int], list[float]]:
        """Steps and values of one loss term (``"total"`` is the sum of the terms)."""
        rows = [r for r in self.losses if term in r]
        if not rows and self.losses:
            terms = sorted(k for k in self.losses[0] if k != "step")
            raise KeyError(f"no loss term {term!r} in this history; it has {terms}")
        return [r["step"] for r in rows], [r[term] for r in rows]

    def metric_curve(self, split: str, metric: str = "R@1") -> tuple[list[int], list[float]]:
        """Steps and values of one metric on one evaluation set, e.g. ``("unseen", "R@1")``."""
        rows = [r for r in self.evals if split in r]
        if not rows and self.evals:
            sets = sorted(k for k in self.evals[0] if k != "step")
            raise KeyError(f"no evaluation set {split!r} in this history; it has {sets}")
        missing = [r["step"] for r in rows if metric not in r[split]]
        if missing:
            raise KeyError(f"metric {metric!r} was not computed on {split!r}; it has {sorted(rows[0][split])}")
        return [r["step"] for r in rows], [r[split][metric] for r in rows]

    @property
    def splits(self) -> list[str]:
        """Names of the evaluation sets."""
        return sorted({k for r in self.evals for k in r if k != "step"})

    def last(self, split: str) -> dict[str, float]:
        """Metrics of the last evaluation of ``split`` (an empty dict when it was never evaluated)."""
        for r in reversed(self.evals):
            if split in r:
                return dict(r[split])
        return {}

    @property
    def data_share(self) -> float:
        """The share of the training time spent waiting for batches (0 when nothing was timed)."""
        return self.data_seconds / self.elapsed if self.elapsed > 0 else 0.0

    def to_dict(self) -> dict:
        return {"losses": self.losses, "evals": self.evals, "elapsed": self.elapsed, "data_seconds": self.data_seconds}

    @classmethod
    def from_dict(cls, d: Mapping) -> "History":
        return cls(losses=list(d.get("losses", [])), evals=list(d.get("evals", [])),
                   elapsed=float(d.get("elapsed", 0.0)), data_seconds=float(d.get("data_seconds", 0.0)))
