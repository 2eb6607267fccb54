"""The trash: removing a document keeps its files for 30 days, and restoring brings it back.

Writer side only (the daemon, or ``kb rm`` / ``kb restore`` under the writer lock). One folder
per removed document::

    knowledge/trash/<trash_id>/manifest.json          what was removed, when, from where
    knowledge/trash/<trash_id>/raw/<raw name>.md      the raw file
    knowledge/trash/<trash_id>/original/<name>        the original from processed/ (+ NAME.source.json)
    knowledge/trash/<trash_id>/age.json               its age as purge has counted it (see purge)

Every step is ordered so that a crash loses nothing. Removing: the manifest, then the raw file,
then the original, then the index rows (a raw file that is gone is dropped from the index by the
daemon's reconciliation anyway). Restoring: the plan (where each file goes) into the manifest,
then the original, then the raw file, then the index, then the folder; a restore cut short is
finished by the next one. So a folder without its raw file holds nothing of value, and is
cleared by :func:`purge`.

Nothing in the trash is trusted to be what kb wrote there: an entry whose folder, ``raw/``,
``original/``, manifest or a file in them is a link (or not a real folder / regular file) is
refused by :func:`restore` and left in place; files are read and moved through real folders only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from knowledge.config import Settings
from knowledge.errors import Refused
from knowledge.ingest.files import is_regular, read_regular, unique_name, write_atomic, write_new
from knowledge.ingest.pipeline import Ingestor
from knowledge.ingest.safepath import LinkRefused, open_beneath
from knowledge.ingest.sidecar import sidecar_path
from knowledge.store.records import IngestRecord

log = structlog.get_logger()

KEEP_DAYS = 30
DAY_S = 86400.0
KEEP_S = KEEP_DAYS * DAY_S
MANIFEST = "manifest.json"
MANIFEST_MAX_BYTES = 64 * 1024
AGE = "age.json"
AGE_MAX_BYTES = 4096
SNAPSHOT_PREFIX = "inbox/processed/"
# Document ids, trash ids and request ids: letters, digits, '-' and '_' only, never a path.
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,80}")


class TrashError(Refused):
    """Removing or restoring a document failed; ``reason`` is a stable code (``tampered``: an entry
    that is not the real folders and files kb wrote, refused and left in place)."""


class NotFound(TrashError):
    """No document with this id (reason ``no-document``), or no trash entry (``no-entry``)."""


class RestoreRefused(TrashError):
    """The same source is in the knowledge base again (reason ``already-indexed``): ``doc_id`` holds it."""

    def __init__(self, message: str, *, doc_id: str, title: str) -> None:
        super().__init__("already-indexed", message)
        self.doc_id = doc_id
        self.title = title


@dataclass(frozen=True)
class Trashed:
    """A removed document, as its trash entry records it."""

    trash_id: str
    doc_id: str
    title: str
    removed_at: str  # ISO 8601, UTC
    raw_name: str  # its name under raw/ when it was removed
    original: str | None  # its original's name under inbox/processed/, when it had one
    source_name: str = ""
    source_url: str | None = None
    source_sha256: str = ""
    aged_s: float = 0.0  # its age as purge has counted it (kept in age.json, not in the manifest)
    aged_at: str = ""  # the clock reading that count was made at; "" when not counted yet

    def expires_at(self) -> datetime:
        """When purge will drop it, if the clock keeps true from the last count on (purge runs hourly)."""
        since = datetime.fromisoformat(self.aged_at or self.removed_at)
        return since + timedelta(seconds=max(KEEP_S - self.aged_s, 0.0))


@dataclass(frozen=True)
class Restored:
    """A document back in the knowledge base (its id changes only when its raw name was taken)."""

    trash_id: str
    doc_id: str
    title: str
    raw_path: str  # raw/<name>.md
    chunks: int
    original: str | None  # its original's name under inbox/processed/ now


# -- removing -----------------------------------------------------------------------------------


def remove(ingestor: Ingestor, doc_id: str, *, now: datetime) -> Trashed:
    """Move a document's raw file and original into the trash and delete it from the index.

    The caller holds the writer lock; ``now`` is an aware time. NotFound for an unknown id.
    """
    settings, index = ingestor.settings, ingestor.index
    ingestor.check_index()
    now = now.astimezone(UTC)
    doc = index.document(doc_id) if is_id(doc_id) else None
    if doc is None:
        raise NotFound("no-document", f"no document {doc_id!r} in the knowledge base (kb ls lists them)")
    if not doc.raw_path.startswith("raw/"):  # a folder source's file: the owner's, kept in sync, never moved
        raise TrashError(
            "in-source",
            f"{doc.raw_path} is a file of a folder source, which kb never moves or deletes: delete or move "
            "the file itself, or leave it out with an exclude rule of its source (kb.toml)",
        )
    raw_name = doc.raw_path.removeprefix("raw/")
    raw_path = settings.raw / raw_name
    if not os.path.lexists(raw_path):  # deleted by hand: the index only had not caught up yet
        index.delete_document(doc.id)
        raise NotFound("no-document", f"{doc.raw_path} was already deleted; {doc.id} is gone from the index")
    original = _original_name(settings, doc.source_snapshot)
    entry = Trashed(
        trash_id=new_trash_id(now),
        doc_id=doc.id,
        title=doc.title,
        removed_at=now.isoformat(timespec="seconds"),
        raw_name=raw_name,
        original=original,
        source_name=doc.source_name,
        source_url=doc.source_url,
        source_sha256=doc.source_sha256,
    )
    folder = settings.trash / entry.trash_id
    folder.mkdir(parents=True)
    _write_manifest(settings, folder, _manifest_of(entry))
    (folder / "raw").mkdir()
    os.replace(raw_path, folder / "raw" / raw_name)
    try:
        if original is not None:  # left in processed/ if this fails: the raw file still names it there
            (folder / "original").mkdir()
            _move_original(settings.processed, folder / "original", original, original)
    finally:
        index.delete_document(doc.id)  # its raw file is gone: the document must go too
    # History for kb status; a waiter never matches it (it looks for an inbox path).
    stamp = entry.removed_at
    ingestor.record(IngestRecord(doc.raw_path, doc.source_sha256, "removed", stamp, stamp, doc_id=doc.id))
    log.info(
        "trash.removed",
        doc_id=doc.id,
        trash_id=entry.trash_id,
        title=doc.title,
        raw=raw_name,
        original=original,
    )
    return entry


def new_trash_id(now: datetime) -> str:
    """``20250131-142501-3fa9c2``: sortable by time, unique, short enough for a Telegram button."""
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def is_id(text: object) -> bool:
    """A document, trash or request id: letters, digits, '-' and '_' only (never a path)."""
    return isinstance(text, str) and ID_PATTERN.fullmatch(text) is not None


def _original_name(settings: Settings, snapshot: str | None) -> str | None:
    """The original's name under processed/, when the snapshot names one that is a regular file there."""
    if not snapshot or not snapshot.startswith(SNAPSHOT_PREFIX):
        return None
    name = snapshot.removeprefix(SNAPSHOT_PREFIX)
    if not _is_plain_name(name) or not is_regular(settings.processed / name):
        return None
    return name


def _move_original(src_folder: Path, dest_folder: Path, name: str, dest_name: str) -> None:
    """Move an original and its sidecar (when there is one) between folders, renamed to dest_name."""
    if is_regular(src_folder / name):
        os.replace(src_folder / name, dest_folder / dest_name)
    side = sidecar_path(src_folder / name)
    if is_regular(side):
        os.replace(side, sidecar_path(dest_folder / dest_name))


# -- restoring ----------------------------------------------------------------------------------


def restore(ingestor: Ingestor, trash_id: str) -> Restored:
    """Put a removed document back: its files where they were (or under a free name), indexed again.

    The caller holds the writer lock. NotFound for an unknown entry; RestoreRefused (the entry kept)
    when a source with the same bytes was added meanwhile. Its vectors come back through the backfill.
    """
    settings = ingestor.settings
    ingestor.check_index()
    folder = settings.trash / trash_id
    if not is_id(trash_id) or not os.path.lexists(folder):
        raise NotFound("no-entry", f"no trash entry {trash_id!r} (kb restore lists them)")
    unsafe = _unsafe_part(folder)
    if unsafe is not None:
        raise _refused(folder, *unsafe)
    found = _read_entry(folder)
    if found is None or not _has_raw(folder, found[1]):
        raise NotFound("no-entry", f"no trash entry {trash_id!r} (kb restore lists them)")
    manifest, entry = found
    try:
        return _restore(ingestor, folder, manifest, entry)
    except LinkRefused as exc:  # a link swapped in after the check: still never followed
        raise _refused(folder, exc.part, "a symbolic link or not a folder") from exc


def _restore(ingestor: Ingestor, folder: Path, manifest: dict, entry: Trashed) -> Restored:
    """restore's steps on an entry found sound; every file in the trash is reached through real
    folders only (a link swapped in meanwhile raises LinkRefused)."""
    settings, index, trash_id = ingestor.settings, ingestor.index, entry.trash_id
    text = _read_beneath(settings.trash, folder / "raw" / entry.raw_name).decode("utf-8", errors="replace")
    plan = manifest.get("restoring") if isinstance(manifest.get("restoring"), dict) else {}
    same = index.document_by_source_sha256(entry.source_sha256) if entry.source_sha256 else None
    if same is not None:
        if plan.get("raw_name") and same.raw_path == "raw/" + plan["raw_name"]:  # a restore cut short
            return _finish(ingestor, folder, entry, same.raw_path, plan.get("original"))
        raise RestoreRefused(
            f"the same source is in the knowledge base again as {same.id} ({same.title!r}); trash entry "
            f"{trash_id} is kept — remove {same.id} first (kb rm {same.id}) to restore this one",
            doc_id=same.id,
            title=same.title,
        )
    original_dest = _planned(plan, "original") or _free_original(settings, folder, entry)
    raw_dest = _planned(plan, "raw_name") or unique_name(settings.raw, entry.raw_name)
    _write_manifest(
        settings, folder, {**manifest, "restoring": {"raw_name": raw_dest, "original": original_dest}}
    )
    if entry.original is not None and original_dest is not None:
        settings.processed.mkdir(parents=True, exist_ok=True)
        _move_back(settings.trash, folder / "original", settings.processed, entry.original, original_dest)
        if original_dest != entry.original:
            text = with_snapshot(text, SNAPSHOT_PREFIX + original_dest)
    data = text.encode("utf-8")
    is_written = write_new(settings.raw / raw_dest, data, staging=settings.staging)
    if not is_written and (settings.raw / raw_dest).read_bytes() != data:  # taken by another file
        raise TrashError(
            "raw-taken", f"raw/{raw_dest} appeared while restoring; try kb restore {trash_id} again"
        )
    _unlink_beneath(settings.trash, folder / "raw", entry.raw_name)
    return _finish(ingestor, folder, entry, "raw/" + raw_dest, original_dest, text=text)


def _finish(
    ingestor: Ingestor,
    folder: Path,
    entry: Trashed,
    raw_rel: str,
    original: str | None,
    *,
    text: str | None = None,
) -> Restored:
    """Index the restored raw file (``text``: what was written there; None reads it), record it and
    drop the trash entry."""
    doc, chunks = ingestor.prepare_raw(raw_rel, text)
    ingestor.index.upsert_document(doc, chunks)
    now = ingestor.clock().isoformat(timespec="seconds")
    sha = entry.source_sha256 or None
    ingestor.record(IngestRecord(raw_rel, sha, "indexed", now, now, doc_id=doc.id, chunks=len(chunks)))
    shutil.rmtree(folder)
    log.info(
        "trash.restored",
        trash_id=entry.trash_id,
        doc_id=doc.id,
        title=doc.title,
        raw=raw_rel,
        chunks=len(chunks),
    )
    return Restored(entry.trash_id, doc.id, doc.title, raw_rel, len(chunks), original)


def _unsafe_part(folder: Path) -> tuple[str, str] | None:
    """The first part of an entry that is not a real folder or regular file inside the trash, and what
    it is instead (lstat only: no link is followed); None when the entry is sound."""
    root = Path(os.path.realpath(folder.parent))
    odd = _odd(folder, root, is_dir=True)
    if odd is not None:
        return "its folder", odd
    if os.path.lexists(folder / MANIFEST) and (odd := _odd(folder / MANIFEST, root, is_dir=False)):
        return MANIFEST, odd
    for sub in ("raw", "original"):
        if not os.path.lexists(folder / sub):
            continue
        if (odd := _odd(folder / sub, root, is_dir=True)) is not None:
            return sub + "/", odd
        try:
            names = sorted(os.listdir(folder / sub))
        except OSError as exc:
            return sub + "/", f"unreadable ({exc.strerror})"
        for name in names:
            if (odd := _odd(folder / sub / name, root, is_dir=False)) is not None:
                return f"{sub}/{name}", odd
    return None


def _odd(path: Path, root: Path, *, is_dir: bool) -> str | None:
    """What path is when it is not a real folder (is_dir) or a regular file inside root; None when it is."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if is_dir and not stat.S_ISDIR(mode):
        return "not a folder"
    if not is_dir and not stat.S_ISREG(mode):
        return "not a regular file"
    if not Path(os.path.realpath(path)).is_relative_to(root):
        return "outside the trash"
    return None


def _refused(folder: Path, part: str, what: str) -> TrashError:
    """The error for a tampered entry (logged): it names the entry and the part, and leaves it in place."""
    log.warning("trash.refused", trash_id=folder.name, part=part, found=what)
    return TrashError(
        "tampered",
        f"trash entry {folder.name} is refused: {part} is {what}, and kb restores only real folders and "
        f"regular files inside the trash; the entry is left as it is — look at {folder} and delete it "
        "by hand if it is not what you removed",
    )


def _read_beneath(root: Path, path: Path) -> bytes:
    """A regular file's bytes, reached through real folders only from root (LinkRefused otherwise)."""
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise LinkRefused(path, path.name)
        return fh.read()


def _move_back(root: Path, src_folder: Path, dest_folder: Path, name: str, dest_name: str) -> None:
    """_move_original out of the trash: src_folder opened through real folders from root, and only
    regular files in it moved (a link there stays where it is)."""
    fd = open_beneath(root, src_folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for src, dest in (
            (name, dest_name),
            (sidecar_path(Path(name)).name, sidecar_path(Path(dest_name)).name),
        ):
            try:
                is_file = stat.S_ISREG(os.stat(src, dir_fd=fd, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                continue
            if is_file:
                os.replace(src, dest_folder / dest, src_dir_fd=fd)
    finally:
        os.close(fd)


def _unlink_beneath(root: Path, folder: Path, name: str) -> None:
    """Delete folder/name, folder reached through real folders only from root."""
    fd = open_beneath(root, folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def _planned(plan: dict, key: str) -> str | None:
    value = plan.get(key)
    return value if isinstance(value, str) and _is_plain_name(value) else None


def _free_original(settings: Settings, folder: Path, entry: Trashed) -> str | None:
    """Where the original goes back: its old name under processed/, or a free one."""
    if entry.original is None or not is_regular(folder / "original" / entry.original):
        return None
    return unique_name(settings.processed, entry.original)


def with_snapshot(text: str, snapshot: str) -> str:
    """A raw file's text with its front matter's ``source_snapshot`` set (lines and body unchanged)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return text
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return text  # no snapshot line: a hand-written raw file keeps its lines as they are
        if line.partition(":")[0].strip() == "source_snapshot":
            lines[n] = f"source_snapshot: {json.dumps(snapshot, ensure_ascii=False)}"
            return "\n".join(lines)
    return text


# -- listing and purging ------------------------------------------------------------------------


def trashed(settings: Settings) -> list[Trashed]:
    """The documents in the trash, newest first (entries without their raw file are left out)."""
    found = [entry for _, entry, has_raw in _walk(settings) if entry is not None and has_raw]
    return sorted(found, key=lambda e: (e.removed_at, e.trash_id), reverse=True)


def purge(settings: Settings, *, now: datetime) -> int:
    """Delete trash entries whose counted age reached KEEP_DAYS (and leftovers of cut-short steps);
    how many went. The caller holds the writer lock.

    No single clock reading is trusted: each purge adds to an entry's age (age.json) the time since
    the last purge's reading, at most a day and never less than nothing, so a clock a month ahead at
    one start, or one behind when a document was removed, moves no entry more than a day closer to
    going. The daemon purges at start and hourly; time it was not running counts a day at most.
    """
    now = now.astimezone(UTC)
    gone: list[str] = []
    for folder, entry, has_raw in _walk(settings):
        if entry is not None and not has_raw:  # nothing of value: see the module's docstring
            aged_s = KEEP_S
        elif entry is not None:
            aged_s = added_age(entry.aged_s, datetime.fromisoformat(entry.aged_at or entry.removed_at), now)
        else:  # no readable manifest: counted from the folder's time
            counted = _read_age(folder)
            since = datetime.fromtimestamp(folder.lstat().st_mtime, tz=UTC) if counted is None else counted[1]
            aged_s = added_age(0.0 if counted is None else counted[0], since, now)
        if aged_s >= KEEP_S:
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder.name)
            continue
        try:
            _write_age(settings, folder, aged_s, now)
        except OSError as exc:  # this count is lost, so the entry is kept longer: never shorter
            log.warning("trash.age_unsaved", trash_id=folder.name, error=str(exc))
    if gone:
        log.info("trash.purged", entries=len(gone), trash_ids=gone[:20], keep_days=KEEP_DAYS)
    return len(gone)


def added_age(aged_s: float, since: datetime, now: datetime) -> float:
    """An entry's age after a purge at ``now``: the gap since the last reading, ``since``, is added,
    at most a day (one jump of the clock) and nothing when the clock reads earlier (a stamp in the
    future counts as now)."""
    gap_s = (now - since).total_seconds()
    return aged_s + min(max(gap_s, 0.0), DAY_S)


def _walk(settings: Settings) -> Iterator[tuple[Path, Trashed | None, bool]]:
    """Each entry folder, the Trashed its manifest describes (None when unreadable) and whether
    something is where its raw file goes (see _has_raw)."""
    for folder in _entry_folders(settings):
        found = _read_entry(folder)
        entry = found[1] if found is not None else None
        yield folder, entry, entry is not None and _has_raw(folder, entry)


def _read_entry(folder: Path) -> tuple[dict, Trashed] | None:
    """An entry folder's manifest and the Trashed it describes, with its counted age; None when
    either is unreadable."""
    manifest = _read_manifest(folder)
    entry = _entry(manifest) if manifest is not None else None
    if manifest is None or entry is None:
        return None
    counted = _read_age(folder)
    if counted is not None:
        entry = replace(entry, aged_s=counted[0], aged_at=counted[1].isoformat())
    return manifest, entry


def _has_raw(folder: Path, entry: Trashed) -> bool:
    """Is something where the entry's raw file goes? A link counts: restore refuses such an entry
    by name and purge keeps it for its days, rather than dropping it as empty."""
    raw = folder / "raw"
    return os.path.islink(raw) or os.path.lexists(raw / entry.raw_name)


def _entry_folders(settings: Settings) -> list[Path]:
    """The trash's entry folders (real folders with an id for a name; links are never entered)."""
    try:
        children = list(settings.trash.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(p for p in children if is_id(p.name) and _is_dir(p))


def _read_manifest(folder: Path) -> dict | None:
    """An entry's manifest as a dict, or None when missing, linked, too large or not JSON."""
    return _read_json(folder / MANIFEST, MANIFEST_MAX_BYTES)


def _read_json(path: Path, limit: int) -> dict | None:
    """A JSON object in a regular file of an entry folder (reached through real folders only from
    the trash), or None when missing, linked, too large or not a JSON object."""
    try:
        data = read_regular(path.parent.parent, path, limit)
        found = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return found if isinstance(found, dict) else None


def _read_age(folder: Path) -> tuple[float, datetime] | None:
    """An entry's counted age (seconds) and the reading it was counted at; None when not counted yet
    or unreadable (then it is counted again from its stamp, a day at most)."""
    found = _read_json(folder / AGE, AGE_MAX_BYTES) or {}
    aged_s, at_text = found.get("aged_s"), found.get("aged_at")
    if not isinstance(aged_s, int | float) or isinstance(aged_s, bool) or not 0 <= aged_s < float("inf"):
        return None
    try:
        at = datetime.fromisoformat(at_text) if isinstance(at_text, str) else None
    except ValueError:
        return None
    return (float(aged_s), at) if at is not None and at.tzinfo is not None else None


def _write_age(settings: Settings, folder: Path, aged_s: float, now: datetime) -> None:
    """Record an entry's counted age and the reading it was counted at (atomically: rename)."""
    data = json.dumps({"aged_s": round(aged_s, 3), "aged_at": now.isoformat()}).encode("utf-8")
    write_atomic(folder / AGE, data, staging=settings.staging)


def _entry(manifest: dict) -> Trashed | None:
    """The Trashed a manifest describes, or None when a field is missing or unsafe."""
    text = {k: manifest.get(k) for k in ("trash_id", "doc_id", "title", "removed_at", "raw_name")}
    if not all(isinstance(v, str) for v in text.values()):
        return None
    original, url = manifest.get("original"), manifest.get("source_url")
    if not (is_id(text["trash_id"]) and _is_plain_name(text["raw_name"])):
        return None
    if original is not None and not (isinstance(original, str) and _is_plain_name(original)):
        return None
    try:
        removed = datetime.fromisoformat(text["removed_at"])
    except ValueError:
        return None
    if removed.tzinfo is None:
        return None
    return Trashed(
        **text,  # type: ignore[arg-type]
        original=original,
        source_name=str(manifest.get("source_name") or ""),
        source_url=url if isinstance(url, str) else None,
        source_sha256=str(manifest.get("source_sha256") or ""),
    )


def _manifest_of(entry: Trashed) -> dict:
    """What a new entry's manifest holds (its counted age lives in age.json, rewritten by purge)."""
    manifest = asdict(entry)
    del manifest["aged_s"], manifest["aged_at"]
    return manifest


def _write_manifest(settings: Settings, folder: Path, manifest: dict) -> None:
    data = json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8")
    write_atomic(folder / MANIFEST, data, staging=settings.staging)


def _is_plain_name(name: str) -> bool:
    """A file name on its own: no folder part, not '.' or '..', no NUL."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
