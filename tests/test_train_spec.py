"""train() takes the model, the method, the data and one TrainSpec; the spec of a run is read from its Config."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

from zslib.engine.config import Config
from zslib.engine.train import TrainSpec, train


def test_train_takes_at_most_six_parameters():
    assert list(inspect.signature(train).parameters) == ["model", "method", "train_set", "spec", "eval_sets"]


def test_the_spec_of_a_config_copies_every_field_of_the_same_name():
    config = Config.from_profile("real", seed=3, objective_lr=2e-3, schedule={"name": "cosine"})
    spec = TrainSpec.from_config(config, device="cpu", max_steps=5)
    shared = {f.name for f in dataclasses.fields(TrainSpec)} & {f.name for f in dataclasses.fields(Config)}
    assert {"iterations", "lr", "batch_classes", "batch_per_class", "weight_decay", "new_layer_mult", "objective_lr",
            "schedule", "eval_every", "eval_batch_size", "seed", "amp", "num_workers"} <= shared
    for name in shared:
        assert getattr(spec, name) == getattr(config, name), name
    assert (spec.device, spec.max_steps) == ("cpu", 5)


def test_a_field_added_to_both_reaches_the_spec_with_no_other_change():
    @dataclasses.dataclass(frozen=True)
    class Spec(TrainSpec):
        warmup: int = 0

    @dataclasses.dataclass(frozen=True)
    class Extended(Config):
        warmup: int = 0

    assert Spec.from_config(Extended.from_profile("quick", warmup=7)).warmup == 7


@pytest.mark.parametrize("changes, words", [({"iterations": 0}, "iterations must be at least 1"),
                                            ({"lr": None}, "give lr"), ({"log_every": 0}, "log_every must be")])
def test_a_bad_spec_is_refused_when_made(changes, words):
    with pytest.raises(ValueError, match=words):
        TrainSpec(**{"iterations": 2, "lr": 1e-3, "batch_classes": 2, "batch_per_class": 2, **changes})
