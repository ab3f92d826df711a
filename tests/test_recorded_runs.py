"""The recorded runs (zslib.engine.store.recorded_runs, provenance_summary) and the book page that lists them
(book/recorded_runs.ipynb), whose code is run here against folders made by the test."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from zslib.engine.config import Config
from zslib.engine.store import Result, ResultFileError, provenance_summary, recorded_runs
from zslib.engine.train.history import History

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "book" / "recorded_runs.ipynb"


def _save(folder: Path, name: str, seed: int = 0, r1: float = 0.5) -> Path:
    config = Config.from_profile("full", method="cml", seed=seed, name=name)
    provenance = {"complete": True, "git_commit": "0123456789abcdef" * 2 + "01234567", "device": "cuda (NVIDIA H100)",
                  "timestamp": "2026-11-20T11:15:42+01:00", "wall_seconds": 3600.04, "zslib_version": "0.1.0",
                  "torch_version": "2.14.1", "seed": seed, "profile": "full"}
    metrics = {"unseen": {"R@1": r1, "NMI": 0.61}, "seen": {"R@1": 0.93}}
    return Result(config, metrics, History(), provenance).save(folder / f"{name}-{seed}.json")


def test_recorded_runs_lists_only_the_recorded_folder_in_name_order(tmp_path):
    assert recorded_runs(tmp_path) == []
    _save(tmp_path, "made-here")  # a run of this checkout, not recorded
    b = _save(tmp_path / "recorded", "b-run")
    a = _save(tmp_path / "recorded", "a-run", seed=1)
    runs = recorded_runs(tmp_path)
    assert [r.path for r in runs] == [a, b]


def test_a_damaged_recorded_file_is_an_error_not_a_missing_run(tmp_path):
    (tmp_path / "recorded").mkdir()
    (tmp_path / "recorded" / "broken.json").write_text("{not json")
    with pytest.raises(ResultFileError, match="broken.json"):
        recorded_runs(tmp_path)


def test_provenance_summary_reads_the_file_as_written(tmp_path):
    path = _save(tmp_path / "recorded", "cml-cub", seed=3)
    stored = json.loads(path.read_text())  # the oracle: the JSON itself, not zslib's reading of it
    row = provenance_summary(recorded_runs(tmp_path)[0])
    assert row["file"] == path.name and row["run"] == "cml-cub"
    for key in ("profile", "dataset", "backbone", "method", "loss", "seed"):
        assert row[key] == stored["config"][key], key
    assert row["device"] == stored["provenance"]["device"]
    assert row["commit"] == stored["provenance"]["git_commit"][:12]
    assert row["date"] == "2026-11-20 10:15 UTC"  # 11:15 at UTC+1
    assert row["wall seconds"] == 3600.0
    assert (row["zslib"], row["torch"]) == ("0.1.0", "2.14.1")


def test_provenance_summary_says_none_where_the_file_is_silent(tmp_path):
    r = Result(Config(), {"unseen": {"R@1": 0.2}}, History(), {"complete": True})
    row = provenance_summary(r)
    assert row["file"] is None
    assert all(row[k] is None for k in ("device", "commit", "date", "wall seconds", "zslib", "torch"))


def _shown(obj):
    """What a reader sees of ``obj``, as text: Markdown as its source, a section's text and its table in full."""
    import IPython.display

    from zslib.analysis.tables import SearchableTable

    if isinstance(obj, IPython.display.Markdown):
        return obj.data
    if hasattr(obj, "markdown"):  # a Section
        table = getattr(obj, "table", None)
        table = table.frame if isinstance(table, SearchableTable) else table
        return obj.markdown() + ("" if table is None else "\n" + table.to_string())
    return obj


def _run_page(monkeypatch, results: Path, capsys) -> str:
    """Run the page's code cells in this process, with ``results`` as the results folder, showing the value of a
    cell's last expression as a notebook does; return what a reader would see, as text."""
    import ast

    import IPython.display

    monkeypatch.setenv("ZS_RESULTS", str(results))
    monkeypatch.setattr(IPython.display, "display", lambda obj, *a, **k: print(_shown(obj)))
    namespace: dict = {}
    for cell in nbformat.read(PAGE, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, PAGE.name, "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), PAGE.name, "eval"), namespace)
            if value is not None:
                print(_shown(value))
    return capsys.readouterr().out


def test_the_page_says_that_no_run_is_recorded_yet(tmp_path, monkeypatch, capsys):
    out = _run_page(monkeypatch, tmp_path, capsys)
    assert "No run is recorded yet" in out and "No metrics to show" in out


def test_the_page_lists_every_recorded_run_with_its_provenance_and_metrics(tmp_path, monkeypatch, capsys):
    import pandas as pd

    paths = [_save(tmp_path / "recorded", "cml-cub", seed=s, r1=r1) for s, r1 in ((0, 0.5125), (1, 0.4875))]
    with pd.option_context("display.width", 1000, "display.max_columns", 100):
        out = _run_page(monkeypatch, tmp_path, capsys)
    assert "**2 runs** are recorded" in out and "No run" not in out
    # one row each in the searchable table; the first run's name heads its metrics too
    assert [out.count(p.name) for p in paths] == [2, 1]
    for text in ("cuda (NVIDIA H100)", "0123456789ab", "2026-11-20 10:15 UTC", "3600.0", "cub200",
                 "51.25", "48.75", "0.5125", "0.93"):  # the table in %, the first run's metrics as stored
        assert text in out, text


# ------------------------------------------------------------------------------------------ analysis records
def _save_analysis(folder: Path, seed: int = 0, **provenance):
    from zslib.analysis.records import AnalysisRecord
    from zslib.engine.config import config_hash

    config = Config.from_profile("real", method="jrd", loss="am_softmax", seed=seed)
    prov = {"git_commit": "fedcba9876543210" * 2 + "fedcba98", "device": "cpu (x86_64, 2 cores)",
            "timestamp": "2026-11-24T16:10:07+00:00", "run_file": f"jrd-run-{config_hash(config)}.json",
            "run_commit": "1d09565586d046fd3aa0868ee6fb621734ab232e", **provenance}
    name = f"jrd-am_softmax-flowers102-s{seed}-{config_hash(config)}-bound_terms.json"
    return AnalysisRecord("bound_terms", config, {"k": 1}, {"lambda": 0.3, "d_H": 0.9}, prov).save(folder / name)


def test_recorded_analysis_records_lists_only_the_recorded_folder_in_name_order(tmp_path):
    from zslib.analysis.records import recorded_analysis_records

    assert recorded_analysis_records(tmp_path) == []
    _save_analysis(tmp_path / "analyses")  # made here, not recorded
    b = _save_analysis(tmp_path / "recorded" / "analyses", seed=1)
    a = _save_analysis(tmp_path / "recorded" / "analyses", seed=0)
    assert [r.path for r in recorded_analysis_records(tmp_path)] == [a, b]
    (tmp_path / "recorded" / "analyses" / "broken.json").write_text("{not json")
    with pytest.raises(ResultFileError, match="broken.json"):
        recorded_analysis_records(tmp_path)


def test_analysis_summary_reads_the_record_as_written(tmp_path):
    from zslib.analysis.records import analysis_summary, load_analysis

    path = _save_analysis(tmp_path, seed=2, model_from="retrained", reproduced_max_metric_diff=0.0)
    stored = json.loads(path.read_text())  # the oracle: the JSON itself
    row = analysis_summary(load_analysis(path))
    assert row["file"] == path.name and row["analysis"] == "bound_terms" and row["seed"] == 2
    assert row["run"] == stored["config"]["name"] and row["profile"] == "real"
    assert row["config hash"] == stored["config_hash"] and row["config hash"] in path.name
    assert row["run file"] == stored["provenance"]["run_file"]
    assert row["commit"] == "fedcba987654" and row["run commit"] == "1d09565586d0"
    assert row["date"] == "2026-11-24 16:10 UTC" and row["device"] == "cpu (x86_64, 2 cores)"
    assert row["model_from"] == "retrained" and row["reproduced_max_metric_diff"] == 0.0
    bare = analysis_summary(load_analysis(_save_analysis(tmp_path / "x", git_commit=None, timestamp=None)))
    assert bare["commit"] is None and bare["date"] is None
    assert bare["model_from"] is None and bare["reproduced_max_metric_diff"] is None


def test_the_page_lists_the_analysis_records(tmp_path, monkeypatch, capsys):
    import pandas as pd

    _save(tmp_path / "recorded", "cml-cub")
    paths = [_save_analysis(tmp_path / "recorded" / "analyses", seed=s, model_from="retrained",
                            reproduced_max_metric_diff=d) for s, d in ((0, 0.0), (1, 0.0025))]
    with pd.option_context("display.width", 1000, "display.max_columns", 100, "display.max_colwidth", 100):
        out = _run_page(monkeypatch, tmp_path, capsys)
    assert "**2 analysis records**" in out and "of 2 recorded runs" in out
    for p in paths:
        assert p.name in out
    for text in ("bound_terms", "fedcba987654", "1d09565586d0", "2026-11-24 16:10 UTC", "retrained", "0.0025"):
        assert text in out, text


def test_the_page_says_that_no_analysis_is_recorded_yet(tmp_path, monkeypatch, capsys):
    _save(tmp_path / "recorded", "cml-cub")
    assert "No analysis is recorded yet" in _run_page(monkeypatch, tmp_path, capsys)


def test_the_page_lists_the_runs_that_keep_weights_with_their_sizes(tmp_path, monkeypatch, capsys):
    paths = [_save(tmp_path / "recorded", "cml-cub", seed=s) for s in (0, 1)]
    assert "No recorded run keeps its trained weights" in _run_page(monkeypatch, tmp_path, capsys)
    kept = tmp_path / "recorded" / "weights" / f"{paths[1].stem}.pt"
    kept.parent.mkdir()
    kept.write_bytes(b"0" * 3 * 2**19)  # 1.5 MB: the page lists the file, it does not load it
    out = _run_page(monkeypatch, tmp_path, capsys)
    assert "**1 of 2 recorded runs keep their trained weights** (1.5 MB in all)" in out
    assert kept.name in out and paths[0].stem + ".pt" not in out


def test_the_table_of_recorded_runs_has_every_run_and_its_own_numbers():
    from zslib.engine import store

    runs = store.recorded_runs()
    table = store.recorded_runs_table(runs)
    assert len(table) == len(runs) == len(list((store.recorded_dir()).glob("*.json")))
    row = table.set_index("file").loc[runs[-1].path.name]
    assert row["seed"] == runs[-1].config.seed
    assert row["unseen R@1 %"] == round(100 * runs[-1].metrics["unseen"]["R@1"], 2)
