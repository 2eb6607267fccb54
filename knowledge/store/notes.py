"""Notes' aliases, description, tags, links and dates in the index (Index inherits NoteTable): written and
deleted with their document, in its transaction; read by search (a result's tags, a search kept to a tag).

``document_notes`` holds one row a note (JSON lists), ``document_tags`` one row a tag of a note by its
folded form (knowledge.text.tag_key), so a tag and the tags nested in it (``home`` holds ``home/rent``)
are found by one range of the primary key. An index an older kb made, read before a writer brought it
up to date, has neither table: its documents have no notes and no tags.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import replace

from knowledge.store.records import DocumentRecord, Note
from knowledge.text import tag_key

# The rows of a tag and of the tags nested in it: key = ?1, or key in ['?1/', '?1' + the character after '/').
TAG_KEYS = "(t.key = ?1 OR (t.key >= ?1 || '/' AND t.key < ?1 || '0'))"


def write_note(conn: sqlite3.Connection, doc: DocumentRecord) -> None:
    """A document's note rows (none without a note), in the caller's transaction."""
    note = doc.note
    if not note:
        return
    conn.execute(
        "INSERT INTO document_notes (document_id, aliases, description, tags, links, heading, dates)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            doc.id,
            _json(note.aliases),
            note.description,
            _json(note.tags),
            _json(note.links),
            note.heading(doc.title),
            json.dumps(dict(note.dates)),
        ),
    )
    conn.executemany(
        "INSERT OR IGNORE INTO document_tags (key, document_id, tag) VALUES (?, ?, ?)",
        ((tag_key(t), doc.id, t) for t in note.tags),
    )


def delete_note(conn: sqlite3.Connection, doc_id: str) -> None:
    """A document's note rows gone, in the caller's transaction."""
    conn.execute("DELETE FROM document_notes WHERE document_id = ?", (doc_id,))
    conn.execute("DELETE FROM document_tags WHERE document_id = ?", (doc_id,))


def heading_of(conn: sqlite3.Connection, doc_id: str) -> str | None:
    """What the first passage of a document is embedded with besides its text: its note's heading, else
    its title (None when the document is not there)."""
    row = conn.execute(
        "SELECT coalesce(n.heading, d.title) FROM documents d LEFT JOIN document_notes n"
        " ON n.document_id = d.id WHERE d.id = ?",
        (doc_id,),
    ).fetchone()
    return row[0] if row else None


def has_dates(conn: sqlite3.Connection) -> bool:
    """Whether the notes keep their dates (an index read before a writer brought it up to date may not)."""
    return any(row[1] == "dates" for row in conn.execute("PRAGMA table_info(document_notes)"))


def has_notes(conn: sqlite3.Connection) -> bool:
    """Whether the file holds the notes' tables (an older kb's, read as it is, does not)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'document_tags'")
    return row.fetchone() is not None


class NoteTable:
    """The notes part of the index."""

    conn: sqlite3.Connection

    def note(self, doc_id: str) -> Note | None:
        """A document's note (None when it has none)."""
        if not has_notes(self.conn):
            return None
        dates = "dates" if has_dates(self.conn) else "'{}'"
        row = self.conn.execute(
            f"SELECT aliases, description, tags, links, {dates} FROM document_notes WHERE document_id = ?",
            (doc_id,),
        ).fetchone()
        if row is None:
            return None
        aliases, description, tags, links, dated = row
        return Note(_tuple(aliases), description, _tuple(tags), _tuple(links), _pairs(dated))

    def dates_of(self, doc_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        """The front-matter dates of these documents (those that have any): date, created, updated."""
        wanted = list(dict.fromkeys(doc_ids))
        if not wanted or not has_notes(self.conn) or not has_dates(self.conn):
            return {}
        found: dict[str, dict[str, str]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self.conn.execute(
                f"SELECT document_id, dates FROM document_notes WHERE document_id IN ({','.join('?' * len(part))})",
                part,
            )
            found.update({d: dict(pairs) for d, t in rows if (pairs := _pairs(t))})
        return found

    def with_note(self, doc: DocumentRecord) -> DocumentRecord:
        """The document with its note read (to be written again as it is: a rebuild)."""
        return replace(doc, note=self.note(doc.id))

    def tags_of(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The tags of these documents (those that have any), as their notes write them."""
        wanted = list(dict.fromkeys(doc_ids))
        if not wanted or not has_notes(self.conn):
            return {}
        found: dict[str, tuple[str, ...]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self.conn.execute(
                f"SELECT document_id, tags FROM document_notes WHERE document_id IN ({','.join('?' * len(part))})",
                part,
            )
            found.update({d: tags for d, t in rows if (tags := _tuple(t))})
        return found

    def tag_counts(self, *, limit: int = -1) -> list[tuple[str, int]]:
        """Tags and how many documents carry each, the most used first (a tag as one of them writes it;
        ``limit`` -1: all)."""
        if not has_notes(self.conn):
            return []
        rows = self.conn.execute(
            "SELECT min(tag), count(*) AS n FROM document_tags GROUP BY key ORDER BY n DESC, key LIMIT ?",
            (limit,),
        )
        return [(t, n) for t, n in rows]

    def has_tag(self, tag: str) -> bool:
        """Whether a document carries this tag (any spelling) or a tag nested in it."""
        if not has_notes(self.conn):
            return False
        row = self.conn.execute(f"SELECT 1 FROM document_tags t WHERE {TAG_KEYS} LIMIT 1", (tag_key(tag),))
        return row.fetchone() is not None


def _json(values: tuple[str, ...]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    """A JSON object of texts as (key, text) pairs (anything else: none)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return ()
    if not isinstance(value, dict):
        return ()
    return tuple((k, v) for k, v in value.items() if isinstance(k, str) and isinstance(v, str) and v)


def _tuple(text: str) -> tuple[str, ...]:
    """A JSON list of texts as a tuple (anything else: empty)."""
    try:
        values = json.loads(text)
    except (TypeError, ValueError):
        return ()
    return tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else ()
