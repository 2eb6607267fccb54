"""Recognised lines as a reader takes them: pure functions of the lines an OCR engine returns.

* which lines count (letters or digits, not punctuation alone) and whether anything on a page is
  legible at all (a line read confidently enough);
* the reading order: top to bottom, left to right, pieces of one visual line joined, a page in
  simple columns read a column at a time between lines that span them;
* Markdown with one line per text line, so a citation points at a real line;
* one Chinese script per page: a recogniser sometimes reads 奧 as its Simplified twin 奥 in a
  Traditional text (and the reverse); the stray character is put back;
* where the ink is on a picture (to cut off blank margins) and how to cut a tall picture into strips.

The engines and the settings are in ocr.py; this module knows neither.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from knowledge.text import opencc_converter

if TYPE_CHECKING:
    from PIL import Image

# A page is legible when at least one line carrying a letter or digit is read this confidently.
LEGIBLE_CONFIDENCE = 0.6
# Margins are cut off before OCR where no pixel differs from the background by more than this (0-255).
INK_CONTRAST = 40
TRIM_PAD_PX = 32
# A picture more than this many widths tall is read in strips 1.5 widths tall, overlapping by enough
# to hold two lines of any size a screenshot uses whole.
TALL_RATIO = 2.5
BAND_RATIO = 1.5
BAND_OVERLAP_PX = 200

_KANA = re.compile(r"[\u3040-\u30ff]")
_SPACES = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


@dataclass(frozen=True)
class OcrLine:
    """One recognised line: its text, the engine's confidence (0-1) and its box (x0, y0, x1, y1) in pixels."""

    text: str
    confidence: float
    box: tuple[float, float, float, float]


def ink_box(image: Image.Image) -> tuple[int, int, int, int] | None:
    """The box around everything that stands out from the background, with a margin; None if nothing does."""
    from PIL import Image as PILImage
    from PIL import ImageChops

    grey = image.convert("L")
    histogram = grey.histogram()
    half, seen, background = grey.width * grey.height / 2, 0, 255
    for level, count in enumerate(histogram):  # the median grey: the page (or a dark screen)
        seen += count
        if seen >= half:
            background = level
            break
    difference = ImageChops.difference(grey, PILImage.new("L", grey.size, background))
    box = difference.point(lambda v: 255 if v > INK_CONTRAST else 0).getbbox()
    if box is None:
        return None
    left, top, right, bottom = box
    return (
        max(0, left - TRIM_PAD_PX),
        max(0, top - TRIM_PAD_PX),
        min(grey.width, right + TRIM_PAD_PX),
        min(grey.height, bottom + TRIM_PAD_PX),
    )


@dataclass(frozen=True)
class Band:
    """A horizontal strip of a tall picture (top, bottom) and the part of it whose lines it reports."""

    top: int
    bottom: int
    own_top: float
    own_bottom: float

    def owns(self, y: float) -> bool:
        """Is a line centred at ``y`` (picture pixels) this band's to report?"""
        return self.own_top <= y < self.own_bottom


def bands(width: int, height: int) -> list[Band]:
    """Strips to read a picture in: itself, or overlapping strips when it is more than TALL_RATIO widths tall.

    Neighbouring strips overlap by BAND_OVERLAP_PX and split the overlap between them at its middle; a
    line cut at the edge of one strip is whole in the next and is reported by the one that owns its centre.
    """
    band = max(int(BAND_RATIO * width), 2 * BAND_OVERLAP_PX)
    if height <= TALL_RATIO * width or height <= band:
        return [Band(0, height, float("-inf"), float("inf"))]
    step = band - BAND_OVERLAP_PX
    tops = list(range(0, height - band, step)) + [height - band]
    out = []
    for i, top in enumerate(tops):
        own_top = float("-inf") if i == 0 else (top + tops[i - 1] + band) / 2
        own_bottom = float("inf") if i == len(tops) - 1 else (tops[i + 1] + top + band) / 2
        out.append(Band(top, top + band, own_top, own_bottom))
    return out


def clean_line(text: str) -> str:
    """One line of plain text: no control or invisible characters, single spaces."""
    return _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()


def has_words(text: str) -> bool:
    """Does the text hold a letter or a digit (of any script), not only punctuation and symbols?"""
    return any(ch.isalnum() for ch in text)


def legible_lines(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines with their text cleaned, without the empty and the punctuation-only ones."""
    out = []
    for line in lines:
        text = clean_line(line.text)
        if has_words(text):
            out.append(replace(line, text=text))
    return out


def is_legible(lines: Sequence[OcrLine], *, floor: float = LEGIBLE_CONFIDENCE) -> bool:
    """True when at least one line carries a letter or digit and is read at ``floor`` or better."""
    return any(line.confidence >= floor and has_words(line.text) for line in lines)


# Latin words as an engine reads text of a script it does not know (Thai read by a Chinese and
# English model: "Usennmanniaymnaanmnsgn"): too long, without a vowel, or with long consonant runs.
_LATIN_WORD = re.compile(r"[A-Za-z]{3,}")
_CONSONANT_RUN = re.compile(r"[bcdfghjklmnpqrstvwxz]{6,}", re.IGNORECASE)
WORD_MAX_LETTERS = 15
READABLE_SHARE = 0.5  # of the letters in Latin words, at least this share must be in word-like ones
SURE_CONFIDENCE = 0.85  # a page read this confidently is text, whatever it looks like


def is_word_like(word: str) -> bool:
    """A run of Latin letters that could be a word of a language written in Latin letters."""
    return (
        len(word) <= WORD_MAX_LETTERS
        and any(ch in "aeiouyAEIOUY" for ch in word)
        and not _CONSONANT_RUN.search(word)
    )


def readable_share(lines: Sequence[OcrLine]) -> float | None:
    """Of the letters in the Latin words of three letters or more, the share in word-like ones;
    None when the lines hold no such word (Chinese, numbers, codes: nothing to judge by)."""
    words = [w for line in lines for w in _LATIN_WORD.findall(line.text)]
    letters = sum(len(w) for w in words)
    if not letters:
        return None
    return sum(len(w) for w in words if is_word_like(w)) / letters


def is_readable(lines: Sequence[OcrLine]) -> bool:
    """False when the text read is mostly letters that form no words and was read without confidence:
    an engine's guess at a script it cannot read (the text is there, kb cannot read it here)."""
    share = readable_share(lines)
    confidence = mean_confidence(lines)
    return share is None or share >= READABLE_SHARE or (confidence or 0.0) >= SURE_CONFIDENCE


def mean_confidence(lines: Sequence[OcrLine]) -> float | None:
    """The mean of the lines' confidences; None without lines."""
    return statistics.fmean(line.confidence for line in lines) if lines else None


def reading_order(lines: Sequence[OcrLine]) -> list[list[OcrLine]]:
    """Lines as a reader takes them, in blocks: top to bottom, left to right, columns one after another.

    Pieces of one visual line (RapidOCR cuts a line at a wide gap) become one line. A page with clear
    columns (a gutter no line crosses, with full lines on both sides) is read a column at a time,
    band by band between lines that span the columns (a title, a caption).
    """
    lines = [line for line in lines if line.text.strip()]
    if not lines:
        return []
    bounds = _columns(lines)
    if len(bounds) < 2:
        return [_rows(lines)]
    columns = _widened(bounds)
    blocks: list[list[OcrLine]] = []
    band: list[OcrLine] = []

    def flush() -> None:
        for left, right in columns:
            column = [line for line in band if left <= line.box[0] and line.box[2] <= right]
            if column:
                blocks.append(_rows(column))
        band.clear()

    for line in sorted(lines, key=lambda item: (item.box[1], item.box[0])):
        if any(left <= line.box[0] and line.box[2] <= right for left, right in columns):
            band.append(line)
        else:  # crosses a gutter
            flush()
            blocks.append([line])
    flush()
    return [block for block in blocks if block]


def _height(line: OcrLine) -> float:
    return max(1.0, line.box[3] - line.box[1])


def _rows(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines top to bottom; pieces side by side at the same height joined into one line."""
    rows: list[list[OcrLine]] = []
    for line in sorted(lines, key=lambda item: ((item.box[1] + item.box[3]) / 2, item.box[0])):
        row = rows[-1] if rows else None
        if row is not None and all(_same_row(line, other) for other in row):
            row.append(line)
        else:
            rows.append([line])
    return [_join(row) for row in rows]


def _same_row(a: OcrLine, b: OcrLine) -> bool:
    """Side by side (no horizontal overlap) with centres within half a line height."""
    centre_gap = abs((a.box[1] + a.box[3]) / 2 - (b.box[1] + b.box[3]) / 2)
    overlaps = a.box[0] < b.box[2] and b.box[0] < a.box[2]
    return not overlaps and centre_gap <= 0.5 * min(_height(a), _height(b))


def _join(row: list[OcrLine]) -> OcrLine:
    """One line of the pieces of a row, left to right; confidence weighted by length."""
    if len(row) == 1:
        return row[0]
    row = sorted(row, key=lambda item: item.box[0])
    text = " ".join(piece.text.strip() for piece in row)
    weights = [max(1, len(piece.text.strip())) for piece in row]
    confidence = sum(p.confidence * w for p, w in zip(row, weights, strict=True)) / sum(weights)
    box = (
        min(p.box[0] for p in row),
        min(p.box[1] for p in row),
        max(p.box[2] for p in row),
        max(p.box[3] for p in row),
    )
    return OcrLine(text, confidence, box)


def _columns(lines: Sequence[OcrLine]) -> list[tuple[float, float]]:
    """The x ranges of the page's text columns: one range unless clear gutters split it.

    A gutter is a vertical strip in the middle of the page, a line height wide or more, that no line
    narrower than the page touches (titles and captions across the columns may).
    """
    left = min(line.box[0] for line in lines)
    right = max(line.box[2] for line in lines)
    width = right - left
    height = statistics.median(_height(line) for line in lines)
    narrow = [line for line in lines if line.box[2] - line.box[0] < 0.6 * width]
    if len(narrow) < 6 or width <= 4 * height:
        return [(left, right)]
    bins = 400
    step = width / bins
    touched = [0] * bins
    for line in narrow:
        for i in range(int((line.box[0] - left) / step), min(bins, int((line.box[2] - left) / step) + 1)):
            touched[i] += 1
    allowed = int(0.02 * len(narrow))  # a stray line poking into the gutter
    gutters: list[tuple[float, float]] = []
    start = None
    for i in range(int(bins * 0.15), int(bins * 0.85) + 1):
        is_empty = i < bins and touched[i] <= allowed
        if is_empty and start is None:
            start = i
        elif not is_empty and start is not None:
            if (i - start) * step >= height:
                gutters.append((left + start * step, left + i * step))
            start = None
    edges = [left] + [x for gutter in gutters for x in gutter] + [right]
    bounds = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    return bounds if len(bounds) > 1 and _are_text_columns(lines, bounds, width) else [(left, right)]


def _are_text_columns(lines: Sequence[OcrLine], bounds: list[tuple[float, float]], width: float) -> bool:
    """Columns of running text: each a quarter of the page wide or more, with three lines or more,
    most of them filling it. A form or a table (short labels beside values) fails this and is read
    row by row instead."""
    for left, right in bounds:
        inside = [line for line in lines if left <= line.box[0] and line.box[2] <= right]
        if right - left < 0.25 * width or len(inside) < 3:
            return False
        widths = sorted(line.box[2] - line.box[0] for line in inside)
        if statistics.median(widths) < 0.6 * (right - left):
            return False
    return True


def _widened(bounds: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Column ranges reaching half-way into the gutters beside them (a line may poke into a gutter)."""
    out = []
    for i, (left, right) in enumerate(bounds):
        lo = (bounds[i - 1][1] + left) / 2 if i else float("-inf")
        hi = (right + bounds[i + 1][0]) / 2 if i + 1 < len(bounds) else float("inf")
        out.append((lo, hi))
    return out


def lines_markdown(blocks: Sequence[Sequence[OcrLine]]) -> str:
    """Markdown of blocks of lines: one line per text line, a blank line between blocks.

    A line that would read as a Markdown heading ("# …") keeps its text but not the heading role.
    """
    out = []
    for block in blocks:
        texts = [clean_line(line.text) for line in block]
        texts = ["\\" + text if text.startswith("#") else text for text in texts if text]
        if texts:
            out.append("\n".join(texts))
    return "\n\n".join(out)


def keep_script(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines of a page written in one Chinese script, with stray characters of the other script put back.

    A Traditional page (Traditional forms outnumber Simplified-only ones four to one, three at least)
    gets its few Simplified-only characters converted (phrase-aware, so 皇后 and 公里 stay); a Simplified
    page likewise. Mixed pages, pages with few Chinese characters and Japanese (kana) are left alone.
    """
    text = "".join(line.text for line in lines)
    if _KANA.search(text):
        return list(lines)
    traditional = sum(1 for ch in text if _is_traditional_form(ch))
    simplified = sum(1 for ch in text if _is_simplified_only(ch))
    if traditional >= 3 and simplified and simplified * 4 <= traditional:
        convert, is_stray = opencc_converter("s2t"), _is_simplified_only
    elif simplified >= 3 and traditional and traditional * 4 <= simplified:
        convert, is_stray = opencc_converter("t2s"), _is_traditional_form
    else:
        return list(lines)
    out = []
    for line in lines:
        if any(is_stray(ch) for ch in line.text):
            converted = convert(line.text)
            if len(converted) == len(line.text):
                fixed = "".join(
                    new if is_stray(old) else old for old, new in zip(line.text, converted, strict=True)
                )
                line = replace(line, text=fixed)
        out.append(line)
    return out


@functools.lru_cache(maxsize=65536)
def _is_traditional_form(ch: str) -> bool:
    """A Chinese character that has a different Simplified form (資, 奧, 們)."""
    return "\u3400" <= ch <= "\U0002ffff" and opencc_converter("t2s")(ch) != ch


@functools.lru_cache(maxsize=65536)
def _is_simplified_only(ch: str) -> bool:
    """A character used in Simplified text only (资, 奥, 们): not Traditional, nor a Taiwan/HK variant."""
    return (
        "\u3400" <= ch <= "\U0002ffff"
        and opencc_converter("t2s")(ch) == ch
        and opencc_converter("s2t")(ch) != ch
        and opencc_converter("tw2t")(ch) == ch
        and opencc_converter("hk2t")(ch) == ch
    )
