"""The daemon's summary worker: every document gets a short summary, kept beside it in the index.

The daemon is the index's only writer, so the summaries live there (table ``summaries``), tied to
the raw text they were made from: a document that changes is summarised again, one removed takes
its summary with it (``ON DELETE CASCADE``), and ``kb reindex`` rebuilds them from the documents.
The thread takes the newest document without a summary first, one at a time, woken after every
ingest. While the model is down a document gets its opening sentences (kind ``excerpt``) at once,
and those are replaced once the model answers again (tried again after growing pauses). A long
document is read within the summary's budget of parts, and gives way to a newer document between
two model calls (it is summarised afresh after it). Nothing ends the thread but the daemon's stop:
a busy index ("database is locked"), a document that cannot be read or kept, is tried again after
growing pauses, and a document that fails three times in a row is set aside until it changes or the
daemon starts again.
The summary is the model's words about untrusted text: it is stored and shown as data, never acted on.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import structlog

from daemon.worker import Worker
from knowledge.answer.summary import Preempted, Writer, opening, summarize, without_citations
from knowledge.config import Settings
from knowledge.conversation.store import ConversationError, Conversations
from knowledge.model.template import ChatTemplate
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval.search import document_passages
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.wiring import http_session, model_client
from knowledge.words.language import for_owner

log = structlog.get_logger()

IDLE_S = 60.0
FIRST_RETRY_S = 30.0
MAX_RETRY_S = 1800.0
SENTENCES = 3
MAX_FAILURES = 3  # a document failing this often is set aside until the daemon starts again
BUSY_TIMEOUT_S = 10.0  # a write of a summary waits this long for the ingest's lock, then is tried later


class Summaries:
    """Summarises the documents of one index until stopped."""

    def __init__(
        self,
        settings: Settings,
        counter: TokenCounter,
        template: ChatTemplate,
        *,
        idle_s: float = IDLE_S,
        first_retry_s: float = FIRST_RETRY_S,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.first_retry_s = first_retry_s
        self.counter = counter
        self.template = template
        self.idle_s = idle_s
        self.busy_timeout_s = busy_timeout_s
        self._retry_at, self._pause = 0.0, first_retry_s  # the model is tried again from _retry_at on
        self._failed: dict[tuple[str, str], int] = {}  # (document id, raw text's hash) -> failures in a row
        self._failures_pause = first_retry_s
        # stopped after the document in hand: a model call is bounded by KB_LLM_TIMEOUT_S
        self._worker = Worker("kb-summaries", self._run, stop_within_s=settings.llm_timeout_s + 5)
        self._wake, self._stop = self._worker.woken, self._worker.stopping
        self.start, self.wake, self.stop = self._worker.start, self._worker.wake, self._worker.stop

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except Exception as exc:  # the last guard: only the loop's set-up can get here
            log.exception("summary.failed", error=str(exc))

    async def _loop(self) -> None:
        async with http_session() as session:
            writer = Writer(model_client(self.settings, session), self.counter, self.template,
                            self.settings.context_tokens)  # fmt: skip
            while not self._stop.is_set():
                try:
                    with Index(self.settings.index_path, busy_timeout_s=self.busy_timeout_s) as index:
                        await self._work(index, writer)
                except Exception as exc:  # the index cannot be opened now (locked, a full disk): later
                    await self._failed_once(None, exc)

    async def _work(self, index: Index, writer: Writer) -> None:
        """Summarise document after document until stopped."""
        while not self._stop.is_set():
            self._wake.clear()
            doc = None
            try:
                doc = self._next(index)
                if doc is None:
                    await asyncio.to_thread(self._wake.wait, self.idle_s)
                    continue
                await self._summarise(index, writer, doc)
                self._failed.pop((doc.id, doc.raw_sha256), None)
                self._failures_pause = self.first_retry_s
            except Preempted:
                log.info("summary.preempted", doc_id=doc.id if doc else None)
            except Exception as exc:  # a busy index, a document that cannot be read or kept: later
                await self._failed_once(doc, exc)

    async def _failed_once(self, doc: DocumentRecord | None, exc: Exception) -> None:
        """Say what failed, count it against the document, and pause (longer each time in a row)."""
        if doc is not None:
            self._failed[doc.id, doc.raw_sha256] = self._failed.get((doc.id, doc.raw_sha256), 0) + 1
        log.warning("summary.retry", doc_id=doc.id if doc else None, error=str(exc),
                    retry_s=self._failures_pause)  # fmt: skip
        await asyncio.to_thread(self._stop.wait, self._failures_pause)
        self._failures_pause = min(MAX_RETRY_S, self._failures_pause * 2)

    def _next(self, index: Index) -> DocumentRecord | None:
        """The newest document without a summary (or with only its opening, when the model may answer),
        leaving out those set aside (a document that changed since is tried again)."""
        aside = {key for key, n in self._failed.items() if n >= MAX_FAILURES}
        docs = index.unsummarised(excerpts_too=time.monotonic() >= self._retry_at, limit=len(aside) + 1)
        return next((d for d in docs if (d.id, d.raw_sha256) not in aside), None)

    def language(self) -> str:
        """The owner's language, asked for each document (a /lang choice made meanwhile counts)."""
        chosen = None
        if not self.settings.language and self.settings.conversations_path.exists():
            try:
                chosen = Conversations(self.settings.conversations_path).last_chosen_language()
            except ConversationError as exc:  # unreadable: the locale decides
                log.warning("summary.language_unknown", error=str(exc))
        return for_owner(self.settings.language, chosen, self.settings.locale)

    async def _summarise(self, index: Index, writer: Writer, doc: DocumentRecord) -> None:
        """Summarise one document and keep it (its opening while the model is down)."""
        chunks = document_passages(index, doc.id)
        language = await asyncio.to_thread(self.language)
        model_may_answer = time.monotonic() >= self._retry_at
        if model_may_answer:
            summary = await summarize(writer, doc.title, chunks, reader=language, sentences=SENTENCES,
                                      preempted=lambda: self._gives_way(index, doc))  # fmt: skip
            kind, text = summary.kind, without_citations(summary.text)
        else:
            kind, text = "excerpt", opening(chunks) if chunks else ""
        if kind == "excerpt" and model_may_answer:
            self._retry_at, self._pause = time.monotonic() + self._pause, min(MAX_RETRY_S, self._pause * 2)
            log.info("summary.model_unavailable", retry_s=round(self._retry_at - time.monotonic()))
        elif kind == "model":
            self._pause = self.first_retry_s
        made_at = datetime.now(UTC).isoformat(timespec="seconds")
        index.put_summary(doc, kind, language, text, made_at)
        log.info("summary.kept", doc_id=doc.id, kind=kind, chars=len(text))

    def _gives_way(self, index: Index, doc: DocumentRecord) -> bool:
        """Whether another document now comes before ``doc`` (a newer one kept meanwhile): it goes first."""
        first = self._next(index)
        return first is not None and first.id != doc.id
