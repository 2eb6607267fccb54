"""Sending to Telegram: replies in valid HTML pieces, edits of a status message, "typing…".

Every text goes through bot.pages: a message or an edit longer than Telegram takes continues in
messages of its own (the buttons under the last), never refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.actions import Actions
from bot.deps import deps_of, words_of
from bot.pages import split_html
from bot.render import candidate_buttons, reply_messages
from bot.stream import Streamed
from knowledge.answer.reply import Citation, Reply
from knowledge.websearch.store import SearchRecord
from knowledge.words.catalog import Words

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


def keyboard(
    record: SearchRecord | None, *, marks: Mapping[str, str] | None = None
) -> InlineKeyboardMarkup | None:
    """One button per candidate (``marks``: a sign before some, by source id)."""
    if record is None or not record.candidates:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.text, callback_data=b.data)] for b in candidate_buttons(record, marks=marks)]
    )


async def send_reply(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    reply: Reply,
    *,
    chat_key: str,
    streamed: Streamed | None = None,
    reply_to: int | None = None,
    fresh: bool = False,
    votes: Sequence[Sequence[InlineKeyboardButton]] = (),
) -> list[int]:
    """The reply in as many messages as it takes, the first a reply to the question (``reply_to``);
    web candidates or the Sources button under the last one, then ``votes`` (bot.feedback's row).
    What a stream left on the screen is replaced: its messages are edited into the reply's (a stream's
    drafts vanish by themselves). The ids of the reply's messages."""
    deps = deps_of(context)
    if reply.mode == "web":
        markup = keyboard(deps.store.latest(chat_key))
    else:
        markup = sources_button(deps.actions, chat_id, reply.citations, words_of(deps, chat_id))
    if votes:
        markup = InlineKeyboardMarkup([*(markup.inline_keyboard if markup else ()), *votes])
    messages = reply_messages(reply, words_of(deps, chat_id), fresh=fresh)
    reuse = list(streamed.message_ids) if streamed else []
    ids: list[int] = []
    for n, text in enumerate(messages, 1):
        buttons = markup if n == len(messages) else None
        if reuse and await edit_by_id(context, chat_id, reuse[0], text, reply_markup=buttons):
            ids.append(reuse.pop(0))
            continue
        answering = (
            ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to and not ids else None
        )
        sent = await context.bot.send_message(
            chat_id, text, parse_mode=ParseMode.HTML, link_preview_options=NO_PREVIEW,
            reply_markup=buttons, reply_parameters=answering,
        )  # fmt: skip
        ids.append(sent.message_id)
    for left in reuse:  # a stream that ran longer than the reply (never, unless the reply was cut)
        with contextlib.suppress(TelegramError):
            await context.bot.delete_message(chat_id, left)
    return ids


def sources_button(
    actions: Actions, chat_id: int, citations: Sequence[Citation], words: Words
) -> InlineKeyboardMarkup | None:
    """The "Sources" button under an answer that cites passages (bot.find shows them)."""
    if not citations:
        return None
    data = actions.add(
        chat_id, "sources", cited=[(c.number, c.chunk_id, c.start_line, c.end_line) for c in citations]
    )
    return InlineKeyboardMarkup([[InlineKeyboardButton(words.tr("Sources"), callback_data=data)]])


async def say(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    html_text: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
    reply_to: int | None = None,
) -> Message:
    """A message in HTML (``reply_to``: as a reply to that message of the chat); a text too long for
    one goes in several, the first a reply, the buttons under the last. The last message."""
    return await _send_pages(context, chat_id, split_html(html_text) or [html_text], reply_markup, reply_to)


async def _send_pages(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    pages: Sequence[str],
    reply_markup: InlineKeyboardMarkup | None,
    reply_to: int | None = None,
) -> Message:
    sent: Message | None = None
    for n, page in enumerate(pages, 1):
        answering = (
            ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to and n == 1 else None
        )
        sent = await context.bot.send_message(
            chat_id, page, parse_mode=ParseMode.HTML, link_preview_options=NO_PREVIEW,
            reply_markup=reply_markup if n == len(pages) else None, reply_parameters=answering,
        )  # fmt: skip
    assert sent is not None  # pages is never empty
    return sent


async def edit(
    context: ContextTypes.DEFAULT_TYPE,
    message: Message,
    html_text: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> bool:
    """Replace a status message's text (see edit_by_id)."""
    return await edit_by_id(
        context, message.chat_id, message.message_id, html_text, reply_markup=reply_markup
    )


async def edit_by_id(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    message_id: int,
    html_text: str,
    *,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> bool:
    """Replace a message's text; "not modified" counts as done, other refusals change nothing.
    A text too long for one message: its first page replaces the text, the rest follow as messages
    of their own (the buttons under the last). Whether it now shows the text."""
    first, *rest = split_html(html_text) or [html_text]
    try:
        await context.bot.edit_message_text(
            first, chat_id, message_id, parse_mode=ParseMode.HTML,
            link_preview_options=NO_PREVIEW, reply_markup=None if rest else reply_markup,
        )  # fmt: skip
    except TelegramError as exc:
        if "not modified" not in str(exc).lower():
            return False
    if rest:
        await _send_pages(context, chat_id, rest, reply_markup)
    return True
