"""Split raw Markdown into chunks that fit a token budget and end on line boundaries.

Rules:

* a chunk holds at most ``max_tokens`` tokens, counted on its final text;
* chunks break between lines; only a line longer than the budget is cut, first at
  sentence ends, then at spaces, and only then at token boundaries;
* each chunk after the first repeats at most ``overlap_tokens`` tokens from the end of
  the previous one: whole lines when they fit, else the tail of a cut line;
* blank lines separate paragraphs inside a chunk (at most one in a row); a chunk never
  starts or ends with one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from knowledge.config import bounded_overlap
from knowledge.model.tokenizer import TokenCounter
from knowledge.store.analysis import SENTENCE_END


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document: its place in the raw file and its text."""

    seq: int
    start_line: int
    end_line: int
    token_count: int
    text: str


@dataclass(frozen=True)
class _Unit:
    """A whole line, or a contiguous piece of a line that is longer than the budget."""

    line: int
    text: str
    tokens: int
    is_piece: bool


# Words are cut before their spaces (" river"), as tokenizers read them: counted one by one they add
# up to the whole. Cut after them ("river "), each trailing space counted as a token of its own and
# a line of plain words was cut into pieces of half the budget.
_SPACE = re.compile(r"(?<=\S)(?=\s)")
_GAP = re.compile(r"\s+")


def chunk_lines(
    lines: Sequence[str],
    counter: TokenCounter,
    *,
    max_tokens: int,
    overlap_tokens: int,
    first_line: int = 1,
) -> list[Chunk]:
    """Split lines (numbered from ``first_line``) into chunks within the token budget."""
    if max_tokens < 8:
        raise ValueError("max_tokens must be at least 8")
    overlap_tokens = bounded_overlap(max_tokens, overlap_tokens)
    # Pieces of a cut line leave room for the overlap, so consecutive pieces can share it.
    units = _units(
        lines, counter, max_tokens=max_tokens, piece_tokens=max_tokens - overlap_tokens, first_line=first_line
    )
    chunks: list[Chunk] = []
    prefix: list[_Unit] = []  # the overlap carried over from the previous chunk
    start = 0
    while start < len(units):
        end, total = start, _estimate(prefix)
        while end < len(units):
            last = units[end - 1] if end > start else (prefix[-1] if prefix else None)
            step = units[end].tokens + (1 if last is not None and last.line != units[end].line else 0)
            if total + step > max_tokens:
                break
            total += step
            end += 1
        if end == start and prefix:
            prefix = []  # the next unit does not fit beside the overlap: drop the overlap
            continue
        end = max(end, start + 1)
        while True:
            body = prefix + units[start:end]
            text = _join(body)
            tokens = counter.count_many([text])[0]
            if tokens <= max_tokens:
                break
            if end - start > 1:
                end -= 1  # the estimate was a token or two short: give back the last unit
            elif prefix:
                prefix = []
            else:
                text, tokens = _trim(text, counter, max_tokens)
                break
        chunks.append(Chunk(len(chunks) + 1, body[0].line, body[-1].line, tokens, text))
        prefix = _overlap(body, counter, overlap_tokens)
        start = end
    return chunks


def _units(
    lines: Sequence[str], counter: TokenCounter, *, max_tokens: int, piece_tokens: int, first_line: int
) -> list[_Unit]:
    """Non-blank lines as units, with over-long lines cut into sentence-sized pieces."""
    numbered = [(first_line + n, line.rstrip()) for n, line in enumerate(lines) if line.strip()]
    counts = counter.count_many([text for _, text in numbered])
    units: list[_Unit] = []
    for (line_no, text), tokens in zip(numbered, counts, strict=True):
        if tokens <= max_tokens:
            units.append(_Unit(line_no, text, tokens, False))
        else:
            units.extend(_Unit(line_no, p, t, True) for p, t in _cut_line(text, counter, piece_tokens))
    return units


def _split(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Contiguous pieces of text, cut after each match of pattern (concatenation == text)."""
    bounds = [0, *(m.end() for m in pattern.finditer(text)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _cut_line(text: str, counter: TokenCounter, max_tokens: int) -> list[tuple[str, int]]:
    """Cut one long line into sentences, then words, then token slices, each within the budget."""
    pieces: list[tuple[str, int]] = []
    sentences = _split(text, SENTENCE_END)
    for sentence, tokens in zip(sentences, counter.count_many(sentences), strict=True):
        if tokens <= max_tokens:
            pieces.append((sentence, tokens))
            continue
        words = _split(sentence, _SPACE)
        buf, buf_tokens = "", 0
        for word, word_tokens in zip(words, counter.count_many(words), strict=True):
            if word_tokens > max_tokens:
                if buf:
                    pieces.append((buf, buf_tokens))
                    buf, buf_tokens = "", 0
                pieces.extend(_slice_tokens(word, counter, max_tokens))
            elif buf_tokens + word_tokens > max_tokens:
                pieces.append((buf, buf_tokens))
                buf, buf_tokens = word, word_tokens
            else:
                buf, buf_tokens = buf + word, buf_tokens + word_tokens
        if buf:
            pieces.append((buf, buf_tokens))
    return pieces


def _slice_tokens(text: str, counter: TokenCounter, max_tokens: int) -> list[tuple[str, int]]:
    """Cut text that has no sentence or space boundary at token boundaries."""
    spans = counter.spans(text)
    cuts = [0, *(spans[k][0] for k in range(max_tokens, len(spans), max_tokens)), len(text)]
    sizes = [min(max_tokens, len(spans) - k) for k in range(0, len(spans), max_tokens)]
    return [(text[a:b], n) for a, b, n in zip(cuts, cuts[1:], sizes, strict=False) if b > a]


def _estimate(units: Sequence[_Unit]) -> int:
    """Token estimate of joined units: their counts plus one per line break."""
    breaks = sum(1 for a, b in zip(units, units[1:], strict=False) if b.line != a.line)
    return sum(u.tokens for u in units) + breaks


def _join(units: Sequence[_Unit]) -> str:
    """The chunk text: pieces of one line concatenated, lines joined, one blank line kept between."""
    out: list[str] = []
    for prev, unit in zip([None, *units], units, strict=False):
        if prev is not None and unit.line != prev.line:
            out.append("\n\n" if unit.line > prev.line + 1 else "\n")
        out.append(unit.text)
    return "".join(out).strip()


def _trim(text: str, counter: TokenCounter, max_tokens: int) -> tuple[str, int]:
    """Cut a single unit that re-counts above the budget down to it."""
    tokens = counter.count_many([text])[0]
    while tokens > max_tokens:
        spans = counter.spans(text)
        text = text[: spans[min(len(spans), max_tokens - (tokens - max_tokens)) - 1][1]].rstrip()
        tokens = counter.count_many([text])[0]
    return text, tokens


def _overlap(units: list[_Unit], counter: TokenCounter, overlap_tokens: int) -> list[_Unit]:
    """At most ``overlap_tokens`` tokens from the end of a finished chunk, to start the next one.

    A chunk that ends inside a cut line passes on the tail of its part of that line
    (:func:`_tail`), or all of that part and whole lines before it while they fit. A chunk
    that ends with a whole line passes on whole lines while they fit, and none when the last
    one alone is too long.
    """
    if overlap_tokens == 0 or not units:
        return []
    last = units[-1]
    if last.is_piece:  # its pieces of the cut line, as one text counted as the next chunk sees it
        run = [u for u in units if u.line == last.line]
        text = "".join(u.text for u in run)
        tokens = counter.count_many([text])[0]
        if tokens > overlap_tokens:
            return _tail(text, last.line, counter, overlap_tokens)
        units = [*units[: len(units) - len(run)], _Unit(last.line, text, tokens, True)]
    tail: list[_Unit] = []
    total = 0
    for unit in reversed(units):
        if total + unit.tokens > overlap_tokens:
            break
        tail.insert(0, unit)
        total += unit.tokens
    return tail


def _tail(text: str, line: int, counter: TokenCounter, budget: int) -> list[_Unit]:
    """The end of a piece of a line, in at most ``budget`` tokens.

    It starts ``budget`` tokens from the end, moved forward to just after the next spaces only
    when that skips at most ``budget // 8`` tokens (3 of 24): English starts on a word, while
    Thai (spaces between phrases, not words) and Chinese keep at least seven eighths of the
    budget. A tail that re-counts above the budget on its own starts one token later.
    """
    starts = [a for a, _ in counter.spans(text)]
    for first in range(max(1, len(starts) - budget), len(starts)):
        start = starts[first]
        gap = _GAP.search(text, start)
        if gap and gap.end() < len(text.rstrip()) and bisect_left(starts, gap.end()) - first <= budget // 8:
            start = gap.end()
        piece = text[start:]
        tokens = counter.count_many([piece])[0]
        if tokens <= budget:
            return [_Unit(line, piece, tokens, True)] if piece.strip() else []
    return []
