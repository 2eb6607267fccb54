"""A reply and what it is made of: the route a question took, the sources it cites, what kb says about
it (front ends choose the words, knowledge.words.replies), and the reply shown when the model cannot
answer (the best passages, each by its sentences nearest the question)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from knowledge.answer.excerpt import Near, excerpt, readable
from knowledge.errors import ModelError
from knowledge.model.client import Completion, ModelUnavailable
from knowledge.retrieval.search import SearchResult
from knowledge.retrieval.translate import Translation

CITATION = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Route:
    """Which door a question went through, who decided, and why (``kb ask --json``'s ``door``).

    ``door``: ``local`` (answered from the documents), ``web`` (the web was searched), ``none``
    (neither: web search off, or nothing to search for). ``by``: ``retrieval`` (the sufficiency
    verdict), ``model`` (it read the passages and said they do not answer), ``owner`` (/search),
    ``document`` (a question about one document), ``index`` (the index could not be read),
    ``question`` (it has no words to search for).
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
class Said:
    """Something kb tells the owner about a reply: a kind (``not-answered``, ``model-unavailable``…) and
    its facts; front ends choose the words (knowledge.words.replies)."""

    kind: str
    facts: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What the engine answers; front ends render it.

    ``text`` is the model's words (its answer, a general answer, the web summary's lines) or, when
    it is down, the excerpts of the best passages; ``said`` is what kb says about it."""

    text: str
    mode: str
    citations: list[Citation] = field(default_factory=list)
    candidates: list[object] = field(default_factory=list)
    said: tuple[Said, ...] = ()
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

    def kinds(self) -> list[str]:
        """The kinds of what kb says about the reply, in order."""
        return [s.kind for s in self.said]


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

    cleaned = re.sub(r"(?<![ \t])[ \t]+([.,;:!?。，])", r"\1", CITATION.sub(keep, text)).strip()
    citations = [citation(n, passages[n - 1]) for n in sorted(cited)]
    return cleaned, citations


def citation(n: int, p: SearchResult) -> Citation:
    """Passage ``n`` of the evidence as a source."""
    return Citation(n, p.title, p.raw_path, p.start_line, p.end_line, p.source_url, p.chunk_id)


def every_citation(passages: Sequence[SearchResult]) -> list[Citation]:
    """Every passage of the evidence as a source, numbered as the prompt numbers them."""
    return [citation(n, p) for n, p in enumerate(passages, 1)]


def unavailable(exc: ModelError | None) -> Said:
    """That the model is not answering, and why: ``not-running`` (nothing listens), ``no-answer`` (it did
    not answer in time), ``bad-answer`` (an error or something unreadable), ``empty`` (it said nothing;
    ``exc`` None); ``detail`` is the error itself, for a terminal."""
    if exc is None:
        return Said("model-unavailable", {"reason": "empty", "detail": "it returned nothing"})
    reason, fix = "bad-answer", ""
    if isinstance(exc, ModelUnavailable):
        reason, fix = ("not-running" if exc.fix else "no-answer"), exc.fix
    return Said("model-unavailable", {"reason": reason, "detail": str(exc).rstrip("."), "fix": fix})


def degraded_reply(
    passages: Sequence[SearchResult], why: Said | None, *, question: str = "", more: Sequence[Said] = (),
    senses: Sequence[Sequence[str]] = (), near: Near | None = None, threshold: float = 0.0,
) -> Reply:  # fmt: skip
    """The best passages with their citations, each shown by its sentences nearest the question as plain
    text (its Markdown read; ``senses`` and ``near``: how a question in another language is matched,
    see excerpt), and why the
    model is not answering (``why`` None: it was said before, so only that it still is not).

    The model would read every passage of the evidence pack and pick; the owner is shown the best (with
    its neighbours, joined to it) and only those others that pass the relevance gate on their own
    (``threshold``): a dentist's note under a question about the rent is noise on a phone."""
    down = why or Said("model-still-unavailable")
    passages = [*passages[:1], *(p for p in passages[1:] if p.relevance >= threshold)]
    if not passages:
        return Reply("", "no-evidence", said=(Said("nothing-local"), *more, down))
    excerpts = [
        f"[{n}] {excerpt(readable(p.text), question, senses=senses, near=near)}"
        for n, p in enumerate(passages, 1)
    ]
    citations = every_citation(passages)
    return Reply("\n\n".join(excerpts), "degraded", citations, said=(down, Said("best-passages"), *more))


def empty_answer(completion: Completion) -> Said:
    """That the model's answer was empty, and whether it ran out of room (raise KB_MAX_OUTPUT_TOKENS)."""
    return Said("model-empty", {"at_limit": completion.finish_reason == "length"})
