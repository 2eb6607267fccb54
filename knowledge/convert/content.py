"""Which part of a web page is the article: trafilatura decides, kb renders what it keeps.

trafilatura (Apache-2.0) scores the page's blocks by text and link density, knows the class and id
names of menus, share bars, comment threads and teasers, and falls back to its readability and
jusText ports when its own pass finds too little. Measured with ``bench/extraction.py`` on
trafilatura's 990 evaluation pages (a development set: its rules were tuned on them) and on the
181-page article-extraction benchmark (held out), kb's own pick (the first ``<main>``, else the
longest ``<article>``, minus chrome found by class names) scored F1 .798 and .854, trafilatura's
text .926 and .960, and kb rendering what trafilatura chose .919 and .961 (README, Benchmarks).
So kb adopts it for choosing the content and keeps its own parts for everything around it:
charsets, the title, JavaScript-page detection and the Markdown (headings, lists, tables, code,
links), which trafilatura's own output flattens.

The two meet on text: kb renders the page, and ``keep_chosen`` keeps the Markdown lines whose words
trafilatura chose, in kb's order and structure.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator

from trafilatura import bare_extraction
from trafilatura.metadata import extract_metadata
from trafilatura.xml import xmltotxt

# trafilatura logs every page it finds little on; the outcome reaches the owner as a ConversionError.
logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
logging.getLogger("htmldate").setLevel(logging.CRITICAL)

# A line this long (without spaces) found anywhere in trafilatura's text is content on its own;
# shorter ones ("Share", "Menu", "Home") must be one of its lines, or come within NEAR_CHARS after
# the text kept last (a heading between two kept paragraphs, the items of a kept list).
SURE_MATCH_CHARS = 15
NEAR_CHARS = 40

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LINE_MARK = re.compile(r"^(?:\s*(?:#{1,6}|>|[-*+]|\d{1,9}[.)])(?:\s+|$))+")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>])")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_NOT_TEXT = re.compile(r"[\s|`]+")


def choose_content(html: str) -> str | None:
    """What trafilatura takes for the page's main content, as text (one block a line); None when it
    finds none."""
    document = bare_extraction(
        html,
        include_comments=False,
        include_tables=True,
        include_links=False,
        include_formatting=False,
        include_images=False,
        with_metadata=False,
    )
    if document is None or document.body is None or len(document.body) == 0:
        return None
    text = xmltotxt(document.body, include_formatting=False) or ""
    if not text.strip():
        return None
    return text


def article_facts(html: str) -> tuple[str | None, str | None]:
    """The page's author and publication date (YYYY-MM-DD) as trafilatura reads them from its
    metadata and markup (trafilatura leaves both out of the text it chooses); None for each it lacks."""
    try:
        found = extract_metadata(html)
    except Exception:  # a metadata parser that fails on a hostile page costs only these two facts
        return None, None
    if found is None:
        return None, None
    author = " ".join(str(found.author or "").split())[:120]
    date = str(found.date or "")[:10]
    return author or None, date if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) else None


def coverage(markdown: str, chosen: str) -> float:
    """The share of trafilatura's text (in characters, spaces aside) that kb's Markdown holds."""
    held = sum(len(_key(_visible(unit))) for unit in _units(markdown.split("\n")) if any(unit))
    return held / max(1, len(_key(chosen)))


def keep_chosen(markdown: str, chosen: str) -> str:
    """The lines of kb's Markdown whose words trafilatura chose, in kb's order and structure.

    Units are lines, except that a fenced code block and a table are one unit each. A unit is kept
    when its text is long enough and found in trafilatura's text, or is one of trafilatura's lines,
    or follows closely in trafilatura's text after the unit kept last (a short list item); a long
    unit is kept as many times as trafilatura's text holds it (a caption shown twice, once). A heading
    is kept with the content it introduces (trafilatura drops a page's <h1> as metadata). Lines
    without words (a blockquote's spacer) go with the unit before them.
    """
    chosen_lines = [line for line in chosen.split("\n") if not _is_rule(line)]
    lines_chosen = {key for line in chosen_lines if (key := _key(line))}
    everything = _key("".join(chosen_lines))
    kept: list[str] = []
    heading: list[str] = []  # a heading not in trafilatura's text, waiting for its content
    cursor = 0  # where the last kept unit ends in trafilatura's text
    previous_kept = False
    seen: Counter[str] = Counter()
    for unit in _units(markdown.split("\n")):
        if not any(line.strip() for line in unit):
            if kept and kept[-1]:
                kept.append("")
            continue
        key = _key(_visible(unit))
        if not key:
            is_kept = previous_kept
        else:
            at = everything.find(key, cursor)
            if at < 0 and len(key) >= SURE_MATCH_CHARS:
                at = everything.find(key)
            is_kept = at >= 0 and (
                len(key) >= SURE_MATCH_CHARS or at - cursor <= NEAR_CHARS or key in lines_chosen
            )
            if is_kept and len(key) >= SURE_MATCH_CHARS:
                # Text shown twice on the page (a caption, a headline over a teaser) but chosen once.
                is_kept = seen[key] < everything.count(key)
                seen[key] += 1
            if is_kept and at >= cursor:
                cursor = at + len(key)
        is_heading = unit[0].startswith("#")
        if is_kept:
            if heading and not is_heading:
                kept.extend([*heading, ""])
            heading = []
            kept.extend(unit)
        elif is_heading:
            heading = unit
        else:
            heading = []
        previous_kept = is_kept
    text = "\n".join(kept).strip("\n")
    return text + "\n" if text else ""


def _units(lines: list[str]) -> Iterator[list[str]]:
    """Lines grouped into units: a blank line, a fenced block, a table, or one other line."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := _FENCE.match(line):
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            yield lines[i : end + 1]
            i = end + 1
        elif line.lstrip().startswith("|"):
            end = i
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            yield lines[i:end]
            i = end
        else:
            yield [line]
            i += 1


def _visible(unit: list[str]) -> str:
    """The words a reader sees in a unit: no link targets, list or heading markers, rules or fences."""
    if _FENCE.match(unit[0]):
        return "\n".join(unit[1:-1])
    out = []
    for line in unit:
        if _is_rule(line):
            continue
        out.append(_ESCAPE.sub(r"\1", _LINE_MARK.sub("", _LINK.sub(r"\1", line))))
    return " ".join(out)


def _is_rule(line: str) -> bool:
    """A table's header rule (|---|:--|), which says nothing."""
    return set(line.strip()) <= {"|", "-", ":"}


def _key(text: str) -> str:
    """Text compared without whitespace or table pipes: the two renderings space words differently."""
    return _NOT_TEXT.sub("", text)
