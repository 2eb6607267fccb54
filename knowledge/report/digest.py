"""The digest: what was kept since the last one, the questions left unanswered, and one thing kept
long ago that bears on what came in.

Made from the index and the conversation store alone, without the model (a knowledge base of
10,000 documents is digested in well under a second): each document with its title and the
daemon's summary, grouped by how it came (files, web imports, notes and forwards, voice notes);
the questions of the period that no passage answered; and, resurfaced by kb's own search and
relevance gate, the best older document for the newest things kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from knowledge.errors import IndexMissing
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.text import is_greeting

GROUPS = ("files", "web", "notes", "voice")  # in the order a digest shows them
FIRST_SINCE = timedelta(days=7)  # the first digest looks back this far
LONG_AGO = timedelta(days=30)  # resurfaced: kept at least this long before the period began
PROBES = 12  # the newest documents whose titles and summaries look for an older one
# An older passage bears on a new document when kb's relevance of it to the document's title and
# summary is at least this: lower than the gate for answering a question (0.5), as a document's
# title and summary hold many more words than any one older passage shares with it.
RESURFACE_RELEVANCE = 0.2
MAX_ITEMS = 50  # per group in a message (the bot); the rest is counted. A terminal shows them all
MAX_QUESTIONS = 10  # the latest questions left unanswered, in a message
SINCE = re.compile(r"(\d{1,3})([hdw])")


@dataclass(frozen=True)
class Item:
    """A document in the digest."""

    doc_id: str
    title: str
    kind: str  # one of GROUPS
    summary: str | None
    indexed_at: str
    source_url: str | None = None


@dataclass(frozen=True)
class Digest:
    """What a digest says, before it is put in words."""

    since: datetime
    until: datetime
    groups: dict[str, list[Item]] = field(default_factory=dict)
    more: dict[str, int] = field(default_factory=dict)  # kept beyond MAX_ITEMS, per group
    unanswered: list[str] = field(default_factory=list)
    resurfaced: Item | None = None
    resurfaced_for: str | None = None  # the title of the new document it bears on

    @property
    def is_empty(self) -> bool:
        return not any(self.groups.values()) and not self.unanswered


def kind_of(doc: DocumentRecord) -> str:
    """How a document came (pure): a web import, a note or forward from the chat, a voice note, a file."""
    name = doc.source_name.lower()
    if name.startswith("voice-note-"):
        return "voice"
    if name.startswith(("note-", "forward-")) or (doc.source_url or "").startswith("https://t.me/"):
        return "notes"
    if doc.source_url:
        return "web"
    return "files"


def parse_since(text: str) -> timedelta:
    """``7d``, ``24h``, ``2w``: how far back a digest looks (ValueError otherwise)."""
    found = SINCE.fullmatch(text.strip().lower())
    if not found:
        raise ValueError(f"{text!r} is not a period: write it as 24h, 7d or 2w")
    n, unit = int(found.group(1)), found.group(2)
    if n == 0:
        raise ValueError("the period must be longer than nothing")
    return timedelta(hours=n) if unit == "h" else timedelta(days=n * (7 if unit == "w" else 1))


def since_last(last_sent: float | None, now: datetime) -> datetime:
    """Where a digest starts: where the last one sent ended, or FIRST_SINCE back the first time."""
    return datetime.fromtimestamp(last_sent, UTC) if last_sent is not None else now - FIRST_SINCE


def digest_of(
    index_path: Path, unanswered: Sequence[str], *, since: datetime, until: datetime, whole: bool = False
) -> Digest:
    """The digest of the knowledge base at ``index_path`` (the questions alone while it has no index);
    ``whole``: every document and question (a terminal), not a message's share."""
    try:
        with Index(index_path, readonly=True) as index:
            return make_digest(index, unanswered, since=since, until=until, whole=whole)
    except IndexMissing:
        return Digest(since, until, unanswered=_questions(unanswered, whole=whole))


def make_digest(
    index: Index,
    unanswered: Sequence[str],
    *,
    since: datetime,
    until: datetime,
    threshold: float = RESURFACE_RELEVANCE,
    whole: bool = False,
) -> Digest:
    """The digest of what was kept in [since, until), newest first: ``unanswered`` are the period's
    questions that no passage answered (from the conversation store), newest last; ``whole``: all
    of them and every document (else MAX_ITEMS a group and the last MAX_QUESTIONS questions)."""
    docs = [d for d in index.documents_newest_first() if _at(d) >= since and _at(d) < until]
    docs.sort(key=_at, reverse=True)  # stable: of one second, the one kept last stays first
    summaries = index.summaries_of(d.id for d in docs)
    groups: dict[str, list[Item]] = {g: [] for g in GROUPS}
    more: dict[str, int] = {}
    for d in docs:
        kind = kind_of(d)
        summary = summaries[d.id].text if d.id in summaries and summaries[d.id].text else None
        if whole or len(groups[kind]) < MAX_ITEMS:
            groups[kind].append(Item(d.id, d.title, kind, summary, d.indexed_at, d.source_url))
        else:
            more[kind] = more.get(kind, 0) + 1
    resurfaced, bears_on = _resurfaced(index, docs[:PROBES], summaries, since - LONG_AGO, threshold)
    return Digest(
        since, until, {g: items for g, items in groups.items() if items}, more,
        _questions(unanswered, whole=whole), resurfaced, bears_on,
    )  # fmt: skip


def _questions(unanswered: Sequence[str], *, whole: bool) -> list[str]:
    """The questions left unanswered, each once, the latest MAX_QUESTIONS of them unless ``whole``; a
    greeting or a thank-you is not a question left open."""
    asked = list(dict.fromkeys(q for q in unanswered if q.strip() and not is_greeting(q)))
    return asked if whole else asked[-MAX_QUESTIONS:]


def _resurfaced(
    index: Index, probes: Sequence[DocumentRecord], summaries: dict, before: datetime, threshold: float
) -> tuple[Item | None, str | None]:
    """The older document (kept before ``before``) that kb's search finds most relevant to one of the
    period's newest documents, if one passes the relevance gate."""
    best: tuple[float, DocumentRecord, str] | None = None
    for probe in probes:
        summary = summaries.get(probe.id)
        query = f"{probe.title} {summary.text if summary else ''}".strip()
        for hit in search(index, query, k=10):
            doc = index.document(hit.document_id)
            if doc is None or _at(doc) >= before or hit.relevance < threshold:
                continue
            if best is None or hit.relevance > best[0]:
                best = (hit.relevance, doc, probe.title)
            break  # the best older passage for this probe
    if best is None:
        return None, None
    _, doc, bears_on = best
    kept = index.summary(doc.id)
    return Item(
        doc.id, doc.title, kind_of(doc), kept.text if kept else None, doc.indexed_at, doc.source_url
    ), bears_on


def _at(doc: DocumentRecord) -> datetime:
    at = datetime.fromisoformat(doc.indexed_at)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # kb writes UTC


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True)
class Schedule:
    """When the digest is sent: every day, or one day a week (``weekday`` 0 = Monday), at a local time."""

    hour: int
    minute: int
    weekday: int | None = None  # None: daily


def parse_schedule(text: str) -> Schedule | None:
    """KB_DIGEST's value (checked by the settings) as a Schedule; None for off."""
    if text == "off":
        return None
    how, _, when = text.partition("@")
    day = None
    if how == "weekly":
        name, _, when = when.partition("-")
        day = DAYS.index(name)
    hour, minute = (int(x) for x in when.split(":"))
    return Schedule(hour, minute, day)


def last_due(schedule: Schedule, now: datetime) -> datetime:
    """The latest time at or before ``now`` (aware, local) that the schedule sent a digest (pure)."""
    at = now.replace(hour=schedule.hour, minute=schedule.minute, second=0, microsecond=0)
    if schedule.weekday is None:
        return at if at <= now else at - timedelta(days=1)
    at -= timedelta(days=(now.weekday() - schedule.weekday) % 7)
    return at if at <= now else at - timedelta(days=7)
