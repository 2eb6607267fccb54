"""The digest in words: its sections in the reader's language, for a phone or a terminal.

A section is a heading and its lines; each document line carries the document's id, so a front end
can put an Open button (the bot) or the id (the terminal) beside it. Summaries and titles are the
documents' own words: the front end escapes them, they are never markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from knowledge.text import shorten
from knowledge.words.catalog import N_, Words


class Item(Protocol):
    """A document of the digest, as knowledge.report.digest makes it (the words read no further)."""

    doc_id: str
    title: str
    summary: str | None


class Digest(Protocol):
    """The digest's facts, as knowledge.report.digest makes them (which itself reads the catalog)."""

    since: datetime
    until: datetime
    groups: Mapping[str, Sequence[Item]]
    more: Mapping[str, int]
    unanswered: Sequence[str]
    resurfaced: Item | None
    resurfaced_for: str | None

    @property
    def is_empty(self) -> bool: ...


HEADINGS = {
    "files": N_("Files"),
    "web": N_("Web imports"),
    "notes": N_("Notes and forwards"),
    "voice": N_("Voice notes"),
}
SUMMARY_CHARS = 160


@dataclass(frozen=True)
class Line:
    """One line of a section: its text, the document it names (None: a question), a summary line."""

    text: str
    doc_id: str | None = None
    summary: str | None = None


@dataclass(frozen=True)
class Section:
    heading: str
    lines: list[Line]


def digest_title(digest: Digest, words: Words) -> str:
    """``Digest: Nov 26 – Dec 3, 2026``."""
    return words.tr(
        "Digest: {since} – {until}", since=words.date(digest.since), until=words.date(digest.until)
    )


def digest_sections(digest: Digest, words: Words) -> list[Section]:
    """The digest's sections, in the order it shows them; empty when nothing was kept or asked."""
    sections = []
    for group, items in digest.groups.items():
        lines = [_line(item) for item in items]
        if digest.more.get(group):
            lines.append(Line(words.ntr("…and {n} more", "…and {n} more", digest.more[group])))
        sections.append(Section(words.tr(HEADINGS[group]), lines))
    if digest.unanswered:
        heading = words.tr("Questions left unanswered")
        sections.append(Section(heading, [Line(q) for q in digest.unanswered]))
    if digest.resurfaced is not None:
        heading = words.tr("From long ago, about “{title}”", title=digest.resurfaced_for or "")
        sections.append(Section(heading, [_line(digest.resurfaced)]))
    return sections


def nothing_new(digest: Digest, words: Words) -> str:
    return words.tr("Nothing was kept or asked since {since}.", since=words.date(digest.since))


def _line(item: Item) -> Line:
    return Line(item.title, item.doc_id, shorten(item.summary, SUMMARY_CHARS) if item.summary else None)


def digest_plain(digest: Digest, words: Words) -> str:
    """The whole digest as plain text, for a terminal (each document with its id)."""
    if digest.is_empty:
        return nothing_new(digest, words)
    out = [digest_title(digest, words)]
    for section in digest_sections(digest, words):
        out += ["", section.heading]
        for line in section.lines:
            out.append(f"  • {line.text}" + (f"  ({line.doc_id})" if line.doc_id else ""))
            if line.summary:
                out.append(f"    {line.summary}")
    return "\n".join(out)
