"""Build the executed book into _build/html and report on each chapter.

Used by `make book` and by the integration test (tests/test_book.py). It runs Jupyter Book with
warnings as errors, then reads the execution cache to report, per chapter, whether it executed and
how long it took. A failing chapter is named with the first lines of its traceback, and the exit
status is non-zero. The per-chapter times are written to _build/execution_times.json.

    python scripts/build_book.py [--root .] [--builder html]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def chapter_records(root: Path) -> list[dict]:
    """One dict per notebook the cache knows: path, executed?, seconds, traceback."""
    from jupyter_cache import get_cache

    cache_dir = root / "_build" / ".jupyter_cache"
    if not cache_dir.exists():
        return []
    cache = get_cache(cache_dir)
    rows = []
    for record in cache.list_project_records():
        path = Path(record.uri)
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            rel = path
        cached = cache.get_cached_project_nb(record.uri)
        rows.append(
            {
                "chapter": rel.as_posix(),
                "executed": cached is not None and not record.traceback,
                "seconds": (cached.data or {}).get("execution_seconds") if cached is not None else None,
                "traceback": record.traceback,
            }
        )
    return sorted(rows, key=lambda r: r["chapter"])


def last_lines(text: str, n: int = 12) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join("      " + ln for ln in lines[-n:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--builder", default="html")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    os.environ.setdefault("ZS_PROFILE", "quick")
    # Training progress as plain text lines (a notebook widget would not render in the static book).
    os.environ.setdefault("ZS_PROGRESS", "text")

    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb if jb.exists() else "jupyter-book"), "build", str(root),
           "--builder", args.builder, "--warningiserror", "--keep-going"]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    log = proc.stdout
    print(log, flush=True)
    (root / "_build").mkdir(exist_ok=True)
    (root / "_build" / "build.log").write_text(log)

    rows = chapter_records(root)
    failed = [r for r in rows if r["traceback"]]
    timing = {r["chapter"]: r["seconds"] for r in rows}
    (root / "_build" / "execution_times.json").write_text(json.dumps(timing, indent=2))

    print("\nChapter execution (quick profile unless ZS_PROFILE says otherwise):")
    for r in rows:
        sec = f"{r['seconds']:7.1f} s" if r["seconds"] is not None else "      - "
        status = "FAILED" if r["traceback"] else "ok"
        print(f"  {sec}  {status:6s}  {r['chapter']}")
    total = sum(s for s in timing.values() if s)
    print(f"  total notebook execution {total:.1f} s; whole build {wall:.1f} s")

    if failed:
        print("\nThese chapters raised while executing:", file=sys.stderr)
        for r in failed:
            print(f"  - {r['chapter']}\n{last_lines(r['traceback'])}", file=sys.stderr)
    # Sphinx reports "path: WARNING: message"; kernel chatter such as "[IPKernelApp] WARNING | ..." is not one.
    warnings = [ln for ln in log.splitlines() if "WARNING:" in ln or "ERROR:" in ln]
    if proc.returncode != 0 or failed:
        if warnings:
            print("\nSphinx warnings and errors (each one fails the build):", file=sys.stderr)
            for ln in warnings[:40]:
                print("  " + ln, file=sys.stderr)
        print(f"\nBook build FAILED (jupyter-book exit {proc.returncode}, "
              f"{len(failed)} failing chapter(s)).", file=sys.stderr)
        return 1
    print(f"\nBook built: {root / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
