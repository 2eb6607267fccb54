"""Read-only connections to the index, kept open between the questions of a long-running reader (kb mcp).

Opening one costs more than a warm search wants to pay: the connection, its schema read, and a page cache
that starts empty, so each question read again from the file what the previous one had in memory (about
3 ms of a 45 ms search on a 2-core machine). A kept connection sees each write as a new one would: the index
is in WAL mode and every statement outside a transaction reads the latest commit.

A connection is lent to one caller at a time and comes back when it is done. Not kept: one that reads the
file as it is on disk (the fallback on a full disk, which would never see a later write), one given back
inside a transaction or after an error, and one to a file that is no longer the index's (replaced by a
restored backup, or deleted and rebuilt): the file's identity is checked each time one is lent.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from knowledge.store.connection import is_read_as_is
from knowledge.store.index import Index

FileId = tuple[int, int] | None


def file_id(path: Path) -> FileId:
    """The file's identity (device, inode), None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Readers:
    """Read-only connections to one index file, lent one caller at a time (see the module's docstring)."""

    def __init__(self, path: Path, open_index: Callable[[], Index], *, keep: int = 8) -> None:
        """``open_index`` opens a new read-only connection (IndexMissing when there is no index);
        ``keep``: at most this many idle connections are kept."""
        self.path = path
        self.open_index = open_index
        self.keep = keep
        self._idle: list[tuple[FileId, Index]] = []
        self._lock = threading.Lock()

    @contextmanager
    def borrowed(self) -> Iterator[Index]:
        """A connection of this caller's own until the block ends (IndexMissing when there is no index)."""
        now = file_id(self.path)
        index = self._take(now)
        if index is None:
            index = self.open_index()
        try:
            yield index
        except BaseException:
            index.close()
            raise
        self._give_back(now, index)

    def _take(self, now: FileId) -> Index | None:
        """An idle connection to the file that is the index now (idle ones to another file are closed)."""
        with self._lock:
            stale = [index for was, index in self._idle if was != now or now is None]
            self._idle = [(was, index) for was, index in self._idle if was == now and now is not None]
            index = self._idle.pop()[1] if self._idle else None
        for old in stale:
            old.close()
        return index

    def _give_back(self, opened: FileId, index: Index) -> None:
        if opened is None or index.conn.in_transaction or is_read_as_is(index.conn):
            index.close()
            return
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append((opened, index))
                return
        index.close()

    def close(self) -> None:
        """Close the idle connections (those lent out are closed when they come back)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self.keep = 0
        for _, index in idle:
            index.close()
