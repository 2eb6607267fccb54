"""The Porter stemmer (M. F. Porter, 1980) for English search terms.

"running" and "run", "engines" and "engine", "connection" and "connected" meet at one stem,
so a question finds a passage that words the same idea differently. Stems are index keys,
not words ("happy" → "happi"). The algorithm is the original one, step by step.
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")
MAX_WORD_CHARS = 64  # no English word is longer; longer runs are index keys as they are


def _consonants(word: str) -> list[bool]:
    """Porter's consonants, left to right: not a vowel, and 'y' only after a vowel (or first).

    One pass, no recursion: 'y' depends only on the letter before it, so a word of a thousand
    'y's costs a thousand steps, not a thousand nested calls.
    """
    out: list[bool] = []
    for i, ch in enumerate(word):
        if ch in _VOWELS:
            out.append(False)
        elif ch == "y":
            out.append(i == 0 or not out[i - 1])
        else:
            out.append(True)
    return out


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]: the number of vowel-consonant sequences."""
    m = 0
    prev_vowel = False
    for is_consonant in _consonants(stem):
        if prev_vowel and is_consonant:
            m += 1
        prev_vowel = not is_consonant
    return m


def _has_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y ("hop", not "snow")."""
    if len(word) < 3:
        return False
    c = _consonants(word)
    return c[-3] and not c[-2] and c[-1] and word[-1] not in "wxy"


def _replace(word: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    """Apply the first rule whose suffix matches, if the remaining stem is long enough."""
    for suffix, replacement in rules:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if _measure(stem) > min_measure else word
    return word


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _step1(word: str) -> str:
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            word = word[: -len(suffix)]
            if word.endswith(("at", "bl", "iz")):
                word += "e"
            elif _double_consonant(word) and word[-1] not in "lsz":
                word = word[:-1]
            elif _measure(word) == 1 and _cvc(word):
                word += "e"
            break
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    return word


def _step4(word: str) -> str:
    for suffix in sorted(_STEP4, key=len, reverse=True):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                return stem
            return word
    return word


def _step5(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            word = stem
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


@lru_cache(maxsize=65536)  # a pure function of the word; text repeats words constantly
def porter_stem(word: str) -> str:
    """The Porter stem of a lower-case ASCII word; other words come back unchanged."""
    if len(word) <= 2 or len(word) > MAX_WORD_CHARS or not word.isascii() or not word.isalpha():
        return word
    word = _step1(word)
    word = _replace(word, _STEP2, 0)
    word = _replace(word, _STEP3, 0)
    word = _step4(word)
    return _step5(word)
