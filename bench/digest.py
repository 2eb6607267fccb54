"""Digest benchmark: how long the digest of a big knowledge base takes, without the model.

A knowledge base of ``--docs`` documents (10,000 by default) made of shuffled XQuAD sentences in
English, Chinese and Thai (CC BY-SA 4.0) through the real pipeline, kept over two years (their
``indexed_at`` spread out), ``--week`` of them (200) in the last seven days with a summary each.
Then the digest of the week (grouping, summaries, the open questions, the resurfaced document) is
made ``--runs`` times: median and slowest, against the target of 1 s.

    python bench/digest.py [--docs 10000] [--week 200] [--runs 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [
    p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE
]  # bench/daemon.py hides daemon/
sys.path.insert(0, str(HERE.parent))
_spec = importlib.util.spec_from_file_location("bench_ingest", HERE / "ingest.py")
_bench_ingest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench_ingest)

from knowledge.config import load_settings  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import ApproxCounter  # noqa: E402
from knowledge.report.digest import make_digest  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

NOW = datetime.now(UTC)


def build(home: Path, docs: int, week: int) -> None:
    settings = load_settings({"KB_EMBED": "off", "KB_TOKENIZER": ""}, home=home)
    if settings.index_path.exists():
        return
    sentences, _, _ = _bench_ingest.corpus(_bench_ingest.DATA)
    rng = random.Random(7)
    settings.inbox.mkdir(parents=True, exist_ok=True)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        _bench_ingest.ingest_synthetic(
            ingestor, settings.inbox, rng, sentences, range(docs), name="doc-{n:05d}.md"
        )
        ids = [d.id for d in index.documents()]
        rng.shuffle(ids)
        for n, doc_id in enumerate(ids):
            age = timedelta(days=rng.uniform(0, 6.9)) if n < week else timedelta(days=rng.uniform(8, 730))
            index.conn.execute("UPDATE documents SET indexed_at = ? WHERE id = ?",
                               ((NOW - age).isoformat(timespec="seconds"), doc_id))  # fmt: skip
        for doc in index.documents():
            if NOW - datetime.fromisoformat(doc.indexed_at) < timedelta(days=7):
                index.put_summary(
                    doc, "model", "en", f"A summary of {doc.title}, in three sentences.", NOW.isoformat()
                )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--week", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the knowledge base here once and reuse it")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())  # the figures alone on the terminal
    with tempfile.TemporaryDirectory() as tmp:
        home = args.keep or Path(tmp) / "kb"
        build(home, args.docs, args.week)
        settings = load_settings({"KB_EMBED": "off", "KB_TOKENIZER": ""}, home=home)
        questions = [f"an open question number {n}" for n in range(10)]
        times, digest = [], None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            with Index(settings.index_path, readonly=True) as index:
                digest = make_digest(index, questions, since=NOW - timedelta(days=7), until=NOW)
            times.append(time.perf_counter() - t0)
        with Index(settings.index_path, readonly=True) as index:
            total, chunks = index.document_count(), index.chunk_count()
    kept = sum(len(v) for v in digest.groups.values()) + sum(digest.more.values())
    print(f"knowledge base: {total:,} documents, {chunks:,} chunks; the week: {kept} documents, "
          f"resurfaced: {digest.resurfaced.title if digest.resurfaced else 'none'}")  # fmt: skip
    print(f"digest without the model: median {statistics.median(times) * 1000:.0f} ms, "
          f"slowest {max(times) * 1000:.0f} ms over {args.runs} runs (target < 1000 ms)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
