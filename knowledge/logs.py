"""Logging, set up once per process: JSON lines to runs/logs/kb.jsonl, readable lines on a TTY.

A kb command run in process (a test) sets it up inside :func:`kept_logging`, which puts it back after.

Event names are stable ``area.event`` strings (``ingest.done``, ``ingest.failed``…); values
go in fields. Long-running loops bind per-item context with ``structlog.contextvars``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TextIO

import structlog

from knowledge.ingest.files import holding
from knowledge.redact import redactor
from knowledge.text import clean_text, one_line

_SHARED = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


class _RedactingFormatter(structlog.stdlib.ProcessorFormatter):
    """Renders a record of any logger (kb's, python-telegram-bot's, httpx's…), then removes secrets.

    Redacting the finished line catches a secret wherever it hides: an event field, an
    exception message, a traceback, a URL a library logged.
    """

    def __init__(self, *args, redact: Callable[[str], str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        # A lone surrogate (a file name that is not UTF-8) would make the UTF-8 file refuse the line.
        return clean_text(self._redact(super().format(record)))


def configure_logging(
    log_path: Path | None,
    *,
    console_level: str = "info",
    console: TextIO | None = None,
    once: WarnOnce | None = None,
    secrets: Iterable[str] = (),
    brief: Brief | None = None,
) -> None:
    """Route structlog to a JSON-lines file and, when ``console`` is a TTY, to readable lines.

    With ``once`` (an interactive session's memory of what it has shown), the console gets one short
    line per distinct event instead of full records; the file still gets every record in full.
    ``secrets`` (the bot token, the Brave key) never reach either: every line is redacted. ``brief``
    writes those short lines in the reader's words (by default: in English, with what went wrong).
    """
    redact = redactor(secrets)
    console = sys.stderr if console is None else console
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.DEBUG)
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = SharedRotatingFileHandler(log_path, complaints=console)
        file_handler.setLevel(logging.DEBUG)
        file_handler.setFormatter(
            _RedactingFormatter(
                redact=redact,
                foreign_pre_chain=_SHARED,
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer(ensure_ascii=False),
                ],
            )
        )
        file_handler.addFilter(_own_or_wrong)
        root.addHandler(file_handler)
    if console.isatty():
        console_handler = ConsoleHandler(console)
        console_handler.setLevel(console_level.upper())
        renderer = (
            structlog.dev.ConsoleRenderer(colors=False) if once is None else BriefRenderer(console, brief)
        )
        console_handler.setFormatter(
            _RedactingFormatter(
                redact=redact,
                foreign_pre_chain=_SHARED,
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            )
        )
        console_handler.addFilter(_own_or_wrong)
        if once is not None:
            console_handler.addFilter(once)
        root.addHandler(console_handler)
    # Libraries stay quiet unless something is wrong, on the console and in the file alike (an idle
    # bot's HTTP client alone would write ~10 MiB a day of debug lines).
    for noisy in NOISY_LIBRARIES:
        library = logging.getLogger(noisy)
        library.setLevel(max(library.level, logging.WARNING))  # never louder than a module made it
    threading.excepthook = (
        _log_thread_crash  # a library thread's death is a log record, not a traceback mid-chat
    )
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


@contextlib.contextmanager
def kept_logging() -> Iterator[None]:
    """Logging as it was, after the block: what :func:`configure_logging` set up inside it (root handlers,
    closed; levels; the thread hook; structlog's configuration) ends with it. The handlers found at the
    start are set aside meanwhile, never closed: one in-process kb call leaves its caller's logging as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    for handler in handlers:
        root.removeHandler(handler)
    levels = {name: logging.getLogger(name).level for name in NOISY_LIBRARIES}
    hook = threading.excepthook
    was_configured, config = structlog.is_configured(), structlog.get_config()
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, was in levels.items():
            logging.getLogger(name).setLevel(was)
        threading.excepthook = hook
        if was_configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()


def _log_thread_crash(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    structlog.get_logger().error(
        "thread.crashed",
        thread=args.thread.name if args.thread else None,
        error=f"{args.exc_type.__name__}: {args.exc_value}",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def _own_or_wrong(record: logging.LogRecord) -> bool:
    """A record of kb's own (a structlog event: its message is the event's dict), or anyone's warning
    or worse: any other library's chatter stays out (markdown-it alone wrote 2,000 debug lines for a
    few commands)."""
    return record.levelno >= logging.WARNING or isinstance(record.msg, dict)


NOISY_LIBRARIES = (
    "pypdf", "watchdog", "httpx", "httpcore", "hpack", "h2", "telegram", "aiohttp.access", "asyncio",
    "urllib3", "huggingface_hub", "filelock", "PIL", "numba", "matplotlib", "charset_normalizer",
)  # fmt: skip
LOG_MAX_BYTES = 20 * 2**20  # the log is rotated at this size, keeping LOG_BACKUPS older files
LOG_BACKUPS = 5


class SharedRotatingFileHandler(RotatingFileHandler):
    """A size-rotated log that several kb processes write at once (the daemon, the bot, a command).

    Each record is one ``write`` on a file opened for appending, so lines from several processes
    never interleave. The processes take turns through ``flock`` on a lock file beside the log
    (``kb.jsonl.lock``), held for a record's check of the size, the rotation if it is due, and the
    write. So no line goes into a file being renamed, and a process that finds another file at the
    path than the one it has open (another inode: someone else rotated it) reopens the path instead
    of rotating again: each rotation happens once, and no nearly empty backup pushes a full one out.
    """

    def __init__(self, path: Path, *, complaints: TextIO | None = None) -> None:
        self._complaints = complaints  # where a log that cannot be written is said (default: stderr)
        self._opened: tuple[int, int] | None = None  # (device, inode) of the file the stream writes
        self._failing = False  # the last write failed (a full disk): said once, tried again each record
        self._failed_now = False
        self._lock_fd: int | None = None
        self._lock_pid = 0  # the process that opened the lock: a forked child opens its own
        super().__init__(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - the base class's name
        """A log that cannot be written (a full disk) costs its lines, said in one line once, never a
        traceback per record; the file is reopened and tried again with the next record."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handleError(record)
            return
        if not self._failing:
            with contextlib.suppress(OSError, ValueError):
                (self._complaints or sys.stderr).write(
                    f"kb: cannot write the log {self.baseFilename}: {exc.strerror or exc}; "
                    "its lines are lost until it can be written again\n"
                )
        self._failing = self._failed_now = True
        self._close_stream()

    def _open(self):  # noqa: ANN202 - the base class's stream
        """The file at the path, for appending, unbuffered: each record is one write."""
        stream = open(self.baseFilename, "ab", buffering=0)  # noqa: SIM115 - the handler owns it
        opened = os.fstat(stream.fileno())
        self._opened = (opened.st_dev, opened.st_ino)
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        """Append one record, rotating the file first when it would grow past ``maxBytes``."""
        self._failed_now = False
        try:
            data = (self.format(record) + self.terminator).encode("utf-8", "backslashreplace")
            with self._locked():
                self._follow()  # another process may have rotated the file since this one last wrote
                if self._is_full(len(data)):
                    self.doRollover()  # renames the full file, opens a new one at the path
                while data:  # a regular file takes it whole; a short write is followed by an error
                    data = data[self.stream.write(data) :]
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)  # an OSError is said once (a full disk); anything else as logging does
        if not self._failed_now:
            self._failing = False  # written again: a later failure is said again

    def _follow(self) -> None:
        """Have the stream write the file now at the path: another process may have rotated it."""
        try:
            now = os.stat(self.baseFilename)
            moved = (now.st_dev, now.st_ino) != self._opened
        except FileNotFoundError:
            moved = True
        if moved or self.stream is None:
            self._close_stream()
            self.stream = self._open()

    def _is_full(self, adding: int) -> bool:
        """Whether a record of ``adding`` bytes would take the file past its size (an empty file takes
        any record: rotating it would only push a full backup out; a device is never rotated)."""
        if self.maxBytes <= 0:
            return False
        now = os.fstat(self.stream.fileno())
        return stat.S_ISREG(now.st_mode) and now.st_size > 0 and now.st_size + adding > self.maxBytes

    def _lock(self) -> int:
        if self._lock_fd is None or self._lock_pid != os.getpid():
            # A child forked with this handler shares the parent's lock (flock belongs to the open
            # file): it opens its own. The parent's descriptor is left to the parent.
            self._lock_fd = os.open(f"{self.baseFilename}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._lock_pid = os.getpid()
        return self._lock_fd

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return holding(self._lock())

    def _close_stream(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self.stream.close()
            self.stream = None

    def close(self) -> None:
        with self.lock:
            if self._lock_fd is not None and self._lock_pid == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._lock_fd)
            self._lock_fd = None
        super().close()


class ConsoleHandler(logging.StreamHandler):
    """Console lines that never break an interactive prompt: while one is shown (see
    :func:`prompting`), a line is written above it and the prompt is drawn again with what the
    person has typed so far."""

    prompt: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.prompt is None:
            super().emit(record)
            return
        try:
            line = self.format(record)
            raw = getattr(self.stream, "raw_stream", self.stream)  # kb's own control output, not neutralised
            raw.write("\r\x1b[K")  # back to the start of the prompt's line, and clear it
            self.stream.write(f"{line}\n{self.prompt}{_typed()}")
            self.flush()
        except Exception:  # as logging itself does: a broken console must not break kb
            self.handleError(record)


def _typed() -> str:
    """What has been typed at the prompt so far (readline's line buffer), or ""."""
    try:
        import readline
    except ImportError:
        return ""
    return readline.get_line_buffer()


@contextlib.contextmanager
def prompting(prompt: str) -> Iterator[None]:
    """While a prompt waits for a line: console log lines are written above it, and it is drawn again."""
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, ConsoleHandler)]
    for handler in handlers:
        handler.prompt = prompt
    try:
        yield
    finally:
        for handler in handlers:
            handler.prompt = None


# Fields that tell one occurrence of an event from another (a file, a URL), and fields that say what went wrong.
_SUBJECT_FIELDS = ("file", "sidecar", "url", "provider")
_DETAIL_FIELDS = ("error", "reason", "detail")


def event_of(record: logging.LogRecord) -> Mapping[str, object]:
    """The structlog event dict of a record (or a minimal one for a foreign library's record)."""
    if isinstance(record.msg, Mapping):
        return record.msg
    return {"event": record.getMessage(), "level": record.levelname.lower()}


def brief_line(event: Mapping[str, object], *, width: int) -> str:
    """One terminal line for an event: ``kb warning: ask.degraded: model server not reachable…``."""
    subject = " ".join(str(event[k]) for k in _SUBJECT_FIELDS if event.get(k))
    detail = next((str(event[k]) for k in _DETAIL_FIELDS if event.get(k)), "")
    text = f"kb {event.get('level', 'warning')}: {event.get('event')}"
    text += f" {subject}" if subject else ""
    text += f": {detail}" if detail else ""
    return one_line(text, max(width, 21))  # one line, whatever the error message holds


class WarnOnce(logging.Filter):
    """Lets each distinct event through once: the memory of one interactive session, owned by it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, ...]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        event = event_of(record)
        key = (str(event.get("event")), *(str(event.get(k, "")) for k in _SUBJECT_FIELDS + _DETAIL_FIELDS))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


# A console line for an event in the reader's words: (level, event name, its subject) → the line
Brief = Callable[[str, str, str], str]


class BriefRenderer:
    """structlog renderer: one line no wider than the terminal; the details are in the JSON log."""

    def __init__(self, console: TextIO, brief: Brief | None = None) -> None:
        self.console = console
        self.brief = brief

    def __call__(self, logger: object, name: str, event: Mapping[str, object]) -> str:
        try:
            width = os.get_terminal_size(self.console.fileno()).columns or 100  # 0: size unknown
        except (OSError, ValueError, AttributeError):
            width = 100
        if self.brief is not None:  # the event's name and subject; what went wrong (English) stays in the log
            subject = " ".join(str(event[k]) for k in _SUBJECT_FIELDS if event.get(k))
            said = self.brief(str(event.get("level", "warning")), str(event.get("event")), subject)
            return one_line(said, max(width, 40))
        return brief_line(event, width=max(width, 40))
