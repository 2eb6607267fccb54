"""The inbox daemon: watchdog events in, one worker converting and indexing in arrival order.

Threads and their jobs:

* the watchdog observer turns events into "this path may have changed" notes (no I/O);
* the scheduler (``run``'s thread) stats the noted paths, hands complete files to a bounded
  queue, rescans the inbox on start and every ``KB_RESCAN_S`` (watchdog drops events on an
  inotify overflow), re-establishes the watch if the inbox folder is replaced, and plans retries;
  every ``probe_s`` it writes a hidden probe file in the inbox: a watch that did not see the last
  one died (a folder thousands of levels deep kills watchdog's recursive watch silently) and is set
  up again; while the inbox holds a folder deeper than ``MAX_DEPTH`` the inbox is watched without
  its sub-folders and rescanned every ``LIMITED_RESCAN_S`` instead;
* the owner's folder sources are watched by daemon/sources.py, whose tasks join the same queue;
* one worker takes tasks from the queue in order: ingest a file, sync a raw file, reconcile
  raw/ with the index, file an orphan sidecar, do a request (remove or restore a document, asked
  by the bot or ``kb rm`` through ``knowledge/requests/``, looked at every tick), and, at start and
  once a day, empty the trash of entries older than 30 days and drop uncollected request results.

``stop()`` (SIGTERM/SIGINT in ``kb daemon``) stops taking new files and interrupts a conversion in
progress (the file stays in the inbox for the next start); the worker finishes the file in hand
otherwise, and the daemon returns.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from daemon.sources import SourceWatch, known_sources
from daemon.stability import Signature, StabilityTracker, lstat_signature
from knowledge.config import Settings
from knowledge.convert.pagestore import mark_waiting
from knowledge.errors import ConversionInterrupted, IndexVanished
from knowledge.ingest import requests, trash, working
from knowledge.ingest.files import quarantine
from knowledge.ingest.names import SIDECAR_SUFFIX, is_candidate_name
from knowledge.ingest.pipeline import Ingestor, error_record
from knowledge.ingest.safepath import file_identity, link_below, walk_files, warn_too_deep
from knowledge.sources.sync import SourceSync

log = structlog.get_logger()

QUEUE_SIZE = 256
POLL_S = 0.1
PROBE_S = 30.0  # how often the watch is checked for life
LIMITED_RESCAN_S = 5.0  # rescans while the inbox is watched without its sub-folders
# How often the trash is purged and old request results dropped: hourly, as each purge ages the
# entries by the time since the last one (a day at most), so a Mac that sleeps still counts true.
HOUSEKEEPING_S = 3600.0
PROBE_NAME = ".kb-watch-probe"
_STOP = ("stop", None)


@dataclass(order=True)
class _Retry:
    due: float
    path: Path = field(compare=False)


class _Events(FileSystemEventHandler):
    """Watchdog callbacks: note the paths; never do heavy work on the observer's thread."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in ("opened", "closed_no_write"):
            return
        paths = [event.src_path]
        if kind == "moved":
            paths.append(event.dest_path)
        for raw_path in paths:
            path = Path(os.fsdecode(raw_path))
            if path.name == PROBE_NAME:
                self.daemon.probe_seen.set()
            elif event.is_directory:
                if kind in ("created", "moved") and path.exists():
                    self.daemon.note_folder(path)
            else:
                self.daemon.note(path)


class Daemon:
    """Watches one knowledge base's inbox and raw/ folder and keeps the index in step."""

    def __init__(
        self,
        settings: Settings,
        ingestor: Ingestor,
        *,
        clock: Callable[[], float] = time.monotonic,
        poll_s: float = POLL_S,
        probe_s: float = PROBE_S,
        after_task: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.after_task = after_task  # told after every task (the embedding backfill wakes up)
        self.ingestor = ingestor
        self.clock = clock
        self.poll_s = poll_s
        self.probe_s = probe_s
        self.probe_seen = threading.Event()  # the watch reported the last probe file
        self.watch_limited = False  # the inbox is watched without its sub-folders (too deep a tree)
        self.rescans = 0  # periodic rescans of the inbox and raw/ done (every KB_RESCAN_S)
        self.inbox_rescans = 0  # the inbox's own, while it is watched without its sub-folders
        self._too_deep: set[Path] = set()  # folders found too deep by the last scan
        self._told_too_deep: set[Path] = set()
        self.inbox = settings.inbox
        self.raw = settings.raw
        self.files = StabilityTracker(settings.settle_s)
        self.raw_files = StabilityTracker(settings.settle_s)
        self.tasks: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=QUEUE_SIZE)
        self.attempts: dict[Path, int] = {}
        # Raw files this daemon wrote, with their signature: their own events need no second look.
        self._written: dict[str, Signature] = {}
        self._retries: list[_Retry] = []
        self._retry_lock = threading.Lock()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._handing_over = threading.Lock()
        self.failure: Exception | None = None  # why the daemon stopped by itself
        self.started = threading.Event()  # set once the watches are in place and the first scan queued
        self._excluded = (settings.processed, settings.failed)
        self._requests_taken: set[str] = set()  # request files queued and not yet deleted
        self.source_sync = SourceSync(ingestor)  # the owner's folders, read in place (daemon/sources.py)
        self.source_watch = SourceWatch(settings, self._put, clock=clock)

    # -- notes from the watcher -------------------------------------------------------------

    def note(self, path: Path) -> None:
        """A path in the inbox or raw/ may have changed."""
        if path.parent == self.raw:
            if path.suffix == ".md" and is_candidate_name(path.name):
                self.raw_files.touch(path, self.clock())
        elif self._is_input(path):
            self.files.touch(path, self.clock())

    def note_folder(self, folder: Path) -> None:
        """A folder appeared in the inbox (moved in whole): its files may not raise events of their own.

        Linked folders are never entered, at any depth: their files are not the inbox's.
        """
        if folder != self.inbox and not self._is_input(folder / "x"):
            return
        link = link_below(self.inbox, folder)
        if link is not None:
            log.info("ingest.skipped", file=link, reason="a symbolic link to a folder; kb does not follow it")
            return
        for here, dirs, names in walk_files(folder, too_deep=self._found_too_deep):
            dirs[:] = [d for d in dirs if self._is_input(here / d / "x") and not os.path.islink(here / d)]
            for name in names:
                self.note(here / name)

    def _found_too_deep(self, folder: Path, depth: int) -> None:
        self._too_deep.add(folder)
        if folder not in self._told_too_deep:  # once per folder, not at every rescan
            self._told_too_deep.add(folder)
            warn_too_deep(folder, depth)

    def _is_input(self, path: Path) -> bool:
        """A file the inbox takes: inside it, not in processed/ or failed/, no hidden or temporary part."""
        try:
            parts = path.relative_to(self.inbox).parts
        except ValueError:
            return False
        if not parts or any(path.is_relative_to(x) for x in self._excluded):
            return False
        return all(not p.startswith(".") for p in parts[:-1]) and is_candidate_name(parts[-1])

    # -- lifecycle --------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking new files; a conversion in progress is interrupted, the file left in the inbox."""
        self._stop.set()
        if self.ingestor.runner is not None:
            self.ingestor.runner.interrupt()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until nothing is pending, queued or being worked on (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._idle.wait(0.05):
                continue
            with self._handing_over, self._retry_lock:
                if not (
                    len(self.files)
                    or len(self.raw_files)
                    or self.source_watch.pending()
                    or self.tasks.unfinished_tasks
                    or self._retries
                ):
                    return True
        return False

    def run(self) -> None:
        """Watch until stopped (blocks); the caller holds the writer lock."""
        log.info("daemon.start", inbox=str(self.inbox), pid=os.getpid(), settle_s=self.settings.settle_s)
        handler = _Events(self)
        self._scan_inbox()  # before the watch: a tree too deep for a recursive watch is known first
        observer, inbox_watch = self._start_observer(handler)
        inbox_id = file_identity(self.inbox)
        worker = threading.Thread(target=self._work, name="kb-ingest-worker", daemon=True)
        worker.start()
        self.source_watch.start(known_sources(self.source_sync))
        self._scan()
        self._put(("housekeeping", None))
        self.started.set()
        next_scan = self.clock() + self.settings.rescan_s
        next_housekeeping = self.clock() + HOUSEKEEPING_S
        next_inbox_scan = self.clock() + LIMITED_RESCAN_S
        next_probe = self.clock()
        probe_out = False
        try:
            while not self._stop.is_set():
                if self.tasks.empty() and self._index_gone():
                    break
                self._schedule()
                self._take_requests()
                if self.clock() >= next_housekeeping:
                    self._put(("housekeeping", None))
                    next_housekeeping = self.clock() + HOUSEKEEPING_S
                restart = False
                scanned = True
                if self.clock() >= next_scan:
                    self._scan()
                    self.source_watch.walk_all()
                    next_scan = self.clock() + self.settings.rescan_s
                    self.rescans += 1
                elif self.watch_limited and self.clock() >= next_inbox_scan:
                    self._scan_inbox()  # a watch without sub-folders: the inbox is walked often, raw/ is not
                    self.inbox_rescans += 1
                else:
                    scanned = False
                if scanned:
                    next_inbox_scan = self.clock() + LIMITED_RESCAN_S
                    restart = self.watch_limited != bool(self._too_deep)
                if not restart and not _emitters_alive(observer):  # a watch thread died (a tree too deep)
                    log.warning("daemon.watch_died", inbox=str(self.inbox), silent_s=0)
                    self._scan_inbox()
                    restart = True
                elif self.clock() >= next_probe:
                    if probe_out and not self.probe_seen.is_set():
                        log.warning("daemon.watch_died", inbox=str(self.inbox), silent_s=self.probe_s)
                        self._scan_inbox()  # is a tree too deep to watch whole the cause?
                        restart = True
                    probe_out = self._send_probe()
                    next_probe = self.clock() + self.probe_s
                if restart:  # the watch died, or the inbox got (or lost) a tree too deep to watch whole
                    observer.stop()
                    observer.join(timeout=5)
                    observer, inbox_watch = self._start_observer(handler)
                    inbox_id = file_identity(self.inbox)
                    self._scan()  # what arrived while no watch was up
                    next_scan = self.clock() + self.settings.rescan_s
                    probe_out = False
                if (
                    file_identity(self.inbox) != inbox_id
                ):  # the inbox was deleted or replaced: watch the new one
                    log.warning("daemon.inbox_replaced", inbox=str(self.inbox))
                    self._make_folders()
                    with contextlib.suppress(KeyError, OSError):  # watchdog may have dropped it already
                        observer.unschedule(inbox_watch)
                    try:
                        inbox_watch = self._schedule_inbox(observer, handler)
                    except OSError as exc:  # replaced again meanwhile: the next tick tries again
                        log.warning("daemon.watch_failed", inbox=str(self.inbox), error=str(exc))
                    else:
                        inbox_id = file_identity(self.inbox)
                        self._scan()
                self._stop.wait(self.poll_s)
        finally:
            observer.stop()
            self.source_watch.stop()
            self._put(_STOP, force=True)
            worker.join()
            observer.join(timeout=5)
            log.info("daemon.stop", pid=os.getpid())

    def _send_probe(self) -> bool:
        """Write and remove the probe file; its events prove the watch alive. False when it could not be written."""
        self.probe_seen.clear()
        probe = self.inbox / PROBE_NAME
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            log.debug("daemon.probe_failed", inbox=str(self.inbox), error=str(exc))
            return False
        return True

    def _start_observer(self, handler: _Events, attempts: int = 5) -> tuple[Observer, object]:
        """Watch the inbox and raw/; retried if a folder vanishes while the watch is set up."""
        for attempt in range(1, attempts + 1):
            self._make_folders()
            observer = Observer()
            observer.start()  # first: a watch scheduled on a running observer starts (and fails) at once,
            try:  # where _schedule_inbox can fall back to a limited watch
                inbox_watch = self._schedule_inbox(observer, handler)
                observer.schedule(handler, str(self.raw), recursive=False)
                return observer, inbox_watch
            except OSError as exc:
                with contextlib.suppress(Exception):
                    observer.stop()
                    observer.join(timeout=5)
                if attempt == attempts:
                    raise
                log.warning("daemon.watch_failed", inbox=str(self.inbox), error=str(exc))
                time.sleep(0.1 * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _schedule_inbox(self, observer: Observer, handler: _Events) -> object:
        """The inbox with its sub-folders, or without them (rescanned often instead) while it holds a
        folder too deep to watch: watchdog's recursive watch recurses once per level."""
        if not self._too_deep:
            try:
                watch = observer.schedule(handler, str(self.inbox), recursive=True)
            except RecursionError:  # deeper than the last scan saw (it stops at MAX_DEPTH anyway)
                self._too_deep.add(self.inbox)
            else:
                if self.watch_limited:
                    log.info("daemon.watch_restored", inbox=str(self.inbox))
                self.watch_limited = False
                return watch
        if not self.watch_limited:
            log.warning(
                "daemon.watch_limited",
                inbox=str(self.inbox),
                folders=sorted(str(f) for f in self._too_deep)[:5],
                rescan_s=min(self.settings.rescan_s, LIMITED_RESCAN_S),
            )
        self.watch_limited = True
        return observer.schedule(handler, str(self.inbox), recursive=False)

    def _index_gone(self) -> bool:
        """Has the index vanished under this writer (checked while idle, so a deletion is seen at once)?"""
        try:
            self.ingestor.check_index()
        except IndexVanished as exc:
            log.error("daemon.index_vanished", error=str(exc))
            self.failure = exc
            self.stop()
            return True
        return False

    def _make_folders(self) -> None:
        settings = self.settings
        for folder in (self.inbox, settings.processed, settings.failed, self.raw, settings.requests):
            folder.mkdir(parents=True, exist_ok=True)  # requests too: looked at every tick
        # Half-written files of a writer that was killed: only this process writes here now.
        if self.settings.staging.is_dir():
            for leftover in self.settings.staging.iterdir():
                with contextlib.suppress(OSError):
                    leftover.unlink()
        working.clear_all(working.folder(self.settings))  # progress a killed writer left behind

    # -- scheduler --------------------------------------------------------------------------

    def _scan_inbox(self) -> None:
        self._too_deep = set()
        self.note_folder(self.inbox)

    def _scan(self) -> None:
        """Note everything in the inbox and queue a raw/ reconciliation (start-up and periodic)."""
        self._scan_inbox()
        self._file_orphan_sidecars()
        self._put(("reconcile", None))

    def _schedule(self) -> None:
        now = self.clock()
        with self._retry_lock:
            while self._retries and self._retries[0].due <= now:
                self.files.touch(heapq.heappop(self._retries).path, now)
        with self._handing_over:  # wait_idle never looks between a path leaving pending and its task queued
            self._hand_over(now)
            self.source_watch.tick(now)

    def _hand_over(self, now: float) -> None:
        checked = self.files.check(now)
        for path in checked.not_regular:
            log.info("ingest.skipped", file=path.name, reason="not a regular file (link, FIFO or folder)")
        for path in checked.ready:
            if path.name.endswith(SIDECAR_SUFFIX):
                continue  # read with its file; never converted on its own
            log.info("ingest.queued", file=path.name)
            if not self._put(("file", path)):
                return
        raw = self.raw_files.check(now)
        for path in raw.ready:
            written = self._written.pop(path.name, None)
            if written is None or written != lstat_signature(path):
                self._put(("raw", path.name))
        for path in raw.gone:
            self._put(("raw", path.name))

    def _put(self, task: tuple[str, object], *, force: bool = False) -> bool:
        """Queue a task, waiting while the queue is full; False when stopping first."""
        self._idle.clear()
        while True:
            if self._stop.is_set() and not force:
                return False
            try:
                self.tasks.put(task, timeout=0.2)
                mark_waiting(self.settings.ocr_pages_dir, True)  # a scan being read ends its turn for it
                return True
            except queue.Full:
                continue

    def _take_requests(self) -> None:
        """Queue the request files written since the last look, each once, behind the tasks queued."""
        found = requests.pending(self.settings)
        self._requests_taken &= {p.name for p in found}  # forget those done and deleted
        for path in found:
            if path.name not in self._requests_taken:
                self._requests_taken.add(path.name)
                if not self._put(("request", path)):
                    return

    def _file_orphan_sidecars(self) -> None:
        """Sidecars whose file never came, after KB_ORPHAN_SIDECAR_S: to failed/ with a reason."""
        now = time.time()
        for side in self.inbox.glob("*" + SIDECAR_SUFFIX):
            owner = side.with_name(side.name.removesuffix(SIDECAR_SUFFIX))
            try:
                age = now - side.stat().st_mtime
            except FileNotFoundError:
                continue
            if not owner.exists() and age > self.settings.orphan_sidecar_s:
                self._put(("orphan", side))

    # -- worker -----------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            try:
                kind, arg = self.tasks.get(timeout=0.2)
            except queue.Empty:
                self._idle.set()
                continue
            if (kind, arg) == _STOP:
                return
            mark_waiting(self.settings.ocr_pages_dir, not self.tasks.empty())
            structlog.contextvars.clear_contextvars()
            try:
                if kind == "file":
                    self._ingest(arg)  # type: ignore[arg-type]
                elif kind == "raw":
                    self.ingestor.sync_raw(arg)  # type: ignore[arg-type]
                elif kind == "reconcile":
                    counts = self.ingestor.reconcile_raw()
                    if counts["indexed"] or counts["deleted"]:
                        log.info("raw.reconciled", **counts)
                elif kind.startswith("source-"):
                    self.source_watch.run(self.source_sync, kind, arg)
                elif kind == "orphan":
                    self._file_orphan(arg)  # type: ignore[arg-type]
                elif kind == "request":
                    requests.handle(self.ingestor, arg)  # type: ignore[arg-type]
                elif kind == "housekeeping":
                    trash.purge(self.settings, now=self.ingestor.clock())
                    requests.clean_results(self.settings)
            except IndexVanished as exc:  # every later write would be lost: stop, and let a restart rebuild
                log.error("daemon.index_vanished", task=kind, error=str(exc))
                self.failure = exc
                self.stop()
            except ConversionInterrupted:
                log.info("daemon.conversion_interrupted", task=kind, arg=str(arg))
            except Exception as exc:  # one bad task must not stop the daemon
                log.exception("daemon.task_failed", task=kind, arg=str(arg), error=str(exc))
            finally:
                self.tasks.task_done()
                self.after_task()

    def _ingest(self, path: Path) -> None:
        if not os.path.lexists(path):
            return  # handled already (queued twice) or moved away
        structlog.contextvars.bind_contextvars(file=path.name)
        attempt = self.attempts.get(path, 0)
        outcome = self.ingestor.ingest(path, may_retry=attempt < self.settings.retry_attempts)
        if outcome.raw_path:
            name = outcome.raw_path.removeprefix("raw/")
            signature = lstat_signature(self.raw / name)
            if signature is not None:
                self._written[name] = signature
        if outcome.status == "later":  # a long scan's turn is over: back in line, behind the files queued
            self.files.touch(path, self.clock())
        elif outcome.status == "retry":
            self.attempts[path] = attempt + 1
            delay = min(60.0, self.settings.settle_s * 2 ** (attempt + 1))
            with self._retry_lock:
                heapq.heappush(self._retries, _Retry(self.clock() + delay, path))
        else:
            self.attempts.pop(path, None)
            self._drop_empty_folders(path.parent)

    def _drop_empty_folders(self, folder: Path) -> None:
        """Remove the sub-folders of the inbox a file came from once they are empty (a folder dropped
        in whole leaves nothing behind); never the inbox itself or kb's own folders in it."""
        inbox = self.settings.inbox
        keep = {inbox, self.settings.processed, self.settings.failed, self.settings.staging}
        while folder != inbox and inbox in folder.parents and folder not in keep:
            try:
                folder.rmdir()  # only when empty
            except OSError:
                return
            log.debug("inbox.folder_removed", folder=str(folder.relative_to(inbox)))
            folder = folder.parent

    def _file_orphan(self, side: Path) -> None:
        owner = side.with_name(side.name.removesuffix(SIDECAR_SUFFIX))
        if owner.exists() or not side.exists():
            return
        record = error_record(side.name, "read", "orphan-sidecar",
                              f"the file {owner.name} this sidecar describes never arrived", None,
                              self.ingestor.clock().isoformat(timespec="seconds"))  # fmt: skip
        quarantine(side, self.settings.failed, record, keep=_move, staging=self.settings.staging)
        log.warning("ingest.failed", file=side.name, stage="read", reason="orphan-sidecar")


def _move(path: Path, folder: Path, name: str) -> Path:
    """Move a file from the inbox into ``folder`` under ``name``."""
    os.replace(path, folder / name)
    return folder / name


def _emitters_alive(observer: Observer) -> bool:
    """Whether every watch thread of the observer still runs: the emitters and, on Linux, the inotify
    reader they share, which dies of a tree too deep to walk (silently: without this the probe would
    notice only up to two probe periods later)."""
    threads = [*observer.emitters, *(getattr(e, "_inotify_fd", None) for e in observer.emitters)]
    return all(t.is_alive() for t in threads if isinstance(t, threading.Thread))
