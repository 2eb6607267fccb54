"""Text for a terminal: no control character from a document, a title or a file name acts on it.

ESC starts escape sequences (colours, cursor moves, window titles, OSC 52 clipboard writes),
BEL rings, a lone CR overwrites what is shown, C1 controls (U+0080–U+009F) are escapes to
some terminals, and bidirectional overrides reorder what is read. Each becomes a visible
``\\uXXXX``; newlines and tabs stay. Inside kb's JSON output (always within strings) that is
a valid JSON escape, so ``--json`` keeps the same values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TextIO

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def neutralise(text: str) -> str:
    """text with every terminal control character shown as ``\\uXXXX`` (newline and tab kept)."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class SafeStream:
    """A text stream that neutralises (and redacts) everything written through it."""

    def __init__(self, stream: TextIO, redact: Callable[[str], str] = lambda text: text) -> None:
        self._stream = stream
        self._redact = redact

    def write(self, text: str) -> int:
        self._stream.write(neutralise(self._redact(text)))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    @property
    def raw_stream(self) -> TextIO:
        """The stream underneath, for kb's own control output (a progress bar's carriage return)."""
        return self._stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
