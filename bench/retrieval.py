"""Retrieval benchmark: XQuAD en + zh + th, lexical against hybrid, within and across languages.

Each XQuAD article becomes one Markdown document (its paragraphs separated by blank lines),
ingested through kb's own pipeline (the real Qwen3 tokenizer, kb's 160/48-token chunks by default),
then embedded. A question is a hit at rank r when one of the top r results is a chunk of the
gold article that contains an answer text.

1. One index holding every article in all three languages: recall@1/3/5 per language,
   lexical only and hybrid; query latency split into embedding the question and searching.
2. Cross-lingual: the 48 articles split in three, each third present in one language only
   (three rotations, so every article is asked about in every pair): recall for each
   question language × document language.
3. The evidence pack: how often an answer text is inside the passages the model would see
   (KB_EVIDENCE_TOKENS, exact counts with the tokenizer): the results in rank order while they
   fit, the results packed (touching chunks joined, what does not fit skipped), and kb's pack
   (knowledge.answer.evidence: the best chunk's neighbours too).
4. Embedding throughput (chunks/s) and the size of the index and of its vectors.

Vectors are cached by text in ``--cache`` (default runs/bench/xquad-vectors.npz) so that a
second run only measures ranking; delete the file to measure embedding again.

    python bench/retrieval.py [--data DIR] [--tokenizer SPEC] [--embed local|url|off] [--cache FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: kb and bench/ from this checkout

from bench.use_cache import USE_CACHE, CachedUse  # noqa: E402
from knowledge.answer.evidence import pack  # noqa: E402
from knowledge.answer.prompt import build_prompt, evidence_fits  # noqa: E402
from knowledge.config import SETTINGS, Settings, load_settings  # noqa: E402
from knowledge.ingest.pipeline import Ingestor  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.template import ChatTemplate, load_template  # noqa: E402
from knowledge.model.tokenizer import HfCounter, TokenCounter, hf_cache_dir, load_counter, reference_tokenizer  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.embed import Embedder, Side, make_embedder  # noqa: E402
from knowledge.retrieval.search import Meaning, SearchResult, find, search  # noqa: E402
from knowledge.retrieval.second import Second  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

# The shared data folder beside the checkout (or beside the folder of worktrees it is in).
DEFAULT_DATA = next(
    (
        p / "shared" / "data" / "xquad"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "data").is_dir()
    ),
    ROOT.parent / "shared" / "data" / "xquad",
)
DEFAULT_CACHE = ROOT / "runs" / "bench" / "xquad-vectors.npz"
_DEFAULTS = {s.env: s.default for s in SETTINGS}
# kb's own chunking, largest / overlap tokens ("160/48"): every bench cuts passages as kb does
CHUNKING = f"{_DEFAULTS['KB_CHUNK_MAX_TOKENS']}/{_DEFAULTS['KB_CHUNK_OVERLAP_TOKENS']}"
LANGS = ("en", "zh", "th")
TARGETS = {"r1": {"en": 0.95, "zh": 0.93, "th": 0.85}, "r5": 0.98, "cross_r5": 0.90, "cross_r1": 0.70}

GROUP_OF = {"en": "other", "zh": "cjk", "th": "thai"}  # XQuAD's languages: kb's language groups
Question = tuple[str, str, str, list[str]]  # language, article title, question, answers
Run = Callable[[Awaitable[Any]], Any]  # runs a coroutine to its end (the bench's event loop)
Calls = list[tuple[int | None, int | None, float]]  # a model's calls: prompt, output tokens, ms


class CachingEmbedder:
    """Another embedder's vectors, remembered by (side, text) and saved between runs."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner, self.path, self.name = inner, path, inner.name
        self.memo: dict[tuple[str, str], np.ndarray] = {}
        self.computed = 0
        self.seconds = 0.0
        if path.is_file():
            data = np.load(path, allow_pickle=False)
            if str(data["name"]) == self.name:
                for side, text, vec in zip(data["sides"], data["texts"], data["vectors"], strict=True):
                    self.memo[(str(side), str(text))] = vec

    def embed(self, texts: Sequence[str], side: Side) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if (side, t) not in self.memo]
        if todo:
            t0 = time.perf_counter()
            for text, vec in zip(todo, self.inner.embed(todo, side), strict=True):
                self.memo[(side, text)] = vec
            self.seconds += time.perf_counter() - t0
            self.computed += len(todo)
        return np.stack([self.memo[(side, t)] for t in texts])

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.memo)
        np.savez(
            self.path,
            name=np.array(self.name),
            sides=np.array([k[0] for k in keys]),
            texts=np.array([k[1] for k in keys]),
            vectors=np.stack([self.memo[k] for k in keys]),
        )


class Setup(NamedTuple):
    """What a benchmark run shares: settings, token counter, embedder (and its cache), chat template."""

    env: dict[str, str]
    counter: TokenCounter
    why: str | None  # why the counter is an approximation, when it is
    inner: Embedder | None
    embedder: CachingEmbedder | None
    template: ChatTemplate


def setup(tokenizer: str, embed: str, chunk: str, cache: Path) -> Setup:
    """The run's settings from the command line: tokenizer spec ('' = Qwen3), KB_EMBED, 'max/overlap'."""
    max_tokens, overlap = chunk.split("/")
    spec = tokenizer or str(reference_tokenizer())
    env = {
        "KB_TOKENIZER": spec,
        "KB_MODEL": "",
        "KB_EMBED": embed,
        "KB_CHUNK_MAX_TOKENS": max_tokens,
        "KB_CHUNK_OVERLAP_TOKENS": overlap,
    }
    counter, why = load_counter(spec, cache_dir=hf_cache_dir())
    inner = make_embedder(load_settings(env, home=ROOT))
    embedder = CachingEmbedder(inner, cache) if inner is not None else None
    template = load_template(Path(spec) if isinstance(counter, HfCounter) else None)
    return Setup(env, counter, why, inner, embedder, template)


def load_xquad(data_dir: Path, *, titles: bool = True) -> tuple[dict[tuple[str, str], str], list[Question]]:
    """Markdown per (language, article) and every question.

    XQuAD's titles are English in every language: with ``titles`` each document starts with
    its English title (as in earlier runs of this benchmark); the cross-lingual table leaves
    them out, so no English word helps a question find a Thai or Chinese article.
    """
    docs: dict[tuple[str, str], str] = {}
    questions: list[Question] = []
    for lang in LANGS:
        articles = json.loads((data_dir / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
        for article in articles:
            key = article["title"]
            paragraphs = [p["context"].strip() for p in article["paragraphs"]]
            head = f"# {key.replace('_', ' ')}\n\n" if titles else ""
            docs[(lang, key)] = head + "\n\n".join(paragraphs) + "\n"
            for p in article["paragraphs"]:
                for qa in p["qas"]:
                    questions.append((lang, key, qa["question"], [a["text"] for a in qa["answers"]]))
    return docs, questions


def build(
    home: Path,
    docs: dict[tuple[str, str], str],
    settings: Settings,
    counter: TokenCounter,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[tuple[str, str], str]:
    """Ingest the documents into home's index; the document id of each (language, article)."""
    src = home / "src"
    src.mkdir(parents=True)
    doc_of: dict[tuple[str, str], str] = {}
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, counter)
        number = {key: n for n, key in enumerate(sorted({key for _, key in docs}))}
        for (lang, key), text in docs.items():
            path = src / f"doc{number[key]:03d}.{lang}.md"  # no English title words in the file name
            path.write_text(text, encoding="utf-8")
            outcome = ingestor.ingest(path)
            if outcome.status != "indexed":
                raise SystemExit(f"ingest failed: {path.name}: {outcome.message}")
            doc_of[(lang, key)] = outcome.doc_id or ""
            if progress:
                progress(len(doc_of), len(docs))
    return doc_of


class Rotation(NamedTuple):
    """One of three knowledge bases in which each article stands in one language only."""

    number: int
    lang_of: dict[str, str]  # article → the language it is kept in
    settings: Settings
    doc_ids: dict[tuple[str, str], str]


def rotations(
    tmp: Path,
    docs: dict[tuple[str, str], str],
    keys: Sequence[str],
    env: dict[str, str],
    counter: TokenCounter,
    *,
    name: str,
) -> Iterator[Rotation]:
    """Three knowledge bases under tmp: in each, article n is kept in LANGS[(n + rotation) % 3] only."""
    for number in range(3):
        lang_of = {key: LANGS[(n + number) % 3] for n, key in enumerate(keys)}
        home = tmp / f"{name}{number}"
        settings = load_settings(env, home=home)
        subset = {(lang, key): text for (lang, key), text in docs.items() if lang_of[key] == lang}
        yield Rotation(number, lang_of, settings, build(home, subset, settings, counter))


def build_said(
    home: Path,
    docs: dict[tuple[str, str], str],
    settings: Settings,
    counter: TokenCounter,
    *,
    say: Callable[[str], None],
    every: int,
    what: str = "documents",
) -> tuple[dict[tuple[str, str], str], float]:
    """build(), saying how far it got every ``every`` documents; the ids and the seconds it took."""
    t0 = time.perf_counter()

    def ingested(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            say(f"  ingested {done}/{total} {what}")

    doc_ids = build(home, docs, settings, counter, progress=ingested)
    return doc_ids, time.perf_counter() - t0


def hit_rank(results: Sequence[SearchResult], doc_id: str, answers: list[str]) -> int | None:
    return next(
        (r.rank for r in results if r.document_id == doc_id and any(a in r.text for a in answers)), None
    )


def recall(ranks: list[int | None], k: int) -> float:
    return sum(1 for r in ranks if r is not None and r <= k) / max(len(ranks), 1)


def run_questions(
    index: Index,
    questions: list[Question],
    doc_of: Callable[[Question], str | None],
    meaning: Meaning | None,
    k: int,
) -> dict[str, list[int | None]]:
    """Rank of the first hit per question, by (question language, document language) pair key."""
    out: dict[str, list[int | None]] = {}
    for q in questions:
        doc_id = doc_of(q)
        if doc_id is None:
            continue
        results = search(index, q[2], k=k, meaning=meaning)
        out.setdefault(q[0], []).append(hit_rank(results, doc_id, q[3]))
    return out


EVIDENCE_VARIANTS: dict[str, str | None] = {
    "results in rank order": None,
    "results packed": "results",
    "kb's pack (+ neighbours)": "kb",
}


def evidence_inside(
    index: Index,
    questions: list[Question],
    own_doc: Callable[[Question], str | None],
    meaning: Meaning | None,
    settings: Settings,
    counter: TokenCounter,
    template: ChatTemplate,
    variants: dict[str, str | None],
) -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
    """Per variant: questions per language with an answer inside the evidence pack; passages per pack.

    Inside means a passage of the gold document that contains an answer text, among the
    passages the engine would put in the prompt from the results of a k=8 search (every question
    here is about an indexed article: the engine packs once the documents answer).
    """
    inside: dict[str, dict[str, int]] = {label: {} for label in variants}
    sizes: dict[str, list[int]] = {label: [] for label in variants}
    for q in questions:
        results = search(index, q[2], k=8, meaning=meaning)
        for label, packing in variants.items():
            prompt = evidence_pack(index, q[2], results, settings, counter, template, packing)
            sizes[label].append(len(prompt.passages))
            inside[label][q[0]] = inside[label].get(q[0], 0) + any(
                p.document_id == own_doc(q) and any(a in p.text for a in q[3]) for p in prompt.passages
            )
    return inside, sizes


def evidence_pack(index, question, results, settings, counter, template, packing):
    """The prompt the engine would build from relevant results: packed as kb packs them
    (``packing`` "kb"), packed without neighbours ("results"), or taken in rank order while they fit (None)."""
    if packing is not None:
        fits = evidence_fits(counter, settings.evidence_tokens)
        results = pack(results, chunks_of=index.chunks_of, fits=fits, neighbours=packing == "kb")
    return build_prompt(
        question, results, counter=counter, template=template, evidence_tokens=settings.evidence_tokens,
        context_tokens=settings.context_tokens, max_output_tokens=settings.max_output_tokens,
    )  # fmt: skip


def index_options(parser: argparse.ArgumentParser, *, cache: Path) -> None:
    """The options of a bench that builds and searches one index: k, the tokenizer, the embedder, the
    vector cache (default ``cache``) and how passages are cut (default kb's)."""
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--tokenizer", default="", help="KB_TOKENIZER (default: the bundled Qwen3 tokenizer)")
    parser.add_argument("--embed", default="local", help="KB_EMBED for the hybrid runs (local, url or off)")
    parser.add_argument("--cache", type=Path, default=cache, help="vector cache file")
    parser.add_argument(
        "--chunk", default=CHUNKING, help=f"chunk max/overlap tokens (default kb's, {CHUNKING})"
    )


def main() -> int:
    # imported here: bench/retrieval_cross.py builds on this module's helpers
    from bench.retrieval_cross import cross, model_translator, report_calls, with_translations

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with xquad.{en,zh,th}.json")
    index_options(parser, cache=DEFAULT_CACHE)
    parser.add_argument("--no-cross", action="store_true", help="skip the cross-lingual table")
    parser.add_argument("--only-cross", action="store_true", help="only the cross-lingual table")
    parser.add_argument(
        "--second",
        action="store_true",
        help="cross-lingual table: with the Universal Sentence Encoder's opinion",
    )
    parser.add_argument(
        "--llm-url",
        default="",
        help="a model server (e.g. http://127.0.0.1:8081/v1) whose translations are measured too",
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    docs, questions = load_xquad(args.data)
    max_tokens, overlap = args.chunk.split("/")
    env, counter, why, inner, embedder, template = setup(args.tokenizer, args.embed, args.chunk, args.cache)
    loop = asyncio.new_event_loop()  # one for the run: the model client's session lives in it
    run = loop.run_until_complete
    translate, calls = model_translator(args.llm_url, 60.0, loop) if args.llm_url else (None, [])
    second = Second(CachedUse(USE_CACHE)) if args.second else None

    if args.only_cross:
        if embedder is None:
            raise SystemExit("--only-cross needs an embedder")
        with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
            untitled, _ = load_xquad(args.data, titles=False)
            cross(Path(tmp), untitled, questions, env, counter, embedder, args.k, run, translate, second)
        embedder.save()
        report_calls(calls)
        return 0
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        home = Path(tmp) / "all"
        settings = load_settings(env, home=home)
        t0 = time.perf_counter()
        doc_ids = build(home, docs, settings, counter)
        build_s = time.perf_counter() - t0
        with Index(settings.index_path) as index:
            chunks = index.chunk_count()
            print(
                f"index: {index.document_count()} documents, {chunks} chunks (tokenizer {counter.name}, "
                f"max {max_tokens} / overlap {overlap} tokens), lexical build {build_s:.1f} s"
            )
            if why:
                print(f"  ({why}; chunk sizes are approximate)")
            meaning = None
            if embedder is not None:
                t0 = time.perf_counter()
                embed_missing(index, embedder, batch=settings.embed_batch)
                wall = time.perf_counter() - t0
                rate = (
                    f"{embedder.computed / embedder.seconds:.1f} chunks/s"
                    if embedder.computed
                    else "all cached"
                )
                print(f"embedded {chunks} chunks in {wall:.1f} s ({embedder.computed} computed: {rate})")
                embedder.save()
                meaning = Meaning.of(embedder)
            sizes = index.conn.execute("SELECT sum(length(vec)), count(*) FROM chunk_vectors").fetchone()
            db_bytes = sum(p.stat().st_size for p in settings.index_path.parent.glob("kb.sqlite3*"))
            print(
                f"index file {db_bytes / 2**20:.1f} MiB; vectors {sizes[0] or 0:,} bytes for {sizes[1]} chunks"
            )

            def own_doc(q: Question) -> str | None:
                return doc_ids[(q[0], q[1])]

            print(
                f"\n{len(questions)} questions; recall@k, hit = a chunk of the gold article containing an answer"
            )
            print(
                f"{'lang':<6}{'n':>6}  {'lexical r@1 r@3 r@5':>22}  {'hybrid r@1 r@3 r@5':>22}"
                f"  {'+ reference translations':>26}  target r@1/r@5"
            )
            lexical = run_questions(index, questions, own_doc, None, args.k)
            hybrid = run_questions(index, questions, own_doc, meaning, args.k) if meaning else {}
            by_lang = {lang: [q for q in questions if q[0] == lang] for lang in LANGS}
            nth = {id(q): n for lang in LANGS for n, q in enumerate(by_lang[lang])}
            translated: dict[str, list[int | None]] = {}
            translated_any: dict[str, list[int | None]] = {}  # the same article in any language
            for q in questions if meaning else []:
                same = [by_lang[lang][nth[id(q)]] for lang in LANGS]
                parallel = {p[0]: p[2] for p in same}
                results, _ = with_translations(index, q, parallel, meaning, args.k, run)
                translated.setdefault(q[0], []).append(hit_rank(results, own_doc(q), q[3]))
                ranks = [hit_rank(results, own_doc(p) or "", p[3]) for p in same]
                translated_any.setdefault(q[0], []).append(min((r for r in ranks if r), default=None))
            met = True
            for lang in LANGS:
                lx = lexical[lang]
                hy = hybrid.get(lang, lx)
                met &= recall(hy, 1) >= TARGETS["r1"][lang] and recall(hy, 5) >= TARGETS["r5"]
                print(
                    f"{lang:<6}{len(lx):>6}  {recall(lx, 1):>10.3f}{recall(lx, 3):>6.3f}{recall(lx, 5):>6.3f}"
                    f"  {recall(hy, 1):>10.3f}{recall(hy, 3):>6.3f}{recall(hy, 5):>6.3f}"
                    f"  {recall(translated.get(lang, hy), 1):>14.3f}{recall(translated.get(lang, hy), 3):>6.3f}"
                    f"{recall(translated.get(lang, hy), 5):>6.3f}"
                    f"  {TARGETS['r1'][lang]:.2f}/{TARGETS['r5']:.2f}"
                )
            print(f"target (hybrid): {'met' if met else 'NOT met'}")
            if translated_any:
                print(
                    "  + reference translations, hit = the article in any of its languages: "
                    + ", ".join(
                        f"{lang} {recall(translated_any[lang], 1):.3f}/{recall(translated_any[lang], 5):.3f}"
                        for lang in LANGS
                    )
                )

            print(
                f"\nevidence pack (KB_EVIDENCE_TOKENS={settings.evidence_tokens}):"
                " answer inside the passages the model sees"
            )
            variants = EVIDENCE_VARIANTS
            inside, sizes = evidence_inside(
                index, questions, own_doc, meaning, settings, counter, template, variants
            )
            print(f"  {'':<24}" + "".join(f"{lang:>8}" for lang in LANGS) + f"{'passages':>10}")
            for label in variants:
                shares = [
                    inside[label].get(lang, 0) / sum(1 for q in questions if q[0] == lang) for lang in LANGS
                ]
                print(f"  {label:<24}" + "".join(f"{x:>8.3f}" for x in shares)
                      + f"{statistics.mean(sizes[label]):>10.2f}")  # fmt: skip

            if meaning is not None:
                sample = [q[2] for q in questions[::12]]
                embed_ms, search_ms, lexical_ms, translated_ms = [], [], [], []
                sampled = questions[::12]
                for q in sampled:
                    others = [by_lang[lang][nth[id(q)]][2] for lang in LANGS if lang != q[0]]
                    embedder.embed(others, "query")
                    t = time.perf_counter()
                    find(index, q[2], k=args.k, meaning=meaning, translations=others)
                    translated_ms.append((time.perf_counter() - t) * 1000)
                for text in sample:
                    t = time.perf_counter()
                    inner.embed([text], "query")
                    embed_ms.append((time.perf_counter() - t) * 1000)
                    embedder.embed([text], "query")  # cached from here on: search time alone
                    t = time.perf_counter()
                    search(index, text, k=args.k, meaning=meaning)
                    search_ms.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    search(index, text, k=args.k)
                    lexical_ms.append((time.perf_counter() - t) * 1000)
                print(f"\nquery latency over {len(sample)} questions (median / p95 ms):")
                for label, xs in (("embed question", embed_ms), ("hybrid search", search_ms),
                                  ("lexical search", lexical_ms),
                                  ("+2 translations", translated_ms)):  # fmt: skip
                    xs.sort()
                    print(f"  {label:<16}{statistics.median(xs):>8.1f}{xs[int(0.95 * (len(xs) - 1))]:>8.1f}")

        if meaning is not None and not args.no_cross:
            untitled, _ = load_xquad(args.data, titles=False)
            cross(Path(tmp), untitled, questions, env, counter, embedder, args.k, run, translate, second)
        if embedder is not None:
            embedder.save()
    report_calls(calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
