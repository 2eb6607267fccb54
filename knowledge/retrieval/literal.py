"""Documents that hold some words literally, for ``/find``: each word, as written, in a passage or the title.

The index narrows the candidates and the stored text decides. Each word is cut into the runs kb's
analyzer makes (knowledge.store.analysis): an alphabetic word is its stemmed term; a run of Chinese
is its character bigrams, of Thai its trigrams, asked for as an FTS5 phrase (the n-grams of a run
holding the word hold the word's n-grams one after another). A run shorter than its n-gram (a
single Chinese character) is asked for as any indexed term holding it. Every candidate passage is
then read and kept only when its text (or its document's title) contains the word: case and width
do not matter, nor accents for a word written without them; Chinese and Thai characters must be
the same. So "SSD" never lists a page that only says "solid state disk", and 押金 finds the note
that says 押金 however the ranking by relevance judged it.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from knowledge.store import analysis
from knowledge.store.index import Index
from knowledge.store.records import ChunkRecord

POSTINGS = 20_000  # candidate passages read from the index per word
FRAGMENT_TERMS = 500  # indexed terms holding a short piece of a word, OR-ed
READ_CHUNKS = 3_000  # passages read to confirm, at most, per query
BATCH = 200  # passages read at a time


@dataclass(frozen=True)
class Literal:
    """A document holding every word: how often, whether its title does, and its passage holding most."""

    document_id: str
    occurrences: int
    in_title: bool
    chunk: ChunkRecord | None  # None: only the title holds the words


def literal_form(text: str, *, fold_marks: bool = False) -> str:
    """Text as words are compared: NFKC, case-folded, no hidden characters; without accents when asked."""
    out = analysis.normalize(text)
    if fold_marks and not out.isascii():
        out = "".join(ch for ch in unicodedata.normalize("NFD", out) if unicodedata.category(ch) != "Mn")
    return out


def occurrences(text: str, word: str) -> int:
    """How often a word appears in a text, as ``literal_documents`` compares them."""
    folded = literal_form(word)
    return literal_form(text, fold_marks=folded.isascii()).count(folded) if folded else 0


def phrase(terms: Sequence[str]) -> str:
    """An FTS5 phrase of index terms, quoted: never a syntax error."""
    return '"' + " ".join(terms).replace('"', '""') + '"'


def word_pieces(word: str) -> list[tuple[str, ...] | str]:
    """How the index can narrow a word: per run, its terms as a phrase (a tuple), or a piece shorter
    than its script's n-gram (a str) to be looked for inside the indexed terms."""
    pieces: list[tuple[str, ...] | str] = []
    for kind, run in analysis.runs(word):
        if kind != "word" and len(run) < analysis.NGRAM[kind]:
            pieces.append(run)
        else:
            pieces.append(tuple(analysis.terms(run)))
    return pieces


def word_expression(index: Index, word: str) -> str | None:
    """The FTS5 expression of the passages that may hold a word; '' when none can; None when the index
    cannot narrow it (punctuation only)."""
    parts = []
    for piece in word_pieces(word):
        if isinstance(piece, tuple):
            parts.append(phrase(piece))
            continue
        holding = index.terms_holding(piece, limit=FRAGMENT_TERMS)
        if not holding:
            return ""
        parts.append("(" + " OR ".join(phrase([t]) for t in holding) + ")")
    return " AND ".join(parts) if parts else None


def literal_documents(index: Index, words: str, *, limit: int = 50) -> list[Literal]:
    """Documents whose passages or title hold every word literally: title hits first, then the most
    occurrences (then the newest)."""
    wanted = [w for w in dict.fromkeys(words.split()) if literal_form(w)]
    if not wanted:
        return []
    titles = {d.id: (literal_form(d.title), d.indexed_at) for d in index.documents()}
    folded = [(literal_form(w), literal_form(w).isascii()) for w in wanted]

    def title_counts(doc_id: str) -> list[int]:
        title = titles[doc_id][0]
        plain = literal_form(title, fold_marks=True)
        return [(plain if ascii_ else title).count(w) for w, ascii_ in folded]

    candidates: dict[str, set[int]] | None = None  # document → its passages that may hold a word
    for word in wanted:
        expression = word_expression(index, word)
        if expression is None:
            continue  # confirmed below against the text, like every other word
        found: dict[str, set[int]] = defaultdict(set)
        if expression:
            for doc_id, rowid in index.chunks_matching(expression, limit=POSTINGS):
                found[doc_id].add(rowid)
        if candidates is None:
            candidates = dict(found)
        else:
            candidates = {d: rows | found[d] for d, rows in candidates.items() if d in found}
    if candidates is None:  # no word the index can narrow: only titles are read
        candidates = {}
    by_title = {d for d in titles if all(title_counts(d))}
    for doc_id in by_title:
        candidates.setdefault(doc_id, set())

    results: list[Literal] = []
    read = 0
    ordered = sorted(candidates, key=lambda d: (d not in by_title, -len(candidates[d]), d))
    for start in range(0, len(ordered), BATCH):
        batch = [d for d in ordered[start : start + BATCH] if d in titles]
        rowids = [r for d in batch for r in sorted(candidates[d])][: max(READ_CHUNKS - read, 0)]
        read += len(rowids)
        chunks: dict[str, list[ChunkRecord]] = defaultdict(list)
        for chunk, _ in index.chunks_by_rowid(rowids).values():
            chunks[chunk.document_id].append(chunk)
        for doc_id in batch:
            counts = title_counts(doc_id)
            in_title = all(counts)
            best, best_n = None, 0
            for chunk in sorted(chunks[doc_id], key=lambda c: c.seq):
                per_word = [occurrences(chunk.text, w) for w in wanted]
                counts = [a + b for a, b in zip(counts, per_word, strict=True)]
                if sum(per_word) > best_n:
                    best, best_n = chunk, sum(per_word)
            if all(counts):
                results.append(Literal(doc_id, sum(counts), in_title, best))
        if read >= READ_CHUNKS:
            break
    results.sort(key=lambda r: titles[r.document_id][1], reverse=True)  # the newest first among equals
    results.sort(key=lambda r: (not r.in_title, -r.occurrences))
    return results[:limit]
