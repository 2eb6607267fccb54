"""A source's documents brought in line with its files, read in place and never written.

A file is its document by (source, relative path): an edit replaces the text and chunks (a chunk whose
text is unchanged keeps its vector); the same bytes at a new path (a rename or a move, however it was
seen) keep the document, its chunks and vectors, and only its path changes; a file gone is forgotten
(removed from the index; nothing goes to kb's trash: the file is the owner's). A file whose size and
mtime are those kb read last is not opened again, so a restart over unchanged files reads nothing.

Each file's document and kb's record of the file are written in one transaction: a kill at any point
leaves each file indexed once or not yet, and the next scan finishes the work.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import structlog

from knowledge.convert import Converted, convert_source
from knowledge.errors import ConversionError, ConversionInterrupted
from knowledge.ingest import raw as rawfile
from knowledge.ingest.chunking import chunk_lines
from knowledge.ingest.pipeline import Ingestor, log_front_matter
from knowledge.ingest.rawsync import chunk_records, note_lines
from knowledge.ingest.safepath import LinkRefused, open_beneath
from knowledge.sources import state
from knowledge.sources.plan import RETRIED, Known, first_line, is_unchanged, match_moves, plan
from knowledge.sources.registry import Source
from knowledge.sources.rules import Rules
from knowledge.sources.scan import Seen, has_link_parent, look, scan
from knowledge.store.records import ChunkRecord, DocumentRecord
from knowledge.text import clean_text

log = structlog.get_logger()

READ_ATTEMPTS = 3  # a file that changes under every read is left for the next rescan


@dataclass
class Tally:
    """What one sync did, by outcome (``indexed`` counts files read and indexed anew)."""

    indexed: int = 0
    moved: int = 0
    forgotten: int = 0
    unchanged: int = 0
    touched: int = 0  # same bytes, new mtime: only the record changed
    skipped: int = 0
    failed: int = 0
    paths: list[str] = field(default_factory=list)  # the paths indexed, moved or forgotten
    whole: bool = True  # the walk saw the whole folder (not missing, no folder it could not list)
    missing: bool = False  # the folder is not there (moved away, a disk unplugged): nothing was walked

    def add(self, outcome: str, path: str) -> None:
        """Count one file's outcome."""
        setattr(self, outcome, getattr(self, outcome) + 1)
        if outcome in ("indexed", "moved", "forgotten"):
            self.paths.append(path)


@dataclass(frozen=True)
class _Read:
    data: bytes
    sha256: str
    seen: Seen


class _Problem(Exception):
    def __init__(self, reason: str, message: str, seen: Seen | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.seen = reason, message, seen


Progress = Callable[[int, int], None]


class SourceSync:
    """Syncs folder sources into the index of an Ingestor (its settings, counter, converter runner)."""

    def __init__(self, ingestor: Ingestor) -> None:
        self.ingestor = ingestor
        self.index = ingestor.index

    # -- whole sources ---------------------------------------------------------------------

    def sync_source(self, source: Source, *, progress: Progress | None = None, again: bool = False) -> Tally:
        """Walk a source and bring every file's document in line (start-up, rescans, kb sources add);
        ``again``: read every file again, changed or not (kb reindex: its passages cut as kb cuts them now)."""
        tally = Tally()
        root = source.root
        if not root.is_dir():  # an unmounted disk, a renamed folder: its documents stay until it is removed
            log.warning("sources.missing", source=source.name, path=str(source.path))
            tally.whole, tally.missing = False, True
            return tally
        found = scan(root, Rules(source.include, source.exclude))
        conn = self.index.conn
        known = state.known(conn, source.name)
        steps = plan(known, found.seen, set() if again else state.document_ids(conn, source.name))
        tally.unchanged = len(steps.unchanged)
        # What sits under a folder that could not be read now is not gone: it stays as it was.
        tally.whole = not found.unreadable
        gone = {p: known[p] for p in steps.gone if not found.unseen(p)}
        self._apply(
            source,
            root,
            steps.to_read,
            gone,
            known,
            found.seen,
            tally,
            progress,
            may_move=bool(gone),
            again=again,
        )
        log.info("sources.synced", source=source.name, files=len(found.seen), **_fields(tally))
        return tally

    def sync_paths(self, source: Source, paths: Iterable[str]) -> Tally:
        """Bring these files of a source in line (what the watcher saw change: edits, moves, deletes)."""
        tally = Tally()
        root = source.root
        rules = Rules(source.include, source.exclude)
        wanted = sorted(set(paths))
        known = state.known(self.index.conn, source.name, wanted)
        seen: dict[str, Seen] = {}
        gone: dict[str, Known] = {}
        for rel in wanted:
            verdict, what = (None, None) if has_link_parent(root, rel) else look(root, rel, rules)
            if verdict is None and isinstance(what, Seen):
                seen[rel] = what
            elif rel in known and what != "folder":  # deleted, moved away, or left out by a rule now
                gone[rel] = known[rel]
        documents = {
            k.doc_id for k in known.values() if k.doc_id and self.index.document(k.doc_id) is not None
        }
        to_read = [p for p in seen if not (p in known and is_unchanged(known[p], seen[p], documents))]
        tally.unchanged = len(seen) - len(to_read)
        self._apply(source, root, to_read, gone, known, seen, tally, None)
        if tally.paths:
            log.info("sources.changed", source=source.name, **_fields(tally))
        return tally

    def forget_source(self, name: str) -> int:
        """Forget every document and record of a source (its files are left as they are)."""
        conn = self.index.conn
        known = state.known(conn, name)
        ids = {k.doc_id for k in known.values() if k.doc_id} | state.document_ids(conn, name)
        for doc_id in sorted(ids):
            self.index.delete_document(doc_id)
        with self.index.write() as c:
            c.execute("DELETE FROM source_files WHERE source = ?", (name,))
        log.info("sources.forgotten", source=name, documents=len(ids))
        return len(ids)

    # -- the work --------------------------------------------------------------------------

    def _apply(
        self,
        source: Source,
        root: Path,
        to_read: list[str],
        gone: dict[str, Known],
        known: dict[str, Known],
        seen: dict[str, Seen],
        tally: Tally,
        progress: Progress | None,
        *,
        may_move: bool = True,
        again: bool = False,
    ) -> None:
        # The new paths' bytes first: a new path holding a known file's bytes is that file, moved. A walk
        # that found nothing gone has nothing moved (a first walk reads each file once).
        fresh: dict[str, tuple[str, Seen]] = {}
        for rel in to_read if may_move else ():
            if rel not in known:
                try:
                    fresh[rel] = _hash(root, rel)
                except _Problem:
                    continue  # read again below, where its problem is recorded
        away = dict(gone)
        for sha, _ in fresh.values():
            for k in state.with_sha256(self.index.conn, source.name, sha):
                if k.path not in seen and k.path not in away and not os.path.lexists(root / k.path):
                    away[k.path] = k  # its old path went unseen (an event lost, a rename between scans)
        moves = match_moves({rel: sha for rel, (sha, _) in fresh.items()}, away)
        total = len(to_read) + len(gone)
        for n, rel in enumerate(to_read, 1):
            self.ingestor.check_index()
            if rel in moves:
                old = away.pop(moves[rel])
                gone.pop(old.path, None)
                self._move(source, old, rel, fresh[rel][1])
                tally.add("moved", rel)
            else:
                tally.add(self._sync_file(source, root, rel, known.get(rel), seen.get(rel), again=again), rel)
            if progress:
                progress(n, total)
        for n, (rel, k) in enumerate(sorted(gone.items()), len(to_read) + 1):
            self._forget(source, k)
            tally.add("forgotten", rel)
            if progress:
                progress(n, total)

    def _sync_file(
        self, source: Source, root: Path, rel: str, k: Known | None, seen: Seen | None, *, again: bool = False
    ) -> str:
        """Read one file and index it (or record why not): 'indexed', 'touched', 'skipped' or 'failed';
        ``again``: index it even when its bytes are those already indexed, and keep its document as it
        is when it cannot be read or converted now."""
        has_document = k is not None and k.doc_id is not None and self.index.document(k.doc_id) is not None
        try:
            read = _read(root, rel, self.ingestor.limits.max_source_bytes)
        except _Problem as problem:
            problem.seen = problem.seen or seen  # as the walk saw it: kb sources tells it from a new change
            if again and has_document:
                return _kept(source, rel, problem)
            return self._record_problem(source, rel, k, problem)
        if not again and k is not None and k.status == "indexed" and k.sha256 == read.sha256 and has_document:
            with self.index.write() as conn:  # the same bytes, touched: nothing to read again
                state.put(conn, source.name, _known(rel, read, "indexed", k.doc_id), at=self._now())
            return "touched"
        try:
            converted = convert_source(
                read.data,
                name=PurePosixPath(rel).name,
                limits=self.ingestor.limits,
                runner=self.ingestor.runner,
                ocr=self.ingestor.ocr,
            )
        except ConversionInterrupted:
            raise
        except ConversionError as exc:
            problem = _Problem(exc.reason, str(exc), read.seen)
            if again and has_document:
                return _kept(source, rel, problem)
            return self._record_problem(source, rel, k, problem, sha256=read.sha256)
        log_front_matter(f"{source.name}:{rel}", converted)
        doc_id = self._doc_id(source.name, rel, k)
        doc, chunks = self._rows(source.name, rel, doc_id, read, converted)

        def remember(conn: sqlite3.Connection) -> None:
            state.put(conn, source.name, _known(rel, read, "indexed", doc_id), at=self._now())

        self.index.upsert_document(doc, chunks, also=remember)
        log.info("sources.indexed", source=source.name, file=rel, doc_id=doc_id, chunks=len(chunks))
        return "indexed"

    def _rows(
        self, name: str, rel: str, doc_id: str, read: _Read, converted: Converted
    ) -> tuple[DocumentRecord, list[ChunkRecord]]:
        """The document and chunk rows of a converted file; lines numbered as in the file itself."""
        markdown = clean_text(converted.markdown)
        title = clean_text(converted.title)
        start = 1
        if converted.converter in ("markdown", "text"):
            start = first_line(read.data.decode("utf-8", errors="replace"), markdown)
        settings = self.ingestor.settings
        lines, note = note_lines(
            markdown.rstrip("\n").split("\n"), converted.converter, aliases=converted.aliases,
            description=converted.description, tags=converted.tags, dates=converted.dates,
        )  # fmt: skip
        pieces = chunk_lines(
            lines,
            self.ingestor.counter,
            max_tokens=settings.chunk_max_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            first_line=start,
        )
        chunks = chunk_records(doc_id, pieces)
        doc = DocumentRecord(
            id=doc_id,
            raw_path=state.raw_path(name, rel),
            title=title,
            source_name=PurePosixPath(rel).name,
            source_url=None,
            source_snapshot=None,
            source_sha256=read.sha256,
            converter=converted.converter,
            raw_sha256=rawfile.sha256_hex(markdown.encode("utf-8")),
            chunk_count=len(chunks),
            indexed_at=self._now(),
            note=note,
        )
        return doc, chunks

    def _now(self) -> str:
        return self.ingestor.clock().isoformat(timespec="seconds")

    def _doc_id(self, name: str, rel: str, k: Known | None) -> str:
        """The file's document id: the one it has, else a new one no other document holds."""
        conn = self.index.conn
        existing = (k.doc_id if k else None) or state.document_for(conn, state.raw_path(name, rel))
        if existing:
            return existing
        n = 0
        while True:
            candidate = rawfile.document_id(f"sources/{name}/{rel}" + (f"#{n}" if n else ""))
            if self.index.document(candidate) is None:
                return candidate
            n += 1

    def _move(self, source: Source, old: Known, rel: str, seen: Seen) -> None:
        """The same bytes at a new path: the document follows its file; nothing is read or embedded."""

        def move(conn: sqlite3.Connection) -> None:
            state.drop(conn, source.name, old.path)
            state.put(conn, source.name, Known(rel, seen.size, seen.mtime_ns, old.sha256, "indexed", old.doc_id),
                      at=self._now())  # fmt: skip
            state.move_document(
                conn, old.doc_id or "", state.raw_path(source.name, rel), PurePosixPath(rel).name
            )

        with self.index.write() as conn:
            move(conn)
        log.info("sources.moved", source=source.name, file=rel, was=old.path, doc_id=old.doc_id)

    def _forget(self, source: Source, k: Known) -> None:
        """A file gone from its source: its document leaves the index (not for the trash: the file was
        the owner's, and kb never kept a copy)."""

        def drop(conn: sqlite3.Connection) -> None:
            state.drop(conn, source.name, k.path)

        if k.doc_id:
            self.index.delete_document(k.doc_id, also=drop)
        else:
            with self.index.write() as conn:
                drop(conn)
        log.info("sources.forgotten_file", source=source.name, file=k.path, doc_id=k.doc_id)

    def _record_problem(
        self, source: Source, rel: str, k: Known | None, problem: _Problem, *, sha256: str | None = None
    ) -> str:
        """A file kb cannot index now: its document (if it had one) goes, and the reason is kept."""
        # Failed: worth trying again (a read that failed, a conversion that ran out of time or broke);
        # skipped: what kb cannot read meaningfully, said with its reason and left alone while unchanged.
        is_failure = problem.reason in RETRIED or "timeout" in problem.reason or "internal" in problem.reason
        status = "failed" if is_failure else "skipped"
        seen = problem.seen or Seen(-1, -1)
        record = Known(rel, seen.size, seen.mtime_ns, sha256, status, None, problem.reason, problem.message)

        def remember(conn: sqlite3.Connection) -> None:
            state.put(conn, source.name, record, at=self._now())

        if k is not None and k.doc_id:
            self.index.delete_document(k.doc_id, also=remember)
        else:
            with self.index.write() as conn:
                remember(conn)
        log.warning(
            "sources.not_indexed", source=source.name, file=rel, reason=problem.reason, error=problem.message
        )
        return status


def _kept(source: Source, rel: str, problem: _Problem) -> str:
    """A file read again (kb reindex) that cannot be read or converted now: its document and record stay
    as they were, the failure is told."""
    log.warning("sources.kept", source=source.name, file=rel, reason=problem.reason, error=problem.message)
    return "failed"


def _known(rel: str, read: _Read, status: str, doc_id: str | None) -> Known:
    return Known(rel, read.seen.size, read.seen.mtime_ns, read.sha256, status, doc_id)


def _fields(t: Tally) -> dict[str, int]:
    return {
        k: getattr(t, k)
        for k in ("indexed", "moved", "forgotten", "unchanged", "touched", "skipped", "failed")
    }


def _open(root: Path, rel: str) -> int:
    """A read-only descriptor for a source's file: through real folders only, never a link, never a FIFO."""
    try:
        fd = open_beneath(root, root / rel, os.O_RDONLY | os.O_NONBLOCK)
    except LinkRefused as exc:
        raise _Problem("link", f"{exc.part} is a symbolic link; kb does not follow it") from exc
    except FileNotFoundError as exc:
        raise _Problem("unreadable", "the file is gone") from exc
    except OSError as exc:
        raise _Problem("unreadable", exc.strerror or str(exc)) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _Problem("not-regular", "not a regular file")
    return fd


def _read(root: Path, rel: str, limit: int) -> _Read:
    """A file's bytes, read again while it changes under the read (never half a note)."""
    for _ in range(READ_ATTEMPTS):
        fd = _open(root, rel)
        try:
            before = os.fstat(fd)
            if before.st_size > limit:
                seen = Seen(before.st_size, before.st_mtime_ns)
                raise _Problem("too-large", f"{before.st_size / 2**20:.1f} MiB, over KB_MAX_SOURCE_MB", seen)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(limit + 1)
            after = os.fstat(fd)
        except OSError as exc:
            raise _Problem("unreadable", exc.strerror or str(exc)) from exc
        finally:
            os.close(fd)
        if (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns) and len(
            data
        ) == after.st_size:
            return _Read(data, hashlib.sha256(data).hexdigest(), Seen(after.st_size, after.st_mtime_ns))
    raise _Problem(
        "changing", "the file kept changing while it was read", Seen(after.st_size, after.st_mtime_ns)
    )


def _hash(root: Path, rel: str) -> tuple[str, Seen]:
    """A file's SHA-256 and its size and mtime as read, without keeping its bytes."""
    fd = _open(root, rel)
    try:
        st = os.fstat(fd)
        digest = hashlib.sha256()
        with os.fdopen(os.dup(fd), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest(), Seen(st.st_size, st.st_mtime_ns)
    except OSError as exc:
        raise _Problem("unreadable", exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)
