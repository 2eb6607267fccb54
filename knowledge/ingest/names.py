"""File names kb derives from other names, kept within the file system's limit in bytes.

Linux allows 255 bytes per name, not 255 characters: 82 Thai or Chinese characters are
already 246 bytes, and kb adds to names (``-2``, ``.source.json``, ``.error.json``,
``.part``). Every derived name is cut by its UTF-8 bytes, on a character boundary, keeping
the extension, so a name of any length and script works.
"""

from __future__ import annotations

from charset_normalizer import from_bytes

from knowledge.text import clean_text, has_surrogates

NAME_MAX_BYTES = 255
# The longest ending kb adds to a name it keeps (".source.json") and room for a counter ("-99999").
ADDED_BYTES = len(".source.json") + len("-99999")
BASE_MAX_BYTES = NAME_MAX_BYTES - ADDED_BYTES
_EXT_MAX_BYTES = 24
SIDECAR_SUFFIX = ".source.json"  # the sidecar kb writes beside a file it hands to the inbox
ERROR_SUFFIX = ".error.json"  # the reason beside a file in failed/


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


# File names from a Windows zip or an old disk arrive in the bytes of Big5, GBK, TIS-620 or
# Shift_JIS, not UTF-8: Python hands them over with each undecodable byte as a lone surrogate.
_NAME_CHARSETS = ("big5", "gb18030", "tis-620", "shift_jis", "euc-kr", "cp1252")


def readable_name(name: str) -> str:
    """A file name as text that can be written anywhere (front matter, the index, logs, the
    terminal): a name that is not valid UTF-8 is read in the legacy charset its bytes make most
    sense in (``烏龍茶.txt`` from Big5 bytes), else its undecodable bytes become U+FFFD."""
    if not has_surrogates(name):
        return name
    raw = name.encode("utf-8", "surrogateescape")
    best = from_bytes(raw, cp_isolation=list(_NAME_CHARSETS)).best() if len(raw) >= 2 else None
    if best is not None and best.encoding:
        decoded = raw.decode(best.encoding, errors="replace")
        if "\ufffd" not in decoded and decoded.isprintable():
            return decoded
    return raw.decode("utf-8", errors="replace")


def stored_path(path: object) -> str:
    """A path as text for the index and the logs (a non-UTF-8 byte as U+FFFD)."""
    return clean_text(str(path))


_TEMP_SUFFIXES = (
    ".part",
    ".crdownload",
    ".tmp",
    ".download",
    ".filepart",
    ".swp",
    "~",
    ERROR_SUFFIX,
    SIDECAR_SUFFIX,
)
_JUNK_NAMES = frozenset({"thumbs.db", "desktop.ini", ".ds_store"})


def inbox_name(name: str) -> str:
    """A name the inbox takes, for a file kb hands off itself (an upload, an import).

    The sender's name may be hidden (``.x.md``), a lock file's (``~$x.md``), carry control
    characters or be too long: such a file would wait in the inbox forever or fail to be written.
    """
    name = "".join("_" if ch < " " or ch in "\x7f/\\" else ch for ch in name)
    name = name.lstrip(".~$ ") or "upload"
    if not is_candidate_name(name):
        name = "upload-" + name
    return shorten_name(name)


def is_candidate_name(name: str) -> bool:
    """False for hidden, temporary, lock and OS-junk names, and for kb's own sidecars."""
    lower = name.lower()
    return not (name.startswith((".", "~$", "~")) or lower.endswith(_TEMP_SUFFIXES) or lower in _JUNK_NAMES)
