"""Keeping things from the chat: forwards, albums, /note, a link with a comment.

A forwarded message is saved, not answered. Messages forwarded together (Telegram sends one update
each, a moment apart) are gathered per chat until the chat is quiet (bot.forwards reads them):
their text becomes one Markdown note, their photos one document (a multi-page PDF for an album),
each file kept with its caption. Everything goes into the inbox with a sidecar (the daemon stays the
only writer) before the reply says "Saved"; the reply is edited once the daemon has indexed it
(bot.follow waits for it), and carries "Ask about it" and "Undo" buttons. The same bytes kept
before are "Already kept".
"""

from __future__ import annotations

import asyncio
import errno
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import structlog
from telegram import InlineKeyboardMarkup, Message, Update
from telegram.ext import ContextTypes, filters

from bot.answer import answer
from bot.converse import key_of, remember_document
from bot.deps import BotDeps, deps_of, words_of
from bot.follow import follow_ingest
from bot.forwards import entities_of, gather, piece_of, shifted, still_kept
from bot.kept import ASK, Kept, buttons
from bot.media import add_summary, read_back, reading_text
from bot.render import esc, italic
from bot.send import edit, say
from knowledge.conversation.store import KeptForward
from knowledge.errors import FetchRefused, IndexError_
from knowledge.ingest.handoff import deliver, failure_reason, ingest_record, withdraw
from knowledge.ingest.lock import holder
from knowledge.ingest.note import Footer, Piece, forward_key, iso, link_and_comment, note_file
from knowledge.ingest.raw import sha256_hex
from knowledge.ingest.requests import ask_daemon
from knowledge.store.index import Index
from knowledge.websearch.importer import ImportRefused, import_web_source
from knowledge.words.catalog import LABELLED, N_
from knowledge.words.reasons import not_read, progress, refused

log = structlog.get_logger()

FORWARDED, VOICE_NOTE, SECONDS, DATED = (
    N_("forwarded from {name}"),
    N_("voice note"),
    N_("({n} s)"),
    N_("{line}, {when}"),
)
WAITING = N_("Waiting for the daemon: it will be indexed when it starts (kb daemon).")
_COMMAND = re.compile(r"/\S+\s*")


class _InAlbum(filters.MessageFilter):
    """A photo that is part of an album (media_group_id): kept with the others as one document."""

    def filter(self, message: Message) -> bool:
        return message.media_group_id is not None and bool(message.photo)


class _LinkWithComment(filters.MessageFilter):
    """One link with a comment before or after it (not a question about it)."""

    def filter(self, message: Message) -> bool:
        return message.text is not None and link_and_comment(message.text) is not None


IN_ALBUM = _InAlbum(name="InAlbum")
LINK_WITH_COMMENT = _LinkWithComment(name="LinkWithComment")


# -- handlers -------------------------------------------------------------------------------


async def on_forward(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A forwarded message or an album photo: gathered with the others sent with it, then kept."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    flush = partial(keep_batch, context, chat_id, update.effective_user.id)
    spawn = partial(context.application.create_task, update=update)  # a failure reaches on_error
    deps.collector.add(chat_id, update.effective_message, flush, spawn=spawn)


async def on_note(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/note text… keeps the text; /note as a reply to one of the owner's messages keeps that one."""
    chat_id, message = update.effective_chat.id, update.effective_message
    w = words_of(deps_of(context), chat_id)
    text = message.text or ""
    cut = _COMMAND.match(text)
    rest = text[cut.end() :] if cut else ""
    target = message.reply_to_message
    if rest.strip():
        piece = Piece(rest, shifted(entities_of(message.entities), len(text) - len(rest)))
    elif target is not None:
        if target.from_user is None or target.from_user.id != update.effective_user.id:
            await say(context, chat_id, esc(w.tr("Reply with /note to one of your own messages to keep it.")))
            return
        piece = piece_of(target)
        if not piece.text.strip():
            await say(context, chat_id, esc(w.tr("That message has no text to keep.")))
            return
    else:
        await say(
            context, chat_id, esc(w.tr("Usage: /note your text — or reply /note to a message of yours."))
        )
        return
    note = note_file(
        [piece], kind="forward" if piece.origin else "note", footer=footer_of(deps_of(context), chat_id)
    )
    sidecar = {**note.sidecar, "origin_type": note.sidecar.get("origin_type", "note")}
    sidecar.setdefault("origin_date", iso(message.date or datetime.now(UTC)))
    await keep(context, chat_id, note.name, note.data, _sidecar("telegram note", note.name, update.effective_user.id, sidecar),
               note.title)  # fmt: skip


async def on_link_comment(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A link with a comment: the page is imported and the comment kept in its front matter."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    url, comment = link_and_comment(update.effective_message.text or "") or ("", "")
    record = deps.store.save_url(str(chat_id), url, comment=comment)
    w = words_of(deps, chat_id)
    status = await say(context, chat_id, italic(w.tr("{id}: starting…", id=url)))

    async def show(state: str) -> None:
        await edit(context, status, italic(w.tr(LABELLED, name=url, what=progress(state, w)) + "…"))

    async with deps.locks[chat_id]:
        try:
            result = await import_web_source(
                "web-1", chat_id=str(chat_id), settings=deps.settings, store=deps.store, fetch=deps.fetch,
                search_id=record.search_id, wait_s=deps.settings.import_wait_s,
                clock=lambda: datetime.now(UTC), progress=show,
            )  # fmt: skip
        except (ImportRefused, FetchRefused) as exc:
            await edit(
                context, status, esc(w.tr("Not kept: {title} — {why}", title=url, why=refused(exc.reason, w)))
            )
            return
    if result.status == "already":
        await _already(context, chat_id, result.doc_id or "", result.title or url, status=status)
    elif result.status == "indexed":
        item = Kept(chat_id, result.title or url, None, None, result.doc_id, "indexed")
        token = deps.kept.add(item)
        log.info("capture.saved", kind="link", doc_id=result.doc_id, comment_chars=len(comment))
        chunks = w.ntr("{n} chunk", "{n} chunks", result.chunks or 0)
        done = (
            w.tr("Saved: {title}", title=item.title)
            + "\n"
            + w.tr("Indexed, {chunks}, with your comment.", chunks=chunks)
        )
        await edit(context, status, esc(done), reply_markup=buttons(token, w))
        if result.doc_id:
            await remember_document(deps, chat_id, [status.message_id], result.doc_id, item.title)
            still = lambda: item.state == "indexed"  # noqa: E731 - undone meanwhile: the reply says so
            deps.kept.follow(
                add_summary(
                    context, deps, status, esc(done), buttons(token, w), result.doc_id, w, still=still
                )
            )
    elif result.status == "queued" and result.kept_at:
        path = Path(result.kept_at)
        item = Kept(chat_id, url, path, result.sha256)
        token = deps.kept.add(item)
        log.info("capture.saved", kind="link", file=path.name, comment_chars=len(comment))
        await edit(context, status, saved_text(deps, item), reply_markup=buttons(token, w))
        deps.kept.follow(follow(context, deps, item, token, status))
    else:
        why = w.tr("kb could not read the page")
        await edit(context, status, esc(w.tr("Not kept: {title} — {why}", title=url, why=why)))


async def on_kept_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """ "Ask about it" and "Undo" under something saved."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    found = deps.kept.find(chat_id, query.data or "")
    if found is None:
        await query.answer(words_of(deps, chat_id).tr("this button has expired"), show_alert=True)
        return
    action, item, token = found
    status = query.message if isinstance(query.message, Message) else None
    if action == ASK:
        await ask_about(context, deps, query, item)
    else:
        await undo(context, deps, query, item, token, status)


# -- batches of forwards --------------------------------------------------------------------


async def keep_batch(context: ContextTypes.DEFAULT_TYPE, chat_id: int, user_id: int, batch: list) -> None:
    """Messages forwarded together: text (and voice transcripts) as one note per sender, photos as one
    document per album, each file on its own."""
    got = await gather(context, chat_id, batch)
    for group in got.notes:
        await keep_forwards(context, chat_id, user_id, group)
    for name, payload, title, fields in got.albums:
        await keep(context, chat_id, name, payload, _sidecar("telegram album", name, user_id, fields), title)
    for name, payload, fields in got.files:
        await keep(context, chat_id, name, payload, _sidecar("telegram forward", name, user_id, fields), name)


async def keep_forwards(
    context: ContextTypes.DEFAULT_TYPE, chat_id: int, user_id: int, pieces: list[Piece]
) -> None:
    """One sender's forwards as a note, without the messages kept before (alone or in an earlier
    note: known by their origin); "Already kept" when all of them were."""
    deps = deps_of(context)
    keyed = [(forward_key(p), p) for p in pieces]
    earlier = await asyncio.to_thread(still_kept, deps, chat_id, [key for key, _ in keyed])
    fresh = [(key, p) for key, p in keyed if key not in earlier]
    if not fresh:
        doc_id, title = next(iter(earlier.values()))
        log.info("capture.duplicate", doc_id=doc_id, messages=len(pieces), seen="origin")
        await _already(context, chat_id, doc_id or "", title)
        return
    note = note_file([p for _, p in fresh], kind="forward", footer=footer_of(deps, chat_id))
    sidecar = _sidecar("telegram forward", note.name, user_id, note.sidecar)
    item = await keep(context, chat_id, note.name, note.data, sidecar, note.title)
    if item is not None and item.path is not None and deps.conversing is not None:
        kept = KeptForward(str(item.path), item.sha256 or "", note.title)
        keys = [key for key, _ in fresh]
        await asyncio.to_thread(deps.conversing.store.keep_forwards, key_of(chat_id), keys, kept)


# -- saving and following -------------------------------------------------------------------


async def keep(
    context: ContextTypes.DEFAULT_TYPE, chat_id: int, name: str, payload: bytes, sidecar: dict, title: str
) -> Kept | None:
    """Into the inbox (or "Already kept" when these bytes are a document), "Saved", then followed;
    what was saved (None when nothing was)."""
    deps = deps_of(context)
    w = words_of(deps, chat_id)
    sha = await asyncio.to_thread(sha256_hex, payload)  # up to 20 MB: off the event loop
    existing = await asyncio.to_thread(kept_before, deps.settings.index_path, sha)
    if existing is not None:
        log.info("capture.duplicate", doc_id=existing[0], sha256=sha[:16], seen="index")
        await _already(context, chat_id, *existing)
        return None
    try:
        path = await asyncio.to_thread(
            deliver, deps.settings.inbox, name, payload, sidecar, staging=deps.settings.staging
        )
    except OSError as exc:
        log.error("capture.failed", file=name, error=str(exc))
        why = w.tr("the disk is full") if exc.errno == errno.ENOSPC else w.tr("it could not be written")
        await say(context, chat_id, esc(w.tr("Not kept: {title} — {why}", title=title, why=why)))
        return None
    log.info("capture.saved", kind=sidecar.get("source"), file=path.name, sha256=sha[:16], bytes=len(payload))
    item = Kept(chat_id, title, path, sha)
    token = deps.kept.add(item)
    status = await say(context, chat_id, saved_text(deps, item), reply_markup=buttons(token, w))
    deps.kept.follow(follow(context, deps, item, token, status))
    return item


def saved_text(deps: BotDeps, item: Kept) -> str:
    """ "Saved: <title>", and that it waits for the daemon when the daemon is not running."""
    waiting = holder(deps.settings.lock_path) is None
    w = words_of(deps, item.chat_id)
    return esc(w.tr("Saved: {title}", title=item.title) + (f"\n{w.tr(WAITING)}" if waiting else ""))


async def follow(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, item: Kept, token: str, status: Message
) -> None:
    """Wait for the daemon's record of a saved thing and edit its reply to say what became of it."""
    still = lambda: item.state == "inbox"  # noqa: E731 - undone meanwhile: nothing to say
    record = await follow_ingest(deps.settings, item.path, item.sha256, is_wanted=still)
    if record is None or item.state != "inbox":
        return  # undone meanwhile, or still waiting after a day: /status tells
    await settle(context, deps, item, token, status, record)


async def settle(
    context: ContextTypes.DEFAULT_TYPE,
    deps: BotDeps,
    item: Kept,
    token: str,
    status: Message | None,
    record: dict,
) -> None:
    """The reply once the daemon has done it: indexed, already kept, or not kept and why; a document
    kept is what the conversation is about from now on (and what a reply to its message asks)."""
    item.doc_id = record["doc_id"]
    w = words_of(deps, item.chat_id)
    if record["status"] in ("indexed", "duplicate") and item.doc_id:
        shown = [status.message_id] if status is not None else []
        await remember_document(deps, item.chat_id, shown, item.doc_id, record["title"] or item.title)
    if record["status"] == "indexed":
        item.state, item.title = "indexed", record["title"] or item.title
        log.info("capture.indexed", doc_id=item.doc_id, chunks=record["chunks"])
        chunks = w.ntr("{n} chunk", "{n} chunks", record["chunks"] or 0)
        text = esc(
            w.tr("Saved: {title}", title=item.title) + "\n" + w.tr("Indexed, {chunks}.", chunks=chunks)
        )
        reading = read_back(deps.settings.raw.parent / record["raw_path"]) if record.get("raw_path") else None
        if reading is not None:
            text += "\n" + reading_text(reading, w)
        await _show(context, item.chat_id, status, text, buttons(token, w))
        if item.doc_id:
            still = lambda: item.state == "indexed"  # noqa: E731 - undone meanwhile: the reply says so
            deps.kept.follow(
                add_summary(context, deps, status, text, buttons(token, w), item.doc_id, w, still=still)
            )
    elif record["status"] == "duplicate":
        item.state, item.title = "duplicate", record["title"] or item.title
        log.info("capture.duplicate", doc_id=item.doc_id, sha256=(item.sha256 or "")[:16], seen="pipeline")
        text = esc(w.tr("Already kept: {title}", title=item.title))
        await _show(context, item.chat_id, status, text, buttons(token, w, undo=False))
    else:
        item.state = "failed"
        log.warning("capture.failed", file=item.path.name if item.path else None, error=record["error"])
        why = not_read(failure_reason(deps.settings.failed, item.path.name)[0] if item.path else None, w)
        await _show(
            context, item.chat_id, status, esc(w.tr("Not kept: {title} — {why}", title=item.title, why=why))
        )


async def _already(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    doc_id: str,
    title: str,
    *,
    status: Message | None = None,
) -> None:
    deps = deps_of(context)
    token = deps.kept.add(Kept(chat_id, title, None, None, doc_id, "duplicate"))
    w = words_of(deps, chat_id)
    text = esc(w.tr("Already kept: {title}", title=title))
    shown = await _show(context, chat_id, status, text, buttons(token, w, undo=False))
    if doc_id:
        await remember_document(deps, chat_id, [shown], doc_id, title)


def kept_before(index_path: Path, sha256: str) -> tuple[str, str] | None:
    """(doc_id, title) of the document made from these exact bytes, if there is one."""
    try:
        with Index(index_path, readonly=True) as index:
            doc = index.document_by_source_sha256(sha256)
    except IndexError_:  # unknown: keep it anyway, the daemon finds a duplicate when it indexes it
        return None
    return (doc.id, doc.title) if doc else None


# -- the buttons ----------------------------------------------------------------------------


async def ask_about(context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, query, item: Kept) -> None:
    """ "Ask about it": what the saved document says, answered from it alone."""
    chat_id = item.chat_id
    w = words_of(deps, chat_id)
    if item.state == "undone":
        await query.answer(w.tr("it was undone"), show_alert=True)
        return
    if item.doc_id is None:
        await query.answer(w.tr("not indexed yet — tap again once it is"), show_alert=True)
        return
    await query.answer()
    question = w.tr("What does “{title}” say?", title=item.title)  # asked in the owner's language
    await answer(context, chat_id, question, question=None, document=item.doc_id)


async def undo(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, query, item: Kept, token: str, status: Message | None
) -> None:
    """ "Undo": out of the inbox when not yet indexed, else removed by the daemon (kept in its trash)."""
    w = words_of(deps, item.chat_id)
    if item.state in ("undone", "duplicate", "failed"):
        await query.answer(w.tr("nothing to undo"), show_alert=False)
        return
    await query.answer(w.tr("undoing…"))
    if item.state == "inbox":
        taken, record = await asyncio.to_thread(take_back, deps, item)
        if taken:
            item.state = "undone"
            log.info("capture.undone", where="inbox", file=item.path.name if item.path else None)
            text = esc(w.tr("Undone: {title} was taken out of the inbox.", title=item.title))
            await _show(context, item.chat_id, status, text)
            return
        if record is None and item.path is not None:  # the daemon has it in hand: its record comes soon
            record = await follow_ingest(
                deps.settings, item.path, item.sha256 or "", wait_s=deps.settings.import_wait_s
            )
        if record is None:
            text = esc(
                w.tr("{title} is being indexed right now: tap Undo again in a moment.", title=item.title)
            )
            await _show(context, item.chat_id, status, text, buttons(token, w))
            return
        await settle(context, deps, item, token, status, record)  # the reply says what it became
        if item.state != "indexed":
            return
    change = await asyncio.to_thread(
        ask_daemon, deps.settings, "remove", item.doc_id, wait_s=deps.settings.import_wait_s
    )
    log.info("capture.undone", where="index", doc_id=item.doc_id, status=change.status)
    if change.status == "done":
        item.state = "undone"
        text = w.tr("Undone: {title} was removed (its original is in the trash).", title=item.title)
    elif change.status == "waiting":
        text = w.tr("Undo asked: {title} will be removed when the daemon runs (kb daemon).", title=item.title)
    else:
        text = w.tr(
            "Could not undo {title}: the daemon refused it (kb logs on {computer} says why).",
            title=item.title,
        )
    await _show(context, item.chat_id, status, esc(text))


def take_back(deps: BotDeps, item: Kept) -> tuple[bool, dict | None]:
    """Take a saved file out of the inbox: (taken out, the daemon's record when it got there first).
    Neither: the daemon has the file in hand and has not recorded it yet."""
    path = item.path
    record = ingest_record(deps.settings.index_path, str(path), item.sha256 or "")
    if record is not None or path is None:
        return False, record
    return withdraw(path, item.sha256 or "", staging=deps.settings.staging), None


async def _show(
    context: ContextTypes.DEFAULT_TYPE,
    chat_id: int,
    status: Message | None,
    text: str,
    markup: InlineKeyboardMarkup | None = None,
) -> int:
    """The status message edited to ``text`` (a new message when there is none); its id."""
    if status is not None:
        await edit(context, status, text, reply_markup=markup)
        return status.message_id
    return (await say(context, chat_id, text, reply_markup=markup)).message_id


def footer_of(deps: BotDeps, chat_id: int) -> Footer:
    """Where a kept message came from, in the owner's words and time zone (the line under it in the note)."""
    w = words_of(deps, chat_id)
    return Footer(w.tr(FORWARDED), w.tr(VOICE_NOTE), w.tr(SECONDS), w.tr(DATED), deps.zone)


def _sidecar(source: str, name: str, user_id: int, fields: dict) -> dict:
    """The sidecar: where it came from (the pipeline copies origin_* and comment into raw/)."""
    return {"source": source, "file_name": name, "telegram_user_id": user_id, **fields}
