"""Plain text, on the ground floor: the script a text is written in, whether it is a greeting, one line cut
to a width, a title cut at a word, text made safe to write (no lone surrogates), and a note's tag told and
compared. Pure functions of strings, used by every room."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import cache

ELLIPSIS = "…"
LANGUAGE_SHARE = 0.3  # a text is Thai or CJK when that share of its letters is
_SURROGATES = re.compile("[\ud800-\udfff]")
TAG_MAX_CHARS = 100
_HAN = re.compile(r"[\u3400-\u9fff]")
_GREETING = re.compile(
    r"\W*(你好|您好|妳好|哈囉|哈啰|嗨|早安|午安|晚安|謝謝(你|您)?|谢谢(你|您)?|感謝|感谢|多謝|多谢|好的|了解|收到|"
    r"สวัสดี|ขอบคุณ|ขอบใจ|โอเค|ได้เลย|hi|hello|hey|thanks?|thank you|ok|okay|good (?:morning|afternoon|evening|night))"
    r"\s*(啊|呀|喔|哦|囉|啦|ครับ|ค่ะ|คะ|นะ|จ้า|มาก|มากครับ|มากค่ะ)?\W*",
    re.IGNORECASE,
)


@cache
def opencc_converter(config: str) -> Callable[[str], str]:
    """OpenCC's conversion by ``config`` (``s2twp``, ``t2s``…), built once per process."""
    import opencc

    return opencc.OpenCC(config).convert


def is_simplified(text: str) -> bool:
    """Whether Chinese text is written in Simplified characters: it has none that only Traditional
    writing uses (台, 里, 了 are both), and some that only Simplified writing uses."""
    hans = "".join(_HAN.findall(text))
    return bool(hans) and opencc_converter("t2s")(hans) == hans and opencc_converter("s2t")(hans) != hans


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


def has_words(text: str) -> bool:
    """Whether a text has a letter or a digit in any script: a question of punctuation, emoji or
    nothing at all has nothing to search for."""
    return any(ch.isalnum() for ch in text)


def is_greeting(message: str) -> bool:
    """A greeting or a thank-you ("你好", "謝謝", "สวัสดีครับ", "thanks"): small talk, nothing to search,
    rewrite or leave open."""
    return _GREETING.fullmatch(message.strip()) is not None


def _is_wide(ch: str) -> bool:
    """A Chinese or Japanese character or a full-width mark (。，：「」（）), written without spaces around it."""
    code = ord(ch)
    return (
        0x3000 <= code <= 0x30FF  # CJK marks (。「」), kana
        or 0x3400 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFF60  # full-width forms (：，（）！？)
        or code >= 0x20000
    )


def gap(before: str, after: str) -> str:
    """What goes between two sentences or phrases: a space, or nothing after a full-width mark (。：）),
    before one (（目前不在）) and between Chinese characters, as Chinese is written."""
    if not before or not after:
        return ""
    last, first = before.rstrip()[-1:], after.lstrip()[:1]
    if (last and _is_wide(last) and not last.isalnum()) or (
        first and _is_wide(first) and not first.isalnum()
    ):
        return ""
    return "" if last and first and _is_wide(last) and _is_wide(first) else " "


def sentences(parts: Iterable[str]) -> str:
    """Sentences (or phrases) one after the other, each joined to the last by its :func:`gap`; after
    a part that ends its line (a command to copy), the next starts on a line of its own."""
    out, line_ended = "", False
    for raw in parts:
        part = raw.strip()
        if part:
            out += ("\n" if line_ended and out else gap(out, part)) + part
            line_ended = raw.rstrip(" \t").endswith("\n")
    return out


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
