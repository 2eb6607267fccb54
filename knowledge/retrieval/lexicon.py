"""What the glossaries share: a text cut into a dictionary's longest words, and those words' terms weighed.

Chinese and Thai write no spaces between words: a question's runs of their script are cut at the
dictionary's longest match, letters no word starts with skipped (knowledge.retrieval.glossary,
knowledge.retrieval.thai_words). Each word then weighs one, shared among its index terms, so a word with
many senses counts no more than a word with one.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable


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
