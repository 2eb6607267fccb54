"""A question's words read into the index's other scripts through the dictionaries, without a model.

A Chinese question's words in English (knowledge.retrieval.glossary, CC-CEDICT) and a Thai one's
(knowledge.retrieval.thai_words, Thai WordNet) score the passages not written in Chinese or Thai;
through that English, a Chinese question's words in Thai and a Thai one's in Chinese score the
passages in those scripts; an English question's words in Chinese and in Thai (either dictionary read
the other way) score the passages in theirs. Each gloss is scored by bm25 as the question's own words
are (knowledge.retrieval.bm25) and adds its normalised score, weighed by the share of it a passage
covers, at its weight (knowledge.retrieval.search decides the rest of the ranking). Every weight was
tuned on half of XQuAD's articles and reported on the other half (bench/glossary.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knowledge.retrieval import bm25
from knowledge.retrieval.bm25 import Scoring
from knowledge.retrieval.glossary import IntoEnglish, OnDemand
from knowledge.retrieval.thai_words import ThaiGlossary
from knowledge.store.index import Index
from knowledge.store.records import Candidate

# A Chinese or Thai question's words in English add this much (bench/glossary.py).
GLOSS_WEIGHT = 0.5
GLOSS_POOL = 20  # each gloss's lexical candidates that enter the pool (tried 5, 10, 20, 40)
# An English question's words in Chinese, where the index holds some Chinese (bench/glossary.py
# --into-chinese: tried 0, 0.3, 0.5, 0.8, 1.0, 1.5 on the same tuning half).
INTO_CHINESE_WEIGHT = 1.0
# An English question's words in Thai, where the index holds some Thai (bench/glossary.py --into-thai:
# tried 0, 0.3, 1.0; at 1.0 the Thai passages it lifts come before the Chinese answers of English questions).
INTO_THAI_WEIGHT = 0.3
# A Chinese question's words in Thai, a Thai one's in Chinese, through their English (a Chinese word's
# CC-CEDICT senses read in Thai WordNet, a Thai word's lemmas in CC-CEDICT): bench/glossary.py --pivot,
# tried 0, 0.3, 0.6, 1.0 (above 0.3 a Chinese question's English answer loses more than Thai gains).
PIVOT_WEIGHT = 0.3


@dataclass(frozen=True)
class Gloss:
    """A question's words read in another language: the passages they score (``english``: those not in
    Chinese or Thai script; ``cjk``; ``thai``), the share of the question's weight they add, their scoring."""

    into: str
    weight: float
    scoring: Scoring

    def chunks(self, pool: Sequence[Candidate], groups: Mapping[int, str]) -> list[Candidate]:
        """The pooled chunks it scores (``groups``: each chunk's language group, where known)."""
        if self.into == "english":
            return [c for c in pool if groups.get(c.rowid) not in ("cjk", "thai")]
        return [c for c in pool if groups.get(c.rowid) == self.into]


def glossary_for(question: str, glossary: OnDemand | None) -> IntoEnglish | None:
    """The glossary for a Chinese or a Thai question (read on the first), None for another language or
    without one."""
    return glossary.for_question(question) if glossary is not None else None


def in_english(index: Index, question: str, glossary: IntoEnglish | None) -> Gloss | None:
    """A Chinese or Thai question's gloss in English, or None: another language, no glossary, no word it
    knows, or none of their English in the index."""
    scoring = bm25.scoring(index, glossary.gloss(question)) if glossary is not None else None
    return Gloss("english", GLOSS_WEIGHT, scoring) if scoring is not None else None


def glosses(
    index: Index,
    question: str,
    held: Mapping[str, int],
    words: OnDemand | None,
    into_english: IntoEnglish | None,
) -> list[Gloss]:
    """The question's glosses that find something in the index (``held``: its chunks per language group):
    a Chinese or Thai question's in English (``into_english``: the glossary read for it, see
    glossary_for) and, through that English, a Thai one's in Chinese and a Chinese one's in Thai; an
    English question's in Chinese and in Thai. Each only where the index holds passages in its script, at
    a weight that is not 0; none for another question, or without the glossaries."""
    out: list[tuple[str, float, dict[str, float]]] = []
    if into_english is not None:
        out.append(("english", GLOSS_WEIGHT, into_english.gloss(question)))
        if isinstance(into_english, ThaiGlossary):
            chinese = words.get() if words is not None and PIVOT_WEIGHT and held.get("cjk") else None
            if chinese is not None:
                out.append(("cjk", PIVOT_WEIGHT, chinese.chinese_of(into_english.lemma_keys(question))))
        else:
            thai = words.thai() if words is not None and PIVOT_WEIGHT and held.get("thai") else None
            if thai is not None:
                out.append(("thai", PIVOT_WEIGHT, thai.thai_of(into_english.sense_keys(question))))
    elif words is not None:
        chinese = words.for_english(question) if INTO_CHINESE_WEIGHT and held.get("cjk") else None
        if chinese is not None:
            out.append(("cjk", INTO_CHINESE_WEIGHT, chinese.chinese_gloss(question)))
        thai = words.thai_for_english(question) if INTO_THAI_WEIGHT and held.get("thai") else None
        if thai is not None:
            out.append(("thai", INTO_THAI_WEIGHT, thai.thai_gloss(question)))
    scored = [(into, weight, bm25.scoring(index, gloss)) for into, weight, gloss in out]
    return [Gloss(into, weight, scoring) for into, weight, scoring in scored if scoring is not None]
