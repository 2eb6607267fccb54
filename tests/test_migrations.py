"""The migration runner: each migration once, in order, recorded with it in one transaction; a file made
before migrations were recorded is adopted."""

import sqlite3
from contextlib import closing

import pytest

from knowledge.store.migrations import migrate, statements


def m001_notes(db: sqlite3.Connection) -> None:
    statements(
        db,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL); CREATE INDEX notes_text ON notes (text)",
    )


def m002_tags(db: sqlite3.Connection) -> None:
    statements(db, "ALTER TABLE notes ADD COLUMN tag TEXT")


def m002_broken(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE notes ADD COLUMN tag TEXT")
    raise RuntimeError("stopped half way")


def connect(path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def recorded(db: sqlite3.Connection) -> list[tuple[int, str]]:
    return db.execute("SELECT n, name FROM migrations ORDER BY n").fetchall()


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [c[1] for c in db.execute(f"PRAGMA table_info({table})")]


def test_each_migration_runs_once_in_order_and_is_recorded(tmp_path):
    with closing(connect(tmp_path / "x.sqlite3")) as db:
        migrate(db, (m001_notes,))
        migrate(db, (m001_notes,))  # nothing new: nothing runs (a second CREATE TABLE would fail)
        migrate(db, (m001_notes, m002_tags))
        assert recorded(db) == [(1, "m001_notes"), (2, "m002_tags")]
        assert columns(db, "notes") == ["id", "text", "tag"]


def test_a_migration_that_fails_leaves_nothing_of_itself_and_runs_again_next_time(tmp_path):
    with closing(connect(tmp_path / "x.sqlite3")) as db:
        with pytest.raises(RuntimeError):
            migrate(db, (m001_notes, m002_broken))
        assert recorded(db) == [(1, "m001_notes")] and columns(db, "notes") == ["id", "text"]
        assert not db.in_transaction
        migrate(db, (m001_notes, m002_tags))
        assert recorded(db) == [(1, "m001_notes"), (2, "m002_tags")]


def test_a_file_from_before_recorded_migrations_is_asked_once_what_it_holds(tmp_path):
    asked = []

    def adopt(db: sqlite3.Connection) -> int:
        asked.append(db.execute("SELECT count(*) FROM notes").fetchone()[0])
        return 1  # it has the notes table: m001 is recorded, not run

    with closing(connect(tmp_path / "x.sqlite3")) as db:
        db.executescript(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL); INSERT INTO notes (text) VALUES ('kept')"
        )
        migrate(db, (m001_notes, m002_tags), adopt=adopt)
        migrate(db, (m001_notes, m002_tags), adopt=adopt)
        assert asked == [1]
        assert recorded(db) == [(1, "m001_notes"), (2, "m002_tags")]
        assert db.execute("SELECT text, tag FROM notes").fetchall() == [("kept", None)]
