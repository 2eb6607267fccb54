"""The daemon's summary worker: every document gets a short summary, kept beside it in the index.

The daemon is the index's only writer, so the summaries live there (table ``summaries``), tied to
the raw text they were made from: a document that changes is summarised again, one removed takes
its summary with it (``ON DELETE CASCADE``), and ``kb reindex`` rebuilds them from the documents.
The thread takes the newest document without a summary first, one at a time, woken after every
ingest. While the model is down a document gets its opening sentences (kind ``excerpt``) at once,
and those are replaced once the model answers again (tried again after growing pauses). The
summary is the model's words about untrusted text: it is stored and shown as data, never acted on.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import structlog

from daemon.worker import Worker
from knowledge.answer.summary import Writer, opening, summarize, without_citations
from knowledge.config import Settings
from knowledge.conversation.store import ConversationError, Conversations
from knowledge.model.template import ChatTemplate
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval.search import document_passages
from knowledge.store.index import Index
from knowledge.wiring import http_session, model_client
from knowledge.words.language import for_owner

log = structlog.get_logger()

IDLE_S = 60.0
FIRST_RETRY_S = 30.0
MAX_RETRY_S = 1800.0
SENTENCES = 3


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
    ) -> None:
        self.settings = settings
        self.first_retry_s = first_retry_s
        self.counter = counter
        self.template = template
        self.idle_s = idle_s
        # stopped after the document in hand: a model call is bounded by KB_LLM_TIMEOUT_S
        self._worker = Worker("kb-summaries", self._run, stop_within_s=settings.llm_timeout_s + 5)
        self._wake, self._stop = self._worker.woken, self._worker.stopping
        self.start, self.wake, self.stop = self._worker.start, self._worker.wake, self._worker.stop

    def language(self) -> str:
        """The owner's language, asked for each document (a /lang choice made meanwhile counts)."""
        chosen = None
        if not self.settings.language and self.settings.conversations_path.exists():
            try:
                chosen = Conversations(self.settings.conversations_path).last_chosen_language()
            except ConversationError as exc:  # unreadable: the locale decides
                log.warning("summary.language_unknown", error=str(exc))
        return for_owner(self.settings.language, chosen, self.settings.locale)

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except Exception as exc:  # never take the daemon down
            log.exception("summary.failed", error=str(exc))

    async def _loop(self) -> None:
        retry_at, pause = 0.0, self.first_retry_s  # the model is tried again from retry_at on
        async with http_session() as session:
            writer = Writer(model_client(self.settings, session), self.counter, self.template,
                            self.settings.context_tokens)  # fmt: skip
            with Index(self.settings.index_path) as index:
                while not self._stop.is_set():
                    self._wake.clear()
                    model_may_answer = time.monotonic() >= retry_at
                    try:
                        docs = index.unsummarised(excerpts_too=model_may_answer, limit=1)
                    except Exception as exc:  # a busy or unreadable index: try again later
                        log.warning("summary.index_busy", error=str(exc))
                        docs = []
                    if not docs:
                        await asyncio.to_thread(self._wake.wait, self.idle_s)
                        continue
                    doc = docs[0]
                    chunks = document_passages(index, doc.id)
                    language = await asyncio.to_thread(self.language)
                    if model_may_answer:
                        summary = await summarize(writer, doc.title, chunks, reader=language,
                                                  sentences=SENTENCES)  # fmt: skip
                        kind, text = summary.kind, without_citations(summary.text)
                    else:
                        kind, text = "excerpt", opening(chunks) if chunks else ""
                    if kind == "excerpt" and model_may_answer:
                        retry_at, pause = time.monotonic() + pause, min(MAX_RETRY_S, pause * 2)
                        log.info("summary.model_unavailable", retry_s=round(retry_at - time.monotonic()))
                    elif kind == "model":
                        pause = self.first_retry_s
                    made_at = datetime.now(UTC).isoformat(timespec="seconds")
                    index.put_summary(doc, kind, language, text, made_at)
                    log.info("summary.kept", doc_id=doc.id, kind=kind, chars=len(text))
