"""Where datasets live on disk.

:func:`data_root` resolves the download root: an explicit argument, else ``$ZS_DATA``, else the
repository's ``data/`` folder when zslib runs from a source checkout, else ``~/zslib_data``.
Each real dataset then lives in its own sub-folder (``cub200/``, ``cars196/``, ``sop/``,
``inshop/``, ``flowers102/``); see ``data/README.md`` for the layouts.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from zslib.engine.profile import repository_root, resolve_folder

__all__ = ["data_root", "repository_root", "environment_kept", "using_data_root"]


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The folder that holds (or will hold) the real datasets. Nothing is created here.

    Order: ``root`` if given; else ``$ZS_DATA``; else ``<checkout>/data`` when zslib is used from
    the book's repository; else ``~/zslib_data``.
    """
    return resolve_folder(root, "ZS_DATA", "data", "~/zslib_data")


@contextlib.contextmanager
def environment_kept(*names: str) -> Iterator[None]:
    """The environment variables ``names`` as they were before the block, put back after it (also when it fails):
    a script's ``main()`` that points ``ZS_DATA`` or ``ZS_CACHE`` at its own folders can be called in-process by a
    test or a notebook whose later work must read the caller's data, not the script's."""
    before = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def using_data_root(root: str | os.PathLike | None) -> Iterator[None]:
    """``ZS_DATA`` set to ``root`` while the block runs and put back after it; ``None`` leaves it as it is."""
    with environment_kept("ZS_DATA"):
        if root is not None:
            os.environ["ZS_DATA"] = str(root)
        yield
