"""The daemon's watch on the owner's folder sources: watchdog events in, "these files of NAME may have
changed" tasks out, for the daemon's one worker (which syncs them: knowledge.sources.sync).

* Its own observer, one recursive watch per source (the inbox's watch restarts never disturb it).
* A file event starts the file's settle time (the same tracker as the inbox's); once it holds still,
  or is gone, the paths of one source seen in one tick go as one task, so a move (its old path gone,
  its new one ready) is seen whole and re-embeds nothing. A folder event (a folder moved or deleted
  whole) asks for a walk of the source instead: a walk finds moves by their bytes.
* Every tick it looks at the home's kb.toml: a source added is watched and walked, a source removed
  is unwatched and its documents forgotten, without a restart; ``knowledge/requests/rescan.NAME``
  (written by ``kb sources rescan``) asks for a walk. Every periodic rescan walks every source, so a
  folder where events are unreliable (a network share, a sync folder) still converges.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

import structlog
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from daemon.stability import StabilityTracker, lstat_signature
from knowledge.config import Settings
from knowledge.errors import ConfigError
from knowledge.sources import registry, state
from knowledge.sources.registry import Source
from knowledge.sources.sync import SourceSync

log = structlog.get_logger()

RESCAN_PREFIX = "rescan."  # knowledge/requests/rescan.NAME (cli/commands/sources.py writes it)

Task = tuple[str, object]


class _Events(FileSystemEventHandler):
    """Watchdog callbacks: note the paths; no I/O on the observer's thread."""

    def __init__(self, watch: SourceWatch) -> None:
        self.watch = watch

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        if event.is_directory and event.event_type == "modified":
            return  # a file in it was added or removed: that file's own event says which
        paths = [event.src_path] + ([event.dest_path] if event.event_type == "moved" else [])
        for raw in paths:
            self.watch.note(Path(os.fsdecode(raw)), is_folder=event.is_directory)


class SourceWatch:
    """Watches every registered source and turns what changes into worker tasks (``put``)."""

    def __init__(
        self,
        settings: Settings,
        put: Callable[[Task], bool],
        *,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.put = put
        self.clock = clock
        self.files = StabilityTracker(settings.settle_s)
        self.sources: dict[str, Source] = {}
        self._roots: dict[str, Path] = {}
        self._watches: dict[str, object] = {}
        self._walks_wanted: set[str] = set()
        self._lock = threading.Lock()
        self._config = registry.config_file(settings.home)
        self._config_seen: object = ()
        self._observer = Observer()
        self._handler = _Events(self)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, known: set[str]) -> None:
        """Watch the registered sources and walk each; forget the sources the index holds but kb.toml
        no longer names (removed while no daemon ran)."""
        self._observer.start()
        self.reload()
        for name in sorted(known - set(self.sources)):
            self.put(("source-forget", name))

    def stop(self) -> None:
        """Stop watching."""
        self._observer.stop()
        self._observer.join(timeout=5)

    def pending(self) -> int:
        """Paths and walks waiting for their turn (for wait_idle)."""
        with self._lock:
            return len(self.files) + len(self._walks_wanted)

    # -- the registry ----------------------------------------------------------------------

    def reload(self) -> None:
        """Read kb.toml again when it changed: watch and walk the sources added (or changed), unwatch
        and forget those removed."""
        seen = lstat_signature(self._config)
        if seen == self._config_seen:
            return
        self._config_seen = seen
        try:
            wanted = {s.name: s for s in registry.read_sources(self._config)}
        except (ConfigError, OSError) as exc:
            log.error("sources.config_unreadable", path=str(self._config), error=str(exc))
            return
        for name in sorted(set(self.sources) - set(wanted)):
            self._unwatch(name)
            log.info("sources.removed", source=name)
            self.put(("source-forget", name))
        for name, source in sorted(wanted.items()):
            if self.sources.get(name) == source:
                continue
            self._unwatch(name)
            with self._lock:
                self.sources[name] = source
                self._roots[name] = source.root
            self._watch(source)
            log.info("sources.watching", source=name, path=str(source.path), root=str(source.root))
            self.put(("source-scan", name))

    def _watch(self, source: Source) -> None:
        try:
            self._watches[source.name] = self._observer.schedule(
                self._handler, str(source.root), recursive=True
            )
        except (OSError, RecursionError) as exc:  # not there now (unmounted): the periodic walk looks again
            log.warning("sources.watch_failed", source=source.name, path=str(source.path), error=str(exc))

    def _unwatch(self, name: str) -> None:
        watch = self._watches.pop(name, None)
        if watch is not None:
            with contextlib.suppress(KeyError, OSError):
                self._observer.unschedule(watch)
        with self._lock:
            self.sources.pop(name, None)
            self._roots.pop(name, None)

    # -- notes from the watcher ------------------------------------------------------------

    def note(self, path: Path, *, is_folder: bool) -> None:
        """A path in some source may have changed."""
        with self._lock:
            for name, root in self._roots.items():
                if path.is_relative_to(root) and path != root:
                    if is_folder:
                        self._walks_wanted.add(name)
                    else:
                        self.files.touch(path, self.clock())
                    return

    # -- the scheduler's tick --------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Look at kb.toml and the rescan requests; hand the paths that settled to the worker."""
        self.reload()
        self._take_rescan_requests()
        with self._lock:
            walks, self._walks_wanted = self._walks_wanted, set()
        for name in sorted(walks):
            self.put(("source-scan", name))
        checked = self.files.check(now)
        by_source: dict[str, set[str]] = {}
        for path in [*checked.ready, *checked.gone, *checked.not_regular]:
            found = self._relative(path)
            if found is not None and found[0] not in walks:
                by_source.setdefault(found[0], set()).add(found[1])
        for name, rels in sorted(by_source.items()):
            self.put(("source-paths", (name, sorted(rels))))

    def walk_all(self) -> None:
        """Ask for a walk of every source (the periodic rescan)."""
        for name, source in sorted(self.sources.items()):
            if name not in self._watches:  # its folder was not there when it was to be watched: try again
                self._watch(source)
            self.put(("source-scan", name))

    def _relative(self, path: Path) -> tuple[str, str] | None:
        with self._lock:
            for name, root in self._roots.items():
                if path.is_relative_to(root):
                    return name, path.relative_to(root).as_posix()
        return None

    def _take_rescan_requests(self) -> None:
        try:
            names = [n for n in os.listdir(self.settings.requests) if n.startswith(RESCAN_PREFIX)]
        except OSError:
            return
        for marker in names:
            with contextlib.suppress(OSError):
                os.unlink(self.settings.requests / marker)
            name = marker.removeprefix(RESCAN_PREFIX)
            if name in self.sources:
                self.put(("source-scan", name))

    # -- the worker's side -----------------------------------------------------------------

    def run(self, sync: SourceSync, kind: str, arg: object) -> None:
        """Do one task on the worker's thread."""
        if kind == "source-forget":
            if arg not in self.sources:  # added again meanwhile: keep what it has
                sync.forget_source(str(arg))
            return
        if kind == "source-scan":
            source = self.sources.get(str(arg))
            if source is not None:
                sync.sync_source(source)
            return
        name, rels = arg  # type: ignore[misc]
        source = self.sources.get(name)
        if source is not None:
            sync.sync_paths(source, rels)


def known_sources(sync: SourceSync) -> set[str]:
    """The sources the index holds files of."""
    return state.registered_names(sync.index.conn)
