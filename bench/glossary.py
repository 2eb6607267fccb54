"""A Chinese or Thai question about an English page without a model: kb's search with and without the
English gloss of the question's words (knowledge.retrieval.glossary, CC-CEDICT; knowledge.retrieval.thai_words,
Thai WordNet).

XQuAD en/zh/th, each article in one language only (bench/crossing.py's three rotations: kb's
pipeline, the real Qwen3 tokenizer, 160/48-token chunks, e5 and the Universal Sentence Encoder,
vectors cached), every question asked in every rotation: without the model's translation, and with
XQuAD's own translations of it where kb would ask for one (``+t``: the best the model could give;
bench/retrieval_cross.py). A hit at rank r
is a chunk of its article (in the document's language) holding the answer among the first r.
GLOSS_WEIGHT (knowledge.retrieval.glossing) is chosen on the first half of the articles (``tuning``)
and reported on the second (``held out``), never fitted there. Chinese and Thai questions are glossed
(one weight for both): the English questions' pairs are listed to show they do not move.

``--into-chinese`` sweeps INTO_CHINESE_WEIGHT instead: an English question's words in Chinese, the
dictionary read the other way, scoring the Chinese chunks (English questions are the ones that move);
``--into-thai`` sweeps INTO_THAI_WEIGHT: an English question's words in Thai through Thai WordNet;
``--pivot`` sweeps PIVOT_WEIGHT: a Chinese question's words in Thai and a Thai one's in Chinese, each
through the English of its own dictionary read in the other one.

Also: the gloss's cost per question (reading the dictionary once, then cutting and glossing; reading it
the other way once, then glossing an English question).

    python bench/glossary.py [--weights 0,0.2,0.3,0.5] [--into-chinese | --into-thai | --pivot] [--every 2] [--data DIR]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.crossing import arranged, cross_setup, embed_both, report, swept  # noqa: E402
from bench.retrieval import LANGS, hit_rank, rotations  # noqa: E402
from bench.retrieval_cross import with_translations  # noqa: E402
from knowledge.retrieval import glossing  # noqa: E402
from knowledge.retrieval.glossary import Glossary, OnDemand, reversed_senses  # noqa: E402
from knowledge.retrieval.search import Meaning, find  # noqa: E402
from knowledge.retrieval.second import Second  # noqa: E402
from knowledge.store.index import Index  # noqa: E402


def main() -> int:
    args, weights = swept(
        __doc__,
        "--weights",
        "0,0.3,0.5,0.7",
        "GLOSS_WEIGHT (or INTO_CHINESE_WEIGHT)",
        extra=[
            ("--into-chinese", "sweep INTO_CHINESE_WEIGHT: an English question's gloss in Chinese"),
            ("--into-thai", "sweep INTO_THAI_WEIGHT: an English question's gloss in Thai"),
            ("--pivot", "sweep PIVOT_WEIGHT: a Chinese question's gloss in Thai, a Thai one's in Chinese"),
        ],
    )
    picked = [name for name, on in (("INTO_CHINESE_WEIGHT", args.into_chinese), ("INTO_THAI_WEIGHT",
              args.into_thai), ("PIVOT_WEIGHT", args.pivot)) if on]  # fmt: skip
    setting = picked[0] if picked else "GLOSS_WEIGHT"
    asker = "en" if args.into_chinese or args.into_thai else "zh"
    docs, questions, env, counter, embedder, use = cross_setup(args)
    second = Second(use)
    glossary = OnDemand()
    t0 = time.perf_counter()
    words = glossary.get()
    read_s = time.perf_counter() - t0
    assert words is not None, "the glossary cannot be read (see the log)"
    xquad = arranged(docs, questions)
    methods = [f"g{w}{t}" for t in ("", "+t") for w in weights]
    asked: dict[str, list[bool]] = {
        m: [] for m in methods[len(weights) :]
    }  # Chinese questions across scripts
    loop = asyncio.new_event_loop()
    ranks: dict[tuple[str, str, str], dict[str, list[int | None]]] = {}
    chosen = getattr(glossing, setting)
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        for rotation, lang_of, settings, doc_ids in rotations(
            Path(tmp), docs, xquad.keys, env, counter, name="gloss"
        ):
            with Index(settings.index_path) as index:
                embed_both(index, embedder, second, use, batch=settings.embed_batch)
                meaning = Meaning.of(embedder, second=second, glossary=glossary)
                for q in questions[:: args.every]:
                    dlang, answers, gold, half = xquad.about(q, lang_of, doc_ids)
                    pair = ranks.setdefault((half, q[0], dlang), {m: [] for m in methods})
                    n = xquad.position[id(q)]
                    parallel = {lang: xquad.by_lang[lang][n][2] for lang in LANGS}
                    for w, m, mt in zip(
                        weights, methods[: len(weights)], methods[len(weights) :], strict=True
                    ):
                        setattr(glossing, setting, w)
                        pair[m].append(
                            hit_rank(find(index, q[2], k=args.k, meaning=meaning).results, gold, answers)
                        )
                        found, used = with_translations(
                            index, q, parallel, meaning, args.k, loop.run_until_complete
                        )
                        pair[mt].append(hit_rank(found, gold, answers))
                        if q[0] == asker and dlang != asker:
                            asked[mt].append(used)
                    setattr(glossing, setting, chosen)
            print(f"[rotation {rotation} done]", file=sys.stderr, flush=True)
    loop.close()
    report(ranks, methods)
    print(
        f"\n{asker} questions across scripts that kb translated (+t): "
        + ", ".join(f"{m} {sum(a) / max(len(a), 1):.3f}" for m, a in asked.items())
    )
    cost(words, read_s, [q[2] for q in xquad.by_lang["zh"]])
    cost_into_chinese(words, [q[2] for q in xquad.by_lang["en"]])
    return 0


def median_ms(gloss: Callable[[str], object], questions: list[str]) -> float:
    """The median time to gloss one of these questions, in ms (first use of each word included)."""
    times = []
    for q in questions:
        t0 = time.perf_counter()
        gloss(q)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def cost(words: Glossary, read_s: float, questions: list[str]) -> None:
    """Reading the dictionary (once a process) and glossing a question (median over these)."""
    print(
        f"\nreading CC-CEDICT: {read_s:.2f} s once; glossing a question: median"
        f" {median_ms(words.gloss, questions):.2f} ms (first use of each word included),"
        f" {len(words.senses):,} headwords"
    )


def cost_into_chinese(words: Glossary, questions: list[str]) -> None:
    """Reading the dictionary the other way (once a process) and glossing an English question (median)."""
    t0 = time.perf_counter()
    senses = reversed_senses(words.senses)  # as the first English question does (searches have read it)
    build_s = time.perf_counter() - t0
    print(
        f"reading it the other way: {build_s:.2f} s once, {len(senses):,} English senses;"
        f" glossing an English question: median {median_ms(words.chinese_gloss, questions):.2f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
