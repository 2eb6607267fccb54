"""Finding and managing documents from the phone: /find, Open, Delete (confirmed) and Undo, Sources.

``/find words`` lists the matching documents (title, date, source, the line that matched) a page
at a time, each with Open and Delete: those holding the words as written first, then, under a line
saying so, those related to the words without them (a word in no document is said to be in none).
Open sends the passage with its lines, then the original file (a web page: its address; a folder
source's file: its Obsidian link or its path, then the file). Delete asks once more, then has the
daemon move the document to the trash (kept 30 days); Undo brings it back. Under an answer, Sources
shows the passages it used.
The daemon stays the only writer: a delete or a restore is a request it carries out
(knowledge.ingest.requests); when it is not running the reply says the request waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import structlog
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.actions import Action
from bot.converse import remember_document
from bot.deps import BotDeps, deps_of, words_of
from bot.pages import neutral
from bot.render import esc, italic, link
from bot.send import edit, say, typing
from bot.summarise import summarise_document
from knowledge.errors import ConfigError, IndexMissing
from knowledge.ingest import raw as rawfile
from knowledge.ingest.requests import Change, ask_daemon
from knowledge.retrieval.documents import DocumentMatch, match_documents
from knowledge.sources.opening import Opening, opening, read_only
from knowledge.sources.registry import config_file, read_sources
from knowledge.store.records import DocumentRecord
from knowledge.text import gap, shorten
from knowledge.websearch.filters import host_of
from knowledge.words.catalog import N_, Words
from knowledge.words.sources import OPENING

log = structlog.get_logger()

PER_PAGE = 5
SUMMARY_CHARS = 200  # of a document's summary under its line in /find
PASSAGE_CHARS = 3000
MAX_SEND_BYTES = 50 * 1024 * 1024  # the most a bot may upload
CHANGE_WAIT_S = 20.0
EXPIRED = N_("this button has expired — /find again")
DISK_FULL = N_("Not done: {computer}'s disk is full. Free some space, then tap again.")


# -- /find and its pages ----------------------------------------------------------------------


async def on_find(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/find words: the matching documents, a page at a time."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    w = words_of(deps, chat_id)
    words = " ".join(context.args or []).strip()
    if not words:
        await say(context, chat_id, esc(w.tr("Usage: /find words — lists your documents that match them.")))
        return
    async with typing(context, chat_id):
        matches = await asyncio.to_thread(_matches, deps, words)
    literal = sum(m.is_literal for m in matches)
    log.info("bot.find", words=len(words.split()), found=len(matches), literal=literal)
    if not matches:
        await say(context, chat_id, esc(w.tr("No document matches “{words}”.", words=words)))
        return
    text, markup = find_page(deps, chat_id, words, matches, 0)
    shown = await say(context, chat_id, text, reply_markup=markup)
    if len(matches) == 1:  # a reply to the list asks about the one document it found
        doc = matches[0].document
        await remember_document(deps, chat_id, [shown.message_id], doc.id, doc.title, current=False)


def _matches(deps: BotDeps, words: str) -> list[DocumentMatch]:
    try:
        index = deps.engine.open_index()
    except IndexMissing:  # an unreadable index is said as such (bot.app.on_error)
        return []
    with index:
        meaning = deps.engine.meaning
        found = match_documents(index, words, meaning=meaning, threshold=deps.engine.settings.min_relevance)
        summaries = index.summaries_of(m.document.id for m in found)
    return [
        replace(m, summary=summaries[m.document.id].text) if m.document.id in summaries else m for m in found
    ]


def find_page(
    deps: BotDeps, chat_id: int, words: str, matches: Sequence[DocumentMatch], page: int
) -> tuple[str, InlineKeyboardMarkup]:
    """One page of a /find list and its buttons (Open and Delete per document, then the pages)."""
    first = page * PER_PAGE
    shown = matches[first : first + PER_PAGE]
    w = words_of(deps, chat_id)
    count = w.ntr("{n} document", "{n} documents", len(matches))
    head = w.tr("<b>{count}</b> for “{words}”", count=esc(count), words=esc(words))
    if len(matches) > PER_PAGE:
        head += f" ({first + 1}–{first + len(shown)})"
    lines = [head]
    if not any(m.is_literal for m in matches):
        lines.insert(0, esc(w.tr("No document holds “{words}”.", words=words)))
    rows = []
    for n, m in enumerate(shown, first + 1):
        if not m.is_literal and (n == first + 1 or shown[n - first - 2].is_literal):
            lines.append(italic(w.tr("Related, without “{words}”:", words=words)))
        lines.append(
            f"{n}. {document_line(m.document, w)}"
            + (f"\n    <i>{esc(m.line)}</i>" if m.line else "")
            + (f"\n    {esc(shorten(m.summary, SUMMARY_CHARS))}" if m.summary else "")
        )
        target = {"doc_id": m.document.id, "chunk_id": m.chunk_id}
        rows.append([
            InlineKeyboardButton(w.tr("Open {n}", n=n), callback_data=deps.actions.add(chat_id, "open", **target)),
            InlineKeyboardButton(w.tr("Delete {n}", n=n), callback_data=deps.actions.add(chat_id, "delete", **target)),
            InlineKeyboardButton(w.tr("Summarise {n}", n=n),
                                 callback_data=deps.actions.add(chat_id, "summarise", doc_id=m.document.id)),
        ])  # fmt: skip
    nav = []
    paging = {"words": words, "matches": list(matches)}
    if page > 0:
        data = deps.actions.add(chat_id, "page", page=page - 1, **paging)
        nav.append(InlineKeyboardButton(w.tr("‹ Previous"), callback_data=data))
    if first + PER_PAGE < len(matches):
        data = deps.actions.add(chat_id, "page", page=page + 1, **paging)
        nav.append(InlineKeyboardButton(w.tr("Next ›"), callback_data=data))
    if nav:
        rows.append(nav)
    return "\n".join(lines), InlineKeyboardMarkup(rows)


def document_line(doc: DocumentRecord, words: Words) -> str:
    """``<b>Title</b> · Nov 30, 2026 · example.org`` (the title a link when the source has one; the date
    as the reader's language writes it)."""
    title = link(doc.source_url, doc.title) if doc.source_url else f"<b>{esc(doc.title)}</b>"
    source = host_of(doc.source_url) if doc.source_url else doc.source_name
    try:
        day = words.date(date.fromisoformat(doc.indexed_at[:10]))
    except ValueError:
        day = doc.indexed_at[:10]
    return f"{title} · {esc(day)} · {esc(source or '')}"


# -- the buttons ------------------------------------------------------------------------------


async def on_action(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A tapped Open, Delete, Undo, page or Sources button (``act:<token>``)."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    action = deps.actions.take(chat_id, query.data or "")
    if action is None:
        await query.answer(words_of(deps, chat_id).tr(EXPIRED), show_alert=True)
        return
    message = query.message if isinstance(query.message, Message) else None
    await _HANDLERS[action.kind](context, deps, chat_id, action, query, message)


async def _page(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    await query.answer()
    t = action.target
    text, markup = find_page(deps, chat_id, str(t["words"]), list(t["matches"]), int(t["page"]))
    await _show(context, chat_id, message, text, markup)


async def _open(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    """The passage with its lines, then the original file (or the page's address)."""
    w = words_of(deps, chat_id)
    await query.answer(w.tr("opening…"))
    lines = action.target.get("lines")
    wanted = (str(action.target["doc_id"]), action.target.get("chunk_id"), tuple(lines) if lines else None)
    [found] = await asyncio.to_thread(_look_up, deps, [wanted])
    if found is None:
        await say(context, chat_id, esc(w.tr("That document is no longer in your knowledge base.")))
        return
    doc, chunk = found
    summarise = deps.actions.add(chat_id, "summarise", doc_id=doc.id)
    shown = await say(
        context, chat_id, passage_html(doc, chunk, w),
        reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton(w.tr("Summarise"), callback_data=summarise)]]),
    )  # fmt: skip
    await remember_document(deps, chat_id, [shown.message_id], doc.id, doc.title, current=False)
    if doc.source_url:
        label = w.tr("Original:")
        await say(
            context, chat_id, esc(label) + gap(label, doc.source_url) + link(doc.source_url, doc.source_url)
        )
        return
    where = await asyncio.to_thread(_opening_of, deps, doc)
    if where is not None:  # a folder source's file: where to open it, then the file itself
        label = w.tr(OPENING["obsidian" if where.obsidian_url else "file"])
        await say(
            context, chat_id, esc(label) + gap(label, where.target) + f"<code>{esc(where.target)}</code>"
        )
        try:
            fh = await asyncio.to_thread(read_only, where)
        except OSError as exc:
            log.warning("bot.open_failed", doc_id=doc.id, error=str(exc))
            await say(context, chat_id, italic(w.tr(OPENING["gone"], error=exc.strerror or str(exc))))
            return
        with fh:
            await _send_file(context, chat_id, doc.id, fh, PurePosixPath(where.path).name, w)
        return
    original = original_file(deps, doc)
    if original is None:
        await say(
            context,
            chat_id,
            italic(w.tr("The original file is not kept (only its converted text).")),
        )
        return
    try:
        with open(original, "rb") as fh:
            await _send_file(context, chat_id, doc.id, fh, doc.source_name or original.name, w)
    except OSError as exc:
        log.warning("bot.open_failed", doc_id=doc.id, error=str(exc))
        await say(context, chat_id, italic(w.tr("The original could not be sent: Telegram refused it.")))


async def _send_file(context, chat_id: int, doc_id: str, fh: BinaryIO, name: str, w: Words) -> None:
    """An original sent as a file, when a bot may send it (50 MB)."""
    if os.fstat(fh.fileno()).st_size > MAX_SEND_BYTES:
        text = w.tr("The original ({name}) is over 50 MB, too large to send.", name=name)
        await say(context, chat_id, f"<i>{esc(text)}</i>")
        return
    try:
        await context.bot.send_document(chat_id, fh, filename=neutral(name))
    except (TelegramError, OSError) as exc:
        log.warning("bot.open_failed", doc_id=doc_id, error=str(exc))
        await say(context, chat_id, italic(w.tr("The original could not be sent: Telegram refused it.")))
        return
    log.info("bot.opened", doc_id=doc_id)


def _opening_of(deps: BotDeps, doc: DocumentRecord) -> Opening | None:
    """Where a folder source's document is opened (None for any other, or a kb.toml kb cannot read)."""
    try:
        sources = read_sources(config_file(deps.settings.home))
    except ConfigError:
        return None
    return opening(sources, doc.raw_path)


@dataclass(frozen=True)
class Passage:
    """Lines of a document's raw file, as cited or as one chunk."""

    start_line: int
    end_line: int
    text: str
    author: str | None = None  # the document's, from its raw file's front matter (an article's byline)
    published: str | None = None  # YYYY-MM-DD


Wanted = tuple[str, str | None, tuple[int, int] | None]  # document id, chunk id, cited lines


def _look_up(
    deps: BotDeps, wanted: Sequence[Wanted], *, passages: bool = True
) -> list[tuple[DocumentRecord, Passage | None] | None]:
    """Each (document id, chunk id, lines) in one opening of the index: the document and that passage
    (the lines cited when given, read from its raw file; else the chunk, its first when there is no
    chunk id; none without ``passages``), or None for a document gone."""
    try:
        index = deps.engine.open_index()
    except IndexMissing:  # an unreadable index is said as such (bot.app.on_error)
        return [None] * len(wanted)
    found: list[tuple[DocumentRecord, Passage | None] | None] = []
    with index:
        for doc_id, chunk_id, lines in wanted:
            doc = index.document(doc_id)
            if doc is None or not passages:
                found.append(None if doc is None else (doc, None))
                continue
            is_raw = doc.raw_path.startswith("raw/")  # a folder source's passage is its chunk
            text = _read_raw(deps.settings.raw.parent / doc.raw_path) if is_raw else None
            meta = rawfile.parse(text, fallback_name=doc.raw_path, sha256="").meta if text else None
            by = {"author": meta.author, "published": meta.published} if meta else {}
            cited = _raw_lines(text, lines, by) if lines and text else None
            if cited is not None:
                found.append((doc, cited))
                continue
            seq = rawfile.chunk_seq(chunk_id) if chunk_id else 1
            chunks = index.chunks_of(doc_id, [seq])
            found.append(
                (
                    doc,
                    Passage(chunks[0].start_line, chunks[0].end_line, chunks[0].text, **by)
                    if chunks
                    else None,
                )
            )
    return found


def _read_raw(raw_file: Path) -> str | None:
    try:
        return raw_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _raw_lines(text: str, lines: tuple[int, int], by: dict) -> Passage | None:
    """Lines ``start``–``end`` (1-based, inclusive) of a raw file's text, or None when it has none there."""
    start, end = lines
    picked = text.splitlines()[start - 1 : end]
    return Passage(start, end, "\n".join(picked).strip(), **by) if picked else None


def passage_html(doc: DocumentRecord, passage: Passage | None, words: Words) -> str:
    """The document's line and its passage: ``Title · date · source`` / who wrote it and when, for an
    article that says / ``raw/x.md:12-29`` / the text."""
    head = document_line(doc, words)
    if passage is None:
        return head
    byline = [words.tr("by {author}", author=passage.author)] if passage.author else []
    if passage.published:
        with contextlib.suppress(ValueError):  # a hand-written date kb cannot read is left out
            byline.append(words.tr("published {day}", day=words.date(date.fromisoformat(passage.published))))
    if byline:
        head += "\n<i>" + esc(" · ".join(byline)) + "</i>"
    text = passage.text if len(passage.text) <= PASSAGE_CHARS else passage.text[:PASSAGE_CHARS].rstrip() + "…"
    where = f"{doc.raw_path}:{passage.start_line}-{passage.end_line}"
    return f"{head}\n<code>{esc(where)}</code>\n\n{esc(text)}"


def original_file(deps: BotDeps, doc: DocumentRecord) -> Path | None:
    """The kept original of a document (in inbox/processed/), when it is a regular file there."""
    snapshot = doc.source_snapshot or ""
    if not snapshot.startswith("inbox/processed/"):
        return None
    path = deps.settings.processed / Path(snapshot).name  # one name: never outside processed/
    return path if path.is_file() and not path.is_symlink() else None


async def _delete(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The first tap: ask once more."""
    await query.answer()
    w = words_of(deps, chat_id)
    doc_id = str(action.target["doc_id"])
    [found] = await asyncio.to_thread(_look_up, deps, [(doc_id, None, None)], passages=False)
    if found is None:
        await say(context, chat_id, esc(w.tr("That document is no longer in your knowledge base.")))
        return
    doc = found[0]
    yes = deps.actions.add(chat_id, "delete-yes", once=True, doc_id=doc_id, title=doc.title)
    no = deps.actions.add(chat_id, "keep", once=True, title=doc.title)
    await say(
        context, chat_id,
        w.tr("Delete {document}?", document=document_line(doc, w)) + "\n"
        + esc(w.tr("It leaves search; the original is kept in the trash for 30 days.")),
        reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton(w.tr("Delete"), callback_data=yes),
                                            InlineKeyboardButton(w.tr("Keep it"), callback_data=no)]]),
    )  # fmt: skip


async def _keep(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    w = words_of(deps, chat_id)
    await query.answer(w.tr("kept"))
    if message is not None:
        await edit(context, message, w.tr("Kept: <b>{title}</b>.", title=esc(str(action.target["title"]))))


async def _delete_yes(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The confirming tap: the daemon removes the document; the reply offers Undo."""
    await query.answer(words_of(deps, chat_id).tr("deleting…"))
    title = str(action.target["title"])
    change = await asyncio.to_thread(
        ask_daemon, deps.settings, "remove", str(action.target["doc_id"]), wait_s=CHANGE_WAIT_S
    )
    text, markup = deleted_reply(deps, chat_id, title, change)
    if change.status == "failed":
        deps.actions.release(action)
    await _show(context, chat_id, message, text, markup)


def deleted_reply(
    deps: BotDeps, chat_id: int, title: str, change: Change
) -> tuple[str, InlineKeyboardMarkup | None]:
    """What a delete request came to, with Undo when it was done."""
    w = words_of(deps, chat_id)
    if change.status == "done" and change.trashed is not None:
        undo = deps.actions.add(chat_id, "undo", once=True, trash_id=change.trashed.trash_id, title=title)
        return (
            w.tr("Deleted: <b>{title}</b>. It is in the trash for 30 days.", title=esc(title)),
            InlineKeyboardMarkup([[InlineKeyboardButton(w.tr("Undo"), callback_data=undo)]]),
        )
    if change.status == "waiting":
        text = w.tr("Waiting for the daemon: “{title}” leaves your knowledge base when it runs.", title=title)
        return f"<i>{esc(text)}</i>", None
    if change.disk_full:
        return esc(w.tr(DISK_FULL)), None
    return esc(w.tr("Not deleted: the daemon refused it (kb logs on {computer} says why).")), None


async def _undo(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    """Undo a delete: the daemon puts the document back and indexes it again."""
    w = words_of(deps, chat_id)
    await query.answer(w.tr("restoring…"))
    title = str(action.target["title"])
    change = await asyncio.to_thread(
        ask_daemon, deps.settings, "restore", str(action.target["trash_id"]), wait_s=CHANGE_WAIT_S
    )
    if change.status == "done":
        text = w.tr("Restored: <b>{title}</b>, searchable again.", title=esc(change.title or title))
    elif change.status == "waiting":
        text = italic(w.tr("Waiting for the daemon: “{title}” comes back when it runs.", title=title))
    else:
        deps.actions.release(action)
        text = esc(
            w.tr(DISK_FULL)
            if change.disk_full
            else w.tr("Not restored: the daemon refused it (kb logs on {computer} says why).")
        )
    await _show(context, chat_id, message, text, None)


async def _show(
    context, chat_id: int, message: Message | None, text: str, markup: InlineKeyboardMarkup | None
) -> None:
    if message is not None:
        await edit(context, message, text, reply_markup=markup)
    else:
        await say(context, chat_id, text, reply_markup=markup)


# -- a whole document summarised ----------------------------------------------------------------


async def _summarise(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The Summarise button: the whole document (bot.summarise)."""
    await query.answer(words_of(deps, chat_id).tr("summarising…"))
    await summarise_document(context, deps, chat_id, str(action.target["doc_id"]))


# -- Sources under an answer -------------------------------------------------------------------


async def _sources(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The passages an answer used, each with its Open button."""
    await query.answer()
    w = words_of(deps, chat_id)
    cited = action.target["cited"]
    wanted = [(rawfile.chunk_document(chunk_id), chunk_id, (start, end)) for _, chunk_id, start, end in cited]
    looked_up = await asyncio.to_thread(_look_up, deps, wanted)
    for (number, chunk_id, start, end), (doc_id, _, _), found in zip(cited, wanted, looked_up, strict=True):
        if found is None:
            await say(context, chat_id, f"[{number}] " + italic(w.tr("no longer in your knowledge base")))
            continue
        doc, chunk = found
        data = deps.actions.add(chat_id, "open", doc_id=doc_id, chunk_id=chunk_id, lines=[start, end])
        await say(
            context, chat_id, f"[{number}] " + passage_html(doc, chunk, w),
            reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton(w.tr("Open [{n}]", n=number), callback_data=data)]]),
        )  # fmt: skip


_HANDLERS = {
    "page": _page,
    "open": _open,
    "delete": _delete,
    "delete-yes": _delete_yes,
    "keep": _keep,
    "undo": _undo,
    "sources": _sources,
    "summarise": _summarise,
}
