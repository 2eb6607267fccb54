"""Multilingual text analysis: the terms kb indexes and searches, in English, Chinese and Thai alike.

One analyzer for every language, so one index serves them all:

* text is NFKC-normalised and case-folded; zero-width, BiDi-control and tag characters
  and NULs are removed, so a word with a hidden character still matches;
* words of alphabetic scripts become lower-case terms with diacritics removed and the
  Porter stemmer applied ("running" and "run", "engines" and "engine" meet);
* Chinese, Japanese and Korean have no spaces between words: each run is indexed as
  overlapping character bigrams (a single character stays a unigram);
* Thai, Lao, Khmer and Myanmar have no spaces between words either: each run is indexed
  as overlapping character trigrams (their vowel and tone marks are code points of their
  own, so three code points are often a single syllable). Dictionary segmentation was
  measured against them on XQuAD's Thai questions with the real Qwen3 tokenizer
  (bench/thai_segmentation.py: PyThaiNLP's and ICU's word breakers, alone or beside the
  trigrams, syllables, pairs of Thai character clusters): none raised hybrid recall@1 or
  @5 by more than a point (the best, +0.8 r@1, is within noise); words alone cost English
  questions almost a point of r@1 in a shared index (Thai chunks get fewer terms and win
  on the English words they hold).
  Trigrams need no dictionary, and a word matches however the writer spaced it
  ("ข้าวมันไก่" and "ข้าว มัน ไก่").

The index stores these terms space-separated in an FTS5 column with the ``ascii`` tokenizer,
so SQLite sees exactly the terms produced here. Queries go through the same analysis and
become a bound, fully quoted OR-expression: any user string is a valid query.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from knowledge.store.stemmer import porter_stem

ANALYZER_VERSION = "ml-3"

# Invisible characters that must not split or hide a word.
_INVISIBLE = re.compile(
    "[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\x00\U000e0000-\U000e007f]"
)

_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
_SEA = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_RUNS = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<sea>[{_SEA}]+)|(?P<word>[^\W_{_CJK}{_SEA}]+)")


def normalize(text: str) -> str:
    """NFKC, case-folded text without invisible characters."""
    return unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)).casefold()


def _strip_diacritics(word: str) -> str:
    """'café' → 'cafe'; leaves words without combining marks untouched."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")


def _ngrams(run: str, n: int) -> Iterator[str]:
    """Overlapping character n-grams of a run; a run shorter than n yields itself."""
    if len(run) <= n:
        yield run
        return
    for i in range(len(run) - n + 1):
        yield run[i : i + n]


def runs(text: str) -> list[tuple[str, str]]:
    """The runs of a normalised text, each with its kind: ``word`` (alphabetic), ``cjk`` or ``sea`` (Thai…)."""
    return [(m.lastgroup or "word", m.group()) for m in _RUNS.finditer(normalize(text))]


# The n-gram each script without spaces is indexed as (a shorter run stays whole).
NGRAM = {"cjk": 2, "sea": 3}


def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """The index terms of a text, in order (duplicates kept: they are term frequencies)."""
    out: list[str] = []
    for kind, run in runs(text):
        if kind == "word":
            if drop_stopwords and run in STOPWORDS:
                continue
            out.append(porter_stem(_strip_diacritics(run)))
        else:
            out.extend(_ngrams(run, NGRAM[kind]))
    return out


def index_text(text: str) -> str:
    """The analysed form of a short field (a title): terms separated by spaces."""
    return " ".join(terms(text))


# Sentence ends: . ! ? ; before a space, a CJK full stop (no space follows those), a line
# break, or a space between Thai characters (Thai separates phrases, not words, by spaces).
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+|(?<=[\u0e00-\u0e7f])\s+(?=[\u0e00-\u0e7f])")
# Separates sentences in the stored analysed body. The FTS5 ascii tokenizer treats it as
# punctuation, so it never becomes a term; the ranker splits on it to score sentences.
SENTENCE_MARK = " | "


def index_body(text: str) -> str:
    """The analysed body stored in the FTS5 column: terms by spaces, sentences by ' | '."""
    sentences = (" ".join(terms(s)) for s in SENTENCE_END.split(text))
    return SENTENCE_MARK.join(s for s in sentences if s)


# Question words and function words that say nothing about the topic. bm25's idf already
# discounts common terms; removing these keeps OR-queries short and fast.
STOPWORDS = frozenset(
    """a an the of to in on at by for from with about as into than then and or but not no nor
    is are was were be been being am do does did done has have had having can could will would
    shall should may might must this that these those there here it its it's they them their he
    him his she her we us our you your i me my what which who whom whose when where why how
    many much some any all each other such own same so too very just also only if whether
    name called""".split()
)
_CJK_STOP = frozenset(
    "什么 哪个 哪些 哪里 哪一 多少 为什 么? 是什 谁是 怎么 如何 的是 是哪 甚么 什麼 哪個 為什 怎麼 是誰".split()
)


def query_terms(text: str) -> list[str]:
    """Distinct search terms of a question, in order, without stopwords."""
    seen: dict[str, None] = {}
    for term in terms(text, drop_stopwords=True):
        if term in _CJK_STOP or term in seen:
            continue
        seen[term] = None
    return list(seen)


def match_expression(query_terms_: list[str]) -> str:
    """An FTS5 MATCH expression OR-ing the terms, each quoted: never a syntax error."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query_terms_)
