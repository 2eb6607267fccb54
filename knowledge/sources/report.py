"""What a source holds, for ``kb sources``, ``kb status`` and ``kb doctor``: its files counted as indexed,
waiting (seen, not yet read: new or changed), skipped and failed, and each file left out with its reason.

A walk (``lstat`` only) against the index's records: read-only, while the daemon works.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from knowledge.errors import IndexError_
from knowledge.sources import state
from knowledge.sources.plan import plan
from knowledge.sources.registry import Source
from knowledge.sources.rules import Rules
from knowledge.sources.scan import scan
from knowledge.store.index import Index


@dataclass(frozen=True)
class Item:
    """A file (or a folder: its path ends in '/') not indexed, and why."""

    path: str
    state: str  # skipped | failed
    reason: str
    rule: str = ""
    message: str = ""


@dataclass(frozen=True)
class SourceReport:
    """One source as it is now."""

    name: str
    path: str
    root: str  # where a linked source folder leads (the same as path otherwise)
    is_present: bool
    include: list[str]
    exclude: list[str]
    counts: dict[str, int]
    items: list[Item] = field(default_factory=list)

    def as_json(self) -> dict:
        """The report as ``kb sources --json`` prints it."""
        return asdict(self)


def report(source: Source, conn: sqlite3.Connection | None) -> SourceReport:
    """Walk a source and compare it with the index's records (``conn`` None: nothing indexed yet)."""
    root = source.root
    base = dict(name=source.name, path=str(source.path), root=str(root), include=list(source.include),
                exclude=list(source.exclude))  # fmt: skip
    known = state.known(conn, source.name) if conn is not None and state.has_table(conn) else {}
    if not root.is_dir():
        counts = {"indexed": 0, "waiting": 0, "skipped": 0, "failed": 0}
        return SourceReport(**base, is_present=False, counts=counts)  # type: ignore[arg-type]
    found = scan(root, Rules(source.include, source.exclude))
    documents = state.document_ids(conn, source.name) if conn is not None and known else set()
    steps = plan(known, found.seen, documents)
    items = [Item(x.path, "skipped", x.reason, x.rule) for x in found.left_out]
    items += [
        Item(folder, "failed", "unreadable", message=error) for folder, error in found.unreadable.items()
    ]
    waiting = set()
    for path in steps.to_read:  # a failed read tried again at every walk is failed until it changes
        k, now = known.get(path), found.seen[path]
        if k is not None and k.status == "failed" and (k.size, k.mtime_ns) == (now.size, now.mtime_ns):
            items.append(Item(path, "failed", k.reason or "", message=k.message or ""))
        else:
            waiting.add(path)
    for path in steps.unchanged:
        k = known[path]
        if k.status != "indexed":
            items.append(Item(path, k.status, k.reason or "", message=k.message or ""))
    items.sort(key=lambda i: i.path)
    counts = {
        "indexed": sum(1 for p in steps.unchanged if known[p].status == "indexed"),
        "waiting": len(waiting),
        "skipped": sum(1 for i in items if i.state == "skipped"),
        "failed": sum(1 for i in items if i.state == "failed"),
    }
    return SourceReport(**base, is_present=True, counts=counts, items=items)  # type: ignore[arg-type]


def reports(index_path: Path, sources: Sequence[Source]) -> list[SourceReport]:
    """Each source as it is now (read-only: the index is opened for reading, when there is one)."""
    try:
        index = Index(index_path, readonly=True)
    except IndexError_:
        return [report(s, None) for s in sources]
    with index:
        return [report(s, index.conn) for s in sources]
