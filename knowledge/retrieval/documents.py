"""Documents that match some words, for a list the owner can page through (``/find``), no model involved.

A document matches when its title holds every word given, or when one of its passages is relevant
to the words by kb's own gate (the relevance that decides whether the documents answer a question:
knowledge.retrieval.sufficiency), so ``/find 蛋白質`` lists an English page about proteins once its
vectors are made, and never every page that merely lies nearest. Each match shows its best passage's
first line holding one of the words (or its first line).
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.retrieval.search import Meaning, find
from knowledge.retrieval.sufficiency import DEFAULT_THRESHOLD
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.text import one_line

LINE_CHARS = 120
PASSAGES = 40  # passages searched; their documents are listed in rank order


@dataclass(frozen=True)
class DocumentMatch:
    """A document found for some words, and the passage that matched (None: its title did)."""

    document: DocumentRecord
    line: str
    chunk_id: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    summary: str | None = None  # the daemon's summary of the document, when it has one


def match_documents(
    index: Index,
    words: str,
    *,
    meaning: Meaning | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int = 50,
) -> list[DocumentMatch]:
    """Documents whose title holds every word, then those with a relevant passage, best first."""
    terms = [w.casefold() for w in words.split() if w.strip()]
    if not terms:
        return []
    docs = {d.id: d for d in sorted(index.documents(), key=lambda d: d.indexed_at, reverse=True)}
    matches = {
        doc.id: DocumentMatch(doc, "")
        for doc in docs.values()
        if all(t in doc.title.casefold() for t in terms)
    }
    found = find(index, words, k=PASSAGES, meaning=meaning, threshold=threshold)
    for r in found.results:
        if r.relevance < threshold or r.document_id not in docs:
            continue
        line = matching_line(r.text, terms)
        known = matches.get(r.document_id)
        if known is None or known.chunk_id is None:
            matches[r.document_id] = DocumentMatch(
                docs[r.document_id], line, r.chunk_id, r.start_line, r.end_line
            )
    return list(matches.values())[:limit]


def matching_line(text: str, terms: list[str]) -> str:
    """The first line of a passage that holds one of the terms (else its first line), shortened."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()] or [""]
    chosen = next((ln for ln in lines if any(t in ln.casefold() for t in terms)), lines[0])
    return one_line(chosen, LINE_CHARS)
