"""Cross-script benchmark: e5 alone against e5 with the Universal Sentence Encoder's second opinion.

XQuAD en/zh/th, each article in one language only (three rotations, as bench/retrieval.py's
cross-lingual table), ingested through kb's pipeline (the real Qwen3 tokenizer, 160/48-token
chunks, no English titles), embedded by e5 (vectors cached by text, as bench/retrieval.py does)
and by the Universal Sentence Encoder (cached in ``--use-cache``). Every question is asked in
every rotation: a hit at rank r is a chunk of its article (in the document's language) holding
the answer among the first r.

The articles are split in two halves (alternating by sorted title): SECOND_SHARE
(knowledge.retrieval.search) is chosen on the first (``tuning``) and reported on the second
(``held out``), never fitted there. Same-language pairs are listed too: the second opinion is
never asked for them, so they must not move.

Also: the cost of the second encoder at ingest (chunks a second, beside e5's, from the run's own
embedding when the caches are cold) and the bytes it adds to the index per chunk.

    python bench/crossing.py [--data DIR] [--shares 0,0.3,0.5,0.7] [--cache FILE] [--use-cache FILE]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval import (  # noqa: E402
    CHUNKING,
    DEFAULT_CACHE,
    DEFAULT_DATA,
    LANGS,
    hit_rank,
    load_xquad,
    recall,
    rotations,
    setup,
)
from bench.sufficiency import halves  # noqa: E402
from bench.use_cache import USE_CACHE, CachedUse  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import TokenCounter  # noqa: E402
from knowledge.retrieval import search as search_module  # noqa: E402
from knowledge.retrieval.backfill import embed_missing, embed_second_missing  # noqa: E402
from knowledge.retrieval.embed import Embedder  # noqa: E402
from knowledge.retrieval.search import Meaning, find, search  # noqa: E402
from knowledge.retrieval.second import Second, UseEncoder  # noqa: E402
from knowledge.store.index import Index  # noqa: E402


def pair_label(ql: str, dl: str) -> str:
    return f"{ql}→{dl}" if ql != dl else f"{ql} (same)"


def cross_parser(doc: str | None, *, every: int) -> argparse.ArgumentParser:
    """The options of the cross-language benches: the data, both vector caches, k and every."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with xquad.{en,zh,th}.json")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="e5 vector cache file")
    parser.add_argument("--use-cache", type=Path, default=USE_CACHE, help="USE vector cache file")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument(
        "--every", type=int, default=every, help="ask every n-th question only (a quicker run)"
    )
    return parser


def cross_setup(args: argparse.Namespace) -> tuple[dict, list, dict, TokenCounter, Embedder, CachedUse]:
    """XQuAD's documents and questions, kb's settings, the Qwen3 counter, e5 and USE (both cached)."""
    configure_logging(None, console=io.StringIO())
    docs, questions = load_xquad(args.data, titles=False)
    env, counter, _, _, embedder, _ = setup("", "local", CHUNKING, args.cache)
    assert embedder is not None
    return docs, questions, env, counter, embedder, CachedUse(args.use_cache)


def embed_both(index: Index, embedder: Embedder, second: Second, use: CachedUse, *, batch: int) -> None:
    """e5's and the second embedder's vectors for every chunk of a rotation's index, both caches saved
    (a long first run keeps what it embedded)."""
    embed_missing(index, embedder, batch=batch, second=False)
    embedder.save()
    embed_second_missing(index, second, batch=batch)
    use.save()


@dataclass(frozen=True)
class Arranged:
    """XQuAD's articles and questions as the cross-language benches ask them: the articles' keys, the
    tuning half of them, the questions by language, and each question's place among its language's
    (XQuAD is parallel: the n-th question of each language is the same question)."""

    keys: list[str]
    tuning: set[str]
    by_lang: dict[str, list]
    position: dict[int, int]

    def about(self, q: tuple, lang_of: dict[str, str], doc_ids: dict) -> tuple[str, list[str], str, str]:
        """For a question in a rotation: its article's language there, the answers in that language, the
        document's id, and the half the article is in."""
        dlang = lang_of[q[1]]
        answers = self.by_lang[dlang][self.position[id(q)]][3]
        return dlang, answers, doc_ids[(dlang, q[1])], "tuning" if q[1] in self.tuning else "held out"


def arranged(docs: dict, questions: list) -> Arranged:
    keys = sorted({key for _, key in docs})
    by_lang = {lang: [q for q in questions if q[0] == lang] for lang in LANGS}
    position = {id(q): n for lang in LANGS for n, q in enumerate(by_lang[lang])}
    return Arranged(keys, halves(keys)[0], by_lang, position)


def swept(
    doc: str | None, option: str, default: str, what: str, *, extra: Sequence[tuple[str, str]] = ()
) -> tuple[argparse.Namespace, list[float]]:
    """The options of a cross-language bench that compares values of one setting (``option``: its
    comma-separated values), parsed, and those values; ``extra``: flags of its own (name, help)."""
    parser = cross_parser(doc, every=1)
    parser.add_argument(option, default=default, help=f"{what} values to compare")
    for flag, text in extra:
        parser.add_argument(flag, action="store_true", help=text)
    args = parser.parse_args()
    return args, [float(x) for x in getattr(args, option.lstrip("-")).split(",")]


def main() -> int:
    args, shares = swept(__doc__, "--shares", "0.3,0.5,0.7", "SECOND_SHARE")
    docs, questions, env, counter, embedder, use = cross_setup(args)
    second = Second(use)
    xquad = arranged(docs, questions)
    methods = ["e5", *(f"use{s}" for s in shares)]
    ranks: dict[tuple[str, str, str], dict[str, list[int | None]]] = {}  # (half, ql, dl)
    chunks = use_bytes = 0
    chosen = search_module.SECOND_SHARE
    tops: list[
        tuple[str, float | None, int | None]
    ] = []  # across scripts: the best passage's agreement, rank
    e5_s = use_s = 0.0
    e5_n = use_n = 0
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        for rotation, lang_of, settings, doc_ids in rotations(
            Path(tmp), docs, xquad.keys, env, counter, name="cross"
        ):
            with Index(settings.index_path) as index:
                before = embedder.computed, embedder.seconds
                embed_missing(index, embedder, batch=settings.embed_batch, second=False)
                e5_n += embedder.computed - before[0]
                e5_s += embedder.seconds - before[1]
                embedder.save()
                before = use.computed, use.seconds
                embed_second_missing(index, second, batch=settings.embed_batch)
                use_n += use.computed - before[0]
                use_s += use.seconds - before[1]
                use.save()
                chunks += index.chunk_total()
                use_bytes += index.conn.execute("SELECT sum(length(vec)) FROM use_vectors").fetchone()[0] or 0
                plain = Meaning.of(embedder, second=False)
                helped = Meaning.of(embedder, second=second)
                for q in questions[:: args.every]:
                    dlang, answers, gold, half = xquad.about(q, lang_of, doc_ids)
                    pair = ranks.setdefault((half, q[0], dlang), {m: [] for m in methods})
                    pair["e5"].append(hit_rank(search(index, q[2], k=args.k, meaning=plain), gold, answers))
                    for share in shares:
                        search_module.SECOND_SHARE = share
                        found = find(index, q[2], k=args.k, meaning=helped)
                        pair[f"use{share}"].append(hit_rank(found.results, gold, answers))
                        if share == chosen and q[0] != dlang and found.best is not None:
                            tops.append((half, found.best.agreement, pair[f"use{share}"][-1]))
                    search_module.SECOND_SHARE = chosen
            print(f"[rotation {rotation} done]", file=sys.stderr, flush=True)
    report(ranks, methods)
    strong(tops)
    latency([q[2] for q in questions[::30]])
    print(f"\nindex: {chunks} chunks; USE vectors {use_bytes / max(chunks, 1):.0f} bytes a chunk (e5: 768)")
    if e5_n and use_n:
        print(
            f"embedding at ingest: e5 {e5_n / e5_s:.1f} chunks/s, USE {use_n / use_s:.1f} chunks/s; "
            f"time per chunk with USE on: {(e5_s / e5_n + use_s / use_n) / (e5_s / e5_n):.2f}x e5's alone"
        )
    else:
        print("embedding at ingest: all cached (delete the caches to measure it)")
    return 0


def latency(texts: list[str]) -> None:
    """What the second opinion adds to a question's search: encoding it (the rest is one indexed read of
    the candidates' vectors and a product of 80 x 512), median and p95 over these questions."""
    encoder = UseEncoder()
    encoder.encode(["warm up"])  # loading the weights: once per process
    times = []
    for text in texts:
        t0 = time.perf_counter()
        encoder.encode([text])
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    print(
        f"\nencoding a question with USE: median {statistics.median(times):.1f} ms,"
        f" p95 {times[int(0.95 * (len(times) - 1))]:.1f} ms over {len(times)} questions"
    )


def strong(tops: list[tuple[str, float | None, int | None]]) -> None:
    """How often the best passage of a question across scripts has the second embedder's agreement above
    a bar (those questions need no translation: knowledge.retrieval.translate.STRONG_AGREEMENT), and how
    often that passage is the answer (r@1 among them), with SECOND_SHARE as kb has it."""
    print(
        "\nacross scripts: the best passage's agreement (USE cosine) ≥ bar: share of questions, r@1 among them"
    )
    for half in ("tuning", "held out"):
        mine = [(a, r) for h, a, r in tops if h == half]
        cells = []
        for bar in (0.3, 0.35, 0.4, 0.45, 0.5, 0.6):
            above = [r for a, r in mine if a is not None and a >= bar]
            cells.append(f"{bar}: {len(above) / max(len(mine), 1):.3f} {recall(above, 1):.3f}")
        print(f"  {half:<9} " + "   ".join(cells))


def report(ranks: dict[tuple[str, str, str], dict[str, list[int | None]]], methods: list[str]) -> None:
    """r@1/r@5 per half and pair, each method side by side, and the cross-script means."""
    for half in ("tuning", "held out"):
        print(f"\n{half}: r@1/r@5 (question language → document language)")
        print(f"{'pair':<10}{'n':>6}" + "".join(f"{m:>14}" for m in methods))
        cross: dict[str, list[int | None]] = {m: [] for m in methods}
        rows = sorted((k for k in ranks if k[0] == half), key=lambda k: (k[1] == k[2], k[1], k[2]))
        for key in rows:
            r = ranks[key]
            if key[1] != key[2]:
                for m in methods:
                    cross[m] += r[m]
            cells = "".join(f"{recall(r[m], 1):>8.3f}/{recall(r[m], 5):.3f}" for m in methods)
            print(f"{pair_label(key[1], key[2]):<10}{len(r[methods[0]]):>6}{cells}")
        cells = "".join(f"{recall(cross[m], 1):>8.3f}/{recall(cross[m], 5):.3f}" for m in methods)
        print(f"{'across':<10}{len(cross[methods[0]]):>6}{cells}")


if __name__ == "__main__":
    sys.exit(main())
