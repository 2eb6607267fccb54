"""Run a converter in a reusable worker process with a wall-clock timeout and a memory cap.

pypdf's limits are per stream: one hostile page can still loop, exhaust memory or crash the
interpreter. The worker takes that hit instead of the daemon. It is never forked from the caller (which
has threads and SQLite connections): workers are forked from multiprocessing's fork server, a process
started once that holds neither and has the converters' libraries imported already, so a new worker
costs a fork instead of a fresh interpreter importing pypdf and trafilatura (about a second of CPU). The
worker takes the caller's environment and folder as they are when it starts, caps its own address space,
and is reused across calls (an OCR model is loaded once per worker). After a timeout or crash it is
killed and replaced lazily.

A long job can report progress: the function is handed ``progress(done, total)``, each report travels
back through the pipe, reaches the caller's ``on_progress`` and moves the deadline to at least
``progress_timeout_s`` from then (a heartbeat). A 20-page scan read by OCR keeps going as long as
every page is read in time; a page that hangs is still stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, TypeVar

from knowledge.errors import ConversionError, ConversionInterrupted
from knowledge.text import one_line

T = TypeVar("T")

MIB = 1024 * 1024
_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
_CLOSE_GRACE_S = 2.0
_POLL_S = 0.1
# Imported once by the fork server, so every worker starts with them (numpy and Pillow stay out: numpy's
# BLAS would start threads there, and the image converter's worker is the rarer one)
PRELOAD = ("knowledge.convert.pdf", "knowledge.convert.html", "knowledge.convert.text")


class InternalError(ConversionError):
    """An unexpected exception inside a converter (a bug in kb): reason ``internal-error``.

    ``details`` is the worker's traceback, for the log; the message stays one line for the owner.
    """

    def __init__(self, message: str, details: str) -> None:
        super().__init__("internal-error", message)
        self.details = details


class IsolatedRunner:
    """Runs top-level importable functions in one worker process, one call at a time."""

    def __init__(
        self, *, memory_bytes: int = 2 * 1024**3, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._memory_bytes = memory_bytes
        self._clock = clock  # reads the deadlines; the pipe is still waited on in real time
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(PRELOAD))  # read when the fork server starts, once
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._is_closed = False
        self._interrupted = threading.Event()

    def interrupt(self) -> None:
        """Stop the call in progress (and refuse later ones) with ConversionInterrupted: kb is stopping."""
        self._interrupted.set()

    @property
    def stopping(self) -> threading.Event:
        """Set once :meth:`interrupt` is called: work done for this runner's calls (a model download) stops too."""
        return self._interrupted

    def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout_s: float,
        progress_timeout_s: float | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        total_timeout_s: float | None = None,
        **kwargs: Any,
    ) -> T:
        """Return ``fn(*args, **kwargs)`` computed in the worker; failures become ConversionError.

        With ``progress_timeout_s``, ``fn`` also gets ``progress=`` (see the module docstring);
        ``total_timeout_s`` bounds the call however often progress is reported.
        """
        with self._lock:
            if self._is_closed:
                raise RuntimeError("IsolatedRunner is closed")
            if self._interrupted.is_set():
                raise ConversionInterrupted("kb is shutting down; the conversion was not started")
            conn = self._worker()
            started = self._clock()
            try:
                conn.send((fn, args, kwargs, progress_timeout_s is not None))
                reply, last = self._wait(conn, timeout_s, progress_timeout_s, on_progress, total_timeout_s)
            except (EOFError, OSError):
                raise self._crashed() from None
            except BaseException:
                self._stop(kill=True)  # interrupted mid-call: a late reply must not answer the next call
                raise
            if reply is None:
                self._stop(kill=True)
                if total_timeout_s is not None and self._clock() - started >= total_timeout_s:
                    raise ConversionError(
                        "timeout",
                        f"the conversion went on for {total_timeout_s:g} s, all one file may have in one go, and "
                        "was stopped; split the file, or raise KB_OCR_TURN_S or KB_OCR_BUDGET_S",
                    )
                if last is not None and progress_timeout_s is not None:
                    done, total = last
                    raise ConversionError(
                        "timeout",
                        f"reading a scanned page took longer than {progress_timeout_s:g} s and was stopped "
                        f"({done} of {total} pages read); the page is too large or malformed (raise "
                        "KB_OCR_PAGE_TIMEOUT_S, or lower KB_OCR_DPI)",
                    )
                raise ConversionError(
                    "timeout",
                    f"conversion took longer than {timeout_s:g} s and was stopped; the file is too large "
                    "or malformed (split it, or raise KB_CONVERT_TIMEOUT_S)",
                )
            if reply[0] == "memory":
                self._stop(kill=True)  # a fresh heap for the next file rather than a fragmented one
        return _unwrap(reply, self._memory_bytes)

    def _wait(
        self,
        conn: Connection,
        timeout_s: float,
        progress_timeout_s: float | None,
        on_progress: Callable[[int, int], None] | None,
        total_timeout_s: float | None = None,
    ) -> tuple[tuple[Any, ...] | None, tuple[int, int] | None]:
        """The reply (None on timeout) and the last progress report, waited for in short slices.

        Short slices, so an interrupt (SIGTERM) is obeyed mid-conversion; each progress report moves
        the deadline to at least ``progress_timeout_s`` away, never past ``total_timeout_s``.
        """
        started = self._clock()
        deadline = started + timeout_s
        end = started + total_timeout_s if total_timeout_s is not None else float("inf")
        last: tuple[int, int] | None = None
        while True:
            if self._interrupted.is_set():
                self._stop(kill=True)
                raise ConversionInterrupted("the conversion was stopped because kb is shutting down")
            left = deadline - self._clock()
            if left <= 0:
                return None, last
            if not conn.poll(min(left, _POLL_S)):
                continue
            reply = conn.recv()
            if reply[0] != "progress":
                return reply, last
            last = (reply[1], reply[2])
            if progress_timeout_s is not None:
                deadline = min(max(deadline, self._clock() + progress_timeout_s), end)
            if on_progress is not None:
                on_progress(*last)

    @property
    def pid(self) -> int | None:
        """The worker's process id, or None when no worker is running."""
        return self._process.pid if self._process is not None else None

    def close(self) -> None:
        """Stop the worker and wait for it; later calls raise RuntimeError."""
        with self._lock:
            self._is_closed = True
            self._stop(kill=False)

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _worker(self) -> Connection:
        """The live worker's pipe end, starting a worker if there is none or it died while idle."""
        # An idle worker never writes: its end of the pipe readable means it has died (is_alive() could
        # still say yes: its parent, the fork server, may not have reaped it yet).
        if self._conn is not None and self._conn.poll():
            self._stop(kill=True)
        if self._process is None or self._conn is None:
            parent_end, child_end = self._context.Pipe()
            # daemon=True: if the owner never calls close(), interpreter exit still reaps the worker.
            process = self._context.Process(
                target=_serve,
                args=(child_end, self._memory_bytes, dict(os.environ), _folder()),
                name="kb-converter",
                daemon=True,
            )
            process.start()
            child_end.close()  # only the worker holds it, so the worker's death reads as EOF here
            self._process, self._conn = process, parent_end
        return self._conn

    def _crashed(self) -> ConversionError:
        """Reap a worker that died mid-call and describe how it died."""
        code = self._stop(kill=True)
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exit code {code}"
        return ConversionError(
            "converter-crashed",
            f"the converter process died ({how}), probably out of memory (limit "
            f"{self._memory_bytes // MIB} MiB) or on a malformed file; the file was not converted",
        )

    def _stop(self, *, kill: bool) -> int | None:
        """End the worker (asking first unless ``kill``), reap it so no zombie is left; its exit code."""
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if process is None or conn is None:
            return None
        if not kill:
            with contextlib.suppress(OSError):  # already gone: the join below reaps it
                conn.send(None)
            process.join(_CLOSE_GRACE_S)
        if process.is_alive():
            process.kill()
        process.join()
        conn.close()
        code = process.exitcode
        process.close()
        return code


def _unwrap(reply: tuple[Any, ...], memory_bytes: int) -> Any:
    """The call's result, or the worker's failure raised as a ConversionError."""
    status, *payload = reply
    if status == "ok":
        return payload[0]
    if status == "conversion":
        raise ConversionError(payload[0], payload[1])
    if status == "memory":
        raise ConversionError(
            "converter-error",
            f"the conversion ran out of memory (limit {memory_bytes // MIB} MiB); the file is too large "
            "or a decompression bomb and was not converted",
        )
    raise InternalError(
        f"kb's converter failed on this file ({payload[0]}: {one_line(payload[1])}); this is a bug in kb, "
        "please report it with the log (kb logs --event ingest.)",
        payload[2] if len(payload) > 2 else "",
    )


def _folder() -> str | None:
    """The caller's working folder, None when it has been removed."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _serve(conn: Connection, memory_bytes: int, environ: dict[str, str], folder: str | None) -> None:
    """Worker loop: take the caller's environment and folder, cap memory, then answer (fn, args, kwargs)
    requests until None or EOF."""
    # Ctrl-C reaches the whole process group; the parent decides when the worker stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()  # the fork server's is the caller's as it was when the server started
    os.environ.update(environ)
    if folder is not None:
        with contextlib.suppress(OSError):
            os.chdir(folder)
    _spend_less_address_space()
    _limit_address_space(memory_bytes)
    while True:
        try:
            request = conn.recv_bytes()
        except EOFError:
            return
        reply = _run(request, conn)
        if reply is None:
            return
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # an unpicklable result
            conn.send(("error", type(exc).__name__, f"result cannot be sent back: {exc}"))


def _run(request: bytes, conn: Connection) -> tuple[Any, ...] | None:
    """Unpickle and run one request; None asks the worker to stop."""
    try:
        message = pickle.loads(request)  # imports fn's module on first use
        if message is None:
            return None
        fn, args, kwargs, wants_progress = message
        if wants_progress:

            def progress(done: int, total: int) -> None:
                conn.send(("progress", done, total))

            kwargs = {**kwargs, "progress": progress}
        return ("ok", fn(*args, **kwargs))
    except ConversionError as exc:
        return ("conversion", exc.reason, str(exc))
    except MemoryError:
        return ("memory",)
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc), traceback.format_exc())


def _spend_less_address_space() -> None:
    """Keep reserved-but-unused memory low, since the cap counts address space, not what is used.

    glibc gives each thread that allocates a 64 MiB heap of its own (onnxruntime's threads do), and
    OpenBLAS (inside OpenCV, which RapidOCR loads) reserves a buffer per thread: together about 700 MiB
    of a 2 GiB cap while reading one scanned page, for nothing a converter needs. Two heaps and one
    BLAS thread halve the worker's peak address space; the time per page does not change.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read when OpenCV's OpenBLAS loads, later
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, 2)


def _limit_address_space(memory_bytes: int) -> None:
    """Cap the worker's virtual memory so an allocation bomb fails here, not in the daemon."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    # Some platforms (macOS) refuse or ignore RLIMIT_AS; the timeout and crash handling still apply.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
