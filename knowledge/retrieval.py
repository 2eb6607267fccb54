"""Retrieval: a natural-language question in, the best passages out.

Two stages:

1. FTS5 finds candidate chunks with bm25 over the question's terms OR-ed together (a
   question is a sentence, not a keyword list: no term is required). A long question keeps
   only its most selective terms, so a pasted page is still a fast query.
2. The candidates are re-ranked in Python: the chunk's bm25 plus a sentence score, the bm25
   of its best-matching sentence. A question is usually a rephrased sentence of its answer,
   so the chunk that holds that sentence beats a chunk that merely mentions the same names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from knowledge import analysis
from knowledge.index import Candidate, Index

MAX_QUERY_TERMS = 48
CANDIDATES = 24
SENTENCE_WEIGHT = 0.5
_K1 = 1.2
_B = 0.5
_AVG_SENTENCE_TERMS = 20.0


@dataclass(frozen=True)
class SearchResult:
    """One passage: where it is and what it says. ``to_json`` gives the CLI's contract shape."""

    rank: int
    score: float
    chunk_id: str
    document_id: str
    title: str
    source_name: str
    source_url: str | None
    raw_path: str
    start_line: int
    end_line: int
    text: str

    def to_json(self) -> dict[str, object]:
        """The JSON object ``kb search --json`` prints."""
        out = asdict(self)
        out.pop("raw_path")
        return out

    @property
    def citation(self) -> str:
        """``Title — raw/file.md:12-29``."""
        return f"{self.title} — {self.raw_path}:{self.start_line}-{self.end_line}"


def idf(df: int, n: int) -> float:
    """bm25's inverse document frequency, never negative."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def select_terms(terms: Sequence[str], df: Mapping[str, int], *, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The terms worth searching: present in the index, the most selective first when too many."""
    present = [t for t in terms if df.get(t, 0) > 0]
    if len(present) <= limit:
        return present
    keep = set(sorted(present, key=lambda t: (df[t], t))[:limit])
    return [t for t in present if t in keep]


def sentence_score(body: str, weights: Mapping[str, float]) -> float:
    """bm25 of the best-matching sentence of an analysed body (sentences split by the index mark)."""
    best = 0.0
    for sentence in body.split(analysis.SENTENCE_MARK):
        words = sentence.split()
        tf = Counter(w for w in words if w in weights)
        if not tf:
            continue
        norm = _K1 * (1.0 - _B + _B * len(words) / _AVG_SENTENCE_TERMS)
        score = sum(weights[t] * n * (_K1 + 1.0) / (n + norm) for t, n in tf.items())
        best = max(best, score)
    return best


def rerank(candidates: Sequence[Candidate], weights: Mapping[str, float]) -> list[tuple[int, float]]:
    """(rowid, score) best first: normalised bm25 plus the weighted best-sentence score."""
    if not candidates:
        return []
    top_bm25 = max(-c.bm25 for c in candidates) or 1.0
    sentences = [sentence_score(c.body, weights) for c in candidates]
    top_sentence = max(sentences) or 1.0
    scored = [
        (c.rowid, -c.bm25 / top_bm25 + SENTENCE_WEIGHT * s / top_sentence)
        for c, s in zip(candidates, sentences, strict=True)
    ]
    return sorted(scored, key=lambda x: (-x[1], x[0]))


def search(index: Index, query: str, *, k: int = 5) -> list[SearchResult]:
    """The k best passages for a question (any string is a valid query; empty gives [])."""
    ranked = _rank(index, query, limit=max(CANDIDATES, k))
    return _results(index, ranked[:k])


def get_document_chunks(index: Index, doc_id: str, query: str, *, k: int = 3) -> list[SearchResult]:
    """At most 3 chunks of one document, best for the query first (its opening when nothing matches)."""
    k = max(0, min(k, 3))
    rowids = index.document_rowids(doc_id)
    if not rowids or k == 0:
        return []
    ranked = _rank(index, query, limit=k, rowids=rowids)
    if not ranked:
        ranked = [(r, 0.0) for r in rowids[:k]]
    return _results(index, ranked[:k])


def _rank(index: Index, query: str, *, limit: int, rowids: Sequence[int] | None = None) -> list[tuple[int, float]]:
    terms = analysis.query_terms(query)
    if not terms:
        return []
    df = index.document_frequencies(terms[: MAX_QUERY_TERMS * 8])
    terms = select_terms(terms, df)
    if not terms:
        return []
    n = max(1, index.chunk_count()) if rowids is None else max(1, len(rowids))
    weights = {t: idf(df[t], n) for t in terms}
    candidates = index.match(analysis.match_expression(terms), limit=limit, rowids=rowids)
    return rerank(candidates, weights)


def _results(index: Index, ranked: Sequence[tuple[int, float]]) -> list[SearchResult]:
    rows = index.chunks_by_rowid(r for r, _ in ranked)
    out: list[SearchResult] = []
    for rowid, score in ranked:
        if rowid not in rows:  # deleted between the match and the fetch
            continue
        chunk, doc = rows[rowid]
        out.append(
            SearchResult(
                rank=len(out) + 1,
                score=round(score, 6),
                chunk_id=chunk.id,
                document_id=doc.id,
                title=doc.title,
                source_name=doc.source_name,
                source_url=doc.source_url,
                raw_path=doc.raw_path,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                text=chunk.text,
            )
        )
    return out
