"""👍 / 👎 under each answer: a row added to the answer's own buttons (Sources, the web candidates).

A tap records the vote (knowledge.feedback) and redraws the row to show it; a tap on the other one
changes it. After 👎 on an answer that did not come from the web, a "Search the web" button starts the
usual web search for the question searched. The buttons carry ``fb:<token>:<u|d|w>``; the token names
the answer in the conversation file, reached only from the chat it was given in: a forged, foreign
or forgotten one gets a short alert and changes nothing.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import structlog
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.converse import key_of
from bot.deps import BotDeps, deps_of, words_of
from bot.send import send_reply, typing
from knowledge.conversation.session import Answered
from knowledge.conversation.store import ConversationError
from knowledge.feedback.record import BAD, GOOD, Vote, rated
from knowledge.feedback.store import FeedbackRefused
from knowledge.words.catalog import N_, Words

log = structlog.get_logger()

CALLBACK_PREFIX = "fb:"
_DATA = re.compile(r"fb:([A-Za-z0-9_-]{12}):([udw])")
UP, DOWN, CHOSEN = "👍", "👎", " ✓"
SEARCH_WEB = N_("Search the web")
THANKS = N_("Thanks — noted.")
CHANGED = N_("Changed — noted.")
ALREADY = N_("Already noted.")
SEARCHING = N_("searching the web…")
REFUSED = {
    "expired": N_("this button has expired"),
    "other-chat": N_("this button belongs to another chat"),
    "unsaved": N_("the vote could not be saved (is the disk full?)"),
}


def vote_rows(token: str, vote: int | None, words: Words, *, web: bool) -> list[list[InlineKeyboardButton]]:
    """The 👍 / 👎 row (the one voted for marked) and, after 👎 when ``web``, the web search button."""
    rows = [
        [
            InlineKeyboardButton(UP + (CHOSEN if vote == GOOD else ""), callback_data=f"fb:{token}:u"),
            InlineKeyboardButton(DOWN + (CHOSEN if vote == BAD else ""), callback_data=f"fb:{token}:d"),
        ]
    ]
    if vote == BAD and web:
        rows.append([InlineKeyboardButton("🔎 " + words.tr(SEARCH_WEB), callback_data=f"fb:{token}:w")])
    return rows


def parse_vote(data: str | None) -> tuple[str, str] | None:
    """(token, ``u`` / ``d`` / ``w``) from a vote button's data; None for anything else."""
    m = _DATA.fullmatch(data or "")
    return (m.group(1), m.group(2)) if m else None


def with_votes(
    markup: InlineKeyboardMarkup | None, rows: Sequence[Sequence[InlineKeyboardButton]]
) -> InlineKeyboardMarkup | None:
    """A message's buttons with its vote rows replaced by ``rows`` (the others kept as they are)."""
    kept = [row for row in (markup.inline_keyboard if markup else ()) if not _is_vote_row(row)]
    return InlineKeyboardMarkup([*kept, *rows]) if kept or rows else None


def _is_vote_row(row: Sequence[InlineKeyboardButton]) -> bool:
    return any(str(b.callback_data or "").startswith(CALLBACK_PREFIX) for b in row)


def _offers_web(vote: Vote) -> bool:
    return vote.rated.door != "web"


async def offer_votes(
    deps: BotDeps, chat_id: int, question: str, answered: Answered, words: Words
) -> list[list[InlineKeyboardButton]]:
    """The vote row for an answer about to be sent, once the answer is kept to be voted on (none
    when the conversation file cannot be written: the answer goes out all the same)."""
    if deps.feedback is None:
        return []
    about = rated(question, answered.plan.standalone, answered.reply)
    try:
        token = await asyncio.to_thread(deps.feedback.offer, key_of(chat_id), about)
    except ConversationError as exc:
        log.warning("feedback.not_offered", reason=exc.reason, error=str(exc))
        return []
    return vote_rows(token, None, words, web=about.door != "web")


async def kept_votes(
    deps: BotDeps, chat_id: int, markup: InlineKeyboardMarkup | None, words: Words
) -> list[list[InlineKeyboardButton]]:
    """The vote rows of a message being redrawn (an import's progress under the candidates), as the
    vote now stands; none when it has none or its answer is forgotten."""
    token = next(
        (parsed[0] for row in (markup.inline_keyboard if markup else ()) for b in row
         if (parsed := parse_vote(str(b.callback_data or ""))) is not None),
        None,
    )  # fmt: skip
    if token is None or deps.feedback is None:
        return []
    try:
        vote = await asyncio.to_thread(deps.feedback.get, key_of(chat_id), token)
    except (FeedbackRefused, ConversationError):
        return []
    return vote_rows(token, vote.vote, words, web=_offers_web(vote))


async def on_vote(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A tapped 👍, 👎 or "Search the web" (``fb:<token>:<u|d|w>``)."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    words = words_of(deps, chat_id)
    parsed = parse_vote(query.data)
    if parsed is None or deps.feedback is None:
        log.warning("feedback.refused", reason="malformed", chat=key_of(chat_id))
        await query.answer(words.tr(REFUSED["expired"]), show_alert=True)
        return
    token, act = parsed
    message = query.message if isinstance(query.message, Message) else None
    try:
        if act == "w":
            await _search_web(context, deps, chat_id, token, query, message, words)
            return
        cast = await asyncio.to_thread(
            deps.feedback.cast, key_of(chat_id), token, GOOD if act == "u" else BAD
        )
    except FeedbackRefused as exc:
        await query.answer(words.tr(REFUSED[exc.reason]), show_alert=True)
        return
    except ConversationError:
        await query.answer(words.tr(REFUSED["unsaved"]), show_alert=True)
        return
    said = THANKS if cast.previous is None else CHANGED if cast.is_change else ALREADY
    await query.answer(words.tr(said))
    if message is not None and cast.previous != cast.vote.vote:  # an old message comes without its buttons
        rows = vote_rows(token, cast.vote.vote, words, web=_offers_web(cast.vote))
        await _redraw(context, chat_id, message, with_votes(message.reply_markup, rows))


async def _search_web(context, deps: BotDeps, chat_id: int, token: str, query, message, words: Words) -> None:
    """After 👎: the usual web search for the question searched, its candidates as a reply to the answer."""
    vote = await asyncio.to_thread(deps.feedback.get, key_of(chat_id), token)
    if vote.vote != BAD or not _offers_web(vote):  # the button is not on show for this answer
        raise FeedbackRefused("no web search is offered for that answer", "expired")
    if ("fb", token) in deps.taps:  # a double tap: the first one is searching
        await query.answer(words.tr(SEARCHING))
        return
    deps.taps.add(("fb", token))
    try:
        await query.answer(words.tr(SEARCHING))
        if message is not None:  # searched once: the button goes, the vote stays
            await _redraw(
                context,
                chat_id,
                message,
                with_votes(message.reply_markup, vote_rows(token, BAD, words, web=False)),
            )
        log.info("feedback.web", door=vote.rated.door, chat=key_of(chat_id))
        async with deps.locks[chat_id]:
            async with typing(context, chat_id):
                reply = await deps.engine.search_web(
                    vote.rated.standalone, chat_id=str(chat_id), force=True, language=words.language
                )
            await send_reply(
                context,
                chat_id,
                reply,
                chat_key=str(chat_id),
                reply_to=message.message_id if message else None,
            )
    finally:
        deps.taps.discard(("fb", token))


async def _redraw(context, chat_id: int, message: Message, markup: InlineKeyboardMarkup | None) -> None:
    try:
        await context.bot.edit_message_reply_markup(chat_id, message.message_id, reply_markup=markup)
    except TelegramError as exc:  # "not modified" (a double tap), or a message too old to edit
        log.info("feedback.not_redrawn", error=str(exc)[:200])
