"""Ranking by words: bm25 over the analysed terms (knowledge.store.analysis), bounded whatever the index size.

A question is a sentence, not a keyword list: no term is required, each counts by its rarity (bm25's
idf) and by a weight of its own (1 for a question's own words; a share of a word's weight for the
terms of a gloss, knowledge.retrieval.glossary).

1. the terms are looked up in the term table; the most selective ones (at most ``PROBE_TERMS``, and no
   more postings than ``MAX_POSTINGS``) pick candidates (knowledge.store.index.candidates);
2. each candidate is scored with bm25 over *all* the terms, plus the bm25 of its best sentence: a
   question is usually a rephrased sentence of its answer, so the chunk holding that sentence beats a
   chunk that merely mentions the same names (:func:`rerank`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from knowledge.retrieval.sufficiency import Evidence
from knowledge.store import analysis
from knowledge.store.index import Index
from knowledge.store.records import Candidate

PROBE_TERMS = 10
MAX_POSTINGS = 12_000
SENTENCE_WEIGHT = 0.5
_K1 = 1.2
_B_CHUNK = 0.75
_B_SENTENCE = 0.5
_AVG_SENTENCE_TERMS = 20.0

# (term weights: idf x weight, the total mass with missing terms, the probe terms)
Scoring = tuple[dict[str, float], float, list[tuple[str, float]]]


class Ranked(NamedTuple):
    """A chunk's place in the ranking: its rowid, score, and the share of the question it covers
    (``relevance``; once judged, the probability that it answers the question) and its evidence."""

    rowid: int
    score: float
    relevance: float
    evidence: Evidence | None = None


def idf(df: int, n: int) -> float:
    """bm25's inverse document frequency, never negative."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def probe_terms(
    df: Mapping[str, int], *, limit: int = PROBE_TERMS, max_postings: int = MAX_POSTINGS
) -> list[str]:
    """The most selective terms, within a budget of postings (always at least one term)."""
    chosen: list[str] = []
    total = 0
    for term in sorted(df, key=lambda t: (df[t], t))[:limit]:
        if chosen and total + df[term] > max_postings:
            break
        chosen.append(term)
        total += df[term]
    return chosen


def score_body(body: str, weights: Mapping[str, float], avg_terms: float) -> tuple[float, float, float]:
    """(bm25 of the chunk, bm25 of its best sentence, idf mass of the terms it contains)."""
    chunk_tf: dict[str, int] = {}
    length = 0
    best = 0.0
    for sentence in body.split(analysis.SENTENCE_MARK):
        words = sentence.split()
        length += len(words)
        tf: dict[str, int] = {}
        for w in words:
            if w in weights:
                tf[w] = tf.get(w, 0) + 1
        if not tf:
            continue
        norm = _K1 * (1.0 - _B_SENTENCE + _B_SENTENCE * len(words) / _AVG_SENTENCE_TERMS)
        best = max(best, sum(weights[t] * n * (_K1 + 1.0) / (n + norm) for t, n in tf.items()))
        for t, n in tf.items():
            chunk_tf[t] = chunk_tf.get(t, 0) + n
    norm = _K1 * (1.0 - _B_CHUNK + _B_CHUNK * length / max(avg_terms, 1.0))
    chunk = sum(weights[t] * n * (_K1 + 1.0) / (n + norm) for t, n in chunk_tf.items())
    return chunk, best, sum(weights[t] for t in chunk_tf)


def rerank(
    candidates: Sequence[Candidate], weights: Mapping[str, float], *, total_weight: float
) -> list[Ranked]:
    """Best first: chunk bm25 plus the weighted best-sentence bm25, each normalised.

    ``relevance`` is an absolute measure, comparable across questions: the share of the
    question's idf mass (``total_weight``, words missing from the index included) that the
    chunk contains.
    """
    if not candidates:
        return []
    lengths = [c.body.count(" ") + 1 for c in candidates]
    avg = sum(lengths) / len(lengths)
    scores = [score_body(c.body, weights, avg) for c in candidates]
    top_chunk = max(s[0] for s in scores) or 1.0
    top_sentence = max(s[1] for s in scores) or 1.0
    ranked = [
        Ranked(c.rowid, chunk / top_chunk + SENTENCE_WEIGHT * sentence / top_sentence, matched / total_weight)
        for c, (chunk, sentence, matched) in zip(candidates, scores, strict=True)
    ]
    return sorted(ranked, key=lambda x: (-x.score, x.rowid))


def scoring(index: Index, terms: Mapping[str, float]) -> Scoring | None:
    """The scoring of weighted terms in this index: each known term's idf times its weight, the total
    mass (a term the index lacks counts at an unseen term's idf), and the probe terms; None when the
    index knows none of them."""
    if not terms:
        return None
    df = index.document_frequencies(list(terms))
    if not df:
        return None
    n = max(index.chunk_total(), max(df.values()))
    weights = {t: idf(df[t], n) * terms[t] for t in df}
    total = sum(weights.values()) + idf(0, n) * sum(w for t, w in terms.items() if t not in df)
    return weights, total, [(t, weights[t]) for t in probe_terms(df)]


def question_scoring(index: Index, question: str) -> Scoring | None:
    """The scoring of a question's own words, each of weight 1."""
    return scoring(index, dict.fromkeys(analysis.query_terms(question)[: PROBE_TERMS * 16], 1.0))
