"""Answering the owner in Telegram: a question in the chat's conversation, streamed while the model
writes, sent as a reply to it; the web step's candidates and the import of the one tapped.

One answer per chat at a time: a question that arrives meanwhile says it waits ("after the current
answer") and is answered next; /stop ends the answer being written. A tapped candidate keeps the
other buttons (the tapped one marked), a failed import leaves a way to try again, and the page
imported answers the question it was found for, from that page.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import structlog
from telegram import InlineKeyboardMarkup, Message, Update
from telegram.ext import ContextTypes

from bot.converse import key_of, replied_to
from bot.deps import BotDeps, deps_of, words_of
from bot.feedback import kept_votes, offer_votes, with_votes
from bot.render import esc, italic, parse_callback
from bot.send import edit, edit_by_id, keyboard, say, send_reply, typing
from bot.stream import ChatStream, Streamed, pacing
from bot.summarise import asks_for_summary, summarise_document
from knowledge.conversation.store import Anchor
from knowledge.errors import FetchRefused
from knowledge.websearch.choice import typed_choice
from knowledge.websearch.importer import ImportRefused, import_web_source, pasted_url, select
from knowledge.words.catalog import LABELLED, N_, Words
from knowledge.words.reasons import progress, refused

log = structlog.get_logger()

WAITS = N_("After the current answer.")
STOPPED = N_("(stopped)")
UPDATED = N_("updated, {chunks} — {title} (its earlier version no longer answers)")
WHICH = N_("Which one? Tap it, or write its id (web-1 … {last}).")
IMPORTING, IMPORTED, FAILED = "⏳ ", "✓ ", "↻ "


async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A question for the engine (or a pasted link, which becomes a one-candidate list)."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    message = update.effective_message
    text = message.text or ""
    url = pasted_url(text)
    if url is not None:
        async with deps.locks[chat_id]:
            record = deps.store.save_url(str(chat_id), url)
            await say(context, chat_id, f"{esc(url)}\nTap to import it.", reply_markup=keyboard(record))
        return
    if await _typed_choice(context, deps, chat_id, text, question=message):
        return
    anchor, replied_text = await replied_to(deps, chat_id, message)
    if asks_for_summary(text):  # "summarise it": the document replied to, or the one just sent
        doc_id = (
            anchor.document_id
            if anchor is not None and anchor.document_id
            else await _current_document(deps, chat_id)
        )
        if doc_id:
            await summarise_document(context, deps, chat_id, doc_id)
            return
    await answer(context, chat_id, text, question=message, anchor=anchor, replied_text=replied_text)


async def _typed_choice(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, chat_id: int, text: str, *, question: Message
) -> bool:
    """A typed choice while candidates are on show (「我選 web-2」, "the second one"): imported as a tap
    would be, or, when it is not clear which, the buttons again with a question; never searched."""
    record = deps.store.latest(str(chat_id))  # a small local file, read at once: no await before the
    # chat's lock, so messages sent one after the other are answered in their order
    if record is None or not record.candidates:
        return False
    typed = typed_choice(text, [c.id for c in record.candidates])
    if typed is None:
        return False
    words = words_of(deps, chat_id)
    log.info("bot.typed_choice", chosen=typed.source_id or "unclear", candidates=len(record.candidates))
    if typed.source_id is None:
        which = words.tr(WHICH, last=record.candidates[-1].id)
        await say(context, chat_id, esc(which), reply_markup=keyboard(record), reply_to=question.message_id)
        return True
    status = await say(
        context,
        chat_id,
        italic(words.tr("{id}: starting…", id=typed.source_id)),
        reply_to=question.message_id,
    )
    await run_import(context, chat_id, typed.source_id, search_id=record.search_id, status_message=status)
    return True


async def _current_document(deps: BotDeps, chat_id: int) -> str | None:
    if deps.conversing is None:
        return None
    conversation = await asyncio.to_thread(deps.conversing.store.current, key_of(chat_id))
    return conversation.document_id


async def answer(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    text: str,
    *,
    question: Message | None,
    document: str | None = None,
    anchor: Anchor | None = None,
    replied_text: str | None = None,
) -> None:
    """Answer ``text`` in the chat's conversation: streamed, then the final message (as a reply to the
    question) with its sources or candidates; remembered so a reply to it continues from it."""
    deps = deps_of(context)
    words = words_of(deps, chat_id)
    if chat_id in deps.answering:  # another answer is being written: this one waits for it
        await say(
            context,
            chat_id,
            f"<i>{esc(words.tr(WAITS))}</i>",
            reply_to=question.message_id if question else None,
        )
    async with deps.locks[chat_id]:
        stream = ChatStream(
            context.bot, chat_id, reply_to=question.message_id if question else None,
            drafts=chat_id not in deps.no_drafts,
            reading_text=lambda n: words.ntr("Reading {n} passage…", "Reading {n} passages…", n),
            **pacing(deps.settings.telegram_update_every_s),
        )  # fmt: skip
        task = asyncio.ensure_future(
            deps.conversing.ask(
                key_of(chat_id), text, anchor=anchor, replied_text=replied_text, document=document,
                question_message_id=question.message_id if question else None, listener=stream,
                chat_id=str(chat_id), language=words.language,
            )
        )  # fmt: skip
        deps.answering[chat_id] = task
        try:
            async with typing(context, chat_id):
                answered = await task
        except asyncio.CancelledError:
            if not task.cancelled():  # the bot is stopping, not /stop
                raise
            answered = None
        finally:
            deps.answering.pop(chat_id, None)
            streamed = await stream.close()
            if not stream.drafts:
                deps.no_drafts.add(chat_id)
        if answered is None:
            await _stopped(context, chat_id, streamed, question, words)
            return
        log.info("bot.answered", mode=answered.reply.mode, streamed_updates=stream.updates,
                 how=answered.plan.how, drafts=stream.drafts)  # fmt: skip
        votes = await offer_votes(deps, chat_id, text, answered, words)
        await asyncio.sleep(
            max(0.0, streamed.next_at - time.monotonic())
        )  # the pace holds for the last one too
        ids = await send_reply(
            context, chat_id, answered.reply, chat_key=str(chat_id), streamed=streamed,
            reply_to=question.message_id if question else None, fresh=answered.fresh, votes=votes,
        )  # fmt: skip
    if answered.turn_id is not None:  # a reply to any of its messages continues from this turn
        await asyncio.to_thread(deps.conversing.store.anchor, key_of(chat_id), ids, turn_id=answered.turn_id)


async def _stopped(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    streamed: Streamed,
    question: Message | None,
    words: Words,
) -> None:
    """/stop: what was said stays, marked as stopped. The full pages a long answer has sent stay as
    they are; the page on screen is finished (the message being edited, or a new one in place of
    the draft) and what does not fit follows in messages of its own."""
    stopped = f"<i>{esc(words.tr(STOPPED))}</i>"
    text = f"{esc(streamed.rest)}\n\n{stopped}" if streamed.rest.strip() else stopped
    if streamed.open_message is not None and await edit_by_id(context, chat_id, streamed.open_message, text):
        return
    first = not streamed.message_ids  # the first message kb sends for this answer replies to the question
    await say(context, chat_id, text, reply_to=question.message_id if question and first else None)


async def on_search(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Go to the web even when local evidence exists."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    question = " ".join(context.args or []).strip()
    if not question:
        await say(context, chat_id, esc(words_of(deps, chat_id).tr("Usage: /search your question")))
        return
    async with deps.locks[chat_id]:
        async with typing(context, chat_id):
            language = words_of(deps, chat_id).language
            reply = await deps.engine.search_web(
                question, chat_id=str(chat_id), force=True, language=language
            )
        await send_reply(
            context, chat_id, reply, chat_key=str(chat_id), reply_to=update.effective_message.message_id
        )


async def on_import(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/import web-N: the same as tapping its button."""
    chat_id = update.effective_chat.id
    args = context.args or []
    words = words_of(deps_of(context), chat_id)
    if not args:
        await say(context, chat_id, esc(words.tr("Usage: /import web-2")))
        return
    status = await say(context, chat_id, italic(words.tr("{id}: starting…", id=args[0])))
    await run_import(context, chat_id, args[0], *args[1:], status_message=status)


async def on_callback(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A tapped candidate: checked and answered at once (Telegram expires callbacks), then imported in turn."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    words = words_of(deps, chat_id)
    parsed = parse_callback(query.data)
    if parsed is None:
        await query.answer(refused("expired", words), show_alert=True)
        return
    search_id, source_id = parsed
    try:
        select(deps.store, str(chat_id), source_id, search_id=search_id)
    except ImportRefused as exc:
        await query.answer(refused(exc.reason, words), show_alert=True)
        return
    if (search_id, source_id) in deps.taps:  # a double tap: the first one is importing it
        await query.answer(words.tr("{id} is already being imported", id=source_id))
        return
    deps.taps.add((search_id, source_id))
    await query.answer(words.tr("importing {id}…", id=source_id))
    message = query.message if isinstance(query.message, Message) else None
    try:
        head = message.text_html if message is not None and message.text else ""
        await run_import(context, chat_id, source_id, search_id=search_id, status_message=message, head=head)
    finally:
        deps.taps.discard((search_id, source_id))  # tapped again later, it imports again (or says why not)


async def run_import(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    source_id: str,
    *extra: str,
    search_id: str | None = None,
    status_message: Message | None = None,
    head: str = "",
) -> None:
    """Import, showing downloading → converting → indexed (or why not) in ``status_message``: under
    the candidates (``head``, which stay, the tapped one marked) when it is their list; then answer
    the question again from the page imported."""
    deps = deps_of(context)
    words = words_of(deps, chat_id)
    record = deps.store.latest(str(chat_id), include_expired=True)
    if record is not None and search_id is not None and record.search_id != search_id:
        record = None

    async def show(state: str, mark: str = IMPORTING) -> None:
        if status_message is None:
            return
        step = words.tr(LABELLED, name=source_id, what=progress(state, words))
        text = (head + "\n\n" if head else "") + f"<i>{esc(step)}</i>"
        votes = await kept_votes(deps, chat_id, status_message.reply_markup, words)  # as the vote stands now
        await edit(
            context, status_message, text, reply_markup=with_votes(_marked(record, source_id, mark), votes)
        )

    async with deps.locks[chat_id]:
        try:
            result = await import_web_source(
                source_id, *extra, chat_id=str(chat_id), settings=deps.settings, store=deps.store,
                fetch=deps.fetch, search_id=search_id, wait_s=deps.settings.import_wait_s,
                clock=lambda: datetime.now(UTC), progress=show,
            )  # fmt: skip
        except ImportRefused as exc:  # the choice itself: trying it again changes nothing
            log.info("bot.import_refused", reason=exc.reason, source_id=source_id)
            await show(words.tr("refused: {why}", why=refused(exc.reason, words)), FAILED)
            return
        except FetchRefused as exc:
            why = refused(exc.reason, words)
            await show(
                words.tr("refused: {why} — tap it again, or /import {id}", why=why, id=source_id), FAILED
            )
            return
    if result.status == "indexed":
        chunks = words.ntr("{n} chunk", "{n} chunks", result.chunks or 0)
        said = (
            words.tr(UPDATED, chunks=chunks, title=result.title)
            if result.is_replacement
            else words.tr("indexed, {chunks} — {title}", chunks=chunks, title=result.title)
        )
        await show(said, IMPORTED)
    elif result.status == "already":
        await show(words.tr("already imported — {title}", title=result.title), IMPORTED)
    elif result.status == "queued":
        await show(words.tr("queued: it is indexed when the daemon runs (kb daemon)"))
        return
    else:
        await show(
            words.tr("failed: kb could not read the page — tap it again, or /import {id}", id=source_id),
            FAILED,
        )
        return
    # the owner chose this page: the question is answered from it (never the same candidates again)
    await answer(context, chat_id, result.question, question=None, document=result.doc_id)


def _marked(record, source_id: str, mark: str) -> InlineKeyboardMarkup | None:
    """The candidates' buttons, the tapped one marked (importing, imported, failed: tap to retry)."""
    return keyboard(record, marks={source_id: mark}) if record is not None else None
