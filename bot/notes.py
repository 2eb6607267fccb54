"""Voice transcripts waiting for a "Save as note" tap: kept in memory, per chat, for a day.

A button carries only ``note:<token>``; the transcript stays here, so a forged or replayed
callback can save nothing but the tapping chat's own transcript, and only once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.tokens import Tokens

CALLBACK_PREFIX = "note:"
KEEP_S = 24 * 3600.0
MAX_PENDING = 64


@dataclass
class PendingNote:
    """A transcript the owner may keep."""

    chat_id: int
    text: str
    language: str
    heard_at: float
    saved: bool = False


class PendingNotes:
    """Transcripts by token (bot.tokens): a day, at most MAX_PENDING."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._tokens: Tokens[PendingNote] = Tokens(keep_s=KEEP_S, most=MAX_PENDING, clock=clock)

    def add(self, chat_id: int, text: str, language: str) -> str:
        """Keep a transcript; the callback data for its button."""
        note = PendingNote(chat_id, text, language, self._clock())
        return CALLBACK_PREFIX + self._tokens.add(chat_id, note)

    def take(self, chat_id: int, data: str) -> PendingNote | None:
        """The chat's unsaved note for this callback data, marked saved; None when unknown, expired,
        another chat's, or already saved."""
        note = self._tokens.get(chat_id, data.removeprefix(CALLBACK_PREFIX))
        if note is None or note.saved:
            return None
        note.saved = True
        return note

    def is_saved(self, chat_id: int, data: str) -> bool:
        note = self._tokens.get(chat_id, data.removeprefix(CALLBACK_PREFIX))
        return note is not None and note.saved
