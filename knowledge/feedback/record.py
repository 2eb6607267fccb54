"""What a vote is about, as values: the answer rated (question, standalone question, the door it went
through, the passages it cited) and the regression set a list of votes becomes.

Pure: no file, clock or logger here (knowledge.feedback.store keeps them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from knowledge.answer.reply import Reply
from knowledge.ingest.raw import chunk_document

GOOD, BAD = 1, -1
VOTE_NAMES = {GOOD: "good", BAD: "bad"}
DOORS = ("local", "web", "none")


@dataclass(frozen=True)
class Cited:
    """A passage an answer cited: its document, its chunk, the document's title, the raw file and lines."""

    document_id: str
    chunk_id: str
    title: str
    path: str
    lines: str  # "12-29"


@dataclass(frozen=True)
class Rated:
    """An answer the owner can vote on: the message as written, the standalone question searched, the
    door taken (``local``: answered from the documents, ``web``: the web was searched, ``none``:
    neither), the reply's mode and the passages it cited, in citation order."""

    question: str
    standalone: str
    door: str
    mode: str
    cited: tuple[Cited, ...] = ()

    def cited_json(self) -> str:
        """The cited passages as stored (a JSON list)."""
        return json.dumps([asdict(c) for c in self.cited], ensure_ascii=False)


@dataclass(frozen=True)
class Vote:
    """A rated answer in the conversation file: whose (the conversation key: ``tg:<chat>``,
    ``chat:<run>``), when it was answered, and the vote (GOOD, BAD; None until the owner votes)."""

    id: int
    key: str
    rated: Rated
    answered_at: float
    vote: int | None
    voted_at: float | None


def door_of(reply: Reply) -> str:
    """The door a reply went through: its route's, or what its mode says when it has none."""
    if reply.route is not None and reply.route.door in DOORS:
        return reply.route.door
    return {"local": "local", "degraded": "local", "web": "web"}.get(reply.mode, "none")


def rated(question: str, standalone: str, reply: Reply) -> Rated:
    """The answer ``reply`` to ``question`` (searched as ``standalone``), as a vote keeps it."""
    cited = tuple(
        Cited(chunk_document(c.chunk_id), c.chunk_id, c.title, c.raw_path, f"{c.start_line}-{c.end_line}")
        for c in reply.citations
    )
    return Rated(question, standalone or question, door_of(reply), reply.mode, cited)


def cited_from_json(text: str) -> tuple[Cited, ...]:
    """The cited passages as stored."""
    return tuple(Cited(**c) for c in json.loads(text))


def iso(at: float | None) -> str | None:
    """A time stamp as ISO 8601 in UTC (``2026-05-01T09:30:00Z``)."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def regression_set(votes: Iterable[Vote]) -> list[dict[str, object]]:
    """The votes as a regression set (``kb feedback --json``), oldest first: for each, the question, the
    standalone question, the vote and door, and the cited passages as ``expected`` (👍: these should
    answer it) or ``rejected`` (👎: these did not)."""
    out: list[dict[str, object]] = []
    for v in sorted((v for v in votes if v.vote is not None), key=lambda v: (v.voted_at or 0.0, v.id)):
        chunks = [asdict(c) for c in v.rated.cited]
        out.append(
            {
                "question": v.rated.question,
                "standalone": v.rated.standalone,
                "vote": VOTE_NAMES[v.vote],  # type: ignore[index]
                "door": v.rated.door,
                "mode": v.rated.mode,
                "chat": v.key,
                "answered_at": iso(v.answered_at),
                "at": iso(v.voted_at),
                "expected": chunks if v.vote == GOOD else [],
                "rejected": chunks if v.vote == BAD else [],
            }
        )
    return out


def front_of(key: str) -> str:
    """Where a conversation key's votes came from: ``telegram``, ``terminal``, ``cli`` (``kb ask
    --conversation``) or the key's own prefix."""
    prefix = key.split(":", 1)[0]
    return {"tg": "telegram", "chat": "terminal", "cli": "cli"}.get(prefix, prefix)
