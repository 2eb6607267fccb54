"""The writer lock: one process at a time writes raw/ and the index.

An ``flock`` on ``knowledge/writer.lock`` (outside ``index/``, which users may delete); the file holds the owner's pid and role so
the refusal can say who holds it. The kernel releases the lock when the owner dies, so a
crash never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

import structlog

from knowledge.errors import NO_ROOM, IndexUnreadable, WriterLockHeld

log = structlog.get_logger()

DAEMON_ROLE = "kb daemon"  # the role the daemon takes the lock under (daemon/main.py)


class WriterLock:
    """Exclusive, process-wide writer lock for one KB_HOME."""

    def __init__(self, path: Path, *, role: str) -> None:
        self.path = path
        self.role = role
        self._fd: int | None = None

    def acquire(self, *, wait_s: float = 0.0, poll_s: float = 0.1) -> None:
        """Take the lock, waiting up to ``wait_s``; raises WriterLockHeld naming the holder."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            full = exc.errno in NO_ROOM
            raise IndexUnreadable(
                "disk-full" if full else "io-error",
                f"cannot create the writer lock {self.path}: {exc.strerror or exc}"
                + (" — free some disk space" if full else ""),
            ) from exc
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise WriterLockHeld(
                        f"another kb process is writing to this knowledge base ({holder}); "
                        f"wait for it to finish, or stop it (lock file {self.path})"
                    ) from None
                time.sleep(poll_s)
        self._fd = fd  # the flock is the lock; the holder line only names it in a refusal
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {self.role}\n".encode())
        except OSError as exc:  # a full disk: the lock holds all the same
            log.warning("lock.holder_unwritten", path=str(self.path), error=exc.strerror or str(exc))

    def release(self) -> None:
        """Give the lock up."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def is_held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> WriterLock:
        if self._fd is None:
            self.acquire()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    if not text:
        return "holder unknown"
    pid, _, role = text.partition(" ")
    return f"pid {pid}, {role or 'kb'}"


def holder(path: Path) -> str | None:
    """Who holds the lock ('pid 123, daemon'), or None when it is free."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def daemon_holder(path: Path) -> str | None:
    """Who holds the lock ('pid 123, kb daemon') when it is the daemon; None when it is free or
    another writer (kb ingest, kb reindex) has it."""
    found = holder(path)
    return found if found is not None and found.endswith(DAEMON_ROLE) else None
