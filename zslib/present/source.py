"""The library's own code on the page: :func:`show_source` displays a function's source as the package holds it.

A chapter shows a method's objective by displaying the function that computes it, read with :func:`inspect.getsource`
when the page is built, so that the page and the library cannot drift apart. The display is a Markdown code block
(highlighted by the book's theme and by Jupyter), headed by the file and the lines it comes from.
"""
from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Source", "show_source"]


@dataclass(frozen=True)
class Source:
    """A function's source (``text``, dedented), the file it lives in relative to the package's parent (``path``)
    and its first and last line there."""

    text: str
    path: str
    first: int
    last: int

    def _repr_markdown_(self) -> str:
        return f"`{self.path}`, lines {self.first}-{self.last}:\n\n```python\n{self.text}```\n"

    def __repr__(self) -> str:
        return f"# {self.path}, lines {self.first}-{self.last}\n{self.text}"


def show_source(obj) -> Source:
    """The source of ``obj`` (a function, a method, a class) as it is in the installed package."""
    target = inspect.unwrap(obj)
    try:
        lines, first = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target)
    except (OSError, TypeError) as err:
        raise TypeError(f"show_source needs a function, method or class defined in a Python file, got {obj!r} "
                        f"({err})") from None
    root = Path(__import__("zslib").__file__).resolve().parent.parent
    try:
        path = Path(filename).resolve().relative_to(root).as_posix()
    except ValueError:
        path = Path(filename).name
    return Source(textwrap.dedent("".join(lines)), path, first, first + len(lines) - 1)
