"""Voice transcripts waiting for a "Save as note" tap: kept in memory, per chat, for a day.

A button carries only ``note:<token>``; the transcript stays here, so a forged or replayed
callback can save nothing but the tapping chat's own transcript, and only once.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

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
    """Transcripts by token; the oldest are dropped beyond MAX_PENDING or after KEEP_S."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._notes: dict[str, PendingNote] = {}

    def add(self, chat_id: int, text: str, language: str) -> str:
        """Keep a transcript; the callback data for its button."""
        self._expire()
        while len(self._notes) >= MAX_PENDING:
            del self._notes[next(iter(self._notes))]
        token = secrets.token_urlsafe(9)
        self._notes[token] = PendingNote(chat_id, text, language, self._clock())
        return CALLBACK_PREFIX + token

    def take(self, chat_id: int, data: str) -> PendingNote | None:
        """The chat's unsaved note for this callback data, marked saved; None when unknown, expired,
        another chat's, or already saved."""
        self._expire()
        note = self._notes.get(data.removeprefix(CALLBACK_PREFIX))
        if note is None or note.chat_id != chat_id or note.saved:
            return None
        note.saved = True
        return note

    def is_saved(self, chat_id: int, data: str) -> bool:
        note = self._notes.get(data.removeprefix(CALLBACK_PREFIX))
        return note is not None and note.chat_id == chat_id and note.saved

    def _expire(self) -> None:
        cutoff = self._clock() - KEEP_S
        for token in [t for t, n in self._notes.items() if n.heard_at < cutoff]:
            del self._notes[token]
