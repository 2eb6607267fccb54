"""bench/retrieval.py's cross-language part: each article indexed in one language only, its questions
asked in every language, with the model's translations or the reference ones (XQuAD's parallel
questions), as knowledge.retrieval.translate decides when to ask."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from pathlib import Path

from bench.retrieval import (  # noqa: E402
    GROUP_OF,
    LANGS,
    TARGETS,
    CachingEmbedder,
    Calls,
    Question,
    Run,
    hit_rank,
    recall,
    rotations,
)
from knowledge.model.tokenizer import TokenCounter
from knowledge.retrieval.backfill import embed_missing, embed_second_missing
from knowledge.retrieval.search import Found, Meaning, SearchResult, find, search
from knowledge.retrieval.second import Second
from knowledge.retrieval.translate import LANGUAGES, Translate, Translation, Translator, search_translated
from knowledge.store.index import Index


def report_calls(calls: Calls) -> None:
    """The model's translation calls: prompt and output tokens, time (median / p95)."""
    if not calls:
        return
    print(f"\nthe model's translation calls: {len(calls)} (median / p95)")
    for label, n in (("prompt tokens", 0), ("output tokens", 1), ("ms", 2)):
        xs = sorted(float(c[n] or 0) for c in calls)
        print(f"  {label:<14}{statistics.median(xs):>8.0f}{xs[int(0.95 * (len(xs) - 1))]:>8.0f}")


def with_translations(
    index: Index,
    q: Question,
    parallel: dict[str, str],
    meaning: Meaning,
    k: int,
    run: Run,
    translate: Translate | None = None,
) -> tuple[list[SearchResult], bool]:
    """The results for a question searched also in the index's other languages, as kb decides it
    (knowledge.retrieval.translate.search_translated): with ``translate``'s translations, or the
    reference ones (``parallel``: XQuAD's same question in each language); and whether any were used."""

    async def search(texts: Sequence[str]) -> Found:
        return find(index, q[2], k=k, meaning=meaning, translations=texts)

    async def reference(question: str, groups: Sequence[str]) -> list[Translation]:
        return [
            Translation(LANGUAGES[GROUP_OF[lang]][0], text)
            for lang, text in parallel.items()
            if lang != q[0] and GROUP_OF[lang] in groups
        ]

    found, used = run(search_translated(search, translate or reference, q[2], meaning.cache.group_counts))
    return found.results, bool(used)


def cross(
    tmp: Path,
    docs: dict[tuple[str, str], str],
    questions: list[Question],
    env: dict[str, str],
    counter: TokenCounter,
    embedder: CachingEmbedder,
    k: int,
    run: Run,
    translate: Translate | None = None,
    second: Second | None = None,
) -> None:
    """Each article in one language only (three rotations); recall per question × document language:
    words only, hybrid without the model, hybrid with the reference translations (XQuAD is
    parallel: the upper bound of translating the question), and with ``translate``'s when given.

    XQuAD is parallel: the n-th question of each language is the same question, so a hit is a
    chunk of the article (in the document's language) holding that question's answer in that language.
    """
    keys = sorted({key for _, key in docs})
    by_lang = {lang: [q for q in questions if q[0] == lang] for lang in LANGS}
    position = {id(q): n for lang in LANGS for n, q in enumerate(by_lang[lang])}
    methods = ["lexical", "hybrid", "reference", *(["model"] if translate else [])]
    ranks: dict[tuple[str, str], dict[str, list[int | None]]] = {}
    used: dict[tuple[str, str], list[bool]] = {}
    for _, lang_of, settings, doc_ids in rotations(tmp, docs, keys, env, counter, name="cross"):
        with Index(settings.index_path) as index:
            embed_missing(index, embedder, batch=settings.embed_batch, second=False)
            embedder.save()  # a long first run keeps what it embedded
            if second is not None:  # the Universal Sentence Encoder's opinion across scripts
                embed_second_missing(index, second, batch=settings.embed_batch)
            meaning = Meaning.of(embedder, second=second or False)
            for q in questions:
                dlang = lang_of[q[1]]
                n = position[id(q)]
                answers = by_lang[dlang][n][3]
                gold = doc_ids[(dlang, q[1])]
                pair = ranks.setdefault((q[0], dlang), {m: [] for m in methods})
                pair["hybrid"].append(hit_rank(search(index, q[2], k=k, meaning=meaning), gold, answers))
                parallel = {lang: by_lang[lang][n][2] for lang in LANGS}
                results, was_used = with_translations(index, q, parallel, meaning, k, run)
                pair["reference"].append(hit_rank(results, gold, answers))
                used.setdefault((q[0], dlang), []).append(was_used)
                if translate is not None:
                    results, _ = with_translations(index, q, parallel, meaning, k, run, translate)
                    pair["model"].append(hit_rank(results, gold, answers))
                if q[0] != dlang:
                    pair["lexical"].append(hit_rank(search(index, q[2], k=k), gold, answers))
    print("\ncross-lingual: each article in one language only; question language → document language")
    print("  r@1/r@5; 'reference': searched also with XQuAD's own translations of the question where kb")
    print("  would translate (the upper bound of the model's); 'asked': share of questions translated")
    head = f"{'pair':<10}{'n':>6}  {'lexical r@5':>12}  {'hybrid':>11}  {'reference':>11}  {'asked':>6}"
    print(head + (f"  {'model':>11}" if translate else ""))
    met = {"hybrid": True, "reference": True}
    goals = {"hybrid": (TARGETS["cross_r1"], TARGETS["cross_r5"]), "reference": (0.85, 0.96)}
    for (ql, dl), r in sorted(ranks.items(), key=lambda x: (x[0][0] == x[0][1], x[0])):
        label = f"{ql}→{dl}" if ql != dl else f"{ql} (same)"
        if ql != dl:
            for m in met:
                met[m] &= recall(r[m], 1) >= goals[m][0] and recall(r[m], 5) >= goals[m][1]
        asked = sum(used[(ql, dl)]) / len(used[(ql, dl)])
        line = (
            f"{label:<10}{len(r['hybrid']):>6}  {recall(r['lexical'], 5) if r['lexical'] else float('nan'):>12.3f}"
            f"  {recall(r['hybrid'], 1):>5.3f}/{recall(r['hybrid'], 5):.3f}"
            f"  {recall(r['reference'], 1):>5.3f}/{recall(r['reference'], 5):.3f}  {asked:>6.2f}"
        )
        if translate:
            line += f"  {recall(r['model'], 1):>5.3f}/{recall(r['model'], 5):.3f}"
        print(line)
    print(
        f"target without the model r@1 >= {goals['hybrid'][0]}, r@5 >= {goals['hybrid'][1]}: "
        f"{'met' if met['hybrid'] else 'NOT met'}; with reference translations r@1 >= {goals['reference'][0]}, "
        f"r@5 >= {goals['reference'][1]}: {'met' if met['reference'] else 'NOT met'}"
    )


def model_translator(
    url: str, timeout_s: float, loop: asyncio.AbstractEventLoop
) -> tuple[Translate | None, Calls]:
    """The model's translations through kb's own client (its session in ``loop``), or None when no
    model server answers at ``url``; and the list its calls are recorded in."""
    import aiohttp

    from knowledge.model.client import ModelClient, ModelError

    async def open_session() -> aiohttp.ClientSession:  # made inside the loop that uses it
        return aiohttp.ClientSession()

    calls: Calls = []
    session = loop.run_until_complete(open_session())
    llm = ModelClient(session, url, timeout_s=timeout_s)
    try:
        loop.run_until_complete(llm.health())
    except ModelError as exc:
        print(f"(no model server at {url}: {exc}; the model's translations are not measured)")
        loop.run_until_complete(session.close())
        return None, calls

    async def chat(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int | None, int | None]:
        completion = await llm.chat(messages, max_tokens=max_tokens)
        calls.append((completion.prompt_tokens, completion.completion_tokens, completion.elapsed_ms))
        return completion.text, completion.prompt_tokens, completion.completion_tokens

    return Translator(chat, timeout_s=timeout_s, cache_size=100_000), calls
