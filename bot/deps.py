"""What the bot's handlers share: the dependencies made at start-up, reached through the application."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING

from telegram.ext import ContextTypes

from bot.actions import Actions
from bot.kept import Collector, KeptNotes
from bot.notes import PendingNotes
from knowledge.answer.assistant import Engine
from knowledge.config import Settings
from knowledge.conversation.session import Conversing
from knowledge.feedback.store import Feedback
from knowledge.report.status import LoadedCounter
from knowledge.websearch.fetch import Fetched
from knowledge.websearch.store import CandidateStore
from knowledge.words.catalog import Words, owner_words

if TYPE_CHECKING:
    from knowledge.speech.transcribe import Transcript


@dataclass
class BotDeps:
    """What the handlers use; built once at start-up.

    ``transcribe`` turns audio bytes into a Transcript (blocking: handlers run it in a thread) or
    raises SpeechError; None when voice questions are unavailable.
    """

    settings: Settings
    engine: Engine
    store: CandidateStore
    fetch: Callable[[str], Awaitable[Fetched]]
    allowed_users: frozenset[int]
    conversing: Conversing | None = None  # the engine in each chat's conversation (wired at start-up)
    feedback: Feedback | None = None  # the votes on answers, in the same conversation file
    transcribe: Callable[[bytes], Transcript] | None = None
    zone: tzinfo = UTC  # the owner's time zone (this machine's): dates shown and written in notes
    notes: PendingNotes = field(default_factory=PendingNotes)
    kept: KeptNotes = field(default_factory=KeptNotes)  # saved from the chat, for Ask / Undo
    collector: Collector = field(default_factory=Collector)  # forwards and albums, gathered
    actions: Actions = field(default_factory=Actions)  # what the document buttons do (bot.find)
    locks: defaultdict[int, asyncio.Lock] = field(default_factory=lambda: defaultdict(asyncio.Lock))
    taps: set[tuple[str, str]] = field(default_factory=set)  # candidates being imported
    digesting: asyncio.Lock = field(default_factory=asyncio.Lock)  # one digest at a time: sent, remembered
    # per chat: the answer being written (/stop); where drafts were refused (answers stream by edits);
    # the language it is written to; the /lang choice (None: none)
    answering: dict[int, asyncio.Future] = field(default_factory=dict)
    no_drafts: set[int] = field(default_factory=set)
    languages: dict[int, str] = field(default_factory=dict)
    chosen: dict[int, str | None] = field(default_factory=dict)
    tokenizer: LoadedCounter | None = None  # the engine's token counter and why it is approximate (/status)


def deps_of(context: ContextTypes.DEFAULT_TYPE) -> BotDeps:
    return context.application.bot_data["deps"]


def words_of(deps: BotDeps, chat_id: int) -> Words:
    """The words a chat is written in (bot.language learns its language from each update)."""
    return owner_words(deps.languages.get(chat_id) or deps.settings.language or "en", deps.settings)
