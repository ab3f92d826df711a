"""Each method chapter shows its objective as the library's code and writes one training step out before any grid runs.

The objective on the page is displayed from the library (:func:`zslib.present.source.show_source`), so the page and
the library cannot drift apart; the written-out step is checked against the method's own terms when the page runs
(:meth:`zslib.engine.first_step.FirstStep.check`), and :func:`~zslib.engine.first_step.first_step` is the trainer's
own step 0.
"""
from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import nbformat
import pytest
import torch

from zslib.engine.registry import METHODS, PAPERS
from zslib.present.source import show_source

BOOK = Path(__file__).resolve().parents[1] / "book"
HIDDEN = {"hide-input", "remove-input", "hide-cell", "remove-cell"}


def _visible_code(path: Path) -> list[tuple[int, str]]:
    nb = nbformat.read(path, as_version=4)
    return [(i, c.source) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and not set(c.metadata.get("tags", [])) & HIDDEN]


@pytest.mark.parametrize("key", sorted(PAPERS))
def test_the_displayed_objective_is_the_library_source_line_for_line(key):
    terms = METHODS[PAPERS[key].method].terms
    shown = show_source(terms)
    assert shown.text == textwrap.dedent(inspect.getsource(terms))
    assert f"```python\n{shown.text}```" in shown._repr_markdown_()
    lines = (Path(__file__).resolve().parents[1] / shown.path).read_text().splitlines(keepends=True)
    assert textwrap.dedent("".join(lines[shown.first - 1:shown.last])) == shown.text


def test_show_source_reads_the_file_as_it_is_now(tmp_path, monkeypatch):
    module = tmp_path / "objective_module.py"
    module.write_text("def objective(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("objective_module")
    assert show_source(mod.objective).text == "def objective(x):\n    return x * 2\n"
    with pytest.raises(TypeError, match="defined in a Python file"):
        show_source(len)


@pytest.mark.parametrize("key", sorted(PAPERS))
def test_the_main_chapter_shows_the_objective_and_one_step_before_any_grid_runs(key):
    paper = PAPERS[key]
    cls = METHODS[paper.method]
    cells = _visible_code(BOOK / f"{paper.chapter}.ipynb")
    grid = min(i for i, src in cells if "run_grid(" in src)
    shown = [i for i, src in cells if f"show_source({cls.__name__}.terms)" in src
             and f"from {cls.__module__} import {cls.__name__}" in src]
    assert shown and shown[0] < grid, f"{paper.chapter}: no visible cell shows {cls.__name__}.terms before the grid"
    steps = [i for i, src in cells if "first_step(" in src and "backward()" in src and ".check(" in src]
    assert steps and shown[0] < steps[0] < grid, \
        f"{paper.chapter}: no visible cell writes a training step out (and checks it) between the objective and the grid"


@pytest.fixture(scope="module")
def cml_config():
    from zslib.engine.profile import PROFILES
    from zslib.methods.cml import recipes

    return recipes.quick_grid(PROFILES["quick"])["triplet", "cml"]


def test_the_first_step_is_the_trainers_first_step(cml_config):
    """One step taken by hand on first_step's pieces leaves the network bitwise where train() leaves it after its first
    step (the same seed, batch, optimizer and random draw of CML's pair of classes)."""
    from zslib.engine.first_step import first_step
    from zslib.engine.runner import build_data, build_method, build_model
    from zslib.engine.train import TrainSpec, train
    from zslib.engine.train.checkpoint import set_seed

    step = first_step(cml_config, device="cpu")
    terms = step.method.terms("main", step.model, step.images, step.labels)
    step.optimizer.zero_grad()
    sum(terms.values()).backward()
    step.optimizer.step()

    data = build_data(cml_config)
    set_seed(cml_config.seed)
    model = build_model(cml_config)
    method = build_method(cml_config, model, sorted(set(data["train"].labels.tolist())))
    train(model, method, data["train"], TrainSpec.from_config(cml_config, max_steps=1, device="cpu", progress=False,
                                                              eval_at_start=False))
    mine, theirs = step.model.state_dict(), model.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    untouched = first_step(cml_config, device="cpu").model.state_dict()
    assert not all(torch.equal(mine[k], untouched[k]) for k in mine)  # the step moved something


def test_check_names_the_term_that_the_page_got_wrong(cml_config):
    from zslib.engine.first_step import first_step

    step = first_step(cml_config, device="cpu")
    emb = step.model(step.images)
    right = step.method.loss(emb, step.labels)
    with pytest.raises(AssertionError, match="'ec'"):
        step.check({"triplet": right, "ec": torch.tensor(1.0), "dc": torch.tensor(0.0)})
    with pytest.raises(AssertionError, match="the method's are"):
        step.check({"triplet": right})
