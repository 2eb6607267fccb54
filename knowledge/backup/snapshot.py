"""Consistent copies of kb's SQLite files while their writers run, and the checks a copy must pass.

The copy is SQLite's online backup API (``Connection.backup``) from a read-only connection that
holds one read transaction from its first query to the last page: every page comes from that one
snapshot (WAL mode keeps it while the daemon commits past it), so the copy never restarts however
busy the writer is, and what the first query counted is what the copy holds. Pages go over in steps
(``pages`` at a time, ``pause_s`` between steps) so the copy's reads leave the disk to the daemon.
The copy is turned into a single file (journal mode DELETE) before it is checked.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from knowledge.errors import IndexError_
from knowledge.store.connection import connect

T = TypeVar("T")

STEP_PAGES = 1024
STEP_PAUSE_S = 0.002


@dataclass(frozen=True)
class IndexFacts:
    """What an index copy holds, counted inside the snapshot it was copied from."""

    documents: int
    chunks: int
    vectors: int


def index_facts(conn: sqlite3.Connection) -> IndexFacts:
    """Counts of an index (documents, chunks, vectors)."""
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return IndexFacts(
        one("SELECT count(*) FROM documents"),
        one("SELECT count(*) FROM chunks"),
        one("SELECT count(*) FROM chunk_vectors"),
    )


def copy_database(
    src: Path,
    dest: Path,
    *,
    facts: Callable[[sqlite3.Connection], T],
    pages: int = STEP_PAGES,
    pause_s: float = STEP_PAUSE_S,
) -> T:
    """Copy the SQLite file ``src`` to ``dest`` (a new file, made with mode 0600) from one read
    snapshot; what ``facts`` read from that snapshot. Only reads ``src``; IndexError_ when it cannot
    be read."""
    # Private from the start: a new file of mode 0600 made here, never one SQLite makes (with the
    # umask's 0644); its journal takes the same mode.
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
    source = connect(src, readonly=True, timeout_s=30.0)
    target = sqlite3.connect(dest, isolation_level=None)
    try:
        source.execute("BEGIN")  # deferred: the snapshot starts with the first read, in facts()
        found = facts(source)

        def pause(status: int, remaining: int, total: int) -> None:
            if pause_s > 0 and remaining:
                time.sleep(pause_s)

        source.backup(target, pages=pages, progress=pause)
        source.execute("COMMIT")
        target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
    except sqlite3.DatabaseError as exc:
        raise IndexError_(f"cannot copy {src}: {exc}") from exc
    finally:
        target.close()
        source.close()
    return found


def check_problems(path: Path, *, fts_table: str | None = None) -> list[str]:
    """What SQLite's integrity check finds wrong in a copy, plus FTS5's own
    check of ``fts_table``; empty when sound. The copy must be a file this process may write (the
    FTS5 check is an INSERT of a command)."""
    try:
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
        if fts_table is not None and not problems:
            conn.execute(f"INSERT INTO {fts_table} ({fts_table}) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        problems = [str(exc)]
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
    return problems
