"""The index's rows as values: documents, chunks, ingest records, summaries, search candidates and
one model's vectors as a snapshot saw them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Note:
    """What a note says of itself besides its text (knowledge.convert.frontmatter, knowledge.convert.vault):
    its front matter's aliases, description and tags with its inline #tags (as written, without '#'),
    its front matter's dates, and the targets of its links and embeds."""

    aliases: tuple[str, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    dates: tuple[tuple[str, str], ...] = ()  # date, created, updated as given (ISO 8601)

    def __bool__(self) -> bool:
        return bool(self.aliases or self.description or self.tags or self.links or self.dates)

    def heading(self, title: str) -> str | None:
        """What a search by name reads beside the note's first passage (its words, and its vector's
        text): the title, the aliases and the description, one a line; None when there are neither
        aliases nor a description (the title alone is what every document has)."""
        if not self.aliases and not self.description:
            return None
        return "\n".join(p for p in (title, " · ".join(self.aliases), self.description) if p)


@dataclass(frozen=True)
class DocumentRecord:
    """A document row: one raw Markdown file (or a source's file). ``note``: a note's aliases,
    description, tags and links, when written or read with it (Index.with_note); None otherwise."""

    id: str
    raw_path: str
    title: str
    source_name: str
    source_url: str | None
    source_snapshot: str | None
    source_sha256: str
    converter: str
    raw_sha256: str
    chunk_count: int
    indexed_at: str
    note: Note | None = None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk row, as stored."""

    id: str
    document_id: str
    seq: int
    start_line: int
    end_line: int
    token_count: int
    text: str
    text_sha256: str


@dataclass(frozen=True)
class IngestRecord:
    """What happened to one source file."""

    path: str
    sha256: str | None
    status: str
    started_at: str
    finished_at: str
    doc_id: str | None = None
    chunks: int | None = None
    duplicate_of: str | None = None
    stage: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class VectorRows:
    """One model's vectors as one snapshot of the index file saw them."""

    index_id: str | None  # names the file: a deleted and recreated index gets a new one
    epoch: int  # the vector epoch of that snapshot
    rows: list[tuple[int, str, bytes]]  # (rowid, language group, vector) by rowid: all, or the changed
    rowids: np.ndarray  # every rowid with a vector of the model then, ascending


@dataclass(frozen=True)
class StoredSummary:
    """A document's summary as kept: ``kind`` model or excerpt, the language it is written in."""

    kind: str
    language: str
    text: str
    made_at: str


@dataclass(frozen=True)
class Candidate:
    """A chunk matching some query terms: rowid, the idf mass it matched, its analysed body."""

    rowid: int
    coverage: float
    body: str


# The columns that make a DocumentRecord and a ChunkRecord, in their fields' order (d., c.: joined).
_DOC_FIELDS = (
    "id raw_path title source_name source_url source_snapshot source_sha256 converter raw_sha256"
    " chunk_count indexed_at"
).split()
DOC_COLUMNS = ", ".join(_DOC_FIELDS)
DOC_COLUMNS_D = ", ".join("d." + f for f in _DOC_FIELDS)
CHUNK_COLUMNS = "c.id, c.document_id, c.seq, c.start_line, c.end_line, c.token_count, c.text, c.text_sha256"
