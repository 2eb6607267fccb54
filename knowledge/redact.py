"""Secrets out of everything kb writes for people to read: log files, the console, error messages.

The bot token and the Brave key are known at start-up; anything shaped like a Telegram bot
token (``123456789:AA…``, as python-telegram-bot puts in its ``InvalidToken`` message and as
the Bot API URL carries it) is removed too, whoever logged it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# A bot token: the bot's numeric id, a colon, 30+ URL-safe characters (Telegram issues 35).
_BOT_TOKEN = re.compile(r"(?<!\d)\d{5,15}:[A-Za-z0-9_-]{30,}")
REDACTED = "[redacted]"
_MIN_SECRET_CHARS = 8  # shorter values (test placeholders, "1") would redact ordinary words


def redactor(secrets: Iterable[str]) -> Callable[[str], str]:
    """A function that replaces each secret (and every bot-token-shaped string) in a text."""
    known = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}, key=len, reverse=True)

    def redact(text: str) -> str:
        for secret in known:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return _BOT_TOKEN.sub(REDACTED, text)

    return redact
