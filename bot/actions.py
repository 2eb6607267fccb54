"""What the buttons on documents do (Open, Delete, Undo, a page of /find, Sources), kept server-side.

A button carries only ``act:<token>``; its kind and target stay here, per chat, for a day. A forged
or replayed callback can reach nothing but the tapping chat's own live buttons, and a button that
acts once (a confirmed delete, an undo) acts once.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CALLBACK_PREFIX = "act:"
KEEP_S = 24 * 3600.0
MAX_ACTIONS = 2048


@dataclass
class Action:
    """A button's meaning: its kind ("open", "delete", "page"…) and what it acts on."""

    chat_id: int
    kind: str
    target: dict[str, object] = field(default_factory=dict)
    once: bool = False
    made_at: float = 0.0
    used: bool = False


class Actions:
    """Buttons by token; the oldest are dropped beyond MAX_ACTIONS or after KEEP_S."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._actions: dict[str, Action] = {}

    def add(self, chat_id: int, kind: str, *, once: bool = False, **target: object) -> str:
        """Keep an action; the callback data for its button."""
        self._expire()
        while len(self._actions) >= MAX_ACTIONS:
            del self._actions[next(iter(self._actions))]
        token = secrets.token_urlsafe(9)
        self._actions[token] = Action(chat_id, kind, dict(target), once, self._clock())
        return CALLBACK_PREFIX + token

    def take(self, chat_id: int, data: str) -> Action | None:
        """The chat's action for this callback data; None when unknown, expired, another chat's, or
        a once-only action already taken."""
        self._expire()
        action = self._actions.get(data.removeprefix(CALLBACK_PREFIX))
        if action is None or action.chat_id != chat_id or action.used:
            return None
        if action.once:
            action.used = True
        return action

    def release(self, action: Action) -> None:
        """A once-only action that could not be done may be tapped again."""
        action.used = False

    def _expire(self) -> None:
        cutoff = self._clock() - KEEP_S
        for token in [t for t, a in self._actions.items() if a.made_at < cutoff]:
            del self._actions[token]
