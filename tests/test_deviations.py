"""The tables of departures from the papers (zslib.analysis.deviations) say what the code does.

Every paper has a table and every table holds the common rows. Every switch a row names is real: the config takes
the paper's value and it changes the run's hash, so it is another experiment. The book-default cells are read from
the code: change a default (a method's declared Param, the real profile, the function that builds the chapter's
config) and the table changes with it.
"""
from __future__ import annotations

import dataclasses

import pytest

from zslib.analysis import deviations as D
from zslib.engine.config import config_hash
from zslib.engine.losses import LOSSES
from zslib.engine.registry import PAPERS, get_method
from zslib.engine.method import Param

ROWS = [(paper, row) for paper in PAPERS for row in D.deviations(paper)]
SWITCHED = [(paper, row) for paper, row in ROWS if row.switch is not None]


def _row(paper: str, what: str) -> D.Deviation:
    return next(row for row in D.deviations(paper) if row.what == what)


def _table_row(table: str, what: str) -> list[str]:
    """The cells of the row of ``what`` in a rendered table."""
    line = next(line for line in table.splitlines() if line.startswith(f"| **{what}** |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def _declared(config, key):
    """The value ``config`` trains with for a switch's key, read straight from where the code declares it."""
    if key.startswith("method_params."):
        name = key.split(".", 1)[1]
        return config.method_params.get(name, get_method(config.method).params[name].default)
    if key.startswith("loss_params."):
        name = key.split(".", 1)[1]
        return config.loss_params.get(name, LOSSES[config.loss].defaults[name])
    return getattr(config, key)


@pytest.mark.parametrize("paper", list(PAPERS))
def test_every_paper_has_a_table_that_holds_the_common_rows(paper):
    rows = D.deviations(paper)
    assert [r.key for r in rows if r.key] == list(D.COMMON)
    table = D.deviation_table(paper)
    assert table.splitlines()[0].startswith("| What | The paper | The book by default |")
    common_whats = [r.what for r in D.common_rows({k: "x" for k in D.COMMON})]
    for what in common_whats:
        assert len(_table_row(table, what)) == 5, what
    assert len(table.splitlines()) == len(rows) + 2
    with pytest.raises(KeyError, match="no deviation table"):
        D.deviation_table("nosuch")


@pytest.mark.parametrize("paper,row", SWITCHED, ids=[f"{p}: {r.what}" for p, r in SWITCHED])
def test_each_switch_is_accepted_and_changes_the_hash(paper, row):
    config = row.config()
    switched = row.switch.apply(config)  # checked by Config and the method, as any config is
    assert config_hash(switched) != config_hash(config)
    assert row.switch.matches(switched) and not row.switch.matches(config)
    assert get_method(switched.method).settings(switched.method_params)  # the method accepts the parameters
    # drawn for the switched config, the row reads the paper's values (or the switch's, for a partial one)
    cell = dataclasses.replace(row, config=lambda: switched).book_cell()
    for key, value in row.switch.settings.items():
        assert f"{key.split('.')[-1]}={D._show(value)}`" in cell
    assert cell.endswith("as the switch sets it" if row.switch.partial else "the other reading" if row.switch.reading
                         else "the paper's form")


@pytest.mark.parametrize("paper,row", SWITCHED, ids=[f"{p}: {r.what}" for p, r in SWITCHED])
def test_the_book_default_cell_is_the_codes_default(paper, row):
    config = row.config()
    cells = _table_row(D.deviation_table(paper), row.what)
    for key in row.switch.settings:
        assert f"{key.split('.')[-1]}={D._show(_declared(config, key))}`" in cells[2], (key, cells[2])


def test_a_switch_naming_no_parameter_of_the_method_is_refused():
    row = _row("deml", "What the adversary compares")
    with pytest.raises(ValueError, match="has no parameter"):
        D.Switch({"method_params.adversary_inputs": "raw"}).apply(row.config())
    with pytest.raises(KeyError, match="no field"):
        D.read_setting(row.config(), "adversary_input")


def test_changing_a_methods_declared_default_changes_the_table(monkeypatch):
    from zslib.methods.cml.method import CML
    from zslib.methods.deml.method import DeML

    before = _table_row(D.deviation_table("deml"), "What the adversary compares")
    assert "`adversary_input='unit'`" in before[2]
    spec = DeML.params["adversary_input"]
    monkeypatch.setitem(DeML.params, "adversary_input", dataclasses.replace(spec, default="raw"))
    after = _table_row(D.deviation_table("deml"), "What the adversary compares")
    assert after[2] == "method parameter `adversary_input='raw'`: the paper's form" and after[4] == "no longer differs"

    spec = CML.params["ec_features"]  # an omit_default parameter: absent from the config, read from its Param
    monkeypatch.setitem(CML.params, "ec_features", Param("unit", spec.doc, spec.check, omit_default=True))
    assert "`ec_features='unit'`" in _table_row(D.deviation_table("cml"), "What the energy confusion reads")[2]


def test_changing_the_profile_or_the_chapters_config_changes_the_table(monkeypatch):
    from zslib.engine.profile import PROFILES
    from zslib.methods.zsml import recipes

    real = PROFILES["real"]
    assert "(new_layer_mult × lr = 0.0001)" in _table_row(D.deviation_table("jrd"), "The proxies' learning rate")[2]
    monkeypatch.setitem(PROFILES, "real", real.replace(new_layer_mult=100.0, iterations=400))
    table = D.deviation_table("jrd")
    assert "(new_layer_mult × lr = 0.01)" in _table_row(table, "The proxies' learning rate")[2]
    assert _table_row(table, "Training length and batch")[2].startswith("400 steps")

    configs = recipes.real_configs()
    monkeypatch.setattr(recipes, "real_configs", lambda: {**configs, recipes.ZSML: configs[recipes.ZSML].replace(
        method_params={**configs[recipes.ZSML].method_params, "eval_per_class": None})})
    cells = _table_row(D.deviation_table("zsml"), "Images scored at evaluation")
    assert cells[2] == "method parameter `eval_per_class=None`: the paper's form"
