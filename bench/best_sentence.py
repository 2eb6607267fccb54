"""Best-sentence scoring with the e5 weights: is a chunk better ranked by its best sentence's vector too?

The same indexes, questions and halves as bench/crossing.py (XQuAD en/zh/th, each article in one
language per rotation, every question asked in every rotation; articles split in two halves by
sorted title: the combination is chosen on the ``tuning`` half and reported on the ``held out``
one). Each chunk's sentences (:func:`sentences_of`: kb's sentence ends, knowledge.store.analysis
.SENTENCE_END, short pieces joined to the next until SENTENCE_MIN_CHARS; a chunk of one sentence has
none of its own) are embedded by e5 on the passage side, title first as the chunk is, and centred by
the chunk's language as the chunk vectors are.

Each question is searched once as kb searches now (e5 with the Universal Sentence Encoder across
scripts). The search records, for every pooled chunk, what kb's fusion read (its words' score and
coverage, its cosine, the question's typical cosine, the second opinion's z-score) and the best
sentence's cosine beside it; the ranking is then recomputed with the chunk's cosine replaced by
``(1 - share) * chunk + share * best sentence`` (and by the larger of the two), through kb's own
``fuse``. At share 0 that is kb's ranking, checked question by question. ``c0.6``: share 0.6, but a
Chinese question's candidates in another script keep their own cosine.

Also: sentence vectors per chunk, the embedding time of chunks and of their sentences in the same
process (cold caches only), and the AUC of "the chunk holds the answer" over the pooled chunks, by
the chunk's cosine and by the best sentence's (standout from the question's typical cosine).

    python bench/best_sentence.py [--every 2] [--cache FILE] [--use-cache FILE]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.crossing import cross_parser, cross_setup, pair_label  # noqa: E402
from bench.retrieval import LANGS, hit_rank, recall, rotations  # noqa: E402
from bench.sufficiency import halves  # noqa: E402
from knowledge.retrieval import search as search_module  # noqa: E402
from knowledge.retrieval.backfill import embed_background, embed_missing, embed_second_missing  # noqa: E402
from knowledge.retrieval.bm25 import Ranked  # noqa: E402
from knowledge.retrieval.centring import centred, shift_index  # noqa: E402
from knowledge.retrieval.embed import passage_text  # noqa: E402
from knowledge.retrieval.search import Meaning, find  # noqa: E402
from knowledge.retrieval.second import Opinion, Second  # noqa: E402
from knowledge.store import analysis  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from knowledge.text import language_group  # noqa: E402

SHARES = (0.25, 0.4, 0.5, 0.6, 0.75, 1.0)
# A sentence shorter than this (characters, by the chunk's script; others 60) is joined to the next.
SENTENCE_MIN_CHARS = {"cjk": 20, "thai": 40}
OTHER_MIN_CHARS = 60


def sentences_of(text: str) -> list[str]:
    """A chunk's sentences, short pieces joined to the next; [] for a chunk of one sentence (its own
    vector is its sentence's)."""
    least = SENTENCE_MIN_CHARS.get(language_group(text), OTHER_MIN_CHARS)
    out: list[str] = []
    held = ""
    for piece in analysis.SENTENCE_END.split(text):
        piece = piece.strip()
        if not piece:
            continue
        held = f"{held} {piece}" if held else piece
        if len(held) >= least:
            out.append(held)
            held = ""
    if held:
        if out and len(held) < least:
            out[-1] = f"{out[-1]} {held}"
        else:
            out.append(held)
    return out if len(out) > 1 else []


class Recorder:
    """kb's vector cache, recording the cosines search reads and each chunk's best sentence's beside them."""

    def __init__(self, inner: object, sentences: dict[int, tuple[str, np.ndarray]]) -> None:
        self.inner, self.sentences = inner, sentences
        self.chunk: dict[int, float] = {}
        self.best: dict[int, float] = {}
        self.typical = 0.0
        self.typical_of: dict[str, float] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def clear(self) -> None:
        self.chunk, self.best = {}, {}

    def _note(self, query: np.ndarray, found: dict[int, float]) -> None:
        loaded = self.inner._current()  # type: ignore[attr-defined]
        for rowid, cos in found.items():
            self.chunk[rowid] = cos
            if rowid not in self.sentences:
                self.best[rowid] = cos
                continue
            group, raw = self.sentences[rowid]
            shift = loaded.shifts[shift_index(loaded.languages, group)]
            matrix, _ = centred(raw, shift[None, :])
            self.best[rowid] = float((matrix @ query.astype(np.float32)).max())

    def nearest(
        self, query: np.ndarray, k: int, *, within: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        out = self.inner.nearest(query, k, within=within)  # type: ignore[attr-defined]
        self._note(query, dict(out))
        return out

    def cosines(self, query: np.ndarray, rowids: list[int]) -> dict[int, float]:
        out = self.inner.cosines(query, rowids)  # type: ignore[attr-defined]
        self._note(query, out)
        return out

    def reference(self, query: np.ndarray) -> tuple[dict[str, float], float, int, float]:
        out = self.inner.reference(query)  # type: ignore[attr-defined]
        self.typical_of, self.typical = out[0], out[1]
        return out


class RecordingSecond(Second):
    """The second opinion, its last opinions kept."""

    last: dict[int, Opinion]

    def opinions(self, text, cosines, rows):  # type: ignore[no-untyped-def]
        self.last = super().opinions(text, cosines, rows)
        return self.last


def ranking(
    record: Recorder, lexical: dict[int, Ranked], opinions: dict[int, Opinion], share: float | str, group: str
) -> list[int]:
    """The pooled chunks ranked by kb's fuse with the chunk's cosine mixed with its best sentence's
    (``share`` "c0.25": 0.25, but not for a Chinese question (``group``) about a passage in another script)."""
    best = record.best
    if isinstance(share, str) and share.startswith("c"):
        share = float(share[1:])
        if group == "cjk":
            own = record.sentences
            best = {r: b if r not in own or own[r][0] == "cjk" else record.chunk[r] for r, b in best.items()}
    if share == "max":
        cos = {r: max(c, best[r]) for r, c in record.chunk.items()}
    else:
        s = float(share)
        cos = {r: (1 - s) * c + s * best[r] for r, c in record.chunk.items()}
    top_cosine = max(cos.values(), default=record.typical)
    top_lexical = max((r.score for r in lexical.values()), default=0.0) or 1.0
    if opinions:
        first = np.array([cos[r] for r in opinions], dtype=np.float32)
        mean, spread = float(first.mean()), float(first.std())
        opinions = {r: Opinion(o.cosine, o.z, mean, spread) for r, o in opinions.items()}
    scored = []
    for rowid in set(cos) | set(lexical):
        lex = lexical.get(rowid)
        score = search_module.fuse(
            lex.score / top_lexical if lex else 0.0,
            lex.relevance if lex else 0.0,
            cos.get(rowid),
            top_cosine=top_cosine,
            typical=record.typical,
            opinion=opinions.get(rowid),
        )
        scored.append((-score, rowid))
    return [r for _, r in sorted(scored)]


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """Probability that a random positive outscores a random negative (ties half)."""
    if not pos or not neg:
        return float("nan")
    p, n = np.asarray(pos), np.sort(np.asarray(neg))
    below = np.searchsorted(n, p, side="left")
    equal = np.searchsorted(n, p, side="right") - below
    return float((below + 0.5 * equal).sum() / (len(p) * len(n)))


def main() -> int:
    parser = cross_parser(__doc__, every=2)
    parser.add_argument("--articles", type=int, default=0, help="the first n articles only (a smoke test)")
    args = parser.parse_args()
    docs, questions, env, counter, embedder, use = cross_setup(args)
    second = RecordingSecond(use)
    keys = sorted({key for _, key in docs})
    if args.articles:
        keys = keys[: args.articles]
        docs = {k: v for k, v in docs.items() if k[1] in keys}
        questions = [q for q in questions if q[1] in keys]
    tuning, _ = halves(keys)
    by_lang = {lang: [q for q in questions if q[0] == lang] for lang in LANGS}
    position = {id(q): n for lang in LANGS for n, q in enumerate(by_lang[lang])}
    methods: list[float | str] = [0.0, *SHARES, "max", *(f"c{s}" for s in SHARES)]
    ranks: dict[tuple[str, str, str], dict[float | str, list[int | None]]] = {}
    scores: dict[str, tuple[list[float], list[float], list[float], list[float]]] = {}
    stats = {
        "chunks": 0,
        "sentences": 0,
        "chunk_s": 0.0,
        "chunk_n": 0,
        "sent_s": 0.0,
        "sent_n": 0,
        "differ": 0,
    }
    original = search_module._lexical
    seen: list[dict[int, Ranked]] = []

    def lexical(pool, scoring):  # type: ignore[no-untyped-def]
        out = original(pool, scoring)
        seen.append(out)
        return out

    search_module._lexical = lexical
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        for rotation, lang_of, settings, doc_ids in rotations(
            Path(tmp), docs, keys, env, counter, name="best"
        ):
            with Index(settings.index_path) as index:
                embed_background(embedder)  # not a chunk: out of the timing
                before = embedder.computed, embedder.seconds
                embed_missing(index, embedder, batch=settings.embed_batch, second=False)
                stats["chunk_n"] += embedder.computed - before[0]
                stats["chunk_s"] += embedder.seconds - before[1]
                embed_second_missing(index, second, batch=settings.embed_batch)
                use.save()
                rows = index.conn.execute(
                    "SELECT c.rowid, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.document_id"
                ).fetchall()
                before = embedder.computed, embedder.seconds
                sentences: dict[int, tuple[str, np.ndarray]] = {}
                texts = [(rowid, title, s) for rowid, title, text in rows for s in sentences_of(text)]
                vectors = np.concatenate(
                    [
                        embedder.embed(
                            [passage_text(t, s) for _, t, s in texts[at : at + settings.embed_batch]],
                            "passage",
                        )
                        for at in range(0, len(texts), settings.embed_batch)
                    ]
                )
                stats["sent_n"] += embedder.computed - before[0]
                stats["sent_s"] += embedder.seconds - before[1]
                embedder.save()
                group = {rowid: language_group(text) for rowid, _, text in rows}
                at: dict[int, list[int]] = {}
                for n, (rowid, _, _) in enumerate(texts):
                    at.setdefault(rowid, []).append(n)
                for rowid, where in at.items():
                    sentences[rowid] = (group[rowid], vectors[where])
                stats["chunks"] += len(rows)
                stats["sentences"] += len(texts)
                meaning = Meaning.of(embedder, second=second)
                assert meaning is not None
                record = Recorder(meaning.cache, sentences)
                meaning.cache = record  # type: ignore[assignment]
                for q in questions[:: args.every]:
                    dlang = lang_of[q[1]]
                    answers = by_lang[dlang][position[id(q)]][3]
                    gold = doc_ids[(dlang, q[1])]
                    half = "tuning" if q[1] in tuning else "held out"
                    record.clear()
                    seen.clear()
                    second.last = {}
                    found = find(index, q[2], k=args.k, meaning=meaning)
                    pair = ranks.setdefault((half, q[0], dlang), {m: [] for m in methods})
                    lex = seen[0] if seen else {}
                    for m in methods:
                        order = ranking(record, lex, dict(second.last), m, language_group(q[2]))[: args.k]
                        results = search_module._results(index, [Ranked(r, 0.0, 0.0) for r in order])
                        pair[m].append(hit_rank(results, gold, answers))
                        if m == 0.0 and [r.chunk_id for r in found.results] != [r.chunk_id for r in results]:
                            stats["differ"] += 1
                    bodies = index.chunks_by_rowid(record.chunk)
                    kind = "same" if q[0] == dlang else "cross"
                    got = scores.setdefault(f"{half} {kind}", ([], [], [], []))
                    for rowid, cos in record.chunk.items():
                        chunk, doc = bodies[rowid]
                        yes = doc.id == gold and any(a in chunk.text for a in answers)
                        got[0 if yes else 1].append(cos - record.typical)
                        got[2 if yes else 3].append(record.best[rowid] - record.typical)
            print(f"[rotation {rotation} done]", file=sys.stderr, flush=True)
    search_module._lexical = original
    report(ranks, methods, scores, stats)
    return 0


def report(ranks, methods, scores, stats) -> None:  # type: ignore[no-untyped-def]
    """r@1/r@5 per half and pair, each share side by side; the cross-script and same-language means."""
    names = [f"s={m}" if isinstance(m, float) else m for m in methods]
    for half in ("tuning", "held out"):
        print(f"\n{half}: r@1/r@5 (question language → document language); s=0 is kb today")
        print(f"{'pair':<10}{'n':>6}" + "".join(f"{n:>14}" for n in names))
        groups: dict[str, dict] = {"across": {m: [] for m in methods}, "same": {m: [] for m in methods}}
        for key in sorted((k for k in ranks if k[0] == half), key=lambda k: (k[1] == k[2], k[1], k[2])):
            r = ranks[key]
            for m in methods:
                groups["across" if key[1] != key[2] else "same"][m] += r[m]
            cells = "".join(f"{recall(r[m], 1):>8.3f}/{recall(r[m], 5):.3f}" for m in methods)
            print(f"{pair_label(key[1], key[2]):<10}{len(r[0.0]):>6}{cells}")
        for name, g in groups.items():
            cells = "".join(f"{recall(g[m], 1):>8.3f}/{recall(g[m], 5):.3f}" for m in methods)
            print(f"{name:<10}{len(g[0.0]):>6}{cells}")
    print("\nAUC, pooled chunk holds the answer: chunk cosine / best sentence's (above the typical cosine)")
    for name, (pos, neg, bpos, bneg) in sorted(scores.items()):
        print(
            f"  {name:<16} {auc(pos, neg):.3f} / {auc(bpos, bneg):.3f}  ({len(pos)} positives, {len(neg)} negatives)"
        )
    per = stats["sentences"] / max(stats["chunks"], 1)
    print(f"\nsentence vectors: {stats['sentences']} for {stats['chunks']} chunks ({per:.2f} a chunk)")
    print(
        f"index: {per * 768:.0f} more bytes of vectors a chunk (float16), besides the e5 chunk vector's 768"
    )
    print(f"s=0 top {5} differing from kb's find: {stats['differ']} questions")
    if stats["chunk_n"] and stats["sent_n"]:
        chunk = stats["chunk_s"] / stats["chunk_n"]
        print(
            f"embedding: chunks {stats['chunk_n']} in {stats['chunk_s']:.1f} s, their sentences {stats['sent_n']}"
            f" in {stats['sent_s']:.1f} s; time per chunk with sentences: "
            f"{(stats['chunk_s'] + stats['sent_s']) / stats['chunk_n'] / chunk:.2f}x without"
        )
    else:
        print("embedding: cached (delete the e5 cache to measure the time)")


if __name__ == "__main__":
    sys.exit(main())
