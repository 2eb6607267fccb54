"""The index: SQLite (WAL) with documents, chunks, an FTS5 table and ingest records.

It is derived data: everything in it is rebuilt from ``knowledge/raw/`` by ``kb reindex``.
One writer at a time (the daemon or ``kb ingest``, serialised by the writer lock); any
number of readers (the bot, ``kb search``), who never see half a document because every
document is written in one ``BEGIN IMMEDIATE`` transaction.

The FTS5 table holds the *analysed* text (see ``knowledge.store.analysis``) under the ``ascii``
tokenizer, so SQLite indexes exactly the terms kb's analyzer produced, for every language.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import structlog

from knowledge.errors import NO_ROOM, IndexError_, IndexMissing, IndexUnreadable
from knowledge.store import analysis

log = structlog.get_logger()

SCHEMA_VERSION = "1"
EMBED_TURN = 8  # chunks of each document a turn of chunks_without_vectors takes (a new note waits one turn)

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
-- How many chunks contain each term (title or body), kept in step with chunks_fts: FTS5's own
-- vocabulary table counts by walking a term's whole posting list, far too slow per query.
CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
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
-- A document's summary, made by the daemon (the model's, or its opening sentences while the model is
-- down: kind 'excerpt'), for the raw text it was made from; it goes with its document.
CREATE TABLE IF NOT EXISTS summaries (
    document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    raw_sha256 TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('model', 'excerpt')),
    language TEXT NOT NULL,
    text TEXT NOT NULL,
    made_at TEXT NOT NULL
);
-- One vector per chunk for search by meaning, written after the chunk's lexical commit by
-- whoever embeds (see knowledge.retrieval.backfill); the model name says which vector space it is in.
CREATE TABLE IF NOT EXISTS chunk_vectors (
    rowid INTEGER PRIMARY KEY REFERENCES chunks (rowid) ON DELETE CASCADE,
    model TEXT NOT NULL,
    lang TEXT NOT NULL,  -- the chunk's script group (see knowledge.text.language_group)
    vec BLOB NOT NULL,
    stamp INTEGER NOT NULL DEFAULT 0  -- set by the triggers below (see Index.vector_changes)
);
-- Vectors of kb's background passages (knowledge.retrieval.background) for each model: never
-- searched; they stand for unrelated text when the knowledge base is small (see vectors.py).
CREATE TABLE IF NOT EXISTS background_vectors (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    version TEXT NOT NULL,  -- which set of passages (a hash of their texts)
    lang TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, seq)
);
"""

# Every vector row written gets a stamp greater than the vector epoch of any snapshot taken
# before it was written: the epoch at that moment plus one (the writing transaction bumps the
# epoch, before or after its rows). Triggers rather than code at each INSERT, so that every
# writer stamps, even a kb from before stamps writing to a file this version has opened once.
# Created by _add_vector_stamps, after the column exists (an index made before stamps lacks it).
_STAMP = "(SELECT COALESCE(max(CAST(value AS INTEGER)), 0) + 1 FROM meta WHERE key = 'vector_epoch')"
_VECTOR_STAMPS = (
    "CREATE INDEX IF NOT EXISTS chunk_vectors_stamp ON chunk_vectors (model, stamp)",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_insert AFTER INSERT ON chunk_vectors BEGIN"
    f" UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_update AFTER UPDATE OF rowid, model, lang, vec"
    f" ON chunk_vectors BEGIN UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
)


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


# What SQLite says when the file is not an index, and when another connection holds it.
_DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_VTAB", "SQLITE_CORRUPT_SEQUENCE"}
_BUSY = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"}
LOW_DISK_BYTES = 64 * 2**20  # below this much free space, a write that fails is taken for a full disk


def index_problem(exc: BaseException, free_bytes: int | None) -> str:
    """Why the index cannot be used: ``disk-full``, ``damaged``, ``busy`` or ``io-error`` (pure)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        return "disk-full"
    if (
        name in ("SQLITE_FULL", "SQLITE_IOERR_SHMSIZE") or "disk is full" in text
    ):  # SHMSIZE: -shm could not grow
        return "disk-full"
    if name in _DAMAGED or "malformed" in text or "not a database" in text:
        return "damaged"
    if name in _BUSY or "locked" in text:
        return "busy"
    if (name.startswith("SQLITE_IOERR") or isinstance(exc, OSError)) and (  # a write that failed
        free_bytes is not None and free_bytes < LOW_DISK_BYTES
    ):
        return "disk-full"
    return "io-error"


def unreadable(path: Path, exc: BaseException, doing: str = "open") -> IndexUnreadable:
    """The error for an index that cannot be used now, with the fix for its cause."""
    try:
        free: int | None = shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free
    except OSError:
        free = None
    reason = index_problem(exc, free)
    if reason == "disk-full":
        message = (
            f"cannot {doing} the index {path}: the disk is full ({exc}) — free some disk space; "
            "the index is kept as it is and used again once there is room"
        )
    elif reason == "damaged":
        message = f"the index {path} is damaged ({exc}) — rebuild it from raw/ with: kb reindex"
    elif reason == "busy":
        message = f"the index {path} is busy ({exc}); try again in a moment"
    else:
        message = f"cannot {doing} the index {path} ({exc}); check the disk it is on"
    return IndexUnreadable(reason, message)


def _read_only(path: Path, timeout_s: float, *, immutable: bool) -> sqlite3.Connection:
    return sqlite3.connect(
        f"file:{path}?mode=ro" + ("&immutable=1" if immutable else ""),
        uri=True,
        timeout=timeout_s,
        isolation_level=None,
        check_same_thread=False,
    )


def connect(path: Path, *, readonly: bool = False, timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection in WAL mode with a busy timeout, foreign keys on and autocommit.

    A reader of a WAL index needs its ``-shm`` file, which SQLite creates when no writer has it open:
    on a full disk it cannot, and the index is then read as it is on disk (``immutable``: no writer
    runs to change it meanwhile, or the ``-shm`` would be there). Only when the ``-wal`` is empty or
    gone: one that still holds pages (a writer that stopped without a checkpoint) would be skipped, and
    the latest documents with it, so that index is reported unreadable instead of read stale. It may be
    handed to another thread (the daemon's worker), but never used by two at once.
    """
    try:
        if readonly:
            conn = _read_only(path, timeout_s, immutable=False)
            try:
                conn.execute("PRAGMA schema_version").fetchone()
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorname", "") not in (
                    "SQLITE_IOERR_SHMSIZE",
                    "SQLITE_CANTOPEN",
                    "SQLITE_READONLY_CANTINIT",
                    "SQLITE_IOERR_SHMOPEN",
                ):
                    raise
                conn.close()
                wal = path.with_name(path.name + "-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise  # as it is on disk would leave out what the log holds: say it, do not hide it
                log.warning("index.read_as_is", path=str(path), reason=str(exc))
                conn = _read_only(path, timeout_s, immutable=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        # A 64 MiB page cache keeps the B-tree pages a write touches (term table, FTS segments)
        # in memory, so ingest time stays flat as the index grows.
        conn.execute("PRAGMA cache_size = -65536")
    except (sqlite3.DatabaseError, OSError) as exc:
        raise unreadable(path, exc) from exc
    return conn


class Index:
    """Documents, chunks, full-text search and ingest records in one SQLite file."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly and not path.exists():
            raise IndexMissing(f"no index at {path} yet — add files with: kb ingest PATH")
        self.conn = connect(path, readonly=readonly)
        if readonly:
            try:  # a file the writer has just created may not hold the tables yet
                self.conn.execute("SELECT 1 FROM documents, chunks_fts, term_df LIMIT 0").fetchall()
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                if "no such table" in str(exc):  # created a moment ago, nothing in it yet
                    raise IndexMissing(
                        f"the index {path} holds nothing yet — add files with: kb ingest PATH"
                    ) from exc
                if index_problem(exc, None) != "io-error":
                    raise unreadable(path, exc, "read") from exc
                raise IndexUnreadable(
                    "busy", f"the index {path} is not ready ({exc}); try again in a moment"
                ) from exc
        else:
            try:
                self.conn.executescript(_SCHEMA)
                _add_vector_stamps(self.conn)
                self._set_meta_default("schema_version", SCHEMA_VERSION)
                self._set_meta_default("index_id", uuid.uuid4().hex)
                self._set_meta_default("analyzer", analysis.ANALYZER_VERSION)
                self.conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) SELECT 'chunk_total', count(*) FROM chunks"
                )
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                raise unreadable(path, exc, "write") from exc

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
        """Replace a document and all its chunks in one transaction.

        Vectors of chunks whose text is unchanged are kept (re-attached to the new rows).
        """
        with self.write() as conn:
            _save_vectors(conn, "SELECT rowid FROM chunks WHERE document_id = ?", (doc.id,))
            self._delete(conn, doc.id)
            self._insert(conn, doc, chunks)
            _restore_vectors(conn, "SELECT rowid FROM chunks WHERE document_id = ?", (doc.id,))

    def replace_all(self, rows: Iterable[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """Replace every document in one transaction (readers see the old set or the new one).

        Vectors of chunks whose text is unchanged are kept, so a rebuild need not embed again.
        """
        with self.write() as conn:
            _save_vectors(conn, "SELECT rowid FROM chunks", ())
            conn.execute("DELETE FROM chunk_vectors")
            conn.execute("DELETE FROM chunks_fts")
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM documents")
            conn.execute("DELETE FROM term_df")
            conn.execute("DELETE FROM meta WHERE key = 'chunk_total'")
            for doc, chunks in rows:
                self._insert(conn, doc, chunks)
            _restore_vectors(conn, "SELECT rowid FROM chunks", ())

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
        bodies = [analysis.index_body(c.text) for c in chunks]
        for c, body in zip(chunks, bodies, strict=True):
            cur = conn.execute(
                "INSERT INTO chunks (id, document_id, seq, start_line, end_line, token_count, text,"
                " text_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (c.id, c.document_id, c.seq, c.start_line, c.end_line, c.token_count, c.text, c.text_sha256),
            )
            conn.execute(
                "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
                (cur.lastrowid, title_terms, body),
            )
        added = _document_terms((title_terms, body) for body in bodies)
        conn.executemany(
            "INSERT INTO term_df (term, df) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET df = df + excluded.df",
            added.items(),
        )
        _add_chunk_total(conn, len(chunks))
        _bump_vector_epoch(conn)

    def delete_document(self, doc_id: str) -> bool:
        """Remove a document and its chunks; False when it was not there."""
        with self.write() as conn:
            return self._delete(conn, doc_id)

    @staticmethod
    def _delete(conn: sqlite3.Connection, doc_id: str) -> bool:
        rows = conn.execute(
            "SELECT f.rowid, f.title, f.body FROM chunks c JOIN chunks_fts f ON f.rowid = c.rowid"
            " WHERE c.document_id = ?",
            (doc_id,),
        ).fetchall()
        if rows:
            gone = _document_terms((title, body) for _, title, body in rows)
            conn.executemany(
                "UPDATE term_df SET df = df - ? WHERE term = ?", ((n, t) for t, n in gone.items())
            )
            conn.execute("DELETE FROM term_df WHERE df <= 0")
            conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ((r,) for r, _, _ in rows))
            _add_chunk_total(conn, -len(rows))
            _bump_vector_epoch(conn)
        conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
        return conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,)).rowcount > 0

    def store_vectors(self, model: str, rows: Iterable[tuple[int, str, str, bytes]]) -> int:
        """Store (rowid, text_sha256, language group, vector) for chunks that still hold that text.

        Returns how many were stored.
        """
        with self.write() as conn:
            stored = 0
            for rowid, text_sha256, lang, vec in rows:
                stored += conn.execute(
                    "INSERT OR REPLACE INTO chunk_vectors (rowid, model, lang, vec) SELECT ?, ?, ?, ?"
                    " WHERE EXISTS (SELECT 1 FROM chunks WHERE rowid = ? AND text_sha256 = ?)",
                    (rowid, model, lang, vec, rowid, text_sha256),
                ).rowcount
            if stored:
                _bump_vector_epoch(conn)
            return stored

    def store_background(self, model: str, version: str, rows: Sequence[tuple[str, bytes]]) -> None:
        """Replace this model's background vectors with (language group, vector) rows of ``version``."""
        with self.write() as conn:
            conn.execute("DELETE FROM background_vectors WHERE model = ?", (model,))
            conn.executemany(
                "INSERT INTO background_vectors (model, seq, version, lang, vec) VALUES (?, ?, ?, ?, ?)",
                ((model, n, version, lang, vec) for n, (lang, vec) in enumerate(rows)),
            )
            _bump_vector_epoch(conn)

    def background(self, model: str) -> tuple[str | None, list[tuple[str, bytes]]]:
        """(version, [(language group, vector)]) of this model's background vectors; (None, []) when none
        are stored (or the file was made by a kb without them and no writer has opened it since)."""
        try:
            rows = self.conn.execute(
                "SELECT version, lang, vec FROM background_vectors WHERE model = ? ORDER BY seq", (model,)
            ).fetchall()
        except sqlite3.OperationalError:
            return None, []
        versions = {v for v, _, _ in rows}
        if len(versions) != 1:
            return None, []
        return versions.pop(), [(lang, vec) for _, lang, vec in rows]

    def chunks_without_vectors(
        self, model: str, *, limit: int, vector_bytes: int | None = None
    ) -> list[tuple[int, str, str, str]]:
        """(rowid, text_sha256, title, text) of chunks with no vector of this model, in turns: each
        document's next ``EMBED_TURN`` chunks a turn, the newest document first in every turn.

        A note added after a 30,000-chunk file is embedded within a turn, not after the whole file.
        With ``vector_bytes``, a vector of another size counts as missing (the model changed its
        dimension under the same name).
        """
        return self.conn.execute(
            "SELECT m.rowid, c.text_sha256, d.title, c.text FROM ("
            "  SELECT c.rowid, c.document_id,"
            "   (ROW_NUMBER() OVER (PARTITION BY c.document_id ORDER BY c.seq) - 1) / ? AS turn"
            "  FROM chunks c"
            "  WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.rowid = c.rowid AND v.model = ?"
            "   AND (? IS NULL OR length(v.vec) = ?))"
            " ) m JOIN chunks c ON c.rowid = m.rowid JOIN documents d ON d.id = m.document_id"
            " ORDER BY m.turn, d.indexed_at DESC, d.id, c.seq LIMIT ?",
            (EMBED_TURN, model, vector_bytes, vector_bytes, limit),
        ).fetchall()

    def vector_count(self, model: str) -> int:
        """Chunks with a vector of this model."""
        return self.conn.execute("SELECT count(*) FROM chunk_vectors WHERE model = ?", (model,)).fetchone()[0]

    def vectors(self, model: str) -> VectorRows:
        """Every (rowid, language group, vector) of this model, by rowid, with the epoch they were read at."""
        with self._snapshot():
            index_id, epoch = self.vector_version()
            rows = self.conn.execute(  # a scan in rowid order (by the stamp index and a sort: 2-3x slower)
                "SELECT rowid, lang, vec FROM chunk_vectors NOT INDEXED WHERE model = ? ORDER BY rowid",
                (model,),
            ).fetchall()
        rowids = np.fromiter((r for r, _, _ in rows), dtype=np.int64, count=len(rows))
        return VectorRows(index_id, epoch, rows, rowids)

    def vector_changes(self, model: str, *, since: int) -> VectorRows | None:
        """This model's vectors written after vector epoch ``since``, and every rowid it has now.

        A reader that holds the vectors of a snapshot at epoch ``since`` is brought up to date by
        the rows returned (new, or replacing the row it has under that rowid, even when the rowid
        was deleted and reused meanwhile) and by dropping the rowids no longer listed. None when
        the file has no stamps yet (made by an older kb and not yet opened by a writer of this one).
        """
        with self._snapshot():
            if not _has_vector_stamps(self.conn):
                return None
            index_id, epoch = self.vector_version()
            rowids = self.conn.execute(  # from the stamp index alone: no vector is read
                "SELECT group_concat(rowid) FROM chunk_vectors WHERE model = ?", (model,)
            ).fetchone()[0]
            rows = self.conn.execute(
                "SELECT rowid, lang, vec FROM chunk_vectors WHERE model = ? AND stamp > ? ORDER BY rowid",
                (model, since),
            ).fetchall()
        ids = np.sort(np.fromstring(rowids, dtype=np.int64, sep=",")) if rowids else np.zeros(0, np.int64)
        return VectorRows(index_id, epoch, rows, ids)

    def vector_epoch(self) -> int:
        """A number that changes whenever chunks or vectors change (readers cache by it)."""
        value = self.meta("vector_epoch")
        return int(value) if value is not None else 0

    def vector_version(self) -> tuple[str | None, int]:
        """(index id, vector epoch): when it is what a reader loaded, its vectors are current."""
        found = dict(
            self.conn.execute("SELECT key, value FROM meta WHERE key IN ('index_id', 'vector_epoch')")
        )
        return found.get("index_id"), int(found.get("vector_epoch", 0))

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Reads that all see one state of the file (a read transaction, unless one is open already)."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def bodies(self, rowids: Iterable[int]) -> dict[int, str]:
        """Analysed bodies of chunks, keyed by rowid."""
        ids = list(rowids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        return dict(self.conn.execute(f"SELECT rowid, body FROM chunks_fts WHERE rowid IN ({marks})", ids))

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

    def summary(self, doc_id: str) -> StoredSummary | None:
        """A document's summary, if it has one made from its current raw text."""
        row = self.conn.execute(
            "SELECT s.kind, s.language, s.text, s.made_at FROM summaries s JOIN documents d ON d.id = s.document_id"
            " WHERE s.document_id = ? AND s.raw_sha256 = d.raw_sha256",
            (doc_id,),
        ).fetchone()
        return StoredSummary(*row) if row else None

    def summaries_of(self, doc_ids: Iterable[str]) -> dict[str, StoredSummary]:
        """The current summaries of these documents (those that have one)."""
        wanted = list(dict.fromkeys(doc_ids))
        found: dict[str, StoredSummary] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self.conn.execute(
                "SELECT s.document_id, s.kind, s.language, s.text, s.made_at FROM summaries s"
                " JOIN documents d ON d.id = s.document_id AND s.raw_sha256 = d.raw_sha256"
                f" WHERE s.document_id IN ({','.join('?' * len(part))})",
                part,
            )
            found.update({r[0]: StoredSummary(*r[1:]) for r in rows})
        return found

    def unsummarised(self, *, excerpts_too: bool, limit: int) -> list[DocumentRecord]:
        """Documents without a summary of their current text, newest first (with ``excerpts_too``, also
        those whose summary is only their opening sentences)."""
        rows = self.conn.execute(
            f"SELECT {_DOC_COLUMNS_D} FROM documents d"
            " LEFT JOIN summaries s ON s.document_id = d.id"
            " WHERE s.document_id IS NULL OR s.raw_sha256 != d.raw_sha256 OR (? AND s.kind = 'excerpt')"
            " ORDER BY d.indexed_at DESC, d.id LIMIT ?",
            (int(excerpts_too), limit),
        )
        return [DocumentRecord(*r) for r in rows]

    def put_summary(self, doc: DocumentRecord, kind: str, language: str, text: str, made_at: str) -> None:
        """Keep a document's summary, for the raw text it was read from (a document changed or gone
        meanwhile keeps none: the next pass makes it again)."""
        self.conn.execute(
            "INSERT INTO summaries (document_id, raw_sha256, kind, language, text, made_at)"
            " SELECT id, ?, ?, ?, ?, ? FROM documents WHERE id = ? AND raw_sha256 = ?"
            " ON CONFLICT (document_id) DO UPDATE SET raw_sha256 = excluded.raw_sha256, kind = excluded.kind,"
            " language = excluded.language, text = excluded.text, made_at = excluded.made_at",
            (doc.raw_sha256, kind, language, text, made_at, doc.id, doc.raw_sha256),
        )

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

    def candidates(
        self, weights: Sequence[tuple[str, float]], *, limit: int, rowid_range: tuple[int, int] | None = None
    ) -> list[Candidate]:
        """Chunks matching the most idf mass of the given (term, weight) pairs, with their bodies.

        Each term's posting list is read without ranking and the weights are summed per chunk;
        the caller re-ranks the few survivors.
        """
        if not weights:
            return []
        params: list[object] = []
        for n, (term, _) in enumerate(weights):
            params += [n, '"' + term.replace('"', '""') + '"', *(rowid_range or ())]
        try:
            lists = self.conn.execute(postings_sql(len(weights), rowid_range=rowid_range is not None), params)
            ids, mass = [], []
            for n, rowids in lists:
                if rowids:
                    ids.append(np.fromstring(rowids, dtype=np.int64, sep=","))
                    mass.append(np.full(len(ids[-1]), weights[n][1]))
        except sqlite3.OperationalError as exc:  # only a bug in query building gets here
            raise IndexError_(f"search failed: {exc}") from exc
        if not ids:
            return []
        # Summing here rather than in SQLite (UNION ALL … GROUP BY rowid): SQLite pushed every
        # posting through a temporary B-tree, 15-40 ms for the 12,000 postings a question may read
        # at 140,000 chunks; one string of rowids per term and numpy take a third of that.
        rowids, where = np.unique(np.concatenate(ids), return_inverse=True)
        sums = np.bincount(where, weights=np.concatenate(mass))
        best = np.lexsort((rowids, -sums))[:limit]  # most mass first, then by rowid
        top = [(int(rowids[i]), float(sums[i])) for i in best]
        bodies = self.bodies(r for r, _ in top)
        return [Candidate(r, s, bodies[r]) for r, s in top if r in bodies]

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (terms in no chunk are left out)."""
        if not terms:
            return {}
        marks = ",".join("?" * len(terms))
        return dict(self.conn.execute(f"SELECT term, df FROM term_df WHERE term IN ({marks})", list(terms)))

    def chunk_total(self) -> int:
        """Number of chunks, kept in the meta table by every write (count(*) is a full scan)."""
        value = self.meta("chunk_total")
        return int(value) if value is not None else self.chunk_count()

    def chunks_of(self, doc_id: str, seqs: Iterable[int]) -> list[ChunkRecord]:
        """Chunks of one document with these sequence numbers, in order."""
        wanted = list(seqs)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        rows = self.conn.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE c.document_id = ? AND c.seq IN ({marks}) ORDER BY c.seq",
            [doc_id, *wanted],
        )
        return [ChunkRecord(*r) for r in rows]

    def rowids_of(self, chunk_ids: Iterable[str]) -> list[int]:
        """The rowids of the chunks with these ids that still exist, in the order given."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        found = dict(self.conn.execute(f"SELECT id, rowid FROM chunks WHERE id IN ({marks})", ids))
        return [found[i] for i in ids if i in found]

    def document_rowid_range(self, doc_id: str) -> tuple[int, int] | None:
        """First and last rowid of a document's chunks (written together, so contiguous)."""
        row = self.conn.execute(
            "SELECT min(rowid), max(rowid) FROM chunks WHERE document_id = ?", (doc_id,)
        ).fetchone()
        return (row[0], row[1]) if row and row[0] is not None else None

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


def postings_sql(terms: int, *, rowid_range: bool = False) -> str:
    """One row per term: its number and its chunks' rowids as one comma-separated string.

    Parameters: (number, quoted term[, first rowid, last rowid]) per term.
    """
    where = "chunks_fts MATCH ?" + (" AND rowid BETWEEN ? AND ?" if rowid_range else "")
    return " UNION ALL ".join(
        f"SELECT ?, group_concat(rowid) FROM chunks_fts WHERE {where}" for _ in range(terms)
    )


def _document_terms(rows: Iterable[tuple[str, str]]) -> Counter[str]:
    """For each term, the number of (title, body) rows that contain it."""
    counts: Counter[str] = Counter()
    for title, body in rows:
        counts.update(set(title.split()) | set(body.replace(analysis.SENTENCE_MARK, " ").split()))
    return counts


def _save_vectors(conn: sqlite3.Connection, chunk_rowids: str, params: tuple[object, ...]) -> None:
    """Keep the vectors of the chunks about to be replaced, by text, in a temporary table."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS kept_vectors (text_sha256 TEXT, model TEXT, lang TEXT, vec BLOB)"
    )
    # Without it _restore_vectors scans the whole table for each new chunk: a reindex of 14,000
    # vectors took 60-90 s, and one of 143,000 was still running after 11 minutes.
    conn.execute("CREATE INDEX IF NOT EXISTS temp.kept_vectors_text ON kept_vectors (text_sha256)")
    conn.execute("DELETE FROM kept_vectors")
    conn.execute(
        "INSERT INTO kept_vectors SELECT c.text_sha256, v.model, v.lang, v.vec FROM chunk_vectors v"
        f" JOIN chunks c ON c.rowid = v.rowid WHERE v.rowid IN ({chunk_rowids})",
        params,
    )


def _restore_vectors(conn: sqlite3.Connection, chunk_rowids: str, params: tuple[object, ...]) -> None:
    """Give new chunks the kept vector of a chunk with the same text."""
    conn.execute(
        "INSERT OR IGNORE INTO chunk_vectors (rowid, model, lang, vec) SELECT c.rowid, k.model, k.lang, k.vec"
        f" FROM chunks c JOIN kept_vectors k ON k.text_sha256 = c.text_sha256 WHERE c.rowid IN ({chunk_rowids})",
        params,
    )
    conn.execute("DELETE FROM kept_vectors")


def _add_vector_stamps(conn: sqlite3.Connection) -> None:
    """Give an index made before vector stamps the stamp column (old rows: 0), its index and triggers.

    In one transaction: a reader trusts stamps once the triggers exist (see _has_vector_stamps).
    """
    if _has_vector_stamps(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not any(name == "stamp" for _, name, *_ in conn.execute("PRAGMA table_info(chunk_vectors)")):
            conn.execute("ALTER TABLE chunk_vectors ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0")
        for statement in _VECTOR_STAMPS:
            conn.execute(statement)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _has_vector_stamps(conn: sqlite3.Connection) -> bool:
    """Whether every vector row written to this file is stamped (its last trigger exists)."""
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'chunk_vectors_stamp_update'"
        ).fetchone()
        is not None
    )


def _bump_vector_epoch(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('vector_epoch', '1')"
        " ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


def _add_chunk_total(conn: sqlite3.Connection, delta: int) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('chunk_total', ?)"
        " ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
        (str(max(delta, 0)), delta),
    )


_DOC_FIELDS = (
    "id raw_path title source_name source_url source_snapshot source_sha256 converter raw_sha256"
    " chunk_count indexed_at"
).split()
_DOC_COLUMNS = ", ".join(_DOC_FIELDS)
_DOC_COLUMNS_D = ", ".join("d." + f for f in _DOC_FIELDS)
_CHUNK_COLUMNS = "c.id, c.document_id, c.seq, c.start_line, c.end_line, c.token_count, c.text, c.text_sha256"
