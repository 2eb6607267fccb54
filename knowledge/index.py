"""The index: SQLite (WAL) with documents, chunks, an FTS5 table and ingest records.

It is derived data: everything in it is rebuilt from ``knowledge/raw/`` by ``kb reindex``.
One writer at a time (the daemon or ``kb ingest``, serialised by the writer lock); any
number of readers (the bot, ``kb search``), who never see half a document because every
document is written in one ``BEGIN IMMEDIATE`` transaction.

The FTS5 table holds the *analysed* text (see ``knowledge.analysis``) under the ``ascii``
tokenizer, so SQLite indexes exactly the terms kb's analyzer produced, for every language.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from knowledge import analysis
from knowledge.errors import IndexError_

SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    raw_path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    source_name TEXT NOT NULL,
    source_url TEXT,
    source_snapshot TEXT,
    source_sha256 TEXT NOT NULL,
    converter TEXT NOT NULL,
    raw_sha256 TEXT NOT NULL,
    chunk_count INTEGER NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_source_sha256 ON documents (source_sha256);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    text TEXT NOT NULL,
    text_sha256 TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document_id, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (title, body, tokenize = 'ascii');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab (chunks_fts, 'row');
CREATE TABLE IF NOT EXISTS ingests (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    sha256 TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'duplicate', 'failed', 'removed')),
    doc_id TEXT,
    chunks INTEGER,
    duplicate_of TEXT,
    stage TEXT,
    error TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ingests_sha256 ON ingests (sha256);
"""


@dataclass(frozen=True)
class DocumentRecord:
    """A document row: one raw Markdown file."""

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
class Candidate:
    """An FTS5 match before reranking: rowid, bm25 (lower is better) and the analysed body."""

    rowid: int
    bm25: float
    body: str


def connect(path: Path, *, readonly: bool = False, timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection in WAL mode with a busy timeout, foreign keys on and autocommit."""
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s, isolation_level=None)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
    except sqlite3.DatabaseError as exc:
        raise IndexError_(f"cannot open the index {path}: {exc} — rebuild it with: kb reindex") from exc
    return conn


class Index:
    """Documents, chunks, full-text search and ingest records in one SQLite file."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly and not path.exists():
            raise IndexError_(f"no index at {path} yet — add files with: kb ingest PATH")
        self.conn = connect(path, readonly=readonly)
        if not readonly:
            try:
                self.conn.executescript(_SCHEMA)
                self._set_meta_default("schema_version", SCHEMA_VERSION)
                self._set_meta_default("analyzer", analysis.ANALYZER_VERSION)
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                raise IndexError_(f"the index {path} is unreadable ({exc}) — delete it and run: kb reindex") from exc

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: never a deferred read upgraded to a write)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- metadata ---------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A value from the meta table."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Set a value in the meta table."""
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def _set_meta_default(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- writing ----------------------------------------------------------------------------

    def upsert_document(self, doc: DocumentRecord, chunks: Sequence[ChunkRecord]) -> None:
        """Replace a document and all its chunks in one transaction."""
        with self.write() as conn:
            self._delete(conn, doc.id)
            self._insert(conn, doc, chunks)

    def replace_all(self, rows: Iterable[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """Replace every document in one transaction (readers see the old set or the new one)."""
        with self.write() as conn:
            conn.execute("DELETE FROM chunks_fts")
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM documents")
            for doc, chunks in rows:
                self._insert(conn, doc, chunks)

    @staticmethod
    def _insert(conn: sqlite3.Connection, doc: DocumentRecord, chunks: Sequence[ChunkRecord]) -> None:
        conn.execute(
            "INSERT INTO documents (id, raw_path, title, source_name, source_url, source_snapshot,"
            " source_sha256, converter, raw_sha256, chunk_count, indexed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                doc.id, doc.raw_path, doc.title, doc.source_name, doc.source_url, doc.source_snapshot,
                doc.source_sha256, doc.converter, doc.raw_sha256, doc.chunk_count, doc.indexed_at,
            ),
        )  # fmt: skip
        title_terms = analysis.index_text(doc.title)
        for c in chunks:
            cur = conn.execute(
                "INSERT INTO chunks (id, document_id, seq, start_line, end_line, token_count, text,"
                " text_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (c.id, c.document_id, c.seq, c.start_line, c.end_line, c.token_count, c.text, c.text_sha256),
            )
            conn.execute(
                "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                (cur.lastrowid, title_terms, analysis.index_body(c.text)),
            )

    def delete_document(self, doc_id: str) -> bool:
        """Remove a document and its chunks; False when it was not there."""
        with self.write() as conn:
            return self._delete(conn, doc_id)

    @staticmethod
    def _delete(conn: sqlite3.Connection, doc_id: str) -> bool:
        rowids = [r[0] for r in conn.execute("SELECT rowid FROM chunks WHERE document_id = ?", (doc_id,))]
        conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ((r,) for r in rowids))
        conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
        return conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,)).rowcount > 0

    def record_ingest(self, rec: IngestRecord) -> None:
        """Append an ingest record."""
        with self.write() as conn:
            conn.execute(
                "INSERT INTO ingests (path, sha256, status, doc_id, chunks, duplicate_of, stage, error,"
                " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.path, rec.sha256, rec.status, rec.doc_id, rec.chunks, rec.duplicate_of, rec.stage,
                    rec.error, rec.started_at, rec.finished_at,
                ),
            )  # fmt: skip

    # -- reading ----------------------------------------------------------------------------

    def document(self, doc_id: str) -> DocumentRecord | None:
        """One document by id."""
        row = self.conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return DocumentRecord(*row) if row else None

    def document_by_source_sha256(self, sha256: str) -> DocumentRecord | None:
        """The document converted from a source with these exact bytes, if any."""
        row = self.conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE source_sha256 = ? ORDER BY id LIMIT 1", (sha256,)
        ).fetchone()
        return DocumentRecord(*row) if row else None

    def documents(self) -> list[DocumentRecord]:
        """All documents, by raw path."""
        rows = self.conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents ORDER BY raw_path")
        return [DocumentRecord(*r) for r in rows]

    def chunks_by_rowid(self, rowids: Iterable[int]) -> dict[int, tuple[ChunkRecord, DocumentRecord]]:
        """Chunks with their documents, keyed by rowid."""
        ids = list(rowids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"SELECT c.rowid, {_CHUNK_COLUMNS}, {_DOC_COLUMNS_D} FROM chunks c"
            f" JOIN documents d ON d.id = c.document_id WHERE c.rowid IN ({marks})",
            ids,
        )
        return {r[0]: (ChunkRecord(*r[1:9]), DocumentRecord(*r[9:])) for r in rows}

    def document_rowids(self, doc_id: str) -> list[int]:
        """Rowids of a document's chunks, in order."""
        rows = self.conn.execute("SELECT rowid FROM chunks WHERE document_id = ? ORDER BY seq", (doc_id,))
        return [r[0] for r in rows]

    def match(self, expression: str, *, limit: int, rowids: Sequence[int] | None = None) -> list[Candidate]:
        """FTS5 candidates for a MATCH expression, best bm25 first (title weighs double)."""
        sql = "SELECT rowid, bm25(chunks_fts, 2.0, 1.0) AS score, body FROM chunks_fts WHERE chunks_fts MATCH ?"
        params: list[object] = [expression]
        if rowids is not None:
            sql += f" AND rowid IN ({','.join('?' * len(rowids))})"
            params.extend(rowids)
        sql += " ORDER BY score LIMIT ?"
        params.append(limit)
        try:
            return [Candidate(*r) for r in self.conn.execute(sql, params)]
        except sqlite3.OperationalError as exc:  # only a bug in expression building gets here
            raise IndexError_(f"search failed: {exc}") from exc

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term."""
        if not terms:
            return {}
        marks = ",".join("?" * len(terms))
        rows = self.conn.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", list(terms))
        return dict(rows)

    def chunk_count(self) -> int:
        """Number of chunks."""
        return self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def document_count(self) -> int:
        """Number of documents."""
        return self.conn.execute("SELECT count(*) FROM documents").fetchone()[0]

    def last_ingests(self, limit: int = 10) -> list[IngestRecord]:
        """The most recent ingest records, newest first."""
        rows = self.conn.execute(
            "SELECT path, sha256, status, started_at, finished_at, doc_id, chunks, duplicate_of, stage, error"
            " FROM ingests ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [IngestRecord(*r) for r in rows]

    def integrity_errors(self) -> list[str]:
        """Problems found by SQLite's and FTS5's integrity checks (empty when healthy)."""
        problems = [r[0] for r in self.conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
        try:
            self.conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            problems.append(f"fts5: {exc}")
        return problems


_DOC_FIELDS = (
    "id raw_path title source_name source_url source_snapshot source_sha256 converter raw_sha256"
    " chunk_count indexed_at"
).split()
_DOC_COLUMNS = ", ".join(_DOC_FIELDS)
_DOC_COLUMNS_D = ", ".join("d." + f for f in _DOC_FIELDS)
_CHUNK_COLUMNS = "c.id, c.document_id, c.seq, c.start_line, c.end_line, c.token_count, c.text, c.text_sha256"
