"""Search kept to one folder source, to the notes carrying a tag, or both: ``kb search --in NAME --tag TAG``,
``kb ask --in NAME --tag TAG``, the MCP tool ``search``'s ``source`` and ``tag``, ``in:NAME`` and ``#tag``
in a chat's question.

A :class:`Scope` names a registered source (made from a name by knowledge.sources.registry.scope_in,
which refuses a name no source has, naming the sources there are); its documents are the ones the
index records for that source's files (the ``source_files`` table, knowledge.sources.state). It may name
a tag (checked by knowledge.sources.registry.with_tag, which refuses a tag no document carries, naming
the tags used most): the documents carrying it, in any spelling (``#Rent`` is ``rent``), or a tag nested
in it (``home`` holds ``home/rent``), as Obsidian finds them (the ``document_tags`` table,
knowledge.store.notes). With both, the documents of that source carrying that tag. Retrieval
reads the rowids of their chunks once per search, from the index it searches, and keeps to them *inside*
each pool: the lexical candidates (knowledge.store.index.Index.candidates) and the chunks nearest by
meaning (knowledge.retrieval.vectors.VectorCache.nearest). A small source in a large index thereby
gets its own best k, never what is left of the whole index's best 40. Each passage is judged exactly as
without a scope (the same relevance gate, the same idf): a scope only leaves the others out.

No scope (None) is everything, the default. The inbox's documents (``raw/``) are not a scope: a source
may be named ``inbox``, and the name always means the registered source.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np

from knowledge.store.notes import TAG_KEYS, has_notes
from knowledge.text import tag_key


@dataclass(frozen=True)
class Scope:
    """The documents of one registered source, or carrying one tag (as written, '#' or not), or both, as
    the candidates of a search."""

    source: str | None = None
    tag: str | None = None

    def rowids(self, conn: sqlite3.Connection) -> np.ndarray:
        """The rowids of the chunks of the scope's documents, ascending (none before its first sync)."""
        parts = []
        if self.source is not None:
            # an index an older kb made, opened read-only: no source's files in it, no tags
            rows = conn.execute(scope_sql(), (self.source,)) if _has_sources(conn) else []
            parts.append(np.fromiter((r for (r,) in rows), dtype=np.int64))
        if self.tag is not None:
            rows = conn.execute(tag_sql(), (tag_key(self.tag),)) if has_notes(conn) else []
            parts.append(np.fromiter((r for (r,) in rows), dtype=np.int64))
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.intersect1d(parts[0], parts[1])


def scope_sql() -> str:
    """The chunks of a source's documents (parameter: the source's name), by rowid."""
    return (
        "SELECT DISTINCT c.rowid FROM source_files s JOIN chunks c ON c.document_id = s.doc_id"
        " WHERE s.source = ? ORDER BY c.rowid"
    )


def tag_sql() -> str:
    """The chunks of the documents carrying a tag or a tag nested in it (parameter: the tag's key), by rowid."""
    return (
        "SELECT DISTINCT c.rowid FROM document_tags t JOIN chunks c ON c.document_id = t.document_id"
        f" WHERE {TAG_KEYS} ORDER BY c.rowid"
    )


def _has_sources(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'source_files'")
    return row.fetchone() is not None
