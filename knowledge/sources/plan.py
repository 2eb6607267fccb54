"""Sync planning, pure: what kb knows of a source's files against what a walk sees; which new files are
known files moved (the same SHA-256 at a new path); where a converted note's first line sits in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from knowledge.sources.scan import Seen

# Reasons a failed file is read again at every rescan even when its size and mtime have not changed.
RETRIED = frozenset({"unreadable", "changing"})


@dataclass(frozen=True)
class Known:
    """What the index remembers of one file of a source."""

    path: str
    size: int
    mtime_ns: int
    sha256: str | None
    status: str  # indexed | skipped | failed
    doc_id: str | None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Plan:
    """Paths to leave alone, to read (new or changed), and gone from the folder."""

    unchanged: list[str]
    to_read: list[str]
    gone: list[str]


def is_unchanged(known: Known, seen: Seen, documents: set[str]) -> bool:
    """The same size and mtime as when kb read it, its document still there, nothing to try again."""
    if (known.size, known.mtime_ns) != (seen.size, seen.mtime_ns):
        return False
    if known.status == "indexed":
        return known.doc_id in documents
    return known.reason not in RETRIED


def plan(known: Mapping[str, Known], seen: Mapping[str, Seen], documents: set[str]) -> Plan:
    """Compare a walk with what is known; ``documents`` are the ids the index holds (a file whose
    document went, by a rebuild or a restore, is read again)."""
    unchanged, to_read = [], []
    for path in sorted(seen):
        k = known.get(path)
        (unchanged if k is not None and is_unchanged(k, seen[path], documents) else to_read).append(path)
    gone = sorted(p for p in known if p not in seen)
    return Plan(unchanged, to_read, gone)


def match_moves(new: Mapping[str, str], gone: Mapping[str, Known]) -> dict[str, str]:
    """New path → the gone path it was moved from: the same SHA-256, paired in path order."""
    by_sha: dict[str, list[str]] = {}
    for path in sorted(gone):
        k = gone[path]
        if k.status == "indexed" and k.sha256:
            by_sha.setdefault(k.sha256, []).append(path)
    moves: dict[str, str] = {}
    for path in sorted(new):
        olds = by_sha.get(new[path])
        if olds:
            moves[path] = olds.pop(0)
    return moves


def first_line(original: str, markdown: str, *, probe: int = 5) -> int:
    """The line of ``original`` (the file as written) where the converted ``markdown`` begins: a note's
    front matter and leading blank lines are not its text, and citations give the file's own lines."""
    theirs = [line.rstrip() for line in original.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    ours = [line.rstrip() for line in markdown.split("\n")]
    head = ours[: min(probe, len(ours))]
    if not head:
        return 1
    for k in range(len(theirs) - len(head) + 1):
        if theirs[k : k + len(head)] == head:
            return k + 1
    return 1
