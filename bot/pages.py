"""The one splitter: every text kb sends or edits into Telegram is cut here into messages that fit.

Telegram takes at most 4,096 characters a message, counted after the HTML is parsed. Which unit it
counts is disputed (a live measurement reported code points, many clients count UTF-16 code units,
the unit of its entity offsets): kb counts UTF-16 code units, the stricter of the two, so a page of
emoji or math letters fits under either rule. Long HTML is cut between whole blocks or at lines where
no tag is open, never inside a tag; a block too long by itself is cut as text at a line or a word.

Text from documents and the model may carry bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE
and its kin) that reverse what follows them on the screen: a file name that reads as a harmless one,
a /find line whose title runs into its neighbour. They are removed here, on the way out, from every
message, draft and button label. Natural right-to-left text needs none of them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

MAX_TEXT = 4096  # a message, after parsing
# U+202A–U+202E (embeddings, overrides, their pop) and U+2066–U+2069 (isolates)
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
_TAG = re.compile(r"<[^<>]+>")  # our own markup: text between tags has no "<" (escaped)
_TAG_OR_NEWLINE = re.compile(r"<[^<>]+>|\n")


def units(text: str) -> int:
    """Length in UTF-16 code units: a character beyond U+FFFF (most emoji, math letters) counts two."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def fitting(text: str, limit: int) -> int:
    """How many characters from the start of ``text`` fit in ``limit`` UTF-16 code units."""
    if units(text) <= limit:
        return len(text)
    used = 0
    for n, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            return n
    return len(text)


def neutral(text: str) -> str:
    """The text without bidirectional embedding, override and isolate controls."""
    return _BIDI_CONTROLS.sub("", text)


def visible_length(fragment: str) -> int:
    """Length as Telegram counts it (UTF-16 code units): tags stripped, entities decoded."""
    return units(html.unescape(_TAG.sub("", fragment)))


def page_end(text: str, limit: int) -> int:
    """Where the first page of plain ``text`` ends: within ``limit`` units, after a line or a word
    when one ends past the middle."""
    end = fitting(text, limit)
    if end == len(text):
        return end
    cut = max(text.rfind("\n", 0, end), text.rfind(" ", 0, end))
    return cut + 1 if cut > end // 2 else end


def split_text(text: str, limit: int = MAX_TEXT) -> list[str]:
    """Plain text in pages within the limit (cut at lines or words), none empty."""
    pages: list[str] = []
    text = neutral(text)
    while text:
        end = page_end(text, limit)
        if text[:end].strip():
            pages.append(text[:end].strip())
        text = text[end:]
    return pages


def split_blocks(blocks: Sequence[str], limit: int = MAX_TEXT) -> list[str]:
    """Messages of whole HTML blocks joined by blank lines, each within the limit; an over-long
    block is cut as text."""
    messages: list[str] = []
    current: list[str] = []
    size = 0
    for block in blocks:
        for piece in _fit(neutral(block), limit):
            extra = visible_length(piece) + (2 if current else 0)
            if current and size + extra > limit:
                messages.append("\n\n".join(current))
                current, size = [], 0
                extra = visible_length(piece)
            current.append(piece)
            size += extra
    if current:
        messages.append("\n\n".join(current))
    return messages


def split_html(text: str, limit: int = MAX_TEXT) -> list[str]:
    """One HTML message of kb's own in as many messages as it takes: cut at lines outside every tag, a
    line too long by itself cut as text (its first part fills the message begun); ``[text]``
    unchanged when it fits."""
    text = neutral(text)
    if visible_length(text) <= limit:
        return [text]
    messages: list[str] = []
    current: list[str] = []
    size = 0
    for line in _top_level_lines(text):
        length = visible_length(line)
        room = limit - size - (1 if current else 0)
        if length <= room:
            current.append(line)
            size += length + (1 if len(current) > 1 else 0)
            continue
        if length > limit and room > limit // 4:  # too long for any message: begin it here
            plain = html.unescape(_TAG.sub("", line))
            end = page_end(plain, room)
            current.append(html.escape(plain[:end].rstrip(), quote=False))
            line = html.escape(plain[end:].lstrip(), quote=False)
        messages.append("\n".join(current))
        current, size = [], 0
        for piece in _fit(line, limit):
            if current:
                messages.append("\n".join(current))
            current, size = [piece], visible_length(piece)
    if current:
        messages.append("\n".join(current))
    return [m for m in messages if html.unescape(_TAG.sub("", m)).strip()]


def _top_level_lines(text: str) -> list[str]:
    """The text cut at every newline that is not inside a tag."""
    lines: list[str] = []
    depth = start = 0
    for m in _TAG_OR_NEWLINE.finditer(text):
        token = m.group()
        if token == "\n":
            if depth == 0:
                lines.append(text[start : m.start()])
                start = m.end()
        elif token.startswith("</"):
            depth = max(0, depth - 1)
        else:
            depth += 1
    lines.append(text[start:])
    return lines


def _fit(block: str, limit: int) -> list[str]:
    """A block that fits, or its plain text cut at line or word boundaries (tags dropped, re-escaped)."""
    if visible_length(block) <= limit:
        return [block]
    pieces = [
        html.escape(page, quote=False) for page in split_text(html.unescape(_TAG.sub("", block)), limit)
    ]
    return [p for p in pieces if p]
