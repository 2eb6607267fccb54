"""PDF page text as a reader reads it: columns in order, paragraphs on one line, no running heads.

Input is pypdf's layout-mode text of each page (characters placed on a fixed grid, so columns,
indentation and vertical gaps survive as spaces and blank lines). Output is one string per page:

* lines repeated at the top or bottom of most pages (running headers and footers, with their page
  numbers) and bare page numbers are dropped;
* a page set in two columns is read left column first, then right, block by block between lines
  that span both (a title, a full-width figure caption);
* the lines of a paragraph become one line, paragraphs are separated by a blank line; a word
  hyphenated at a line end is joined again (``adip-`` + ``iscing``), ligature glyphs become letters;
* rows of a table (cells separated by wide gaps on consecutive lines) become a Markdown table.

Pure functions of strings: the PDF reading lives in pdf.py.
"""

from __future__ import annotations

import re
from collections import Counter

# A running line is at most this many non-blank lines from the top or bottom of a page...
EDGE_LINES = 3
# ...and repeats, digits aside, on at least this share of the pages (and on two of them at least).
RUNNING_SHARE = 0.5
# A column gutter: character positions that at most this share of a page's lines touch.
GUTTER_SHARE = 0.04
GUTTER_MIN_CHARS = 3
# In a block of three lines or more, a line shorter than this share of the longest ends its paragraph.
SHORT_LINE_SHARE = 0.6

_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})  # fmt: skip
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_CELL_GAP = re.compile(r"\S {3,}(?=\S)")
_CELL_SPLIT = re.compile(r" {3,}")
# Every repetition bounded, so a match attempt costs the same whatever the line holds.
_PAGE_NUMBER = re.compile(
    r"(?:page|seite|p\.|pg\.?)?\s{0,3}[-–—(]?\s{0,3}(?:\d{1,4}|[ivxlcdm]{1,7})\s{0,3}[-–—)]?"
    r"(?:\s{0,3}(?:/|of|von)\s{0,3}\d{1,4})?",
    re.IGNORECASE,
)
_BULLET = re.compile(r"(?:[•▪◦‣●○■□–-]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s")
_SENTENCE_END = re.compile(r"[.!?:;\"'”’)\]]$")


def reading_text(pages: list[str]) -> list[str]:
    """Each page's layout text as reading text: paragraphs on one line, blank lines between them."""
    page_lines = drop_running_lines([page.split("\n") for page in pages])
    texts = [reflow(reading_order(lines)) for lines in page_lines]
    # A word hyphenated across a page break is completed on the page where it starts.
    for i in range(len(texts) - 1):
        head, tail = texts[i], texts[i + 1]
        if _is_broken_word(head, tail):
            rest = tail.split(" ", 1)
            word, _, after = rest[0].partition("\n")
            texts[i] = head[:-1] + word
            texts[i + 1] = (
                (after + (" " + rest[1] if len(rest) > 1 else "")).strip()
                if after
                else (rest[1] if len(rest) > 1 else "")
            )
    return texts


def _is_broken_word(head: str, tail: str) -> bool:
    """``head`` ends in a letter and a hyphen, and ``tail`` goes on in lower case."""
    return len(head) >= 2 and head[-1] == "-" and head[-2].isalpha() and tail[:1].islower()


def drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Drop running headers and footers (repeated near the edges of most pages) and bare page numbers.

    A line that also appears, digits aside, in the body of a page is content (a table's rows), not a
    running line.
    """
    edges = [_edge_indexes(lines) for lines in pages]
    seen: Counter[str] = Counter()
    in_body: set[str] = set()
    for lines, indexes in zip(pages, edges, strict=True):
        seen.update({_running_key(lines[i]) for i in indexes})
        in_body.update(
            _running_key(line) for i, line in enumerate(lines) if i not in indexes and line.strip()
        )
    needed = max(2, RUNNING_SHARE * len(pages))
    running = {key for key, count in seen.items() if count >= needed and key not in in_body}
    out = []
    for lines, indexes in zip(pages, edges, strict=True):
        dropped = {i for i in indexes if _running_key(lines[i]) in running or _is_page_number(lines[i])}
        out.append([line for i, line in enumerate(lines) if i not in dropped])
    return out


def _edge_indexes(lines: list[str]) -> set[int]:
    """Indexes of the first and last few non-blank lines."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    n = min(EDGE_LINES, len(filled) // 3)  # a short page keeps most of its lines as body
    return set(filled[:n] + filled[len(filled) - n :]) if n else set()


def _running_key(line: str) -> str:
    """A line compared across pages: digits (page numbers, dates) and spacing do not count."""
    return _DIGITS.sub("#", _SPACES.sub(" ", line).strip().lower())


def _is_page_number(line: str) -> bool:
    """'7', 'Page 7', '- 7 -', 'vii', '7 / 12', 'Page 7 of 12' alone on a line."""
    text = line.strip()
    return bool(text) and _PAGE_NUMBER.fullmatch(text) is not None


def reading_order(lines: list[str]) -> list[str]:
    """The page's lines, a two-column page read left column first then right, between spanning lines."""
    filled = [line for line in lines if line.strip()]
    if len(filled) < 6:
        return lines
    gutter = _gutter(filled)
    if gutter is None:
        return lines
    # Split at the middle of the gutter: a long line may reach a little into it from either side.
    middle = sum(gutter) // 2
    out: list[str] = []
    left: list[str] = []
    right: list[str] = []

    def flush() -> None:
        out.extend(left)
        out.append("")
        out.extend(_dedent(right))
        out.append("")
        left.clear()
        right.clear()

    for line in lines:
        if line[middle - 1 : middle + 2].strip():  # across the gutter: a title or caption over both columns
            flush()
            out.append(line)
            continue
        left.append(line[:middle].rstrip())
        right.append(line[middle:].rstrip())
    flush()
    return out


def _gutter(filled: list[str]) -> tuple[int, int] | None:
    """The widest run of character positions in the middle of the page that (almost) no line touches."""
    width = max(len(line) for line in filled)
    touched = [0] * width
    for line in filled:
        for i, ch in enumerate(line):
            if ch != " ":
                touched[i] += 1
    limit = GUTTER_SHARE * len(filled)
    best: tuple[int, int] | None = None
    run_start = None
    for i in range(int(width * 0.25), int(width * 0.75) + 1):
        is_empty = i < width and touched[i] <= limit
        if is_empty and run_start is None:
            run_start = i
        elif not is_empty and run_start is not None:
            if best is None or i - run_start > best[1] - best[0]:
                best = (run_start, i)
            run_start = None
    if best is None or best[1] - best[0] < GUTTER_MIN_CHARS:
        return None
    start, end = best
    # Two columns only if both sides carry text on a good share of the lines.
    both = sum(1 for line in filled if line[:start].strip() and line[end:].strip())
    return best if both >= 0.3 * len(filled) else None


def _dedent(lines: list[str]) -> list[str]:
    """Remove the indentation all non-blank lines share (the right column's offset)."""
    indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] for line in lines]


def reflow(lines: list[str]) -> str:
    """Blocks between blank lines become paragraphs on one line, or a table; blank line between each."""
    paragraphs: list[str] = []
    is_table = False  # whether the last paragraph is a table
    for block in _blocks(lines):
        if _is_table(block):
            paragraphs.append(_table(block))
            is_table = True
            continue
        for lines_ in _paragraphs(block):
            text = _join(lines_)
            if paragraphs and not is_table and _goes_on(paragraphs[-1], text):
                # The paragraph was cut by a column end or a gap the other column made.
                paragraphs[-1] = _join([paragraphs[-1], text])
            elif text:
                paragraphs.append(text)
            is_table = False
    return "\n\n".join(paragraphs)


def _goes_on(previous: str, text: str) -> bool:
    """The previous paragraph stopped mid-sentence and ``text`` continues it in lower case."""
    return text[:1].islower() and _SENTENCE_END.search(previous) is None


def _blocks(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines."""
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line.rstrip())
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]


def _is_table(block: list[str]) -> bool:
    """Two or more lines, most of them cells separated by wide gaps."""
    rows = sum(1 for line in block if _CELL_GAP.search(line.strip()))
    return rows >= 2 and rows >= 0.6 * len(block)


def _table(block: list[str]) -> str:
    """A Markdown table; the first row is the header."""
    grid = [[_cell(cell) for cell in _CELL_SPLIT.split(line.strip())] for line in block]
    width = max(len(row) for row in grid)
    grid = [row + [""] * (width - len(row)) for row in grid]
    lines = ["| " + " | ".join(row) + " |" for row in grid]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines)


def _cell(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_LIGATURES)).strip().replace("|", "\\|")


def _paragraphs(block: list[str]) -> list[list[str]]:
    """Split a block where a line starts a list item, is indented after a finished sentence, or follows
    a line that ended well short of the others (a heading, an address line: a break on purpose)."""
    indent = min(len(line) - len(line.lstrip()) for line in block)
    full = max(len(line) for line in block) if len(block) >= 3 else 0
    paragraphs: list[list[str]] = [[]]
    previous_length = 0
    for line in block:
        text = line.strip()
        previous = paragraphs[-1][-1] if paragraphs[-1] else None
        starts_new = previous is not None and (
            _BULLET.match(text) is not None
            or (len(line) - len(line.lstrip()) >= indent + 2 and _SENTENCE_END.search(previous) is not None)
            or (previous_length < SHORT_LINE_SHARE * full and not previous.endswith("-"))
        )
        previous_length = len(line)
        if starts_new:
            paragraphs.append([])
        paragraphs[-1].append(text)
    return paragraphs


def _join(lines: list[str]) -> str:
    """One line: a word hyphenated at a line end is joined, other lines meet with a space."""
    text = ""
    for line in lines:
        line = line.translate(_LIGATURES)
        # A soft hyphen is always a break inside a word; a hard one is when the word goes on in lower case.
        if text.endswith("\u00ad") or _is_broken_word(text, line):
            text = text[:-1] + line
        else:
            text = f"{text} {line}" if text else line
    return _SPACES.sub(" ", text).strip()
