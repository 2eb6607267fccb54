"""Documents that match some words, for a list the owner can page through (``/find``), no model involved.

First the documents that hold every word literally (knowledge.retrieval.literal: in a passage or the
title, as written), those whose title holds them first, then the most occurrences. After them, marked
as related, the documents with a passage relevant to the words by kb's own gate (the relevance that
decides whether the documents answer a question: knowledge.retrieval.sufficiency) that do not hold
the words, so ``/find 蛋白質`` lists an English page about proteins once its vectors are made, and
never every page that merely lies nearest. Each match shows its passage's first line holding one of
the words (or its first line).
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.retrieval.literal import literal_documents, literal_form
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
    is_literal: bool = True  # False: related to the words, without them


def match_documents(
    index: Index,
    words: str,
    *,
    meaning: Meaning | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int = 50,
) -> list[DocumentMatch]:
    """Documents holding every word literally, best first, then those with a relevant passage
    (``is_literal`` False)."""
    terms = [literal_form(w) for w in words.split() if literal_form(w)]
    if not terms:
        return []
    docs = {d.id: d for d in index.documents()}
    matches: dict[str, DocumentMatch] = {}
    for hit in literal_documents(index, words, limit=limit):
        chunk = hit.chunk
        matches[hit.document_id] = (
            DocumentMatch(
                docs[hit.document_id],
                matching_line(chunk.text, terms),
                chunk.id,
                chunk.start_line,
                chunk.end_line,
            )
            if chunk is not None
            else DocumentMatch(docs[hit.document_id], "")
        )
    found = find(index, words, k=PASSAGES, meaning=meaning, threshold=threshold)
    for r in found.results:
        if r.relevance < threshold or r.document_id not in docs or r.document_id in matches:
            continue
        line = matching_line(r.text, terms)
        matches[r.document_id] = DocumentMatch(
            docs[r.document_id], line, r.chunk_id, r.start_line, r.end_line, is_literal=False
        )
    return list(matches.values())[:limit]


def matching_line(text: str, terms: list[str]) -> str:
    """The first line of a passage that holds one of the terms (else its first line), shortened."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()] or [""]
    chosen = next(
        (ln for ln in lines if any(t in literal_form(ln, fold_marks=t.isascii()) for t in terms)), lines[0]
    )
    return one_line(chosen, LINE_CHARS)
