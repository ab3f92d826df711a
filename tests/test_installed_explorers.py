"""The explorers and photo notes as a reader of an installed zslib meets them (``pip install``, e.g. on Colab).

Outside a checkout the recorded runs installed with zslib (metrics, no weights) are found by config hash; an
explorer that needs a trained network must train its own run, never load such a record. Without Flowers-102 the
notes say which data is missing, where it was looked for and the command that fetches it; an explorer's first
query is one a model answers right.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from zslib.analysis import explorers as ex
from zslib.methods.cml.explore import cml_confusion
from zslib.analysis import photos as P


class Photos(torch.utils.data.Dataset):
    def __init__(self, n_classes=6, per_class=5):
        self.labels = np.repeat(np.arange(n_classes), per_class)
        self.x = torch.rand(len(self.labels), 3, 12, 12, generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], int(self.labels[i])


def _installed(monkeypatch, tmp_path):
    """zslib as a pip install sees it: no checkout, the recorded runs in <prefix>/share/zslib/recorded."""
    import zslib.engine.profile
    import zslib.engine.store

    installed = tmp_path / "share" / "zslib" / "recorded"
    installed.mkdir(parents=True)
    monkeypatch.setattr(zslib.engine.profile, "repository_root", lambda: None)
    monkeypatch.setattr(zslib.engine.store, "installed_recorded_dir", lambda: installed)
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "content" / "results"))
    return installed


def test_cml_confusion_trains_a_run_that_is_installed_as_metrics_only(tmp_path, monkeypatch):
    """The lambda1 = 0.2 run is among the installed recorded runs (metrics only): the explorer trains it with its
    weights in its own folder, leaves the installed record alone and shows the new run's own Recall@1."""
    from zslib.engine.store import MANIFEST, recorded_dir, result_path, write_manifest
    from zslib.experiment import Config, run
    from zslib.methods.cml.method import with_confusion

    short = Config.from_profile("quick", loss="triplet", iterations=10, eval_every=10)
    lam = with_confusion(short, lambda1=0.2).replace(seed=1)
    made = run(lam, tmp_path / "made", progress=False)
    installed = _installed(monkeypatch, tmp_path)
    shutil.copy(made.path, installed / made.path.name)  # a recorded run: its JSON, no checkpoint
    write_manifest(installed.parent)  # installed with its manifest, as the wheel ships the recorded runs
    before = (installed / made.path.name).read_bytes()
    assert recorded_dir() == installed and result_path(lam, tmp_path / "content" / "results").parent == installed

    explorer = cml_confusion(short, lambdas=(0.2,), seed=1, classes=4, per_class=6, max_iter=250)
    own = tmp_path / "content" / "results" / "explorers"
    again = run(lam, own, progress=False)  # the run the explorer trained, loaded from its own folder
    assert again.path.parent == own and again.checkpoint.is_file()
    assert f"unseen Recall@1 {100 * again.metric('R@1'):.1f}%" in explorer.set(lambda1="0.2").data["caption"]
    assert (installed / made.path.name).read_bytes() == before
    assert sorted(p.name for p in installed.iterdir()) == sorted([made.path.name, MANIFEST])


def test_the_fallback_note_names_the_missing_photographs_where_and_how_to_fetch_them(tmp_path, monkeypatch):
    from zslib.experiment import Config

    nowhere = tmp_path / "a-rather-long-folder-name-that-would-be-cut-off-in-the-middle" / "of" / "its" / "path"
    monkeypatch.setenv("ZS_DATA", str(nowhere))
    monkeypatch.setenv("ZS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("ZS_DOWNLOAD", "0")
    real = Config.from_profile("real", method="pretrained")
    note = ex.retrieval_of_runs({"untrained": real}, queries=2, static_queries=1, k=2).note
    assert note.startswith("The real profile's photographs (Oxford Flowers-102) are not on this machine"), note
    assert "synthparts" not in note
    assert f"looked for in {nowhere}/flowers102 and {nowhere} (ZS_DATA)" in note  # whole, not cut
    assert f"ZS_DATA={nowhere} python -c \"import zslib.engine.data as d; d.download('flowers102')\"" in note
    assert "ZS_DOWNLOAD=1" in note and "the same methods run on the quick profile" in note


def test_the_fetch_command_of_the_note_fetches_into_the_folder_it_names(tmp_path, monkeypatch):
    """The command the note prints, run as printed, asks for Flowers-102 in the folder the note names."""
    import re
    import zslib.engine.data as data

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "d"))
    text = P.missing_photos_text(FileNotFoundError("no flowers102"), markdown=False)
    env, code = re.search(r"ZS_DATA=(\S+) python -c \"(.*?)\"", text).groups()
    asked = []
    monkeypatch.setattr(data, "download", lambda name, root=None: asked.append((name, str(data.data_root(root)))))
    monkeypatch.setenv("ZS_DATA", env)
    exec(code, {})
    assert asked == [("flowers102", str(tmp_path / "d"))]


def test_the_note_shows_no_local_path_of_a_default_folder(monkeypatch):
    """Without ZS_DATA the default folder is shown as a reader finds it (``<checkout>/...`` or ``~/...``): the
    built pages show no path of the build machine."""
    from pathlib import Path

    monkeypatch.delenv("ZS_DATA", raising=False)
    monkeypatch.delenv(P.REQUIRE_DATA_ENV, raising=False)  # CI declares the photographs present
    text = P.missing_photos_text()
    assert "`<checkout>/data/flowers102`" in text and str(Path.home()) not in text and "/work/" not in text
    assert "`python -c \"import zslib.engine.data as d; d.download('flowers102')\"`" in text
    assert P.shown_path(Path.home() / "zslib_data" / "flowers102") == "~/zslib_data/flowers102"
    md = P.photos_unavailable("The retrieval figure", FileNotFoundError("x")).data
    assert md.startswith("*The retrieval figure is drawn on the Flowers-102 photographs. The real profile's")


def test_the_first_query_is_one_a_model_answers_right():
    """Only class 3 is clustered, the second model is noise; the seeded spread of queries starts with a query that
    both miss: the first query shown (and the first of the static page) is nevertheless one whose nearest
    neighbour is of its class under some model."""
    photos = Photos()
    y = photos.labels
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(y.size, 16))
    emb[y == 3] = 5.0 + 0.01 * rng.normal(size=((y == 3).sum(), 16))
    explorer = ex.retrieval(photos, {"a": emb, "b": rng.normal(size=(y.size, 16))}, k=2, queries=6, static_queries=2, seed=4)
    control = explorer.controls[0]
    first = control.options[control.default][1]
    assert max(explorer.set(query=first).data["recall@1"].values()) == 1.0
    assert explorer.static_html().count("R@1 = 1") >= 1
    # the other queries are all still offered, each once
    assert sorted(v for _, v in control.options) == sorted(set(v for _, v in control.options))
    assert len(control.options) == 6


@pytest.mark.parametrize("err", [None, "missing data", FileNotFoundError("gone")])
def test_a_missing_dataset_is_said_missing(err, monkeypatch):
    monkeypatch.setenv("ZS_DATA", "/nowhere")
    assert "are not on this machine: looked for in `/nowhere/flowers102`" in P.missing_photos_text(err)
