"""The assistant engine: a question in, a Reply out (text, citations, mode), for any front end.

Modes:

* ``local`` — the model answered from the knowledge base; the sources are appended by code;
* ``no-evidence`` — nothing in the knowledge base is relevant enough, or the model said the
  evidence does not answer; the reply says so (the signal for a web search);
* ``degraded`` — the model server is down, slow or broken: the reply gives the best passages
  with their citations and says the model is unavailable. kb never hangs on a dead server;
* ``web`` — nothing local, so the web was searched: up to five candidates ``web-1``…, with a
  summary whose every line ends in its source link; nothing is imported until the owner picks one.

Citation numbers the model writes that are not in the evidence pack are dropped; documents
and web pages are data, and nothing in them can change the mode or the sources.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from knowledge.answer.evidence import pack
from knowledge.answer.llm import Completion, ModelClient
from knowledge.answer.prompt import ChatTemplate, Prompt, build_prompt, evidence_fits
from knowledge.errors import IndexError_, ModelError, SearchError
from knowledge.retrieval.index import Index
from knowledge.retrieval.search import Meaning, SearchResult, get_document_chunks, search
from knowledge.tokenizer import TokenCounter
from knowledge.websearch.filters import host_of
from knowledge.websearch.providers import SearchRateLimited
from knowledge.websearch.search import WebAnswer

# (question, chat id, force) → the web search's outcome; wired in knowledge.wiring.
WebSearcher = Callable[[str, str, bool], Awaitable[WebAnswer]]

log = structlog.get_logger()

_CITATION = re.compile(r"\[(\d{1,3})\]")
_DONT_KNOW = re.compile(
    r"^\W*(i\s+don'?t\s+know|i\s+do\s+not\s+know|不知道|我不知道|ไม่ทราบ|ไม่รู้)", re.IGNORECASE
)
NO_EVIDENCE_TEXT = "The knowledge base has nothing on this."
GENERAL_PROMPT = (
    "You are kb, a helpful assistant. The owner's knowledge base has nothing on this question. Answer "
    "briefly from general knowledge if it is arithmetic, a greeting or a well-known fact; otherwise reply "
    "exactly: I don't know. Answer in the language of the question."
)


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

    def render(self) -> str:
        """Plain text: the answer, then a 'Sources' list, then web candidates."""
        parts = [self.text]
        if self.note:
            parts.append(self.note)
        if self.citations:
            parts.append("Sources:\n" + "\n".join(c.render() for c in self.citations))
        if self.candidates:
            lines = [f"{c.id} · {host_of(c.url)} — {c.title}\n       {c.url}" for c in self.candidates]
            parts.append("Web candidates (not imported):\n" + "\n".join(lines))
        return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True)
class EngineSettings:
    """The engine's knobs (from Settings at the entry point)."""

    evidence_tokens: int = 640
    context_tokens: int = 8192
    max_output_tokens: int = 512
    min_relevance: float = 0.25
    candidates: int = 8


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


def degraded_reply(passages: Sequence[SearchResult], why: str, *, note: str | None = None) -> Reply:
    """The best passages with their citations, and why the model is not answering."""
    if not passages:
        return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=note or f"The model is unavailable: {why}")
    lines = [f"The model is unavailable ({why}). The best matching passages:"]
    for n, p in enumerate(passages, 1):
        snippet = " ".join(p.text.split())
        lines.append(f"[{n}] {snippet[:400]}{'…' if len(snippet) > 400 else ''}")
    citations = [_citation(n, p) for n, p in enumerate(passages, 1)]
    return Reply("\n\n".join(lines), "degraded", citations, note=note)


def empty_answer_note(completion: Completion) -> str:
    """Why a completion has no text to show, and what to change when it ran out of room."""
    note = "The model returned an empty answer (or only its reasoning)."
    if completion.finish_reason == "length":
        note += " It stopped at the output limit: raise KB_MAX_OUTPUT_TOKENS, or use a model that does not think aloud."
    return note


class Engine:
    """Answers questions from one knowledge base with one model server."""

    def __init__(
        self,
        open_index: Callable[[], Index],
        llm: ModelClient,
        counter: TokenCounter,
        template: ChatTemplate,
        settings: EngineSettings,
        *,
        web: WebSearcher | None = None,
        meaning: Meaning | None = None,
    ) -> None:
        self.open_index = open_index
        self.meaning = meaning
        self.llm = llm
        self.counter = counter
        self.template = template
        self.settings = settings
        self.web = web

    async def search_web(self, question: str, *, chat_id: str = "cli", force: bool = True) -> Reply:
        """Search the web for a chat and store its candidates (``force``: even when no search is planned)."""
        if self.web is None:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note="Web search is off (KB_WEB_SEARCH).")
        try:
            found = await self.web(question, chat_id, force)
        except SearchRateLimited as exc:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=f"Web search is rate-limited: {exc}")
        except SearchError as exc:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=f"Web search failed: {exc}")
        if found.record is None:
            return await self._without_evidence(question)
        candidates = list(found.record.candidates)
        if candidates:
            text = "\n".join(found.summary) or "The web has these candidates; none was summarised."
        else:
            text = "No web result passed the filters."
        note = " ".join([NO_EVIDENCE_TEXT + " From the web (nothing imported):", *found.notes])
        return Reply(text, "web", candidates=candidates, note=note)

    def retrieve(self, question: str, *, document: str | None = None) -> list[SearchResult]:
        """Passages relevant enough to be evidence, best first; with ``document``, that document's
        passages best for the question (its opening when none matches): a question about it."""
        try:
            index = self.open_index()
        except IndexError_:  # no index yet: an empty knowledge base
            return []
        with index:
            if document is not None:
                return get_document_chunks(index, document, question)
            results = search(index, question, k=self.settings.candidates, meaning=self.meaning)
            results = [r for r in results if r.relevance >= self.settings.min_relevance]
            return pack(
                results,
                chunks_of=index.chunks_of,
                fits=evidence_fits(self.counter, self.settings.evidence_tokens),
            )

    def prompt(self, question: str, passages: Sequence[SearchResult]) -> Prompt:
        """The exact prompt for a question and its ranked passages."""
        s = self.settings
        return build_prompt(
            question,
            passages,
            counter=self.counter,
            template=self.template,
            evidence_tokens=s.evidence_tokens,
            context_tokens=s.context_tokens,
            max_output_tokens=s.max_output_tokens,
        )

    async def _without_evidence(self, question: str) -> Reply:
        """Nothing local: say so, with the model's general answer when it has one (arithmetic, greetings)."""
        messages = [
            {"role": "system", "content": GENERAL_PROMPT},
            {"role": "user", "content": question.strip()},
        ]
        try:
            completion = await self.llm.chat(messages, max_tokens=min(256, self.settings.max_output_tokens))
        except ModelError as exc:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note=f"The model is unavailable: {exc}")
        text = completion.text.strip()
        if not text or _DONT_KNOW.match(text):
            return Reply(NO_EVIDENCE_TEXT, "no-evidence")
        return Reply(text, "no-evidence", note=f"(Not from your knowledge base: {NO_EVIDENCE_TEXT.lower()})")

    async def ask(self, question: str, *, chat_id: str = "cli", document: str | None = None) -> Reply:
        """Answer from the knowledge base (or from one ``document`` of it), or say it has nothing,
        or degrade without the model."""
        passages = await asyncio.to_thread(self.retrieve, question, document=document)
        if not passages and document is not None:
            return Reply(NO_EVIDENCE_TEXT, "no-evidence", note="That document has no text to answer from.")
        if not passages:
            log.info("ask.no_evidence", question_chars=len(question))
            if self.web is not None:
                return await self.search_web(question, chat_id=chat_id, force=False)
            return await self._without_evidence(question)
        prompt = await asyncio.to_thread(self.prompt, question, passages)  # tokenising: off the event loop
        if not prompt.passages:
            return Reply(
                NO_EVIDENCE_TEXT, "no-evidence", note="(the passages found do not fit the evidence budget)"
            )
        try:
            completion = await self.llm.chat(prompt.messages, max_tokens=self.settings.max_output_tokens)
        except ModelError as exc:
            log.warning("ask.degraded", error=str(exc))
            return degraded_reply(prompt.passages, str(exc))
        log.info(
            "ask.answered",
            passages=len(prompt.passages),
            input_tokens=prompt.input_tokens,
            prompt_tokens=completion.prompt_tokens,
            output_tokens=completion.completion_tokens,
            ms=round(completion.elapsed_ms, 1),
        )
        text = completion.text.strip()
        if not text:  # a model failure, not an answer: show what retrieval found
            log.warning(
                "ask.empty_answer",
                reason="the model returned no text; showing the passages",
                finish_reason=completion.finish_reason,
                output_tokens=completion.completion_tokens,
            )
            return degraded_reply(prompt.passages, "it returned nothing", note=empty_answer_note(completion))
        if _DONT_KNOW.match(text):
            return Reply(
                NO_EVIDENCE_TEXT, "no-evidence", note="The passages found do not answer the question."
            )
        answer, citations = citations_for(text, prompt.passages)
        if not citations:  # an answer that cites nothing still came from this evidence
            citations = [_citation(n, p) for n, p in enumerate(prompt.passages, 1)]
        return Reply(answer, "local", citations)
