"""Progress bars for long work: a widget in notebooks, plain text lines in built books and logs.

``mode`` is ``"auto"`` (the environment variable ``ZS_PROGRESS`` = ``auto`` / ``text`` / ``none``
decides; ``auto`` is a notebook widget where one can render), ``"text"`` (at most about ten lines per
bar, so a built book or a log stays readable), or ``False`` / ``None`` (no bar).
"""
from __future__ import annotations

import os

from tqdm.std import tqdm as text_tqdm

__all__ = ["progress_bar"]


def progress_bar(mode, total: int, initial: int = 0, desc: str = "train"):
    """A tqdm bar for ``total`` units (``initial`` already done), or ``None`` when ``mode`` says none."""
    if mode == "auto":
        env = os.environ.get("ZS_PROGRESS", "auto").strip().lower() or "auto"
        mode = False if env in ("none", "false", "0", "off") else env
    if mode is False or mode is None:
        return None
    if mode == "auto" or mode is True:
        # here, not at the top: tqdm.auto picks the notebook or the text bar when it is first imported
        from tqdm.auto import tqdm
        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)
    if mode == "text":
        return text_tqdm(total=total, initial=initial, desc=desc, mininterval=5.0, miniters=max(1, total // 10),
                         maxinterval=float("inf"), ncols=100)
    raise ValueError(f"progress must be 'auto' (widget in notebooks), 'text' (plain text) or False, got {mode!r}")
