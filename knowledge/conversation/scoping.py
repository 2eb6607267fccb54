"""Scope words in a question (pure): ``in:NAME`` keeps the search to one folder source, ``#tag`` to the
notes carrying a tag, as ``--in NAME`` and ``--tag TAG`` do on the command line.

``in:NAME`` is a word of its own (at the start or after white space; a source's name: letters, digits,
``_ . -``, a full stop after it is the sentence's) and is taken out of the question. ``#tag`` is a tag as
a note writes it (knowledge.text.tag_name: ``#押金``, ``#บ้าน``, ``#home/rent``; never ``C#`` nor ``#1``)
and stays in the question as its word: "how much was the #deposit" asks "how much was the deposit".
The first of each counts; later ones are words like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.text import is_tag_char, tag_name

_IN = re.compile(r"(?<!\S)in:([A-Za-z0-9][A-Za-z0-9_.-]{0,39})")


@dataclass(frozen=True)
class Asked:
    """A question without its scope words, and the source and tag they named (None: not named)."""

    question: str
    source: str | None = None
    tag: str | None = None


def scope_words(message: str) -> Asked:
    """The source (``in:NAME``) and tag (``#tag``) a message names, and the message without them."""
    source = None
    if m := _IN.search(message):
        source = m.group(1).rstrip(".")
        message = message[: m.start()] + message[m.start() + 3 + len(source) :]
    tag = None
    at = message.find("#")
    while at >= 0:
        end = at + 1
        while end < len(message) and is_tag_char(message[end]):
            end += 1
        if (at == 0 or message[at - 1].isspace()) and (tag := tag_name(message[at + 1 : end])):
            message = message[:at] + message[at + 1 :]  # the word stays, its '#' goes
            break
        at = message.find("#", end)
    return Asked(" ".join(message.split()), source, tag)
