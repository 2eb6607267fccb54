"""Files, photos and voice notes sent to the bot.

A file or a photo goes into the inbox with a sidecar (the daemon stays the only writer) and the
reply follows it there: converting, the pages read so far for a long scan, then what was indexed
and, for text read from an image, what was read. A photo's caption is then answered as a question
about that photo. A voice note or audio file is transcribed, echoed ("I heard: …") with a
"Save as note" button, and answered like a typed question.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.constants import ChatAction
from telegram.ext import ContextTypes

from bot.answer import answer
from bot.converse import remember_document
from bot.deps import BotDeps, deps_of, words_of
from bot.follow import follow_ingest
from bot.kept import Kept, buttons
from bot.render import esc, italic
from bot.send import edit, say, typing
from bot.summarise import EXCERPT_NOTE
from knowledge.config import Settings
from knowledge.errors import IndexError_, SpeechError
from knowledge.ingest import raw as rawfile
from knowledge.ingest import working
from knowledge.ingest.handoff import deliver, failure_reason
from knowledge.ingest.lock import holder
from knowledge.ingest.raw import sha256_hex
from knowledge.speech.transcribe import Transcript, model_notice
from knowledge.store.index import Index
from knowledge.store.records import StoredSummary
from knowledge.text import gap, sentences, shorten
from knowledge.words.catalog import LABELLED, Words
from knowledge.words.reasons import not_read, progress, unheard

log = structlog.get_logger()

DOCUMENTS = {".pdf": "PDF", ".html": "HTML", ".htm": "HTML", ".txt": "text", ".md": "Markdown",
             ".markdown": "Markdown"}  # fmt: skip
IMAGES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WebP", ".heic": "HEIC", ".heif": "HEIC"}
MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's getFile limit
FIRST_LINE_CHARS = 120


@dataclass(frozen=True)
class Reading:
    """What OCR read from a document, from its raw file's front matter and body."""

    lines: int
    first_line: str
    confidence: float | None
    illegible_pages: str | None
    unread_pages: str | None = None


async def download(attachment) -> bytes:
    """The bytes of a photo size, a document, a voice note or an audio file sent to the bot."""
    return bytes(await (await attachment.get_file()).download_as_bytearray())


# -- files and photos -----------------------------------------------------------------------


async def on_document(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A file sent to the bot goes to the inbox (with a sidecar naming it a Telegram upload)."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    message = update.effective_message
    document = message.document
    name = Path(document.file_name or "upload").name
    suffix = Path(name).suffix.lower()
    accepted = {**DOCUMENTS, **(IMAGES if deps.settings.ocr != "off" else {})}
    w = words_of(deps, chat_id)
    if suffix not in accepted:
        kinds = ", ".join(sorted(set(accepted.values())))
        text = w.tr("{name}: kb accepts {kinds} files ({suffixes}).", name=name, kinds=kinds,
                    suffixes=", ".join(sorted(accepted)))  # fmt: skip
        if suffix in IMAGES:
            text = sentences([text, w.tr("Images need OCR, which is off (KB_OCR=off).")])
        await say(context, chat_id, esc(text))
        return
    if document.file_size and document.file_size > MAX_UPLOAD_BYTES:
        await say(
            context, chat_id, esc(w.tr("{name} is over 20 MB, the most a bot can download.", name=name))
        )
        return
    source = "telegram photo" if suffix in IMAGES else "telegram upload"
    await receive(update, context, document, name, source=source, question=message.caption)


async def on_photo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A photo (Telegram sends it in several sizes): the largest is read like an image file."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    message = update.effective_message
    if deps.settings.ocr == "off":
        await say(
            context,
            chat_id,
            esc(words_of(deps, chat_id).tr("kb cannot read photos while OCR is off (KB_OCR=off).")),
        )
        return
    photo = max(message.photo, key=lambda size: size.width * size.height)
    taken = (message.date or datetime.now(UTC)).astimezone(UTC)
    name = f"photo-{taken:%Y%m%d-%H%M%S}.jpg"
    await receive(update, context, photo, name, source="telegram photo", question=message.caption)


async def receive(
    update: Update,
    context: ContextTypes.DEFAULT_TYPE,
    attachment,
    name: str,
    *,
    source: str,
    question: str | None,
) -> None:
    """Download, hand to the inbox, follow the daemon's progress, report; then answer the caption.

    The chat's lock is held only while the file is fetched and handed over: following a long scan
    (pages keep coming) never keeps the owner's questions, taps and /status waiting.
    """
    deps, chat_id = deps_of(context), update.effective_chat.id
    w = words_of(deps, chat_id)
    async with deps.locks[chat_id]:
        status = await say(
            context, chat_id, italic(w.tr(LABELLED, name=name, what=progress("downloading", w)) + "…")
        )
        data = await download(attachment)
        sidecar = {"source": source, "file_name": name, "telegram_user_id": update.effective_user.id}
        path = deliver(deps.settings.inbox, name, data, sidecar, staging=deps.settings.staging)
        if path.name != name:  # hidden, lock-file or over-long names get one the inbox takes
            name = w.tr("{name} (saved as {saved})", name=name, saved=path.name)
        await edit(context, status, italic(w.tr(LABELLED, name=name, what=progress("converting", w)) + "…"))
    sha = sha256_hex(data)
    record = await follow_pages(context, deps, status, name, path, sha)
    kept = record is not None and record["status"] in ("indexed", "duplicate") and record.get("doc_id")
    markup, item = None, None
    if kept:  # the conversation is about it now: a follow-up asks it; so does a reply to either message
        title = record.get("title") or name
        await remember_document(deps, chat_id, [update.effective_message.message_id, status.message_id],
                                record["doc_id"], title)  # fmt: skip
        item = Kept(chat_id, title, None, sha, record["doc_id"], record["status"])
        # Undo as under a forward (bot.capture.undo); not under bytes that were kept before
        markup = buttons(deps.kept.add(item), w, undo=record["status"] == "indexed")
    text = outcome_text(deps.settings, name, record, w, file=path.name)
    await edit(context, status, text, reply_markup=markup)
    if item is not None and item.state == "indexed":
        still = lambda: item.state == "indexed"  # noqa: E731 - undone meanwhile: the reply says so
        deps.kept.follow(add_summary(context, deps, status, text, markup, record["doc_id"], w, still=still))
    if question and question.strip() and kept:
        await answer(context, chat_id, question, question=update.effective_message, document=record["doc_id"])


async def follow_pages(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, status: Message, name: str, path: Path, sha: str
) -> dict | None:
    """The daemon's ingest record for these bytes; pages read so far are shown on the way, and each
    new page gives the daemon another KB_IMPORT_WAIT_S (a 20-page scan takes longer than a note),
    up to bot.follow's FOLLOW_MAX_S in all (then /status tells how far it is)."""
    settings = deps.settings
    folder = working.folder(settings)
    shown: tuple[int, int] | None = None

    async def pages() -> bool:
        nonlocal shown
        now = await asyncio.to_thread(working.read, folder, sha)
        if now is None or now.total <= 1 or (now.done, now.total) == shown:
            return False
        shown = (now.done, now.total)
        page = words_of(deps, status.chat_id).tr("{name}: reading page {done} of {total}…", name=name,
                                                  done=now.done, total=now.total)  # fmt: skip
        await edit(context, status, f"<i>{esc(page)}</i>")
        return True

    return await follow_ingest(settings, path, sha, wait_s=settings.import_wait_s, news=pages)


SUMMARY_WAIT_S = 300.0  # how long a reply waits for the daemon's summary of what it kept
SUMMARY_POLL_MAX_S = 15.0


async def add_summary(
    context: ContextTypes.DEFAULT_TYPE,
    deps: BotDeps,
    message: Message | None,
    text: str,
    markup: InlineKeyboardMarkup | None,
    doc_id: str,
    words: Words,
    *,
    still: Callable[[], bool] = lambda: True,
    poll_s: float = 1.0,
) -> None:
    """Once the daemon has summarised a document kept from the chat, its reply (``text`` with its
    buttons) gains the summary, as data: escaped, in italics, never a link or a command; not when
    the reply says something else by then (``still`` false: undone meanwhile)."""
    if deps.settings.summaries != "on" or message is None:
        return
    deadline = time.monotonic() + SUMMARY_WAIT_S
    while (found := await asyncio.to_thread(_summary, deps.settings.index_path, doc_id)) is None:
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(poll_s)
        poll_s = min(
            poll_s * 1.5, SUMMARY_POLL_MAX_S
        )  # a note is summarised in seconds, a long scan in minutes
    if not found.text or not still():
        return
    shown = italic(found.text) + ("\n" + esc(words.tr(EXCERPT_NOTE)) if found.kind == "excerpt" else "")
    log.info("capture.summarised", doc_id=doc_id, kind=found.kind, chars=len(found.text))
    await edit(context, message, f"{text}\n\n{shown}", reply_markup=markup)


def _summary(index_path: Path, doc_id: str) -> StoredSummary | None:
    try:
        with Index(index_path, readonly=True) as index:
            return index.summary(doc_id)
    except IndexError_:  # not readable now: asked again at the next poll
        return None


def outcome_text(settings: Settings, name: str, record: dict | None, words: Words, *, file: str = "") -> str:
    """The status line for what the daemon did with an upload (or that it has not yet); ``file``: its
    name in the inbox (why it failed is read from what the daemon left in failed/)."""
    w = words
    if record is None and holder(settings.lock_path) is None:
        return esc(
            w.tr("{name} is in the inbox; it will be indexed when the daemon runs (kb daemon).", name=name)
        )
    if record is None:
        return esc(w.tr("{name} is in the inbox; the daemon has not finished it within {seconds} s — /status "
                        "shows when it is in.", name=name, seconds=f"{settings.import_wait_s:g}"))  # fmt: skip
    if record["status"] == "indexed":
        chunks = w.ntr("{n} chunk", "{n} chunks", record["chunks"] or 0)
        text = esc(
            w.tr(
                "{name}: indexed, {chunks} — {title}", name=name, chunks=chunks, title=record["title"] or name
            )
        )
    elif record["status"] == "duplicate":
        text = esc(
            w.tr("{name}: already in the knowledge base — {title}", name=name, title=record["title"] or "")
        )
    else:
        why = not_read(failure_reason(settings.failed, file or name)[0], w)
        return esc(w.tr("{name}: not added — {why}", name=name, why=why))
    reading = read_back(settings.raw.parent / record["raw_path"]) if record.get("raw_path") else None
    return text if reading is None else text + "\n" + reading_text(reading, w)


def read_back(raw_file: Path) -> Reading | None:
    """What OCR read into a document (from its raw file), or None when its text did not come from OCR."""
    try:
        text = raw_file.read_text(encoding="utf-8")
    except OSError:
        return None
    parsed = rawfile.parse(text, fallback_name=raw_file.name, sha256="")
    meta = parsed.meta
    if not meta.ocr_engine:
        return None
    lines = [line.strip() for line in parsed.body_lines if line.strip() and not line.startswith("#")]
    try:
        confidence = float(meta.ocr_confidence) if meta.ocr_confidence else None
    except ValueError:
        confidence = None
    first = shorten(lines[0], FIRST_LINE_CHARS) if lines else ""
    return Reading(len(lines), first, confidence, meta.ocr_illegible_pages, meta.ocr_unread_pages)


def reading_text(reading: Reading, words: Words) -> str:
    """``Read 12 lines (confidence 94 %): “first line”``, and the pages where nothing was legible."""
    w = words
    count = w.ntr("{n} line", "{n} lines", reading.lines)
    if reading.confidence is not None:
        text = w.tr("Read {count} (confidence {confidence}): “{first}”", count=count,
                    confidence=f"{reading.confidence:.0%}", first=reading.first_line)  # fmt: skip
    else:
        text = w.tr("Read {count}: “{first}”", count=count, first=reading.first_line)
    if reading.illegible_pages:
        text += "\n" + w.tr("Nothing legible on pages {pages}.", pages=reading.illegible_pages)
    if reading.unread_pages:
        text += "\n" + w.tr(
            "Pages {pages} were not read: the OCR time for one file ran out (KB_OCR_BUDGET_S). Split the PDF "
            "and send the rest to read them.", pages=reading.unread_pages,
        )  # fmt: skip
    return esc(text + "\n" + w.tr("Ask me about it: a question now is about this one."))


# -- voice ----------------------------------------------------------------------------------


async def on_voice(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A voice note or audio file: transcribed, echoed with a "Save as note" button, then answered."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    message = update.effective_message
    audio = message.voice or message.audio or message.document
    w = words_of(deps, chat_id)
    if deps.transcribe is None:
        await say(
            context,
            chat_id,
            esc(w.tr("Voice questions are not available here: mlx-whisper is not installed.")),
        )
        return
    duration = audio.to_dict().get("duration")  # seconds as sent (the attribute warns of a future type)
    if duration and duration > deps.settings.voice_max_s:
        text = w.tr("That recording is {seconds} s long; kb transcribes up to {most} s (KB_VOICE_MAX_S). Send a "
                    "shorter one or type the question.", seconds=duration, most=f"{deps.settings.voice_max_s:g}")  # fmt: skip
        await say(context, chat_id, esc(text))
        return
    if audio.file_size and audio.file_size > MAX_UPLOAD_BYTES:
        await say(context, chat_id, esc(w.tr("That recording is over 20 MB, the most a bot can download.")))
        return
    notice = await asyncio.to_thread(
        model_notice, deps.settings.whisper_model, own_dir=deps.settings.model_dir
    )
    transcript = status = None
    if notice:  # the model comes first (minutes, GBs): not under the chat's lock, its other messages go on
        first = w.tr("The speech model is downloaded to {computer} first (once); this takes a while.")
        status = await say(context, chat_id, italic(w.tr("listening…")) + f"\n{esc(first)}")
        transcript = await hear(context, deps, chat_id, audio, status)
    async with deps.locks[chat_id]:
        if status is None:
            status = await say(context, chat_id, italic(w.tr("listening…")))
            transcript = await hear(context, deps, chat_id, audio, status)
        if transcript is None:
            return
        text = transcript.text.strip()
        log.info(
            "voice.heard",
            language=transcript.language,
            seconds=round(transcript.duration_s, 1),
            chars=len(text),
        )
        button = deps.notes.add(chat_id, text, transcript.language)
        markup = InlineKeyboardMarkup([[InlineKeyboardButton(w.tr("Save as note"), callback_data=button)]])
        await edit(context, status, esc(w.tr("I heard: “{text}”", text=text)), reply_markup=markup)
    if text:
        await answer(context, chat_id, text, question=message)


async def hear(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, chat_id: int, audio, status: Message
) -> Transcript | None:
    """The words of a voice note (fetching the speech model first when it is not here yet), or None
    when it could not be heard: ``status`` then says why."""
    data = await download(audio)
    try:
        async with typing(context, chat_id, ChatAction.RECORD_VOICE):
            return await asyncio.to_thread(deps.transcribe, data)
    except SpeechError as exc:
        log.warning("voice.failed", reason=exc.reason, error=str(exc))
        await edit(context, status, esc(unheard(exc.reason, words_of(deps, chat_id))))
        return None


async def on_save_note(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """The "Save as note" button: the transcript goes into the inbox as a Markdown note, once."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    note = deps.notes.take(chat_id, query.data or "")
    w = words_of(deps, chat_id)
    if note is None:
        already = deps.notes.is_saved(chat_id, query.data or "")
        text = w.tr("already saved") if already else w.tr("this note has expired")
        await query.answer(text, show_alert=not already)
        return
    await query.answer(w.tr("saving…"))
    heard = datetime.fromtimestamp(note.heard_at, UTC)
    name = f"voice-note-{heard:%Y%m%d-%H%M%S}.md"
    body = f"# Voice note, {heard:%Y-%m-%d %H:%M} UTC\n\n{note.text}\n".encode()
    sidecar = {
        "source": "telegram voice note",
        "file_name": name,
        "telegram_user_id": update.effective_user.id,
    }
    try:
        path = await asyncio.to_thread(
            deliver, deps.settings.inbox, name, body, sidecar, staging=deps.settings.staging
        )
    except OSError as exc:
        note.saved = False  # nothing was written: the button may be tapped again
        log.error("voice.note_failed", error=str(exc))
        await say(
            context, chat_id, esc(w.tr("The note could not be saved: it could not be written to the inbox."))
        )
        return
    log.info("voice.note_saved", file=path.name)
    message = query.message if isinstance(query.message, Message) else None
    head = message.text_html if message is not None and message.text else ""
    record = await follow_ingest(deps.settings, path, sha256_hex(body), wait_s=deps.settings.import_wait_s)
    state = outcome_text(deps.settings, path.name, record, w, file=path.name)
    label = w.tr("Saved as a note:")
    saved = italic(label) + gap(label, state) + f"<i>{state}</i>"
    if message is not None:
        await edit(context, message, (head + "\n\n" if head else "") + saved)
    else:
        await say(context, chat_id, saved)
