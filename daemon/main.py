"""Entry point of ``kb daemon``: take the writer lock, wire the parts, watch until a signal."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from daemon.backfill import Backfill
from daemon.service import Daemon
from daemon.summaries import Summaries
from knowledge.config import Settings
from knowledge.convert.isolate import IsolatedRunner
from knowledge.errors import IndexUnreadable
from knowledge.ingest import working
from knowledge.ingest.lock import DAEMON_ROLE, WriterLock
from knowledge.ingest.pipeline import Ingestor
from knowledge.ingest.rawsync import warn_index_change
from knowledge.model.template import ChatTemplate, template_for
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval.embed import EmbedderError, make_embedder
from knowledge.store.index import Index

log = structlog.get_logger()


@contextmanager
def open_daemon(
    settings: Settings, counter: TokenCounter, template: ChatTemplate | None = None
) -> Iterator[Daemon]:
    """A daemon ready to run, holding the writer lock (WriterLockHeld when another process has it).

    Beside it run the embedding backfill (unless KB_EMBED=off) and the summaries (unless
    KB_SUMMARIES=off), stopped when the daemon is. The
    progress of long conversions (pages read by OCR) is published for other processes (ingest/working.py).
    """
    lock = WriterLock(settings.lock_path, role=DAEMON_ROLE)
    lock.acquire(wait_s=0)
    backfill: Backfill | None = None
    summaries: Summaries | None = None
    try:
        with (
            Index(settings.index_path) as index,
            IsolatedRunner(memory_bytes=settings.convert_memory_mb * 2**20) as runner,
        ):
            warn_index_change(index, counter, settings.chunking)
            try:
                embedder = make_embedder(settings)
            except EmbedderError as exc:
                log.warning("embed.unavailable", reason=str(exc))
                embedder = None
            if embedder is not None:
                backfill = Backfill(settings, embedder)
                backfill.start()
            if settings.summaries == "on":
                if template is None:  # the caller's, when it has loaded it for the chat or the bot
                    template = template_for(counter)
                summaries = Summaries(settings, counter, template)
                summaries.start()
            progress = working.publisher(working.folder(settings))
            woken = [w.wake for w in (backfill, summaries) if w is not None]

            def after_task() -> None:  # the workers look for new chunks and documents
                for wake in woken:
                    wake()

            yield Daemon(
                settings,
                Ingestor(settings, index, counter, runner=runner, progress=progress),
                after_task=after_task,
            )
    finally:
        for worker in (backfill, summaries):
            if worker is not None:
                worker.stop()
        lock.release()


RETRY_OPEN_S = 30.0  # how often a daemon that cannot write its index (a full disk) tries again


def serve(settings: Settings, counter: TokenCounter, *, retry_s: float = RETRY_OPEN_S) -> int:
    """Run in the foreground until SIGTERM or SIGINT; exit status 0 after a clean stop.

    An index that cannot be written at start (a full disk, an I/O error) is said once and tried again
    every ``retry_s``, rather than exiting into a restart loop; a damaged one ends the daemon (status 1).
    """
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    said = None
    while True:
        try:
            with open_daemon(settings, counter) as daemon:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, lambda *_: (stopping.set(), daemon.stop()))
                if stopping.is_set():
                    daemon.stop()
                daemon.run()
            break
        except IndexUnreadable as exc:
            if exc.reason == "damaged":
                raise
            if str(exc) != said:
                said = str(exc)
                log.error("daemon.index_unusable", reason=exc.reason, error=str(exc), retry_s=retry_s)
                print(f"kb daemon: {exc}; trying again every {retry_s:g} s", file=sys.stderr, flush=True)
            if stopping.wait(retry_s):
                return 0
    if daemon.failure is not None:
        print(f"kb daemon: {daemon.failure}", file=sys.stderr)
        return 1  # the supervisor starts it again, and the new daemon rebuilds the index from raw/
    return 0


@contextmanager
def background(
    settings: Settings, counter: TokenCounter, template: ChatTemplate | None = None
) -> Iterator[Daemon]:
    """The daemon in a thread of this process (``kb run``); stopped and joined on exit."""
    with open_daemon(settings, counter, template) as daemon:
        thread = threading.Thread(target=daemon.run, name="kb-daemon", daemon=True)
        thread.start()
        daemon.started.wait(30)  # watching before the caller drops files or asks questions
        try:
            yield daemon
        finally:
            daemon.stop()
            thread.join()
