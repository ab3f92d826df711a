"""A validation run (``validation_fraction`` > 0) chooses a setting before any unseen-class number exists: it embeds
the seen and the validation classes only, at every intermediate evaluation and at the end, and never the unseen
ones. A test run scores all three."""
from __future__ import annotations

import numpy as np

from zslib.engine.config import Config
from zslib.engine.data.splits import labels_of


def _spy(monkeypatch):
    """Record the classes of every set the trainer and the runner embed."""
    import zslib.engine.runner as runner
    import zslib.engine.train.loop as loop

    seen_sets = []

    def wrap(embed):
        def spied(model, dataset, *args, **kwargs):
            seen_sets.append(set(np.unique(np.asarray(labels_of(dataset))).tolist()))
            return embed(model, dataset, *args, **kwargs)
        return spied

    monkeypatch.setattr(loop, "embed", wrap(loop.embed))
    monkeypatch.setattr(runner, "embed", wrap(runner.embed))
    return seen_sets


def _unseen_classes(config):
    from zslib.engine.runner import build_data

    return set(np.unique(np.asarray(labels_of(build_data(config)["unseen"]))).tolist())


def test_a_validation_run_never_embeds_the_unseen_classes(tmp_path, monkeypatch):
    from zslib.engine.runner import run

    config = Config.from_profile("quick", loss="triplet", iterations=6, eval_every=2, validation_fraction=0.3)
    unseen = _unseen_classes(config)
    embedded = _spy(monkeypatch)
    result = run(config, tmp_path, progress=False, device="cpu")
    assert embedded and all(not (classes & unseen) for classes in embedded)
    assert [r["step"] for r in result.history.evals] == [0, 2, 4, 6]
    assert all(set(r) == {"step", "seen", "val"} for r in result.history.evals)
    assert set(result.metrics) == {"seen", "val"}


def test_a_test_run_scores_the_unseen_classes(tmp_path, monkeypatch):
    from zslib.engine.runner import run

    config = Config.from_profile("quick", loss="triplet", iterations=4, eval_every=2)
    unseen = _unseen_classes(config)
    embedded = _spy(monkeypatch)
    result = run(config, tmp_path, progress=False, device="cpu")
    assert unseen in embedded and "unseen" in result.metrics
    assert all("unseen" in r for r in result.history.evals)
