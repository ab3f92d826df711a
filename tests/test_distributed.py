"""Several processes train one model as one process does (zslib.engine.train.distributed), checked on the CPU.

Two gloo processes on this machine stand in for two GPUs. The oracle is the single-process trainer on the
same global batch: the gradient of one step (model, BatchNorm and the method's own parameters) must equal
it, and a two-process run started with ``torchrun -m zslib train`` must write the result file a
one-process run writes, within the rounding of differently ordered sums.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from zslib.engine.data import ClassBalancedSampler, split_batch
from zslib.engine.method import objective_method
from zslib.engine.train import TrainSpec, train
from zslib.engine.train.distributed import GatheredModel, SyncedBatchNorm, world

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------------
# The batch split


def test_split_batch_gives_disjoint_contiguous_shares_of_whole_classes():
    sampler = ClassBalancedSampler(np.repeat(np.arange(10), 4), 6, 2, seed=3)
    for b in range(5):
        batch = sampler.batch(b)
        for world_size in (1, 2, 3):
            shares = [split_batch(batch, r, world_size) for r in range(world_size)]
            assert sum(shares, []) == batch  # in rank order, the shares make up the batch
            labels = [set(sampler.labels[s].tolist()) for s in shares]
            for i in range(world_size):  # P = 6 is a multiple of the world size: whole classes per share
                assert len(shares[i]) == 12 // world_size and len(labels[i]) == 6 // world_size
                assert all(not labels[i] & labels[j] for j in range(i))
    with pytest.raises(ValueError, match="multiple of 5"):
        split_batch(list(range(12)), 0, 5)
    with pytest.raises(ValueError, match="rank"):
        split_batch(list(range(12)), 2, 2)


def test_loader_workers_share_the_cores_among_the_processes_of_a_machine(monkeypatch):
    from zslib.engine.train.batches import loader_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert [loader_workers(n) for n in (0, 1, 4)] == [0, 1, 2]  # a Colab GPU session: 2 cores, 2 workers
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # torchrun with 4 processes on a 16-core machine
    assert [loader_workers(n) for n in (2, 4, 8)] == [2, 4, 4]


def test_the_gathering_view_refuses_what_would_see_one_share_only():
    net = nn.Linear(3, 2)
    view = GatheredModel(net, net)
    assert view.out_features == 2 and view.module is net  # plain attributes are the model's
    with pytest.raises(AttributeError, match=r"model\(images\) alone"):
        view.forward
    with pytest.raises(AttributeError, match="read-only"):
        view.weight = None
    assert world() == (0, 1)


# ----------------------------------------------------------------------------------------------------
# One step on two processes against one process


class Blobs(torch.utils.data.Dataset):
    """6 classes x 5 images of 3 x 6 x 6, held in memory (no augmentation: the batch is exactly known)."""

    def __init__(self):
        g = torch.Generator().manual_seed(5)
        self.labels = np.repeat(np.arange(6), 5).astype(np.int64)
        self.images = torch.randn(6, 3, 6, 6, generator=g)[self.labels] + 0.5 * torch.randn(30, 3, 6, 6, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])

    def tensors(self):
        return self.images, torch.from_numpy(self.labels)


class FixedBatches:
    """The same global batch list every pass (what each process's sampler yields)."""

    def __init__(self, batches):
        self.batches, self.position = batches, 0

    def __iter__(self):
        for b in self.batches[self.position:]:
            self.position += 1
            yield b
        self.position = 0

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        return self.head(self.body(x))


class Proxies(nn.Module):
    """A loss with parameters of its own (class proxies): they see the gathered batch on every process."""

    def __init__(self):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(6, 5))

    def forward(self, emb, labels):
        return nn.functional.cross_entropy(-torch.cdist(emb, self.proxies) ** 2, labels)


def _objective(proxies):
    def objective(model, images, labels):
        emb = model(images)
        sim = nn.functional.normalize(emb, dim=1) @ nn.functional.normalize(emb, dim=1).T
        same = labels[:, None] == labels[None, :]
        pair = (1 - sim)[same].mean() + torch.relu(sim + 0.1)[~same].pow(2).mean()
        return {"pair": pair, "proxy": proxies(emb, labels)}
    return objective


BATCHES = [[0, 1, 10, 11, 20, 22, 5, 7], [15, 16, 25, 27, 2, 4, 12, 14]]  # 4 classes x 2, in class order


def _one_step(steps=1, device="cpu"):
    """Train from seed 0 for ``steps`` steps; the gradients left by the last step, the BN statistics, history."""
    torch.manual_seed(0)
    model, proxies = ConvBN(), Proxies()
    method = objective_method(_objective(proxies), proxies)
    history = train(model, method, Blobs(), TrainSpec(iterations=steps, batch_sampler=FixedBatches(BATCHES), lr=0.01,
                                                      device=device, amp=False, progress=False, seed=0))
    grads = {f"model.{k}": p.grad.cpu().clone() for k, p in model.named_parameters()}
    grads.update({f"method.{k}": p.grad.cpu().clone() for k, p in proxies.named_parameters()})
    stats = {k: v.cpu().clone() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}
    restored = all(type(m) not in (SyncedBatchNorm, nn.SyncBatchNorm) for m in model.modules())
    return {"grads": grads, "stats": stats, "losses": history.losses, "restored": restored}


def _step_worker(rank, world_size, port, out, steps, device_type="cpu"):
    import torch.distributed as dist

    torch.set_num_threads(1)
    device = "cpu"
    if device_type == "cuda":
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        device = f"cuda:{rank}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world_size)
    try:
        torch.save(_one_step(steps, device), Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("device_type", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")),
])
def test_two_processes_compute_the_single_process_gradient(tmp_path, device_type):
    """Two steps: the losses of both and every parameter's gradient at the second (through BatchNorm, the
    gathered pair loss and the proxies) equal the single-process ones, and so do the BatchNorm running
    statistics. Equal up to float32 rounding: sums taken in another order differ by about 1e-7 of the
    largest gradient. A gradient that missed the factor world_size, or a loss over one share, would be off
    by far more. (The convolution before BatchNorm has no bias: its true gradient would be 0, and the
    comparison would only see rounding noise.) On two GPUs (NCCL, torch's SyncBatchNorm, float32 without
    TF32) the same comparison runs where a machine has them."""
    steps = 2
    # CPU: forked, so the workers inherit this process's imports; CUDA cannot be forked once initialized
    mp.start_processes(_step_worker, args=(2, _free_port(), str(tmp_path), steps, device_type), nprocs=2,
                       start_method="fork" if device_type == "cpu" else "spawn")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        want = _one_step(steps, "cuda:0" if device_type == "cuda" else "cpu")
    finally:
        torch.set_num_threads(threads)
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    rtol, atol = (1e-5, 1e-6) if device_type == "cpu" else (1e-4, 1e-5)  # cuDNN picks its algorithms per size
    for g in got:
        assert g["restored"]  # the model's own BatchNorm layers are back after training
        assert set(g["grads"]) == set(want["grads"])
        for name, grad in want["grads"].items():
            torch.testing.assert_close(g["grads"][name], grad, rtol=rtol, atol=atol, msg=name)
        for name, value in want["stats"].items():
            torch.testing.assert_close(g["stats"][name], value, rtol=rtol, atol=atol, msg=name)
        for a, b in zip(g["losses"], want["losses"]):
            assert a.keys() == b.keys() and all(abs(a[k] - b[k]) <= rtol * abs(b[k]) for k in a if k != "step")
    for name in want["grads"]:  # and the two processes hold exactly the same gradients
        assert torch.equal(got[0]["grads"][name], got[1]["grads"][name]), name


# ----------------------------------------------------------------------------------------------------
# torchrun -m zslib train on two processes against one


SMALL = dict(loss="triplet", iterations=4, eval_every=2, lr=1e-6, batch_classes=8, batch_per_class=2, synth_images_per_class=6,
             image_size=32, resize_size=36)


def _torchrun(tmp_path, results):
    """``torchrun --standalone --nproc_per_node=2 -m zslib train`` with the options of ``SMALL``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZS_PROFILE": "quick", "OMP_NUM_THREADS": "1", "ZS_PROGRESS": "none"}
    options = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "zslib", "train", *options, "--device", "cpu", "--results-dir", str(results),
                           "--json", "--progress", "none"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(Path(results).glob("*.json"))
    assert len(files) == 1  # written once
    return json.loads(files[0].read_text())


@pytest.mark.slow  # a whole smoke run (campaign, session, class grading, two processes): in `make test`
def test_torchrun_two_processes_write_the_result_of_one(tmp_path):
    """The quick profile (SynthParts in memory, no augmentation; SmallCNN with BatchNorm), 4 steps with an
    evaluation every 2: the two result files have the same config and hash, their losses agree to 1e-5
    relative and their metrics (the final ones and those of the history) to 1e-6.

    Why a tiny learning rate: the two processes sum each gradient in another order (each its half, then
    the halves), which changes its last digits, and Adam divides every gradient entry by its own magnitude,
    so an entry whose gradient is almost 0 moves by up to a learning rate in a direction the rounding
    decides. SmallCNN has such entries, so at the quick profile's 2e-3 the runs drift apart within a few
    steps as any two differently rounded runs would (about 5e-4 in the loss at step 3). At 1e-6 that drift is
    invisible and what is left to compare is the computation itself; the gradient test above checks it at a
    real scale."""
    from zslib.experiment import Config, run

    two = _torchrun(tmp_path, tmp_path / "two")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in each torchrun process
    try:
        one = run(Config.from_profile("quick", **SMALL), results_dir=tmp_path / "one", device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    one = json.loads(one.path.read_text())
    assert one["config_hash"] == two["config_hash"] and one["config"] == two["config"]
    assert one["provenance"]["processes"] == 1 and two["provenance"]["processes"] == 2
    assert [r["step"] for r in two["history"]["losses"]] == [1, 2, 3, 4]
    for a, b in zip(one["history"]["losses"], two["history"]["losses"], strict=True):
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-5 * abs(a[k]) for k in a), (a, b)

    def close(x, y):
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
        return abs(x - y) <= 1e-6

    assert close(one["metrics"], two["metrics"])
    assert [r["step"] for r in two["history"]["evals"]] == [0, 2, 4]  # evaluated by process 0, recorded once
    assert all(close(a, b) for a, b in zip(one["history"]["evals"], two["history"]["evals"], strict=True))
