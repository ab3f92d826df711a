"""A pip install of zslib (what the Colab setup cell does) holds and finds everything the chapters read.

The wheel is built from the files a clone of this checkout holds and installed (not editable) into a virtual
environment of its own outside the checkout by scripts/reader_env.py, the same code that prepares the book build;
torch and the other dependencies are reused from the running environment through a .pth file (nothing is
downloaded). The installed zslib is then asked, from a folder that is not a checkout, for its recorded runs,
analysis records, recorded campaign and chapters.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def _reader_env_module():
    spec = importlib.util.spec_from_file_location("reader_env", REPO / "scripts" / "reader_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, environment variables, a folder outside the checkout, the wheel) of zslib installed from its
    wheel."""
    folder = tmp_path_factory.mktemp("reader")
    reader = _reader_env_module()
    python, env, found = reader.reader_env(REPO, folder)
    env = {k: v for k, v in env.items() if not k.startswith("ZS_RESULTS")}
    return python, env, folder / "away", next((folder / "wheel").glob("zslib-*.whl"))


def _ask(installed, code: str, *args: str) -> subprocess.CompletedProcess:
    python, env, away, _ = installed
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, env=env, cwd=away)


def _last_json(proc: subprocess.CompletedProcess):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# What the chapters read outside the code: the recorded runs (zslib.engine.store.recorded_dir), their analysis
# records (zslib.analysis.records) and the recorded fine-tuning campaign (zslib.campaign.report), all under
# results/recorded/; and the chapters themselves, from which `python -m zslib assignments` makes the pack.
READ_BY_THE_BOOK = {"results/recorded": "share/zslib/recorded", "book": "share/zslib/book"}


def _expected() -> dict[str, int]:
    """Where each file the book reads lies in the wheel's data, with its size."""
    out = {}
    for source, target in READ_BY_THE_BOOK.items():
        pattern = "*.ipynb" if source == "book" else "**/*"
        for path in (REPO / source).glob(pattern):
            if path.is_file():
                out[f"{target}/{path.relative_to(REPO / source).as_posix()}"] = path.stat().st_size
    return out


def test_the_wheel_holds_every_file_the_chapters_read(installed):
    wheel = installed[3]
    with zipfile.ZipFile(wheel) as z:
        data = {i.filename.split(".data/data/", 1)[1]: i.file_size for i in z.infolist() if ".data/data/" in i.filename}
    expected = _expected()
    assert len(expected) > 900 and any("/campaign/" in name for name in expected)
    assert sorted(set(expected) - set(data)) == [], "files the book reads that the wheel lacks"
    assert sorted(set(data) - set(expected)) == [], "files in the wheel's data that the book does not read"
    assert {k: v for k, v in data.items() if expected[k] != v} == {}, "files whose size differs in the wheel"


COUNT = r"""
import json, zslib
from zslib.engine.store import recorded_runs, recorded_dir
from zslib.analysis.records import recorded_analysis_records
runs = recorded_runs()
print(json.dumps({"zslib": zslib.__file__, "dir": str(recorded_dir()),
                  "runs": sorted(r.path.name for r in runs),
                  "analyses": len(recorded_analysis_records())}))
"""


def test_an_installed_wheel_finds_every_recorded_run(installed):
    found = _last_json(_ask(installed, COUNT))
    env_dir = installed[0].parent.parent
    assert Path(found["zslib"]).resolve().is_relative_to(env_dir.resolve()), found["zslib"]  # the installed copy
    expected = sorted(p.name for p in (REPO / "results" / "recorded").glob("*.json"))
    assert len(expected) > 600
    assert found["runs"] == expected
    assert found["analyses"] == len(list((REPO / "results" / "recorded" / "analyses").glob("*.json")))


CAMPAIGN = r"""
import json
from zslib.campaign.report import campaign_frame, recorded_campaign
camp = recorded_campaign("flowers102")
print(json.dumps(None if camp is None else campaign_frame(camp).to_dict(orient="records")))
"""


def test_an_installed_wheel_shows_the_recorded_campaign_as_the_checkout_does(installed):
    """The comparison chapter's fine-tuned section: the same table from the install as from the checkout."""
    from zslib.campaign.report import campaign_frame, recorded_campaign

    checkout = campaign_frame(recorded_campaign("flowers102")).to_dict(orient="records")
    assert checkout, "the checkout records a fine-tuned campaign"
    assert _last_json(_ask(installed, CAMPAIGN)) == checkout


def test_assignments_from_an_install_write_the_full_pack(installed, tmp_path):
    from zslib.teaching.assignments import build_pack, chapters_with_exercises

    python, env, away, _ = installed
    proc = subprocess.run([str(python), "-m", "zslib", "assignments", "--out", str(tmp_path / "pack")],
                          capture_output=True, text=True, env=env, cwd=away)
    assert proc.returncode == 0, proc.stderr[-3000:]
    chapters = sorted(p.name for p in chapters_with_exercises(REPO / "book"))
    assert len(chapters) >= 15
    assert sorted(p.name for p in (tmp_path / "pack" / "student").glob("*.ipynb")) == chapters
    assert sorted(p.name for p in (tmp_path / "pack" / "instructor").glob("*.ipynb")) == chapters
    build_pack(tmp_path / "from-checkout", book_dir=REPO / "book")
    rubric = json.loads((tmp_path / "pack" / "rubric.json").read_text())
    assert rubric and rubric == json.loads((tmp_path / "from-checkout" / "rubric.json").read_text())


def test_assignments_without_chapters_refuse_in_one_line(installed, tmp_path):
    python, env, away, _ = installed
    empty = tmp_path / "no-book"
    empty.mkdir()
    proc = subprocess.run([str(python), "-m", "zslib", "assignments", "--out", str(tmp_path / "pack"),
                           "--book", str(empty)], capture_output=True, text=True, env=env, cwd=away)
    assert proc.returncode == 2 and proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert first == (f"python -m zslib assignments: error: no chapter with exercises in {empty}: give the book's "
                     "chapters with --book DIR (the book/ folder of a checkout of the book's repository)"), proc.stderr
    assert not (tmp_path / "pack").exists()


CHAPTERS = r"""
import json
from zslib.teaching.assignments import default_book_dir
from zslib.teaching.path import prerequisites, reading_minutes, title
pages = sorted(p.stem for p in default_book_dir().glob("*.ipynb"))
print(json.dumps({c: [title(c), reading_minutes(default_book_dir() / f"{c}.ipynb"), list(prerequisites(c))]
                  for c in pages}))
"""


def test_an_installed_wheel_titles_the_chapters_as_the_checkout_does(installed):
    """The line under a chapter's title (zslib.teaching.path.chapter_card) names the chapters to read first by
    their titles and gives the reading time, read from the chapters the wheel carries: the same for every page."""
    checkout = _last_json(subprocess.run([sys.executable, "-c", CHAPTERS], capture_output=True, text=True, cwd=REPO))
    assert checkout["cml"][0] == "Confusion-based metric learning (CML)"
    assert set(checkout) == {p.stem for p in (REPO / "book").glob("*.ipynb")}  # every notebook page has a card
    assert _last_json(_ask(installed, CHAPTERS)) == checkout


KEPT = r"""
import json
from zslib.analysis.photos import has_kept_weights
from zslib.engine.store import recorded_runs, recorded_dir
from zslib.engine.kept_weights import read_weights, weights_path
kept = {}
for run in recorded_runs():
    if has_kept_weights(run):
        tensors = read_weights(weights_path(run), run.config, listed_in=recorded_dir())  # checked by the manifest
        kept[weights_path(run).name] = sum(t.numel() for t in tensors.values())
print(json.dumps(kept))
"""


def test_an_installed_wheel_finds_and_checks_the_kept_weights(installed):
    found = _last_json(_ask(installed, KEPT))
    expected = sorted(p.name for p in (REPO / "results" / "recorded" / "weights").glob("*.pt"))
    assert expected, "no kept weights under results/recorded/weights/"
    assert sorted(found) == expected
    assert all(n > 0 for n in found.values())
