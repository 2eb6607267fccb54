"""What the glossaries share: a text cut into a dictionary's longest words, and those words' terms weighed.

Chinese and Thai write no spaces between words: a question's runs of their script are cut at the
dictionary's longest match, letters no word starts with skipped (knowledge.retrieval.glossary,
knowledge.retrieval.thai_words). Each word then weighs one, shared among its index terms, so a word with
many senses counts no more than a word with one. Read the other way, an English question's index terms
are matched against the dictionaries' short English senses, phrases longest first (:func:`phrases_weighed`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from knowledge.text import language_group

E = TypeVar("E", bound=Hashable)
# A question is read as English when it holds one of these (as written: Vietnamese "thể" is not "the").
_ENGLISH_ASKS = frozenset(
    """what which who whom whose when where why how is are was were did does do can could should would will
    must i my you your it the of""".split()
)
_LATIN_WORD = re.compile(r"[a-z]+")


def longest_words(
    runs: Iterable[str], known: Container[str], *, longest: int, shortest: int = 1
) -> list[str]:
    """The known words of each run, longest match first (``shortest`` to ``longest`` characters)."""
    out: list[str] = []
    for run in runs:
        i = 0
        while i < len(run):
            for n in range(min(longest, len(run) - i), shortest - 1, -1):
                if run[i : i + n] in known:
                    out.append(run[i : i + n])
                    i += n
                    break
            else:
                i += 1
    return out


def weighed(words: Iterable[str], terms_of: Callable[[str], tuple[str, ...]]) -> dict[str, float]:
    """Index term → weight: each word's weight of 1 shared among its terms, added up where words share one."""
    weights: dict[str, float] = {}
    for word in words:
        terms = terms_of(word)
        for term in terms:
            weights[term] = weights.get(term, 0.0) + 1.0 / len(terms)
    return weights


def phrases_weighed(
    words: Sequence[str],
    senses: Mapping[tuple[str, ...], Sequence[E]],
    terms_of: Callable[[E], tuple[str, ...]],
    *,
    longest: int,
) -> dict[str, float]:
    """Index term → weight for English index terms read through a dictionary's short senses (``senses``:
    a sense's terms → the entries that have it): phrases of up to ``longest`` words matched longest first,
    each match's weight of 1 shared among its entries, an entry's among its terms."""
    weights: dict[str, float] = {}
    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            entries = senses.get(tuple(words[i : i + n]))
            if entries:
                _share(weights, entries, terms_of)
                i += n
                break
        else:
            i += 1
    return weights


def senses_weighed(
    words: Iterable[Iterable[tuple[str, ...]]],
    senses: Mapping[tuple[str, ...], Sequence[E]],
    terms_of: Callable[[E], tuple[str, ...]],
) -> dict[str, float]:
    """Index term → weight for words already read in English (each word: its senses' English index terms)
    and read on through another dictionary's short senses: each word's weight of 1 shared among the entries
    its senses name, an entry's among its terms (a Thai word's lemmas into Chinese, a Chinese word's senses
    into Thai)."""
    weights: dict[str, float] = {}
    for keys in words:
        _share(weights, list(dict.fromkeys(entry for key in keys for entry in senses.get(key, ()))), terms_of)
    return weights


def _share(weights: dict[str, float], entries: Sequence[E], terms_of: Callable[[E], tuple[str, ...]]) -> None:
    """Add one word's weight of 1 to ``weights``, shared among its entries, an entry's among its terms."""
    for entry in entries:
        terms = terms_of(entry)
        for term in terms:
            weights[term] = weights.get(term, 0.0) + 1.0 / len(entries) / len(terms)


def asks_in_english(question: str) -> bool:
    """Whether a question is read as English, to be glossed into Chinese or Thai: Latin script, and one of
    English's question or function words as written."""
    return language_group(question) == "other" and not _ENGLISH_ASKS.isdisjoint(
        _LATIN_WORD.findall(question.lower())
    )
