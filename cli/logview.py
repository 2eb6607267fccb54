"""Reading the JSON-lines log back: the last lines, a following tail, one readable line each."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

_FIRST = ("timestamp", "level", "event")


def format_line(line: str) -> str:
    """``2026-11-29T21:00:00Z info  ingest.done  file=a.md chunks=3`` from one JSON log line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return line.rstrip("\n")
    if not isinstance(record, dict):
        return line.rstrip("\n")
    head = f"{record.get('timestamp', '-')} {record.get('level', '-'):<7} {record.get('event', '-'):<20}"
    fields = " ".join(f"{k}={_value(v)}" for k, v in record.items() if k not in _FIRST)
    return f"{head} {fields}".rstrip()


def _value(v: object) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text


def _matches(line: str, prefix: str) -> bool:
    if not prefix:
        return True
    try:
        return str(json.loads(line).get("event", "")).startswith(prefix)
    except (json.JSONDecodeError, AttributeError):
        return False


def last_lines(path: Path, n: int, *, event_prefix: str = "") -> list[str]:
    """The last n lines (matching the event prefix) of the log."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return list(deque((line for line in fh if _matches(line, event_prefix)), maxlen=max(n, 0)))


def follow(path: Path, *, event_prefix: str = "", poll_s: float = 0.25) -> Iterator[str]:
    """New lines as they are appended; survives the file being created, truncated or replaced."""
    while not path.exists():
        time.sleep(poll_s)
    fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 - reopened on rotation
    fh.seek(0, os.SEEK_END)
    inode = os.fstat(fh.fileno()).st_ino
    buffer = ""
    try:
        while True:
            chunk = fh.readline()
            if chunk:
                buffer += chunk
                if buffer.endswith("\n"):
                    if _matches(buffer, event_prefix):
                        yield buffer
                    buffer = ""
                continue
            time.sleep(poll_s)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            if st.st_ino != inode or st.st_size < fh.tell():
                fh.close()
                fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
                inode = os.fstat(fh.fileno()).st_ino
    finally:
        fh.close()
