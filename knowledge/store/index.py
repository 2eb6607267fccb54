"""The index: SQLite (WAL) with documents, chunks, an FTS5 table and ingest records.

It is derived data: everything in it is rebuilt from ``knowledge/raw/`` by ``kb reindex``.
One writer at a time (the daemon or ``kb ingest``, serialised by the writer lock); any
number of readers (the bot, ``kb search``), who never see half a document because every
document is written in one ``BEGIN IMMEDIATE`` transaction.

The vector tables, the summaries and the notes are parts of the same :class:`Index` (knowledge.store.vectors,
knowledge.store.use_vectors, knowledge.store.summaries, knowledge.store.notes); its schema is the numbered
migrations of knowledge.store.schema.

A note's heading (its title, aliases and description: ``Note.heading``) is analysed with its first chunk's
body, as a sentence of its own before it: a note is found by a name it goes by, whatever its text says.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from knowledge.errors import IndexError_, IndexMissing, IndexUnreadable
from knowledge.store import analysis
from knowledge.store.connection import connect, immediate, index_problem, unreadable
from knowledge.store.migrations import migrate
from knowledge.store.notes import NoteTable, delete_note, heading_of, write_note
from knowledge.store.records import (
    CHUNK_COLUMNS,
    DOC_COLUMNS,
    DOC_COLUMNS_D,
    Candidate,
    ChunkRecord,
    DocumentRecord,
    IngestRecord,
)
from knowledge.store.schema import MIGRATIONS, adopt
from knowledge.store.summaries import SummaryTable
from knowledge.store.use_vectors import UseVectorTable
from knowledge.store.vectors import VectorTable, bump_vector_epoch, restore_vectors, save_vectors
from knowledge.text import ELLIPSIS

# Of a document's text, read to tell whether its title is its first line (a title has 120 characters at most).
OPENING_CHARS = 400

# The documents of raw/ imported from a URL, the latest first (the one a new import of it replaces).
_BY_URL = (
    f"SELECT {DOC_COLUMNS} FROM documents WHERE source_url = ? AND raw_path LIKE 'raw/%'"
    " ORDER BY indexed_at DESC, id"
)

# More writes to make in a document's transaction (a folder source's record of its file).
Also = Callable[[sqlite3.Connection], None]


class Index(VectorTable, UseVectorTable, SummaryTable, NoteTable):
    """Documents, chunks, full-text search and ingest records in one SQLite file."""

    def __init__(self, path: Path, *, readonly: bool = False, busy_timeout_s: float = 10.0) -> None:
        """``busy_timeout_s``: how long a statement waits for another connection's lock."""
        self.path = path
        if readonly and not path.exists():
            raise IndexMissing(f"no index at {path} yet — add files with: kb ingest PATH")
        self.conn = connect(path, readonly=readonly, timeout_s=busy_timeout_s)
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
                migrate(self.conn, MIGRATIONS, adopt=adopt)
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

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: never a deferred read upgraded to a write)."""
        return immediate(self.conn)

    # -- metadata ---------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A value from the meta table."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Set a value in the meta table."""
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def drop_meta(self, key: str) -> None:
        """Remove a value from the meta table."""
        self.conn.execute("DELETE FROM meta WHERE key = ?", (key,))

    def _set_meta_default(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- writing ----------------------------------------------------------------------------

    def upsert_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], *, also: Also | None = None
    ) -> None:
        """Replace a document and all its chunks in one transaction (``also`` writes in it too).

        Vectors of chunks whose text is unchanged are kept (re-attached to the new rows), but the first
        chunk's when the note's heading changed (it is embedded with it: knowledge.store.vectors).
        """
        with self.write() as conn:
            heading = (doc.note.heading(doc.title) if doc.note else None) or doc.title
            first_too = heading_of(conn, doc.id) in (None, heading)
            save_vectors(
                conn,
                "SELECT rowid FROM chunks WHERE document_id = ?" + ("" if first_too else " AND seq > 1"),
                (doc.id,),
            )
            self._delete(conn, doc.id)
            self._insert(conn, doc, chunks)
            restore_vectors(conn, "SELECT rowid FROM chunks WHERE document_id = ?", (doc.id,))
            if also is not None:
                also(conn)

    def replace_all(self, rows: Iterable[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """Replace every document in one transaction (readers see the old set or the new one).

        Vectors of chunks whose text is unchanged are kept, so a rebuild need not embed again.
        """
        with self.write() as conn:
            save_vectors(conn, "SELECT rowid FROM chunks", ())
            conn.execute("DELETE FROM chunk_vectors")
            conn.execute("DELETE FROM chunks_fts")
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM documents")
            conn.execute("DELETE FROM term_df")
            conn.execute("DELETE FROM document_notes")
            conn.execute("DELETE FROM document_tags")
            conn.execute("DELETE FROM meta WHERE key = 'chunk_total'")
            for doc, chunks in rows:
                self._insert(conn, doc, chunks)
            restore_vectors(conn, "SELECT rowid FROM chunks", ())

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
        write_note(conn, doc)
        title_terms = analysis.index_text(doc.title)
        heading = doc.note.heading(doc.title) if doc.note else None
        bodies = [
            analysis.index_body(f"{heading}\n{c.text}" if heading and c.seq == 1 else c.text) for c in chunks
        ]
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
        bump_vector_epoch(conn)

    def delete_document(self, doc_id: str, *, also: Also | None = None) -> bool:
        """Remove a document and its chunks (``also`` writes in the same transaction); False when it
        was not there."""
        with self.write() as conn:
            deleted = self._delete(conn, doc_id)
            if also is not None:
                also(conn)
            return deleted

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
            bump_vector_epoch(conn)
        conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
        delete_note(conn, doc_id)
        return conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,)).rowcount > 0

    def bodies(self, rowids: Iterable[int]) -> dict[int, str]:
        """The analysed text of chunks as they are ranked, keyed by rowid.

        Each chunk of a document whose title names it (see :func:`names_subject`) has that title as a
        sentence before its words, unless it opens with it (the first, under its heading): a passage
        deep in a long article is found by the article's subject, which its own words rarely repeat."""
        ids = list(rowids)
        if not ids:
            return {}
        rows = self.conn.execute(
            "SELECT f.rowid, f.title, f.body, c.seq, d.title, substr(o.text, 1, ?)"
            " FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid JOIN documents d ON d.id = c.document_id"
            " JOIN chunks o ON o.document_id = c.document_id AND o.seq = 1"
            f" WHERE f.rowid IN ({','.join('?' * len(ids))})",
            [OPENING_CHARS, *ids],
        )
        return {r: _titled(terms, body, seq, title, opening) for r, terms, body, seq, title, opening in rows}

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
        row = self.conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return DocumentRecord(*row) if row else None

    def document_by_source_sha256(self, sha256: str) -> DocumentRecord | None:
        """The document converted from a source with these exact bytes, if any."""
        row = self.conn.execute(
            f"SELECT {DOC_COLUMNS} FROM documents WHERE source_sha256 = ? ORDER BY id LIMIT 1", (sha256,)
        ).fetchone()
        return DocumentRecord(*row) if row else None

    def document_by_source_url(self, url: str) -> DocumentRecord | None:
        """The latest document of raw/ imported from this URL, if any (a folder source's has none)."""
        row = self.conn.execute(_BY_URL + " LIMIT 1", (url,)).fetchone()
        return DocumentRecord(*row) if row else None

    def documents_by_url(self, url: str) -> list[DocumentRecord]:
        """The documents of raw/ imported from this URL, in the order document_by_source_url picks them."""
        rows = self.conn.execute(_BY_URL, (url,))
        return [DocumentRecord(*r) for r in rows]

    def documents(self) -> list[DocumentRecord]:
        """All documents, by raw path."""
        rows = self.conn.execute(f"SELECT {DOC_COLUMNS} FROM documents ORDER BY raw_path")
        return [DocumentRecord(*r) for r in rows]

    def documents_newest_first(self) -> list[DocumentRecord]:
        """All documents, the one kept last first (of two kept in the same second, the later one)."""
        rows = self.conn.execute(f"SELECT {DOC_COLUMNS} FROM documents ORDER BY indexed_at DESC, rowid DESC")
        return [DocumentRecord(*r) for r in rows]

    def chunks_by_rowid(self, rowids: Iterable[int]) -> dict[int, tuple[ChunkRecord, DocumentRecord]]:
        """Chunks with their documents, keyed by rowid."""
        ids = list(rowids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f"SELECT c.rowid, {CHUNK_COLUMNS}, {DOC_COLUMNS_D} FROM chunks c"
            f" JOIN documents d ON d.id = c.document_id WHERE c.rowid IN ({marks})",
            ids,
        )
        return {r[0]: (ChunkRecord(*r[1:9]), DocumentRecord(*r[9:])) for r in rows}

    def candidates(
        self,
        weights: Sequence[tuple[str, float]],
        *,
        limit: int,
        rowid_range: tuple[int, int] | None = None,
        within: np.ndarray | None = None,
    ) -> list[Candidate]:
        """Chunks matching the most idf mass of the given (term, weight) pairs, with their bodies.

        Each term's posting list is read without ranking and the weights are summed per chunk;
        the caller re-ranks the few survivors. ``within``: only these chunks (their rowids) take part,
        left out before the best ``limit`` are kept (a search scope, knowledge.retrieval.scope).
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
        if within is not None:
            inside = np.isin(rowids, within)
            rowids, sums = rowids[inside], sums[inside]
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

    def chunks_matching(self, expression: str, *, limit: int) -> list[tuple[str, int]]:
        """(document id, rowid) of the chunks an FTS5 expression matches (title or body), at most ``limit``."""
        try:
            rows = self.conn.execute(
                "SELECT c.document_id, c.rowid FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid"
                " WHERE chunks_fts MATCH ? LIMIT ?",
                (expression, limit),
            )
            return [(d, r) for d, r in rows]
        except sqlite3.OperationalError as exc:  # only a bug in query building gets here
            raise IndexError_(f"search failed: {exc}") from exc

    def terms_holding(self, fragment: str, *, limit: int) -> list[str]:
        """Indexed terms that contain this text (a piece of a word shorter than its script's n-gram)."""
        rows = self.conn.execute(
            "SELECT term FROM term_df WHERE instr(term, ?) > 0 LIMIT ?", (fragment, limit)
        )
        return [t for (t,) in rows]

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
            f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.document_id = ? AND c.seq IN ({marks}) ORDER BY c.seq",
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

    def has_chunks(self) -> bool:
        """Whether the index holds any chunk (at once: counting them reads the whole table)."""
        return self.conn.execute("SELECT EXISTS (SELECT 1 FROM chunks)").fetchone()[0] == 1

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


def names_subject(title: str, opening: str) -> bool:
    """Whether a document's title names what it is about: its text opens with a heading, or the title
    came from elsewhere (front matter, a page's or a PDF's own title). A title cut from the first line
    of plain text (a note, a text file) is only its first words."""
    first = " ".join(opening.lstrip().split("\n", 1)[0].split())
    cut = " ".join(title.removesuffix(ELLIPSIS).split())
    return _headed(first) or not (cut and first.startswith(cut))


def _headed(opening: str) -> bool:
    """Whether a document's text opens with a Markdown heading."""
    return opening.lstrip().startswith("#")


def _titled(terms: str, body: str, seq: int, title: str, opening: str) -> str:
    """A chunk's analysed body as it is ranked: its document's analysed title (``terms``) before it when
    the title names the document and the chunk does not open with it already."""
    if not terms or not names_subject(title, opening):
        return body
    if seq == 1 and (_headed(opening) or f"{body} ".startswith(f"{terms} ")):
        return body  # under its heading, or a note's name read with its first passage
    return f"{terms}{analysis.SENTENCE_MARK}{body}"


def _document_terms(rows: Iterable[tuple[str, str]]) -> Counter[str]:
    """For each term, the number of (title, body) rows that contain it."""
    counts: Counter[str] = Counter()
    for title, body in rows:
        counts.update(set(title.split()) | set(body.replace(analysis.SENTENCE_MARK, " ").split()))
    return counts


def _add_chunk_total(conn: sqlite3.Connection, delta: int) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('chunk_total', ?)"
        " ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
        (str(max(delta, 0)), delta),
    )
