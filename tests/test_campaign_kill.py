"""A campaign killed with SIGKILL (a Colab disconnect, an out-of-memory kill) and started again with the same command
ends with the same result files as a campaign never stopped: every finished run is loaded, the interrupted one resumes
from its last complete checkpoint, a checkpoint half written when the process died is never read.

The campaign runs in a child process (``python -m zslib finetune --smoke``), which a small wrapper kills with
SIGKILL at a chosen checkpoint: right after it is written (between two steps of a run), or half way through writing
it (the temporary file beside the checkpoint holds half of it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from data_fixtures import build_flowers

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

WRAPPER = textwrap.dedent("""
    import io, os, signal, sys
    import torch
    import zslib.engine.train.checkpoint as checkpoint
    import zslib.engine.train.loop as loop

    kill_at, mode = int(os.environ["KILL_AT"]), os.environ["KILL_MODE"]
    saved = [0]
    save = loop.save_checkpoint

    def killing_save(path, state):
        saved[0] += 1
        if saved[0] != kill_at:
            return save(path, state)
        if mode == "after":  # the checkpoint is complete: killed between two steps
            save(path, state)
            os.kill(os.getpid(), signal.SIGKILL)

        def half(f):  # killed while the checkpoint is being written
            buf = io.BytesIO()
            torch.save(state, buf)
            f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        checkpoint.atomic_write(path, half)

    loop.save_checkpoint = killing_save
    from zslib.__main__ import main
    sys.exit(main(sys.argv[1:]))
""")


def _campaign(data: Path, results: Path, kill: tuple[int, str] | None = None) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ZS_CACHE": str(results.parent / "cache"), "ZS_DOWNLOAD": "0"}
    argv = ["finetune", "--smoke", "--methods", "cml", "--data-root", str(data), "--results-dir", str(results)]
    if kill is None:
        command = [sys.executable, "-m", "zslib", *argv]
    else:
        env.update(KILL_AT=str(kill[0]), KILL_MODE=kill[1])
        command = [sys.executable, "-c", WRAPPER, *argv]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200).returncode


def _results(folder: Path) -> dict:
    """Every result file of a campaign folder without what differs between two runs of one computation: the
    provenance (dates, durations, images per second) and so the file's digest, and the history's timings."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        d = json.loads(path.read_text())
        d["history"].pop("elapsed", None)
        d["history"].pop("data_seconds", None)
        out[path.name] = {k: v for k, v in d.items() if k not in ("provenance", "content_sha256")}
    manifest = json.loads((folder / "campaign" / "flowers102.json").read_text())
    for row in manifest["rows"]:
        row.pop("hardware", None)
    out["campaign/flowers102.json"] = manifest
    out["campaign/flowers102.md"] = (folder / "campaign" / "flowers102.md").read_text()
    return out


def test_a_campaign_killed_twice_then_run_again_gives_the_uninterrupted_result_files(tmp_path):
    data = build_flowers(tmp_path / "data", labels=[c for c in range(1, 9) for _ in range(5)]
                         + [c for c in range(52, 58) for _ in range(4)]).parent
    assert _campaign(data, tmp_path / "whole" / "results") == 0
    interrupted = tmp_path / "killed" / "results"
    # the 5th checkpoint: after step 1 of the third trained run; the 10th: step 2 of the fifth, half written
    assert _campaign(data, interrupted, kill=(5, "after")) == -9
    folder = interrupted / "smoke-campaign"
    cut = [p for p in (folder / "checkpoints").glob("*.pt") if not (folder / f"{p.stem}.json").exists()]
    assert len(cut) == 1  # the run killed between its two steps: a checkpoint, no result
    assert _campaign(data, interrupted, kill=(10, "half")) == -9
    assert (folder / f"{cut[0].stem}.json").is_file()  # resumed and finished by the second call
    assert list((folder / "checkpoints").glob(".*.tmp-*")), "the second kill left a half-written checkpoint"
    assert _campaign(data, interrupted) == 0
    whole, again = _results(tmp_path / "whole" / "results" / "smoke-campaign"), _results(interrupted / "smoke-campaign")
    assert sorted(whole) == sorted(again) and len(whole) > 20
    for name in whole:
        assert again[name] == whole[name], name

