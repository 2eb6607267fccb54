"""The conversation a chat holds with kb: /new, /stop, what a reply points at, the document just sent.

A chat is one conversation (``tg:<chat id>`` in the conversation file) until it has been silent
for KB_CONVERSATION_IDLE_S or the owner sends /new. A reply to one of kb's answers continues from
that answer; a reply to a message that carries a document (a file the owner sent, a Saved or
Indexed reply, an Open) asks about that document; a reply to a message kb knows nothing of brings
its text, or the part the owner highlighted, as context (data, never an instruction).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog
from telegram import Message, Update
from telegram.ext import ContextTypes

from bot.deps import BotDeps, deps_of, words_of
from bot.render import esc
from bot.send import say
from knowledge.conversation.store import Anchor
from knowledge.words.catalog import N_

log = structlog.get_logger()

NEW = N_("A new conversation: earlier messages are no longer taken into account. Ask away.")
NOTHING_TO_END = N_("A new conversation it is: there was nothing to forget. Ask away.")


def key_of(chat_id: int) -> str:
    """The chat's key in the conversation file."""
    return f"tg:{chat_id}"


async def replied_to(deps: BotDeps, chat_id: int, message: Message) -> tuple[Anchor | None, str | None]:
    """What the owner's message replies to: an anchor kb remembers, else the replied text (or the part
    highlighted) as context; (None, None) for a message that replies to nothing."""
    target = message.reply_to_message
    if target is None:
        return None, None
    anchor = await asyncio.to_thread(deps.conversing.store.anchored, key_of(chat_id), target.message_id)
    if anchor is not None:
        return anchor, None
    quote = message.quote.text if message.quote is not None else None
    return None, quote or target.text or target.caption or None


async def remember_document(
    deps: BotDeps, chat_id: int, message_ids: Sequence[int], doc_id: str, title: str, *, current: bool = True
) -> None:
    """These messages carry a document (a reply to one asks about it); ``current``: the owner has just
    sent it, so the conversation is about it from now on."""
    store, key = deps.conversing.store, key_of(chat_id)
    ids = [m for m in message_ids if m]
    await asyncio.to_thread(store.anchor, key, ids, document_id=doc_id, document_title=title)
    if current:
        await asyncio.to_thread(store.about, key, doc_id, title)


async def on_new(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/new: the conversation ends; the next message starts another."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    ended = await asyncio.to_thread(deps.conversing.store.end, key_of(chat_id))
    log.info("converse.new", had_turns=ended)
    await say(context, chat_id, esc(words_of(deps, chat_id).tr(NEW if ended else NOTHING_TO_END)))


async def on_stop(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/stop: the answer being written ends where it is (what was said stays)."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    running = deps.answering.get(chat_id)
    if running is None or running.done():
        await say(context, chat_id, esc(words_of(deps, chat_id).tr("Nothing is being answered right now.")))
        return
    running.cancel()
    log.info("converse.stopped")


async def on_unknown(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A command kb does not have: say so, and where the list is."""
    text = (update.effective_message.text or "").split()[0] if update.effective_message.text else "/"
    words = words_of(deps_of(context), update.effective_chat.id)
    await say(
        context,
        update.effective_chat.id,
        esc(words.tr("kb has no command {command}: /help lists them.", command=text[:40])),
    )
