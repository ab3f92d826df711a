"""The recorded runs match their manifest (results/recorded/SHA256SUMS), so that git shows any change to them.

After adding or changing recorded files, ``python -m zslib record --manifest`` (or any ``record`` that copies
runs) rewrites the manifest; commit both.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_manifest_lists_every_recorded_file_with_its_sha256():
    from zslib.engine.store import MANIFEST, manifest_differences

    recorded = ROOT / "results" / "recorded"
    lines = (recorded / MANIFEST).read_text().splitlines()
    listed = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in lines}
    on_disk = {p.relative_to(recorded).as_posix() for p in recorded.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(listed) == on_disk, "run `python -m zslib record --manifest` and commit results/recorded/SHA256SUMS"
    for name in sorted(on_disk)[:: max(1, len(on_disk) // 50)]:  # an independent check of a sample, with hashlib
        assert hashlib.sha256((recorded / name).read_bytes()).hexdigest() == listed[name], name
    assert manifest_differences(ROOT / "results") == [], "run `python -m zslib record --manifest`"
