"""The index's second vector table: one vector per chunk text from the second embedder (the multilingual
Universal Sentence Encoder, knowledge.retrieval.second), with the script it was written in.

Keyed by the text's SHA-256, not by the chunk's rowid: an edited document keeps the vectors of its
unchanged chunks, a rebuild (``kb reindex``) keeps them all, and a vector can never be read for a
chunk whose text changed under the same rowid. Texts no chunk holds any longer are pruned by the
backfill. Read a few rows at a time (the candidates of one question), never loaded whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from knowledge.store.connection import immediate


class UseVectorTable:
    """The second embedder's vectors (Index inherits it)."""

    conn: sqlite3.Connection

    def store_use_vectors(self, model: str, rows: Iterable[tuple[str, str, bytes]]) -> int:
        """Store (text_sha256, script, vector) rows for texts some chunk still holds; how many were stored."""
        with immediate(self.conn) as conn:
            count = 0
            for text_sha256, script, vec in rows:
                count += conn.execute(
                    "INSERT OR REPLACE INTO use_vectors (text_sha256, model, script, vec) SELECT ?, ?, ?, ?"
                    " WHERE EXISTS (SELECT 1 FROM chunks WHERE text_sha256 = ?)",
                    (text_sha256, model, script, vec, text_sha256),
                ).rowcount
            return count

    def texts_without_use_vectors(self, model: str, *, limit: int) -> list[tuple[str, str]]:
        """(text_sha256, text) of chunk texts with no vector of this model, the newest chunks first."""
        return self.conn.execute(
            "SELECT c.text_sha256, c.text FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM use_vectors u WHERE u.text_sha256 = c.text_sha256 AND u.model = ?)"
            " GROUP BY c.text_sha256 ORDER BY max(c.rowid) DESC LIMIT ?",
            (model, limit),
        ).fetchall()

    def use_vectors_of(self, model: str, rowids: Sequence[int]) -> dict[int, tuple[str, bytes]]:
        """(script, vector) of each of these chunks that has a vector of this model."""
        out: dict[int, tuple[str, bytes]] = {}
        for start in range(0, len(rowids), 500):  # SQLite's bound on parameters, with room to spare
            part = list(rowids[start : start + 500])
            marks = ",".join("?" * len(part))
            for rowid, script, vec in self.conn.execute(
                "SELECT c.rowid, u.script, u.vec FROM chunks c JOIN use_vectors u"
                f" ON u.text_sha256 = c.text_sha256 AND u.model = ? WHERE c.rowid IN ({marks})",
                (model, *part),
            ):
                out[rowid] = (script, vec)
        return out

    def use_vector_count(self, model: str) -> int:
        """Chunks whose text has a vector of this model."""
        return self.conn.execute(
            "SELECT count(*) FROM chunks c WHERE EXISTS"
            " (SELECT 1 FROM use_vectors u WHERE u.text_sha256 = c.text_sha256 AND u.model = ?)",
            (model,),
        ).fetchone()[0]

    def prune_use_vectors(self) -> int:
        """Forget the vectors of texts no chunk holds any longer (deleted or edited); how many went."""
        with immediate(self.conn) as conn:
            return conn.execute(
                "DELETE FROM use_vectors WHERE NOT EXISTS"
                " (SELECT 1 FROM chunks c WHERE c.text_sha256 = use_vectors.text_sha256)"
            ).rowcount

    def use_vector_rows(self) -> int:
        """Rows in the table, of every model (more than the chunks: some are to be pruned)."""
        return self.conn.execute("SELECT count(*) FROM use_vectors").fetchone()[0]
