"""The daemon's second worker: vectors for chunks that have none, at low priority.

A file is searchable by its words as soon as the ingest worker commits it; this thread then
embeds its chunks in small batches (each committed on its own; in turns, the newest document
first, so one big file never holds back a note added after it), woken after every ingest and
checking again every ``IDLE_S``. It runs at a lower CPU priority than the ingest worker, so
new files are never kept waiting behind embedding. A kill loses at most the batch in hand:
the chunks without vectors are found again on the next start. When the embedder fails the
thread says so once and tries again later, with growing pauses.

Once the first embedder has nothing left to do, the second (the Universal Sentence Encoder, asked
across scripts: knowledge.retrieval.second) fills in its vectors the same way, its progress logged
as ``embed.second_done``; when its package is missing or broken it says so once and e5 goes on alone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import structlog

from daemon.worker import Worker
from knowledge.config import Settings
from knowledge.ingest import working
from knowledge.retrieval.backfill import coverage, embed_missing, embed_second_missing, second_coverage
from knowledge.retrieval.embed import Embedder, EmbedderError
from knowledge.retrieval.second import Second, beside
from knowledge.store.index import Index

log = structlog.get_logger()

IDLE_S = 30.0
MAX_BACKOFF_S = 300.0


class Backfill:
    """Fills in missing vectors of one index until stopped."""

    def __init__(
        self, settings: Settings, embedder: Embedder, *, idle_s: float = IDLE_S, second: Second | bool = True
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.second = beside(embedder, second)  # one encoder for the daemon's life (see second.beside)
        self.idle_s = idle_s
        # stopped after the batch in hand, bounded by the embedder's own deadline
        self._worker = Worker("kb-embed", self._run, stop_within_s=settings.embed_timeout_s + 5)
        self._wake, self._stop = self._worker.woken, self._worker.stopping
        self.start, self.wake, self.stop = self._worker.start, self._worker.wake, self._worker.stop

    def _paced(self) -> Callable[[int], None]:
        """A progress listener that publishes the embedding pace (chunks a second, smoothed) after
        each batch, for kb status and /status to show a rate and the time left."""
        folder = working.folder(self.settings)
        last = [time.perf_counter(), 0.0]  # when the previous batch ended, the smoothed rate

        def batch_done(chunks: int) -> None:
            now = time.perf_counter()
            rate = chunks / max(now - last[0], 1e-6)
            last[1] = rate if not last[1] else 0.7 * last[1] + 0.3 * rate
            last[0] = now
            with contextlib.suppress(OSError):
                working.publish_pace(folder, model=self.embedder.name, rate=last[1])

        return batch_done

    def _run(self) -> None:
        backoff = 0.0
        with Index(self.settings.index_path) as index:
            while not self._stop.is_set():
                self._wake.clear()
                t0 = time.perf_counter()
                try:
                    done = embed_missing(
                        index, self.embedder, batch=self.settings.embed_batch, should_stop=self._stop.is_set,
                        progress=self._paced(), second=False,
                    )  # fmt: skip
                except EmbedderError as exc:
                    if not backoff:
                        log.warning("embed.unavailable", model=self.embedder.name, reason=str(exc))
                    backoff = min(MAX_BACKOFF_S, max(backoff * 2, 5.0))
                    self._stop.wait(backoff)
                    continue
                except Exception as exc:  # a busy or damaged index: never take the daemon down
                    log.exception("embed.failed", error=str(exc))
                    self._stop.wait(self.idle_s)
                    continue
                if backoff:
                    log.info("embed.available", model=self.embedder.name)
                    backoff = 0.0
                if done:
                    cov = coverage(index, self.embedder.name)
                    log.info(
                        "embed.done",
                        chunks=done,
                        ms=round((time.perf_counter() - t0) * 1000),
                        vectors=cov.vectors,
                        total=cov.chunks,
                        model=self.embedder.name,
                    )
                if self.second is not None and not self._stop.is_set():
                    self._second(index)
                self._wake.wait(self.idle_s)

    def _second(self, index: Index) -> None:
        """The second embedder's missing vectors (never takes the thread down)."""
        assert self.second is not None
        t0 = time.perf_counter()
        try:
            done = embed_second_missing(
                index, self.second, batch=self.settings.embed_batch, should_stop=self._stop.is_set
            )
        except Exception as exc:  # a busy or damaged index: the next turn tries again
            log.exception("embed.second_failed", error=str(exc))
            return
        if done:
            cov = second_coverage(index, self.second)
            log.info(
                "embed.second_done", chunks=done, ms=round((time.perf_counter() - t0) * 1000),
                vectors=cov.vectors, total=cov.chunks, model=self.second.model,
            )  # fmt: skip
