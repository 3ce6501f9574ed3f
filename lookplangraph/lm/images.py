"""Images for :meth:`LMBackend.complete`: files checked by their bytes and sent as OpenAI
``image_url`` content parts (base64 data URLs)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Sequence

from lookplangraph.lm.base import ImageError


#: The image types OpenAI-compatible servers take in ``image_url`` parts, by their magic bytes.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # after "RIFF" and the size
)

#: OpenAI's limit per image (20 MB); a backend's ``max_image_bytes`` changes it.
DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024


def image_mime(data: bytes) -> str | None:
    """MIME type of PNG, JPEG, GIF or WebP bytes by their magic bytes, else None."""
    for magic, offset, mime in _MAGIC:
        if data[offset: offset + len(magic)] == magic and (mime != "image/webp" or data[:4] == b"RIFF"):
            return mime
    return None


def image_part(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part with the file as a base64 data URL. Raises
    :class:`ImageError` when the file is missing, empty, larger than ``max_bytes`` or not a PNG,
    JPEG, GIF or WebP image (checked by its bytes, not its name)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ImageError(f"image {path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise ImageError(f"image {path}: the file is empty")
    if size > max_bytes:
        raise ImageError(f"image {path}: {size:,} bytes is over the limit of {max_bytes:,} bytes "
                         f"(scale it down, or raise the backend's max_image_bytes)")
    data = path.read_bytes()
    mime = image_mime(data)
    if mime is None:
        raise ImageError(f"image {path}: not a PNG, JPEG, GIF or WebP image (first bytes {data[:8]!r})")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}}


def with_images(messages: list[dict[str, Any]], images: Sequence[str | os.PathLike] | None,
                max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> list[dict[str, Any]]:
    """A copy of ``messages`` whose last user message carries ``images`` as content parts after
    its text (a user message is appended when there is none). Unchanged without images."""
    if not images:
        return list(messages)
    parts = [image_part(p, max_bytes) for p in images]
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            m["content"] = [*(content or []), *parts]
            return out
    out.append({"role": "user", "content": parts})
    return out
