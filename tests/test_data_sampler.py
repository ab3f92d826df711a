"""ClassBalancedSampler: P x K structure, small classes, determinism and exact resume."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from zslib.engine.data import ClassBalancedSampler


def _labels(sizes, seed=0):
    lab = np.concatenate([np.full(n, c) for c, n in enumerate(sizes)])
    return np.random.default_rng(seed).permutation(lab)  # classes interleaved in the dataset


def test_batches_are_p_by_k():
    labels = _labels([5, 7, 4, 9, 6, 8, 5, 10])
    s = ClassBalancedSampler(labels, classes_per_batch=3, images_per_class=4, seed=1, num_batches=20)
    batches = list(s)
    assert len(batches) == 20 == len(s)
    for b in batches:
        assert len(b) == 12 and len(set(b)) == 12  # every class has >= K images: no repeats
        lab = labels[b]
        classes, counts = np.unique(lab, return_counts=True)
        assert len(classes) == 3 and (counts == 4).all()
        # indices come class by class, K at a time
        assert all(len(set(lab[i:i + 4])) == 1 for i in range(0, 12, 4))


def test_passes_cover_classes_evenly():
    labels = _labels([3] * 12)
    s = ClassBalancedSampler(labels, 4, 2, seed=0, num_batches=9)  # 3 batches per pass, 3 passes
    for p in range(3):
        classes = np.concatenate([np.unique(labels[s.batch(3 * p + r)]) for r in range(3)])
        assert sorted(classes.tolist()) == list(range(12))
    assert not np.array_equal(s.batch_classes(0), s.batch_classes(3))  # passes are reshuffled


def test_small_classes_keep_all_images_and_fill_with_replacement():
    labels = np.array([0, 1, 1, 2, 2, 2, 2, 2])  # class 0: 1 image, class 1: 2 images
    s = ClassBalancedSampler(labels, 3, 3, seed=0, num_batches=50)
    for b in s:
        b = np.array(b)
        assert len(b) == 9
        assert (b[labels[b] == 0] == 0).all()
        one = b[labels[b] == 1]
        assert len(one) == 3 and set(one) == {1, 2}  # both images present, one repeated
        assert len(set(b[labels[b] == 2])) == 3


def test_image_choice_is_uniform_within_class():
    labels = _labels([4, 4])
    s = ClassBalancedSampler(labels, 2, 2, seed=3, num_batches=4000)
    counts = np.bincount(np.concatenate([s.batch(b) for b in range(4000)]), minlength=8)
    # each image is drawn with probability K/n = 1/2 per batch: 2000 expected, sd about 32
    assert np.abs(counts - 2000).max() < 160


def test_deterministic_from_seed():
    labels = _labels([6] * 10)
    a = list(ClassBalancedSampler(labels, 4, 3, seed=5, num_batches=6))
    b = list(ClassBalancedSampler(labels, 4, 3, seed=5, num_batches=6))
    c = list(ClassBalancedSampler(labels, 4, 3, seed=6, num_batches=6))
    assert a == b and a != c
    s = ClassBalancedSampler(labels, 4, 3, seed=5, num_batches=6)
    first, second = list(s), list(s)  # two epochs: fresh batches, and they continue the sequence
    assert first == a and second != first and second == [s.batch(b) for b in range(6, 12)]


def test_exact_resume_mid_epoch():
    labels = _labels([5, 3, 8, 6, 2, 7, 4])
    ref = ClassBalancedSampler(labels, 3, 2, seed=9, num_batches=10)
    uninterrupted = list(ref) + list(ref)
    run = ClassBalancedSampler(labels, 3, 2, seed=9, num_batches=10)
    got = []
    for k, b in enumerate(run):
        got.append(b)
        if k == 6:
            state = run.state_dict()
            break  # "killed" after consuming 7 batches
    resumed = ClassBalancedSampler(labels, 3, 2, seed=9, num_batches=10)
    resumed.load_state_dict(state)
    got += list(resumed)  # finishes epoch 0
    assert len(got) == 10
    got += list(resumed)  # epoch 1
    assert got == uninterrupted


def test_resume_through_a_dataloader():
    labels = _labels([4] * 6)
    ds = TensorDataset(torch.arange(len(labels)))
    ref = [b[0].tolist() for b in DataLoader(ds, batch_sampler=ClassBalancedSampler(labels, 2, 2, 1, 8))]
    s = ClassBalancedSampler(labels, 2, 2, 1, 8)
    out = []
    for k, (x,) in enumerate(DataLoader(ds, batch_sampler=s)):
        out.append(x.tolist())
        if k == 2:
            state = s.state_dict()
            break
    s2 = ClassBalancedSampler(labels, 2, 2, 1, 8)
    s2.load_state_dict(state)
    out += [x.tolist() for (x,) in DataLoader(ds, batch_sampler=s2)]
    assert out == ref
    assert s.state_dict(position=5)["position"] == 5  # explicit count for prefetching loaders


def test_refuses_mismatched_state_and_bad_arguments():
    labels = _labels([3] * 5)
    s = ClassBalancedSampler(labels, 2, 2, seed=0)
    with pytest.raises(ValueError, match="seed"):
        ClassBalancedSampler(labels, 2, 2, seed=1).load_state_dict(s.state_dict())
    with pytest.raises(ValueError, match="labels_sha1"):
        ClassBalancedSampler(labels[::-1].copy(), 2, 2, seed=0).load_state_dict(s.state_dict())
    with pytest.raises(ValueError, match="only 5 classes"):
        ClassBalancedSampler(labels, 6, 2)
    with pytest.raises(ValueError, match="integers"):
        ClassBalancedSampler(labels.astype(float), 2, 2)
    assert len(ClassBalancedSampler(labels, 2, 2)) == len(labels) // 4
