"""Building the engine from settings: the one place that turns configuration into objects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import structlog

from knowledge.answer.assistant import Engine, EngineSettings, WebSearcher
from knowledge.config import Settings
from knowledge.conversation.followup import Rewriter
from knowledge.conversation.session import Conversing
from knowledge.conversation.store import Conversations
from knowledge.model.client import ModelClient
from knowledge.model.template import ChatTemplate, template_for
from knowledge.model.tokenizer import TokenCounter, configured_counter
from knowledge.retrieval.embed import EmbedderError, make_embedder
from knowledge.retrieval.search import Meaning
from knowledge.retrieval.translate import Chat, Translator
from knowledge.sources.registry import scope_asked
from knowledge.store.index import Index
from knowledge.websearch.fetch import Fetcher
from knowledge.websearch.providers import BraveSearch, DuckDuckGoLite, Provider
from knowledge.websearch.search import WebAnswer, web_search
from knowledge.websearch.store import CandidateStore

log = structlog.get_logger()


Language = tuple[TokenCounter, ChatTemplate, str | None]  # token counter, chat template, why approximate


def load_language(settings: Settings, *, background: bool = True) -> Language:
    """The tokenizer and chat template of the configured model; a note when they are approximations.

    A tokenizer that must come from the hub is fetched in the background for the next start
    (``background``: a process someone is waiting on) or now (a measurement that needs it).
    """
    counter, why = configured_counter(settings.tokenizer_spec, settings.tokenizer_dir, background=background)
    template = template_for(counter)
    return counter, template, why


def meaning(settings: Settings) -> Meaning | None:
    """Search by meaning as configured, or None (KB_EMBED=off, or an embedder that cannot be set up)."""
    try:
        return Meaning.of(make_embedder(settings))
    except EmbedderError as exc:
        log.warning("search.lexical_only", reason=str(exc))
        return None


def engine_settings(settings: Settings) -> EngineSettings:
    """The engine's knobs from the settings."""
    return EngineSettings(
        evidence_tokens=settings.evidence_tokens,
        context_tokens=settings.context_tokens,
        max_output_tokens=settings.max_output_tokens,
        min_relevance=settings.min_relevance,
        history_tokens=settings.history_tokens,
    )


def model_client(settings: Settings, session: aiohttp.ClientSession) -> ModelClient:
    """The model server client, configured."""
    return ModelClient(
        session,
        settings.llm_url,
        model=settings.llm_model,
        model_hint=settings.model,
        connect_timeout_s=settings.llm_connect_timeout_s,
        timeout_s=settings.llm_timeout_s,
        stream_timeout_s=settings.llm_stream_timeout_s,
        max_concurrency=settings.llm_concurrency,
    )


def http_session() -> aiohttp.ClientSession:
    """A session that ignores proxy variables: the model server is local."""
    return aiohttp.ClientSession(trust_env=False)


def search_providers(settings: Settings, session: aiohttp.ClientSession) -> list[Provider]:
    """DuckDuckGo Lite, then Brave when a key is set (each the other's fallback)."""
    providers: list[Provider] = [DuckDuckGoLite(session, base_url=settings.ddg_url)]
    if settings.brave_api_key:
        providers.append(BraveSearch(session, settings.brave_api_key, base_url=settings.brave_url))
    return providers


def web_searcher(settings: Settings, session: aiohttp.ClientSession, llm: ModelClient) -> WebSearcher:
    """The web search pipeline bound to this knowledge base's settings."""
    store = candidate_store(settings)
    providers = search_providers(settings, session)

    async def run(question: str, chat_id: str, force: bool, language: str) -> WebAnswer:
        return await web_search(
            question,
            chat_id=chat_id,
            today=date.today(),
            providers=providers,
            store=store,
            llm=llm,
            force=force,
            language=language,
        )

    return run


def make_fetcher(settings: Settings, **test_only: object) -> Fetcher:
    """The guarded fetcher; the model server's own address is never reachable through it."""
    llm = urlsplit(settings.llm_url)
    blocked = [(llm.hostname, llm.port or (443 if llm.scheme == "https" else 80))] if llm.hostname else []
    return Fetcher(
        max_bytes=int(settings.fetch_max_mb * 1024 * 1024),
        allowed_ports=settings.fetch_ports,
        blocked_addresses=blocked,
        **test_only,  # type: ignore[arg-type]
    )


def candidate_store(settings: Settings) -> CandidateStore:
    """The per-chat web candidates of this knowledge base."""
    return CandidateStore(settings.runs / "web-search.json", clock=lambda: datetime.now(UTC))


def build_engine(
    settings: Settings,
    session: aiohttp.ClientSession,
    counter: TokenCounter,
    template: ChatTemplate,
    *,
    index_path: Path | None = None,
    web: bool = True,
) -> Engine:
    """An engine over the knowledge base's index (or another one, for the checkpoint)."""
    path = index_path or settings.index_path
    llm = model_client(settings, session)
    searcher = web_searcher(settings, session, llm) if web and settings.web_search != "off" else None
    return Engine(
        lambda: Index(path, readonly=True),
        llm,
        counter,
        template,
        engine_settings(settings),
        web=searcher,
        auto_web=settings.web_search == "on",
        meaning=meaning(settings),
        translator=translator(settings, llm),
    )


def short_chat(llm: ModelClient) -> Chat:
    """The model as the short calls around an answer use it (translations, follow-ups): temperature 0,
    the reply's text and token counts."""

    async def chat(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int | None, int | None]:
        completion = await llm.chat(messages, max_tokens=max_tokens, temperature=0.0)
        return completion.text, completion.prompt_tokens, completion.completion_tokens

    return chat


def translator(settings: Settings, llm: ModelClient) -> Translator | None:
    """The question's translations by the model (KB_TRANSLATE), or None."""
    if settings.translate == "off":
        return None
    return Translator(short_chat(llm), timeout_s=settings.translate_timeout_s)


def conversing(settings: Settings, engine: Engine) -> Conversing:
    """The engine in conversation: the front ends' conversation file, follow-ups rewritten by the model,
    ``in:NAME`` and ``#tag`` in a message checked against the sources and the index's tags."""
    store = Conversations(settings.conversations_path, idle_s=settings.conversation_idle_s)
    rewriter = Rewriter(short_chat(engine.llm), timeout_s=settings.rewrite_timeout_s)
    return Conversing(
        engine,
        store,
        rewriter,
        lambda source, tag: scope_asked(settings.home, source, tag, engine.open_index),
    )


@asynccontextmanager
async def open_engine(settings: Settings, language: Language | None = None) -> AsyncIterator[Engine]:
    """An engine with its own HTTP session, closed on exit (``language``: load_language's, when the
    caller has it already)."""
    counter, template, _ = language or load_language(settings)
    async with http_session() as session:
        yield build_engine(settings, session, counter, template)
