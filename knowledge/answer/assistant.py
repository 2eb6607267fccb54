"""The assistant engine: a question in, a Reply out (text, citations, mode), for any front end.

Modes:

* ``local`` — the model answered from the knowledge base; the sources are appended by code;
* ``no-evidence`` — the documents do not answer and the web was not searched (web search off,
  or nothing to search for); the reply says so;
* ``degraded`` — the model server is down, slow or broken: the reply gives the best passages
  with their citations and says the model is unavailable. kb never hangs on a dead server;
* ``web`` — the documents do not answer, so the web was searched: up to five candidates
  ``web-1``…, with a summary whose every line ends in its source link; nothing is imported
  until the owner picks one.

"Do the documents answer it?" is asked twice, and either "no" opens the web door in the same
turn: first by retrieval (the sufficiency verdict, knowledge.retrieval.sufficiency), then by
the model, which replies a fixed phrase when the passages it was given do not answer. Every
reply carries its :class:`Route`: which door was taken, who decided, and why.

Citation numbers the model writes that are not in the evidence pack are dropped; documents
and web pages are data, and nothing in them can change the mode or the sources.

The engine writes no sentence of its own: a reply carries the model's words (or the passages'
excerpts) and what kb has to say about them as :class:`Said` (a kind and its facts: why the web
was not searched, that the model is down and why…); each front end puts that into words in the
reader's language (knowledge.words.replies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import NamedTuple, Protocol

import structlog

from knowledge.answer.evidence import pack
from knowledge.answer.prompt import QUESTION_LANGUAGE, Exchange, Prompt, build_prompt, evidence_fits
from knowledge.answer.reply import (
    CITATION,
    Reply,
    Route,
    Said,
    citations_for,
    degraded_reply,
    empty_answer,
    every_citation,
    unavailable,
)
from knowledge.answer.variants import NAMES, answer_language, for_reader
from knowledge.errors import IndexMissing, IndexUnreadable, ModelError, SearchError
from knowledge.model.client import Completion, ModelClient
from knowledge.model.template import ChatTemplate
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval import sufficiency, warmup
from knowledge.retrieval.scope import Scope
from knowledge.retrieval.search import Also, Meaning, SearchResult, find, get_document_chunks
from knowledge.retrieval.second import Nearness
from knowledge.retrieval.sufficiency import Evidence, Verdict, judge
from knowledge.retrieval.translate import Translation, Translator, search_translated
from knowledge.store.index import Index
from knowledge.text import has_words, is_greeting
from knowledge.websearch.providers import SearchRateLimited
from knowledge.websearch.search import WebAnswer

# (question, chat id, force) → the web search's outcome; wired in knowledge.wiring.
WebSearcher = Callable[[str, str, bool, str], Awaitable[WebAnswer]]

log = structlog.get_logger()

# The fixed phrase the prompts ask for, as models write it in kb's languages (after the cleanup
# in says_dont_know): "I don't know", "我不知道", "ไม่ทราบ"…, with Thai polite particles.
_DONT_KNOW = re.compile(
    r"(i\s*(?:don'?t|do\s+not)\s+know|(?:我|我們|我们)?(?:不知道|不清楚)|(?:ฉัน|ผม|ดิฉัน)?(?:ไม่ทราบ|ไม่รู้)"
    r"(?:\s*(?:ค่ะ|ครับ|คะ|จ้ะ|จ้า))?)(?![a-z0-9])"
)
_LEADING_MARKUP = re.compile(r"^[\s\"'“”‘’「」『』«»*_`>#~(\[]+")
GENERAL_PROMPT = (
    "You are kb, a helpful assistant. The owner's knowledge base has nothing on this question. Answer "
    "briefly from general knowledge if it is arithmetic, a greeting or a well-known fact; otherwise reply "
    "exactly: I don't know. Answer in {answer_in}."
)


# The phrase's forms, cleaned as says_dont_know cleans a reply: a reply that is still a beginning of
# one of them may yet become it, so a stream holds it back (it must never flash before the web step).
_DONT_KNOW_FORMS = (
    "i don't know", "i do not know", "idon't know", "我不知道", "我們不知道", "我们不知道", "不知道", "不清楚",
    "我不清楚", "ไม่ทราบ", "ฉันไม่ทราบ", "ผมไม่ทราบ", "ดิฉันไม่ทราบ", "ไม่รู้", "ฉันไม่รู้", "ผมไม่รู้",
)  # fmt: skip


def holds_back(text: str) -> bool:
    """Whether a streamed answer must not be shown yet: it is the "I don't know" phrase, or may still
    become it (it is empty, or a beginning of one of the phrase's forms)."""
    if CITATION.search(text):
        return False
    cleaned = _LEADING_MARKUP.sub("", unicodedata.normalize("NFKC", text).casefold().replace("’", "'"))
    cleaned = " ".join(cleaned.split())
    if not cleaned:
        return True
    return says_dont_know(text) or any(form.startswith(cleaned) for form in _DONT_KNOW_FORMS)


def says_dont_know(text: str) -> bool:
    """Whether a reply is the model's "the evidence does not answer" phrase.

    Tolerates what models add around it: quotes, bold, a full stop or none, a trailing sentence
    ("I don't know. The passages only cover…"), curly apostrophes, full-width characters and
    Thai polite particles. A reply that cites a passage is an answer, however it starts.
    """
    if CITATION.search(text):
        return False
    cleaned = _LEADING_MARKUP.sub("", unicodedata.normalize("NFKC", text).casefold().replace("’", "'"))
    return _DONT_KNOW.match(cleaned) is not None


class Evidenced(NamedTuple):
    """The evidence pack for a question, retrieval's verdict (None for one document's passages), the
    evidence of the best passage found, the ranking the pack was taken from, and how far its best
    passage leads the next (knowledge.retrieval.search.Found.lead)."""

    passages: list[SearchResult]
    verdict: Verdict | None
    best: Evidence | None
    ranked: list[SearchResult]
    lead: float | None = None


class Listener(Protocol):
    """Who is shown an answer as it is written (a terminal, a Telegram chat)."""

    async def reading(self, passages: int, done: int, total: int) -> None:
        """The model is reading the prompt: ``done`` of ``total`` tokens, with this many passages."""

    async def text(self, so_far: str) -> None:
        """The answer so far (held back while it may still be the "I don't know" phrase)."""


@dataclass(frozen=True)
class EngineSettings:
    """The engine's knobs (from Settings at the entry point)."""

    evidence_tokens: int = 640
    context_tokens: int = 8192
    max_output_tokens: int = 1024
    min_relevance: float = sufficiency.DEFAULT_THRESHOLD  # the best passage's relevance that answers
    candidates: int = 8
    history_tokens: int = 768  # the conversation so far, in the answer prompt


@dataclass(eq=False)
class Engine:
    """Answers questions from one knowledge base with one model server.

    ``web`` searches the web (None: never); ``auto_web`` says whether the engine goes there on
    its own when the documents do not answer (KB_WEB_SEARCH=on) or only when asked (``ask``).
    """

    open_index: Callable[[], Index]
    llm: ModelClient
    counter: TokenCounter
    template: ChatTemplate
    settings: EngineSettings
    _: KW_ONLY
    web: WebSearcher | None = None
    auto_web: bool = True
    meaning: Meaning | None = None
    translator: Translator | None = None
    # why the model failed last, once said (said again when it changes)
    unavailable: str | None = field(default=None, init=False)

    async def search_web(
        self, question: str, *, chat_id: str = "cli", force: bool = True, language: str | None = None
    ) -> Reply:
        """The owner forcing the web (/search, kb websearch): candidates stored for the chat, nothing imported."""
        reader = answer_language(question, language or "en")
        return await self._web(
            question, chat_id, reader, force=force, route=Route("web", "owner", "asked for a web search")
        )

    async def _web(
        self,
        question: str,
        chat_id: str,
        reader: str,
        *,
        force: bool,
        route: Route,
        lead: tuple[Said, ...] = (),
    ) -> Reply:
        """Plan, search, filter and offer candidates; ``lead`` first says why the web was searched."""
        if self.web is None:
            return Reply(
                "", "no-evidence", said=(*(lead or (Said("web-off"),)), Said("web-off-how")), route=route
            )
        try:
            found = await self.web(question, chat_id, force, NAMES[reader])
        except SearchRateLimited as exc:
            said = (*(lead or (Said("web-not-searched"),)), Said("web-rate-limited", {"detail": str(exc)}))
            return Reply("", "no-evidence", said=said, route=route)
        except SearchError as exc:
            said = (*(lead or (Said("web-not-searched"),)), Said("web-failed", {"detail": str(exc)}))
            return Reply("", "no-evidence", said=said, route=route)
        if found.record is None:  # the planner saw nothing to search for (a greeting, arithmetic)
            return await self._without_evidence(question, reader, dataclasses.replace(route, door="none"))
        candidates = list(found.record.candidates)
        notes = tuple(Said("web-note", {"detail": note}) for note in found.notes)
        if candidates:
            summary = for_reader("\n".join(found.summary), reader)
            said = (*lead, Said("web-found"), *(() if summary else (Said("web-unsummarised"),)), *notes)
        else:
            summary, said = "", (*lead, Said("web-searched"), Said("web-nothing-passed"), *notes)
        return Reply(summary, "web", candidates=candidates, said=said, route=route)

    def warm(self, reader: str = "") -> None:
        """Load what the first questions would, in the ``reader``'s language first (knowledge.retrieval.
        warmup), logged as ``engine.warmed`` (ms, the language groups searched in); a failure is logged
        as ``engine.warm_failed``: the first question meets it again and says it."""
        started = time.perf_counter()
        try:
            with self.open_index() as index:
                groups = warmup.warm(index, self.meaning, reader)
        except IndexMissing:  # nothing to load: the first document's search loads it
            return
        except Exception as exc:  # whatever it is, the front end goes on: each question reports its own
            # (info: not a second warning on the terminal while the owner types; the question says it)
            log.info("engine.warm_failed", reason=f"{type(exc).__name__}: {exc}"[:300])
            return
        log.info("engine.warmed", ms=round((time.perf_counter() - started) * 1000, 1), groups=list(groups))

    def warm_in_background(self, reader: str = "") -> threading.Thread:
        """:meth:`warm` on a thread of its own, started now: a front end goes on meanwhile (a question
        asked at once waits for what it loads), and its exit does not wait for it."""
        thread = threading.Thread(target=self.warm, args=(reader,), name="kb-warm", daemon=True)
        thread.start()
        return thread

    def retrieve(self, question: str, *, document: str | None = None) -> list[SearchResult]:
        """The evidence for a question (see :meth:`_find`); empty when the documents do not answer it."""
        found = self._find(question, document, ())
        return found.passages if found.verdict is None or found.verdict.answerable else []

    def _find(
        self,
        question: str,
        document: str | None,
        translations: Sequence[str],
        also: Also | None = None,
        scope: Scope | None = None,
    ) -> Evidenced:
        """The evidence pack for a question, retrieval's verdict on it (None for a question about one
        ``document``: that document's passages best for the question, its opening when none matches),
        the evidence of its best passage and the ranking (``also``: a follow-up's, see Also; ``scope``:
        only one source's documents, see knowledge.retrieval.scope)."""
        try:
            index = self.open_index()
        except IndexMissing:  # no index yet: an empty knowledge base (an unreadable one is said as such)
            return Evidenced([], judge([], vectors=self.meaning is not None), None, [])
        with index:
            if document is not None:
                chunks = get_document_chunks(index, document, question)
                return Evidenced(chunks, None, None, chunks)
            found = find(
                index, question, k=self.settings.candidates, meaning=self.meaning,
                threshold=self.settings.min_relevance, translations=translations, also=also, scope=scope,
            )  # fmt: skip
            packed = pack(  # once the documents answer, the pack takes the best passages that fit
                found.results,
                chunks_of=index.chunks_of,
                fits=evidence_fits(self.counter, self.settings.evidence_tokens),
            )
            return Evidenced(packed, found.verdict, found.best, found.results, found.lead)

    async def lookup(
        self,
        question: str,
        *,
        document: str | None = None,
        also: Also | None = None,
        scope: Scope | None = None,
    ) -> tuple[Evidenced, list[Translation]]:
        """:meth:`_find`, with the question also asked in the other languages the index holds when
        that can help (knowledge.retrieval.translate): the translations used are returned."""
        if document is not None or self.meaning is None:
            return await asyncio.to_thread(self._find, question, document, (), also, scope), []
        return await search_translated(
            lambda texts: asyncio.to_thread(self._find, question, None, texts, also, scope),
            self.translator,
            question,
            self.meaning.cache.group_counts,
        )

    def prompt(
        self,
        question: str,
        passages: Sequence[SearchResult],
        *,
        history: Sequence[Exchange] = (),
        written: str | None = None,
        reader: str | None = None,
    ) -> Prompt:
        """The exact prompt for a question, its ranked passages and the conversation so far."""
        s = self.settings
        return build_prompt(
            question,
            passages,
            counter=self.counter,
            template=self.template,
            evidence_tokens=s.evidence_tokens,
            context_tokens=s.context_tokens,
            max_output_tokens=s.max_output_tokens,
            history=history,
            history_tokens=s.history_tokens,
            written=written,
            answer_in=NAMES[reader] if reader else QUESTION_LANGUAGE,
        )

    async def _without_evidence(
        self, question: str, reader: str, route: Route, *, notes: tuple[Said, ...] = ()
    ) -> Reply:
        """Nothing local and no web: say so, with the model's general answer when it has one (arithmetic, greetings)."""
        messages = [
            {"role": "system", "content": GENERAL_PROMPT.format(answer_in=NAMES[reader])},
            {"role": "user", "content": question.strip()},
        ]
        try:
            completion = await self.llm.chat(messages, max_tokens=min(256, self.settings.max_output_tokens))
        except ModelError as exc:
            return Reply(
                "", "no-evidence", said=(Said("nothing-local"), unavailable(exc), *notes), route=route
            )
        text = completion.text.strip()
        if not text or says_dont_know(text):
            return Reply("", "no-evidence", said=(Said("nothing-local"), *notes), route=route)
        said = () if is_greeting(question) else (Said("not-from-kb"),)  # small talk claims nothing
        return Reply(for_reader(text, reader), "no-evidence", said=said, route=route)

    async def _not_answered(self, question: str, chat_id: str, reader: str, route: Route) -> Reply:
        """The documents do not answer: the web step in the same turn, or say why there is none."""
        log.info("ask.not_answered", by=route.by, why=route.why, question_chars=len(question))
        if self.web is not None and self.auto_web:
            lead = (Said("not-answered"),)
            return await self._web(question, chat_id, reader, force=False, route=route, lead=lead)
        route = dataclasses.replace(route, door="none")
        how = Said("web-ask-how" if self.web is not None else "web-off-how")
        if route.by == "retrieval":  # nothing local at all: arithmetic and greetings still get an answer
            return await self._without_evidence(question, reader, route, notes=(how,))
        return Reply("", "no-evidence", said=(Said("not-answered"), how), route=route)

    async def ask(
        self,
        question: str,
        *,
        chat_id: str = "cli",
        document: str | None = None,
        also: Also | None = None,
        history: Sequence[Exchange] = (),
        listener: Listener | None = None,
        language: str | None = None,
        scope: Scope | None = None,
    ) -> Reply:
        """Answer from the knowledge base (or from one ``document`` of it, or one source's documents: a
        ``scope``); when the documents do not answer, go on to the web; degrade to the passages without the model.

        In a conversation, ``question`` is the standalone question (it alone is judged, translated and
        taken to the web), ``also`` what it is searched with besides (other queries, the passages the
        previous turn cited, the message as written) and ``history`` the earlier exchanges, oldest first,
        for the answer prompt. ``listener`` is shown the answer as the model writes it. ``language`` is the
        reader's (the chat's): the model is told to write in the question's language (its Chinese the
        reader's variant), and Simplified Chinese is made Traditional for a zh-Hant reader."""
        if not has_words(question):  # 「？！。」, emoji, nothing: not searched, never taken to the web
            return Reply(
                "", "no-evidence", said=(Said("fragment"),), route=Route("none", "question", "no words")
            )
        try:
            found, translations = await self.lookup(question, document=document, also=also, scope=scope)
        except IndexUnreadable as exc:  # never "nothing on this": the documents are there, unread
            log.warning("ask.index_unreadable", reason=exc.reason, error=str(exc))
            said = Said("index-unreadable", {"reason": exc.reason, "detail": str(exc)})
            return Reply("", "unavailable", said=(said,), route=Route("none", "index", exc.reason))
        written = also.written if also else None
        reader = answer_language(written or question, language or "en")
        reply = await self._answer(
            question, chat_id, document, found.passages, found.verdict, history, written, listener, reader
        )
        return dataclasses.replace(
            reply,
            translations=translations,
            searched_as=[question, *(t for t, _ in (also.queries if also else ()))],
            written=written,
            passages=found.ranked,
        )

    async def _answer(
        self,
        question: str,
        chat_id: str,
        document: str | None,
        passages: list[SearchResult],
        verdict: Verdict | None,
        history: Sequence[Exchange] = (),
        written: str | None = None,
        listener: Listener | None = None,
        reader: str = "en",
    ) -> Reply:
        if document is not None:
            route = Route("local", "document", "a question about one document")
            if not passages:
                return Reply("", "no-evidence", said=(Said("nothing-local"), Said("document-empty")),
                             route=dataclasses.replace(route, door="none"))  # fmt: skip
        elif verdict is not None and not verdict.answerable:
            return await self._not_answered(question, chat_id, reader, Route("web", "retrieval", verdict.why))
        else:
            route = Route("local", "retrieval", verdict.why if verdict else "")
        prompt = await asyncio.to_thread(  # tokenising: off the event loop
            partial(self.prompt, history=history, written=written, reader=reader), question, passages
        )
        if not prompt.passages:
            return Reply("", "no-evidence", said=(Said("nothing-local"), Said("evidence-too-small")),
                         route=dataclasses.replace(route, door="none"))  # fmt: skip
        try:
            completion = await self._complete(prompt, listener, reader)
        except ModelError as exc:
            log.warning("ask.degraded", error=str(exc))
            why = None if str(exc) == self.unavailable else unavailable(exc)
            self.unavailable = str(exc)
            reply = await asyncio.to_thread(self._degraded, prompt.passages, why, question)
            return dataclasses.replace(reply, route=route)
        self.unavailable = None
        log.info(
            "ask.answered",
            passages=len(prompt.passages),
            input_tokens=prompt.input_tokens,
            history_tokens=prompt.history_tokens,
            prompt_tokens=completion.prompt_tokens,
            output_tokens=completion.completion_tokens,
            ms=round(completion.elapsed_ms, 1),
            first_token_ms=None if completion.first_token_ms is None else round(completion.first_token_ms, 1),
            cut_off=completion.cut_off,
        )
        text = for_reader(completion.text.strip(), reader)
        if not text:  # a model failure, not an answer: show what retrieval found
            log.warning(
                "ask.empty_answer",
                reason="the model returned no text; showing the passages",
                finish_reason=completion.finish_reason,
                output_tokens=completion.completion_tokens,
            )
            more = (empty_answer(completion),)
            reply = await asyncio.to_thread(
                self._degraded, prompt.passages, unavailable(None), question, more
            )
            return dataclasses.replace(reply, route=route)
        if completion.cut_off:  # what was said stays, with the passages it was given
            log.warning("ask.cut_off", output_chars=len(text))
            answer, _ = citations_for(_without_half_citation(text), prompt.passages)
            citations = every_citation(prompt.passages)
            return Reply(answer, "local", citations, said=(Said("cut-off"),), route=route, cut_off=True)
        if says_dont_know(text):
            why = f"the model read {len(prompt.passages)} passage(s) and said they do not answer"
            if document is not None:
                return Reply("", "no-evidence", said=(Said("not-answered"), Said("document-not-answered")),
                             route=Route("none", "model", why))  # fmt: skip
            return await self._not_answered(question, chat_id, reader, Route("web", "model", why))
        answer, citations = citations_for(text, prompt.passages)
        if not citations:  # an answer that cites nothing still came from this evidence
            citations = every_citation(prompt.passages)
        return Reply(answer, "local", citations, route=route)

    def _degraded(
        self, passages: list[SearchResult], why: Said | None, question: str, more: Sequence[Said] = ()
    ) -> Reply:
        """The reply without the model (degraded_reply), its excerpts matched to a question in another
        language too: by its words' English (the glossary) and the second embedder's nearness. Blocking:
        either may load (run it off the event loop)."""
        glossary, second = (self.meaning.glossary, self.meaning.second) if self.meaning else (None, None)
        senses = glossary.senses(question) if glossary is not None else ()
        near = Nearness(second.encoder, question) if second is not None else None
        return degraded_reply(
            passages, why, question=question, more=more, senses=senses, near=near,
            threshold=self.settings.min_relevance,
        )  # fmt: skip

    async def _complete(self, prompt: Prompt, listener: Listener | None, reader: str = "en") -> Completion:
        """The model's answer to a prompt: streamed to the listener when there is one, the "I don't know"
        phrase held back (it must never show before the web step)."""
        max_tokens = self.settings.max_output_tokens
        if listener is None:
            return await self.llm.chat(prompt.messages, max_tokens=max_tokens)
        passages = len(prompt.passages)
        await listener.reading(passages, 0, prompt.input_tokens)

        async def text(so_far: str) -> None:
            if not holds_back(so_far):
                await listener.text(for_reader(so_far, reader))

        async def reading(done: int, total: int) -> None:
            await listener.reading(passages, done, total)

        return await self.llm.stream(prompt.messages, max_tokens=max_tokens, on_text=text, on_reading=reading)


def _without_half_citation(text: str) -> str:
    """A text cut off inside a citation (``… manifest [1``) without it."""
    at = text.rfind("[")
    tail = text[at + 1 :] if at >= 0 else "x"
    return text[:at].rstrip() if len(tail) <= 3 and (tail == "" or tail.isdigit()) else text
