"""What the buttons on documents do (Open, Delete, Undo, a page of /find, Sources), kept server-side.

A button carries only ``act:<token>``; its kind and target stay here, per chat, for a day. A forged
or replayed callback can reach nothing but the tapping chat's own live buttons, and a button that
acts once (a confirmed delete, an undo) acts once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.tokens import Tokens

CALLBACK_PREFIX = "act:"
KEEP_S = 24 * 3600.0
MAX_ACTIONS = 2048


@dataclass
class Action:
    """A button's meaning: its kind ("open", "delete", "page"…) and what it acts on."""

    kind: str
    target: dict[str, object] = field(default_factory=dict)
    once: bool = False
    used: bool = False


class Actions:
    """Document buttons by token (bot.tokens): a day, at most MAX_ACTIONS."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._tokens: Tokens[Action] = Tokens(keep_s=KEEP_S, most=MAX_ACTIONS, clock=clock)

    def add(self, chat_id: int, kind: str, *, once: bool = False, **target: object) -> str:
        """Keep an action; the callback data for its button."""
        return CALLBACK_PREFIX + self._tokens.add(chat_id, Action(kind, dict(target), once))

    def take(self, chat_id: int, data: str) -> Action | None:
        """The chat's action for this callback data; None when unknown, expired, another chat's, or
        a once-only action already taken."""
        action = self._tokens.get(chat_id, data.removeprefix(CALLBACK_PREFIX))
        if action is None or action.used:
            return None
        if action.once:
            action.used = True
        return action

    def release(self, action: Action) -> None:
        """A once-only action that could not be done may be tapped again."""
        action.used = False
