"""What each MCP tool answers: its structured shape (published as the tool's output schema) and a short
text rendering of it for clients that show text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from knowledge.retrieval.search import SearchResult
from knowledge.sources.opening import opening
from knowledge.sources.registry import Source
from knowledge.sources.state import split_raw_path
from mcpserver.bounds import MAX_TEXT_CHARS, fit_texts

TAGS_SHOWN = 10  # of a passage's tags: a result stays bounded whatever a note's front matter says
PATH = (
    "where it is: a folder source's file, relative to the source (`source` names it; its lines are that "
    "file's), else the document's text in the knowledge base, e.g. raw/notes.md"
)
SOURCE = "the folder source (kb sources) the passage is from; null for a document of the inbox or the web"
OPEN = (
    "what opens it: a note of an Obsidian vault source by its obsidian://open link, a file of any other "
    "source by its path on the owner's computer; null for a document of the inbox or the web"
)


class Passage(BaseModel):
    """One passage found: where it is (document, lines, path or URL) and what it says."""

    rank: int
    document_id: str
    chunk_id: str
    title: str
    source: str | None = Field(description=SOURCE)
    path: str = Field(description=PATH)
    source_name: str = Field(description="the file or page the document came from")
    url: str | None = Field(description="the page's URL, for a document imported from the web")
    open: str | None = Field(description=OPEN)
    start_line: int
    end_line: int
    text: str
    score: float
    relevance: float = Field(description="the probability (0-1) that this passage answers the query")
    tags: list[str] = Field(
        description=f"its document's tags (a note's, without '#'; the first {TAGS_SHOWN})"
    )
    dates: dict[str, str] | None = Field(
        description="its note's front-matter dates (date, created, updated: ISO 8601), when it gives any"
    )


class Searched(BaseModel):
    """The passages for a query and kb's verdict on whether they answer it."""

    query: str
    passages: list[Passage]
    answerable: bool = Field(description="kb judged the local evidence sufficient (the bot's own gate)")
    why: str = Field(description="why kb judged so")
    translations: list[str] = Field(description="the query as also searched in the index's other languages")
    truncated: str | None = Field(description="set when passage texts were cut to fit the result's size cap")


class DocumentLines(BaseModel):
    """Lines of one document."""

    document_id: str
    title: str
    source: str | None = Field(description=SOURCE)
    path: str = Field(description=PATH)
    open: str | None = Field(description=OPEN)
    url: str | None
    start_line: int
    end_line: int
    total_lines: int
    text: str
    truncated: str | None = Field(
        description="set when the line or size cap cut the range short: what to ask next"
    )


class Cited(BaseModel):
    """A source an answer cites."""

    number: int
    title: str
    source: str | None = Field(description=SOURCE)
    path: str = Field(description=PATH)
    start_line: int
    end_line: int
    url: str | None
    open: str | None = Field(description=OPEN)
    chunk_id: str


class Offered(BaseModel):
    """A web candidate the owner may choose to import (nothing is imported by finding it)."""

    id: str = Field(description="web-1 … web-5: the only thing import_web_source takes")
    title: str
    host: str
    url: str
    snippet: str


class Answered(BaseModel):
    """kb's answer to a question: its text, the sources it cites, or why it could not answer."""

    text: str
    mode: str = Field(
        description="local (from the documents), web (candidates found), no-evidence, degraded…"
    )
    note: str | None
    door: str | None = Field(description="where the answer came from: local, web or none")
    citations: list[Cited]
    candidates: list[Offered]
    conversation: str | None
    truncated: str | None


class WebFound(BaseModel):
    """The web candidates for a query; nothing imported."""

    query: str
    candidates: list[Offered]
    summary: str
    imported: bool = Field(description="always false: only the owner's choice imports")
    note: str


class Imported(BaseModel):
    """What became of an import: indexed, already, queued, waiting (for the owner's tap), refused, failed."""

    status: str
    source_id: str
    title: str | None
    host: str | None
    url: str | None
    document_id: str | None
    message: str


class Ingest(BaseModel):
    """One recent ingest."""

    path: str
    status: str
    at: str | None
    title: str | None


class Status(BaseModel):
    """The knowledge base at a glance."""

    documents: int
    chunks: int
    vectors_waiting: int = Field(description="passages not yet searchable by meaning")
    last_ingests: list[Ingest]
    model_server: str
    model_server_reachable: bool
    web_search: str


def host_of(url: str) -> str:
    """The URL's host name (empty when there is none)."""
    return urlsplit(url).hostname or ""


class Where(BaseModel):
    """Where a document is, as kb search --json says it: its source and path in it (a folder source's
    file), else its text in the knowledge base; what opens it."""

    source: str | None
    path: str
    open: str | None


def where_of(raw_path: str, sources: Sequence[Source]) -> Where:
    """``vault:Projects/x.md`` as source ``vault``, path ``Projects/x.md`` and what opens it (the same
    value kb search --json and the bot give); ``raw/x.md`` as itself."""
    split = split_raw_path(raw_path)
    if split is None:
        return Where(source=None, path=raw_path, open=None)
    found = opening(sources, raw_path)
    return Where(source=split[0], path=split[1], open=found.target if found else None)


def passages_of(
    results: Sequence[SearchResult],
    budget: int = MAX_TEXT_CHARS,
    *,
    sources: Sequence[Source] = (),
    dates: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[Passage], str | None]:
    """The results as passages whose texts fit ``budget`` characters, and what to ask for the rest;
    ``sources``: the registered folder sources (what opens their files), ``dates``: front-matter dates
    by document id."""
    fitted = fit_texts([r.text for r in results], budget)
    dates = dates or {}
    passages = [
        Passage(
            rank=r.rank, document_id=r.document_id, chunk_id=r.chunk_id, title=r.title,
            **where_of(r.raw_path, sources).model_dump(), source_name=r.source_name, url=r.source_url,
            start_line=r.start_line, end_line=r.end_line, text=text, score=r.score,
            relevance=round(r.relevance, 4), tags=list(r.tags[:TAGS_SHOWN]),
            dates=dict(d) if (d := dates.get(r.document_id)) else None,
        )
        for r, text in zip(results, fitted.texts, strict=True)
    ]  # fmt: skip
    cut = [r for r, is_cut in zip(results, fitted.is_cut, strict=True) if is_cut]
    if not cut:
        return passages, None
    asks = "; ".join(f"{r.document_id} lines {r.start_line}–{r.end_line}" for r in cut)
    return passages, f"passage texts cut to fit {budget:,} characters: ask `get` for {asks}"


def search_text(found: Searched) -> str:
    """A few lines a person can read: rank, citation, relevance, the start of each passage, the verdict."""
    lines = []
    for p in found.passages:
        where = p.url or (f"{p.source}:{p.path}" if p.source else p.path)
        tags = "".join(f" #{t}" for t in p.tags)
        lines.append(
            f"{p.rank}. {p.title} — {where}:{p.start_line}-{p.end_line} (relevance {p.relevance:.2f}){tags}"
        )
        snippet = " ".join(p.text.split())
        lines.append(f"   {snippet[:200]}{'…' if len(snippet) > 200 else ''}")
        if p.open:
            lines.append(f"   open: {p.open}")
    if not found.passages:
        lines.append("no matching passages")
    verdict = "the documents answer it" if found.answerable else "the documents do not answer it"
    lines.append(f"verdict: {verdict}: {found.why}")
    if found.truncated:
        lines.append(f"truncated: {found.truncated}")
    return "\n".join(lines)


def lines_text(got: DocumentLines) -> str:
    """The lines, headed by where they are from."""
    where = got.url or (f"{got.source}:{got.path}" if got.source else got.path)
    head = f"{got.title} — {where}:{got.start_line}-{got.end_line} (of {got.total_lines} lines)"
    tail = f"\ntruncated: {got.truncated}" if got.truncated else ""
    return f"{head}\n{got.text}{tail}"


def web_text(found: WebFound) -> str:
    """The candidates, one per line, and the reminder that nothing was imported."""
    lines = [f"{c.id}  {c.title} ({c.host})\n       {c.url}" for c in found.candidates] or ["no candidates"]
    return "\n".join([*lines, found.note])
