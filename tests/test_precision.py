"""Mixed precision (zslib.engine.train.precision): which 16-bit format a device gets, and that each works in a step.

No GPU here: the choice is checked against a stand-in for ``torch.cuda`` (the capability answer is what
decides), and the two formats are run on the CPU, where ``torch.autocast`` supports both, against a
float32 step on the same batch.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from zslib.engine.train import Precision
from zslib.engine.train.precision import amp_dtype


def test_the_cpu_always_computes_in_float32():
    for amp in (None, True, False):
        p = Precision("cpu", amp)
        assert not p.enabled and p.name == "float32" and not p.scales_loss
        assert not p.scaler().is_enabled()
        with p.autocast():
            assert not torch.is_autocast_enabled("cpu")
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


@pytest.mark.parametrize("native_bf16, want", [(True, torch.bfloat16), (False, torch.float16)])
def test_cuda_gets_bfloat16_only_where_the_gpu_computes_it(monkeypatch, native_bf16, want):
    asked = []

    def is_bf16_supported(including_emulation=True):
        asked.append(including_emulation)
        return native_bf16 or including_emulation  # an old GPU "supports" bf16 only by emulation

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    assert amp_dtype("cuda") == want and asked == [False]  # emulation does not count
    p = Precision("cuda")
    assert p.enabled and p.dtype == want and p.name == str(want).replace("torch.", "")
    assert p.scales_loss == (want == torch.float16)  # a gradient scaler for float16 only
    assert not Precision("cuda", amp=False).enabled
    assert amp_dtype("cpu") == torch.float16 and not Precision("cpu").enabled


def _step(precision: Precision | None):
    """One training step of a small network: the loss and the gradients that reach the optimizer."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x, y = torch.randn(64, 16), torch.randint(0, 8, (64,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    scaler = precision.scaler() if precision is not None else None
    with precision.autocast() if precision is not None else contextlib.nullcontext():
        logits = net(x)
        loss = nn.functional.cross_entropy(logits.float(), y)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    else:
        loss.backward()
    grads = [p.grad.clone() for p in net.parameters()]
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    return logits.dtype, float(loss.detach()), grads, scaler


@pytest.mark.parametrize("dtype, tol", [(torch.bfloat16, 3e-2), (torch.float16, 3e-3)])
def test_each_format_gives_the_float32_step_to_its_precision(dtype, tol):
    _, loss32, grads32, _ = _step(None)
    out_dtype, loss, grads, scaler = _step(Precision("cpu", dtype=dtype))
    assert out_dtype == dtype  # the matrix products ran in 16 bits
    assert scaler.is_enabled() == (dtype == torch.float16)
    if scaler.is_enabled():
        assert scaler.get_scale() == 2.0**16  # float16 gradients were computed on a scaled loss ...
    assert abs(loss - loss32) <= tol * abs(loss32)
    for g, g32 in zip(grads, grads32):  # ... and unscaled before the step: float32's gradient, to 16 bits
        assert g.dtype == torch.float32
        assert (g - g32).abs().max() <= tol * g32.abs().max()
    with pytest.raises(ValueError, match="float16 or torch.bfloat16"):
        Precision("cpu", dtype=torch.float64)


def test_evaluation_embeds_in_the_run_s_precision_and_returns_float32(monkeypatch):
    """``embed`` runs the forward passes under the run's autocast (on CUDA; here bfloat16 forced on the CPU) and
    hands back float32 embeddings; with ``amp=False`` the forward passes stay in float32."""
    import sys

    from zslib.engine.train import embed

    embed_module = sys.modules["zslib.engine.train.embed"]

    seen = []

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cpu"))
            return self.linear(x)

    monkeypatch.setattr(embed_module, "Precision",
                        lambda device, amp=None: Precision(device, amp, dtype=torch.bfloat16))
    data = torch.utils.data.TensorDataset(torch.randn(10, 4), torch.arange(10))
    x, y = embed(Net(), data, batch_size=4, device="cpu")
    assert seen == [True] * 3 and x.dtype == torch.float32 and y.tolist() == list(range(10))
    seen.clear()
    embed(Net(), data, batch_size=4, device="cpu", amp=False)
    assert seen == [False] * 3


def _fp16_run(monkeypatch, tmp_path, bad_steps, iterations=6):
    """A tiny run in float16 with loss scaling (forced on the CPU), whose loss is infinite at ``bad_steps``."""
    import sys

    from zslib.engine.method import objective_method
    from zslib.engine.train import TrainSpec, load_checkpoint, train

    loop = sys.modules["zslib.engine.train.loop"]
    monkeypatch.setattr(loop, "Precision", lambda device, amp=None: Precision(device, amp, dtype=torch.float16))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 4))
    calls = {"n": 0}

    def objective(model, images, labels):
        calls["n"] += 1
        emb = model(images).float()
        loss = (emb - labels[:, None].float()).pow(2).mean()
        return {"fit": loss * float("inf") if calls["n"] in bad_steps else loss}

    data = torch.utils.data.TensorDataset(torch.randn(24, 3, 2, 2), torch.arange(24) % 6)
    data.labels = (torch.arange(24) % 6).numpy()
    snapshots = []
    spec = TrainSpec(iterations=iterations, batch_classes=3, batch_per_class=2, lr=1e-2, seed=0, device="cpu",
                     progress=False, checkpoint_path=tmp_path / "ck.pt", grad_clip=1.0,
                     callbacks=[lambda step, history: snapshots.append([p.detach().clone() for p in net.parameters()])])
    history = train(net, objective_method(objective), data, spec)
    return history, snapshots, load_checkpoint(tmp_path / "ck.pt")


def test_a_float16_overflow_skips_the_step_as_the_loss_scaler_intends(monkeypatch, tmp_path):
    """An infinite loss under float16 does not end the run: its gradients are not finite, the scaler skips the
    optimizer step (the parameters stay as they were) and halves its scale; the step is logged as skipped."""
    history, snapshots, state = _fp16_run(monkeypatch, tmp_path, bad_steps={3})
    assert [r["step"] for r in history.losses] == list(range(1, 7))
    assert history.losses[2] == {"step": 3, "skipped": 1.0} and "total" in history.losses[3]
    for a, b in zip(snapshots[1], snapshots[2]):  # step 3 changed nothing
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(snapshots[2], snapshots[3]))  # step 4 trained again
    (scaler,) = state["scalers"].values()
    _, _, clean = _fp16_run(monkeypatch, tmp_path / "clean", bad_steps=set())
    (clean_scaler,) = clean["scalers"].values()
    assert scaler["scale"] == clean_scaler["scale"] / 2  # halved once more than in the same run without the overflow


def test_float16_steps_that_keep_overflowing_stop_the_run(monkeypatch, tmp_path):
    from zslib.engine.train.loop import OVERFLOW_STEPS

    with pytest.raises(FloatingPointError, match=f"not finite in {OVERFLOW_STEPS} float16 steps in a row"):
        _fp16_run(monkeypatch, tmp_path, bad_steps=set(range(2, 40)), iterations=30)
