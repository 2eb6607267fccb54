"""``kb backup DEST``: one archive of everything needed to rebuild this knowledge base elsewhere.

It only reads: the daemon stays the one writer of raw/ and the index, and keeps ingesting,
removing and restoring while the backup runs. What a document's files do meanwhile is a move from
one folder to another (inbox → processed/ and raw/; raw/ → trash/ on a removal; trash/ → raw/ and
processed/ on a restore), so the folders are copied in an order that catches every such move in
one folder or the next:

1. the inbox (files waiting): one taken meanwhile is still here, and is taken again elsewhere;
2. the index, from one SQLite snapshot (see snapshot.py): the documents "indexed when the backup
   began";
3. the trash: an entry restored from here on is in this copy;
4. raw/: every raw file of the snapshot's documents is here, or was removed after step 2 and is in
   the trash of step 6;
5. inbox/processed/ and failed/: the originals (a raw file is written after its original is kept);
6. the trash again, adding the entries made since step 3 (documents removed during the backup).

A file is read once and hashed as it is written (regular files only, reached through real folders,
links never followed). restore.py puts a document that the snapshot holds but that was removed
during the backup back in place. Files indexed after the snapshot come with their raw files, and
the daemon's reconciliation indexes them in the restored home.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog

from knowledge import __version__
from knowledge.backup.archive import FORMAT, FORMAT_VERSION, JUNK_NAMES, Entry, Sink, open_sink
from knowledge.backup.errors import BackupError, write_error
from knowledge.backup.settings_files import secret_values, without_secrets
from knowledge.backup.snapshot import (
    STEP_PAGES,
    STEP_PAUSE_S,
    IndexFacts,
    check_problems,
    copy_database,
    index_facts,
)
from knowledge.backup.stopping import stopped_by_signals
from knowledge.config import Settings
from knowledge.errors import IndexError_
from knowledge.ingest.files import read_regular
from knowledge.ingest.safepath import LinkRefused, open_beneath, walk_files

log = structlog.get_logger()

INDEX_NAME = "knowledge/index/kb.sqlite3"
IN_MEMORY_MAX_BYTES = (
    64 * 2**20
)  # smaller files are read whole, then written: a file changing meanwhile is no problem
SETTINGS_MAX_BYTES = 2**20
RUNS_LEFT_OUT = ("logs", "models", "tokenizers", "ocr-pages")
PROCESSED = "inbox/processed/"  # how a document's source_snapshot names its original
SWEEP_ROUNDS = 20
SWEEP_PAUSE_S = 0.05
_TEMP_SUFFIXES = (".part", ".tmp", ".crdownload", ".download", ".filepart", ".swp", "~")
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")

# What a backup leaves out, and why (in the manifest, and in kb backup --help).
LEFT_OUT = {
    "the index's -wal/-shm files, knowledge/index/staging/ and working/": "the index copy is complete on its "
    "own; the rest is half-written files and the progress of conversions under way",
    "knowledge/requests/": "changes asked of the daemon: replayed in another home they would remove or restore "
    "documents there",
    "knowledge/writer.lock": "who writes now: nobody, in a restored home",
    "runs/logs/": "logs (kb logs): history, not state",
    "runs/models/ and runs/tokenizers/": "speech models and tokenizers kb downloaded: fetched again when needed",
    "runs/ocr-pages/": "pages of long scans read so far: a scan under way is read again",
    "hidden and temporary files (.NAME, NAME.part, NAME.tmp)": "files being written at that moment",
    "secrets": "KB_TELEGRAM_TOKEN, HF_TOKEN and every *_TOKEN, *_KEY, *_SECRET, *_PASSWORD line of .env and "
    "kb.toml: set them again in the new home",
    "settings outside KB_HOME": "the environment, the services' env file (~/.config/kb/env), a KB_CONFIG file elsewhere",
}

Progress = Callable[[int, int, int], None]  # files copied, files expected, bytes copied
Hook = Callable[[str], None]  # told each step's name once it is done (inbox, snapshot, trash, raw, ...)


@dataclass(frozen=True)
class BackupDone:
    """A backup written: where, how much, and what the index copy holds."""

    dest: Path
    files: int
    bytes: int
    index: IndexFacts
    seconds: float
    settings_dropped: dict[str, list[str]] = field(default_factory=dict)
    secret_in: list[str] = field(default_factory=list)  # files kept as they are that hold a secret's value
    skipped: list[str] = field(default_factory=list)  # links and special files, never followed


def backup(
    settings: Settings,
    dest: Path,
    *,
    progress: Progress | None = None,
    hook: Hook | None = None,
    pages: int = STEP_PAGES,
    pause_s: float = STEP_PAUSE_S,
    compresslevel: int = 3,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> BackupDone:
    """Write the archive DEST (``.tar.gz``/``.tgz``: a compressed tar; else a folder); BackupError
    when it cannot be written (nothing is left at DEST then)."""
    t0 = time.perf_counter()
    dest = Path(os.path.abspath(dest))
    check_dest(settings, dest)
    if not settings.index_path.is_file():
        raise BackupError(
            "no-index", f"no index at {settings.index_path}: nothing to back up (kb ingest PATH adds files)"
        )
    job = _Job(settings, progress or (lambda *_: None), hook or (lambda _: None), clock)
    with stopped_by_signals():  # SIGTERM too removes DEST.part, and the SQLite copies in it
        facts = _write(job, dest, compresslevel=compresslevel, pages=pages, pause_s=pause_s, clock=clock)
    done = BackupDone(
        dest,
        len(job.entries),
        job.bytes,
        facts,
        time.perf_counter() - t0,
        job.dropped,
        job.secret_in,
        job.skipped,
    )
    log.info(
        "backup.done",
        dest=str(dest),
        files=done.files,
        mb=round(done.bytes / 1e6, 1),
        documents=facts.documents,
        chunks=facts.chunks,
        vectors=facts.vectors,
        seconds=round(done.seconds, 1),
        settings_dropped=sorted({k for keys in job.dropped.values() for k in keys}),
        secret_in=job.secret_in[:20],
        skipped=len(job.skipped),
    )
    return done


def _write(
    job: _Job, dest: Path, *, compresslevel: int, pages: int, pause_s: float, clock: Callable[[], datetime]
) -> IndexFacts:
    """The archive written inside DEST.part and put at DEST (DEST.part removed whatever happens); what
    the index copy holds."""
    sink = open_sink(dest, compresslevel=compresslevel)
    try:
        facts = job.run(sink, pages=pages, pause_s=pause_s)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kb_version": __version__,
            "created_at": job.started_at,
            "finished_at": clock().isoformat(timespec="seconds"),
            "index": {"path": INDEX_NAME, "documents": facts.documents, "chunks": facts.chunks,
                      "vectors": facts.vectors},
            "databases": job.databases,
            "settings_dropped": job.dropped,
            "left_out": LEFT_OUT,
            "skipped": job.skipped,
            "files": {name: {"size": e.size, "sha256": e.sha256} for name, e in job.entries.items()},
        }  # fmt: skip
        sink.finish(json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8"))
    except BaseException as exc:
        sink.abort()
        log.warning(
            "backup.failed", dest=str(dest), error=str(exc), reason=getattr(exc, "reason", type(exc).__name__)
        )
        if isinstance(exc, OSError):  # a SQLite copy in DEST.part could not be written
            raise write_error(str(dest), exc) from exc
        raise
    return facts


def check_dest(settings: Settings, dest: Path) -> None:
    """Refuse a destination that exists, or lies where kb reads or watches (knowledge/, runs/)."""
    if os.path.lexists(dest):
        raise BackupError(
            "dest-exists", f"{dest} exists; kb never writes over it — name a new archive or folder"
        )
    if not dest.parent.is_dir():
        raise BackupError("dest-folder", f"no folder {dest.parent} to write {dest.name} in")
    real = dest.parent.resolve() / dest.name
    for inside in (settings.home / "knowledge", settings.runs):
        if real.is_relative_to(inside.resolve()):
            raise BackupError(
                "dest-inside",
                f"{dest} is inside {inside}, which kb reads (and the daemon watches): put it elsewhere",
            )


class _Scan:
    """Watches the bytes of one file go by for any secret's value (across piece boundaries)."""

    def __init__(self, needles: list[bytes]) -> None:
        self.needles, self.tail, self.is_hit = needles, b"", False
        self.keep = max((len(n) for n in needles), default=1) - 1

    def __call__(self, data: bytes) -> None:
        if not self.needles or self.is_hit:
            return
        buf = self.tail + data
        self.is_hit = any(n in buf for n in self.needles)
        self.tail = buf[-self.keep :] if self.keep else b""


class _Job:
    """One backup's passes over the home, writing each file once into the sink."""

    def __init__(
        self, settings: Settings, progress: Progress, hook: Hook, clock: Callable[[], datetime]
    ) -> None:
        self.settings, self.home = settings, settings.home
        self.progress, self.hook = progress, hook
        self.started_at = clock().isoformat(timespec="seconds")
        self.entries: dict[str, Entry] = {}
        self.databases: dict[str, str] = {}
        self.dropped: dict[str, list[str]] = {}
        self.secret_in: list[str] = []
        self.skipped: list[str] = []
        self.bytes = 0
        self.expected = 0
        env_text, toml_text = self._settings_text(".env"), self._settings_text("kb.toml")
        self.settings_text = {".env": env_text, "kb.toml": toml_text}
        self.secrets = secret_values(
            env_text or "",
            toml_text or "",
            (settings.telegram_token, settings.brave_api_key, settings.mcp_token),
        )
        self.needles = [s.encode("utf-8", "surrogateescape") for s in self.secrets]

    def run(self, sink: Sink, *, pages: int, pause_s: float) -> IndexFacts:
        s = self.settings
        self.expected = sum(
            len(list(self._walk(root, skip)))
            for root, skip in ((s.inbox, ()), (s.raw, ()), (s.trash, ()), (s.runs, RUNS_LEFT_OUT))
        )
        self._tree(sink, s.inbox, skip=("processed", "failed"))
        self.hook("inbox")
        facts, wanted = self._database(sink, INDEX_NAME, "index", pages=pages, pause_s=pause_s)
        self.hook("snapshot")
        self._tree(sink, s.trash)
        self.hook("trash")
        self._tree(sink, s.raw)
        self.hook("raw")
        self._tree(sink, s.processed)
        self._tree(sink, s.failed)
        self.hook("originals")
        self._tree(sink, s.trash)  # the entries made since the first pass; those copied are not read again
        self._sweep(sink, wanted)
        self.hook("trash-again")
        self._state(sink)
        self.hook("state")
        for name, text in self.settings_text.items():
            if text is not None:
                kept, dropped = without_secrets(text, toml=name == "kb.toml", secrets=self.secrets)
                self.dropped[name] = dropped
                self._add(sink, name, kept.encode("utf-8", "surrogateescape"), 0o600, time.time())
        self.hook("settings")
        return facts

    # -- passes ---------------------------------------------------------------------------------

    def _walk(self, root: Path, skip: tuple[str, ...] = ()):
        """The regular-looking files under root worth keeping (hidden and temporary names left out)."""
        for here, dirs, files in walk_files(root):
            for d in [d for d in dirs if os.path.islink(here / d)]:
                self._skip(here / d, "a symbolic link to a folder")
            dirs[:] = [d for d in dirs if not d.startswith(".") and not (here == root and d in skip)]
            for name in files:
                lower = name.lower()
                if (
                    not name.startswith(".")
                    and not lower.endswith(_TEMP_SUFFIXES)
                    and lower not in JUNK_NAMES
                ):
                    yield here / name

    def _skip(self, path: Path, why: str) -> None:
        note = f"{path.relative_to(self.home).as_posix()} ({why})"
        if note not in self.skipped:
            self.skipped.append(note)

    def _tree(self, sink: Sink, root: Path, skip: tuple[str, ...] = ()) -> None:
        if os.path.islink(root):  # kb itself never reads through it either
            self._skip(root, "a symbolic link to a folder")
            return
        for path in list(self._walk(root, skip)):
            self._file(sink, path)

    def _state(self, sink: Sink) -> None:
        """runs/: what the bot and the chats remember (SQLite files through the backup API)."""
        for path in list(self._walk(self.settings.runs, skip=RUNS_LEFT_OUT)):
            name = path.relative_to(self.home).as_posix()
            if name.endswith(_SQLITE_SIDE_FILES):
                continue
            if name.endswith(".sqlite3"):
                self._database(sink, name, "state", pages=-1, pause_s=0.0)
            else:
                self._file(sink, path)

    def _file(self, sink: Sink, path: Path) -> None:
        name = path.relative_to(self.home).as_posix()
        if name in self.entries:
            return
        try:
            fd = open_beneath(self.home, path, os.O_RDONLY | os.O_NONBLOCK)
        except LinkRefused:
            self._skip(path, "a symbolic link")
            return
        except (FileNotFoundError, NotADirectoryError):
            return  # moved meanwhile: it is caught in the folder it went to
        except OSError as exc:
            raise BackupError(
                "unreadable", f"cannot read {path}: {exc.strerror or exc}", member=name
            ) from exc
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                self._skip(path, "not a regular file")
                return
            if st.st_size <= IN_MEMORY_MAX_BYTES:
                data = fh.read(IN_MEMORY_MAX_BYTES + 1)
                if len(data) > IN_MEMORY_MAX_BYTES:
                    raise BackupError(
                        "unreadable", f"{path} grew while it was copied; run the backup again", member=name
                    )
                self._add(sink, name, data, st.st_mode, st.st_mtime)
                return
            scan = _Scan(self.needles)
            entry = sink.add_stream(name, fh, st.st_size, mode=st.st_mode, mtime=st.st_mtime, seen=scan)
        self._record(name, entry, scan.is_hit)

    def _add(self, sink: Sink, name: str, data: bytes, mode: int, mtime: float) -> None:
        entry = sink.add_bytes(name, data, mode=mode, mtime=mtime)
        self._record(name, entry, any(n in data for n in self.needles))

    def _record(self, name: str, entry: Entry, is_secret_seen: bool) -> None:
        self.entries[name] = entry
        self.bytes += entry.size
        if is_secret_seen:
            self.secret_in.append(name)
            log.warning("backup.secret_in_file", file=name)
        self.progress(len(self.entries), max(self.expected, len(self.entries)), self.bytes)

    def _sweep(self, sink: Sink, wanted: list[tuple[str, str | None]]) -> None:
        """Look again for the files of the snapshot's documents that are in no copy yet: a document
        removed and restored again while the backup ran (raw/ → trash → raw/) can have been out of
        raw/ when it was copied and out of the trash when that was. Each round copies what it finds."""
        for attempt in range(SWEEP_ROUNDS):
            lacking = self._lacking(wanted)
            if not lacking:
                return
            if attempt:
                time.sleep(SWEEP_PAUSE_S)
            for raw_name, original in lacking:
                self._file(sink, self.settings.raw / raw_name)
                if original is not None:
                    self._file(sink, self.settings.processed / original)
            self._tree(sink, self.settings.trash)
        lacking = self._lacking(wanted)
        if lacking:  # deleted by hand: the daemon drops such a document from the index, so will restore
            log.warning("backup.lacking", files=[raw for raw, _ in lacking[:20]], count=len(lacking))

    def _lacking(self, wanted: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
        """The (raw name, original name) of documents whose raw file or original is in no copy yet."""
        raws, originals = set(), set()
        for name in self.entries:
            parts = name.split("/")
            if name.startswith("knowledge/raw/") and len(parts) == 3:
                raws.add(parts[2])
            elif name.startswith("knowledge/inbox/processed/") and len(parts) == 4:
                originals.add(parts[3])
            elif name.startswith("knowledge/trash/") and len(parts) == 5 and parts[3] == "raw":
                raws.add(parts[4])  # knowledge/trash/<id>/raw/<name>
            elif name.startswith("knowledge/trash/") and len(parts) == 5 and parts[3] == "original":
                originals.add(parts[4])
        return [
            (raw, orig)
            for raw, orig in wanted
            if raw not in raws or (orig is not None and orig not in originals)
        ]

    def _database(
        self, sink: Sink, name: str, kind: str, *, pages: int, pause_s: float
    ) -> tuple[IndexFacts, list[tuple[str, str | None]]]:
        """A SQLite file copied from one snapshot, checked, then added; the index's counts and its
        documents' files (raw name, original name)."""
        src = self.home / name
        tmp = sink.work_path(f"{len(self.databases)}.sqlite3")  # in DEST.part's private work folder
        try:
            try:
                facts = copy_database(src, tmp, facts=_snapshot_facts if kind == "index" else _no_facts,
                                      pages=pages, pause_s=pause_s)  # fmt: skip
            except IndexError_ as exc:
                raise BackupError("unreadable", f"cannot copy {src}: {exc}", member=name) from exc
            # The full checks, FTS5's included: 3 s for a 660 MB index of 142,000 chunks.
            problems = check_problems(tmp, fts_table="chunks_fts" if kind == "index" else None)
            if problems:
                raise BackupError(
                    "index-damaged",
                    f"the copy of {src} fails SQLite's check ({'; '.join(problems[:3])}): "
                    + (
                        "rebuild it with kb reindex, then back up again"
                        if kind == "index"
                        else "move it away (kb starts a new one), then back up again"
                    ),
                    member=name,
                )
            mode = os.stat(src).st_mode
            scan = _Scan(self.needles)
            entry = sink.add_temporary(name, tmp, mode=mode, mtime=time.time(), seen=scan)
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        self.databases[name] = kind
        self._record(name, entry, scan.is_hit)
        return facts

    def _settings_text(self, name: str) -> str | None:
        """A settings file in KB_HOME as text, or None when there is none (a link is not followed)."""
        path = self.home / name
        try:
            data = read_regular(self.home, path, SETTINGS_MAX_BYTES)
        except FileNotFoundError:
            return None
        except LinkRefused:
            self._skip(path, "a symbolic link")
            return None
        except OSError as exc:  # not a regular file, or over the limit: left out whole, never cut short
            self._skip(path, str(exc))
            return None
        return data.decode("utf-8", "surrogateescape")


def _snapshot_facts(conn: sqlite3.Connection) -> tuple[IndexFacts, list[tuple[str, str | None]]]:
    """The index's counts and each document's (raw name, original name under processed/), from the
    snapshot being copied."""
    files = [
        (
            raw_path.removeprefix("raw/"),
            snapshot.removeprefix(PROCESSED) if (snapshot or "").startswith(PROCESSED) else None,
        )
        for raw_path, snapshot in conn.execute("SELECT raw_path, source_snapshot FROM documents")
    ]
    return index_facts(conn), files


def _no_facts(conn: object) -> tuple[IndexFacts, list[tuple[str, str | None]]]:
    return IndexFacts(0, 0, 0), []


__all__ = ["BackupDone", "backup", "check_dest"]
