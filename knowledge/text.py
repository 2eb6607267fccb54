"""Plain text, on the ground floor: the script a text is written in, one line cut to a width, a title cut at
a word, text made safe to write (no lone surrogates), and a note's tag told and compared. Pure functions of
strings, used by every room."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

ELLIPSIS = "…"
LANGUAGE_SHARE = 0.3  # a text is Thai or CJK when that share of its letters is
_SURROGATES = re.compile("[\ud800-\udfff]")
TAG_MAX_CHARS = 100


def language_group(text: str) -> str:
    """The script a text is mostly written in: ``thai``, ``cjk`` (Chinese, Japanese, Korean) or ``other``."""
    letters = thai = cjk = 0
    for ch in text[:2000]:
        if ch.isalpha():
            letters += 1
            code = ord(ch)
            if 0x0E00 <= code <= 0x0E7F:
                thai += 1
            elif (
                0x3040 <= code <= 0x30FF
                or 0x3400 <= code <= 0x9FFF
                or 0xAC00 <= code <= 0xD7AF
                or code >= 0x20000
            ):
                cjk += 1
    if letters and thai >= LANGUAGE_SHARE * letters:
        return "thai"
    if letters and cjk >= LANGUAGE_SHARE * letters:
        return "cjk"
    return "other"


def one_line(text: str, limit: int | None = 200) -> str:
    """``text`` as one line (runs of white space folded) of at most ``limit`` characters (None: any), an
    ellipsis marking a cut: a foreign error's message, a passage's line, a title in a list."""
    text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS


def shorten(text: str, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters, cut at a word boundary (where there is one)
    with an ellipsis when it is too long: a title, a summary's line."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[len(cut)] != " " and " " in cut:  # mid-word: drop the partial word
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + ELLIPSIS


def clean_text(text: str) -> str:
    """``text`` without lone surrogates (U+FFFD in their place): what a converter reads from a damaged file
    (a PDF whose CMap maps a glyph to U+D800) or a model writes can be written to UTF-8 files and the index."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (a name read from undecodable bytes)."""
    return _SURROGATES.search(text) is not None


def is_tag_char(ch: str) -> bool:
    """A character a #tag may hold: a letter, mark or digit of any script (a Thai vowel or tone mark
    too), ``_``, ``-`` and ``/`` (a nested tag, ``#home/rent``)."""
    return ch in "_-/" or unicodedata.category(ch)[0] in "LMN"


def tag_name(text: str) -> str | None:
    """A tag as written, without its ``#`` (``#押金`` → ``押金``), or None when it is no tag: empty, over
    TAG_MAX_CHARS, holding a character a tag may not, or without a letter (Obsidian's ``#1`` is no tag)."""
    name = text.strip().removeprefix("#").strip("/")
    if not name or len(name) > TAG_MAX_CHARS or not all(is_tag_char(ch) for ch in name):
        return None
    if not any(unicodedata.category(ch)[0] in "LM" for ch in name):
        return None
    return name


def tag_key(tag: str) -> str:
    """What two spellings of one tag share (``#Rent``, ``rent``): without ``#``, NFKC, case folded."""
    return unicodedata.normalize("NFKC", tag.strip().removeprefix("#")).casefold().strip("/")


def distinct_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Tags without repeats (two spellings of one tag: the first kept), in their order."""
    seen: dict[str, str] = {}
    for tag in tags:
        seen.setdefault(tag_key(tag), tag)
    return tuple(seen.values())
