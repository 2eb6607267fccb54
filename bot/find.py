"""Finding and managing documents from the phone: /find, Open, Delete (confirmed) and Undo, Sources.

``/find words`` lists the matching documents (title, date, source, the line that matched) a page
at a time, each with Open and Delete. Open sends the passage with its lines, then the original
file (a web page: its address). Delete asks once more, then has the daemon move the document to
the trash (kept 30 days); Undo brings it back. Under an answer, Sources shows the passages it used.
The daemon stays the only writer: a delete or a restore is a request it carries out
(knowledge.ingest.requests); when it is not running the reply says the request waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.actions import Action
from bot.converse import remember_document
from bot.deps import BotDeps, deps_of
from bot.render import esc, link
from bot.send import edit, say, typing
from knowledge.errors import IndexError_
from knowledge.ingest import raw as rawfile
from knowledge.ingest.requests import Change, ask_daemon
from knowledge.report.status import plural
from knowledge.retrieval.documents import DocumentMatch, match_documents
from knowledge.retrieval.index import DocumentRecord
from knowledge.websearch.filters import host_of

log = structlog.get_logger()

PER_PAGE = 5
PASSAGE_CHARS = 3000
MAX_SEND_BYTES = 50 * 1024 * 1024  # the most a bot may upload
CHANGE_WAIT_S = 20.0
EXPIRED = "this button has expired — /find again"


# -- /find and its pages ----------------------------------------------------------------------


async def on_find(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/find words: the matching documents, a page at a time."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    words = " ".join(context.args or []).strip()
    if not words:
        await say(context, chat_id, "Usage: /find words — lists your documents that match them.")
        return
    async with typing(context, chat_id):
        matches = await asyncio.to_thread(_matches, deps, words)
    log.info("bot.find", words=len(words.split()), found=len(matches))
    if not matches:
        await say(context, chat_id, f"No document matches “{esc(words)}”.")
        return
    text, markup = find_page(deps, chat_id, words, matches, 0)
    shown = await say(context, chat_id, text, reply_markup=markup)
    if len(matches) == 1:  # a reply to the list asks about the one document it found
        doc = matches[0].document
        await remember_document(deps, chat_id, [shown.message_id], doc.id, doc.title, current=False)


def _matches(deps: BotDeps, words: str) -> list[DocumentMatch]:
    try:
        index = deps.engine.open_index()
    except IndexError_:
        return []
    with index:
        meaning = deps.engine.meaning
        return match_documents(index, words, meaning=meaning, threshold=deps.engine.settings.min_relevance)


def find_page(
    deps: BotDeps, chat_id: int, words: str, matches: Sequence[DocumentMatch], page: int
) -> tuple[str, InlineKeyboardMarkup]:
    """One page of a /find list and its buttons (Open and Delete per document, then the pages)."""
    first = page * PER_PAGE
    shown = matches[first : first + PER_PAGE]
    head = f"<b>{plural(len(matches), 'document')}</b> for “{esc(words)}”"
    if len(matches) > PER_PAGE:
        head += f" ({first + 1}–{first + len(shown)})"
    lines = [head]
    rows = []
    for n, m in enumerate(shown, first + 1):
        lines.append(f"{n}. {document_line(m.document)}" + (f"\n    <i>{esc(m.line)}</i>" if m.line else ""))
        target = {"doc_id": m.document.id, "chunk_id": m.chunk_id}
        rows.append([
            InlineKeyboardButton(f"Open {n}", callback_data=deps.actions.add(chat_id, "open", **target)),
            InlineKeyboardButton(f"Delete {n}", callback_data=deps.actions.add(chat_id, "delete", **target)),
        ])  # fmt: skip
    nav = []
    paging = {"words": words, "matches": list(matches)}
    if page > 0:
        data = deps.actions.add(chat_id, "page", page=page - 1, **paging)
        nav.append(InlineKeyboardButton("‹ Previous", callback_data=data))
    if first + PER_PAGE < len(matches):
        data = deps.actions.add(chat_id, "page", page=page + 1, **paging)
        nav.append(InlineKeyboardButton("Next ›", callback_data=data))
    if nav:
        rows.append(nav)
    return "\n".join(lines), InlineKeyboardMarkup(rows)


def document_line(doc: DocumentRecord) -> str:
    """``<b>Title</b> · 2026-11-30 · example.org`` (the title a link when the source has one)."""
    title = link(doc.source_url, doc.title) if doc.source_url else f"<b>{esc(doc.title)}</b>"
    source = host_of(doc.source_url) if doc.source_url else doc.source_name
    return f"{title} · {esc(doc.indexed_at[:10])} · {esc(source or '')}"


# -- the buttons ------------------------------------------------------------------------------


async def on_action(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A tapped Open, Delete, Undo, page or Sources button (``act:<token>``)."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    action = deps.actions.take(chat_id, query.data or "")
    if action is None:
        await query.answer(EXPIRED, show_alert=True)
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
    await query.answer("opening…")
    lines = action.target.get("lines")
    wanted = (str(action.target["doc_id"]), action.target.get("chunk_id"), tuple(lines) if lines else None)
    [found] = await asyncio.to_thread(_look_up, deps, [wanted])
    if found is None:
        await say(context, chat_id, "That document is no longer in your knowledge base.")
        return
    doc, chunk = found
    shown = await say(context, chat_id, passage_html(doc, chunk))
    await remember_document(deps, chat_id, [shown.message_id], doc.id, doc.title, current=False)
    if doc.source_url:
        await say(context, chat_id, f"Original: {link(doc.source_url, doc.source_url)}")
        return
    original = original_file(deps, doc)
    if original is None:
        await say(context, chat_id, "<i>The original file is not kept (only its converted text).</i>")
        return
    if original.stat().st_size > MAX_SEND_BYTES:
        await say(
            context, chat_id, f"<i>The original ({esc(original.name)}) is over 50 MB, too large to send.</i>"
        )
        return
    try:
        with open(original, "rb") as fh:
            await context.bot.send_document(chat_id, fh, filename=doc.source_name or original.name)
    except (TelegramError, OSError) as exc:
        log.warning("bot.open_failed", doc_id=doc.id, error=str(exc))
        await say(context, chat_id, f"<i>The original could not be sent: {esc(str(exc))}</i>")
        return
    log.info("bot.opened", doc_id=doc.id)


@dataclass(frozen=True)
class Passage:
    """Lines of a document's raw file, as cited or as one chunk."""

    start_line: int
    end_line: int
    text: str


Wanted = tuple[str, str | None, tuple[int, int] | None]  # document id, chunk id, cited lines


def _look_up(
    deps: BotDeps, wanted: Sequence[Wanted], *, passages: bool = True
) -> list[tuple[DocumentRecord, Passage | None] | None]:
    """Each (document id, chunk id, lines) in one opening of the index: the document and that passage
    (the lines cited when given, read from its raw file; else the chunk, its first when there is no
    chunk id; none without ``passages``), or None for a document gone."""
    try:
        index = deps.engine.open_index()
    except IndexError_:
        return [None] * len(wanted)
    found: list[tuple[DocumentRecord, Passage | None] | None] = []
    with index:
        for doc_id, chunk_id, lines in wanted:
            doc = index.document(doc_id)
            if doc is None or not passages:
                found.append(None if doc is None else (doc, None))
                continue
            cited = _raw_lines(deps.settings.raw.parent / doc.raw_path, lines) if lines else None
            if cited is not None:
                found.append((doc, cited))
                continue
            seq = rawfile.chunk_seq(chunk_id) if chunk_id else 1
            chunks = index.chunks_of(doc_id, [seq])
            found.append(
                (doc, Passage(chunks[0].start_line, chunks[0].end_line, chunks[0].text) if chunks else None)
            )
    return found


def _raw_lines(raw_file: Path, lines: tuple[int, int]) -> Passage | None:
    """Lines ``start``–``end`` (1-based, inclusive) of a raw file, or None when it cannot be read."""
    start, end = lines
    try:
        text = raw_file.read_text(encoding="utf-8")
    except OSError:
        return None
    picked = text.splitlines()[start - 1 : end]
    return Passage(start, end, "\n".join(picked).strip()) if picked else None


def passage_html(doc: DocumentRecord, passage: Passage | None) -> str:
    """The document's line and its passage: ``Title · date · source`` / ``raw/x.md:12-29`` / the text."""
    head = document_line(doc)
    if passage is None:
        return head
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
    doc_id = str(action.target["doc_id"])
    [found] = await asyncio.to_thread(_look_up, deps, [(doc_id, None, None)], passages=False)
    if found is None:
        await say(context, chat_id, "That document is no longer in your knowledge base.")
        return
    doc = found[0]
    yes = deps.actions.add(chat_id, "delete-yes", once=True, doc_id=doc_id, title=doc.title)
    no = deps.actions.add(chat_id, "keep", once=True, title=doc.title)
    await say(
        context, chat_id,
        f"Delete {document_line(doc)}?\nIt leaves search; the original is kept in the trash for 30 days.",
        reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton("Delete", callback_data=yes),
                                            InlineKeyboardButton("Keep it", callback_data=no)]]),
    )  # fmt: skip


async def _keep(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    await query.answer("kept")
    if message is not None:
        await edit(context, message, f"Kept: <b>{esc(str(action.target['title']))}</b>.")


async def _delete_yes(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The confirming tap: the daemon removes the document; the reply offers Undo."""
    await query.answer("deleting…")
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
    if change.status == "done" and change.trashed is not None:
        undo = deps.actions.add(chat_id, "undo", once=True, trash_id=change.trashed.trash_id, title=title)
        return (
            f"Deleted: <b>{esc(title)}</b>. It is in the trash for 30 days.",
            InlineKeyboardMarkup([[InlineKeyboardButton("Undo", callback_data=undo)]]),
        )
    if change.status == "waiting":
        return f"<i>Waiting for the daemon: “{esc(title)}” leaves your knowledge base when it runs.</i>", None
    return f"Not deleted: {esc(change.message)}", None


async def _undo(context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None) -> None:
    """Undo a delete: the daemon puts the document back and indexes it again."""
    await query.answer("restoring…")
    title = str(action.target["title"])
    change = await asyncio.to_thread(
        ask_daemon, deps.settings, "restore", str(action.target["trash_id"]), wait_s=CHANGE_WAIT_S
    )
    if change.status == "done":
        text = f"Restored: <b>{esc(change.title or title)}</b>, searchable again."
    elif change.status == "waiting":
        text = f"<i>Waiting for the daemon: “{esc(title)}” comes back when it runs.</i>"
    else:
        deps.actions.release(action)
        text = f"Not restored: {esc(change.message)}"
    await _show(context, chat_id, message, text, None)


async def _show(
    context, chat_id: int, message: Message | None, text: str, markup: InlineKeyboardMarkup | None
) -> None:
    if message is not None:
        await edit(context, message, text, reply_markup=markup)
    else:
        await say(context, chat_id, text, reply_markup=markup)


# -- Sources under an answer -------------------------------------------------------------------


async def _sources(
    context, deps: BotDeps, chat_id: int, action: Action, query, message: Message | None
) -> None:
    """The passages an answer used, each with its Open button."""
    await query.answer()
    cited = action.target["cited"]
    wanted = [(rawfile.chunk_document(chunk_id), chunk_id, (start, end)) for _, chunk_id, start, end in cited]
    looked_up = await asyncio.to_thread(_look_up, deps, wanted)
    for (number, chunk_id, start, end), (doc_id, _, _), found in zip(cited, wanted, looked_up, strict=True):
        if found is None:
            await say(context, chat_id, f"[{number}] <i>no longer in your knowledge base</i>")
            continue
        doc, chunk = found
        data = deps.actions.add(chat_id, "open", doc_id=doc_id, chunk_id=chunk_id, lines=[start, end])
        await say(
            context, chat_id, f"[{number}] " + passage_html(doc, chunk),
            reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton(f"Open [{number}]", callback_data=data)]]),
        )  # fmt: skip


_HANDLERS = {
    "page": _page,
    "open": _open,
    "delete": _delete,
    "delete-yes": _delete_yes,
    "keep": _keep,
    "undo": _undo,
    "sources": _sources,
}
