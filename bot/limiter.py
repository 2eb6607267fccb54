"""Telegram's flood control, per chat: a 429 holds the chat it came for, never the whole bot.

python-telegram-bot's AIORateLimiter stops *every* request for a 429's ``retry_after`` while it
retries one: a draft refused for 40 s in one chat froze other chats, callback answers and /help.
Here a 429 holds only its own chat: later calls to that chat wait out the hold (and are retried a few
times), calls to other chats and calls without a chat (callback answers, polling) go on. Calls that
may be dropped (a streamed draft, "typing…") are never retried nor made to wait: they fail at once
with RetryAfter, and their caller moves on (bot.stream holds its own pace). The bot's overall
rate (30 messages a second) is kept as before.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

import structlog
from aiolimiter import AsyncLimiter
from telegram.constants import FloodLimit
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter
from telegram.warnings import PTBDeprecationWarning

log = structlog.get_logger()

DROPPABLE = frozenset({"sendMessageDraft", "sendChatAction"})  # the next one replaces it
MAX_RETRIES = 3


def retry_seconds(exc: RetryAfter) -> float:
    """A RetryAfter's wait in seconds (PTB moves ``retry_after`` from int to timedelta: either is read)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        wait = exc.retry_after
    return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)


def _retry_after(seconds: float) -> RetryAfter:
    """A RetryAfter for the rest of a hold (PTB warns when it reads its own field: not ours to see)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        return RetryAfter(max(1, round(seconds)))


class ChatLimiter(BaseRateLimiter[int]):
    """Flood waits held per chat; droppable calls fail fast instead of waiting or retrying."""

    def __init__(
        self,
        *,
        max_retries: int = MAX_RETRIES,
        overall_per_s: float = FloodLimit.MESSAGES_PER_SECOND,
        droppable: frozenset[str] = DROPPABLE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.max_retries = max_retries
        self.droppable = droppable
        self.clock = clock
        self.sleep = sleep
        self._overall = AsyncLimiter(overall_per_s, 1)
        self._held: dict[str, float] = {}  # chat id → until when (clock) its calls wait

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to close."""

    def held_for(self, chat_id: int | str) -> float:
        """Seconds the chat's calls still wait (0 when none)."""
        return max(0.0, self._held.get(str(chat_id), 0.0) - self.clock())

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | dict[str, Any] | list[dict[str, Any]]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> bool | dict[str, Any] | list[dict[str, Any]]:
        """Run one Bot API call: after its chat's hold, within the overall rate, retried on a 429
        unless it is droppable."""
        chat = str(data["chat_id"]) if data.get("chat_id") is not None else None
        droppable = endpoint in self.droppable
        retries = 0 if droppable else (self.max_retries if rate_limit_args is None else rate_limit_args)
        attempt = 0
        while True:
            wait = self.held_for(chat) if chat is not None else 0.0
            if wait > 0:
                if droppable:
                    raise _retry_after(wait)
                await self.sleep(wait)
            try:
                if chat is None:
                    return await callback(*args, **kwargs)
                async with self._overall:
                    return await callback(*args, **kwargs)
            except RetryAfter as exc:
                seconds = retry_seconds(exc)
                if chat is not None:
                    self._hold(chat, seconds)
                log.info("bot.flood_wait", method=endpoint, retry_after_s=seconds, attempt=attempt,
                         retried=attempt < retries)  # fmt: skip
                if attempt >= retries:
                    raise
                if chat is None:
                    await self.sleep(seconds)
            attempt += 1

    def _hold(self, chat: str, seconds: float) -> None:
        now = self.clock()
        for key in [k for k, until in self._held.items() if until <= now]:
            del self._held[key]
        self._held[chat] = max(self._held.get(chat, 0.0), now + seconds)
