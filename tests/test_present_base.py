"""The presentation floor's pair (zslib.present.base): a Study reads each grid once, states what is missing and
trains only when asked; a Section displays caption, figure, table, notes and the paper's tables in that order."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from zslib.engine.config import Config  # noqa: E402
from zslib.present import Section, Sections, Study  # noqa: E402

TINY = dict(iterations=2, eval_every=2, batch_classes=4, batch_per_class=2, synth_images_per_class=8,
            image_size=32, resize_size=36, embedding_dim=16)


class _Quick(Study):
    profile = "quick"


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path))
    monkeypatch.setenv("ZS_PROGRESS", "none")
    return tmp_path


def test_a_study_reads_a_grid_once_and_names_what_is_missing(results, monkeypatch):
    grid = {"triplet": Config.from_profile("quick", **TINY)}
    reading = _Quick(train=False)
    assert reading.grid("main", grid, seeds=[0]) is None
    assert "main" in reading.missing and "not stored" in reading.missing["main"]
    assert reading.missing_note().startswith("*main: not shown, ") and reading.missing_note("other") == ""

    trained = _Quick(train=True).grid("main", grid, seeds=[0])
    assert [r.config.seed for r in trained["triplet"]] == [0]
    again = _Quick(train=False)
    first = again.grid("main", grid, seeds=[0])
    assert first["triplet"][0].metrics == trained["triplet"][0].metrics

    from zslib.present import base

    def no_second_reading(*args, **kwargs):
        raise AssertionError("a grid the study holds was read again")
    monkeypatch.setattr(base, "run_grid", no_second_reading)  # the name Study.grid calls
    assert again.grid("main", grid, seeds=[0]) is first


def test_a_study_trains_by_default_only_on_its_own_profile(results):
    import zslib

    zslib.set_profile("quick")
    try:
        assert _Quick().train is True
        assert _Quick.cached() is _Quick.cached() and _Quick.cached(False) is not _Quick.cached()
    finally:
        zslib.set_profile(None)
    assert Study.profile == "real"


def test_a_section_shows_its_parts_in_order(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    fig, ax = plt.subplots()
    table = pd.DataFrame({"R@1": [1.0]})
    s = Section(caption="above", figure=fig, table=table, notes=["below", "more"],
                paper=(("chen2022cml", "IV"),))
    s._ipython_display_()
    kinds = [type(o).__name__ for o in shown]
    assert kinds == ["Markdown", "Figure", "DataFrame", "Markdown", "Markdown", "DataFrame"]
    assert shown[0].data == "above" and shown[3].data == "below\n\nmore" and shown[2] is table
    assert shown[4].data.startswith("*") and "Chen" in shown[4].data  # the paper table under its citation
    assert not plt.fignum_exists(fig.number)  # closed after it was shown: not drawn a second time
    assert s.markdown() == "above\n\nbelow\n\nmore"

    shown.clear()
    both = Sections([Section(caption="one"), None, Section(notes=["two"])])
    both._ipython_display_()
    assert [o.markdown() for o in shown] == ["one", "two"] and both.markdown() == "one\n\ntwo"
