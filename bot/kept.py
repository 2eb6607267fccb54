"""What the capture handlers keep between updates: things saved (for "Ask about it" / "Undo"), and
messages being collected into one note (several forwards, an album).

A button carries only ``kept:<token>:<action>``; what it acts on stays here, per chat, so a forged
or replayed callback can touch nothing but the tapping chat's own saved things.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.tokens import Tokens
from knowledge.words.catalog import Words

CALLBACK_PREFIX = "kept:"
ASK, UNDO = "a", "u"
KEEP_S = 7 * 24 * 3600.0
MAX_KEPT = 256
QUIET_S = 1.5  # Telegram sends forwards (and album photos) one update each, within a second or two


@dataclass
class Kept:
    """Something saved from the chat: in the inbox until the daemon indexes it, then a document."""

    chat_id: int
    title: str
    path: Path | None  # in the inbox (None once known to be indexed, or never: a web import)
    sha256: str | None
    doc_id: str | None = None
    state: str = "inbox"  # inbox | indexed | duplicate | failed | undone


class KeptNotes:
    """Saved things by token (bot.tokens: a week, at most MAX_KEPT); the follow-up tasks that wait for
    the daemon."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._tokens: Tokens[Kept] = Tokens(keep_s=KEEP_S, most=MAX_KEPT, clock=clock)
        self._tasks: set[asyncio.Task] = set()

    def add(self, item: Kept) -> str:
        """Keep ``item``; its token (see ``data``)."""
        return self._tokens.add(item.chat_id, item)

    def find(self, chat_id: int, data: str) -> tuple[str, Kept, str] | None:
        """(action, item, token) for a button's callback data; None when unknown, expired or another chat's."""
        token, _, action = data.removeprefix(CALLBACK_PREFIX).rpartition(":")
        item = self._tokens.get(chat_id, token)
        if item is None or action not in (ASK, UNDO):
            return None
        return action, item, token

    def follow(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (waiting for the daemon) in the background until it ends or ``close``."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop the follow-ups (the bot is stopping: what is in the inbox stays there)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def data(token: str, action: str) -> str:
    """A button's callback data."""
    return f"{CALLBACK_PREFIX}{token}:{action}"


def buttons(token: str, words: Words, *, undo: bool = True) -> InlineKeyboardMarkup:
    """ "Ask about it" and "Undo" for a saved thing."""
    row = [InlineKeyboardButton(words.tr("Ask about it"), callback_data=data(token, ASK))]
    if undo:
        row.append(InlineKeyboardButton(words.tr("Undo"), callback_data=data(token, UNDO)))
    return InlineKeyboardMarkup([row])


class Collector:
    """Messages per chat, handed on together once none has come for ``quiet_s``."""

    def __init__(self, *, quiet_s: float = QUIET_S) -> None:
        self.quiet_s = quiet_s
        self._batches: dict[int, list[object]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()

    def add(
        self,
        key: int,
        item: object,
        flush: Callable[[list[object]], Awaitable[None]],
        *,
        spawn: Callable[[Coroutine], asyncio.Task] = asyncio.ensure_future,
    ) -> None:
        """Add ``item`` to ``key``'s batch; ``flush(batch)`` runs once the chat has been quiet, as a task
        made by ``spawn`` (the bot's ``application.create_task``, so that a failure reaches its error
        handler rather than "Task exception was never retrieved")."""
        self._batches.setdefault(key, []).append(item)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(self.quiet_s, self._fire, key, flush, spawn)

    def _fire(self, key: int, flush: Callable[[list[object]], Awaitable[None]], spawn) -> None:
        self._timers.pop(key, None)
        batch = self._batches.pop(key, [])
        if batch:
            task = spawn(flush(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Drop what is still collecting and stop the flushes under way."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._batches.clear()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
