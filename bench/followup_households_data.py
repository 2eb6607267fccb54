"""Household notes in Chinese (Traditional) and Thai, and conversations over them whose follow-ups drop
the subject, as Chinese and Thai usually do: 「押金是幾個月？」 then 「什麼時候退？」.

Written for kb's benchmark (bench/followup_households.py); two sets with different notes and
conversations: ``tune`` (the cues were chosen on it) and ``check`` (read once, nothing changed after).
A conversation is (first question, its note, then later messages). A later message is
(text, the note that answers it or None, a human rewrite or None, kind): ``follow`` (needs the
conversation), ``alone`` (a question of its own: a topic change) or ``greeting``.

The notes and conversations themselves are bench/data/followup_households.json.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "followup_households.json"


def notes(sets: dict[str, list[list[str]]]) -> dict[str, list[tuple[str, ...]]]:
    """Each set's notes as (key, title, body)."""
    return {name: [tuple(row) for row in rows] for name, rows in sets.items()}


def conversations(sets: dict[str, list[list]]) -> dict[str, list[tuple]]:
    """Each set's conversations as (first question, its note, [(later message, its note or None, human
    rewrite or None, kind), ...])."""
    return {
        name: [(first, note, [tuple(message) for message in later]) for first, note, later in rows]
        for name, rows in sets.items()
    }


_DATA = json.loads(DATA.read_text(encoding="utf-8"))
NOTES = notes(_DATA["notes_zh"])
NOTES_TH = notes(_DATA["notes_th"])
CONVERSATIONS = conversations(_DATA["conversations_zh"])
CONVERSATIONS_TH = conversations(_DATA["conversations_th"])
