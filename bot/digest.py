"""kb speaks first: /digest, and the digest sent on KB_DIGEST's schedule.

A digest covers what came in since the last one sent to the chat (a week back the first time),
with an Open button per document. The schedule runs on python-telegram-bot's job queue, in this
machine's time zone as a ZoneInfo (its rules, summer time included: 08:00 stays 08:00 after the
clocks change, where a fixed UTC offset would come an hour off); a digest that fell due while the
bot was not running is sent once at start, and never twice: the time of the last one sent is kept
per chat in the conversation store.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, tzinfo
from datetime import time as day_time

import structlog
import tzlocal
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import Application, ContextTypes

from bot.converse import key_of
from bot.deps import BotDeps, deps_of, words_of
from bot.render import bold, esc, italic
from bot.send import say
from knowledge.report.digest import Digest, digest_of, last_due, parse_schedule, since_last
from knowledge.words.digest import digest_sections, digest_title, nothing_new

log = structlog.get_logger()

MAX_BUTTONS = 12  # Open buttons under a digest (the rest are in /find)
MAX_CHARS = 3600  # of the digest's message, markup included: under Telegram's 4,096 characters
MISSED_AFTER_S = 3.0  # a digest missed while the bot was down goes this long after start


async def on_digest(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/digest: what came in since the last digest."""
    await send_digest(context, update.effective_chat.id)


async def send_digest(context: ContextTypes.DEFAULT_TYPE, chat_id: int) -> None:
    """The digest for a chat since the last one sent to it, sent, and remembered as sent (before the next
    one starts: two /digest in a row must not both show what came in)."""
    deps = deps_of(context)
    async with deps.digesting:
        await _send_digest(deps, context, chat_id)


async def _send_digest(deps: BotDeps, context: ContextTypes.DEFAULT_TYPE, chat_id: int) -> None:
    store = deps.conversing.store if deps.conversing is not None else None
    now = time.time()
    until = datetime.fromtimestamp(now, UTC)
    last = await asyncio.to_thread(store.last_digest, key_of(chat_id)) if store is not None else None
    since = since_last(last, until)
    asked = (  # this chat's questions only: another allowed user's are theirs
        await asyncio.to_thread(store.unanswered, since.timestamp(), now, keys=key_of(chat_id))
        if store is not None
        else []
    )
    digest = await asyncio.to_thread(digest_of, deps.settings.index_path, asked, since=since, until=until)
    text, markup = digest_html(deps, chat_id, digest)
    await say(context, chat_id, text, reply_markup=markup)
    if store is not None:
        await asyncio.to_thread(store.digest_sent, key_of(chat_id), now)
    log.info("bot.digest", documents=sum(len(v) for v in digest.groups.values()), unanswered=len(digest.unanswered),
             resurfaced=digest.resurfaced is not None)  # fmt: skip


def digest_html(deps: BotDeps, chat_id: int, digest: Digest) -> tuple[str, InlineKeyboardMarkup | None]:
    """The digest as a message: sections in bold, each document numbered, with Open buttons."""
    w = words_of(deps, chat_id)
    if digest.is_empty:
        return esc(nothing_new(digest, w)), None
    out = [bold(digest_title(digest, w))]
    buttons = []
    n = 0
    for section in digest_sections(digest, w):
        out.append("\n" + bold(section.heading))
        left_out = 0
        for line in section.lines:
            shown = (f"{n + 1}. {esc(line.text)}" if line.doc_id else f"• {esc(line.text)}") + (
                f"\n    {italic(line.summary)}" if line.summary else ""
            )
            if sum(len(x) + 1 for x in out) + len(shown) > MAX_CHARS:  # one message: the rest is in /find
                left_out += 1
                continue
            out.append(shown)
            if line.doc_id is None:
                continue
            n += 1
            if len(buttons) < MAX_BUTTONS:
                data = deps.actions.add(chat_id, "open", doc_id=line.doc_id, chunk_id=None)
                buttons.append(InlineKeyboardButton(w.tr("Open {n}", n=n), callback_data=data))
        if left_out:
            out.append(esc(w.ntr("…and {n} more", "…and {n} more", left_out)))
    markup = (
        InlineKeyboardMarkup([buttons[i : i + 4] for i in range(0, len(buttons), 4)]) if buttons else None
    )
    return "\n".join(out), markup


def machine_zone() -> tzinfo:
    """This machine's time zone with its rules (a ZoneInfo from TZ or /etc/localtime); a fixed offset
    only when the system names no zone."""
    try:
        return tzlocal.get_localzone()
    except Exception as exc:  # noqa: BLE001 - tzlocal raises several kinds for a system without a zone
        log.warning("bot.digest_zone_unknown", error=str(exc)[:200])
        return datetime.now().astimezone().tzinfo or UTC


def schedule_digests(app: Application, deps: BotDeps, *, zone: tzinfo | None = None) -> None:
    """Send the digest on KB_DIGEST's schedule to every allowed user (their private chats), and the
    one that fell due while the bot was not running, once, now; ``zone``: this machine's by default."""
    schedule = parse_schedule(deps.settings.digest)
    if schedule is None or app.job_queue is None:
        return
    zone = zone or machine_zone()
    at = day_time(schedule.hour, schedule.minute, tzinfo=zone)
    days = tuple(range(7)) if schedule.weekday is None else ((schedule.weekday + 1) % 7,)  # PTB: 0 = Sunday
    for user in deps.allowed_users:
        app.job_queue.run_daily(_scheduled, at, days=days, chat_id=user, name=f"digest-{user}")
        app.job_queue.run_once(_missed, MISSED_AFTER_S, chat_id=user, name=f"digest-missed-{user}", data=zone)
    log.info(
        "bot.digest_scheduled", schedule=deps.settings.digest, users=len(deps.allowed_users), zone=str(zone)
    )


async def _scheduled(context: ContextTypes.DEFAULT_TYPE) -> None:
    await send_digest(context, context.job.chat_id)


async def _missed(context: ContextTypes.DEFAULT_TYPE) -> None:
    """At start: the digest that fell due while the bot was down, if it was not sent."""
    deps = deps_of(context)
    schedule = parse_schedule(deps.settings.digest)
    if schedule is None or deps.conversing is None:
        return
    due = last_due(schedule, datetime.now(context.job.data))
    last = await asyncio.to_thread(deps.conversing.store.last_digest, key_of(context.job.chat_id))
    missed = last is not None and last < due.timestamp()  # never sent: the schedule starts from now
    if missed:
        log.info("bot.digest_missed", due=due.isoformat(timespec="minutes"))
        await send_digest(context, context.job.chat_id)
    log.info("bot.digest_checked", due=due.isoformat(timespec="minutes"), sent=missed)
