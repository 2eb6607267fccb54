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
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, Protocol

import structlog

from knowledge.answer.evidence import pack
from knowledge.answer.excerpt import excerpt
from knowledge.answer.llm import Completion, ModelClient
from knowledge.answer.prompt import ChatTemplate, Exchange, Prompt, build_prompt, evidence_fits
from knowledge.errors import IndexError_, ModelError, SearchError
from knowledge.retrieval import sufficiency
from knowledge.retrieval.index import Index
from knowledge.retrieval.search import Also, Meaning, SearchResult, find, get_document_chunks
from knowledge.retrieval.sufficiency import Evidence, Verdict, judge
from knowledge.retrieval.translate import Translation, Translator, search_translated
from knowledge.tokenizer import TokenCounter
from knowledge.websearch.filters import host_of
from knowledge.websearch.providers import SearchRateLimited
from knowledge.websearch.search import WebAnswer

# (question, chat id, force) → the web search's outcome; wired in knowledge.wiring.
WebSearcher = Callable[[str, str, bool], Awaitable[WebAnswer]]

log = structlog.get_logger()

_CITATION = re.compile(r"\[(\d{1,3})\]")
# The fixed phrase the prompts ask for, as models write it in kb's languages (after the cleanup
# in says_dont_know): "I don't know", "我不知道", "ไม่ทราบ"…, with Thai polite particles.
_DONT_KNOW = re.compile(
    r"(i\s*(?:don'?t|do\s+not)\s+know|(?:我|我們|我们)?(?:不知道|不清楚)|(?:ฉัน|ผม|ดิฉัน)?(?:ไม่ทราบ|ไม่รู้)"
    r"(?:\s*(?:ค่ะ|ครับ|คะ|จ้ะ|จ้า))?)(?![a-z0-9])"
)
_LEADING_MARKUP = re.compile(r"^[\s\"'“”‘’「」『』«»*_`>#~(\[]+")
NO_EVIDENCE_TEXT = "The knowledge base has nothing on this."
NOT_ANSWERED_TEXT = "Your documents do not answer this."
GENERAL_PROMPT = (
    "You are kb, a helpful assistant. The owner's knowledge base has nothing on this question. Answer "
    "briefly from general knowledge if it is arithmetic, a greeting or a well-known fact; otherwise reply "
    "exactly: I don't know. Answer in the language of the question."
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
    if _CITATION.search(text):
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
    if _CITATION.search(text):
        return False
    cleaned = _LEADING_MARKUP.sub("", unicodedata.normalize("NFKC", text).casefold().replace("’", "'"))
    return _DONT_KNOW.match(cleaned) is not None


@dataclass(frozen=True)
class Route:
    """Which door a question went through, who decided, and why (``kb ask --json``'s ``door``).

    ``door``: ``local`` (answered from the documents), ``web`` (the web was searched), ``none``
    (neither: web search off, or nothing to search for). ``by``: ``retrieval`` (the sufficiency
    verdict), ``model`` (it read the passages and said they do not answer), ``owner`` (/search),
    ``document`` (a question about one document).
    """

    door: str
    by: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"taken": self.door, "by": self.by, "why": self.why}


@dataclass(frozen=True)
class Citation:
    """A source the reply relies on."""

    number: int
    title: str
    raw_path: str
    start_line: int
    end_line: int
    source_url: str | None
    chunk_id: str

    def render(self) -> str:
        """``[1] Title — raw/file.md:12-29`` (and the URL when there is one)."""
        line = f"[{self.number}] {self.title} — {self.raw_path}:{self.start_line}-{self.end_line}"
        return f"{line} {self.source_url}" if self.source_url else line


@dataclass(frozen=True)
class Reply:
    """What the engine answers; front ends render it."""

    text: str
    mode: str
    citations: list[Citation] = field(default_factory=list)
    candidates: list[object] = field(default_factory=list)
    note: str | None = None
    route: Route | None = None
    # the question in the index's other languages, searched too (knowledge.retrieval.translate)
    translations: list[Translation] = field(default_factory=list)
    # the queries searched, the standalone one first (in a conversation: the others too)
    searched_as: list[str] = field(default_factory=list)
    written: str | None = None  # the message as the owner wrote it, when it was asked in a conversation
    # what retrieval ranked for the (standalone) question, best first, also when it went to the web
    passages: list[SearchResult] = field(default_factory=list)
    cut_off: bool = False  # the model's stream ended before it finished: the text is what it said

    @property
    def searched_differently(self) -> str | None:
        """The standalone question searched, when it differs from the message as written."""
        first = self.searched_as[0] if self.searched_as else None
        return first if first and self.written and first != " ".join(self.written.split()) else None

    def render(self, *, answer: bool = True) -> str:
        """Plain text: the answer (``answer`` False: it was shown already, as it streamed), what was
        searched when it differs from what was written, then a 'Sources' list, then web candidates."""
        parts = [self.text if answer else ""]
        if self.searched_differently:
            parts.append(f"(searched as: {self.searched_differently})")
        if self.note:
            parts.append(self.note)
        if self.citations:
            parts.append("Sources:\n" + "\n".join(c.render() for c in self.citations))
        if self.candidates:
            lines = [f"{c.id} · {host_of(c.url)} — {c.title}\n       {c.url}" for c in self.candidates]
            parts.append("Web candidates (not imported):\n" + "\n".join(lines))
        return "\n\n".join(p for p in parts if p)


class Evidenced(NamedTuple):
    """The evidence pack for a question, retrieval's verdict (None for one document's passages), the
    evidence of the best passage found, and the ranking the pack was taken from."""

    passages: list[SearchResult]
    verdict: Verdict | None
    best: Evidence | None
    ranked: list[SearchResult]


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


def citations_for(text: str, passages: Sequence[SearchResult]) -> tuple[str, list[Citation]]:
    """The answer with invented citation numbers removed, and the sources it cites, in order."""
    valid = range(1, len(passages) + 1)
    cited: list[int] = []

    def keep(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if n not in valid:
            return ""
        if n not in cited:
            cited.append(n)
        return match.group(0)

    cleaned = re.sub(r"(?<![ \t])[ \t]+([.,;:!?。，])", r"\1", _CITATION.sub(keep, text)).strip()
    citations = [_citation(n, passages[n - 1]) for n in sorted(cited)]
    return cleaned, citations


def _citation(n: int, p: SearchResult) -> Citation:
    return Citation(n, p.title, p.raw_path, p.start_line, p.end_line, p.source_url, p.chunk_id)


def degraded_reply(
    passages: Sequence[SearchResult], why: str | None, *, question: str = "", note: str | None = None
) -> Reply:
    """The best passages with their citations, each shown by its sentences nearest the question, and
    why the model is not answering (``why`` None: it was said before, so only that it still is not)."""
    unavailable = f"The model is unavailable ({why})." if why else "The model is still unavailable."
    if not passages:
        return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=note or unavailable)
    lines = [f"{unavailable} The best matching passages:"]
    lines += [f"[{n}] {excerpt(p.text, question)}" for n, p in enumerate(passages, 1)]
    citations = [_citation(n, p) for n, p in enumerate(passages, 1)]
    return Reply("\n\n".join(lines), "degraded", citations, note=note)


def empty_answer_note(completion: Completion) -> str:
    """Why a completion has no text to show, and what to change when it ran out of room."""
    note = "The model returned an empty answer (or only its reasoning)."
    if completion.finish_reason == "length":
        note += " It stopped at the output limit: raise KB_MAX_OUTPUT_TOKENS, or use a model that does not think aloud."
    return note


class Engine:
    """Answers questions from one knowledge base with one model server.

    ``web`` searches the web (None: never); ``auto_web`` says whether the engine goes there on
    its own when the documents do not answer (KB_WEB_SEARCH=on) or only when asked (``ask``).
    """

    def __init__(
        self,
        open_index: Callable[[], Index],
        llm: ModelClient,
        counter: TokenCounter,
        template: ChatTemplate,
        settings: EngineSettings,
        *,
        web: WebSearcher | None = None,
        auto_web: bool = True,
        meaning: Meaning | None = None,
        translator: Translator | None = None,
    ) -> None:
        self.open_index = open_index
        self.meaning = meaning
        self.translator = translator
        self.llm = llm
        self.counter = counter
        self.template = template
        self.settings = settings
        self.web = web
        self.auto_web = auto_web
        self.unavailable: str | None = (
            None  # why the model failed last, once said (said again when it changes)
        )

    async def search_web(self, question: str, *, chat_id: str = "cli", force: bool = True) -> Reply:
        """The owner forcing the web (/search, kb websearch): candidates stored for the chat, nothing imported."""
        return await self._web(
            question, chat_id, force=force, route=Route("web", "owner", "asked for a web search")
        )

    async def _web(self, question: str, chat_id: str, *, force: bool, route: Route, lead: str = "") -> Reply:
        """Plan, search, filter and offer candidates; ``lead`` first says why the web was searched."""
        first = f"{lead} " if lead else ""
        if self.web is None:
            return Reply(lead or "Web search is off.", "no-evidence", note=_web_off_note(), route=route)
        try:
            found = await self.web(question, chat_id, force)
        except SearchRateLimited as exc:
            return Reply(lead or "No web search was made.", "no-evidence",
                         note=f"Web search is rate-limited: {exc}", route=route)  # fmt: skip
        except SearchError as exc:
            return Reply(lead or "No web search was made.", "no-evidence",
                         note=f"Web search failed: {exc}", route=route)  # fmt: skip
        if found.record is None:  # the planner saw nothing to search for (a greeting, arithmetic)
            return await self._without_evidence(question, dataclasses.replace(route, door="none"))
        candidates = list(found.record.candidates)
        if candidates:
            heading = f"{first}From the web (nothing imported; pick one to import it):"
            body = "\n".join(found.summary) or "The web has these candidates; none was summarised."
        else:
            heading, body = f"{first}Searched the web:", "No web result passed the filters."
        note = " ".join(found.notes) or None
        return Reply(f"{heading}\n{body}", "web", candidates=candidates, note=note, route=route)

    def retrieve(self, question: str, *, document: str | None = None) -> list[SearchResult]:
        """The evidence for a question (see :meth:`_find`); empty when the documents do not answer it."""
        passages, verdict, _, _ = self._find(question, document, ())
        return passages if verdict is None or verdict.answerable else []

    def _find(
        self, question: str, document: str | None, translations: Sequence[str], also: Also | None = None
    ) -> Evidenced:
        """The evidence pack for a question, retrieval's verdict on it (None for a question about one
        ``document``: that document's passages best for the question, its opening when none matches),
        the evidence of its best passage and the ranking (``also``: a follow-up's, see Also)."""
        try:
            index = self.open_index()
        except IndexError_:  # no index yet: an empty knowledge base
            return Evidenced([], judge([], vectors=self.meaning is not None), None, [])
        with index:
            if document is not None:
                chunks = get_document_chunks(index, document, question)
                return Evidenced(chunks, None, None, chunks)
            found = find(
                index, question, k=self.settings.candidates, meaning=self.meaning,
                threshold=self.settings.min_relevance, translations=translations, also=also,
            )  # fmt: skip
            packed = pack(  # once the documents answer, the pack takes the best passages that fit
                found.results,
                chunks_of=index.chunks_of,
                fits=evidence_fits(self.counter, self.settings.evidence_tokens),
            )
            return Evidenced(packed, found.verdict, found.best, found.results)

    async def lookup(
        self, question: str, *, document: str | None = None, also: Also | None = None
    ) -> tuple[Evidenced, list[Translation]]:
        """:meth:`_find`, with the question also asked in the other languages the index holds when
        that can help (knowledge.retrieval.translate): the translations used are returned."""
        if document is not None or self.meaning is None:
            return await asyncio.to_thread(self._find, question, document, (), also), []
        return await search_translated(
            lambda texts: asyncio.to_thread(self._find, question, None, texts, also),
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
        )

    async def _without_evidence(self, question: str, route: Route, *, note: str | None = None) -> Reply:
        """Nothing local and no web: say so, with the model's general answer when it has one (arithmetic, greetings)."""
        messages = [
            {"role": "system", "content": GENERAL_PROMPT},
            {"role": "user", "content": question.strip()},
        ]
        try:
            completion = await self.llm.chat(messages, max_tokens=min(256, self.settings.max_output_tokens))
        except ModelError as exc:
            unavailable = f"The model is unavailable: {str(exc).rstrip('.')}."
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=" ".join(filter(None, [unavailable, note])),
                         route=route)  # fmt: skip
        text = completion.text.strip()
        if not text or says_dont_know(text):
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=note, route=route)
        return Reply(
            text,
            "no-evidence",
            note=f"(Not from your knowledge base: {NO_EVIDENCE_TEXT.lower()})",
            route=route,
        )

    async def _not_answered(self, question: str, chat_id: str, route: Route) -> Reply:
        """The documents do not answer: the web step in the same turn, or say why there is none."""
        log.info("ask.not_answered", by=route.by, why=route.why, question_chars=len(question))
        if self.web is not None and self.auto_web:
            return await self._web(question, chat_id, force=False, route=route, lead=NOT_ANSWERED_TEXT)
        route = dataclasses.replace(route, door="none")
        note = _web_off_note(can_ask=self.web is not None)
        if route.by == "retrieval":  # nothing local at all: arithmetic and greetings still get an answer
            return await self._without_evidence(question, route, note=note)
        return Reply(NOT_ANSWERED_TEXT, "no-evidence", note=note, route=route)

    async def ask(
        self,
        question: str,
        *,
        chat_id: str = "cli",
        document: str | None = None,
        also: Also | None = None,
        history: Sequence[Exchange] = (),
        listener: Listener | None = None,
    ) -> Reply:
        """Answer from the knowledge base (or from one ``document`` of it); when the documents do not
        answer, go on to the web; degrade to the passages without the model.

        In a conversation, ``question`` is the standalone question (it alone is judged, translated and
        taken to the web), ``also`` what it is searched with besides (other queries, the passages the
        previous turn cited, the message as written) and ``history`` the earlier exchanges, oldest first,
        for the answer prompt. ``listener`` is shown the answer as the model writes it."""
        found, translations = await self.lookup(question, document=document, also=also)
        written = also.written if also else None
        reply = await self._answer(
            question, chat_id, document, found.passages, found.verdict, history, written, listener
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
    ) -> Reply:
        if document is not None:
            route = Route("local", "document", "a question about one document")
            if not passages:
                return Reply(NO_EVIDENCE_TEXT, "no-evidence", note="That document has no text to answer from.",
                             route=dataclasses.replace(route, door="none"))  # fmt: skip
        elif verdict is not None and not verdict.answerable:
            return await self._not_answered(question, chat_id, Route("web", "retrieval", verdict.why))
        else:
            route = Route("local", "retrieval", verdict.why if verdict else "")
        prompt = await asyncio.to_thread(  # tokenising: off the event loop
            partial(self.prompt, history=history, written=written), question, passages
        )
        if not prompt.passages:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note="(the passages found do not fit the evidence budget)",
                         route=dataclasses.replace(route, door="none"))  # fmt: skip
        try:
            completion = await self._complete(prompt, listener)
        except ModelError as exc:
            log.warning("ask.degraded", error=str(exc))
            why = None if str(exc) == self.unavailable else str(exc)
            self.unavailable = str(exc)
            reply = degraded_reply(prompt.passages, why, question=question)
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
        text = completion.text.strip()
        if not text:  # a model failure, not an answer: show what retrieval found
            log.warning(
                "ask.empty_answer",
                reason="the model returned no text; showing the passages",
                finish_reason=completion.finish_reason,
                output_tokens=completion.completion_tokens,
            )
            reply = degraded_reply(
                prompt.passages, "it returned nothing", question=question, note=empty_answer_note(completion)
            )
            return dataclasses.replace(reply, route=route)
        if completion.cut_off:  # what was said stays, with the passages it was given
            log.warning("ask.cut_off", output_chars=len(text))
            answer, _ = citations_for(_without_half_citation(text), prompt.passages)
            citations = [_citation(n, p) for n, p in enumerate(prompt.passages, 1)]
            return Reply(answer, "local", citations, note="(The answer was cut off: the model server stopped.)",
                         route=route, cut_off=True)  # fmt: skip
        if says_dont_know(text):
            why = f"the model read {len(prompt.passages)} passage(s) and said they do not answer"
            if document is not None:
                return Reply(NOT_ANSWERED_TEXT, "no-evidence", note="That document does not answer it.",
                             route=Route("none", "model", why))  # fmt: skip
            return await self._not_answered(question, chat_id, Route("web", "model", why))
        answer, citations = citations_for(text, prompt.passages)
        if not citations:  # an answer that cites nothing still came from this evidence
            citations = [_citation(n, p) for n, p in enumerate(prompt.passages, 1)]
        return Reply(answer, "local", citations, route=route)

    async def _complete(self, prompt: Prompt, listener: Listener | None) -> Completion:
        """The model's answer to a prompt: streamed to the listener when there is one, the "I don't know"
        phrase held back (it must never show before the web step)."""
        max_tokens = self.settings.max_output_tokens
        if listener is None:
            return await self.llm.chat(prompt.messages, max_tokens=max_tokens)
        passages = len(prompt.passages)
        await listener.reading(passages, 0, prompt.input_tokens)

        async def text(so_far: str) -> None:
            if not holds_back(so_far):
                await listener.text(so_far)

        async def reading(done: int, total: int) -> None:
            await listener.reading(passages, done, total)

        return await self.llm.stream(prompt.messages, max_tokens=max_tokens, on_text=text, on_reading=reading)


def _without_half_citation(text: str) -> str:
    """A text cut off inside a citation (``… manifest [1``) without it."""
    at = text.rfind("[")
    tail = text[at + 1 :] if at >= 0 else "x"
    return text[:at].rstrip() if len(tail) <= 3 and (tail == "" or tail.isdigit()) else text


def _web_off_note(*, can_ask: bool = False) -> str:
    """Why the web was not searched, and how to search it."""
    if can_ask:
        return "Web search runs only when asked (KB_WEB_SEARCH=ask): /search QUESTION (or kb websearch) searches it."
    return "Web search is off (KB_WEB_SEARCH=off): set KB_WEB_SEARCH=on, or ask to use /search QUESTION."
