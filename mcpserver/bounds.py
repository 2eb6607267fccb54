"""The size limits of every MCP result: queries refused past a length, passages and lines cut to a cap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_QUERY_CHARS = 4_000  # a query or question longer than this is refused
MAX_RESULT_CHARS = 20_000  # a whole result at most (a popular client's tool-output cap is ~25k tokens)
# The document text one result carries: it travels twice (structured, and in the text rendering), with its fields.
MAX_TEXT_CHARS = 8_000
MAX_LINES = 400  # the lines one `get` returns at most
MAX_LIMIT = 20  # the passages one `search` returns at most


class TooLong(ValueError):
    """A query over the limit; the message says how long it was and what is accepted."""


def check_query(text: str, *, what: str = "query") -> str:
    """The query stripped, or TooLong when it is empty or over MAX_QUERY_CHARS."""
    text = text.strip()
    if not text:
        raise TooLong(f"the {what} is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise TooLong(f"the {what} is {len(text):,} characters; at most {MAX_QUERY_CHARS:,} are accepted")
    return text


@dataclass(frozen=True)
class Cut:
    """Texts fitted to a budget: each text (whole or cut) and, per text, whether it was cut."""

    texts: list[str]
    is_cut: list[bool]


def fit_texts(texts: Sequence[str], budget: int = MAX_TEXT_CHARS) -> Cut:
    """Cut texts, in order, so that together they hold at most ``budget`` characters (the first ones whole)."""
    out, cut, left = [], [], budget
    for text in texts:
        kept = text[: max(left, 0)]
        out.append(kept)
        cut.append(len(kept) < len(text))
        left -= len(kept)
    return Cut(out, cut)


@dataclass(frozen=True)
class Lines:
    """Lines ``first``..``last`` of a document (1-based, inclusive) and what was left out, if anything."""

    first: int
    last: int
    text: str
    next_line: int | None  # where the rest starts, when the cap cut the range short
    end_line: int  # the last line asked for (or the document's last)


def take_lines(
    lines: Sequence[str],
    start_line: int | None,
    end_line: int | None,
    *,
    max_lines: int = MAX_LINES,
    max_chars: int = MAX_TEXT_CHARS,
) -> Lines:
    """Lines start..end of ``lines`` (defaults: the whole document), within a line and a character cap.

    Raises ValueError for a range outside the document."""
    total = len(lines)
    first = 1 if start_line is None else start_line
    last = total if end_line is None else min(end_line, total)
    if first < 1 or first > max(total, 1) or last < first:
        raise ValueError(f"lines {first}–{end_line or total} are not in the document (it has {total} lines)")
    kept: list[str] = []
    size = 0
    line = first
    while line <= last and len(kept) < max_lines:
        text = lines[line - 1]
        if kept and size + 1 + len(text) > max_chars:  # the joined text's length, newlines counted
            break
        kept.append(text[:max_chars])
        size += (1 if len(kept) > 1 else 0) + len(kept[-1])
        line += 1
    shown_last = first + len(kept) - 1
    return Lines(first, shown_last, "\n".join(kept), line if line <= last else None, last)
