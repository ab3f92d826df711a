"""Where datasets live on disk.

:func:`data_root` resolves the download root: an explicit argument, else ``$ZS_DATA``, else the
repository's ``data/`` folder when zslib runs from a source checkout, else ``~/zslib_data``.
Each real dataset then lives in its own sub-folder (``cub200/``, ``cars196/``, ``sop/``,
``inshop/``, ``flowers102/``); see ``data/README.md`` for the layouts.
"""
from __future__ import annotations

import os
from pathlib import Path

from zslib.engine.profile import repository_root, resolve_folder

__all__ = ["data_root", "repository_root"]


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The folder that holds (or will hold) the real datasets. Nothing is created here.

    Order: ``root`` if given; else ``$ZS_DATA``; else ``<checkout>/data`` when zslib is used from
    the book's repository; else ``~/zslib_data``.
    """
    return resolve_folder(root, "ZS_DATA", "data", "~/zslib_data")
