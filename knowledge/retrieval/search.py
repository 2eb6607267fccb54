"""Retrieval: a natural-language question in, the best passages out.

Lexically (knowledge.retrieval.bm25): the question's most selective terms pick candidates, each
scored with bm25 over all its terms plus its best sentence's; the best k are returned with their
documents. A Chinese or Thai question is also read through its words in English, and by meaning
through those in the index's other scripts, an English one through its words in Chinese and Thai
(knowledge.retrieval.glossing): each gloss scores the passages in its script the same way, and the share
of a Chinese question's words an English passage holds is evidence for the relevance gate (``gloss``).

With an embedder (:class:`Meaning`), search is hybrid: the lexical candidates and the chunks
nearest to the question's (language-centred) vector, from every language, form one pool; every
chunk in it gets both its lexical score and its cosine, and :func:`fuse` weighs the two in one place. A question
in one language thereby finds a passage written in another. Without vectors (embedder off or
down, nothing embedded yet) the ranking is the lexical one.

Every result carries its ``relevance``: the probability that it answers the question, from the
sufficiency model (knowledge.retrieval.sufficiency), which also gives :func:`find`'s verdict on
whether the documents answer the question at all.

Any string is a valid query: terms are quoted for FTS5, never parsed as its syntax.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import structlog

from knowledge.retrieval import sufficiency
from knowledge.retrieval.backfill import embed_background
from knowledge.retrieval.bm25 import Ranked, Scoring, question_scoring, rerank
from knowledge.retrieval.centring import Background
from knowledge.retrieval.embed import Embedder, EmbedderError
from knowledge.retrieval.glossary import OnDemand, english_terms, held
from knowledge.retrieval.glossing import GLOSS_POOL, Gloss, glossary_for, in_english
from knowledge.retrieval.glossing import glosses as glosses_of
from knowledge.retrieval.scope import Scope
from knowledge.retrieval.second import Opinion, Second, beside
from knowledge.retrieval.sufficiency import Evidence, Verdict
from knowledge.retrieval.translate import is_strong
from knowledge.retrieval.vectors import VectorCache, stored_background
from knowledge.store.index import Index
from knowledge.store.records import Candidate
from knowledge.text import has_words, language_group

log = structlog.get_logger()

CANDIDATES = 24

# Hybrid ranking (tuned on XQuAD en/zh/th, see bench/retrieval.py).
LEXICAL_POOL = 40  # lexical candidates that enter the fused ranking
VECTOR_POOL = 40  # nearest chunks by meaning that enter it
LEXICAL_WEIGHT = 0.5
VECTOR_WEIGHT = 0.5
# A chunk's words count in full once they cover this share of the question's idf mass, less
# below: words a question shares with a passage in its own language about something else
# (common words, names) must not outweigh the right passage in another language.
LEXICAL_FULL_COVERAGE = 0.7
# A chunk's score is the best of the question's score and this share of each translation's
# (knowledge.retrieval.translate): the question as written outranks its translations. Chosen on
# XQuAD with reference translations; a sum of the scores lifted pages in other languages above
# the same page in the question's own language.
TRANSLATION_WEIGHT = 0.9
# A message in a conversation is searched with more than one query (knowledge.conversation.followup),
# their scores added: a passage that answers a follow-up usually matches both its own words and the
# topic. Beside the model's standalone question the words as written count WRITTEN_WEIGHT (a rewrite
# that drifts cannot lose what they found, nor can they outrank it); without the model the words as
# written count in full and the previous message joined to them JOINED_WEIGHT. Tuned on MTRAG (its
# human-evaluated subset and MTRAG-UN), checked on INSCIT (bench/conversation.py).
WRITTEN_WEIGHT = 0.7
JOINED_WEIGHT = 0.5
# A chunk's meaning score is how far its (language-centred) cosine rises above the question's
# typical cosine with any chunk, relative to the best.
# Across scripts, the share of that cosine the second embedder's z-score takes (see fuse). Tuned on
# the first half of XQuAD en/zh/th's articles, checked on the second half (bench/crossing.py).
SECOND_SHARE = 0.5


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
    relevance: float = 0.0
    tags: tuple[str, ...] = ()  # its document's (a note's front matter and inline #tags)

    def to_json(self) -> dict[str, object]:
        """The JSON object ``kb search --json`` prints (the contract's fields, in order, then ``relevance``
        and ``tags``)."""
        out = asdict(self)
        out.pop("raw_path")
        out["relevance"] = out.pop("relevance")
        out["tags"] = list(out.pop("tags"))
        return out

    @property
    def citation(self) -> str:
        """``Title — raw/file.md:12-29``."""
        return f"{self.title} — {self.raw_path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class Found:
    """The best passages for a question and the verdict on whether they answer it."""

    results: list[SearchResult]
    verdict: Verdict
    best: Evidence | None = None  # the evidence of the best passage (see translate.is_strong)
    # how far the best passage's score stands above the next one's (see lead()); None for a follow-up
    # searched with more queries than its question, whose scores are sums
    lead: float | None = None


@dataclass
class Meaning:
    """What search by meaning needs: an embedder for the question and the chunk vectors in memory."""

    embedder: Embedder
    cache: VectorCache
    failed: bool = False  # the embedder failed once: logged once, lexical from then on until it works
    background: Background | None = None  # embedded here when the index has none stored (once)
    second: Second | None = None  # the second opinion across scripts (knowledge.retrieval.second)
    glossary: OnDemand | None = None  # a Chinese question's words in English (knowledge.retrieval.glossary)

    @classmethod
    def of(
        cls, embedder: Embedder | None, *, second: Second | bool = True, glossary: OnDemand | bool = True
    ) -> Meaning | None:
        """Search by meaning with this embedder, or None without one. ``second``: True asks the
        Universal Sentence Encoder across scripts beside the local e5 (the pair its fusion and the
        relevance weights were fitted for), False never; or the one to ask. ``glossary``: True reads
        CC-CEDICT for Chinese questions when one first comes, False never; or the one to read."""
        if embedder is None:
            return None
        words = OnDemand() if glossary is True else glossary or None
        return cls(embedder, VectorCache(embedder.name), second=beside(embedder, second), glossary=words)

    def refresh(self, index: Index) -> None:
        """Bring the vectors up to date, with the background passages (embedding them here, once,
        when no writer has stored them yet for this model)."""
        if (
            self.background is None
            and not self.cache.has_background  # read against one already (stored or embedded here)
            and index.chunk_total()
            and stored_background(index, self.embedder.name) is None
        ):
            try:
                self.background = embed_background(self.embedder)
            except EmbedderError as exc:
                log.warning("search.no_background", reason=str(exc))
        self.cache.refresh(index, background=self.background)


def search(
    index: Index,
    query: str,
    *,
    k: int = 5,
    meaning: Meaning | None = None,
    translations: Sequence[str] = (),
) -> list[SearchResult]:
    """The k best passages for a question (any string is a valid query; empty gives [])."""
    return find(index, query, k=k, meaning=meaning, translations=translations).results


@dataclass(frozen=True)
class Also:
    """What a message in a conversation is searched with besides its (standalone) question: more
    ``queries``, each ``(text, weight)``, their scores added to the question's (never judged: the
    verdict is the question's); ``question_weight``, what the question's own score counts; ``carried``
    chunk ids (the previous turn's citations: they join the pool and are ranked like any other); and
    the message ``written`` as the owner wrote it (shown beside the question, never searched by itself)."""

    queries: Sequence[tuple[str, float]] = ()
    question_weight: float = 1.0
    carried: Sequence[str] = ()
    written: str | None = None


def find(
    index: Index,
    query: str,
    *,
    k: int = 5,
    meaning: Meaning | None = None,
    threshold: float = sufficiency.DEFAULT_THRESHOLD,
    translations: Sequence[str] = (),
    also: Also | None = None,
    scope: Scope | None = None,
) -> Found:
    """The k best passages for a question and the verdict on whether the documents answer it.

    ``translations``: the question in other languages (knowledge.retrieval.translate); each
    ranks too: a chunk scores the best of the question's score and TRANSLATION_WEIGHT of each
    translation's. The verdict takes each passage's best judgement: of the question, or of a
    translation (the question as it would be asked in the passage's language). ``also`` adds the
    message as written and the carried passages of a follow-up (see Also). ``scope``: only the chunks of
    these documents are candidates, in every pool (see knowledge.retrieval.scope); the gate is the same.
    """
    ranked = rank(index, query, k=k, meaning=meaning, translations=translations, also=also, scope=scope)
    judged = [r.relevance for r in ranked]
    vectors = any(r.evidence is not None and r.evidence.standout is not None for r in ranked)
    return Found(
        _results(index, ranked[:k]),
        sufficiency.judge(judged, threshold=threshold, vectors=vectors),
        ranked[0].evidence if ranked else None,
        None if also and also.queries else lead(ranked),  # a follow-up's scores add other queries'
    )


def lead(ranked: Sequence[Ranked]) -> float | None:
    """How far the best candidate's score stands above the second's; None with fewer than two."""
    return ranked[0].score - ranked[1].score if len(ranked) > 1 else None


def rank(
    index: Index,
    query: str,
    *,
    k: int = 5,
    meaning: Meaning | None = None,
    translations: Sequence[str] = (),
    also: Also | None = None,
    scope: Scope | None = None,
) -> list[Ranked]:
    """Every candidate for a question, best first, each judged (relevance and evidence)."""
    texts = _Texts.of(query, translations, also)
    within = scope.rowids(index.conn) if scope is not None else None
    carried = index.rowids_of(also.carried) if also and also.carried else []
    if within is not None:  # a follow-up's carried passages stay in the scope too
        carried = [r for r, inside in zip(carried, np.isin(carried, within), strict=True) if inside]
    if meaning is not None:
        fused = _hybrid(index, texts, meaning, k=k, carried=carried, within=within)
        if fused is not None:
            return fused
    limit = max(CANDIDATES, k)
    scorings = [question_scoring(index, text) for text in texts.texts]
    english = in_english(
        index, texts.texts[0], glossary_for(texts.texts[0], meaning.glossary if meaning else None)
    )
    glossed = [english.scoring] if english is not None else []
    if all(s is None for s in [*scorings, *glossed]) and not carried:
        return []
    limits = [limit] * len(scorings) + [max(GLOSS_POOL, k)] * len(glossed)
    pool, _ = _pool(index, [*scorings, *glossed], limits=limits, nearest=carried, within=within)
    lexical = [_lexical(pool, scoring) for scoring in scorings]
    groups = {c.rowid: language_group(c.body) for c in pool}
    bonus = _gloss_bonus(pool, groups, [english] if english is not None else [], texts.weights[0])
    judged: dict[int, tuple[float, Evidence]] = {}
    out = []
    for c in pool:
        chunk_group = groups[c.rowid]
        for n, lex in enumerate(lexical[: texts.judged]):
            own = lex.get(c.rowid)
            coverage, lexical_score = (own.relevance, own.score) if own else (0.0, 0.0)
            evidence = Evidence(None, coverage, lexical_score, chunk_group == texts.groups[n])
            _judge(judged, c.rowid, evidence, n)
        each = [
            texts.weights[n] * (lex[c.rowid].score if c.rowid in lex else 0.0)
            for n, lex in enumerate(lexical)
        ]
        out.append(Ranked(c.rowid, texts.combine(each) + bonus.get(c.rowid, 0.0), *judged[c.rowid]))
    return sorted(out, key=lambda x: (-x.score, x.rowid))


@dataclass(frozen=True)
class _Texts:
    """The texts a question is ranked with, their weights, and how many of them are judged (the
    question and its translations come first; a conversation's other queries last, never judged)."""

    texts: list[str]
    weights: list[float]
    judged: int
    groups: list[str]

    @classmethod
    def of(cls, query: str, translations: Sequence[str], also: Also | None) -> _Texts:
        judged = list(dict.fromkeys([query, *(t for t in translations if t.strip())]))
        more = [(t, w) for t, w in (also.queries if also else ()) if t.strip() and t not in judged]
        question = also.question_weight if also else 1.0
        weights = [question] + [question * TRANSLATION_WEIGHT] * (len(judged) - 1) + [w for _, w in more]
        texts = [*judged, *(t for t, _ in more)]
        return cls(texts, weights, len(judged), [language_group(t) for t in texts])

    def combine(self, scores: Sequence[float]) -> float:
        """A chunk's score from its weighted score for each text: the best of the question and its
        translations, plus a conversation's other queries."""
        return max(scores[: self.judged]) + sum(scores[self.judged :])


def fuse(
    lexical: float,
    coverage: float,
    cosine: float | None,
    *,
    top_cosine: float,
    typical: float,
    opinion: Opinion | None = None,
) -> float:
    """One score from a chunk's lexical score (best = 1), the share of the question its words cover,
    and its cosine with the question (``typical``: the question's median cosine with any chunk).

    A cross-script chunk's cosine is first blended with the second embedder's ``opinion``: the two
    per-question z-scores (each over the question's cross-script candidates) weighed SECOND_SHARE to
    the second, expressed in the first's units (its mean and spread over the same candidates), so the
    chunk is then ranked against the others exactly as before."""
    words = LEXICAL_WEIGHT * _covered(lexical, coverage)
    if cosine is None:
        return words
    if opinion is not None and opinion.z is not None:
        cosine = (1.0 - SECOND_SHARE) * cosine + SECOND_SHARE * (opinion.mean + opinion.spread * opinion.z)
    return words + VECTOR_WEIGHT * max(cosine - typical, 0.0) / max(top_cosine - typical, 1e-6)


def _pool(
    index: Index,
    scorings: Sequence[Scoring | None],
    *,
    limits: Sequence[int],
    nearest: Iterable[int],
    within: np.ndarray | None = None,
) -> tuple[list[Candidate], list[set[int]]]:
    """The lexical candidates of each text (at most its limit, among the chunks ``within`` when given)
    and the chunks nearest by meaning, with their bodies; and, for each text, the rowids its words found."""
    pool: dict[int, Candidate] = {}
    found: list[set[int]] = []
    for scoring, limit in zip(scorings, limits, strict=True):
        found.append(set())
        if scoring is not None:
            for c in index.candidates(scoring[2], limit=limit, within=within):
                pool.setdefault(c.rowid, c)
                found[-1].add(c.rowid)
    extra = index.bodies(r for r in dict.fromkeys(nearest) if r not in pool)
    return [*pool.values(), *(Candidate(r, 0.0, b) for r, b in extra.items())], found


def _lexical(pool: Sequence[Candidate], scoring: Scoring | None) -> dict[int, Ranked]:
    """Each pooled chunk's lexical score (best = 1 + SENTENCE_WEIGHT) and coverage for one text."""
    if scoring is None:
        return {}
    weights, total, _ = scoring
    return {r.rowid: r for r in rerank(pool, weights, total_weight=total) if r.relevance > 0}


def _hybrid(
    index: Index,
    ranked: _Texts,
    meaning: Meaning,
    *,
    k: int,
    carried: Sequence[int],
    within: np.ndarray | None = None,
) -> list[Ranked] | None:
    """The fused ranking, or None when there are no vectors to search (the caller ranks lexically)."""
    texts = ranked.texts
    if not has_words(texts[0]):  # punctuation or emoji alone: nothing is near it in meaning either
        return []
    meaning.refresh(index)
    if meaning.cache.size == 0:
        return None
    try:
        raw = meaning.embedder.embed(texts, "query")
        if raw.shape[-1] != meaning.cache.dimension:
            raise EmbedderError(
                f"the embedder now gives vectors of {raw.shape[-1]} dimensions, the stored ones have "
                f"{meaning.cache.dimension}: they are made again in the background (the daemon, or kb ingest)"
            )
    except Exception as exc:  # whatever the embedder does, search falls back to words
        if not meaning.failed:
            log.warning("search.lexical_only", reason=f"{type(exc).__name__}: {exc}"[:500])
        meaning.failed = True
        return None
    meaning.failed = False
    vectors = [meaning.cache.query_vector(v, t) for v, t in zip(raw, texts, strict=True)]
    nearest = [dict(meaning.cache.nearest(v, max(VECTOR_POOL, k), within=within)) for v in vectors]
    scorings = [question_scoring(index, t) for t in texts]
    glossary = glossary_for(ranked.texts[0], meaning.glossary)
    glosses = glosses_of(index, ranked.texts[0], meaning.cache.group_counts(), meaning.glossary, glossary)
    held_words = glossary.held_words(ranked.texts[0]) if glossary is not None else ()
    limit = max(LEXICAL_POOL, k)
    near = [*carried, *(r for n in nearest for r in n)]
    limits = [limit] * len(scorings) + [max(GLOSS_POOL, k)] * len(glosses)
    glossed = [gloss.scoring for gloss in glosses]
    pool, seen = _pool(index, [*scorings, *glossed], limits=limits, nearest=near, within=within)
    pooled = [c.rowid for c in pool]
    each: dict[int, list[float]] = {rowid: [] for rowid in pooled}
    groups = meaning.cache.groups_of(pooled)
    english = english_terms(pool, groups) if held_words else {}
    second = meaning.second.rows(index, pooled) if meaning.second is not None else {}
    judged: dict[int, tuple[float, Evidence]] = {}
    for n, (vector, near, scoring) in enumerate(zip(vectors, nearest, scorings, strict=True)):
        lexical = _lexical(pool, scoring)
        cosines = {**meaning.cache.cosines(vector, [r for r in pooled if r not in near]), **near}
        opinions = meaning.second.opinions(texts[n], cosines, second) if second and meaning.second else {}
        typical_of, typical, passages, noise = meaning.cache.reference(vector)
        top_cosine = max(cosines.values(), default=typical)
        top_lexical = max((r.score for r in lexical.values()), default=0.0) or 1.0
        weight = ranked.weights[n]
        for rowid in pooled:
            lex = lexical.get(rowid)
            score = weight * fuse(
                lex.score / top_lexical if lex else 0.0,
                lex.relevance if lex else 0.0,
                cosines.get(rowid),
                top_cosine=top_cosine,
                typical=typical,
                opinion=opinions.get(rowid),
            )
            each[rowid].append(score)
        if n >= ranked.judged:  # the other queries rank, but the question alone is judged
            continue
        group = ranked.groups[n]
        for rowid in pooled:  # how well this text's evidence says the chunk answers (see _judge)
            lex = lexical.get(rowid)
            cos = cosines.get(rowid)
            chunk_group = groups.get(rowid)
            evidence = Evidence(
                None
                if cos is None or chunk_group is None
                else sufficiency.standout(cos, typical_of.get(chunk_group, typical), passages, noise),
                lex.relevance if lex else 0.0,
                lex.score if lex and rowid in seen[n] else 0.0,
                chunk_group == group if chunk_group is not None else True,
                opinions[rowid].cosine if rowid in opinions else None,
                held(held_words, english[rowid]) if n == 0 and rowid in english else None,
            )
            _judge(judged, rowid, evidence, n)
    scores = {rowid: ranked.combine(each[rowid]) for rowid in pooled}
    best = max(pooled, key=lambda r: (scores[r], -r)) if pooled else None
    if best is not None and any(g.into != "english" for g in glosses) and is_strong(judged[best][1]):
        # its own words found it a strong passage: one in another script, found by a gloss, must not outrank it
        glosses = [g for g in glosses if g.into == "english"]
    bonus = _gloss_bonus(pool, groups, glosses, ranked.weights[0])
    fused = [Ranked(rowid, scores[rowid] + bonus.get(rowid, 0.0), *judged[rowid]) for rowid in pooled]
    return sorted(fused, key=lambda x: (-x.score, x.rowid))


def _gloss_bonus(
    pool: Sequence[Candidate], groups: Mapping[int, str], glosses: Sequence[Gloss], weight: float
) -> dict[int, float]:
    """What the glosses add to each chunk's score: each gloss's normalised bm25 over the chunks it scores,
    times its coverage, at its weight (knowledge.retrieval.glossing)."""
    bonus: dict[int, float] = {}
    for gloss in glosses:
        lexical = _lexical(gloss.chunks(pool, groups), gloss.scoring)
        top = max((r.score for r in lexical.values()), default=0.0) or 1.0
        for rowid, r in lexical.items():
            more = weight * gloss.weight * _covered(r.score / top, r.relevance)
            bonus[rowid] = bonus.get(rowid, 0.0) + more
    return bonus


def _covered(lexical: float, coverage: float) -> float:
    """A lexical score (best = 1) counted in full once its words cover LEXICAL_FULL_COVERAGE of the
    question's idf mass, less below."""
    return lexical * min(1.0, coverage / LEXICAL_FULL_COVERAGE)


def _judge(judged: dict[int, tuple[float, Evidence]], rowid: int, evidence: Evidence, text: int) -> None:
    """Keep a chunk's best judgement: the question's (``text`` 0), or a translation's when that says more.

    A translation is the question as the owner would have asked it in the chunk's language, so its
    evidence on a chunk in that language (its words in the passage's script, its standout) is judged
    by the same model; on chunks in other languages it is not judged at all (three judgements of one
    question would let more unanswerable ones through by chance)."""
    if text > 0 and not evidence.same_script:
        return
    relevance = sufficiency.relevance(evidence)
    if text == 0 or relevance > judged[rowid][0]:
        judged[rowid] = (relevance, evidence)


def document_passages(index: Index, doc_id: str) -> list[SearchResult]:
    """Every chunk of one document, in document order (empty for a document that is not there)."""
    span = index.document_rowid_range(doc_id)
    if span is None:
        return []
    return _results(index, [Ranked(r, 0.0, 0.0) for r in range(span[0], span[1] + 1)])


def get_document_chunks(index: Index, doc_id: str, query: str, *, k: int = 3) -> list[SearchResult]:
    """At most 3 chunks of one document, best for the query first (its opening when nothing matches)."""
    k = max(0, min(k, 3))
    span = index.document_rowid_range(doc_id)
    if span is None or k == 0:
        return []
    ranked = _rank(index, query, limit=CANDIDATES, rowid_range=span)
    if not ranked:
        ranked = [Ranked(r, 0.0, 0.0) for r in range(span[0], min(span[1], span[0] + k - 1) + 1)]
    return _results(index, ranked[:k])


def _rank(
    index: Index, query: str, *, limit: int, rowid_range: tuple[int, int] | None = None
) -> list[Ranked]:
    scoring = question_scoring(index, query)
    if scoring is None:
        return []
    weights, total, probe = scoring
    return rerank(index.candidates(probe, limit=limit, rowid_range=rowid_range), weights, total_weight=total)


def _results(index: Index, ranked: Sequence[Ranked]) -> list[SearchResult]:
    rows = index.chunks_by_rowid(r.rowid for r in ranked)
    tags = index.tags_of(doc.id for _, doc in rows.values())
    out: list[SearchResult] = []
    for rowid, score, relevance, _ in ranked:
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
                relevance=round(relevance, 4),
                tags=tags.get(doc.id, ()),
            )
        )
    return out
