"""The index's vector tables: chunk vectors (one per chunk and model, stamped for readers that refresh
what they hold), the background vectors of each model, the vector epoch readers cache by, and how a
vector is stored (float16 bytes: half the bytes of float32, 82 MB per 100,000 chunks of 384 dimensions).

What is done with them (filling them in, centring, search) is knowledge.retrieval.vectors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from knowledge.store.connection import immediate, snapshot
from knowledge.store.records import VectorRows
from knowledge.store.schema import has_vector_stamps

DTYPE = np.float16
DTYPE_BYTES = np.dtype(DTYPE).itemsize
EMBED_TURN = 8  # chunks of each document a turn of chunks_without_vectors takes (a new note waits one turn)


def encode(vector: np.ndarray) -> bytes:
    """A vector as stored."""
    return np.asarray(vector, dtype=DTYPE).tobytes()


def stored(blobs: list[bytes]) -> np.ndarray:
    """Stored vectors as they are stored (float16, one row each), without a float32 copy."""
    if not blobs:
        return np.zeros((0, 0), dtype=DTYPE)
    return np.frombuffer(b"".join(blobs), dtype=DTYPE).reshape(len(blobs), -1).copy()


def decode(blobs: list[bytes]) -> np.ndarray:
    """Stored vectors as a float32 matrix (one row each)."""
    return stored(blobs).astype(np.float32)


class VectorTable:
    """The vector part of the index (Index inherits it): chunk and background vectors, their epoch."""

    conn: sqlite3.Connection

    def store_vectors(self, model: str, rows: Iterable[tuple[int, str, str, bytes]]) -> int:
        """Store (rowid, text_sha256, language group, vector) for chunks that still hold that text.

        Returns how many were stored.
        """
        with immediate(self.conn) as conn:
            count = 0
            for rowid, text_sha256, lang, vec in rows:
                count += conn.execute(
                    "INSERT OR REPLACE INTO chunk_vectors (rowid, model, lang, vec) SELECT ?, ?, ?, ?"
                    " WHERE EXISTS (SELECT 1 FROM chunks WHERE rowid = ? AND text_sha256 = ?)",
                    (rowid, model, lang, vec, rowid, text_sha256),
                ).rowcount
            if count:
                bump_vector_epoch(conn)
            return count

    def store_background(self, model: str, version: str, rows: Sequence[tuple[str, bytes]]) -> None:
        """Replace this model's background vectors with (language group, vector) rows of ``version``."""
        with immediate(self.conn) as conn:
            conn.execute("DELETE FROM background_vectors WHERE model = ?", (model,))
            conn.executemany(
                "INSERT INTO background_vectors (model, seq, version, lang, vec) VALUES (?, ?, ?, ?, ?)",
                ((model, n, version, lang, vec) for n, (lang, vec) in enumerate(rows)),
            )
            bump_vector_epoch(conn)

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
        document's next ``EMBED_TURN`` chunks a turn, the newest document first in every turn. A note's
        first chunk has its heading (title, aliases, description: knowledge.store.notes) for its title.

        A note added after a 30,000-chunk file is embedded within a turn, not after the whole file.
        With ``vector_bytes``, a vector of another size counts as missing (the model changed its
        dimension under the same name).
        """
        return self.conn.execute(
            "SELECT m.rowid, c.text_sha256,"
            " CASE WHEN c.seq = 1 THEN coalesce(n.heading, d.title) ELSE d.title END, c.text FROM ("
            "  SELECT c.rowid, c.document_id,"
            "   (ROW_NUMBER() OVER (PARTITION BY c.document_id ORDER BY c.seq) - 1) / ? AS turn"
            "  FROM chunks c"
            "  WHERE NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.rowid = c.rowid AND v.model = ?"
            "   AND (? IS NULL OR length(v.vec) = ?))"
            " ) m JOIN chunks c ON c.rowid = m.rowid JOIN documents d ON d.id = m.document_id"
            " LEFT JOIN document_notes n ON n.document_id = d.id"
            " ORDER BY m.turn, d.indexed_at DESC, d.id, c.seq LIMIT ?",
            (EMBED_TURN, model, vector_bytes, vector_bytes, limit),
        ).fetchall()

    def vector_count(self, model: str) -> int:
        """Chunks with a vector of this model."""
        return self.conn.execute("SELECT count(*) FROM chunk_vectors WHERE model = ?", (model,)).fetchone()[0]

    def vectors(self, model: str) -> VectorRows:
        """Every (rowid, language group, vector) of this model, by rowid, with the epoch they were read at."""
        with snapshot(self.conn):
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
        with snapshot(self.conn):
            if not has_vector_stamps(self.conn):
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
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'vector_epoch'").fetchone()
        return int(row[0]) if row else 0

    def vector_version(self) -> tuple[str | None, int]:
        """(index id, vector epoch): when it is what a reader loaded, its vectors are current."""
        found = dict(
            self.conn.execute("SELECT key, value FROM meta WHERE key IN ('index_id', 'vector_epoch')")
        )
        return found.get("index_id"), int(found.get("vector_epoch", 0))


def save_vectors(conn: sqlite3.Connection, chunk_rowids: str, params: tuple[object, ...]) -> None:
    """Keep the vectors of the chunks about to be replaced, by text, in a temporary table."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS kept_vectors (text_sha256 TEXT, model TEXT, lang TEXT, vec BLOB)"
    )
    # Without it restore_vectors scans the whole table for each new chunk: a reindex of 14,000
    # vectors took 60-90 s, and one of 143,000 was still running after 11 minutes.
    conn.execute("CREATE INDEX IF NOT EXISTS temp.kept_vectors_text ON kept_vectors (text_sha256)")
    conn.execute("DELETE FROM kept_vectors")
    conn.execute(
        "INSERT INTO kept_vectors SELECT c.text_sha256, v.model, v.lang, v.vec FROM chunk_vectors v"
        f" JOIN chunks c ON c.rowid = v.rowid WHERE v.rowid IN ({chunk_rowids})",
        params,
    )


def restore_vectors(conn: sqlite3.Connection, chunk_rowids: str, params: tuple[object, ...]) -> None:
    """Give new chunks the kept vector of a chunk with the same text."""
    conn.execute(
        "INSERT OR IGNORE INTO chunk_vectors (rowid, model, lang, vec) SELECT c.rowid, k.model, k.lang, k.vec"
        f" FROM chunks c JOIN kept_vectors k ON k.text_sha256 = c.text_sha256 WHERE c.rowid IN ({chunk_rowids})",
        params,
    )
    conn.execute("DELETE FROM kept_vectors")


def bump_vector_epoch(conn: sqlite3.Connection) -> None:
    """Change the vector epoch (in the writing transaction): chunks or vectors changed."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('vector_epoch', '1')"
        " ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )
