"""Button tokens: a button carries only a random token; what it means stays here, for its chat, a while.

One rule for every button the bot keeps a meaning for (document actions, saved things, voice
transcripts): a token is random (12 URL-safe characters), reached only from the chat it was made
for, forgotten after ``keep_s`` or once ``most`` newer ones exist. A forged, replayed-elsewhere or
expired callback finds nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Tokens(Generic[T]):
    """Values by token, each tied to one chat; the oldest dropped beyond ``most`` or after ``keep_s``."""

    def __init__(self, *, keep_s: float, most: int, clock: Callable[[], float] = time.time) -> None:
        self.keep_s = keep_s
        self.most = most
        self.clock = clock
        self._values: dict[str, tuple[int, float, T]] = {}

    def add(self, chat_id: int, value: T) -> str:
        """Keep ``value`` for ``chat_id``; its token."""
        self._expire()
        while len(self._values) >= self.most:
            del self._values[next(iter(self._values))]
        token = secrets.token_urlsafe(9)
        self._values[token] = (chat_id, self.clock(), value)
        return token

    def get(self, chat_id: int, token: str) -> T | None:
        """The value of ``token`` when it is this chat's and still kept."""
        self._expire()
        found = self._values.get(token)
        return found[2] if found is not None and found[0] == chat_id else None

    def _expire(self) -> None:
        cutoff = self.clock() - self.keep_s
        for token in [t for t, (_, made, _) in self._values.items() if made < cutoff]:
            del self._values[token]
