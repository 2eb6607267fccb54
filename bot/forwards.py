"""Forwards: what a batch of forwarded messages holds, and which of them were kept before.

Messages forwarded together arrive one update each and are handed on as one batch (bot.kept's
Collector). Their text and voice transcripts become pieces of a note, one note per sender; their
photos one document per album; each file is fetched with its caption and origin. A forwarded
message is known by its origin, so one forwarded again after it went into a note is "Already kept".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import structlog
from telegram import Message, MessageOrigin
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from bot.converse import key_of
from bot.deps import BotDeps, deps_of, words_of
from bot.media import DOCUMENTS, IMAGES, MAX_UPLOAD_BYTES, download
from bot.render import esc
from bot.send import say
from knowledge.errors import SpeechError
from knowledge.ingest.handoff import ingest_records
from knowledge.ingest.note import Entity, Origin, Piece, album_pdf, origin_fields, origin_group, title_of
from knowledge.words.catalog import N_
from knowledge.words.reasons import unheard

log = structlog.get_logger()

UNSENT = N_("Not kept: {what} — Telegram did not send it; forward it again.")
T = TypeVar("T")


@dataclass(frozen=True)
class Batch:
    """A batch of forwards read from Telegram: what each part becomes once kept."""

    notes: list[list[Piece]]  # one sender's text and voice transcripts each
    albums: list[tuple[str, bytes, str, dict]]  # (name, bytes, title, sidecar fields)
    files: list[tuple[str, bytes, dict]]  # (name, bytes, sidecar fields)


async def gather(context: ContextTypes.DEFAULT_TYPE, chat_id: int, batch: list) -> Batch:
    """Messages forwarded together, read under the chat's lock: text (and voice transcripts) by sender,
    photos by album, each file on its own; what cannot be kept is said as "Not kept: …"."""
    deps = deps_of(context)
    w = words_of(deps, chat_id)
    messages: list[Message] = sorted(batch, key=lambda m: m.message_id)
    photos = [m for m in messages if m.photo]
    files = [m for m in messages if m.document and not m.photo]
    voices = [m for m in messages if (m.voice or m.audio) and not m.document]
    log.info(
        "capture.batch", messages=len(messages), photos=len(photos), files=len(files), voices=len(voices)
    )
    pieces: list[Piece] = []
    async with deps.locks[chat_id]:
        for message in messages:
            if message in voices:
                piece = await _sent(
                    context, chat_id, w.tr("the voice note"), heard(context, deps, chat_id, message)
                )
            elif message in photos or message in files:
                continue
            else:
                piece = piece_of(message)
            if piece is not None and (piece.text.strip() or piece.kind == "voice"):
                pieces.append(piece)
            elif piece is not None:
                await say(
                    context, chat_id, esc(w.tr("Not kept: kb keeps text, photos, files and voice notes."))
                )
        albums = []
        if photos and deps.settings.ocr == "off":
            await say(
                context, chat_id, esc(w.tr("Not kept: kb cannot read photos while OCR is off (KB_OCR=off)."))
            )
        elif photos:
            for shots in _albums(photos):  # one document per album; a photo alone is one of its own
                what = w.ntr("{n} photo", "{n} photos", len(shots))
                albums.append(await _sent(context, chat_id, what, album_of(deps, shots)))
        downloads = [
            await _sent(context, chat_id, m.document.file_name or "file", file_of(context, deps, chat_id, m))
            for m in files
        ]
    return Batch(
        grouped(pieces), [a for a in albums if a is not None], [d for d in downloads if d is not None]
    )


async def _sent(
    context: ContextTypes.DEFAULT_TYPE, chat_id: int, what: str, fetched: Awaitable[T]
) -> T | None:
    """What a download from Telegram gave; None, said as "Not kept: …", when it failed (a 502, a
    timeout): the rest of the batch is kept all the same."""
    try:
        return await fetched
    except (TelegramError, OSError) as exc:
        log.warning("capture.download_failed", what=what, error=repr(exc))
        await say(context, chat_id, esc(words_of(deps_of(context), chat_id).tr(UNSENT, what=what)))
        return None


def _albums(photos: list[Message]) -> list[list[Message]]:
    """The photos of a batch by album (media_group_id), in the order they came."""
    albums: dict[str, list[Message]] = {}
    for m in photos:
        albums.setdefault(m.media_group_id or f"alone:{m.message_id}", []).append(m)
    return list(albums.values())


def grouped(pieces: list[Piece]) -> list[list[Piece]]:
    """Forwards sent together, one note per sender (in the order they came), not one for the burst."""
    groups: dict[str, list[Piece]] = {}
    for piece in pieces:
        groups.setdefault(origin_group(piece), []).append(piece)
    return list(groups.values())


# -- kept before ----------------------------------------------------------------------------


def still_kept(deps: BotDeps, chat_id: int, keys: list[str]) -> dict[str, tuple[str | None, str]]:
    """Of these forwarded messages, those kept before whose note is still kept: (doc id, title) each;
    a note removed since (Delete, kb rm) or refused by the daemon keeps nothing."""
    if deps.conversing is None:
        return {}
    found = deps.conversing.store.kept_forwards(key_of(chat_id), keys)
    records = ingest_records(deps.settings.index_path, {(k.path, k.sha256) for k in found.values()})
    still: dict[str, tuple[str | None, str]] = {}
    for key, kept in found.items():
        record = records.get((kept.path, kept.sha256))
        if record is None:  # not indexed yet: kept if it is still waiting in the inbox
            if Path(kept.path).is_file():
                still[key] = (None, kept.title)
        elif (
            record["status"] in ("indexed", "duplicate") and record["title"] is not None
        ):  # its document is there
            still[key] = (record["doc_id"], record["title"])
    return still


# -- the parts of a batch -------------------------------------------------------------------


async def heard(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, chat_id: int, message: Message
) -> Piece | None:
    """A forwarded voice note as a piece of the note: its transcript (not answered)."""
    audio = message.voice or message.audio
    w = words_of(deps, chat_id)
    if deps.transcribe is None:
        text = w.tr("Not kept: voice notes cannot be transcribed here (mlx-whisper is not installed).")
        await say(context, chat_id, esc(text))
        return None
    seconds = audio.to_dict().get("duration")
    if (seconds and seconds > deps.settings.voice_max_s) or (audio.file_size or 0) > MAX_UPLOAD_BYTES:
        text = w.tr(
            "Not kept: that recording is over {seconds} s or 20 MB.", seconds=f"{deps.settings.voice_max_s:g}"
        )
        await say(context, chat_id, esc(text))
        return None
    payload = await download(audio)
    try:
        transcript = await asyncio.to_thread(deps.transcribe, payload)
    except SpeechError as exc:
        log.warning("capture.voice_failed", reason=exc.reason, error=str(exc))
        await say(context, chat_id, esc(w.tr("Not kept: {why}", why=unheard(exc.reason, w))))
        return None
    return Piece(transcript.text.strip(), (), origin_of(message.forward_origin), "voice", seconds)


async def album_of(deps: BotDeps, photos: list[Message]) -> tuple[str, bytes, str, dict]:
    """The photos as one file: the photo itself, or a PDF of them all; (name, bytes, title, sidecar fields)."""
    images = []
    for message in photos:
        size = max(message.photo, key=lambda s: s.width * s.height)
        images.append(await download(size))
    first = photos[0]
    caption = next((m.caption for m in photos if m.caption), None)
    origin = origin_of(first.forward_origin)
    when = (origin.date if origin and origin.date else first.date or datetime.now(UTC)).astimezone(UTC)
    fields = dict(origin_fields([Piece("", (), origin)])) if origin else {}
    if caption:
        fields["comment"] = caption
    if len(images) == 1:
        title = title_of([Piece(caption or "", (), origin)]) if caption or origin else "Photo"
        return f"photo-{when:%Y%m%d-%H%M%S}.jpg", images[0], title, fields
    title = title_of([Piece(caption, ())]) if caption else f"Album of {len(images)} photos, {when:%Y-%m-%d}"
    pdf = await asyncio.to_thread(album_pdf, images, title=title, when=when)
    return f"album-{when:%Y%m%d-%H%M%S}.pdf", pdf, title, fields


async def file_of(
    context: ContextTypes.DEFAULT_TYPE, deps: BotDeps, chat_id: int, message: Message
) -> tuple[str, bytes, dict] | None:
    """A forwarded file the pipeline can read, with its origin and caption; None (said why) otherwise."""
    document = message.document
    name = Path(document.file_name or "file").name
    accepted = {**DOCUMENTS, **(IMAGES if deps.settings.ocr != "off" else {})}
    if Path(name).suffix.lower() not in accepted or (document.file_size or 0) > MAX_UPLOAD_BYTES:
        kinds = ", ".join(sorted(accepted))
        text = words_of(deps, chat_id).tr(
            "Not kept: {title} — kb keeps {kinds} files up to 20 MB.", title=name, kinds=kinds
        )
        await say(context, chat_id, esc(text))
        return None
    payload = await download(document)
    origin = origin_of(message.forward_origin)
    fields = dict(origin_fields([Piece("", (), origin)])) if origin else {}
    if message.caption:
        fields["comment"] = message.caption
    return name, payload, fields


# -- Telegram messages as note pieces -------------------------------------------------------


def piece_of(message: Message) -> Piece:
    """A message's text (or caption) with its entities, and where it was forwarded from."""
    if message.text is not None:
        text, entities = message.text, message.entities
    else:
        text, entities = message.caption or "", message.caption_entities
    return Piece(text, entities_of(entities), origin_of(message.forward_origin))


def entities_of(entities) -> tuple[Entity, ...]:
    """Telegram message entities as note entities."""
    return tuple(Entity(str(e.type), e.offset, e.length, e.url, e.language) for e in entities or ())


def shifted(entities: tuple[Entity, ...], cut: int) -> tuple[Entity, ...]:
    """Entities of a text with its first ``cut`` characters (ASCII: a command) removed."""
    return tuple(
        Entity(e.type, e.offset - cut, e.length, e.url, e.language) for e in entities if e.offset >= cut
    )


def origin_of(origin: MessageOrigin | None) -> Origin | None:
    """forward_origin as an Origin: user, hidden user, chat or channel."""
    if origin is None:
        return None
    kind, date = origin.type, origin.date
    if kind == MessageOrigin.USER:
        user = origin.sender_user
        return Origin("user", user.full_name, date, user.username, sender_id=user.id)
    if kind == MessageOrigin.HIDDEN_USER:
        return Origin("hidden_user", origin.sender_user_name, date)
    if kind == MessageOrigin.CHAT:
        chat = origin.sender_chat
        return Origin(
            "chat", chat.title or chat.full_name or "a chat", date, chat.username, sender_id=chat.id
        )
    if kind == MessageOrigin.CHANNEL:
        chat = origin.chat
        return Origin("channel", chat.title or "a channel", date, chat.username, origin.message_id, chat.id)
    return Origin(str(kind), "unknown", date)
