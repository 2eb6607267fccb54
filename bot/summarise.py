"""Summarising a whole document from the phone: the Summarise button (bot.find) and a message that
asks for it ("summarise it", 「摘要一下」, "สรุปหน่อย") about the document the conversation is on.

The model reads the document part by part (knowledge.answer.summary); the reply says which part it
reads, then shows the summary, each part it cites by its lines, with an Open button for each.
"""

from __future__ import annotations

import asyncio
import re

import structlog
from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.ext import ContextTypes

from bot.deps import BotDeps, words_of
from bot.render import esc, italic
from bot.send import edit, say
from knowledge.answer.summary import Writer, summarize
from knowledge.errors import IndexMissing
from knowledge.retrieval.search import SearchResult, document_passages
from knowledge.store.records import DocumentRecord
from knowledge.words.catalog import N_

log = structlog.get_logger()

EXCERPT_NOTE = N_("(its opening lines: the model is not running)")
# A message that asks for a summary of the document at hand, and nothing else.
SUMMARISE_IT = re.compile(
    r"(?:please\s+)?(?:summari[sz]e|sum\s+up)(?:\s+(?:it|this|that|the\s+document))?(?:\s+please)?[.!?]?"
    r"|tl;?dr\??"
    r"|(?:請|幫我)?(?:摘要|總結|概括)(?:一下|它|這份|這篇)?[。！？?!]?"
    r"|สรุป(?:ให้หน่อย|หน่อย|ให้ที|เอกสารนี้)?(?:ครับ|ค่ะ|คะ)?",
    re.IGNORECASE,
)


def asks_for_summary(text: str) -> bool:
    """Whether a message only asks for a summary ("summarise it", 「摘要一下」, "สรุปหน่อย")."""
    return SUMMARISE_IT.fullmatch(" ".join(text.split())) is not None


async def summarise_document(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, chat_id: int, doc_id: str
) -> None:
    """The whole document, however long, summarised by the model part by part (the reply shows
    which part it reads), with its passages cited and an Open button for each."""
    w = words_of(deps, chat_id)
    found = await asyncio.to_thread(_document_passages, deps, doc_id)
    if found is None:
        await say(context, chat_id, esc(w.tr("That document is no longer in your knowledge base.")))
        return
    doc, chunks = found
    status = await say(context, chat_id, italic(w.tr("Reading “{title}”…", title=doc.title)))
    shown: list[asyncio.Task] = []

    def progress(n: int, total: int) -> None:  # called between the model's calls: the edit goes on its own
        if total > 1:
            text = italic(w.tr("Reading part {n} of {total}…", n=n, total=total))
            shown.append(asyncio.get_running_loop().create_task(edit(context, status, text)))

    summary = await summarize(Writer.of(deps.engine), doc.title, chunks, reader=w.language, sentences=5,
                              progress=progress)  # fmt: skip
    await asyncio.gather(*shown, return_exceptions=True)
    log.info("bot.summarised", doc_id=doc_id, kind=summary.kind, parts=summary.parts, calls=summary.calls)
    text = f"<b>{esc(doc.title)}</b>\n\n{esc(summary.text)}"
    if summary.kind == "excerpt":
        text += "\n" + esc(w.tr(EXCERPT_NOTE))
    rows = []
    for c in summary.citations:
        text += f"\n[{c.number}] <code>{esc(f'{c.raw_path}:{c.start_line}-{c.end_line}')}</code>"
        data = deps.actions.add(
            chat_id, "open", doc_id=doc_id, chunk_id=c.chunk_id, lines=[c.start_line, c.end_line]
        )
        rows.append(InlineKeyboardButton(w.tr("Open [{n}]", n=c.number), callback_data=data))
    markup = InlineKeyboardMarkup([rows[i : i + 3] for i in range(0, len(rows), 3)]) if rows else None
    await edit(context, status, text, reply_markup=markup)


def _document_passages(deps: BotDeps, doc_id: str) -> tuple[DocumentRecord, list[SearchResult]] | None:
    try:
        index = deps.engine.open_index()
    except IndexMissing:
        return None
    with index:
        doc = index.document(doc_id)
        return (doc, document_passages(index, doc_id)) if doc is not None else None
