"""File names kb derives from other names, kept within the file system's limit in bytes.

Linux allows 255 bytes per name, not 255 characters: 82 Thai or Chinese characters are
already 246 bytes, and kb adds to names (``-2``, ``.source.json``, ``.error.json``,
``.part``). Every derived name is cut by its UTF-8 bytes, on a character boundary, keeping
the extension, so a name of any length and script works.
"""

from __future__ import annotations

NAME_MAX_BYTES = 255
# The longest ending kb adds to a name it keeps (".source.json") and room for a counter ("-99999").
ADDED_BYTES = len(".source.json") + len("-99999")
BASE_MAX_BYTES = NAME_MAX_BYTES - ADDED_BYTES
_EXT_MAX_BYTES = 24


def split_ext(name: str) -> tuple[str, str]:
    """(stem, ".ext"); a leading dot is not an extension, and an over-long one is part of the stem."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem.strip(".") or len(("." + ext).encode()) > _EXT_MAX_BYTES:
        return name, ""
    return stem, "." + ext


def cut_bytes(text: str, max_bytes: int) -> str:
    """The longest prefix of text whose UTF-8 form fits in max_bytes (never half a character)."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", "ignore")


def shorten_name(name: str, max_bytes: int = BASE_MAX_BYTES) -> str:
    """name cut to max_bytes of UTF-8, its extension kept."""
    if len(name.encode("utf-8", "surrogateescape")) <= max_bytes:
        return name
    stem, ext = split_ext(name)
    room = max_bytes - len(ext.encode())
    return (cut_bytes(stem, room).rstrip() or "file") + ext
