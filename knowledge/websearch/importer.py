"""Importing the web source the owner picked: selection by id, guarded download, inbox hand-off.

The only input is a source id (``web-1`` … ``web-5``) and the chat it came from: the URL is
looked up in that chat's latest search record, never taken from the model or the user. The
bytes go to the inbox atomically with a ``NAME.source.json`` sidecar written first; the
daemon converts and indexes them like any other file, and the caller waits for its record. A page
imported before is fetched again: the same bytes are "already" there; a changed page replaces the
earlier version in the same document (knowledge.ingest.pipeline).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

from knowledge.config import Settings
from knowledge.errors import IndexError_, Refused
from knowledge.ingest.handoff import deliver, failure_reason, ingest_record, last_ingest
from knowledge.ingest.lock import holder
from knowledge.ingest.raw import slugify
from knowledge.store.index import Index
from knowledge.websearch.store import Candidate, CandidateStore, SearchRecord

SOURCE_ID = re.compile(r"^web-[1-5]$")
EXTENSIONS = {
    "html": ".html",
    "pdf": ".pdf",
    "markdown": ".md",
    "text": ".txt",
    "svg": ".svg",
    "canvas": ".canvas",
    "base": ".base",
}


class ImportRefused(Refused):
    """The selection was refused; ``reason`` is a stable code."""


@dataclass(frozen=True)
class ImportResult:
    """What happened to an import: indexed (``is_replacement``: over the page's earlier version, whose
    text no longer answers), already (these very bytes were imported before), queued, or failed."""

    status: str
    source_id: str
    url: str
    question: str
    doc_id: str | None = None
    title: str | None = None
    chunks: int | None = None
    reason: str | None = None
    message: str | None = None
    kept_at: str | None = None
    sha256: str | None = None  # of the bytes put into the inbox (to follow a queued one)
    is_replacement: bool = False  # indexed over the earlier version imported from the same URL


def select(
    store: CandidateStore, chat_id: str, source_id: str, *extra: str, search_id: str | None = None
) -> tuple[SearchRecord, Candidate]:
    """The chat's latest record and the candidate the id names, or ImportRefused saying why not."""
    if extra:
        raise ImportRefused(
            "extra-arguments", "import takes only a source id such as web-2; extra arguments are refused"
        )
    if not SOURCE_ID.match(source_id or ""):
        raise ImportRefused(
            "bad-id", f"{source_id!r} is not a source id: use web-1 … web-5 from the latest search"
        )
    record = store.latest(chat_id, include_expired=True)
    if record is None:
        if search_id is not None and store.owner_of(search_id) not in (None, chat_id):
            raise ImportRefused("other-chat", "this list belongs to another chat")
        raise ImportRefused("no-search", "there is no web search in this chat yet: search first")
    if search_id is not None and search_id != record.search_id:
        if store.owner_of(search_id) not in (None, chat_id):
            raise ImportRefused("other-chat", "this list belongs to another chat")
        raise ImportRefused("stale", "this list has been replaced by a newer search — use the latest one")
    if not record.candidates:
        raise ImportRefused("nothing-found", "the latest web search found nothing to import: search again")
    if store.is_expired(record):
        raise ImportRefused("expired", "this list has expired — search again")
    candidate = record.candidate(source_id)
    if candidate is None:
        have = ", ".join(c.id for c in record.candidates) or "none"
        raise ImportRefused(
            "not-in-latest", f"{source_id} is not in this chat's latest search (it has: {have})"
        )
    return record, candidate


def pasted_url(text: str) -> str | None:
    """The URL when a chat message is nothing but an http(s) URL (an explicit choice by the owner)."""
    text = text.strip()
    return text if re.fullmatch(r"https?://\S+", text) else None


def file_name(title: str, url: str, kind: str) -> str:
    """A safe inbox file name from the page title (or the URL's last path part) and the kind."""
    stem = slugify(title) if title.strip() else ""
    if not stem or stem == "document":
        stem = slugify(
            unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]) or urlsplit(url).hostname or "page"
        )
    return stem[:60] + EXTENSIONS.get(kind, ".html")


def imported_before(index_path: Path, url: str) -> str | None:
    """The id of the document imported from this URL before, if there is one (its page is fetched
    again all the same: the daemon keeps the same bytes as they are and replaces a changed page)."""
    try:
        with Index(index_path, readonly=True) as index:
            doc = index.document_by_source_url(url)
    except IndexError_:
        return None
    return doc.id if doc is not None else None


async def wait_for_ingest(
    settings: Settings, path: Path, sha256: str, *, timeout_s: float, poll_s: float = 0.2, after: int = 0
) -> dict | None:
    """The daemon's ingest record for these bytes at path, or None when none came in time.

    Matched by name and content hash, among the records after ``after`` (knowledge.ingest.handoff.last_ingest
    before the file was handed over): an earlier file of the same name, even with the same bytes (a page
    imported again), has its own records.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = await asyncio.to_thread(ingest_record, settings.index_path, str(path), sha256, after=after)
        if record is not None:
            return record
        await asyncio.sleep(poll_s)
    return None


async def import_web_source(
    source_id: str,
    *extra: str,
    chat_id: str,
    settings: Settings,
    store: CandidateStore,
    fetch: Callable[[str], object],
    search_id: str | None = None,
    wait_s: float = 60.0,
    clock: Callable[[], datetime],
    progress: Callable[[str], Awaitable[None]] | None = None,
) -> ImportResult:
    """Import the candidate a chat picked; FetchRefused and ImportRefused propagate to the caller.

    ``progress`` hears "downloading" and then "converting" (for a progress line in a chat).
    """
    record, candidate = select(store, chat_id, source_id, *extra, search_id=search_id)
    if progress is not None:
        await progress("downloading")
    fetched = await fetch(candidate.url)
    before = await asyncio.to_thread(imported_before, settings.index_path, fetched.final_url)
    after = await asyncio.to_thread(last_ingest, settings.index_path)
    sidecar = {
        "source_url": fetched.final_url,
        "requested_url": candidate.url,
        "title": candidate.title,
        "query": " | ".join(record.queries),
        "fetched_at": clock().isoformat(timespec="seconds"),
        "content_type": fetched.content_type,
        "charset": fetched.charset,
        "sha256": fetched.sha256,
        "size": len(fetched.data),
    }
    if candidate.comment:
        sidecar["comment"] = candidate.comment
    path = deliver(
        settings.inbox,
        file_name(candidate.title, fetched.final_url, fetched.kind),
        fetched.data,
        sidecar,
        staging=settings.staging,
    )
    if progress is not None:
        await progress("converting")
    if holder(settings.lock_path) is None:
        return ImportResult(
            "queued", source_id, candidate.url, record.question, kept_at=str(path), sha256=fetched.sha256,
            message="the daemon is not running: the page waits in the inbox until it starts (kb daemon or kb run)",
        )  # fmt: skip
    ingest = await wait_for_ingest(settings, path, fetched.sha256, timeout_s=wait_s, after=after)
    if ingest is None:
        return ImportResult(
            "queued", source_id, candidate.url, record.question, kept_at=str(path), sha256=fetched.sha256,
            message=f"the daemon has not indexed it within {wait_s:g} s; it is still in the inbox",
        )  # fmt: skip
    if ingest["status"] == "indexed":
        return ImportResult(
            "indexed", source_id, candidate.url, record.question,
            doc_id=ingest["doc_id"], title=ingest["title"], chunks=ingest["chunks"],
            is_replacement=before is not None and ingest["doc_id"] == before,
        )  # fmt: skip
    if ingest["status"] == "duplicate":
        return ImportResult(
            "already",
            source_id,
            candidate.url,
            record.question,
            doc_id=ingest["doc_id"],
            title=ingest["title"],
        )
    reason, _ = failure_reason(settings.failed, path.name)
    return ImportResult(
        "failed", source_id, candidate.url, record.question, reason=reason, message=ingest["error"],
        kept_at=str(settings.failed / path.name),
    )  # fmt: skip
