"""Sending to Telegram: replies in valid HTML pieces, edits of a status message, "typing…"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.actions import Actions
from bot.deps import deps_of
from bot.render import candidate_buttons, reply_messages
from knowledge.answer.assistant import Citation, Reply
from knowledge.websearch.store import SearchRecord

TYPING_EVERY_S = 4.0
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


@asynccontextmanager
async def typing(
    context: ContextTypes.DEFAULT_TYPE, chat_id: int, action: str = ChatAction.TYPING
) -> AsyncIterator[None]:
    """Show "typing…" (or another chat action) and renew it until the block is done."""

    async def keep_typing() -> None:
        while True:
            with contextlib.suppress(TelegramError):
                await context.bot.send_chat_action(chat_id, action)
            await asyncio.sleep(TYPING_EVERY_S)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def keyboard(record: SearchRecord | None) -> InlineKeyboardMarkup | None:
    """One button per candidate."""
    if record is None or not record.candidates:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.text, callback_data=b.data)] for b in candidate_buttons(record)]
    )


async def send_reply(
    context: ContextTypes.DEFAULT_TYPE, chat_id: int, reply: Reply, *, chat_key: str
) -> None:
    """The reply in as many messages as it takes; web candidates as buttons under the last one."""
    deps = deps_of(context)
    if reply.mode == "web":
        markup = keyboard(deps.store.latest(chat_key))
    else:
        markup = sources_button(deps.actions, chat_id, reply.citations)
    messages = reply_messages(reply)
    for n, text in enumerate(messages, 1):
        await context.bot.send_message(
            chat_id, text, parse_mode=ParseMode.HTML, link_preview_options=NO_PREVIEW,
            reply_markup=markup if n == len(messages) else None,
        )  # fmt: skip


def sources_button(
    actions: Actions, chat_id: int, citations: Sequence[Citation]
) -> InlineKeyboardMarkup | None:
    """The "Sources" button under an answer that cites passages (bot.find shows them)."""
    if not citations:
        return None
    data = actions.add(chat_id, "sources", cited=[(c.number, c.chunk_id) for c in citations])
    return InlineKeyboardMarkup([[InlineKeyboardButton("Sources", callback_data=data)]])


async def say(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    html_text: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> Message:
    return await context.bot.send_message(
        chat_id,
        html_text,
        parse_mode=ParseMode.HTML,
        link_preview_options=NO_PREVIEW,
        reply_markup=reply_markup,
    )


async def edit(
    context: ContextTypes.DEFAULT_TYPE,
    message: Message,
    html_text: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> None:
    """Replace a status message's text; "not modified" and other refusals change nothing."""
    with contextlib.suppress(TelegramError):
        await context.bot.edit_message_text(
            html_text, message.chat_id, message.message_id, parse_mode=ParseMode.HTML,
            link_preview_options=NO_PREVIEW, reply_markup=reply_markup,
        )  # fmt: skip
