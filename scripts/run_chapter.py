"""Execute chapters one by one, as the book build would, and report each one's time: for writing a chapter.

    .venv/bin/python scripts/run_chapter.py book/cml.ipynb [book/jrd.ipynb ...] [--save out/] [--slowest 5]

Each notebook runs in a fresh kernel from the repository root with the book build's settings (the active
``ZS_PROFILE``, no progress bars). The source notebook is never modified; ``--save`` writes the executed
copies to a folder for reading. A failing cell is reported with its number and the error, and the exit
status is non-zero. Stored runs in ``results/`` are reused as in the book build, so a second execution is
faster than the first: delete them (or set ``ZS_RESULTS`` to an empty folder) to time a cold chapter.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--save", help="folder for the executed copies")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell (default 1800)")
    parser.add_argument("--slowest", type=int, default=0, metavar="N",
                        help="also list the N slowest code cells of each chapter, with their times")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    os.environ.setdefault("ZS_PROGRESS", "none")
    os.environ.setdefault("ZS_EXPLORERS", "static")  # as the book build: the explorers' page view only
    failed = 0
    for name in args.notebooks:
        path = Path(name).resolve()
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", resources={"metadata": {"path": str(root)}})
        started = time.perf_counter()
        try:
            client.execute()
            status = "ok"
        except CellExecutionError as err:
            failed += 1
            index = next((i for i, c in enumerate(c for c in nb.cells if c.cell_type == "code")
                          if any(o.get("output_type") == "error" for o in c.get("outputs", []))), None)
            status = f"FAILED in code cell {index + 1 if index is not None else '?'}:\n{str(err)[-3000:]}"
        seconds = time.perf_counter() - started
        print(f"{seconds:7.1f} s  {path.relative_to(root)}  ({os.environ.get('ZS_PROFILE', 'quick')} profile)  {status}",
              flush=True)
        for secs, number, head in cell_times(nb)[:args.slowest]:
            print(f"         {secs:7.1f} s  code cell {number}: {head}", flush=True)
        if args.save:
            out = Path(args.save)
            out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, out / path.name)
    return 1 if failed else 0


def cell_times(nb) -> list[tuple[float, int, str]]:
    """(seconds, number among the code cells counting from 1, first line) of each executed code cell, slowest
    first, from the timestamps nbclient records in each cell's metadata."""
    from datetime import datetime

    rows = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code, start=1):
        stamps = cell.get("metadata", {}).get("execution", {})
        start, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        if start and end:
            secs = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                    - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            head = next((ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#")), "")
            rows.append((secs, number, head.strip()[:80]))
    return sorted(rows, reverse=True)


if __name__ == "__main__":
    sys.exit(main())
