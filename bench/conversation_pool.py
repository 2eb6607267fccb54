"""The pool a conversational benchmark searches (bench/conversation.py): its passages in an index, the
turns before each case as kb's store holds them, and what each method searches for a case."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.conversation_data import Case, Pool, markdown  # noqa: E402
from bench.heldout import embed_all  # noqa: E402
from bench.retrieval import CachingEmbedder, build_said  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.conversation import followup  # noqa: E402
from knowledge.conversation.grounding import grounded  # noqa: E402
from knowledge.conversation.store import Turn  # noqa: E402
from knowledge.retrieval.search import Also, Meaning, find  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

K = 5
STARTED = time.perf_counter()

WRITTEN = "written"
PREVIOUS = "written+previous"
HISTORY = "history"
KB = "kb, no model"
KB_REF = "kb, reference rewrite"
KB_REF_ALWAYS = "kb, ref. rewrite, always"
REF = "reference rewrite alone"
KB_LLM = "kb, model rewrite"
LLM_ALONE = "model rewrite, else written"
METHODS = (WRITTEN, PREVIOUS, HISTORY, KB, KB_REF, KB_REF_ALWAYS, REF)
KB_METHODS = (KB, KB_REF, KB_REF_ALWAYS)
PARTS = {
    "MTRAG": "MTRAG, human-evaluated subset (every turn of 20 conversations, human rewrites)",
    "MTRAG-UN": "MTRAG-UN (one turn of each sampled conversation; no rewrites, nothing carried)",
    "INSCIT": "INSCIT dev (every turn; no rewrites; first turn standalone, later ones follow-ups)",
}


def say(text: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.perf_counter() - STARTED:5.0f} s] {text}", file=sys.stderr, flush=True)


@dataclass
class Built:
    """A pool in an index: each passage's document and chunk ids, and the titles kb gave them."""

    index: Index
    meaning: Meaning | None
    doc_of: dict[str, str]
    chunks_of: dict[str, tuple[str, ...]]
    title_of: dict[str, str]
    memo: dict[tuple, tuple[str, ...]] = field(default_factory=dict)

    def top(self, query: str, also: Also | None = None) -> tuple[str, ...]:
        """The documents of the k best chunks (one search per distinct query and Also)."""
        key = (query, repr(also))
        if key not in self.memo:
            found = find(self.index, query, k=K, meaning=self.meaning, also=also)
            self.memo[key] = tuple(r.document_id for r in found.results)
        return self.memo[key]

    def turns(self, case: Case, *, rewrites: bool = False) -> tuple[Turn, ...]:
        """The turns before a case as kb's store holds them (``rewrites``: searched as their rewrite)."""
        out = []
        for n, step in enumerate(case.history, 1):
            cited = tuple(c for key in step.refs for c in self.chunks_of[key])
            titles = tuple(self.title_of[key] for key in step.refs)
            standalone = step.rewrite if rewrites and step.rewrite else step.message
            out.append(Turn(n, step.message, standalone, step.answer, cited, float(n), titles))
        return tuple(out)


def open_pool(
    pool: Pool, home: Path, env: dict[str, str], counter: Any, embedder: CachingEmbedder | None
) -> Built:
    """Ingest the pool's passages (one document each) into a new index under ``home`` and embed it."""
    settings = load_settings(env, home=home)
    docs = {("en", key): markdown(p) for key, p in pool.passages.items()}
    doc_ids, build_s = build_said(
        home, docs, settings, counter, say=say, every=250, what=f"{pool.name} passages"
    )
    index = Index(settings.index_path)
    doc_of = {key: doc_ids[("en", key)] for key in pool.passages}
    chunks_of, title_of = {}, {}
    for key, doc_id in doc_of.items():
        first, last = index.document_rowid_range(doc_id) or (0, -1)
        rows = index.chunks_by_rowid(range(first, last + 1))
        chunks_of[key] = tuple(chunk.id for chunk, _ in sorted(rows.values(), key=lambda r: r[0].seq))
        title_of[key] = next(iter(rows.values()))[1].title if rows else ""
    print(
        f"{pool.name} index: {index.document_count()} documents (passages), {index.chunk_count()} chunks"
        f" (tokenizer {counter.name}, chunks {env['KB_CHUNK_MAX_TOKENS']}/{env['KB_CHUNK_OVERLAP_TOKENS']}"
        f" tokens), lexical build {build_s:.1f} s"
    )
    meaning = None
    if embedder is not None:
        embed_all(index, embedder, batch=settings.embed_batch)
        meaning = Meaning.of(embedder)
    return Built(index, meaning, doc_of, chunks_of, title_of)


# --- what each method searches ------------------------------------------------------------------


def kb_plan(case: Case, turns: Sequence[Turn], rewrite: str) -> followup.Plan:
    """kb's plan for a case: ``rewrite`` "none" (no model), "gated" (the reference rewrite, asked only
    when the message does not stand alone) or "always" (the reference rewrite on every later turn)."""
    asked = rewrite == "always" or (rewrite == "gated" and not followup.stands_alone(case.message, turns))
    answer = followup.check(case.rewrite, case.message) if turns and case.rewrite and asked else None
    if answer is not None:  # as the Rewriter keeps it: grounded in the conversation and the message
        answer = grounded(answer, case.message, turns, turns[-1].titles)
    return followup.plan(case.message, turns, answer)


def searched(built: Built, plan: followup.Plan, *, carry: bool) -> tuple[str, ...]:
    """The documents kb finds for a plan, as the engine searches it."""
    also = plan.also if carry or plan.also is None else replace(plan.also, carried=())
    return built.top(plan.standalone, also)


def method_tops(
    built: Built, case: Case, *, carry: bool = True, plain: bool = True
) -> dict[str, tuple[str, ...]]:
    """The top documents of each method for a case (``plain``: also the methods without kb's plan)."""
    turns = built.turns(case)
    out: dict[str, tuple[str, ...]] = {}
    if plain:
        out[WRITTEN] = built.top(case.message)
        previous = case.history[-1].message if case.history else ""
        out[PREVIOUS] = built.top(f"{previous} {case.message}".strip())
        everything = [t for step in case.history for t in (step.message, step.answer) if t]
        out[HISTORY] = built.top(" ".join([*everything, case.message]))
        if case.rewrite is not None:
            out[REF] = built.top(case.rewrite)
    out[KB] = searched(built, kb_plan(case, turns, "none"), carry=carry)
    if case.rewrite is not None:
        with_rewrites = built.turns(case, rewrites=True)
        out[KB_REF] = searched(built, kb_plan(case, with_rewrites, "gated"), carry=carry)
        out[KB_REF_ALWAYS] = searched(built, kb_plan(case, with_rewrites, "always"), carry=carry)
    return out


def score(built: Built, case: Case, top: Sequence[str]) -> tuple[float, float]:
    """recall@k and hit@k of a case's reference passages in the top documents."""
    wanted = {built.doc_of[key] for key in case.refs}
    found = len(wanted & set(top))
    return found / len(wanted), float(found > 0)
