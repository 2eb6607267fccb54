"""Search kept to one folder source: ``kb search --in NAME``, ``kb ask --in NAME``, the MCP tool
``search``'s ``source``.

A :class:`Scope` names a registered source (made from a name by knowledge.sources.registry.scope_in,
which refuses a name no source has, naming the sources there are); its documents are the ones the
index records for that source's files (the ``source_files`` table, knowledge.sources.state). Retrieval
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


@dataclass(frozen=True)
class Scope:
    """The documents of one registered source, as the candidates of a search."""

    source: str

    def rowids(self, conn: sqlite3.Connection) -> np.ndarray:
        """The rowids of the chunks of the source's documents, ascending (none before its first sync)."""
        if not _has_sources(conn):  # an index an older kb made, opened read-only: no source's files in it
            return np.zeros(0, dtype=np.int64)
        rows = conn.execute(scope_sql(), (self.source,))
        return np.fromiter((r for (r,) in rows), dtype=np.int64)


def scope_sql() -> str:
    """The chunks of a source's documents (parameter: the source's name), by rowid."""
    return (
        "SELECT DISTINCT c.rowid FROM source_files s JOIN chunks c ON c.document_id = s.doc_id"
        " WHERE s.source = ? ORDER BY c.rowid"
    )


def _has_sources(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'source_files'")
    return row.fetchone() is not None
