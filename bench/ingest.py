"""Ingest and search speed: a big HTML page, ingest cost vs index size, search at 100,000 chunks.

Figures printed (medians and ratios; the machine is shared and noisy, so nothing here is a test):

1. a 170 KB HTML page, from the file in the inbox to "kb search finds it": median of 5 runs
   (target under 1 s);
2. per-file ingest time with 10 documents in the index and with 10,000 documents in it:
   medians over ``--rounds`` batches of 19 files each, the small and the big index taking
   turns so that both see the same load on a shared machine, and their ratio (target within
   1.2x);
3. search latency at 100,000 chunks over the XQuAD questions: median and p95 (target p95
   under 10 ms);
4. vectors at 100,000 chunks: their size on disk (target <= 200 MB), the time the in-memory
   VectorCache takes to load them, the refresh a question pays right after one new document
   (incremental, against a full load), and a hybrid search with the real local embedder:
   query embedding + vector search, Chinese questions read through their gloss too as kb does,
   p95 (target < 60 ms), and the Chinese questions' apart. Embedding 100,000 real chunks takes
   hours here, so the stored vectors are SYNTHETIC random unit vectors of the local model's
   dimension: only their size and the cost of searching them are measured, not their ranking;
5. the 170 KB page fully embedded by the real local embedder: seconds and chunks/s
   (target < 60 s).

The 10,000-document index (≈100,000 chunks with the approximate counter, ≈140,000 with the
real tokenizer, whose Thai chunks are shorter) is made of documents built from shuffled XQuAD
sentences in English, Chinese and Thai, ingested through the same pipeline as any file.

The tokenizer is the real Qwen3 one bundled for the benchmarks unless ``--tokenizer`` says
otherwise (a tokenizer.json, a model folder, a cached hub id, or ``approx``).

    python bench/ingest.py [--docs 10000] [--keep DIR] [--data DIR] [--tokenizer SPEC|approx]
                           [--rounds 3] [--no-vectors]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from knowledge.config import Settings, load_settings
from knowledge.ingest.pipeline import Ingestor
from knowledge.logs import configure_logging
from knowledge.model.tokenizer import TokenCounter, hf_cache_dir, load_counter, reference_tokenizer
from knowledge.retrieval import backfill, vectors
from knowledge.retrieval.embed import Embedder, LocalEmbedder, Side
from knowledge.retrieval.glossary import OnDemand
from knowledge.retrieval.search import Meaning, search
from knowledge.retrieval.second import Second
from knowledge.store.analysis import SENTENCE_END
from knowledge.store.index import Index
from knowledge.store.vectors import DTYPE, encode
from knowledge.text import language_group

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"
LANGS = ("en", "zh", "th")


def corpus(data_dir: Path) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """Sentences per language, all paragraphs (English) and all questions."""
    sentences: dict[str, list[str]] = {}
    paragraphs: list[str] = []
    questions: list[str] = []
    for lang in LANGS:
        data = json.loads((data_dir / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
        out: list[str] = []
        for article in data:
            for p in article["paragraphs"]:
                out.extend(s.strip() for s in SENTENCE_END.split(p["context"]) if len(s.strip()) > 20)
                if lang == "en":
                    paragraphs.append(p["context"])
                questions.extend(qa["question"] for qa in p["qas"])
        sentences[lang] = out
    return sentences, paragraphs, questions


def synthetic_doc(rng: random.Random, sentences: dict[str, list[str]], n: int) -> str:
    """A Markdown document of shuffled sentences in one language, in paragraphs, about 10 chunks long."""
    lang = LANGS[n % 3]
    pool = sentences[lang]
    target_chars = {"en": 5200, "zh": 1500, "th": 4200}[lang]
    parts = [f"# Document {n}", ""]
    size = 0
    while size < target_chars:
        para = " ".join(rng.choice(pool) for _ in range(rng.randint(3, 6)))
        parts += [para, ""]
        size += len(para)
    return "\n".join(parts)


def big_html(paragraphs: list[str], target_bytes: int = 170_000) -> str:
    """A documentation-like page of about 170 KB: menu, headings, paragraphs, lists, a table, a footer."""
    body: list[str] = []
    size = 0
    n = 0
    while size < target_bytes:
        para = paragraphs[n % len(paragraphs)]
        section = (
            f"<h2>Section {n}</h2><p>{para}</p>"
            f"<ul><li>Point {n}.1 about the topic</li><li>Point {n}.2 with <a href='/x/{n}'>a link</a></li></ul>"
        )
        if n % 10 == 0:
            section += (
                "<table><tr><th>Key</th><th>Value</th></tr>"
                + "".join(f"<tr><td>k{n}-{i}</td><td>v{i}</td></tr>" for i in range(5))
                + "</table>"
            )
        body.append(section)
        size += len(section.encode())
        n += 1
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Big benchmark page</title>"
        "<script>var tracking = 1;</script><style>body{font:14px sans-serif}</style></head><body>"
        "<header><nav><a href='/'>Home</a> <a href='/docs'>Docs</a></nav></header>"
        "<div class='cookie-banner'>We use cookies</div><main><h1>Big benchmark page</h1>"
        + "".join(body)
        + "<p>The zebrafish marker sentence closes the page.</p></main><footer>Copyright</footer></body></html>"
    )


def fresh_settings(home: Path) -> Settings:
    return load_settings({"KB_MODEL": "", "KB_TOKENIZER": ""}, home=home)


def bench_big_page(paragraphs: list[str], counter: TokenCounter, runs: int = 5) -> list[float]:
    """Seconds from ingest start to a search hit, for a 170 KB page, per run."""
    page = big_html(paragraphs)
    times: list[float] = []
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
            settings = fresh_settings(Path(tmp))
            with Index(settings.index_path) as index:
                ingestor = Ingestor(settings, index, counter)
                path = settings.inbox / f"page-{run}.html"
                path.write_text(
                    page.replace("Big benchmark page", f"Big benchmark page {run}"), encoding="utf-8"
                )
                t0 = time.perf_counter()
                outcome = ingestor.ingest(path)
                results = search(index, "zebrafish marker sentence", k=1)
                elapsed = time.perf_counter() - t0
                assert outcome.status == "indexed" and results and "zebrafish" in results[0].text, outcome
                times.append(elapsed)
    print(
        f"170 KB HTML page ({len(page.encode()) // 1024} KB) converted and searchable: "
        f"median {statistics.median(times) * 1000:.0f} ms over {runs} runs (target < 1000 ms)"
    )
    return times


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class TimedEmbedder:
    """Another embedder, with the time of each call kept (to split query latency)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name = inner, inner.name
        self.seconds: list[float] = []

    def embed(self, texts: list[str], side: Side) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.inner.embed(texts, side)
        self.seconds.append(time.perf_counter() - t0)
        return out


def store_synthetic_vectors(index: Index, model: str, dim: int, *, seed: int = 7) -> int:
    """Give every chunk without one a random unit vector under ``model``; how many were stored."""
    rng = np.random.default_rng(seed)
    rows = index.conn.execute(
        "SELECT c.rowid, c.text_sha256 FROM chunks c WHERE NOT EXISTS"
        " (SELECT 1 FROM chunk_vectors v WHERE v.rowid = c.rowid AND v.model = ?) ORDER BY c.rowid",
        (model,),
    ).fetchall()
    stored = 0
    for start in range(0, len(rows), 10_000):
        part = rows[start : start + 10_000]
        vecs = rng.standard_normal((len(part), dim), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        stored += index.store_vectors(
            model,
            [(rowid, sha, "other", encode(v)) for (rowid, sha), v in zip(part, vecs, strict=True)],
        )
    return stored


def bench_refresh(
    index: Index, cache: vectors.VectorCache, add_document: Callable[[int], None], dim: int, runs: int
) -> None:
    """The refresh after one new document and its vectors: incremental, and a full load of the same index."""
    incremental, full, added = [], [], []
    for n in range(runs):
        add_document(n)
        added.append(store_synthetic_vectors(index, cache.model, dim, seed=100 + n))
        t0 = time.perf_counter()
        mode = cache.refresh(index)
        incremental.append(time.perf_counter() - t0)
        assert mode == "incremental", mode
        fresh = vectors.VectorCache(cache.model)
        t0 = time.perf_counter()
        fresh.refresh(index)
        full.append(time.perf_counter() - t0)
        assert fresh.size == cache.size
        del fresh
    print(
        f"  refresh after one new document (median {statistics.median(added):.0f} new vectors) at {cache.size}"
        f" vectors, {runs} runs: incremental median {statistics.median(incremental) * 1000:.0f} ms"
        f" ({', '.join(f'{t * 1000:.0f}' for t in incremental)}), full load median"
        f" {statistics.median(full) * 1000:.0f} ms ({', '.join(f'{t * 1000:.0f}' for t in full)})"
    )


def bench_vectors(
    index: Index, questions: list[str], rounds: int, add_document: Callable[[int], None]
) -> None:
    """Size, cache load and refresh times and hybrid query latency with a vector for every chunk (synthetic)."""
    embedder = LocalEmbedder()
    dim = embedder.embed(["dimension probe"], "query").shape[1]
    added = store_synthetic_vectors(index, embedder.name, dim)
    n_vectors, n_chunks = index.vector_count(embedder.name), index.chunk_total()
    index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    table_bytes = index.conn.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name = 'chunk_vectors'"
    ).fetchone()[0]
    per_100k = table_bytes / n_vectors * 100_000 / 1e6
    print(
        f"vectors: {n_vectors} SYNTHETIC random unit vectors ({dim}-dim, {DTYPE.__name__},"
        f" model {embedder.name}; {added} stored now) for {n_chunks} chunks: only size and search cost"
        f" are measured, not ranking"
    )
    print(f"  on disk: {table_bytes / 1e6:.1f} MB, {per_100k:.1f} MB per 100k vectors (target <= 200 MB)")
    loads = []
    for _ in range(max(rounds, 3)):
        cache = vectors.VectorCache(embedder.name)
        t0 = time.perf_counter()
        cache.refresh(index)
        loads.append(time.perf_counter() - t0)
    print(
        f"  VectorCache (re)load of {cache.size} vectors: median {statistics.median(loads) * 1000:.0f} ms"
        f" over {len(loads)} loads"
    )
    bench_refresh(index, cache, add_document, dim, max(rounds, 5))
    timed = TimedEmbedder(embedder)
    meaning = Meaning(timed, cache, glossary=OnDemand())  # a Chinese question read through its gloss too
    sample = questions[::7]
    for q in sample[:20]:  # warm up the embedder, the glossary and the page cache
        search(index, q, k=5, meaning=meaning)
    totals, embeds, nearest = [], [], []
    chinese: list[float] = []
    for _ in range(rounds):
        for q in sample:
            timed.seconds.clear()
            t0 = time.perf_counter()
            results = search(index, q, k=5, meaning=meaning)
            totals.append((time.perf_counter() - t0) * 1000)
            assert results and len(timed.seconds) == 1, "the search was not hybrid"
            embeds.append(timed.seconds[0] * 1000)
            if language_group(q) == "cjk":
                chinese.append(totals[-1])
        query = embedder.embed([sample[0]], "query")[0]
        for _ in range(50):
            t0 = time.perf_counter()
            cache.nearest(query, 40)
            nearest.append((time.perf_counter() - t0) * 1000)
    searches = [t - e for t, e in zip(totals, embeds, strict=True)]
    print(
        f"  hybrid search (query embedding + vector search + lexical) over {len(sample)} questions x {rounds}:"
        f" median {statistics.median(totals):.1f} ms, p95 {percentile(totals, 0.95):.1f} ms (target p95 < 60 ms);"
        f" of which embedding the question median {statistics.median(embeds):.1f} ms,"
        f" p95 {percentile(embeds, 0.95):.1f} ms; the rest median {statistics.median(searches):.1f} ms,"
        f" p95 {percentile(searches, 0.95):.1f} ms; VectorCache.nearest(40) alone median"
        f" {statistics.median(nearest):.1f} ms, p95 {percentile(nearest, 0.95):.1f} ms"
    )
    print(
        f"  of those, the Chinese questions (glossed, {len(chinese) // rounds} x {rounds}):"
        f" median {statistics.median(chinese):.1f} ms,"
        f" p95 {percentile(chinese, 0.95):.1f} ms"
    )


def bench_page_embedding(paragraphs: list[str], counter: TokenCounter) -> None:
    """Seconds until the 170 KB page is fully embedded by the real local embedder, and chunks/s; then
    the Universal Sentence Encoder's pass over the same chunks (knowledge.retrieval.second), side by
    side: the embedding time per chunk with it on against e5's alone, and the bytes each adds a chunk."""
    page = big_html(paragraphs)
    embedder = LocalEmbedder()
    embedder.embed(["warm up"], "passage")  # loading the model is not embedding
    second = Second()
    second.encoder.encode(["warm up"])
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        settings = fresh_settings(Path(tmp))
        with Index(settings.index_path) as index:
            ingestor = Ingestor(settings, index, counter)
            path = settings.inbox / "page-embed.html"
            path.write_text(page, encoding="utf-8")
            t0 = time.perf_counter()
            outcome = ingestor.ingest(path)
            lexical = time.perf_counter() - t0
            assert outcome.status == "indexed", outcome
            done = backfill.embed_missing(index, embedder, second=False)
            total = time.perf_counter() - t0
            assert backfill.coverage(index, embedder.name).is_complete
            t1 = time.perf_counter()
            use_done = backfill.embed_second_missing(index, second)
            use_s = time.perf_counter() - t1
            assert backfill.second_coverage(index, second).is_complete
            e5_bytes, use_bytes = (
                index.conn.execute(f"SELECT avg(length(vec)) FROM {table}").fetchone()[0]
                for table in ("chunk_vectors", "use_vectors")
            )
    embed_s = total - lexical
    print(
        f"170 KB page fully embedded (real local embedder, {embedder.name}): {total:.1f} s from the inbox"
        f" ({lexical:.1f} s lexical, {embed_s:.1f} s embedding {done} chunks: {done / embed_s:.1f} chunks/s)"
        f" (target < 60 s)"
    )
    print(
        f"  + the Universal Sentence Encoder: {use_s:.1f} s for {use_done} chunk texts"
        f" ({use_done / use_s:.1f}/s); embedding time per chunk with it on {(embed_s + use_s) / embed_s:.2f}x"
        f" e5's alone (target <= 2.2x); vectors {e5_bytes:.0f} + {use_bytes:.0f} bytes a chunk"
    )


def ingest_synthetic(
    ingestor: Ingestor,
    inbox: Path,
    rng: random.Random,
    sentences: dict[str, list[str]],
    numbers: range,
    *,
    what: str = "building",
    name: str = "doc-{n}.md",
) -> None:
    """Write synthetic document n into the inbox and ingest it, for each n; the progress on stderr."""
    t0 = time.perf_counter()
    for done, n in enumerate(numbers, 1):
        path = inbox / name.format(n=n)
        path.write_text(synthetic_doc(rng, sentences, n), encoding="utf-8")
        ingestor.ingest(path)
        if done % 500 == 0 or done == len(numbers):
            rate = done / (time.perf_counter() - t0)
            print(
                f"\r  {what}: {n + 1}/{numbers.stop} documents ({rate:.0f}/s)",
                end="",
                file=sys.stderr,
                flush=True,
            )
    if numbers:
        print(file=sys.stderr)


def ingest_batch(ingestor: Ingestor, settings: Settings, docs: list[str], tag: str) -> list[float]:
    """Per-file ingest seconds for a batch of new documents dropped into the inbox."""
    times = []
    for i, text in enumerate(docs):
        path = settings.inbox / f"{tag}-{i}.md"
        path.write_text(text, encoding="utf-8")
        t0 = time.perf_counter()
        outcome = ingestor.ingest(path)
        times.append(time.perf_counter() - t0)
        assert outcome.status == "indexed", outcome
    return times


def add_tokenizer_option(parser: argparse.ArgumentParser) -> None:
    """The --tokenizer option of the ingest and backup benches."""
    parser.add_argument(
        "--tokenizer", default="", help="KB_TOKENIZER, or 'approx' (default: the bundled Qwen3 tokenizer)"
    )


def bench_counter(tokenizer: str) -> tuple[str, TokenCounter, str | None]:
    """What a --tokenizer option gives: its spec ('' is the bundled Qwen3 tokenizer), the counter, and why
    the counter is an approximation when it is."""
    spec = tokenizer or str(reference_tokenizer())
    counter, why = load_counter(spec, cache_dir=hf_cache_dir())
    return spec, counter, why


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=10_000, help="documents in the big index")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with xquad.{en,zh,th}.json")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the big index in this folder")
    add_tokenizer_option(parser)
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument("--no-vectors", action="store_true", help="skip the vector figures (4 and 5)")
    parser.add_argument(
        "--only-embedding", action="store_true", help="only figure 5 (e5, then USE, on the 170 KB page)"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    _, counter, why = bench_counter(args.tokenizer)
    print(f"tokenizer: {counter.name}" + (f" ({why})" if why and args.tokenizer != "approx" else ""))
    rng = random.Random(20261129)
    sentences, paragraphs, questions = corpus(args.data)
    if args.only_embedding:
        bench_page_embedding(paragraphs, counter)
        return 0

    bench_big_page(paragraphs, counter)

    probe = [synthetic_doc(rng, sentences, 10_000_000 + i) for i in range(21)]
    home = args.keep or Path(tempfile.mkdtemp(prefix="kb-bench-big-"))
    settings = fresh_settings(home)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, counter)
        have = index.document_count()
        ingest_synthetic(
            ingestor, settings.inbox, rng, sentences, range(have, args.docs), what="building the big index"
        )

        # Small and big alternate, so that both see the same load on a shared machine; before
        # each batch the WAL is checkpointed and flushed, as after a build.
        small: list[float] = []
        big: list[float] = []
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
                small_settings = fresh_settings(Path(tmp))
                with Index(small_settings.index_path) as small_index:
                    small_ingestor = Ingestor(small_settings, small_index, counter)
                    seed = [synthetic_doc(rng, sentences, i) for i in range(10)]
                    ingest_batch(small_ingestor, small_settings, seed, "seed")
                    small_index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    os.sync()
                    small += ingest_batch(small_ingestor, small_settings, probe[:20], "small")[1:]
            index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            os.sync()
            docs = [d.replace("# Document", f"# Probe {r} {time.time_ns()}") for d in probe[:20]]
            big += ingest_batch(ingestor, settings, docs, f"big-{r}")[1:]
        n_docs, n_chunks = index.document_count(), index.chunk_count()
        ratio = statistics.median(big) / statistics.median(small)
        print(
            f"per-file ingest ({args.rounds} rounds of 19 files): median {statistics.median(small) * 1000:.1f} ms"
            f" at 10 documents, {statistics.median(big) * 1000:.1f} ms at {n_docs} documents:"
            f" ratio {ratio:.2f}x (target <= 1.2x)"
        )

        for q in questions[:50]:  # warm the page cache
            search(index, q, k=5)
        latencies = []
        medians, p95s = [], []
        for _ in range(args.rounds):
            run = []
            for q in questions:
                t0 = time.perf_counter()
                search(index, q, k=5)
                run.append((time.perf_counter() - t0) * 1000)
            medians.append(statistics.median(run))
            p95s.append(percentile(run, 0.95))
            latencies += run
        print(
            f"lexical search at {n_chunks} chunks ({len(questions)} questions x {args.rounds}):"
            f" median {statistics.median(latencies):.2f} ms, p95 {percentile(latencies, 0.95):.2f} ms"
            f" (per round p95 {', '.join(f'{p:.1f}' for p in p95s)}), max {max(latencies):.1f} ms"
            f" (target p95 < 10 ms)"
        )
        if not args.no_vectors:

            def add_document(n: int) -> None:
                stamp = time.time_ns()  # a kept index has the documents of earlier runs: never a duplicate
                path = settings.inbox / f"refresh-{n}-{stamp}.md"
                text = synthetic_doc(rng, sentences, 20_000_000 + n).replace(
                    "# Document", f"# Refresh {stamp}"
                )
                path.write_text(text, encoding="utf-8")
                assert ingestor.ingest(path).status == "indexed"

            bench_vectors(index, questions, args.rounds, add_document)
    if not args.no_vectors:
        bench_page_embedding(paragraphs, counter)
    if args.keep is None:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
