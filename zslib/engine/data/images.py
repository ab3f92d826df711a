"""Decoding one image file into the 8-bit RGB picture every transform expects, or one line saying why not.

Pillow opens most files in a mode that ``convert("RGB")`` turns into the right picture, but not all of them:

* a 16-bit greyscale PNG opens in mode ``I;16`` (or ``I``, 32-bit integers holding 0-65535), and Pillow's
  ``convert("RGB")`` clips its values to 255, so almost every pixel becomes white. :func:`to_rgb` scales such an
  image to 8 bits instead (``round(v / 257)``: 0 stays 0, 65535 becomes 255); a 16-bit colour PNG is already
  read as 8-bit ``RGB``/``RGBA`` by Pillow. A 32-bit integer image with values outside 0-65535 and a
  floating-point image (mode ``F``, a scientific TIFF) have no agreed 8-bit form: they are refused, naming the
  file and its mode.
* a header claiming more than Pillow's :data:`PIL.Image.MAX_IMAGE_PIXELS` pixels (about 89 million; a
  30,000 x 30,000 "decompression bomb" would need gigabytes to decode) is refused before anything is decoded.
* a truncated or damaged file, and a file name that is not UTF-8 (it could not even be printed in an error), are
  refused naming the file.

Every refusal is a :class:`~zslib.engine.data.errors.CorruptFileError` (a missing file a
:class:`~zslib.engine.data.errors.MissingDataError`) whose first line names the file and says what to do; raised
in a data-loading worker process it keeps that line first (:mod:`zslib.engine.data.errors`).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from zslib.engine.data.errors import CorruptFileError, MissingDataError

__all__ = ["load_image", "image_size", "to_rgb", "printable_path", "check_file_name"]

_REPLACE = ("Replace it from the dataset archive (re-extract it, or run the dataset's download() again), or "
            "remove it together with its label line.")


def printable_path(path) -> str:
    """``path`` as text that can always be printed: bytes that are not UTF-8 shown as ``\\xe9`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_file_name(path) -> None:
    """Refuse (one line, naming the file) a file name that is not valid UTF-8: it could be neither stored in a
    result nor printed in an error."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptFileError(f"the file name {printable_path(path)!s} is not valid UTF-8; rename the file (e.g. "
                               "`convmv -f latin1 -t utf8`) or re-extract the dataset archive on a UTF-8 "
                               "system") from None


def to_rgb(image, path="the image"):
    """An 8-bit RGB PIL image of ``image`` (see the module docstring for the high-depth modes)."""
    mode = image.mode
    if mode.startswith("I;16") or mode == "I":
        values = np.asarray(image, dtype=np.int64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise CorruptFileError(f"image {printable_path(path)} holds 32-bit integers (mode {mode}, values "
                                   f"{values.min()} to {values.max()}), which have no 8-bit form; convert it to an "
                                   "8-bit RGB image")
        eight = np.round(values / 257.0).astype(np.uint8)  # 65535 -> 255; 8-bit data stored as 16 would be /257 too
        return Image.fromarray(eight, mode="L").convert("RGB")
    if mode == "F":
        raise CorruptFileError(f"image {printable_path(path)} holds floating-point pixels (mode F), which have no "
                               "agreed 8-bit form; convert it to an 8-bit RGB image")
    return image.convert("RGB")


def _opened(path: Path):
    """``Image.open(path)`` with every Pillow refusal turned into one line naming the file."""
    check_file_name(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(path)
    except FileNotFoundError as e:
        raise MissingDataError(f"image {printable_path(path)} is missing. Re-extract the dataset archive (or run "
                               "the dataset's download()) so that it is back in place.") from e
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise CorruptFileError(f"image {printable_path(path)} claims more pixels than an image may have "
                               f"({Image.MAX_IMAGE_PIXELS:,}; a decompression bomb or a damaged header): not "
                               f"decoded. {_REPLACE}") from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise CorruptFileError(f"image {printable_path(path)} cannot be read ({type(e).__name__}: {e}); it is "
                               f"truncated or damaged. {_REPLACE}") from e


def image_size(path) -> tuple[int, int]:
    """``(width, height)`` from the file's header (nothing is decoded)."""
    with _opened(Path(path)) as im:
        return im.size


def load_image(path: str | os.PathLike):
    """Open an image as an 8-bit PIL RGB image, decoding it fully; a missing, damaged, oversized or unnamable
    file raises an error whose first line names it."""
    path = Path(path)
    with _opened(path) as im:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                im.load()
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
            raise CorruptFileError(f"image {printable_path(path)} cannot be read ({type(e).__name__}: {e}); it is "
                                   f"truncated or damaged. {_REPLACE}") from e
        return to_rgb(im, path)
