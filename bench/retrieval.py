"""Retrieval benchmark: XQuAD en + zh + th in ONE index, every question asked.

Each XQuAD article becomes one Markdown document (its paragraphs separated by blank lines),
ingested through kb's own pipeline with the default chunk settings. A question is a hit at
rank r when one of the top r results is a chunk of the gold article (in the question's
language) that contains an answer text. Prints recall@1/3/5 per language, the single-
tokenizer reference figures from the data set's README, and query latency.

    python bench/retrieval.py [--data DIR] [--k 5] [--tokenizer SPEC]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from knowledge.config import load_settings
from knowledge.index import Index
from knowledge.ingest import Ingestor
from knowledge.logs import configure_logging
from knowledge.retrieval import search
from knowledge.tokenizer import hf_cache_dir, load_counter

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"
LANGS = ("en", "zh", "th")
# recall@1 of plain FTS5 on whole paragraphs, one language per index (data set README).
BASELINES = {
    "unicode61": {"en": 0.922, "zh": 0.099, "th": 0.783},
    "trigram": {"en": 0.904, "zh": 0.836, "th": 0.939},
    "cjk-bigram": {"en": 0.922, "zh": 0.929, "th": 0.809},
}
TARGET = 0.95


def load_xquad(data_dir: Path) -> tuple[dict[str, str], list[tuple[str, str, str, list[str]]]]:
    """Markdown per (language, article) and (language, doc key, question, answers) per question."""
    docs: dict[str, str] = {}
    questions: list[tuple[str, str, str, list[str]]] = []
    for lang in LANGS:
        articles = json.loads((data_dir / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
        for article in articles:
            key = f"{article['title']}.{lang}"
            paragraphs = [p["context"].strip() for p in article["paragraphs"]]
            docs[key] = f"# {article['title'].replace('_', ' ')}\n\n" + "\n\n".join(paragraphs) + "\n"
            for p in article["paragraphs"]:
                for qa in p["qas"]:
                    questions.append((lang, key, qa["question"], [a["text"] for a in qa["answers"]]))
    return docs, questions


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with xquad.{en,zh,th}.json")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--tokenizer", default="", help="KB_TOKENIZER for chunking (default: approximation)")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    docs, questions = load_xquad(args.data)
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        home = Path(tmp)
        settings = load_settings({"KB_TOKENIZER": args.tokenizer, "KB_MODEL": ""}, home=home)
        counter, why = load_counter(settings.tokenizer_spec, cache_dir=hf_cache_dir())
        src = home / "src"
        src.mkdir()
        for key, text in docs.items():
            (src / f"{key}.md").write_text(text, encoding="utf-8")
        t0 = time.perf_counter()
        with Index(settings.index_path) as index:
            ingestor = Ingestor(settings, index, counter)
            doc_of: dict[str, str] = {}
            for path in sorted(src.iterdir()):
                outcome = ingestor.ingest(path)
                if outcome.status != "indexed":
                    print(f"ingest failed: {path.name}: {outcome.message}", file=sys.stderr)
                    return 1
                doc_of[path.stem] = outcome.doc_id or ""
            build_s = time.perf_counter() - t0
            print(
                f"index: {index.document_count()} documents, {index.chunk_count()} chunks "
                f"(tokenizer {counter.name}, max 160 / overlap 24 tokens), built in {build_s:.1f} s"
            )
            if why:
                print(f"  ({why}; chunk sizes are approximate)")
            hits: dict[str, list[int | None]] = {lang: [] for lang in LANGS}
            latencies: list[float] = []
            for lang, key, question, answers in questions:
                t = time.perf_counter()
                results = search(index, question, k=args.k)
                latencies.append((time.perf_counter() - t) * 1000)
                rank = next(
                    (
                        r.rank
                        for r in results
                        if r.document_id == doc_of[key] and any(a in r.text for a in answers)
                    ),
                    None,
                )
                hits[lang].append(rank)
    print(f"\n{len(questions)} questions; recall@k (hit = a chunk of the gold article containing the answer)")
    print(f"{'lang':<6}{'n':>6}{'r@1':>8}{'r@3':>8}{'r@5':>8}   best single-tokenizer r@1 (whole paragraphs)")
    is_met = True
    for lang in LANGS:
        ranks = hits[lang]
        r = {k: sum(1 for x in ranks if x is not None and x <= k) / len(ranks) for k in (1, 3, 5)}
        best = max(b[lang] for b in BASELINES.values())
        is_met &= r[1] >= TARGET and r[1] > best
        print(f"{lang:<6}{len(ranks):>6}{r[1]:>8.3f}{r[3]:>8.3f}{r[5]:>8.3f}   {best:.3f}")
    latencies.sort()
    print(
        f"\nquery latency: median {statistics.median(latencies):.2f} ms, "
        f"p95 {latencies[int(0.95 * len(latencies))]:.2f} ms"
    )
    print(
        f"target recall@1 >= {TARGET} in every language and above every baseline: {'met' if is_met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
