"""What a process's first questions would load, loaded before they come.

The first search in a process reads the index's vectors into memory and loads the embedder; by the
question's language and the index's, it also loads the second embedder (a passage in another script:
knowledge.retrieval.second), reads CC-CEDICT (a Chinese question: knowledge.retrieval.glossary) and reads
it into Chinese (an English question where the index holds Chinese passages), or Thai WordNet (a Thai
question: knowledge.retrieval.thai_words) and reads it into Thai (an English or Chinese question where
the index holds Thai passages). Each first question in
a language pays for its part: on a quiet 2-core machine, in a 13,000-chunk index with passages in
English, Chinese and Thai, the first Chinese question's search took 0.69-0.78 s and the first English
one's 0.78-0.79 s, against 20-27 ms once warm. kb bot and the terminal chat call :func:`warm` on a
thread as they start (about 1.5 s there), so that the owner's first question is answered as fast as the
next.

It searches once in the reader's language, once in English and once in each other script the index
holds passages in (Chinese, Thai): what an owner's first question in one of them would load is loaded,
and nothing for a language neither the reader nor the index uses (an English-only index read in
English does not read the dictionary; read in Chinese, it does: the owner's Chinese questions are
glossed into English). The reader's own language goes first, so that a question asked at once (a
message waiting as the bot starts) waits only for what it needs itself: in a chat in Chinese, not for
the dictionary read into Chinese for English questions.
"""

from __future__ import annotations

from knowledge.retrieval.search import Meaning, find
from knowledge.store.index import Index

# One question a language group (knowledge.text.language_group), asked in that script.
QUESTIONS = {"other": "What is in here?", "cjk": "這裡寫了什麼？", "thai": "ที่นี่มีอะไรบ้าง"}


def group_of(language: str) -> str:
    """The language group of a language kb speaks (en, zh-Hant, zh-Hans, th; "" or another: English's)."""
    return "cjk" if language.startswith("zh") else "thai" if language == "th" else "other"


def warm(index: Index, meaning: Meaning | None, reader: str = "") -> tuple[str, ...]:
    """Search as the first questions would (see the module docstring), in the ``reader``'s language first
    (:func:`group_of`); the language groups searched in, in order, () without search by meaning (by words
    alone there is nothing to load ahead)."""
    if meaning is None:
        return ()
    first = group_of(reader)
    find(index, QUESTIONS[first], k=1, meaning=meaning)
    held = meaning.cache.group_counts()
    rest = tuple(g for g in ("other", "cjk", "thai") if g != first and (g == "other" or held.get(g)))
    for group in rest:
        find(index, QUESTIONS[group], k=1, meaning=meaning)
    return (first, *rest)
