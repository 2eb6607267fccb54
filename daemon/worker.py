"""A background thread of the daemon: woken after each ingest, sleeping a while otherwise, stopped
after the piece of work in hand, at a lower CPU priority than the ingest worker."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger()

NICENESS = 10


class Worker:
    """The thread, its wake-up and its stop; ``run`` is the loop (it reads ``stopping`` and ``woken``)."""

    def __init__(self, name: str, run: Callable[[], None], *, stop_within_s: float) -> None:
        self.stopping = threading.Event()
        self.woken = threading.Event()
        self._stop_within_s = stop_within_s
        self._run = run
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """New work may be waiting (called after each ingest)."""
        self.woken.set()

    def stop(self) -> None:
        """Stop after the piece of work in hand and wait for it, ``stop_within_s`` at most."""
        self.stopping.set()
        self.woken.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._stop_within_s)
            if self._thread.is_alive():
                log.warning(
                    "daemon.worker_stop_timeout", worker=self._thread.name, waited_s=self._stop_within_s
                )

    def _main(self) -> None:
        with contextlib.suppress(
            OSError, AttributeError
        ):  # per-thread priority: Linux; elsewhere best effort
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        self._run()
