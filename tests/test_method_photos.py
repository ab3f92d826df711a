"""The method chapters draw the method's own model on the photographs: DeML(1,4), Adapt-Adv, ZSML and JRD join the
untrained features and the baseline in the retrieval figure (and get a t-SNE of their own), loaded from the kept
weights of their recorded seed-0 run. Here the figure function is replaced by one that records what it was asked
to draw, so no photograph or model is needed; that the kept weights load and reproduce their runs is
tests/test_kept_weights.py's job."""
from __future__ import annotations

import pytest

from zslib.analysis.photos import has_kept_weights


def _asked(monkeypatch, module):
    asked = {}

    def record(results, **kwargs):
        asked.update(results=dict(results), **kwargs)
        return "drawn"
    monkeypatch.setattr(module, "retrieval_section", record)
    return asked


def _check(asked, method: str, baseline: str, run):
    assert list(asked["results"])[-1] == method and asked["results"][method] is run and has_kept_weights(run)
    assert run.config.seed == 0 and baseline in asked["results"]
    assert list(asked["tsne_of"]) == [baseline, method]  # a t-SNE of the method beside the baseline's


def test_deml_draws_deml_itself(monkeypatch):
    from zslib.methods.deml import recipes
    from zslib.present.deml import real
    from zslib.present.deml.study import DemlStudy

    study = DemlStudy(train=False)
    runs = study.runs()
    if not runs or recipes.DEML4 not in runs:
        pytest.skip("the DeML real-profile runs are not recorded in this copy")
    asked = _asked(monkeypatch, real)
    assert real.photo_figures(study) == "drawn"
    _check(asked, "DeML(1,4)", "baseline head", runs[recipes.DEML4][0])
    assert "kept weights" in asked["note"] and "not in the picture" not in asked["note"]


def test_adapt_adv_draws_the_full_method(monkeypatch):
    from zslib.methods.adapt_adv.recipes import METHOD
    from zslib.present.adapt_adv import photos
    from zslib.present.adapt_adv.study import AdaptAdvStudy

    study = AdaptAdvStudy(train=False)
    if not study.runs or METHOD not in study.runs:
        pytest.skip("the Adapt-Adv real-profile runs are not recorded in this copy")
    asked = _asked(monkeypatch, photos)
    assert photos.photo_sections(study) == "drawn"
    run = study.runs[METHOD][0]
    assert run.config.method_params["use_adversary"] and run.config.method_params["use_gdfl"]  # the full method
    _check(asked, "Adapt-Adv", "triplet base", run)
    assert list(asked["results"]) == ["untrained features", "triplet base", "Adapt-Adv"]
    assert "kept weights" in asked["note"] and "not in the picture" not in asked["note"]
    assert "not drawn" not in asked["note"]


def test_zsml_draws_zsml_from_its_kept_weights(monkeypatch):
    from zslib.present.zsml import real
    from zslib.present.zsml.study import ZSMLStudy

    flowers = real.real_comparison(ZSMLStudy(train=False))
    if flowers is None:
        pytest.skip("the ZSML real-profile runs are not recorded in this copy")
    asked = _asked(monkeypatch, real)
    assert real.photo_figures(flowers) == "drawn"
    _check(asked, "ZSML", "baseline head", flowers.zsml[0])
    assert asked["tolerance"] == {"ZSML": 0.03}  # its metrics score a 4-per-class sample: the file states 3 points


def test_jrd_draws_jrd_from_its_kept_weights(monkeypatch):
    from zslib.methods.jrd.recipes import JRD
    from zslib.present.jrd import photos
    from zslib.present.jrd.study import JRDStudy

    study = JRDStudy(train=False)
    if study.floor is None or not study.main:
        pytest.skip("the JRD real-profile runs are not recorded in this copy")
    asked = _asked(monkeypatch, photos)
    assert photos.photo_section(study) == "drawn"
    run = study.main[JRD][0]
    assert run.config.method_params["alpha"] == 1.0  # the paper's alpha
    _check(asked, "JRD", "AM-Softmax", run)
