"""Ingest and search speed: a big HTML page, ingest cost vs index size, search at 100,000 chunks.

Figures printed (medians and ratios; the machine is shared and noisy, so nothing here is a test):

1. a 170 KB HTML page, from the file in the inbox to "kb search finds it": median of 5 runs
   (target under 1 s);
2. per-file ingest time with 10 documents in the index and with 10,000 documents in it:
   medians over 20 files each, and their ratio (target within 1.2x);
3. search latency at 100,000 chunks over the XQuAD questions: median and p95 (target p95
   under 10 ms).

The 10,000-document index (≈100,000 chunks) is made of documents built from shuffled XQuAD
sentences in English, Chinese and Thai, ingested through the same pipeline as any file.

    python bench/ingest.py [--docs 10000] [--keep DIR]
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
from pathlib import Path

from knowledge.config import Settings, load_settings
from knowledge.ingest.pipeline import Ingestor
from knowledge.logs import configure_logging
from knowledge.retrieval.analysis import SENTENCE_END
from knowledge.retrieval.index import Index
from knowledge.retrieval.search import search
from knowledge.tokenizer import ApproxCounter

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"
LANGS = ("en", "zh", "th")


def corpus() -> tuple[dict[str, list[str]], list[str], list[str]]:
    """Sentences per language, all paragraphs (English) and all questions."""
    sentences: dict[str, list[str]] = {}
    paragraphs: list[str] = []
    questions: list[str] = []
    for lang in LANGS:
        data = json.loads((DATA / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
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


def bench_big_page(paragraphs: list[str], runs: int = 5) -> list[float]:
    """Seconds from ingest start to a search hit, for a 170 KB page, per run."""
    page = big_html(paragraphs)
    times: list[float] = []
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
            settings = fresh_settings(Path(tmp))
            with Index(settings.index_path) as index:
                ingestor = Ingestor(settings, index, ApproxCounter())
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=10_000, help="documents in the big index")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the big index in this folder")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    rng = random.Random(20261129)
    sentences, paragraphs, questions = corpus()

    bench_big_page(paragraphs)

    probe = [synthetic_doc(rng, sentences, 10_000_000 + i) for i in range(21)]
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        settings = fresh_settings(Path(tmp))
        with Index(settings.index_path) as index:
            ingestor = Ingestor(settings, index, ApproxCounter())
            ingest_batch(ingestor, settings, [synthetic_doc(rng, sentences, i) for i in range(10)], "seed")
            index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            os.sync()
            small = ingest_batch(ingestor, settings, probe[:20], "small")[1:]

    home = args.keep or Path(tempfile.mkdtemp(prefix="kb-bench-big-"))
    settings = fresh_settings(home)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        have = index.document_count()
        if have < args.docs:
            t0 = time.perf_counter()
            todo = [synthetic_doc(rng, sentences, i) for i in range(have, args.docs)]
            for n, text in enumerate(todo, 1):
                path = settings.inbox / f"doc-{have + n}.md"
                path.write_text(text, encoding="utf-8")
                ingestor.ingest(path)
                if n % 500 == 0 or n == len(todo):
                    rate = n / (time.perf_counter() - t0)
                    print(
                        f"\r  building the big index: {have + n}/{args.docs} documents ({rate:.0f}/s)",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
            print(file=sys.stderr)
        # Same starting conditions as the small index: the build's WAL checkpointed and flushed.
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        os.sync()
        big = ingest_batch(
            ingestor,
            settings,
            [d.replace("# Document", f"# Probe {time.time_ns()}") for d in probe[:20]],
            "big",
        )[1:]
        n_docs, n_chunks = index.document_count(), index.chunk_count()
        ratio = statistics.median(big) / statistics.median(small)
        print(
            f"per-file ingest: median {statistics.median(small) * 1000:.1f} ms at 10 documents, "
            f"{statistics.median(big) * 1000:.1f} ms at {n_docs} documents: ratio {ratio:.2f}x (target <= 1.2x)"
        )

        for q in questions[:50]:  # warm the page cache
            search(index, q, k=5)
        latencies = []
        for q in questions:
            t0 = time.perf_counter()
            search(index, q, k=5)
            latencies.append((time.perf_counter() - t0) * 1000)
        latencies.sort()
        print(
            f"search at {n_chunks} chunks ({len(latencies)} questions): median {statistics.median(latencies):.2f} ms,"
            f" p95 {latencies[int(0.95 * len(latencies))]:.2f} ms, max {latencies[-1]:.1f} ms (target p95 < 10 ms)"
        )
    if args.keep is None:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
