"""Numbered schema migrations, applied once each, in order, and recorded: one runner for every SQLite
file kb keeps (the index, the conversation file).

A migration is a function of a connection, run inside the runner's write transaction together with
the row that records it (``migrations``: its number, its function's name, when), so a file is never
left half migrated, and files opened for the first time by several threads or processes at once are
migrated once: each migration is checked again under the write lock before it runs.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence

from knowledge.store.connection import immediate

Migration = Callable[[sqlite3.Connection], None]

_TABLE = "CREATE TABLE migrations (n INTEGER PRIMARY KEY, name TEXT NOT NULL, at REAL NOT NULL)"


def migrate(
    db: sqlite3.Connection,
    migrations: Sequence[Migration],
    *,
    adopt: Callable[[sqlite3.Connection], int] | None = None,
) -> None:
    """Apply each migration the file has not recorded, in order, each in its own write transaction.

    ``db`` is in autocommit mode (``isolation_level=None``). ``adopt`` is asked once, for a file that
    has no ``migrations`` table yet, how many of the first migrations the file already holds (one made
    before its migrations were recorded); those are recorded without being run.
    """
    done = _recorded(db)
    if done is None:
        with immediate(db):
            if _recorded(db) is None:  # another connection may have made it while this one waited
                db.execute(_TABLE)
                for n, migration in enumerate(migrations[: adopt(db) if adopt else 0], 1):
                    _record(db, n, migration)
        done = _recorded(db) or set()
    for n, migration in enumerate(migrations, 1):
        if n in done:
            continue
        with immediate(db):
            if db.execute("SELECT 1 FROM migrations WHERE n = ?", (n,)).fetchone() is not None:
                continue  # another connection applied it while this one waited for the lock
            migration(db)
            _record(db, n, migration)


def statements(db: sqlite3.Connection, script: str) -> None:
    """Run a migration's statements (separated by ``;``, none inside them) in the caller's transaction
    (``executescript`` would commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _recorded(db: sqlite3.Connection) -> set[int] | None:
    """The numbers of the migrations recorded in the file; None when it has no ``migrations`` table."""
    if (
        db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'").fetchone()
        is None
    ):
        return None
    return {n for (n,) in db.execute("SELECT n FROM migrations")}


def _record(db: sqlite3.Connection, n: int, migration: Migration) -> None:
    db.execute("INSERT INTO migrations (n, name, at) VALUES (?, ?, ?)", (n, migration.__name__, time.time()))
