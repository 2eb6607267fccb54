"""The part of a passage to show when there is no model to answer: the sentences nearest the question, as
plain text.

Pure functions. A passage is Markdown, shown as text a person reads on a phone or in a terminal
(``readable``): headings, emphasis and code marks dropped, a link as its text and address, a list item
after a bullet, a table row by row with its cells apart, code as it is. It is split into sentences (as
the index splits them: full stops in any script, line breaks, the spaces between Thai phrases); the
sentences sharing the most of the question's terms are kept, in their order, within a length budget. A
Chinese question about an English passage shares none of its words: its words' English (``senses``,
knowledge.retrieval.glossary.Glossary.held_words) count as its terms, each word once; without them (a
Thai question about an English page) the sentences nearest the question in meaning are kept (``near``:
the second embedder's cosine, knowledge.retrieval.second.Nearness). Nothing is cut inside a word or
inside a character cluster (a Thai consonant with its vowel and tone marks, a letter with its accents,
an emoji sequence): a sentence too long for the budget is cut at a space, or else between two clusters,
and marked with "…".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

from knowledge.retrieval.glossary import holds
from knowledge.store import analysis

# Sentences → how near each is to the question in meaning (knowledge.retrieval.second.Nearness), or
# None when that cannot be told (the same script, a language the encoder does not know, no encoder).
Near = Callable[[Sequence[str]], Sequence[float] | None]
ELLIPSIS = "…"
BULLET = "•"
CELLS = " · "  # between a table row's cells
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_LINKED = ("http://", "https://")
_ROW = re.compile(r"\s*\|.*\|\s*")
_RULE = re.compile(r":?-+:?")


def excerpt(
    text: str,
    question: str,
    *,
    limit: int = 400,
    senses: Sequence[Sequence[str]] = (),
    near: Near | None = None,
) -> str:
    """The sentences of ``text`` that best match ``question``, in order, at most ``limit`` characters
    (``senses``: the English terms of each of the question's words, for a question in Chinese; ``near``:
    how near each sentence is to the question in meaning, asked when they share no word)."""
    sentences = [s.strip() for s in analysis.SENTENCE_END.split(text) if s and s.strip()]
    if not sentences:
        return ""
    wanted = set(analysis.query_terms(question))
    scores = [_shared(set(analysis.terms(s)), wanted, senses) for s in sentences]
    order = sorted((n for n in range(len(sentences)) if scores[n]), key=lambda n: (-scores[n], n))
    nearness = near(sentences) if near is not None and not order and len(sentences) > 1 else None
    if nearness is not None:  # another language: the sentences nearest in meaning
        order = sorted(range(len(sentences)), key=lambda n: (-nearness[n], n))
    if not order:  # nothing in common and nothing to tell by meaning: the passage's opening
        return cut(" ".join(sentences), limit)
    chosen: list[int] = []
    used = 0
    for n in order:
        size = len(sentences[n]) + (1 if chosen else 0)
        if used + size <= limit:
            chosen.append(n)
            used += size
        elif not chosen:  # the best sentence alone is too long: its start, cut cleanly
            return cut(sentences[n], limit)
    chosen.sort()
    parts: list[str] = []
    for previous, n in zip([None, *chosen], chosen, strict=False):
        if previous is not None:
            parts.append(" " if n == previous + 1 else f" {ELLIPSIS} ")
        parts.append(sentences[n])
    shown = "".join(parts)
    if chosen[0] > 0:
        shown = f"{ELLIPSIS} {shown}"
    if chosen[-1] < len(sentences) - 1:
        shown = f"{shown} {ELLIPSIS}"
    return shown


def _shared(terms: set[str], wanted: set[str], senses: Sequence[Sequence[str]]) -> int:
    """How many of the question's terms, and of its words by their English, a sentence holds."""
    return len(wanted & terms) + holds(senses, terms)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to at most ``limit`` characters (the ellipsis included) at a space, or
    else at a character-cluster boundary; unchanged when it fits."""
    if len(text) <= limit:
        return text
    room = max(limit - 1, 1)
    at = text.rfind(" ", 0, room + 1)
    if at < room // 2:  # no space in the second half (Chinese, Thai): between two clusters
        at = room
        while at > 0 and not is_cluster_boundary(text, at):
            at -= 1
    return text[:at].rstrip() + ELLIPSIS


def is_cluster_boundary(text: str, at: int) -> bool:
    """Whether ``text`` may be cut before index ``at`` without splitting a character cluster:
    the next character is no combining mark (accents, Thai vowels and tone marks, variation
    selectors, skin tones) and no Thai or Lao sara am, the one before is no Thai or Lao vowel
    written before its consonant, and neither side is a zero-width joiner."""
    if at <= 0 or at >= len(text):
        return True
    after, before = text[at], text[at - 1]
    if unicodedata.category(after) in ("Mn", "Mc", "Me") or after in _JOINS_BEFORE:
        return False
    if "\U0001f3fb" <= after <= "\U0001f3ff":  # a skin tone stays on its emoji
        return False
    return before not in _JOINS_AFTER


_JOINS_BEFORE = "\u200d\ufe0f\ufe0e\u0e33\u0eb3"  # ZWJ, variation selectors, Thai and Lao sara am
_JOINS_AFTER = "\u200d\u0e40\u0e41\u0e42\u0e43\u0e44\u0ec0\u0ec1\u0ec2\u0ec3\u0ec4"  # ZWJ, leading vowels


def readable(markdown: str) -> str:
    """A passage's Markdown as plain text, a block a line (CommonMark with tables; raw HTML stays text)."""
    lines: list[str] = []
    lists: list[list[int]] = []  # the open lists: [next number] for an ordered one, [] for bullets
    marker = ""  # the bullet or number the next line of a list item starts with
    row: list[str] = []  # the cells of the table row being read
    in_cell = False
    for token in _MARKDOWN.parse(markdown):
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            lists.append([int(token.attrGet("start") or 1)] if kind == "ordered_list_open" else [])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            counter = lists[-1] if lists else []
            marker = f"{counter[0]}." if counter else BULLET
            if counter:
                counter[0] += 1
        elif kind in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = kind.endswith("_open")
        elif kind == "tr_close":
            lines.append(CELLS.join(cell for cell in row if cell))
            row = []
        elif kind == "inline" and in_cell:
            row.append(" ".join(_inline(token.children or []).split()))
        elif kind == "inline":
            indent = "  " * max(len(lists) - 1, 0)
            for n, line in enumerate(_inline(token.children or []).split("\n")):
                line = _loose_row(line)  # a passage may start inside a table: its rows without the header
                lines.append(indent + (f"{marker} " if marker and n == 0 else "") + line)
            marker = ""
        elif kind in ("fence", "code_block"):
            lines += token.content.rstrip("\n").split("\n")
    return "\n".join(line.rstrip() for line in lines if line.strip())


def _loose_row(line: str) -> str:
    """A table row read as text (``| a | b |``: its cells apart; a ``|---|`` line: nothing), else the line."""
    if not _ROW.fullmatch(line):
        return line
    return CELLS.join(
        c for cell in line.strip().strip("|").split("|") if (c := cell.strip()) and not _RULE.fullmatch(c)
    )


def _inline(tokens: Sequence[Token]) -> str:
    """An inline run as text: a link as its text and its web address (when that differs), an image
    as its description, line breaks kept."""
    out: list[str] = []
    href = ""
    start = 0
    for token in tokens:
        if token.type in ("text", "code_inline", "html_inline"):
            out.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif token.type == "image":
            out.append(token.content)
        elif token.type == "link_open":
            href, start = str(token.attrGet("href") or ""), len(out)
        elif token.type == "link_close":
            label = "".join(out[start:])
            if href.startswith(_LINKED) and href not in (label, "mailto:" + label):
                out.append(f" ({href})")
            href = ""
    return "".join(out)
