"""When is a file in the inbox complete? When its size and mtime hold still for a settle time.

Watch events only say "this path may have changed". The tracker remembers such paths in
arrival order and, each time it is asked, compares a fresh ``lstat`` signature with the last
one: a file that is still being written keeps changing and keeps waiting; one that held still
for ``settle_s`` is ready, exactly once. The tracker does no I/O itself: the caller passes the
stat function and the time, so it is tested with a fake clock and fake signatures.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# (size, mtime_ns) of a regular file; NOT_REGULAR for links, FIFOs, sockets, folders; None when gone.
Signature = tuple[int, int]
NOT_REGULAR = (-1, -1)


def lstat_signature(path: Path) -> Signature | None:
    """The file's (size, mtime_ns) without following links; NOT_REGULAR for anything but a file."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR
    return st.st_size, st.st_mtime_ns


@dataclass
class _Pending:
    seq: int
    signature: Signature | None
    since: float


@dataclass(frozen=True)
class Check:
    """What one pass found: paths ready (arrival order), gone, and not regular files."""

    ready: list[Path]
    gone: list[Path]
    not_regular: list[Path]


class StabilityTracker:
    """Paths that may have changed, kept in arrival order until they hold still (thread-safe)."""

    def __init__(self, settle_s: float) -> None:
        self.settle_s = settle_s
        self._pending: dict[Path, _Pending] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def touch(self, path: Path, now: float) -> None:
        """Note that path may have changed: its settle time starts again."""
        with self._lock:
            entry = self._pending.get(path)
            if entry is None:
                self._pending[path] = _Pending(next(self._seq), None, now)
            else:
                entry.since = now

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def check(self, now: float, signature: Callable[[Path], Signature | None] = lstat_signature) -> Check:
        """Stat every pending path once; hand out those that held still and forget them."""
        with self._lock:
            pending = sorted(self._pending.items(), key=lambda item: item[1].seq)
        ready: list[Path] = []
        gone: list[Path] = []
        not_regular: list[Path] = []
        for path, entry in pending:
            if entry.signature is not None and now - entry.since < self.settle_s:
                continue  # seen already and not due yet: a change in between brings an event anyway
            current = signature(path)
            with self._lock:
                if self._pending.get(path) is not entry:
                    continue
                if current is None:
                    del self._pending[path]
                    gone.append(path)
                elif current == NOT_REGULAR:
                    del self._pending[path]
                    not_regular.append(path)
                elif current != entry.signature:
                    entry.signature, entry.since = current, max(entry.since, now)
                elif now - entry.since >= self.settle_s:
                    del self._pending[path]
                    ready.append(path)
        return Check(ready, gone, not_regular)
