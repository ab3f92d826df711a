"""The interactive explorers (zslib.analysis.explorers), driven headlessly as a reader would drive them.

Each test moves a live control (``Explorer.set`` and the ipywidgets control itself) and checks that the frame
on display changed *to the right thing*: the neighbours of the new query against a numpy brute-force search,
Eq. 22's lambda and ZSML's Eq. 3 labels against their formulas written out in numpy, the JRD means against
numpy's mean. The static view is checked for what the browser needs: one state per static combination of
controls, valid JSON, no address outside the page.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

from zslib.analysis import explorers as ex
from zslib.methods.adapt_adv.explore import adapt_adv_lambda
from zslib.methods.cml.explore import cml_confusion


class Photos(torch.utils.data.Dataset):
    """``n_classes`` classes of ``per_class`` random 3x12x12 images with labels."""

    def __init__(self, n_classes=6, per_class=5, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = np.repeat(np.arange(n_classes), per_class)
        self.x = torch.rand(len(self.labels), 3, 12, 12, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], int(self.labels[i])


def _cosine_loo(emb: np.ndarray, q: int, k: int) -> list[int]:
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = unit @ unit[q]
    sim[q] = -np.inf
    return list(np.argsort(-sim, kind="stable")[:k])


def _states(html: str) -> dict:
    """The frames the static view carries: those in its JSON, and the one shown first (in the view itself)."""
    text = re.search(r'<script type="application/json" class="zs-states">(.*?)</script>', html, re.S).group(1)
    states = json.loads(text.replace("<\\/", "</"))["states"]
    initial = re.search(r'<div class="zs-view" data-zs-initial="([0-9,]+)">', html).group(1)
    assert initial not in states  # each frame once in the page
    view = html.split(f'data-zs-initial="{initial}">', 1)[1]
    ends = [view.find(marker) for marker in ('</div><div style="font-size:85%', '</div><script type="application/json"')]
    states[initial] = view[:min(e for e in ends if e >= 0)]
    return states


def _no_address_outside(html: str) -> None:
    assert not re.search(r'(src|href)="(?!data:)', html), "the static view refers to something outside the page"
    assert "http://" not in html and "https://" not in html


@pytest.fixture(scope="module")
def photos():
    return Photos()


@pytest.fixture(scope="module")
def retrieval(photos):
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(6, 8))
    good = centres[photos.labels] + 0.3 * rng.normal(size=(len(photos), 8))
    noise = rng.normal(size=(len(photos), 8))
    explorer = ex.retrieval(photos, {"untrained": noise, "trained": good}, k=3, queries=6, static_queries=3)
    return explorer, {"untrained": noise, "trained": good}


def test_retrieval_shows_the_neighbours_of_the_chosen_query(retrieval, photos):
    explorer, embs = retrieval
    options = [v for _, v in explorer.controls[0].options]
    assert len(options) == 6 and len({photos.labels[i] for i in options}) == 6  # one query per class
    shown = []
    for q in options[:3]:
        frame = explorer.set(query=q)
        assert frame.data["query"] == q
        for name, e in embs.items():
            expected = _cosine_loo(e, q, 3)
            assert frame.data["neighbours"][name] == expected
            hits = photos.labels[expected] == photos.labels[q]
            assert frame.data["recall@1"][name] == float(hits[0])
            assert frame.data["recall@3"][name] == float(hits.any())
        shown.append(frame.html)
    assert len(set(shown)) == 3
    # the trained embedding clusters classes: its neighbours are all correct, the noise's are not
    assert all(explorer.frame(query=q).data["recall@3"]["trained"] == 1.0 for q in options)


def test_retrieval_live_widget_follows_its_control(retrieval):
    pytest.importorskip("ipywidgets")
    explorer, _ = retrieval
    box = explorer.widget()
    menu = explorer._widget_controls[0]
    options = [v for _, v in explorer.controls[0].options]
    menu.value = options[4]  # a query the static page does not carry: computed live
    assert explorer.values["query"] == options[4]
    assert explorer._view.value == explorer.frame(query=options[4]).html
    before = explorer._view.value
    explorer.set(query=options[5])
    assert menu.value == options[5] and explorer._view.value != before
    assert box.children[-1] is explorer._view


def test_retrieval_static_view_holds_the_static_queries_only(retrieval):
    explorer, _ = retrieval
    page = explorer.static_html()
    states = _states(page)
    assert sorted(states) == ["0", "1", "2"]
    options = [v for _, v in explorer.controls[0].options]
    for i in range(3):
        assert states[str(i)] == explorer.frame(query=options[i]).html
    _no_address_outside(page)
    assert page.count('<option value=') == 3


def test_embedding_switches_models_and_carries_a_photo_per_dot(photos):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(len(photos), 5)), rng.normal(size=(len(photos), 5))
    explorer = ex.embedding({"A": a, "B": b}, photos, classes=4, per_class=4, max_iter=250)
    fa = explorer.set(model="A")
    fb = explorer.set(model="B")
    assert fa.data["images"] == fb.data["images"] and len(fa.data["images"]) == 16
    assert len({photos.labels[i] for i in fa.data["images"]}) == 4
    assert fa.data["coords"] != fb.data["coords"]
    for f in (fa, fb):
        assert f.html.count("<circle") == 16 and f.html.count('<image class="zs-photo"') == 16
        xy = np.asarray(f.data["coords"])
        assert xy.min() >= 0 and xy.max() <= 1
    page = explorer.static_html()
    assert set(_states(page)) == {"0", "1"}
    _no_address_outside(page)
    pytest.importorskip("ipywidgets")
    box = explorer.widget()  # live: the menu redraws the map, and the hover rule is scoped to the widget
    assert "zs-live" in box._dom_classes and ".zs-live .zs-pt:hover .zs-photo" in box.children[0].value
    explorer._widget_controls[0].value = "A"
    assert explorer._view.value == fa.html


class _History:
    def __init__(self, ce):
        self.ce = list(ce)

    def loss_curve(self, name):
        assert name == "classifier_ce"
        return list(range(1, len(self.ce) + 1)), self.ce


class _Run:  # what adapt_adv_lambda reads of a zslib.engine.store.Result
    def __init__(self, ce, **params):
        from types import SimpleNamespace
        self.history = _History(ce)
        self.config = SimpleNamespace(method_params=params)


def test_adapt_adv_lambda_is_eq22_of_the_previous_epoch_mean():
    rng = np.random.default_rng(0)
    lc = np.concatenate([np.linspace(4.0, 0.5, 90), 0.5 + 0.1 * rng.random(10)])
    explorer = adapt_adv_lambda(_Run(lc, lambda0=0.5, l_thresh=1.5, epoch_steps=20), num_classes=10)
    assert len(explorer.controls[0].options) == 5
    seen = set()
    for epoch in range(5):
        frame = explorer.set(epoch=epoch)
        setting = math.log(10) if epoch == 0 else lc[(epoch - 1) * 20:epoch * 20].mean()
        assert frame.data["setting_lc"] == pytest.approx(setting)
        assert frame.data["lambda"] == pytest.approx(-math.tanh(setting - 1.5) * 0.5)
        seen.add(frame.html)
    assert len(seen) == 5
    assert explorer.frame(epoch=0).data["lambda"] < 0 < explorer.frame(epoch=4).data["lambda"]
    with pytest.raises(ValueError, match="no adversary"):
        adapt_adv_lambda(_Run(lc, use_adversary=False), num_classes=10)


def test_deml_attention_converges_with_the_number_of_steps():
    g = torch.Generator().manual_seed(0)
    image = torch.rand(3, 24, 24, generator=g)
    fmaps = [torch.rand(1, 8, 6, 6, generator=g), torch.rand(1, 8, 3, 3, generator=g)]
    from zslib.methods.deml.explore import deml_attention

    explorer = deml_attention(image, fmaps, steps=(1, 5, 200))
    f1, f5, f200 = (explorer.set(T=t) for t in (1, 5, 200))
    assert f200.data["gap"] == pytest.approx(0.0, abs=1e-7)
    assert f1.data["gap"] > f5.data["gap"] > 0
    assert f1.data["map"].shape == (24, 24) and not np.allclose(f1.data["map"], f5.data["map"])
    assert len({f1.html, f5.html, f200.html}) == 3


def test_zsml_labels_follow_eq3_as_alpha_moves():
    from zslib.methods.zsml.explore import zsml_labels

    rng = np.random.default_rng(3)
    d2 = rng.random(50)
    positive = rng.random(50) < 0.4
    explorer = zsml_labels(alphas=(0.1, 0.3, 0.5), sq_dist=d2, positive=positive)
    assert explorer.values["alpha"] == 0.3  # the paper's value is the default
    for alpha in (0.1, 0.3, 0.5):
        y = explorer.set(alpha=alpha).data["labels"]
        expected = np.where(positive, 1 - alpha * d2, alpha * (1 - d2))  # beta = 1 - alpha
        np.testing.assert_allclose(y, expected, rtol=0, atol=1e-12)
        assert y[~positive].max() <= alpha and y[positive].min() >= 1 - alpha
    assert explorer.frame(alpha=0.1).html != explorer.frame(alpha=0.5).html
    with pytest.raises(ValueError, match="not an option"):
        explorer.set(alpha=0.25)


def test_jrd_bound_shows_the_seed_means_of_the_chosen_arm():
    from types import SimpleNamespace

    from zslib.methods.jrd.explore import jrd_bound

    class Record(dict):  # a bound_terms record: its terms by name, and its run's config
        config = SimpleNamespace(method_params={"alpha": 1.0})

    terms = ("seen_error", "unseen_error", "d_H", "lambda")
    records = {"AM-Softmax": [dict(zip(terms, (0.2, 0.6, 0.5, 0.3))), dict(zip(terms, (0.4, 0.8, 0.7, 0.1)))],
               "JRD": [Record(zip(terms, (0.3, 0.5, 0.2, 0.2))), Record(zip(terms, (0.5, 0.7, 0.4, 0.4)))]}
    explorer = jrd_bound(records)
    assert [label for label, _ in explorer.controls[0].options] == ["AM-Softmax", "JRD (alpha = 1)"]
    for arm, rows in records.items():
        means = explorer.set(arm=arm).data["means"]
        for term in terms:
            assert means[term] == pytest.approx(np.mean([r[term] for r in rows]))
    assert explorer.frame(arm="AM-Softmax").html != explorer.frame(arm="JRD").html


def test_static_view_of_two_controls_holds_every_static_combination():
    explorer = ex.Explorer("two knobs", [ex.Control("a", [1, 2, 3], "slider", static=[0, 2]),
                                         ex.Control("b", ["x", "y"])],
                           lambda a, b: ex.Frame(f"<p>{a}{b}</p>", {"a": a, "b": b}))
    states = _states(explorer.static_html())
    assert states == {"0,0": "<p>1x</p>", "0,1": "<p>1y</p>", "2,0": "<p>3x</p>", "2,1": "<p>3y</p>"}
    assert 'data-zs-steps="0,2"' in explorer.static_html()
    frame = explorer.set(a=2, b="y")
    assert frame.html == "<p>2y</p>"  # a value the static page leaves out is still computed live


def test_no_kernel_means_static_view_only(retrieval):
    bundle = retrieval[0]._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}


def test_bad_controls_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="no options"):
        ex.Control("empty", [])
    with pytest.raises(ValueError, match="static indices"):
        ex.Control("c", [1, 2], static=[5])
    explorer = ex.Explorer("t", [ex.Control("a", [1, 2])], lambda a: ex.Frame(str(a)))
    with pytest.raises(KeyError, match="unknown control"):
        explorer.frame(b=1)


def test_retrieval_of_runs_trains_the_runs_and_shows_their_neighbours(tmp_path, monkeypatch):
    from zslib.engine.train import embed
    from zslib.experiment import Config, build_data, load_model, run

    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "results"))
    short = Config.from_profile("quick", loss="triplet", iterations=10, eval_every=10)
    explorer = ex.retrieval_of_runs({"untrained": short.replace(method="pretrained"), "trained": short},
                                    seed=1, queries=4, static_queries=2, k=3)
    unseen = build_data(short.replace(seed=1))["unseen"]
    stored = run(short.replace(seed=1), tmp_path / "results" / "explorers", progress=False)  # the run it made
    trained = embed(load_model(stored), unseen)[0].numpy()
    for q in [v for _, v in explorer.controls[0].options]:
        assert explorer.set(query=q).data["neighbours"]["trained"] == _cosine_loo(trained, q, 3)
    assert "Seed 1" in explorer.note


def test_retrieval_of_runs_falls_back_to_the_quick_profile_without_the_photographs(tmp_path, monkeypatch):
    from zslib.experiment import Config

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "no-data"))
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("ZS_DOWNLOAD", "0")
    real = Config.from_profile("real", method="pretrained")
    explorer = ex.retrieval_of_runs({"untrained": real}, queries=2, static_queries=1, k=2)
    assert "the same methods run on the quick profile" in explorer.note
    with pytest.raises(Exception):
        ex.retrieval_of_runs({"untrained": real}, fallback=None)


def test_cml_confusion_slides_over_runs_trained_at_each_weight(tmp_path, monkeypatch):
    """The slider's frames are the runs of CML Eq. 11 at each lambda1 (0: the triplet alone): the caption's Recall@1
    is the stored run's own evaluation, and a different weight shows a different map."""
    from zslib.experiment import Config, run
    from zslib.methods.cml.method import with_confusion

    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "results"))
    short = Config.from_profile("quick", loss="triplet", iterations=10, eval_every=10)
    explorer = cml_confusion(short, lambdas=(0.0, 2.0), seed=1, classes=4, per_class=6, max_iter=250)
    control = explorer.controls[0]
    assert control.kind == "slider" and [v for _, v in control.options] == ["0", "2"]
    frames = {}
    for lam in (0.0, 2.0):
        frame = explorer.set(lambda1=f"{lam:g}")
        stored = run(with_confusion(short, lambda1=lam).replace(seed=1), tmp_path / "results" / "explorers",
                     progress=False)  # loaded, not trained again
        assert f"unseen Recall@1 {100 * stored.metric('R@1'):.1f}%" in frame.data["caption"]
        frames[lam] = frame.data["coords"]
    assert frames[0.0] != frames[2.0]
    with pytest.raises(ValueError, match="distinct non-negative"):
        cml_confusion(short, lambdas=(0.2, 0.2))


def test_cml_confusion_loads_the_runs_the_results_folder_holds_with_their_weights(tmp_path, monkeypatch):
    """A weight whose run is stored in the results folder with its checkpoint (the chapter's table trained it) is
    loaded, not trained again in results/explorers/; its caption's Recall@1 is that run's own evaluation. A stored
    run without its checkpoint (a recorded run: metrics only) is trained again."""
    from zslib.engine.config import config_hash
    from zslib.experiment import Config, run
    from zslib.methods.cml.method import with_confusion

    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "results"))
    short = Config.from_profile("quick", loss="triplet", iterations=10, eval_every=10).replace(seed=1)
    table_run = run(short, tmp_path / "results", progress=False)  # where run_grid stores the table's runs
    weightless = run(with_confusion(short, lambda1=0.2), tmp_path / "results", progress=False)
    weightless.checkpoint.unlink()
    explorer = cml_confusion(short, lambdas=(0.0, 0.2, 2.0), seed=1, classes=4, per_class=6, max_iter=250)
    trained_here = sorted(p.name for p in (tmp_path / "results" / "explorers").glob("*.json"))
    assert not any(config_hash(short) in name for name in trained_here)  # lambda1 = 0: loaded, not trained again
    assert len(trained_here) == 2  # lambda1 = 0.2 (no checkpoint) and 2 (not stored) trained, both at once
    assert f"unseen Recall@1 {100 * table_run.metric('R@1'):.1f}%" in explorer.set(lambda1="0").data["caption"]
    assert "lambda1 = 0: the run stored in the results folder, loaded with its weights" in explorer.note
