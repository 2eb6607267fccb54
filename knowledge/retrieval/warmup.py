"""What a process's first questions would load, loaded before they come.

The first search in a process reads the index's vectors into memory and loads the embedder; by the
question's language and the index's, it also loads the second embedder (a passage in another script:
knowledge.retrieval.second), reads CC-CEDICT (a Chinese question: knowledge.retrieval.glossary) and reads
it into Chinese (an English question where the index holds Chinese passages). Each first question in
a language pays for its part: on a quiet 2-core machine, in a 13,000-chunk index with passages in
English, Chinese and Thai, the first Chinese question's search took 0.69-0.78 s and the first English
one's 0.78-0.79 s, against 20-27 ms once warm. kb bot and the terminal chat call :func:`warm` on a
thread as they start (about 1.5 s there), so that the owner's first question is answered as fast as the
next.

It searches once in English, then once in each other script the index holds passages in (Chinese,
Thai): what an owner's first question in one of them would load is loaded, and nothing is loaded for a
language the index does not hold (an English-only index does not read the dictionary).
"""

from __future__ import annotations

from knowledge.retrieval.search import Meaning, find
from knowledge.store.index import Index

# One question a language group (knowledge.text.language_group), asked in that script.
QUESTIONS = {"other": "What is in here?", "cjk": "這裡寫了什麼？", "thai": "ที่นี่มีอะไรบ้าง"}


def warm(index: Index, meaning: Meaning | None) -> tuple[str, ...]:
    """Search as the first questions would (see the module docstring); the language groups searched in,
    () without search by meaning (by words alone there is nothing to load ahead)."""
    if meaning is None:
        return ()
    find(index, QUESTIONS["other"], k=1, meaning=meaning)
    held = meaning.cache.group_counts()
    others = tuple(group for group in ("cjk", "thai") if held.get(group))
    for group in others:
        find(index, QUESTIONS[group], k=1, meaning=meaning)
    return ("other", *others)
