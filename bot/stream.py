"""An answer shown in a Telegram chat while the model writes it.

In a private chat the text goes out as a draft (``sendMessageDraft``: animated, ephemeral, a
30-second preview), renewed before it expires, also while the model is still reading the prompt
("Reading 5 passages…"). Where drafts are refused, the same text goes into a message of the bot's
own, edited as it grows. Either way the stream paces itself, about one update a second per chat
(bot.limiter does not pace a chat by itself), plain text only; a RetryAfter is waited out,
never raised (bot.limiter never retries a draft: the next update replaces it). A text longer than
one message continues in a new one: the full pages (cut by bot.pages, as Telegram counts) become
messages, the rest streams on.

The stream never sends the finished answer: the caller replaces what was streamed with the final
message in HTML, with its citations and buttons (:func:`bot.answer.deliver`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from telegram import Bot, ReplyParameters
from telegram.error import BadRequest, RetryAfter, TelegramError

from bot.limiter import retry_seconds
from bot.pages import neutral, page_end, units

log = structlog.get_logger()

DRAFT_EVERY_S = 1.0  # one update a second per chat (Telegram's advice for a chat)
EDIT_EVERY_S = 1.2  # edits count against the same limit and are heavier
RENEW_S = 20.0  # a draft lives 30 s after its last update
PAGE_UNITS = 3800  # of the 4,096 a message holds (UTF-16 units): room for the cursor and a cut at a word
CURSOR = " ▍"


@dataclass
class Streamed:
    """What a stream left on the screen: the ids of the messages it sent (edits mode, or the full
    pages of a long answer), oldest first, and the text it showed; ``rest``, the text after the full
    pages, shown in ``open_message`` (edits mode) or in a draft."""

    message_ids: list[int] = field(default_factory=list)
    shown: str = ""
    rest: str = ""
    open_message: int | None = None
    next_at: float = 0.0  # when the next update may go out (the final message waits for it too)


def pacing(every_s: float) -> dict[str, float]:
    """ChatStream's update intervals for drafts updated at most every ``every_s`` seconds
    (KB_TELEGRAM_UPDATE_EVERY_S): edits wait EDIT_EVERY_S / DRAFT_EVERY_S times as long."""
    return {"draft_every_s": every_s, "edit_every_s": every_s * EDIT_EVERY_S / DRAFT_EVERY_S}


class ChatStream:
    """The engine's Listener for one answer in one chat."""

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        reply_to: int | None,
        drafts: bool = True,
        reading_text: Callable[[int], str] = lambda n: f"Reading {n} passage{'s' if n != 1 else ''}…",
        clock: Callable[[], float] = time.monotonic,
        draft_every_s: float = DRAFT_EVERY_S,
        edit_every_s: float = EDIT_EVERY_S,
        renew_s: float = RENEW_S,
    ) -> None:
        self.bot, self.chat_id, self.reply_to = bot, chat_id, reply_to
        self.drafts = drafts
        self.reading_text = reading_text
        self.clock = clock
        self.every_s = {True: draft_every_s, False: edit_every_s}
        self.renew_s = renew_s
        self.draft_id = secrets.randbelow(2**31 - 1) + 1  # non-zero: updates of one draft are animated
        self.latest = ""  # the answer so far
        self.status = ""  # what to show before the answer starts ("Reading 5 passages…")
        self.result = Streamed()
        self.updates = 0
        self._page_start = 0  # where in ``latest`` the page on screen begins
        self._on_screen: str | None = None  # the text of the draft or message on screen now
        self._message: int | None = None  # edits mode: the message being edited
        self._last = float("-inf")
        self._hold_until = 0.0
        self._wake = asyncio.Event()
        self._pushing = asyncio.Lock()  # held by an update in flight: close() lets it land first
        self._task: asyncio.Task | None = None

    # -- the Listener -----------------------------------------------------------------------

    async def reading(self, passages: int, done: int, total: int) -> None:
        if not self.latest:
            self.status = self.reading_text(passages)
            self._start()

    async def text(self, so_far: str) -> None:
        self.latest = so_far
        self._start()

    # -- pacing -----------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        self._wake.set()

    async def _run(self) -> None:
        while True:
            wait = self._due() - self.clock()
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                continue
            wanted = self._wanted()
            if wanted == self._on_screen and not self._renew_due():
                self._wake.clear()
                renew_in = self._last + self.renew_s - self.clock() if self.drafts else None
                with contextlib.suppress(TimeoutError):  # a draft is renewed even when nothing new comes
                    await asyncio.wait_for(self._wake.wait(), renew_in)
                continue
            async with self._pushing:
                await self._push()

    def _due(self) -> float:
        """When the next update may go out."""
        return max(self._last + self.every_s[self.drafts], self._hold_until)

    def _renew_due(self) -> bool:
        return self.drafts and self._on_screen is not None and self.clock() - self._last >= self.renew_s

    def _wanted(self) -> str:
        page = neutral(self.latest[self._page_start :])
        return (page + CURSOR) if page else self.status

    async def _push(self) -> None:
        """One update: a full page first becomes a message of its own; then the page on screen."""
        if units(self.latest[self._page_start :]) > PAGE_UNITS:
            await self._close_page()
            return
        text = self._wanted()
        if not text:
            return
        self._last = self.clock()
        try:
            if self.drafts:
                await self.bot.send_message_draft(self.chat_id, self.draft_id, text=text)
            elif self._message is None:
                self._message = await self._send(text)
            else:
                await self.bot.edit_message_text(text, self.chat_id, self._message)
        except RetryAfter as exc:
            self._hold(exc)
            return
        except BadRequest as exc:
            if self.drafts:  # refused for this bot or chat: the same through edits from now on
                log.info("bot.drafts_refused", error=str(exc)[:200])
                self.drafts = False
                self._last = float("-inf")
                return
            if "not modified" not in str(exc).lower():
                log.warning("bot.stream_failed", error=str(exc)[:200])
        except TelegramError as exc:  # a network hiccup: the next update tries again
            log.warning("bot.stream_failed", error=str(exc)[:200])
        self._on_screen = text
        self.updates += 1

    async def _close_page(self) -> None:
        """The first PAGE_UNITS of the page on screen (cut at a line or a word) become a message."""
        end = page_end(self.latest[self._page_start :], PAGE_UNITS)
        page = neutral(self.latest[self._page_start : self._page_start + end])
        self._last = self.clock()
        try:
            if self._message is not None:
                await self.bot.edit_message_text(page, self.chat_id, self._message)
            else:
                await self._send(page)
        except RetryAfter as exc:
            self._hold(exc)
            return
        except TelegramError as exc:
            log.warning("bot.stream_failed", error=str(exc)[:200])
            return
        self._message = None
        self._page_start += end
        self._on_screen = None

    async def _send(self, text: str) -> int:
        reply = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to else None
        sent = await self.bot.send_message(self.chat_id, text, reply_parameters=reply)
        self.result.message_ids.append(sent.message_id)
        self.reply_to = None  # only the first message answers the question
        return sent.message_id

    def _hold(self, exc: RetryAfter) -> None:
        seconds = retry_seconds(exc)
        self._hold_until = self.clock() + seconds
        log.info("bot.stream_paced", retry_after_s=seconds)

    async def close(self) -> Streamed:
        """Stop streaming; what it left on the screen. An update in flight lands first: a message it
        sends is one the final reply must know of (to edit it), never a page left behind."""
        if self._task is not None:
            async with self._pushing:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.result.shown = self.latest
        self.result.rest = self.latest[self._page_start :]
        self.result.open_message = self._message
        self.result.next_at = self._due() if self._on_screen is not None else 0.0
        return self.result
