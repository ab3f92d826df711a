"""The setup cell every chapter opens with (the first code cell, index 1), written into each notebook of ``book/``.

    python scripts/setup_cell.py            # write SETUP into every chapter (outputs left empty)
    python scripts/setup_cell.py --check    # exit 1 if a chapter's setup cell differs from SETUP

On Colab the cell installs zslib, sets the profile and, when "keep on Drive" is ticked, mounts Google Drive and
points ``ZS_RESULTS`` (results and training checkpoints) and ``ZS_CACHE`` (the image and feature caches) at a folder
there, so that a recycled machine loses nothing: running the chapter again loads the finished runs and resumes an
interrupted one from its last checkpoint. Outside Colab (the book's build, a local Jupyter) the Colab branch never
runs: the cell only reports the profile and device.

Each notebook is read and validated with nbformat; the cell's source is replaced and the file written back with
its own key order and indentation (nbformat's writer would sort every key of every cell: a diff of the whole book).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Where the Drive option keeps things (under the mounted MyDrive).
DRIVE_FOLDER = "/content/drive/MyDrive/zslib"

SETUP = f'''\
# @title Setup: on Colab, installs zslib, picks the profile and where results are kept {{ display-mode: "form" }}
# quick: synthetic images, seconds per run; real: Flowers-102 photographs with a frozen pretrained network;
# full: the papers' datasets and settings, for a GPU. KEEP_ON_DRIVE keeps results, checkpoints and caches in your
# Google Drive ({DRIVE_FOLDER.replace("/content/drive/", "")}), so nothing is lost when Colab recycles the machine:
# run the chapter again and it loads the finished runs and resumes an interrupted one from its checkpoint.
# Elsewhere this only reports the profile and device in use.
import os, subprocess, sys
if "google.colab" in sys.modules:
    ZS_PROFILE = "quick"  # @param ["quick", "real", "full"]
    KEEP_ON_DRIVE = False  # @param {{type:"boolean"}}
    os.environ["ZS_PROFILE"] = ZS_PROFILE
    os.environ.setdefault("ZS_DOWNLOAD", "1")  # fetch a missing dataset or pretrained weights file
    if KEEP_ON_DRIVE:
        from google.colab import drive
        drive.mount("/content/drive")
        os.environ["ZS_RESULTS"] = "{DRIVE_FOLDER}/results"
        os.environ["ZS_CACHE"] = "{DRIVE_FOLDER}/cache"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "zslib[notebook,full] @ git+https://github.com/zslib-book/zero-shot-metric-learning"],
                   check=True)
    from google.colab import output
    output.enable_custom_widget_manager()  # the interactive explorers' live controls (ipywidgets)
import zslib
profile = zslib.get_profile()
print(f"profile: {{profile.name}}   device: {{zslib.device()}}")'''

#: The index of the setup cell: after the title.
SETUP_INDEX = 1


def notebooks() -> list[Path]:
    return sorted((ROOT / "book").rglob("*.ipynb"))


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def write(path: Path) -> bool:
    """Put :data:`SETUP` into ``path``'s setup cell (outputs emptied); True when the file changed."""
    import nbformat

    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    cell = nb.cells[SETUP_INDEX]
    if cell.cell_type != "code" or not cell.source.startswith("# @title Setup"):
        raise SystemExit(f"{path}: cell {SETUP_INDEX} is not the setup cell")
    raw = json.loads(text)
    raw["cells"][SETUP_INDEX].update(source=_lines(SETUP), outputs=[], execution_count=None)
    new = json.dumps(raw, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new)
    return new != text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only check; exit 1 where a setup cell differs")
    args = p.parse_args(argv)
    if args.check:
        import nbformat

        stale = [x.name for x in notebooks() if nbformat.read(x, as_version=4).cells[SETUP_INDEX].source != SETUP]
        print("\n".join(stale) or "every setup cell is SETUP")
        return 1 if stale else 0
    changed = [x.name for x in notebooks() if write(x)]
    print(f"{len(changed)} chapter(s) rewritten" + (f": {', '.join(changed)}" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
