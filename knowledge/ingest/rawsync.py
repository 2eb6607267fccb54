"""raw/ and the index kept in step: a raw Markdown file chunked into its document's rows, one file synced
(indexed, deleted or unchanged by content, not by events), all of raw/ reconciled, the whole index rebuilt.

``RawSync`` is part of the ``Ingestor`` (which hands it ``settings``, ``index`` and ``counter``, and supplies
``check_index`` and ``_now``); ``build_rows`` is the pure function of a raw file's text.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from knowledge.convert.vault import read_note
from knowledge.ingest import raw as rawfile
from knowledge.ingest.chunking import Chunk, chunk_lines
from knowledge.ingest.files import is_regular
from knowledge.ingest.names import is_candidate_name
from knowledge.ingest.safepath import LinkRefused, open_beneath
from knowledge.model.tokenizer import TokenCounter
from knowledge.store.analysis import ANALYZER_VERSION
from knowledge.store.records import ChunkRecord, DocumentRecord, Note
from knowledge.text import distinct_tags

if TYPE_CHECKING:
    from knowledge.config import Settings
    from knowledge.store.index import Index

log = structlog.get_logger()


class RawSync:
    """The raw-file side of the ingest pipeline (a part of ``Ingestor``)."""

    def __init__(self, settings: Settings, index: Index, counter: TokenCounter) -> None:
        self.settings = settings
        self.index = index
        self.counter = counter

    def check_index(self) -> None: ...

    def _now(self) -> str: ...

    def index_raw(self, raw_rel: str, text: str | None = None) -> tuple[str, int]:
        """Chunk a raw file and replace its document in the index; (doc_id, chunk count)."""
        doc, chunks = self.prepare_raw(raw_rel, text)
        self.index.upsert_document(doc, chunks)
        return doc.id, len(chunks)

    def prepare_raw(self, raw_rel: str, text: str | None = None) -> tuple[DocumentRecord, list[ChunkRecord]]:
        """The rows a raw file becomes (no writing)."""
        data = self.read_raw(raw_rel.removeprefix("raw/")) if text is None else text.encode("utf-8")
        text = data.decode("utf-8", errors="replace").replace("\x00", "")
        return build_rows(
            raw_rel,
            text,
            raw_sha256=rawfile.sha256_hex(data),
            counter=self.counter,
            max_tokens=self.settings.chunk_max_tokens,
            overlap_tokens=self.settings.chunk_overlap_tokens,
            indexed_at=self._now(),
        )

    def raw_names(self) -> list[str]:
        """The raw files, sorted: regular ``*.md`` files only; links are skipped and logged, never read."""
        names = []
        for path in sorted(self.settings.raw.glob("*.md")):
            if not is_candidate_name(path.name):
                continue
            if is_regular(path):
                names.append(path.name)
            elif path.is_symlink():
                log.warning("raw.skipped", file=path.name, reason="a symbolic link; kb does not follow links")
        return names

    def read_raw(self, name: str) -> bytes:
        """A raw file's bytes, never through a link (LinkRefused) nor from a FIFO."""
        fd = open_beneath(self.settings.raw, self.settings.raw / name, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise LinkRefused(self.settings.raw / name, name)
            return fh.read()

    def sync_raw(self, name: str) -> str:
        """Bring one raw file's document in line with the file: 'indexed', 'deleted' or 'unchanged'.

        Content decides, not events: a raw file kb itself just wrote hashes the same as its
        document and is left alone.
        """
        self.check_index()
        raw_rel = "raw/" + name
        doc_id = rawfile.document_id(raw_rel)
        try:
            data = self.read_raw(name)
        except (FileNotFoundError, LinkRefused):  # a link is no raw file: its target is not kb's
            if self.index.delete_document(doc_id):
                log.info("raw.deleted", file=name, doc_id=doc_id)
                return "deleted"
            return "unchanged"
        doc = self.index.document(doc_id)
        if doc is not None and doc.raw_sha256 == rawfile.sha256_hex(data):
            return "unchanged"
        doc_id, chunks = self.index_raw(raw_rel)
        log.info("raw.changed", file=name, doc_id=doc_id, chunks=chunks)
        return "indexed"

    def reconcile_raw(self) -> dict[str, int]:
        """Index new and changed raw files, drop documents whose raw file is gone; counts by outcome."""
        on_disk = set(self.raw_names())
        # Only documents of raw files: a folder source's documents (``vault:x.md``) have none.
        indexed = {
            d.raw_path.removeprefix("raw/") for d in self.index.documents() if d.raw_path.startswith("raw/")
        }
        counts = {"indexed": 0, "deleted": 0, "unchanged": 0}
        for name in sorted(on_disk | indexed):
            counts[self.sync_raw(name)] += 1
        return counts

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """Rebuild every document from raw/ inside the live database, in one transaction; the documents
        of folder sources (no raw file: their text is the owner's file) are kept, analysed again."""
        names = self.raw_names()
        rows = []
        for n, name in enumerate(names, 1):
            rows.append(self.prepare_raw("raw/" + name))
            if progress:
                progress(n, len(names))
        kept = [self.index.with_note(d) for d in self.index.documents() if not d.raw_path.startswith("raw/")]
        rows += [(d, self.index.chunks_of(d.id, range(1, d.chunk_count + 1))) for d in kept]
        self.index.replace_all(rows)
        self.index.set_meta("tokenizer", self.counter.name)
        if not kept:  # else once the folder sources' files are read again (kb reindex)
            self.index.set_meta("chunking", self.settings.chunking)
        self.index.set_meta("analyzer", ANALYZER_VERSION)  # every term is now this analyzer's
        return len(rows), sum(len(c) for _, c in rows)


# How kb built an index, as it records it (meta keys), in the order kb doctor names them, and the event
# that says it was built otherwise.
_CHANGED = {
    "analyzer": "index.analyzer_changed",
    "tokenizer": "index.tokenizer_changed",
    "chunking": "index.chunking_changed",
}


def built_otherwise(index: Index, *, tokenizer: str, chunking: str) -> list[tuple[str, str | None, str]]:
    """What of the index kb would now build otherwise, as (meta key, as built, as now): its text analysis
    and its tokenizer when recorded otherwise; the cut of its passages when it holds passages cut
    otherwise, or not recorded (an earlier kb did not record it). kb reindex brings each in line."""
    now = {"analyzer": ANALYZER_VERSION, "tokenizer": tokenizer, "chunking": chunking}
    out = []
    for key, current in now.items():
        built = index.meta(key)
        if built != current and (index.has_chunks() if key == "chunking" else built is not None):
            out.append((key, built, current))
    return out


def warn_index_change(index: Index, counter: TokenCounter, chunking: str) -> None:
    """Log, as a writer starts (kb ingest, the daemon), what of the index kb would now build otherwise
    (``chunking``: how kb cuts passages now; see built_otherwise)."""
    for key, built, current in built_otherwise(index, tokenizer=counter.name, chunking=chunking):
        log.warning(_CHANGED[key], index=built, current=current, fix="kb reindex")


def chunk_records(doc_id: str, chunks: Iterable[Chunk]) -> list[ChunkRecord]:
    """The index rows of a document's chunks (their ids and text hashes follow from the document id)."""
    return [
        ChunkRecord(
            id=rawfile.chunk_id(doc_id, c.seq),
            document_id=doc_id,
            seq=c.seq,
            start_line=c.start_line,
            end_line=c.end_line,
            token_count=c.token_count,
            text=c.text,
            text_sha256=rawfile.sha256_hex(c.text.encode("utf-8")),
        )
        for c in chunks
    ]


NOTE_TAGS_MAX = 100  # a note's tags kept, front matter's first


def note_lines(
    lines: list[str],
    converter: str,
    *,
    aliases: tuple[str, ...] = (),
    description: str = "",
    tags: tuple[str, ...] = (),
    dates: tuple[tuple[str, str], ...] = (),
) -> tuple[list[str], Note | None]:
    """A document's lines as its chunks read them, and its note: a Markdown note's links read as their
    visible text, its inline #tags joined to its front matter's (knowledge.convert.vault); any other
    document's lines as they are."""
    if converter != "markdown":
        return lines, None
    read = read_note(lines)
    tags = distinct_tags((*tags, *read.tags))[:NOTE_TAGS_MAX]
    return read.lines, Note(aliases, description, tags, read.links, dates) or None


def build_rows(
    raw_rel: str,
    text: str,
    *,
    raw_sha256: str,
    counter: TokenCounter,
    max_tokens: int,
    overlap_tokens: int,
    indexed_at: str,
) -> tuple[DocumentRecord, list[ChunkRecord]]:
    """Document and chunk rows of a raw file's text (a pure function of its inputs)."""
    parsed = rawfile.parse(text, fallback_name=Path(raw_rel).stem, sha256=raw_sha256)
    doc_id = rawfile.document_id(raw_rel)
    m = parsed.meta
    lines, note = note_lines(
        parsed.body_lines, m.converter, aliases=m.aliases, description=m.description or "", tags=m.tags,
        dates=m.dates,
    )  # fmt: skip
    chunks = chunk_lines(
        lines,
        counter,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        first_line=parsed.first_body_line,
    )
    records = chunk_records(doc_id, chunks)
    doc = DocumentRecord(
        id=doc_id,
        raw_path=raw_rel,
        title=m.title,
        source_name=m.source_name,
        source_url=m.source_url,
        source_snapshot=m.source_snapshot,
        source_sha256=m.source_sha256,
        converter=m.converter,
        raw_sha256=raw_sha256,
        chunk_count=len(records),
        indexed_at=indexed_at,
        note=note,
    )
    return doc, records
