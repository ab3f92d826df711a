"""Execute chapters one by one, as the book build would, and report each one's time: for writing a chapter.

    .venv/bin/python scripts/run_chapter.py book/cml.ipynb [book/jrd.ipynb ...] [--save out/]

Each notebook runs in a fresh kernel from the repository root with the book build's settings (the active
``ZS_PROFILE``, text progress bars). The source notebook is never modified; ``--save`` writes the executed
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
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    os.environ.setdefault("ZS_PROGRESS", "text")
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
        if args.save:
            out = Path(args.save)
            out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, out / path.name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
