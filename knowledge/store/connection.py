"""The index's SQLite connection: opened in WAL mode (or read as it is on disk), its write transaction,
and what SQLite's errors mean for the owner (a full disk, a damaged file, a busy one)."""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from knowledge.errors import NO_ROOM, IndexUnreadable

log = structlog.get_logger()

# What SQLite says when the file is not an index, and when another connection holds it.
_DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_VTAB", "SQLITE_CORRUPT_SEQUENCE"}
_BUSY = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"}
LOW_DISK_BYTES = 64 * 2**20  # below this much free space, a write that fails is taken for a full disk


def index_problem(exc: BaseException, free_bytes: int | None) -> str:
    """Why the index cannot be used: ``disk-full``, ``damaged``, ``busy`` or ``io-error`` (pure)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        return "disk-full"
    if (
        name in ("SQLITE_FULL", "SQLITE_IOERR_SHMSIZE") or "disk is full" in text
    ):  # SHMSIZE: -shm could not grow
        return "disk-full"
    if name in _DAMAGED or "malformed" in text or "not a database" in text:
        return "damaged"
    if name in _BUSY or "locked" in text:
        return "busy"
    if (name.startswith("SQLITE_IOERR") or isinstance(exc, OSError)) and (  # a write that failed
        free_bytes is not None and free_bytes < LOW_DISK_BYTES
    ):
        return "disk-full"
    return "io-error"


def unreadable(path: Path, exc: BaseException, doing: str = "open") -> IndexUnreadable:
    """The error for an index that cannot be used now, with the fix for its cause."""
    try:
        free: int | None = shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free
    except OSError:
        free = None
    reason = index_problem(exc, free)
    if reason == "disk-full":
        message = (
            f"cannot {doing} the index {path}: the disk is full ({exc}) — free some disk space; "
            "the index is kept as it is and used again once there is room"
        )
    elif reason == "damaged":
        message = f"the index {path} is damaged ({exc}) — rebuild it from raw/ with: kb reindex"
    elif reason == "busy":
        message = f"the index {path} is busy ({exc}); try again in a moment"
    else:
        message = f"cannot {doing} the index {path} ({exc}); check the disk it is on"
    return IndexUnreadable(reason, message)


class ReadAsIs(sqlite3.Connection):
    """A connection that reads the file as it is on disk (``immutable``): it never sees a later write."""


def is_read_as_is(conn: sqlite3.Connection) -> bool:
    """Whether this connection reads the file as it was on disk when it was opened (see connect)."""
    return isinstance(conn, ReadAsIs)


def _read_only(path: Path, timeout_s: float, *, immutable: bool) -> sqlite3.Connection:
    return sqlite3.connect(
        f"file:{path}?mode=ro" + ("&immutable=1" if immutable else ""),
        uri=True,
        timeout=timeout_s,
        isolation_level=None,
        check_same_thread=False,
        factory=ReadAsIs if immutable else sqlite3.Connection,
    )


def connect(path: Path, *, readonly: bool = False, timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection in WAL mode with a busy timeout, foreign keys on and autocommit.

    A reader of a WAL index needs its ``-shm`` file, which SQLite creates when no writer has it open:
    on a full disk it cannot, and the index is then read as it is on disk (``immutable``: no writer
    runs to change it meanwhile, or the ``-shm`` would be there). Only when the ``-wal`` is empty or
    gone: one that still holds pages (a writer that stopped without a checkpoint) would be skipped, and
    the latest documents with it, so that index is reported unreadable instead of read stale. It may be
    handed to another thread (the daemon's worker), but never used by two at once.
    """
    try:
        if readonly:
            conn = _read_only(path, timeout_s, immutable=False)
            try:
                conn.execute("PRAGMA schema_version").fetchone()
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorname", "") not in (
                    "SQLITE_IOERR_SHMSIZE",
                    "SQLITE_CANTOPEN",
                    "SQLITE_READONLY_CANTINIT",
                    "SQLITE_IOERR_SHMOPEN",
                ):
                    raise
                conn.close()
                wal = path.with_name(path.name + "-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise  # as it is on disk would leave out what the log holds: say it, do not hide it
                log.warning("index.read_as_is", path=str(path), reason=str(exc))
                conn = _read_only(path, timeout_s, immutable=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
            _wal(conn, timeout_s)
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        # A 64 MiB page cache keeps the B-tree pages a write touches (term table, FTS segments)
        # in memory, so ingest time stays flat as the index grows.
        conn.execute("PRAGMA cache_size = -65536")
    except (sqlite3.DatabaseError, OSError) as exc:
        raise unreadable(path, exc) from exc
    return conn


def _wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Put the file in WAL mode. Changing the journal mode of a new file needs it to itself and SQLite
    answers "locked" at once, without its busy handler, while another connection opens it: retried."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "") not in _BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection (BEGIN IMMEDIATE: never a deferred read
    upgraded to a write); rolled back when the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """Reads that all see one state of the file (a read transaction, unless one is open already)."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
