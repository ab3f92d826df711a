"""Mixed precision on CUDA: bfloat16 where the GPU computes it natively, float16 with a gradient scaler elsewhere.

Autocast runs the convolutions and matrix products of a step in 16-bit floats (tensor cores, half the
memory traffic) and keeps reductions and losses in float32. The two 16-bit formats differ in range:

* ``bfloat16`` has float32's 8-bit exponent, so gradients neither underflow nor overflow and no loss
  scaling is needed. Ampere and newer GPUs (compute capability 8.0 and up: A100, L4, H100) compute it
  natively; older ones (the T4 of a free Colab session) would only emulate it, slowly.
* ``float16`` has a 5-bit exponent: small gradients underflow to zero unless the loss is multiplied by a
  large factor before ``backward`` and the gradients divided by it before the optimizer step, which is what
  :class:`torch.amp.GradScaler` does (skipping a step whose gradients overflowed, and adapting the factor).

:class:`Precision` makes that choice once per run; the trainer asks it for the autocast context and for one
gradient scaler per phase. On the CPU mixed precision is never used: every step is computed in float32,
exactly as without this module.
"""
from __future__ import annotations

import torch

__all__ = ["Precision", "amp_dtype"]


def amp_dtype(device) -> torch.dtype:
    """The 16-bit format autocast should use on ``device``: ``torch.bfloat16`` on a CUDA GPU that computes
    it natively (compute capability 8.0 or more, or ROCm), else ``torch.float16``."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        with torch.cuda.device(device):
            if torch.cuda.is_bf16_supported(including_emulation=False):
                return torch.bfloat16
    return torch.float16


class Precision:
    """The arithmetic of a run: float32, or autocast to ``dtype`` (with a gradient scaler for float16).

    ``Precision(device, amp)``: ``amp`` ``None`` means on for CUDA; mixed precision is never used on the
    CPU. ``dtype`` overrides the automatic choice of :func:`amp_dtype` (the tests use it to run the
    bfloat16 path on the CPU, where ``torch.autocast`` supports it).
    """

    def __init__(self, device, amp: bool | None = None, dtype: torch.dtype | None = None):
        self.device = torch.device(device)
        if dtype is None:
            self.enabled = (self.device.type == "cuda") if amp is None else (bool(amp) and self.device.type == "cuda")
            self.dtype = amp_dtype(self.device) if self.enabled else torch.float16
        else:
            if dtype not in (torch.float16, torch.bfloat16):
                raise ValueError(f"mixed precision runs in torch.float16 or torch.bfloat16, not {dtype}")
            self.enabled, self.dtype = amp is not False, dtype

    @property
    def name(self) -> str:
        """``"float32"``, ``"bfloat16"`` or ``"float16"`` (what a result's provenance records)."""
        return str(self.dtype).replace("torch.", "") if self.enabled else "float32"

    @property
    def scales_loss(self) -> bool:
        """Whether a gradient scaler is needed: float16 only."""
        return self.enabled and self.dtype == torch.float16

    def autocast(self):
        """The context a phase's forward pass runs in (when disabled, it also turns off an autocast the
        caller may have opened: a run in float32 is float32 throughout)."""
        return torch.autocast(device_type=self.device.type, dtype=self.dtype, enabled=self.enabled)

    def scaler(self) -> torch.amp.GradScaler:
        """A gradient scaler for one phase; a disabled one (a pass-through) unless the run uses float16."""
        device_type = self.device.type if self.device.type in ("cuda", "cpu") else "cuda"
        return torch.amp.GradScaler(device_type, enabled=self.scales_loss)

    def __repr__(self):
        return f"Precision({self.name} on {self.device})"
