"""Photos an operator sends: :func:`photo_type` accepts a PNG, JPEG, GIF or WebP photo by its bytes
and :func:`check_photo_size` one of at most a limit (:data:`DEFAULT_MAX_PHOTO_BYTES` unless told);
anything else raises :class:`PhotoError`, whose message is for the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from lookplangraph.lm import image_mime

#: largest photo accepted (bytes); ``--max-upload-mb`` changes it
DEFAULT_MAX_PHOTO_BYTES = 15_000_000
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


class PhotoError(ValueError):
    """An upload or photo file that is not a usable photo; the message is for the operator."""


def photo_type(data: bytes) -> str:
    """The file extension of a PNG, JPEG, GIF or WebP photo by its bytes; :class:`PhotoError` otherwise."""
    if not data:
        raise PhotoError("the file is empty")
    mime = image_mime(data[:16])
    if mime is None:
        raise PhotoError("this file is not a photo: a PNG, JPEG, WebP or GIF image is needed "
                         "(an iPhone's HEIC photo: set Camera > Formats to 'Most Compatible')")
    return _EXT[mime]


def megabytes(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def check_photo_size(size: int, limit: int) -> None:
    if size > limit:
        raise PhotoError(f"the photo is {megabytes(size)}, over the limit of {megabytes(limit)} "
                         "(take it at a lower resolution)")


def photo_file_check(limit: int = DEFAULT_MAX_PHOTO_BYTES) -> Callable[[str], None]:
    """A check of a photo file for the terminal operator: :class:`PhotoError` when it is too
    large or not a photo."""
    def check_file(path: str) -> None:
        check_photo_size(Path(path).stat().st_size, limit)
        with open(path, "rb") as f:
            photo_type(f.read(16))

    return check_file
