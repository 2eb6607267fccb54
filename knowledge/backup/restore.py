"""``kb backup --verify ARCHIVE`` and ``kb restore-backup ARCHIVE --home DIR``.

Both read an archive twice. First its headers and its manifest, writing nothing (survey.py): every
member a plain regular file under a plain relative path, within the member-count and size caps and
the free space, exactly the files the manifest lists at its sizes. Then every member once, in order,
hashing it (and writing it, or only the SQLite copies): each must be what the first pass saw and
have the SHA-256 its manifest lists (tar's data filter too). The SQLite copies then pass SQLite's
integrity check, and the index FTS5's own check too. A refusal names the file.

Restoring writes into a hidden folder beside DIR and renames it to DIR only once all of this holds,
so DIR never holds half a knowledge base. Before the rename, the documents removed while the backup
ran are put back (see :func:`settle_removals`): the restored knowledge base holds every document that
was indexed when the backup began, each with its raw file and original.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog

from knowledge.backup.archive import (
    MANIFEST_MAX_BYTES,
    MANIFEST_NAME,
    PIECE_BYTES,
    Entry,
    Member,
    read_members,
)
from knowledge.backup.errors import BackupError, write_error
from knowledge.backup.snapshot import IndexFacts, check_problems, index_facts
from knowledge.backup.stopping import stopped_by_signals
from knowledge.backup.survey import DEFAULT_LIMITS, Limits, Survey, existing_folder, refuse_named, survey
from knowledge.ingest.files import unique_name
from knowledge.ingest.sidecar import sidecar_path
from knowledge.ingest.trash import with_snapshot
from knowledge.sources.state import split_raw_path
from knowledge.store.index import Index

log = structlog.get_logger()

PROCESSED = "inbox/processed/"  # how a document's source_snapshot names its original
TRASH_MANIFEST_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Verified:
    """An archive found whole: what it holds."""

    archive: Path
    files: int
    bytes: int
    index: IndexFacts
    created_at: str
    kb_version: str
    manifest: dict


@dataclass(frozen=True)
class Settled:
    """The documents of the index copy whose removal during the backup was undone, and those with
    no raw file anywhere in the archive (taken out of the restored index)."""

    put_back: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Restored:
    """A knowledge base rebuilt from an archive."""

    home: Path
    verified: Verified
    settled: Settled
    seconds: float


# -- verifying ----------------------------------------------------------------------------------


def verify(archive: Path, *, limits: Limits = DEFAULT_LIMITS) -> Verified:
    """Check every file of an archive and its index copy without restoring it; BackupError naming
    the file for anything wrong. Its headers and manifest are checked before anything is written."""
    archive = Path(os.path.abspath(archive))
    try:
        with stopped_by_signals():
            room = Path(tempfile.gettempdir())
            planned = survey(archive, room=room, is_written=_is_database, limits=limits)
            with tempfile.TemporaryDirectory(prefix="kb-verify-") as scratch:
                try:
                    found = _read_checked(archive, Path(scratch), planned, keep_all=False)
                except OSError as exc:  # the scratch copy of the index could not be written
                    raise write_error(f"a scratch copy in {scratch}", exc) from exc
    except BackupError as exc:
        _refused(archive, exc, "verify")
        raise
    log.info(
        "backup.verified", archive=str(archive), files=found.files, mb=round(found.bytes / 1e6, 1),
        documents=found.index.documents, chunks=found.index.chunks, created_at=found.created_at,
    )  # fmt: skip
    return found


def _is_database(name: str) -> bool:
    return name.endswith(".sqlite3")


def _refused(archive: Path, exc: BackupError, doing: str) -> None:
    log.warning(
        "backup.refused",
        archive=str(archive),
        doing=doing,
        reason=exc.reason,
        member=exc.member,
        error=str(exc),
    )


def _read_checked(archive: Path, into: Path, planned: Survey, *, keep_all: bool) -> Verified:
    """The second pass: read every member once into ``into`` (all of them, or only the SQLite copies),
    each as the survey saw it, then check them against the manifest and run the database checks."""
    seen: dict[str, Entry] = {}
    is_manifest_seen = False

    def changed(name: str) -> BackupError:
        return BackupError(
            "changed", f"{archive} changed while it was read (at {name}); read it again", member=name
        )

    for member in read_members(archive, scratch=into):
        if member.name == MANIFEST_NAME:
            if is_manifest_seen or member.fh.read(MANIFEST_MAX_BYTES + 1) != planned.manifest_data:
                raise changed(member.name)
            is_manifest_seen = True
            continue
        if member.name in seen or planned.sizes.get(member.name) != member.size:
            raise changed(member.name)
        kept = keep_all or _is_database(member.name)
        seen[member.name] = _consume(member, into / member.name if kept else None)
    if not is_manifest_seen or len(seen) != len(planned.sizes):
        raise changed(MANIFEST_NAME)
    manifest = planned.manifest
    _compare(archive, manifest["files"], seen)
    databases = manifest.get("databases", {})
    for name, kind in databases.items():
        if name not in seen:
            continue
        problems = check_problems(into / name, fts_table="chunks_fts" if kind == "index" else None)
        if problems:
            raise BackupError(
                "index-damaged",
                f"{archive}: {name} fails SQLite's integrity check ({'; '.join(problems[:3])})",
                member=name,
            )
    index_name = manifest["index"]["path"]
    if index_name not in seen:
        raise BackupError(
            "missing", f"{archive} holds no index copy ({index_name or 'not named'})", member=index_name
        )
    conn = sqlite3.connect(f"{(into / index_name).absolute().as_uri()}?mode=ro", uri=True)
    try:
        facts = index_facts(conn)
    except sqlite3.DatabaseError as exc:
        raise BackupError(
            "index-damaged", f"{archive}: {index_name} is not a kb index ({exc})", member=index_name
        ) from exc
    finally:
        conn.close()
    return Verified(
        archive, len(seen), sum(e.size for e in seen.values()), facts,
        str(manifest.get("created_at", "")), str(manifest.get("kb_version", "")), manifest,
    )  # fmt: skip


def _consume(member: Member, target: Path | None) -> Entry:
    """Read a member to its end (no more than the size in its header), hashing it, and write it to
    ``target`` when given (a new file)."""
    digest, size = hashlib.sha256(), 0
    out = None
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = (member.mode & 0o755) | 0o600  # never writable by others, always by its owner
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.fdopen(os.open(target, flags, mode), "wb")
    try:
        while piece := member.fh.read(min(PIECE_BYTES, member.size - size + 1)):
            size += len(piece)
            if size > member.size:  # a folder archive's file that grew since it was listed
                raise BackupError(
                    "changed",
                    f"{member.name} grew while it was read; read the archive again",
                    member=member.name,
                )
            digest.update(piece)
            if out is not None:
                out.write(piece)
    finally:
        if out is not None:
            out.close()
    if target is not None:
        os.utime(target, (member.mtime, member.mtime))
    return Entry(size, digest.hexdigest())


def _compare(archive: Path, listed: dict, seen: dict[str, Entry]) -> None:
    """Refuse, naming them, files whose size or SHA-256 is not the manifest's."""
    changed = []
    for name, entry in seen.items():
        want = listed[name]
        if want["size"] != entry.size:
            changed.append(f"{name} (size {entry.size:,} bytes, the manifest says {want['size']:,})")
        elif want["sha256"] != entry.sha256:
            changed.append(f"{name} (its SHA-256 differs from the manifest's)")
    refuse_named(archive, "changed", changed, "is not the file that was backed up")


# -- restoring ----------------------------------------------------------------------------------


def restore(archive: Path, home: Path, *, limits: Limits = DEFAULT_LIMITS) -> Restored:
    """Rebuild a knowledge base in ``home`` (new, or empty but for kb's own runs/logs/) from an archive,
    verified first; BackupError (nothing written to home) when it is refused. Its headers and manifest
    are checked before anything is written."""
    t0 = time.perf_counter()
    archive, home = Path(os.path.abspath(archive)), Path(os.path.abspath(home))
    try:
        with stopped_by_signals():
            check_home(home)
            planned = survey(
                archive, room=existing_folder(home.parent), is_written=lambda _: True, limits=limits
            )
            try:
                home.parent.mkdir(parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=f".{home.name}.restoring-", dir=home.parent))
            except OSError as exc:
                raise write_error(str(home), exc) from exc
            try:
                verified = _read_checked(archive, staging, planned, keep_all=True)
                settled = settle_removals(staging)
                _move_into(staging, home)
            except OSError as exc:
                raise write_error(str(home), exc) from exc
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except BackupError as exc:
        _refused(archive, exc, "restore")
        raise
    done = Restored(home, verified, settled, time.perf_counter() - t0)
    log.info(
        "backup.restored", archive=str(archive), home=str(home), files=verified.files,
        documents=verified.index.documents - len(settled.missing), chunks=verified.index.chunks,
        put_back=settled.put_back[:20], missing=settled.missing[:20], seconds=round(done.seconds, 1),
    )  # fmt: skip
    return done


def check_home(home: Path) -> None:
    """Refuse a home that holds anything (but kb's own log, which this very command may have opened)."""
    if not os.path.lexists(home):
        return
    if not home.is_dir():
        raise BackupError(
            "home-not-empty", f"{home} exists and is not a folder; restore into a new or empty folder"
        )
    for here, dirs, files in os.walk(home):
        rel = Path(here).relative_to(home)
        for name in sorted(dirs + files):
            inside = (rel / name).as_posix()
            if inside not in ("runs", "runs/logs") and not inside.startswith("runs/logs/"):
                raise BackupError(
                    "home-not-empty",
                    f"{home} is not empty (it holds {inside}); restore into a new or empty folder",
                )


def _move_into(staging: Path, home: Path) -> None:
    """Give the restored tree its place: a rename when home is new or empty."""
    with contextlib.suppress(OSError):
        os.rmdir(home)  # empty: taken by the rename below; else it holds runs/logs/ only
    if not os.path.lexists(home):
        os.rename(staging, home)
        return
    for child in sorted(staging.iterdir()):
        if child.name == "runs" and (home / "runs").is_dir():
            for item in sorted(child.iterdir()):
                os.rename(item, home / "runs" / item.name)
        else:
            os.rename(child, home / child.name)


# -- documents removed while the backup ran ------------------------------------------------------


@dataclass(frozen=True)
class _TrashEntry:
    folder: Path
    doc_id: str
    raw_name: str
    original: str | None
    removed_at: datetime
    source_sha256: str


def settle_removals(home: Path) -> Settled:
    """Put back, in a restored home, the documents that the index copy holds but that were removed
    while the backup ran (the daemon moved their files to the trash after the snapshot), and take
    out of the index copy a document whose raw file is nowhere in the archive.

    A trash entry is such a removal when it is of the same document (id, raw name, source bytes) and
    was made after the document was indexed: its raw file goes back to raw/ and its original to
    inbox/processed/ (unless the copies there, made before the removal, are already those), and the
    entry goes. An entry of an earlier removal (the same file added again since) is left alone.
    """
    index_path = home / "knowledge" / "index" / "kb.sqlite3"
    raw, processed = home / "knowledge" / "raw", home / "knowledge" / "inbox" / "processed"
    conn = sqlite3.connect(index_path)
    try:
        docs = conn.execute(
            "SELECT id, raw_path, source_snapshot, source_sha256, indexed_at FROM documents"
        ).fetchall()
    finally:
        conn.close()
    entries: dict[str, list[_TrashEntry]] = {}
    for entry in _trash_entries(home / "knowledge" / "trash"):
        entries.setdefault(entry.doc_id, []).append(entry)
    put_back: list[str] = []
    missing: list[str] = []
    renamed: dict[str, str] = {}  # doc id → its original's new name under processed/
    for doc_id, raw_path, snapshot, source_sha256, indexed_at in docs:
        if split_raw_path(raw_path) is not None:  # a folder source's: indexed where it is, never archived
            continue  # kept; the source's next scan brings it up to date (or keeps it while the folder is away)
        name = raw_path.removeprefix("raw/")
        removals = _removals_of(entries.get(doc_id, []), name, source_sha256, indexed_at)
        has_raw = os.path.lexists(raw / name)
        if not removals:
            if not has_raw:
                missing.append(doc_id)
            continue
        moved = not has_raw
        if not has_raw:
            found = next(
                (e.folder / "raw" / name for e in removals if (e.folder / "raw" / name).is_file()), None
            )
            if found is None:
                missing.append(doc_id)
                continue
            raw.mkdir(parents=True, exist_ok=True)
            os.rename(found, raw / name)
        original = snapshot.removeprefix(PROCESSED) if (snapshot or "").startswith(PROCESSED) else None
        if original is not None and _is_plain(original):
            back, new_name = _original_back(processed, original, source_sha256, removals)
            moved = moved or back
            if new_name is not None:
                text = (raw / name).read_text(encoding="utf-8", errors="surrogateescape")
                (raw / name).write_text(
                    with_snapshot(text, PROCESSED + new_name), encoding="utf-8", errors="surrogateescape"
                )
                renamed[doc_id] = new_name
        for entry in removals:
            if _holds_nothing_else(entry, raw / name, source_sha256):
                shutil.rmtree(entry.folder)
                moved = True
        if moved:
            put_back.append(doc_id)
    if missing or renamed:
        with Index(index_path) as index:
            for doc_id in missing:
                index.delete_document(doc_id)
            for doc_id, new_name in renamed.items():  # its raw file names it so too (rewritten above)
                index.conn.execute(
                    "UPDATE documents SET source_snapshot = ? WHERE id = ?", (PROCESSED + new_name, doc_id)
                )
            index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Settled(put_back, missing)


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def _removals_of(
    candidates: list[_TrashEntry], raw_name: str, source_sha256: str, indexed_at: str
) -> list[_TrashEntry]:
    """The trash entries that removed this document after it was indexed, the latest first."""
    try:
        indexed = datetime.fromisoformat(indexed_at)
    except (TypeError, ValueError):
        return []
    found = [
        e for e in candidates
        if e.raw_name == raw_name and e.source_sha256 == source_sha256 and _is_later(e.removed_at, indexed)
    ]  # fmt: skip
    return sorted(found, key=lambda e: e.removed_at, reverse=True)


def _is_later(removed: datetime, indexed: datetime) -> bool:
    try:
        return removed >= indexed
    except TypeError:  # one aware, one naive: not kb's own stamps
        return False


def _original_back(
    processed: Path, original: str, source_sha256: str, removals: list[_TrashEntry]
) -> tuple[bool, str | None]:
    """Bring a document's original (and sidecar) back to processed/ from a removal of it, unless
    processed/ holds it already: whether it moved, and its new name when another file took its name
    meanwhile."""
    target = processed / original
    if os.path.lexists(target) and _sha256(target) == source_sha256:
        return False, None  # copied from processed/ before it was removed
    for entry in removals:
        src = entry.folder / "original" / (entry.original or "")
        if entry.original is None or not src.is_file() or _sha256(src) != source_sha256:
            continue
        new_name = unique_name(processed, original) if os.path.lexists(target) else original
        processed.mkdir(parents=True, exist_ok=True)
        os.rename(src, processed / new_name)
        side = sidecar_path(src)
        if side.is_file() and not os.path.lexists(sidecar_path(processed / new_name)):
            os.rename(side, sidecar_path(processed / new_name))
        return True, None if new_name == original else new_name
    return False, None


def _holds_nothing_else(entry: _TrashEntry, raw_file: Path, source_sha256: str) -> bool:
    """Does this removal's entry hold nothing but copies of what is back in place (or nothing)?"""
    its_raw = entry.folder / "raw" / entry.raw_name
    if its_raw.is_file() and _sha256(its_raw) != _sha256(raw_file):
        return False
    its_original = entry.folder / "original" / (entry.original or "")
    return entry.original is None or not its_original.is_file() or _sha256(its_original) == source_sha256


def _trash_entries(trash: Path) -> list[_TrashEntry]:
    """The trash entries of a restored home whose manifest is readable and sound."""
    found = []
    for folder in sorted(trash.iterdir()) if trash.is_dir() else []:
        try:
            with open(folder / "manifest.json", "rb") as fh:
                data = json.loads(fh.read(TRASH_MANIFEST_MAX_BYTES).decode("utf-8"))
            removed = datetime.fromisoformat(data["removed_at"])
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        raw_name, original = data.get("raw_name"), data.get("original")
        if not (_is_plain(raw_name) and isinstance(data.get("doc_id"), str)):
            continue
        found.append(
            _TrashEntry(
                folder,
                data["doc_id"],
                raw_name,
                original if _is_plain(original) else None,
                removed,
                str(data.get("source_sha256") or ""),
            )  # fmt: skip
        )
    return found


def _is_plain(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\x00" not in name
