"""Tests of the trainer: determinism, exact resume, NaN stops, parameter groups, schedules, helpers.

Everything runs on a tiny MLP over 3x4x4 "images" so the file takes a few seconds. The model has
dropout, the dataset draws random noise per item and the objective holds parameters (proxies), so an
exact resume has to restore every random state, the sampler position and the optimizer.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from zslib.engine.data import LabeledSubset, split_classes
from zslib.engine.method import objective_method
from zslib.engine.train import History, embed, load_checkpoint, make_scheduler, TrainSpec, train

# ----------------------------------------------------------------------------------------------------
# Tiny fixtures


class NoisyImages(torch.utils.data.Dataset):
    """Class means plus fresh random noise on every access (stands in for random augmentation)."""

    def __init__(self, n_classes=6, per_class=5, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = np.repeat(np.arange(n_classes), per_class).astype(np.int64)
        self.base = torch.randn(n_classes, 3, 4, 4, generator=g)[self.labels] + 0.3 * torch.randn(
            len(self.labels), 3, 4, 4, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.base[i] + 0.1 * torch.randn(3, 4, 4), int(self.labels[i])


class InMemory(NoisyImages):
    """The same data offering the fast in-memory path (no augmentation)."""

    def tensors(self):
        return self.base, torch.from_numpy(self.labels)


class PKSampler:
    """A minimal P x K batch sampler for these tests: ``num_batches`` per pass, state = RNG state."""

    def __init__(self, labels, p, k, seed=0, num_batches=4):
        self.labels, self.p, self.k, self.num_batches = np.asarray(labels), p, k, num_batches
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        classes = np.unique(self.labels)
        for _ in range(self.num_batches):
            batch = []
            for c in self.rng.choice(classes, self.p, replace=False):
                batch += self.rng.choice(np.flatnonzero(self.labels == c), self.k, replace=False).tolist()
            yield batch

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.rng.bit_generator.state = state["rng"]


class TinyNet(nn.Module):
    def __init__(self, d=8, dropout=0.2):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(48, 16), nn.ReLU(), nn.Dropout(dropout))
        self.head = nn.Linear(16, d)

    def forward(self, x):
        return nn.functional.normalize(self.head(self.body(x)), dim=1)

    def param_groups(self, lr, new_layer_mult=10.0, weight_decay=0.0):
        return [{"params": self.body.parameters(), "lr": lr, "weight_decay": weight_decay},
                {"params": self.head.parameters(), "lr": lr * new_layer_mult, "weight_decay": weight_decay}]


class ProxyLoss(nn.Module):
    """Proxy-NCA-like loss with learnable proxies (a loss holding parameters)."""

    def __init__(self, n_classes=6, d=8):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(n_classes, d))

    def forward(self, emb, labels):
        logits = -torch.cdist(emb, nn.functional.normalize(self.proxies, dim=1)) ** 2
        return nn.functional.cross_entropy(logits, labels)


def pair_loss(emb, labels):
    """A simple contrastive loss: pull same-class pairs, push other pairs below cosine 0.2."""
    sim = emb @ emb.T
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    return (1 - sim)[same & ~eye].mean() + torch.relu(sim - 0.2)[~same].mean()


def recall1(emb, labels):
    sim = emb @ emb.T
    sim.fill_diagonal_(-math.inf)
    return {"R@1": float((labels[sim.argmax(1)] == labels).float().mean())}


def objective_with_proxies(proxy: ProxyLoss):
    def objective(model, images, labels):
        emb = model(images)
        return {"pair": pair_loss(emb, labels), "proxy": 0.5 * proxy(emb, labels)}
    return objective


def fresh(seed=0):
    torch.manual_seed(seed)
    model, proxy = TinyNet(), ProxyLoss()
    return model, proxy


def run_tiny(tmp_path=None, *, data=None, iterations=12, seed=0, num_batches=5, num_workers=0, eval_every=4,
             model=None, proxy=None, progress=False, **kw):
    """A run on the tiny fixtures; eval_every=None turns evaluation off."""
    data = data if data is not None else NoisyImages()
    if model is None:
        model, proxy = fresh(seed)
    # the proxies live in a module the method holds: they are trained and checkpointed with it
    method = objective_method(objective_with_proxies(proxy), proxy)
    sampler = PKSampler(data.labels, 3, 2, seed=seed, num_batches=num_batches)
    history = train(model, method, data, TrainSpec(iterations=iterations, batch_sampler=sampler, lr=1e-2,
                                                   weight_decay=1e-4,
                                                   schedule={"name": "step", "every": 5, "gamma": 0.5},
                                                   eval_every=eval_every, eval_fn=recall1, seed=seed, device="cpu",
                                                   num_workers=num_workers, progress=progress,
                                                   checkpoint_path=None if tmp_path is None else tmp_path / "ck.pt",
                                                   **kw), eval_sets={"seen": InMemory()} if eval_every else None)
    return model, proxy, history


def params(*modules):
    return [p.detach().clone() for m in modules for p in m.state_dict().values()]


def assert_bitwise(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


# ----------------------------------------------------------------------------------------------------
# Determinism and exact resume (the Must-show tests)


def test_same_seed_same_run_and_other_seed_differs():
    m1, p1, h1 = run_tiny()
    m2, p2, h2 = run_tiny()
    assert_bitwise(params(m1, p1), params(m2, p2))
    assert h1 == h2 and len(h1.losses) == 12 and [r["step"] for r in h1.evals] == [0, 4, 8, 12]
    m3, p3, h3 = run_tiny(seed=1)
    assert not torch.equal(params(m1)[0], params(m3)[0])
    assert h3.losses != h1.losses


@pytest.mark.parametrize("data_kind,workers,every", [("items", 0, 5), ("tensors", 0, 5), ("items", 0, 4),
                                                     ("items", 2, 4)])
def test_killed_and_resumed_run_matches_uninterrupted_run(tmp_path, data_kind, workers, every):
    """Killed two steps after a checkpoint (that work is lost), resumed by a fresh process. The sampler
    has 5 batches per pass: the checkpoint falls on a pass boundary (5) or inside a pass (4) while
    two loader workers have already fetched batches of the next pass."""
    data = NoisyImages() if data_kind == "items" else InMemory()
    ref_model, ref_proxy, ref_history = run_tiny(data=data)

    class Killed(Exception):
        pass

    def kill(step, history):
        if step == every + 2:
            raise Killed

    with pytest.raises(Killed):
        run_tiny(tmp_path, data=data, checkpoint_every=every, callbacks=[kill], num_workers=workers)
    assert load_checkpoint(tmp_path / "ck.pt")["step"] == every
    # a new process would rebuild everything from scratch (with a different init): resume must not care
    model, proxy = fresh(seed=123)
    model, proxy, history = run_tiny(tmp_path, data=data, checkpoint_every=every, model=model, proxy=proxy,
                                     num_workers=workers)
    assert_bitwise(params(model, proxy), params(ref_model, ref_proxy))
    assert history == ref_history
    # the steps are mid-pass of the sampler (5 batches per pass) and across a learning-rate decay
    assert load_checkpoint(tmp_path / "ck.pt")["step"] == 12


def test_training_in_pieces_with_max_steps_matches_one_go(tmp_path):
    ref_model, ref_proxy, ref_history = run_tiny()
    for stop in (3, 8, 11):
        # the first piece starts from the reference initialization; later ones from anything at all
        model, proxy = fresh(seed=0 if stop == 3 else stop)
        _, _, h = run_tiny(tmp_path, model=model, proxy=proxy, max_steps=stop)
        assert h.losses[-1]["step"] == stop
    model, proxy = fresh(seed=99)
    model, proxy, history = run_tiny(tmp_path, model=model, proxy=proxy)
    assert_bitwise(params(model, proxy), params(ref_model, ref_proxy))
    assert history == ref_history
    # a finished run resumes as a no-op that returns the stored history
    model2, proxy2 = fresh(seed=5)
    _, _, again = run_tiny(tmp_path, model=model2, proxy=proxy2)
    assert again == ref_history
    assert_bitwise(params(model2, proxy2), params(ref_model, ref_proxy))


def test_evaluation_frequency_does_not_change_training():
    m1, p1, h1 = run_tiny(eval_every=1)
    m2, p2, h2 = run_tiny(eval_every=6)
    assert_bitwise(params(m1, p1), params(m2, p2))
    assert h1.losses == h2.losses and len(h1.evals) == 13 and len(h2.evals) == 3


def test_data_workers_do_not_change_the_batches():
    """Augmentation of step t is seeded by (seed, t), whichever process loads the batch."""
    m0, p0, h0 = run_tiny(iterations=6, eval_every=None)
    m2, p2, h2 = run_tiny(iterations=6, eval_every=None, num_workers=2)
    assert_bitwise(params(m0, p0), params(m2, p2))
    assert h0 == h2


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path):
    run_tiny(tmp_path, iterations=4)
    with pytest.raises(ValueError, match="another run"):
        run_tiny(tmp_path, iterations=6)
    (tmp_path / "ck.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="damaged"):
        run_tiny(tmp_path, iterations=4)
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temporary files left behind


# ----------------------------------------------------------------------------------------------------
# Loss terms, optimizer, schedule


def test_nan_term_stops_with_its_name_and_step():
    data = InMemory()
    model, _ = fresh()

    def objective(model, images, labels):
        emb = model(images)
        step_nan = torch.tensor(float("nan")) if objective.calls >= 2 else torch.tensor(0.0)
        objective.calls += 1
        return {"pair": pair_loss(emb, labels), "ec": emb.sum() * 0 + step_nan}
    objective.calls = 0
    with pytest.raises(FloatingPointError, match=r"loss term 'ec' became nan at step 3; lower its weight"):
        train(model, objective, data, TrainSpec(iterations=10, batch_sampler=PKSampler(data.labels, 3, 2), lr=1e-3,
                                                device="cpu", progress=False))
    with pytest.raises(TypeError, match="dict of named loss terms"):
        train(model, lambda m, x, y: pair_loss(m(x), y), data,
              TrainSpec(iterations=2, batch_sampler=PKSampler(data.labels, 3, 2), lr=1e-3, device="cpu",
                        progress=False))


def test_terms_are_summed_and_logged():
    data = InMemory()
    model, proxy = fresh()
    h = train(model, objective_method(objective_with_proxies(proxy), proxy), data,
              TrainSpec(iterations=3, batch_sampler=PKSampler(data.labels, 3, 2), lr=0.0, objective_lr=0.0,
                        device="cpu", progress=False))
    for row in h.losses:
        assert row["total"] == pytest.approx(row["pair"] + row["proxy"], rel=1e-6)
    steps, values = h.loss_curve("proxy")
    assert steps == [1, 2, 3] and len(values) == 3
    with pytest.raises(KeyError, match="no loss term"):
        h.loss_curve("ec")


def test_parameter_groups_new_layers_and_objective_params():
    """Backbone at lr, head at 10 lr (model.param_groups), loss parameters at objective_lr; one step of
    Adam moves every parameter by about its group's lr (Adam's first step is lr * sign(grad))."""
    data = InMemory()
    model, _ = fresh()
    model.body[3].p = 0.0  # no dropout: a clean first step
    loss = ProxyLoss()
    proxy_obj = objective_method(lambda m, x, y: {"proxy": loss(m(x), y)}, loss)
    before = {n: p.detach().clone() for n, p in [*model.named_parameters(), *proxy_obj.named_parameters()]}
    train(model, proxy_obj, data, TrainSpec(iterations=1, batch_sampler=PKSampler(data.labels, 3, 2), lr=1e-4,
                                            objective_lr=3e-2, device="cpu", progress=False))
    after = dict([*model.named_parameters(), *proxy_obj.named_parameters()])
    expected = {"body.1.weight": 1e-4, "head.weight": 1e-3, "extra.0.proxies": 3e-2}
    for name, lr in expected.items():
        step = (after[name].detach() - before[name]).abs()
        moved = step[step > 0]
        assert moved.numel() > 0
        assert torch.allclose(moved, torch.full_like(moved, lr), rtol=1e-2), name


def test_step_schedule_and_cosine():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=1.0)
    sched = make_scheduler(opt, {"name": "step", "every": 3, "gamma": 0.1}, iterations=10)
    lrs = []
    for _ in range(7):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([1, 1, 1, 0.1, 0.1, 0.1, 0.01])
    opt = torch.optim.Adam([p], lr=1.0)
    sched = make_scheduler(opt, "cosine", iterations=4)
    for _ in range(2):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)
    assert make_scheduler(opt, "constant", 4) is None
    with pytest.raises(ValueError, match="needs 'every'"):
        make_scheduler(opt, {"name": "step"}, 4)


# ----------------------------------------------------------------------------------------------------
# Helpers


def test_embed_matches_eval_mode_forward_and_restores_mode():
    data = NoisyImages()
    model, _ = fresh()
    model.train()
    emb, lab = embed(model, InMemory(), batch_size=7)
    model.eval()
    with torch.no_grad():
        direct = model(InMemory().base)
    assert torch.allclose(emb, direct) and lab.tolist() == data.labels.tolist()
    model.train()
    emb2, _ = embed(model, data, batch_size=4)  # the item path: noise differs, shape and order the same
    assert model.training and emb2.shape == emb.shape
    assert torch.allclose(emb2, emb, atol=0.3)


def test_split_classes_is_class_disjoint_complete_and_deterministic():
    labels = np.repeat(np.arange(10), [3, 4, 5, 3, 4, 5, 3, 4, 5, 6])
    tr, va = split_classes(labels, 0.3, seed=4)
    assert set(labels[tr]).isdisjoint(labels[va]) and len(set(labels[va])) == 3
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(len(labels)))
    tr2, va2 = split_classes(labels, 0.3, seed=4)
    assert np.array_equal(tr, tr2) and np.array_equal(va, va2)
    others = {tuple(sorted(set(labels[split_classes(labels, 0.3, seed=s)[1]]))) for s in range(10)}
    assert len(others) > 1
    with pytest.raises(ValueError, match="both sides"):
        split_classes(labels, 0.01)
    with pytest.raises(ValueError, match="between 0 and 1"):
        split_classes(labels, 1.0)


def test_labeled_subset_keeps_labels_and_tensors():
    data = InMemory()
    tr, va = split_classes(data.labels, 0.5, seed=0)
    sub = LabeledSubset(data, va)
    images, labels = sub.tensors()
    assert np.array_equal(sub.labels, data.labels[va]) and torch.equal(images, data.base[va])
    assert len(sub) == len(va) and sub[0][1] == data.labels[va[0]]


def test_history_round_trip_and_curves():
    h = History(losses=[{"step": 1, "total": 2.0, "a": 2.0}],
                evals=[{"step": 0, "seen": {"R@1": 0.1}}, {"step": 5, "seen": {"R@1": 0.5}, "unseen": {"R@1": 0.2}}])
    assert History.from_dict(h.to_dict()) == h
    assert h.metric_curve("seen") == ([0, 5], [0.1, 0.5]) and h.last("unseen") == {"R@1": 0.2}
    assert h.splits == ["seen", "unseen"]
    with pytest.raises(KeyError, match="no evaluation set"):
        h.metric_curve("val")


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    """A crash in the middle of writing leaves the previous checkpoint whole and no stray file."""
    import zslib.engine.train.checkpoint as zt

    run_tiny(tmp_path, iterations=4)
    good = (tmp_path / "ck.pt").read_bytes()

    def crash(obj, f, *args, **kwargs):
        f.write(b"partial bytes")
        raise KeyboardInterrupt  # e.g. a Colab disconnect

    monkeypatch.setattr(zt.torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        zt.save_checkpoint(tmp_path / "ck.pt", {"format": "zslib-checkpoint"})
    assert (tmp_path / "ck.pt").read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]
    assert load_checkpoint(tmp_path / "ck.pt")["step"] == 4


def test_progress_modes(capsys, monkeypatch):
    run_tiny(iterations=2, eval_every=None, progress="text")
    assert "train" in capsys.readouterr().err
    monkeypatch.setenv("ZS_PROGRESS", "none")
    run_tiny(iterations=2, eval_every=None, progress="auto")
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress must be"):
        run_tiny(iterations=2, eval_every=None, progress="fancy")
