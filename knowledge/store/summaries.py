"""Documents' summaries in the index (Index inherits SummaryTable): each tied to the raw text it was
made from, so a changed document counts as unsummarised until the daemon makes it again."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from knowledge.store.records import DOC_COLUMNS_D, DocumentRecord, StoredSummary


class SummaryTable:
    """The summary part of the index."""

    conn: sqlite3.Connection

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
        those whose summary is only their opening sentences); of two kept in the same second, the one
        kept last first."""
        rows = self.conn.execute(
            f"SELECT {DOC_COLUMNS_D} FROM documents d"
            " LEFT JOIN summaries s ON s.document_id = d.id"
            " WHERE s.document_id IS NULL OR s.raw_sha256 != d.raw_sha256 OR (? AND s.kind = 'excerpt')"
            " ORDER BY d.indexed_at DESC, d.rowid DESC LIMIT ?",
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
