"""Following something put in the inbox: the daemon's ingest record for its bytes, polled until it comes.

Every reply that waits for the daemon (a kept note or forward, a file or photo, a saved voice note,
an Undo racing the daemon) waits here, under one limit: FOLLOW_MAX_S. A note sent while the daemon
is stopped waits in the inbox; the reply is edited when ``kb daemon`` starts and indexes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from knowledge.config import Settings
from knowledge.ingest.handoff import ingest_record

FOLLOW_MAX_S = 24 * 3600.0  # the chat follows a thing in the inbox at most this long (then /status tells)
FAST_POLL_S, SLOW_POLL_S, FAST_FOR_S = 0.2, 5.0, 120.0  # quick at first, then gently while it waits
PROGRESS_EVERY_S = 1.0  # how often ``news`` is asked (a scan's pages read so far)


def _always() -> bool:
    return True


async def follow_ingest(
    settings: Settings,
    path: Path,
    sha256: str,
    *,
    wait_s: float = FOLLOW_MAX_S,
    is_wanted: Callable[[], bool] = _always,
    news: Callable[[], Awaitable[bool]] | None = None,
) -> dict | None:
    """The daemon's ingest record for these bytes at ``path``, or None when none came in time.

    Matched by name and content hash: an earlier file of the same name has its own records. Given
    up after ``wait_s`` without news, FOLLOW_MAX_S in all, or once ``is_wanted()`` is false (undone
    meanwhile). ``news()`` is asked every PROGRESS_EVERY_S; True (a new page read) gives the daemon
    another ``wait_s``. Polled every FAST_POLL_S for FAST_FOR_S after the last news, then every
    SLOW_POLL_S.
    """
    started = last = asked = time.monotonic()
    while is_wanted():
        record = await asyncio.to_thread(ingest_record, settings.index_path, str(path), sha256)
        now = time.monotonic()
        if record is not None or now - last >= wait_s or now - started >= FOLLOW_MAX_S:
            return record
        if news is not None and now - asked >= PROGRESS_EVERY_S:
            asked = now
            if await news():
                last = time.monotonic()
        await asyncio.sleep(FAST_POLL_S if time.monotonic() - last < FAST_FOR_S else SLOW_POLL_S)
    return None
