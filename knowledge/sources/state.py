"""What the index remembers of the sources' files (the ``source_files`` table, migration m003): read,
written in the caller's transaction, and the documents of a source moved or forgotten with it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from knowledge.sources.plan import Known

_COLUMNS = "path, size, mtime_ns, sha256, status, doc_id, reason, message"


def known(conn: sqlite3.Connection, source: str, paths: Iterable[str] | None = None) -> dict[str, Known]:
    """The files of a source kb knows (all, or those among ``paths``), by path."""
    if paths is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM source_files WHERE source = ?", (source,))
        return {r[0]: Known(*r) for r in rows}
    out: dict[str, Known] = {}
    for path in paths:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM source_files WHERE source = ? AND path = ?", (source, path)
        ).fetchone()
        if row is not None:
            out[path] = Known(*row)
    return out


def with_sha256(conn: sqlite3.Connection, source: str, sha256: str) -> list[Known]:
    """The indexed files of a source with these bytes."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM source_files WHERE source = ? AND sha256 = ? AND status = 'indexed'"
        " ORDER BY path",
        (source, sha256),
    )
    return [Known(*r) for r in rows]


def put(conn: sqlite3.Connection, source: str, k: Known, *, at: str) -> None:
    """Remember one file (replacing what was known of its path)."""
    conn.execute(
        "INSERT OR REPLACE INTO source_files (source, path, size, mtime_ns, sha256, status, doc_id, reason,"
        " message, checked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (source, k.path, k.size, k.mtime_ns, k.sha256, k.status, k.doc_id, k.reason, k.message, at),
    )


def drop(conn: sqlite3.Connection, source: str, path: str) -> None:
    """Forget one file."""
    conn.execute("DELETE FROM source_files WHERE source = ? AND path = ?", (source, path))


def document_ids(conn: sqlite3.Connection, source: str) -> set[str]:
    """The ids of the documents of a source that the index holds."""
    rows = conn.execute("SELECT id FROM documents WHERE raw_path LIKE ? ESCAPE '\\'", (_prefix(source),))
    return {r[0] for r in rows}


def document_for(conn: sqlite3.Connection, raw_path: str) -> str | None:
    """The id of the document at this path (``source:relative/path``), if there is one."""
    row = conn.execute("SELECT id FROM documents WHERE raw_path = ?", (raw_path,)).fetchone()
    return row[0] if row else None


def move_document(conn: sqlite3.Connection, doc_id: str, raw_path: str, source_name: str) -> None:
    """Give a document its file's new path: its text, chunks and vectors stay as they are."""
    conn.execute(
        "UPDATE documents SET raw_path = ?, source_name = ? WHERE id = ?", (raw_path, source_name, doc_id)
    )


def registered_names(conn: sqlite3.Connection) -> set[str]:
    """The sources the index holds files of."""
    return {r[0] for r in conn.execute("SELECT DISTINCT source FROM source_files")}


def counts(conn: sqlite3.Connection, source: str) -> dict[str, int]:
    """How many files of a source are indexed, skipped and failed (as last read)."""
    rows = conn.execute(
        "SELECT status, count(*) FROM source_files WHERE source = ? GROUP BY status", (source,)
    )
    return dict(rows.fetchall())


def problems(conn: sqlite3.Connection, source: str) -> list[Known]:
    """The files of a source skipped or failed when read, by path."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM source_files WHERE source = ? AND status != 'indexed' ORDER BY path",
        (source,),
    )
    return [Known(*r) for r in rows]


def has_table(conn: sqlite3.Connection) -> bool:
    """Does the index hold the sources' records (an index an older kb made, opened read-only, does not)?"""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'source_files'"
    ).fetchone()
    return row is not None


def raw_path(source: str, path: str) -> str:
    """How a source's document is named in the index and its citations: ``vault:Projects/x.md``."""
    return f"{source}:{path}"


def split_raw_path(raw_path: str) -> tuple[str, str] | None:
    """(source, relative path) of a folder source's document; None for a document of raw/."""
    if raw_path.startswith("raw/"):
        return None
    source, sep, path = raw_path.partition(":")  # a source's name holds no ':'
    return (source, path) if sep else None


def _prefix(source: str) -> str:
    escaped = source.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ":%"
