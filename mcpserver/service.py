"""The knowledge base as the MCP tools reach it: the engine the CLI builds (knowledge.wiring), kept warm
for the server's life, and one method per tool that returns its result shape."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from knowledge.answer.assistant import Engine
from knowledge.config import Settings
from knowledge.conversation.session import Conversing
from knowledge.errors import ConfigError, IndexMissing, KbError
from knowledge.model.tokenizer import TokenCounter
from knowledge.report.status import probe_model, status_report
from knowledge.retrieval.scope import Scope
from knowledge.retrieval.search import Found, SearchResult, find
from knowledge.retrieval.sufficiency import judge
from knowledge.retrieval.translate import search_translated
from knowledge.sources.opening import opening, read_only
from knowledge.sources.registry import Source, config_file, read_sources, scope_asked
from knowledge.sources.state import split_raw_path
from knowledge.store.readers import Readers
from knowledge.websearch.importer import ImportResult, import_web_source, select
from knowledge.websearch.store import Candidate, CandidateStore
from knowledge.words.catalog import Words, terminal_words
from knowledge.words.replies import text_and_note
from mcpserver.bounds import MAX_LIMIT, MAX_TEXT_CHARS, check_query, take_lines
from mcpserver.results import (
    Answered,
    Cited,
    DocumentLines,
    Imported,
    Ingest,
    Offered,
    Passage,
    Searched,
    Status,
    WebFound,
    host_of,
    passages_of,
    where_of,
)

log = structlog.get_logger()

CHAT = "mcp"  # the chat id MCP clients' web candidates and single questions are kept under
Fetch = Callable[..., Awaitable[object]]


class UnknownDocument(KbError):
    """No document has this id."""


def offered(candidate: Candidate) -> Offered:
    """A stored web candidate as a tool shows it."""
    return Offered(
        id=candidate.id, title=candidate.title, host=host_of(candidate.url), url=candidate.url,
        snippet=candidate.snippet[:500],
    )  # fmt: skip


@dataclass
class Kb:
    """The warm engine and what the tools need around it; every method is one tool's work."""

    settings: Settings
    engine: Engine
    talk: Conversing
    store: CandidateStore
    fetch: Fetch
    words: Words
    counter: tuple[TokenCounter, str | None]
    readers: Readers  # the index's read-only connections, kept between calls
    warming: asyncio.Future[None] | None = None  # the start's warm-up (see open_kb), while it runs

    def _find(self, query: str, k: int, translations: Sequence[str], scope: Scope | None = None) -> Found:
        """kb search's ranking and verdict for one query (the same library call, the warm vectors)."""
        try:
            with self.readers.borrowed() as index:
                return find(
                    index, query, k=k, meaning=self.engine.meaning, threshold=self.settings.min_relevance,
                    translations=translations, scope=scope,
                )  # fmt: skip
        except IndexMissing:
            return Found([], judge([], vectors=self.engine.meaning is not None))

    async def search(
        self, query: str, limit: int, source: str | None = None, tag: str | None = None
    ) -> Searched:
        """The passages for a query, searched also in the index's other languages when that can help
        (as ``kb search`` does), cut to the result's size cap; ``source``: only that folder source's
        documents (SourceRefused naming the sources for a name no source has); ``tag``: only the notes
        carrying it (SourceRefused naming the tags used most for a tag no document carries)."""
        query = check_query(query)
        await self.warmed()
        scope = None
        if source is not None or tag is not None:  # kb.toml and the index's tags are read off the loop
            scope = await asyncio.to_thread(
                scope_asked, self.settings.home, source, tag, self.engine.open_index
            )
        k = min(max(limit, 1), MAX_LIMIT)
        meaning = self.engine.meaning
        translate = self.engine.translator if meaning is not None else None
        groups = meaning.cache.group_counts if meaning is not None else dict
        found, translations = await search_translated(
            lambda texts: asyncio.to_thread(self._find, query, k, texts, scope), translate, query, groups
        )
        passages, truncated = (
            await asyncio.to_thread(self._passages, found.results) if found.results else ([], None)
        )
        return Searched(
            query=query, passages=passages, answerable=found.verdict.answerable, why=found.verdict.why,
            translations=[t.text for t in translations], truncated=truncated,
        )  # fmt: skip

    def sources(self) -> list[Source]:
        """The registered folder sources (none when kb.toml cannot be read: results go on without them)."""
        try:
            return read_sources(config_file(self.settings.home))
        except ConfigError:
            return []

    def _passages(self, results: Sequence[SearchResult]) -> tuple[list[Passage], str | None]:
        """The results as the tool gives them, with their notes' dates and, for a folder source's passage,
        what opens its file (kb.toml read only then)."""
        try:
            with self.readers.borrowed() as index:
                dates = index.dates_of(r.document_id for r in results)
        except IndexMissing:
            dates = {}
        in_sources = any(split_raw_path(r.raw_path) for r in results)
        return passages_of(results, sources=self.sources() if in_sources else (), dates=dates)

    def get(self, document_id: str, start_line: int | None, end_line: int | None) -> DocumentLines:
        """Lines of one document's text (all of it by default), within the line and size caps."""
        try:
            with self.readers.borrowed() as index:
                doc = index.document(document_id)
        except IndexMissing:
            doc = None
        if doc is None:
            raise UnknownDocument(f"no document has the id {document_id!r}: ids come from search results")
        sources = self.sources() if split_raw_path(doc.raw_path) else []
        where = where_of(doc.raw_path, sources)
        if where.source is not None and doc.converter not in ("markdown", "text"):
            raise UnknownDocument(
                f"{document_id!r} is a {doc.converter} file of the source {where.source} ({where.path}): its "
                f"text is not kept as lines; open it: {where.open or where.path}"
            )
        try:
            lines = self._text_of(doc.raw_path, sources).splitlines()
        except OSError as exc:
            raise UnknownDocument(
                f"the text of {document_id!r} ({doc.raw_path}) cannot be read: {exc}"
            ) from exc
        try:
            got = take_lines(lines, start_line, end_line)
        except ValueError as exc:
            raise UnknownDocument(f"{document_id}: {exc}") from exc
        truncated = None
        if got.next_line is not None:
            truncated = f"capped at {got.last - got.first + 1} lines / {MAX_TEXT_CHARS:,} characters: "
            truncated += f"ask `get` for lines {got.next_line}–{got.end_line}"
        return DocumentLines(
            document_id=doc.id, title=doc.title, source=where.source, path=where.path, open=where.open,
            url=doc.source_url, start_line=got.first,
            end_line=got.last, total_lines=len(lines), text=got.text, truncated=truncated,
        )  # fmt: skip

    def _text_of(self, raw_path: str, sources: Sequence[Source]) -> str:
        """A document's text: its raw file, or a folder source's file itself, read-only (the lines its
        passages cite are that file's)."""
        if split_raw_path(raw_path) is None:
            raw = self.settings.raw / raw_path.removeprefix("raw/")
            return raw.read_text(encoding="utf-8", errors="replace")
        where = opening(sources, raw_path)
        if where is None:
            raise OSError(f"its source {raw_path.partition(':')[0]!r} is no longer registered (kb sources)")
        with read_only(where) as fh:  # no larger than a source file kb indexes (it may have grown since)
            return fh.read(self.settings.max_source_bytes).decode("utf-8", errors="replace")

    async def ask(self, question: str, conversation: str | None) -> Answered:
        """kb's cited answer (or its degraded answer and why), in a named conversation when given one."""
        question = check_query(question, what="question")
        await self.warmed()
        language = self.words.language
        if conversation:
            key = f"{CHAT}:{conversation}"
            answered = await self.talk.ask(key, question, chat_id=CHAT, language=language)
        else:
            answered = await self.talk.ask_once(question, chat_id=CHAT, language=language)
        reply = answered.reply
        text, note = text_and_note(reply, self.words)
        kept = text[:MAX_TEXT_CHARS]
        in_sources = any(split_raw_path(c.raw_path) for c in reply.citations)
        sources = await asyncio.to_thread(self.sources) if in_sources else []
        return Answered(
            text=kept, mode=reply.mode, note=note, door=reply.route.door if reply.route else None,
            citations=[
                Cited(number=c.number, title=c.title, **where_of(c.raw_path, sources).model_dump(),
                      start_line=c.start_line, end_line=c.end_line, url=c.source_url, chunk_id=c.chunk_id)
                for c in reply.citations
            ],
            candidates=[offered(c) for c in reply.candidates],
            conversation=conversation or None,
            truncated=None if kept == text else f"the answer was cut to {MAX_TEXT_CHARS:,} characters",
        )  # fmt: skip

    async def web_search(self, query: str) -> WebFound:
        """Plan, search and filter the web for a query; the candidates are kept for import_web_source."""
        query = check_query(query)
        reply = await self.engine.search_web(query, chat_id=CHAT, force=True, language=self.words.language)
        text, note = text_and_note(reply, self.words)
        return WebFound(
            query=query, candidates=[offered(c) for c in reply.candidates], summary=text[:MAX_TEXT_CHARS // 2],
            imported=False,
            note=(note + " " if note else "") + "Nothing was imported: the owner chooses with import_web_source.",
        )  # fmt: skip

    def candidate(self, source_id: str) -> Candidate:
        """The candidate of the latest MCP web search with this id; ImportRefused saying why not."""
        return select(self.store, CHAT, source_id)[1]

    async def import_candidate(self, source_id: str) -> Imported:
        """Import the candidate the owner chose: the same guarded download and inbox hand-off as a tap."""
        candidate = self.candidate(source_id)
        result: ImportResult = await import_web_source(
            source_id, chat_id=CHAT, settings=self.settings, store=self.store, fetch=self.fetch,
            wait_s=self.settings.import_wait_s, clock=lambda: datetime.now(UTC),
        )  # fmt: skip
        message = {
            "indexed": f"indexed as {result.doc_id} ({result.chunks} chunks)"
            + (", replacing the page's earlier version" if result.is_replacement else ""),
            "already": f"imported before as {result.doc_id}",
            "queued": f"in the inbox; the daemon will index it: {result.message}",
        }.get(result.status, f"{result.reason}: {result.message}")
        return Imported(
            status=result.status, source_id=source_id, title=result.title or candidate.title,
            host=host_of(result.url), url=result.url, document_id=result.doc_id, message=message,
        )  # fmt: skip

    def can_reach_owner(self) -> bool:
        """Whether a Telegram bot is configured to ask the owner (KB_TELEGRAM_TOKEN and an allowed user)."""
        from mcpserver.owner_chat import owner_chat

        return owner_chat(self.settings) is not None

    async def offer_to_owner(self, source_id: str, *, client: str, waiting: str) -> Imported:
        """Send the candidate to the owner's Telegram chat with its button: their tap imports it, in the bot."""
        from knowledge.wiring import http_session
        from mcpserver.owner_chat import offer

        record, candidate = select(self.store, CHAT, source_id)
        async with http_session() as session:
            await offer(
                self.settings, self.store, candidate, record.question, client=client, words=self.words,
                session=session,
            )  # fmt: skip
        return Imported(
            status="waiting", source_id=source_id, title=candidate.title, host=host_of(candidate.url),
            url=candidate.url, document_id=None, message=waiting,
        )  # fmt: skip

    async def status(self) -> Status:
        """Documents, chunks, vectors waiting, the last ingests, whether the model server answers."""
        model = await probe_model(self.engine.llm, timeout_s=2.0)
        report = await asyncio.to_thread(status_report, self.settings, model=model, counter=self.counter)
        vectors = report["vectors"]
        return Status(
            documents=report["documents"], chunks=report["chunks"],
            vectors_waiting=max(0, int(vectors.get("chunks", 0)) - int(vectors.get("vectors", 0))),
            last_ingests=[
                Ingest(path=r.get("path", ""), status=r.get("status", ""), at=r.get("finished_at"),
                       title=None)
                for r in report["last_ingests"][:5]
            ],
            model_server=str(model["url"]), model_server_reachable=bool(model["reachable"]),
            web_search=self.settings.web_search,
        )  # fmt: skip

    def warm(self) -> None:
        """Load what the first search would: the vectors in memory, the embedder, the analyzer. A failure
        is logged: the first search meets it again and says it."""
        started = time.perf_counter()
        try:
            self._find("kb", 1, ())
        except Exception as exc:  # whatever it is, the server starts: each search reports its own
            log.warning("mcp.warm_failed", reason=f"{type(exc).__name__}: {exc}"[:300])
            return
        log.info("mcp.warmed", ms=round((time.perf_counter() - started) * 1000, 1))

    async def warmed(self) -> None:
        """Return when the start's warm-up is done (at once when it already is)."""
        if self.warming is not None:
            await asyncio.shield(self.warming)


@asynccontextmanager
async def open_kb(settings: Settings, *, fetch: Fetch | None = None) -> AsyncIterator[Kb]:
    """The knowledge base for the server's life, warming (``search`` and ``ask`` wait for it); ``fetch``:
    the guarded download (tests pass one allowed to reach 127.0.0.1)."""
    from knowledge.wiring import candidate_store, conversing, load_language, make_fetcher, open_engine

    language = load_language(settings)
    async with open_engine(settings, language) as engine:
        kb = Kb(
            settings, engine, conversing(settings, engine), candidate_store(settings),
            fetch or make_fetcher(settings).fetch, terminal_words(settings), (language[0], language[2]),
            Readers(settings.index_path, engine.open_index),
        )  # fmt: skip
        # Warmed on a thread of its own from now on (run_in_executor starts it at once), while the caller
        # goes on: the server's SDK is imported and its first requests answered meanwhile.
        kb.warming = asyncio.get_running_loop().run_in_executor(None, kb.warm)
        try:
            yield kb
        finally:
            await asyncio.wait([kb.warming])
            kb.readers.close()
