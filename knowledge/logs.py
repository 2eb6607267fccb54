"""Logging, set up once per process: JSON lines to runs/logs/kb.jsonl, readable lines on a TTY.

Event names are stable ``area.event`` strings (``ingest.done``, ``ingest.failed``…); values
go in fields. Long-running loops bind per-item context with ``structlog.contextvars``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

import structlog

from knowledge.redact import redactor

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
        return self._redact(super().format(record))


def configure_logging(
    log_path: Path | None,
    *,
    console_level: str = "info",
    console: TextIO | None = None,
    secrets: Iterable[str] = (),
) -> None:
    """Route structlog to a JSON-lines file and, when ``console`` is a TTY, to readable lines.

    ``secrets`` (the bot token, the Brave key) never reach either: every line is redacted.
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
        file_handler = logging.FileHandler(log_path, encoding="utf-8")
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
        root.addHandler(file_handler)
    if console.isatty():
        console_handler = logging.StreamHandler(console)
        console_handler.setLevel(console_level.upper())
        console_handler.setFormatter(
            _RedactingFormatter(
                redact=redact,
                foreign_pre_chain=_SHARED,
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.dev.ConsoleRenderer(colors=False),
                ],
            )
        )
        root.addHandler(console_handler)
    # Libraries stay quiet unless something is wrong.
    for noisy in ("pypdf", "watchdog", "httpx", "telegram", "aiohttp.access", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
