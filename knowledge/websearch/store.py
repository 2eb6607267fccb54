"""Web candidates per chat, in ``runs/web-search.json``: the only place an import may take a URL from.

Each chat keeps its latest search (a new one replaces it): a search id, the question and
queries, the time, and the candidates ``web-1`` … ``web-5`` with title, URL and snippet.
Records older than their time-to-live are dropped on the next write. Writes are atomic
(temporary file, then rename) under a lock, so the bot and the CLI can both write.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from knowledge.ingest.files import locked, write_atomic

DEFAULT_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class Candidate:
    """One importable web result."""

    id: str  # web-1 … web-5
    title: str
    url: str
    snippet: str
    comment: str | None = None  # what the owner wrote with a link they shared, kept with the import


@dataclass(frozen=True)
class SearchRecord:
    """A chat's latest web search."""

    search_id: str
    chat_id: str
    question: str
    queries: list[str]
    created_at: str
    candidates: list[Candidate] = field(default_factory=list)

    def candidate(self, source_id: str) -> Candidate | None:
        """The candidate with this id (web-N), if it is in this record."""
        return next((c for c in self.candidates if c.id == source_id), None)


def _record(raw: object) -> SearchRecord | None:
    if not isinstance(raw, dict):
        return None
    try:
        return SearchRecord(**{**raw, "candidates": [Candidate(**c) for c in raw.get("candidates", [])]})
    except TypeError:
        return None


def new_search_id() -> str:
    """A short random id (fits Telegram's 64-byte callback data with room to spare)."""
    return secrets.token_hex(4)


class CandidateStore:
    """Reads and writes ``runs/web-search.json``."""

    def __init__(self, path: Path, *, ttl: timedelta = DEFAULT_TTL, clock: Callable[[], datetime]) -> None:
        self.path = path
        self.ttl = ttl
        self.clock = clock

    def save(
        self, chat_id: str, question: str, queries: Sequence[str], results: Sequence[tuple[str, str, str]]
    ) -> SearchRecord:
        """Store (title, url, snippet) results as web-1… for the chat, replacing its previous search; a
        search that found nothing never replaces a live list (the record is returned, not stored)."""
        record = SearchRecord(
            search_id=new_search_id(),
            chat_id=chat_id,
            question=question,
            queries=list(queries),
            created_at=self.clock().isoformat(timespec="seconds"),
            candidates=[Candidate(f"web-{n}", t, u, s) for n, (t, u, s) in enumerate(results, 1)],
        )
        live = None if results else self.latest(chat_id)
        if live is None or not live.candidates:
            self._put(record)
        return record

    def _put(self, record: SearchRecord) -> None:
        with self._locked():
            data = self._fresh(self._read())
            raw = asdict(record)
            for candidate in raw["candidates"]:  # written only when there is one, as before
                if candidate.get("comment") is None:
                    candidate.pop("comment", None)
            data[record.chat_id] = raw
            self._write(data)

    def latest(self, chat_id: str, *, include_expired: bool = False) -> SearchRecord | None:
        """The chat's latest search, if it has one (that has not expired, unless asked)."""
        record = _record(self._read().get(chat_id))
        if record is None or (self.is_expired(record) and not include_expired):
            return None
        return record

    def owner_of(self, search_id: str) -> str | None:
        """The chat whose latest search has this id, if any."""
        for chat, raw in self._read().items():
            if isinstance(raw, dict) and raw.get("search_id") == search_id:
                return chat
        return None

    def save_url(self, chat_id: str, url: str, *, comment: str | None = None) -> SearchRecord:
        """A URL the owner pasted: a one-candidate record (web-1), imported like any other; the
        ``comment`` they wrote with it goes with the import."""
        host = urlsplit(url).hostname or url
        record = SearchRecord(
            search_id=new_search_id(), chat_id=chat_id, question=url, queries=[],
            created_at=self.clock().isoformat(timespec="seconds"),
            candidates=[Candidate("web-1", host, url, "a link pasted by the owner", comment)],
        )  # fmt: skip
        self._put(record)
        return record

    def is_expired(self, record: SearchRecord) -> bool:
        """Older than the time-to-live."""
        try:
            created = datetime.fromisoformat(record.created_at)
        except ValueError:
            return True
        return self.clock() - created > self.ttl

    def forget(self, chat_id: str) -> bool:
        """Drop the chat's candidates; False when it had none."""
        with self._locked():
            data = self._read()
            found = data.pop(chat_id, None) is not None
            self._write(data)
        return found

    def _fresh(self, data: dict[str, object]) -> dict[str, object]:
        keep = {}
        for chat, raw in data.items():
            created = raw.get("created_at", "") if isinstance(raw, dict) else ""
            try:
                if self.clock() - datetime.fromisoformat(created) <= self.ttl:
                    keep[chat] = raw
            except ValueError:
                continue
        return keep

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, object]) -> None:
        write_atomic(self.path, json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8"))

    def _locked(self) -> AbstractContextManager[None]:
        return locked(self.path.with_name(self.path.name + ".lock"))
