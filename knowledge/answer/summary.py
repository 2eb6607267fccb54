"""Whole-document summaries: the model reads a document part by part, then writes one summary of it.

A document longer than one prompt is read in parts (map): each part is as many of its chunks, in
order, as fit one prompt counted exactly (the context less the part summary's output), and the model
summarises it, citing its passages. The part summaries are then summarised together (reduce), as
passages themselves, in as many rounds as it takes until one prompt holds them all; the final summary
cites the parts, and each citation points at the lines that part covers. Every request is built by
``build_prompt``, so it fits the context, and the document and every earlier summary are evidence:
wrapped, cleaned of delimiters and control tokens, never an instruction.

A summary has a budget: a map of at most ``max_parts`` parts. A document that takes more is read in
as many sections, evenly spread from its beginning to its end, each section's part as much of it as
fits one prompt (the last one ending at the document's end), so a 20 MiB file costs a dozen calls,
not a thousand. A caller may stop a long summary between two calls (``preempted``: the daemon's
worker does when a newer document waits), which raises ``Preempted``.

Without the model the summary is the document's opening sentences (the degraded answer's excerpt
rules), marked ``excerpt``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import structlog

from knowledge.answer.assistant import Engine
from knowledge.answer.excerpt import excerpt, readable
from knowledge.answer.prompt import Prompt, build_prompt
from knowledge.answer.reply import Citation, citations_for
from knowledge.answer.variants import NAMES, for_reader
from knowledge.model.client import ModelClient, ModelError, visible
from knowledge.model.template import ChatTemplate
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval.search import SearchResult

log = structlog.get_logger()

_CITED = re.compile(r" ?\[\d{1,3}\]")  # one space before it at most: linear on any text

PART_OUTPUT_TOKENS = 320  # a part's summary: three to five sentences, in any of kb's languages
FINAL_OUTPUT_TOKENS = 512
EXCERPT_CHARS = 400
MAX_ROUNDS = 8  # reduce rounds: each at least halves the summaries (a prompt holds two at the very least)
MAX_PARTS = 12  # the map's budget: a longer document is read in this many sections spread over it

PART_QUESTION = (
    "Summarise what these passages of the document “{title}” say, in three to five sentences, "
    "citing the passages."
)
FINAL_QUESTION = (
    "Summarise the whole document “{title}” in {sentences}, citing the passages (each is a summary "
    "of one part of it, in order)."
)


@dataclass(frozen=True)
class Summary:
    """A document's summary with what it cost: ``kind`` is ``model`` or ``excerpt`` (no model)."""

    text: str
    kind: str
    citations: list[Citation] = field(default_factory=list)
    parts: int = 0  # the parts read
    calls: int = 0
    prompt_tokens: int = 0  # the largest prompt sent, exactly counted
    input_tokens: int = 0  # all prompts together
    output_tokens: int = 0
    why: str | None = None  # the model error that made it an excerpt
    whole: bool = True  # every passage was read (False: a long document, read in sections)


class Preempted(Exception):  # noqa: N818 - not an error: the caller asked to stop
    """The caller stopped a summary between two model calls (a newer document waits)."""


@dataclass(frozen=True)
class Writer:
    """What a summary is written with: the model, the exact token count and template, the context."""

    llm: ModelClient
    counter: TokenCounter
    template: ChatTemplate
    context_tokens: int

    @classmethod
    def of(cls, engine: Engine) -> Writer:
        """The answering engine's model and budget."""
        return cls(engine.llm, engine.counter, engine.template, engine.settings.context_tokens)


def without_citations(text: str) -> str:
    """A summary shown on its own (a reply, /find, a digest): its citation numbers removed."""
    return _CITED.sub("", text).strip()


# What the caller is told as it goes: (part read, of how many), and "writing" once for the final call.
Progress = Callable[[int, int], None]


async def summarize(
    writer: Writer,
    title: str,
    chunks: Sequence[SearchResult],
    *,
    reader: str = "en",
    sentences: int = 3,
    progress: Progress | None = None,
    max_parts: int = MAX_PARTS,
    preempted: Callable[[], bool] | None = None,
) -> Summary:
    """The summary of a document from its chunks (in document order), in the reader's language, in
    at most ``max_parts`` parts and their reduce; ``preempted`` is asked before each model call
    (True: stop, raising Preempted)."""
    if not chunks:
        return Summary("", "excerpt")
    t0 = time.perf_counter()
    spent = _Spent(stop=preempted, max_parts=max(2, max_parts))
    try:
        summary = await _summarize(writer, title, list(chunks), reader, sentences, progress, spent)
    except ModelError as exc:
        log.warning("summary.degraded", title=title, error=str(exc), calls=spent.calls)
        return Summary(opening(chunks), "excerpt", calls=spent.calls, why=str(exc))
    log.info(
        "summary.done", title=title, chunks=len(chunks), parts=summary.parts, whole=summary.whole,
        calls=summary.calls,
        prompt_tokens=summary.prompt_tokens, output_tokens=summary.output_tokens,
        ms=round((time.perf_counter() - t0) * 1000),
    )  # fmt: skip
    return summary


def opening(chunks: Sequence[SearchResult]) -> str:
    """The document's opening sentences, as the degraded answer shows a passage (no model): plain text,
    its headings left out (the title is shown beside it)."""
    lines = [line for c in chunks[:3] for line in c.text.splitlines() if not line.lstrip().startswith("#")]
    return excerpt(readable("\n".join(lines) or chunks[0].text), "", limit=EXCERPT_CHARS)


@dataclass
class _Spent:
    calls: int = 0
    largest: int = 0
    inputs: int = 0
    outputs: int = 0
    stop: Callable[[], bool] | None = None
    max_parts: int = MAX_PARTS
    whole: bool = True


async def _summarize(
    writer: Writer,
    title: str,
    chunks: list[SearchResult],
    reader: str,
    sentences: int,
    progress: Progress | None,
    spent: _Spent,
) -> Summary:
    final_q = FINAL_QUESTION.format(title=title, sentences=f"{sentences} sentences")
    whole = await _prompt(writer, final_q, chunks, FINAL_OUTPUT_TOKENS, reader)
    if len(whole.passages) == len(chunks):  # the whole document fits one prompt: one call
        _tell(progress, 1, 1)
        text = await _ask(writer, whole, FINAL_OUTPUT_TOKENS, reader, spent)
        shown, citations = citations_for(text, whole.passages)
        return _summary(shown, citations, 1, spent)
    parts = await _parts(writer, title, chunks, reader, spent)
    summaries: list[SearchResult] = []
    for n, part in enumerate(parts, 1):
        _tell(progress, n, len(parts))
        text = await _ask(writer, part, PART_OUTPUT_TOKENS, reader, spent)
        summaries.append(_as_passage(n, part.passages, text))
    for _ in range(MAX_ROUNDS):
        prompt = await _prompt(writer, final_q, summaries, FINAL_OUTPUT_TOKENS, reader)
        if len(prompt.passages) == len(summaries):
            text = await _ask(writer, prompt, FINAL_OUTPUT_TOKENS, reader, spent)
            shown, citations = citations_for(text, prompt.passages)
            return _summary(shown, citations, len(parts), spent)
        summaries = await _reduce(writer, title, summaries, reader, spent)
    raise ModelError(f"the summaries of {len(parts)} parts did not fit one prompt after {MAX_ROUNDS} rounds")


async def _parts(
    writer: Writer, title: str, chunks: list[SearchResult], reader: str, spent: _Spent
) -> list[Prompt]:
    """The map prompts: each takes as many of the remaining chunks, in order, as fit; past the budget,
    one prompt per section of the document instead (see sections)."""
    question = PART_QUESTION.format(title=title)
    parts: list[Prompt] = []
    rest = chunks
    while rest:
        if len(parts) == spent.max_parts:  # more than the budget: read it in sections
            spent.whole = False
            runs = sections(chunks, spent.max_parts)
            return [
                await _section_part(writer, question, run, reader, last=n == len(runs))
                for n, run in enumerate(runs, 1)
            ]
        parts.append(await _part(writer, question, rest, reader))
        rest = rest[len(parts[-1].passages) :]
    return parts


def sections(chunks: Sequence[SearchResult], n: int) -> list[list[SearchResult]]:
    """``chunks`` cut into ``n`` runs of (nearly) equal length, in order (pure)."""
    bounds = [round(i * len(chunks) / n) for i in range(n + 1)]
    return [list(chunks[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


async def _part(writer: Writer, question: str, passages: Sequence[SearchResult], reader: str) -> Prompt:
    prompt = await _prompt(writer, question, passages, PART_OUTPUT_TOKENS, reader)
    if not prompt.passages:  # one chunk larger than a whole prompt: kb's chunks never are
        raise ModelError("a passage does not fit one prompt (KB_CONTEXT_TOKENS)")
    return prompt


async def _section_part(
    writer: Writer, question: str, section: list[SearchResult], reader: str, *, last: bool
) -> Prompt:
    """A section's part: as much of it as fits from its start, or for the document's last section,
    as much as fits ending at its end (the document's last words are read too)."""
    prompt = await _part(writer, question, section, reader)
    if not last or len(prompt.passages) == len(section):
        return prompt
    start = len(section) - len(prompt.passages)
    while start < len(section):
        tail = await _part(writer, question, section[start:], reader)
        if len(tail.passages) == len(section) - start:
            return tail
        start += 1
    return prompt


async def _reduce(
    writer: Writer, title: str, summaries: list[SearchResult], reader: str, spent: _Spent
) -> list[SearchResult]:
    """One round: neighbouring summaries summarised together, as many as fit a prompt each."""
    merged: list[SearchResult] = []
    rest = summaries
    while len(rest) > 1:
        prompt = await _prompt(writer, PART_QUESTION.format(title=title), rest, PART_OUTPUT_TOKENS, reader)
        if len(prompt.passages) < 2:  # at least two a prompt, so that every round shrinks
            raise ModelError(f"two part summaries of “{title}” do not fit one prompt (KB_CONTEXT_TOKENS)")
        text = await _ask(writer, prompt, PART_OUTPUT_TOKENS, reader, spent)
        merged.append(_as_passage(len(merged) + 1, prompt.passages, text))
        rest = rest[len(prompt.passages) :]
    return merged + [_as_passage(len(merged) + 1, rest, rest[0].text)] if rest else merged


async def _prompt(
    writer: Writer, question: str, passages: Sequence[SearchResult], output_tokens: int, reader: str
) -> Prompt:
    """The largest prompt of whole passages, in order, that leaves ``output_tokens`` for the reply:
    the evidence may take the whole context here (no conversation, one task)."""
    build = partial(
        build_prompt, question, passages, counter=writer.counter, template=writer.template,
        evidence_tokens=writer.context_tokens, context_tokens=writer.context_tokens,
        max_output_tokens=output_tokens, answer_in=NAMES.get(reader, NAMES["en"]),
    )  # fmt: skip
    return await asyncio.to_thread(build)  # tokenising: off the event loop


async def _ask(writer: Writer, prompt: Prompt, output_tokens: int, reader: str, spent: _Spent) -> str:
    if spent.stop is not None and spent.calls and spent.stop():
        raise Preempted
    completion = await writer.llm.chat(prompt.messages, max_tokens=output_tokens)
    spent.calls += 1
    spent.largest = max(spent.largest, prompt.input_tokens)
    spent.inputs += prompt.input_tokens
    spent.outputs += completion.completion_tokens or 0
    text = visible(completion.text).strip()
    if not text:
        raise ModelError("the model returned an empty summary")
    return for_reader(text, reader)


def _as_passage(n: int, passages: Sequence[SearchResult], text: str) -> SearchResult:
    """Part ``n``'s summary as a passage of the next prompt: the lines the part covers, its own
    citation numbers removed (they numbered passages the next prompt does not hold)."""
    first, last = passages[0], passages[-1]
    title = first.title.rsplit(" (part ", 1)[0]
    return replace(first, rank=n, end_line=last.end_line, text=_CITED.sub("", text).strip(),
                   title=f"{title} (part {n})")  # fmt: skip


def _summary(text: str, citations: list[Citation], parts: int, spent: _Spent) -> Summary:
    return Summary(
        text, "model", citations, parts=parts, calls=spent.calls, prompt_tokens=spent.largest,
        input_tokens=spent.inputs, output_tokens=spent.outputs, whole=spent.whole,
    )  # fmt: skip


def _tell(progress: Progress | None, n: int, total: int) -> None:
    if progress is not None:
        progress(n, total)
