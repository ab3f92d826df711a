"""A checkpoint resumes on any device: it is read into host memory, the model's and the optimizers' tensors are copied
to the device that resumes it, and the random states are restored as the CPU tensors they are.

No GPU is needed: the ``meta`` device stands in for one. Its tensors, like a GPU's, are not host memory (NumPy and
``torch.set_rng_state`` cannot read them), and a finished run resumed there restores its whole state before it
returns, without a training step (which ``meta`` cannot compute)."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from test_train import NoisyImages, PKSampler, fresh, objective_with_proxies, params
from zslib.engine.method import objective_method
from zslib.engine.train import TrainSpec, load_checkpoint, train
from zslib.engine.train.checkpoint import rng_state, set_rng_state


def _train(path, device, seed=0):
    data = NoisyImages()
    model, proxy = fresh(seed)
    method = objective_method(objective_with_proxies(proxy), proxy)
    spec = TrainSpec(iterations=6, batch_sampler=PKSampler(data.labels, 3, 2, seed=0), lr=1e-2, seed=0, device=device,
                     checkpoint_path=path, checkpoint_every=3, progress=False)
    return model, proxy, train(model, method, data, spec)


@pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter")  # meta holds no values: a no-op copy
def test_a_run_saved_on_one_device_resumes_on_another(tmp_path):
    path = tmp_path / "ck.pt"
    model, proxy, history = _train(path, "cpu")
    saved = load_checkpoint(path)
    torch.manual_seed(123)  # the random states now differ from the checkpoint's
    np.random.seed(123)
    random.seed(123)

    moved, moved_proxy, again = _train(path, "meta", seed=7)  # another initialization: all of it is restored
    assert again == history
    # the model's and the method's tensors are on the device that resumed the run ...
    for module in (moved, moved_proxy):
        assert {t.device.type for t in module.state_dict().values()} == {"meta"}
    # ... and every random state is the checkpoint's, restored on the host
    assert torch.equal(torch.get_rng_state(), saved["rng"]["torch"])
    name, keys, *rest = np.random.get_state()
    assert np.array_equal(keys, saved["rng"]["numpy"][1].numpy().astype(np.uint32))
    assert random.getstate() == saved["rng"]["python"]
    # the same checkpoint resumed on the CPU gives back the trained parameters bitwise
    back, back_proxy, _ = _train(path, "cpu", seed=9)
    for a, b in zip(params(back, back_proxy), params(model, proxy)):
        assert torch.equal(a, b)


def test_random_states_loaded_anywhere_are_restored_from_host_copies(monkeypatch):
    """The CUDA generators' states go to ``torch.cuda.set_rng_state_all`` as CPU byte tensors, whatever device the
    checkpoint was read onto (here a stand-in: the states wrapped so that only ``.cpu()`` gives them back)."""
    got = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: got.extend(states))
    state = rng_state(cuda=False)
    state["cuda"] = [torch.get_rng_state()]

    class Elsewhere:  # a tensor that is not in host memory: only a copy to the host can be read
        def __init__(self, t):
            self.t = t

        def cpu(self):
            return self.t

    away = {**state, "torch": Elsewhere(state["torch"]), "cuda": [Elsewhere(state["cuda"][0])],
            "numpy": (state["numpy"][0], Elsewhere(state["numpy"][1]), *state["numpy"][2:])}
    torch.manual_seed(5)
    set_rng_state(away)
    assert torch.equal(torch.get_rng_state(), state["torch"])
    assert len(got) == 1 and got[0].device.type == "cpu" and got[0].dtype == torch.uint8
