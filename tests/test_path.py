"""zslib.teaching.path: the chapter card's numbers are counted and measured, not typed."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from zslib.engine.config import Config
from zslib.engine.registry import PAPERS
from zslib.engine.store import Result
from zslib.engine.train.history import History
from zslib.teaching import path as P

REPO = Path(__file__).resolve().parents[1]


def test_reading_time_counts_words_and_visible_code(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(" ".join(["word"] * 1000)),
                                         nbformat.v4.new_code_cell("\n".join(["x = 1"] * 100)),
                                         nbformat.v4.new_code_cell("\n".join(["y = 1"] * 400))])
    nb.cells[2].metadata["tags"] = ["hide-input"]  # collapsed code is not read
    nbformat.write(nb, tmp_path / "c.ipynb")
    assert P.reading_minutes(tmp_path / "c.ipynb") == round(1000 / 200 + 100 / 20)


def test_quick_seconds_come_from_the_build_report(tmp_path):
    report = tmp_path / "build_report.json"
    report.write_text(json.dumps({"chapters": {"book/deml.ipynb": {"seconds": 93.5}}}))
    assert P.quick_seconds("deml", report) == 93.5
    assert P.quick_seconds("zsml", report) is None
    assert P.quick_seconds("deml", tmp_path / "absent.json") is None


def test_real_seconds_sum_the_provenance_of_the_chapter_methods():
    runs = [Result(Config.from_profile("real", method=m, seed=s), {"unseen": {"R@1": 0.5}}, History(),
                   {"train_seconds": t}) for m, s, t in (("deml", 0, 100.0), ("deml", 1, 50.5), ("zsml", 0, 7.0))]
    assert P.real_seconds("deml", runs) == (150.5, 2)
    assert P.real_seconds("zsml", runs) == (7.0, 1)
    assert P.real_seconds("metrics", runs) is None


def test_every_chapter_has_a_card_and_known_prerequisites():
    from zslib.engine.registry import PAPERS

    chapters = {p.stem for p in (REPO / "book").glob("*.ipynb")}
    declared = [*P.PREREQUISITES, *(c for paper in PAPERS.values() for c in paper.prerequisites)]
    assert sorted(declared) == sorted(chapters)  # every chapter declared once: the book's or its paper's
    for chapter in declared:
        assert set(P.prerequisites(chapter)) <= chapters, chapter
        sources = [c.source for c in nbformat.read(REPO / "book" / f"{chapter}.ipynb", as_version=4).cells]
        assert any(f'chapter_card("{chapter}")' in s for s in sources), chapter


def test_the_card_shows_the_last_build_else_the_committed_record_with_its_date(tmp_path, monkeypatch):
    record = tmp_path / "compute_times.json"
    record.write_text(json.dumps({"measured": "2026-11-29", "chapters": {"cml": 61.0}}))
    monkeypatch.setattr(P, "COMPUTE_RECORD", record)
    monkeypatch.setattr(P, "quick_seconds", lambda chapter, report=None: None)  # a clean clone: no build yet
    assert "**Compute, quick profile:** 61 s when last measured (2026-11-29)" in P.chapter_card("cml").data
    assert P.recorded_quick_seconds("zsml", record) is None
    monkeypatch.setattr(P, "quick_seconds", lambda chapter, report=None: 93.5)
    assert "94 s in the last book build" in P.chapter_card("cml").data


def test_the_committed_record_has_a_measured_time_for_every_chapter():
    data = json.loads(P.COMPUTE_RECORD.read_text())
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["measured"]) and data["how"]
    assert set(data["chapters"]) == {p.stem for p in (REPO / "book").glob("*.ipynb")}
    assert all(isinstance(s, (int, float)) and s > 0 for s in data["chapters"].values())


def test_the_build_rewrites_the_record_only_from_a_complete_quick_build():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_book", REPO / "scripts" / "build_book.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    report = {"machine": {"cpus": 2}, "speed_factor": 1.3,
              "chapters": {"book/cml.ipynb": {"seconds": 61.04, "status": "ok"},
                           "book/zsml.ipynb": {"seconds": 40.0, "status": "-"}}}
    record = build.compute_record(report, "2026-12-01", "quick")
    assert record["chapters"] == {"cml": 61.0, "zsml": 40.0} and record["measured"] == "2026-12-01"
    assert (REPO / build.COMPUTE_RECORD) == P.COMPUTE_RECORD
    assert build.compute_record(report, "2026-12-01", "real") is None
    report["chapters"]["book/zsml.ipynb"] = {"seconds": None, "status": "FAILED"}
    assert build.compute_record(report, "2026-12-01", "quick") is None


def test_each_method_chapter_reads_in_at_most_a_quarter_of_an_hour():
    """A paper's main chapter reads in at most 15 minutes (words at 200 a minute, visible code at 20 lines a minute);
    its other pages (experiments, ablations) in at most 18; reference material lives in its appendix page."""
    for paper in PAPERS.values():
        assert P.reading_minutes(REPO / "book" / f"{paper.chapter}.ipynb") <= 15, paper.chapter
        for page in paper.chapters:
            if page != paper.chapter and not page.endswith("_appendix"):
                assert P.reading_minutes(REPO / "book" / f"{page}.ipynb") <= 18, page
