"""Held-out retrieval benchmark: questions kb was never tuned on, in English, Traditional Chinese and Thai.

kb's ranking was tuned on XQuAD (bench/retrieval.py). This benchmark only measures: the same
ingest, chunking, search and evidence-pack code, on three SQuAD-like sets from other sources,
with nothing fitted to them.

* en       TyDi QA gold-passage task, English dev set (Wikipedia passages; questions written by
           people who did not know the answer, so they share fewer words with the passage than
           SQuAD's). Licence: Apache 2.0 (TyDi QA), passages from Wikipedia (CC BY-SA).
           Also, as distractors only (no question is asked about them), the passages of the first
           articles of TyDi's English train split, so that English has about as many chunks as the
           other languages. The train questions are not used: multilingual-e5 was fine-tuned on
           Mr. TyDi and MIRACL, which reuse TyDi's training questions.
* zh-Hant  DRCD, Delta Reading Comprehension Dataset, dev set: Traditional Chinese Wikipedia,
           kept as is (no conversion). Licence: CC BY-SA 3.0.
* th       iApp Wiki QA (iApp Technology): Thai Wikipedia articles, test and validation splits.
           Licence: MIT.

English is not SQuAD: XQuAD's English paragraphs come from the 48 articles of SQuAD v1.1's dev set.
The sample is bounded and fixed: the first N articles of each file (``--articles``), and at most
``--questions`` questions per language, evenly spread over the sampled ones. Questions without an
answer text are skipped; answer texts lose surrounding spaces. Articles are told apart by their id,
not their title (iApp has two different articles titled แฮร์รี่ พอตเตอร์, TyDi groups passages by
title); one article under two ids (its text identical) becomes one document.

Each article becomes one Markdown document (its title as a heading, paragraphs separated by blank
lines), all three languages in ONE index built through kb's pipeline as bench/retrieval.py builds
it (the real Qwen3 tokenizer, kb's own 160/48-token chunks by default), then embedded by the local embedder
(vectors cached by text in ``--cache``, default runs/bench/heldout-vectors.npz). A question is a hit
at rank r when one of the top r results is a chunk of its own article containing an answer text.
Printed per language: lexical and hybrid recall@1/3/5 beside XQuAD's targets, the share of
questions whose answer is inside the evidence pack (bench/retrieval.py's code), chunk and question
counts, and how often an answer text is found in many chunks (which makes a hit easier).

The data is not part of kb (never commit it). Get the files from GitHub and put them where the
options point; the defaults are these names in /tmp/heldout:

    DRCD_dev.json              github.com/DRCKnowledgeTeam/DRCD: DRCD_dev.json
    iapp_test.jsonl            github.com/iapp-technology/iapp-wiki-qa-dataset:
    iapp_valid.jsonl               squad_format/data/test.jsonl; valid.jsonl is in squad_format/data.zip
    tydiqa_english_dev.json    github.com/sagorbrur/tydiqa-language-specific:
    tydiqa_english_train.json      language_data/english/english_tydiqa_{dev,train}.json (TyDi QA GoldP
                               v1.1 split by language; the whole files: storage.googleapis.com/tydiqa/v1.1/)

    python bench/heldout.py [--drcd FILE] [--iapp FILE ...] [--tydi FILE] [--tydi-extra FILE]
                            [--articles en=N,zh-Hant=N,th=N] [--questions N] [--embed local|off]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval import (  # noqa: E402
    EVIDENCE_VARIANTS,
    TARGETS,
    CachingEmbedder,
    Question,
    build_said,
    evidence_inside,
    hit_rank,
    index_options,
    recall,
    run_questions,
    setup,
)
from knowledge.config import load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.search import Meaning, search  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

DATA = Path("/tmp/heldout")
DEFAULT_CACHE = ROOT / "runs" / "bench" / "heldout-vectors.npz"
LANGS = ("en", "zh-Hant", "th")
XQUAD_LANG = {"en": "en", "zh-Hant": "zh", "th": "th"}  # whose XQuAD target applies
# About 1,300 chunks per language at 160/24 (1,450 at kb's 160/48) with the Qwen3 tokenizer, so that embedding all three
# stays near 15 minutes on a busy 2-core machine (5-8 chunks/s).
DEFAULT_ARTICLES = {"en": 440, "zh-Hant": 120, "th": 290}
DEFAULT_EXTRA = 350  # English train articles added as distractors
DISTRACTOR = "en-extra"  # language key of the distractor documents (counted with English)
ANSWER_CROWD = 5  # an answer text found in this many chunks or more is a weak test
STARTED = time.perf_counter()


@dataclass
class Sample:
    """One language's documents (key → Markdown) and questions, as taken from its source."""

    lang: str
    source: str
    docs: dict[str, str] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def markdown(title: str, paragraphs: Iterable[str]) -> str:
    """An article as kb would receive it: the title as a heading, paragraphs apart by blank lines."""
    body = "\n\n".join(p.strip() for p in paragraphs if p.strip())
    return f"# {title.strip()}\n\n{body}\n"


def paragraphs_of(text: str) -> list[str]:
    """A context that already holds several paragraphs (iApp's whole articles), split at blank lines."""
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def add_article(sample: Sample, key: str, title: str, text: str, questions: list[Question]) -> None:
    """Add an article; one whose text is already there (the same article under two ids) is merged."""
    twin = next((k for k, t in sample.docs.items() if t == text), None)
    if twin is not None:
        sample.notes.append(f"same article under two ids, merged: {title}")
        key = twin
    else:
        sample.docs[key] = text
    sample.questions += [(sample.lang, key, q, answers) for _, _, q, answers in questions]


def answers_of(texts: Iterable[str]) -> list[str]:
    """Non-empty answer texts, once each, without surrounding spaces (kb drops spaces at line ends)."""
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


def load_drcd(path: Path, articles: int) -> Sample:
    """The first ``articles`` articles of a DRCD file (Traditional Chinese, SQuAD layout)."""
    sample = Sample("zh-Hant", f"DRCD {path.name}")
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    for article in data[:articles]:
        paragraphs = [p["context"] for p in article["paragraphs"]]
        questions = [
            ("", "", qa["question"], answers_of(a["text"] for a in qa["answers"]))
            for p in article["paragraphs"]
            for qa in p["qas"]
        ]
        questions = [q for q in questions if q[3]]  # no answer text: nothing to look for
        title = article["title"]
        add_article(sample, f"drcd:{article['id']}", title, markdown(title, paragraphs), questions)
    return sample


def load_iapp(paths: list[Path], articles: int) -> Sample:
    """The first ``articles`` articles of iApp Wiki QA jsonl files (one row per question)."""
    rows = [
        json.loads(line) for path in paths for line in path.read_text(encoding="utf-8").splitlines() if line
    ]
    by_article: dict[str, list[dict]] = {}
    for row in rows:
        by_article.setdefault(row["article_id"], []).append(row)
    sample = Sample("th", "iApp Wiki QA " + " + ".join(p.name for p in paths))
    for article_id, group in list(by_article.items())[:articles]:
        title = group[0]["title"]
        questions = [("", "", r["question"], answers_of(r["answers"]["text"])) for r in group]
        questions = [q for q in questions if q[3]]
        text = markdown(title, paragraphs_of(group[0]["context"]))
        add_article(sample, f"iapp:{article_id}", title, text, questions)
    return sample


def tydi_articles(path: Path) -> dict[str, tuple[list[str], list[Question]]]:
    """TyDi GoldP passages grouped by article title: the distinct passages and their questions."""
    out: dict[str, tuple[list[str], list[Question]]] = {}
    for item in json.loads(path.read_text(encoding="utf-8"))["data"]:
        passages, questions = out.setdefault(item["title"], ([], []))
        for p in item["paragraphs"]:
            if p["context"] not in passages:
                passages.append(p["context"])
            for qa in p["qas"]:
                answers = answers_of(a["text"] for a in qa["answers"])
                if answers:
                    questions.append(("", "", qa["question"], answers))
    return out


def load_tydi(path: Path, articles: int, extra: Path | None, extra_articles: int) -> Sample:
    """TyDi GoldP English: the first ``articles`` dev articles, and distractor articles from ``extra``."""
    sample = Sample("en", f"TyDi QA GoldP {path.name}")
    dev = tydi_articles(path)
    for title, (passages, questions) in list(dev.items())[:articles]:
        add_article(sample, f"tydi:{title}", title, markdown(title, passages), questions)
    if extra is not None and extra_articles:
        taken = [(t, p) for t, (p, _) in tydi_articles(extra).items() if t not in dev][:extra_articles]
        for title, passages in taken:
            sample.docs[f"{DISTRACTOR}:{title}"] = markdown(title, passages)
        sample.source += f" + {len(taken)} distractor articles from {extra.name}"
    return sample


def thin(questions: list[Question], most: int) -> list[Question]:
    """At most ``most`` questions, evenly spread over the list (deterministic)."""
    if len(questions) <= most:
        return questions
    return [questions[i * len(questions) // most] for i in range(most)]


def parse_articles(spec: str) -> dict[str, int]:
    """``en=440,th=383`` on top of the defaults."""
    out = dict(DEFAULT_ARTICLES)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        lang, _, n = part.partition("=")
        if lang not in out or not n.isdigit():
            raise SystemExit(f"--articles: expected LANG=N with LANG in {', '.join(LANGS)}, got {part!r}")
        out[lang] = int(n)
    return out


def need(path: Path, how: str) -> Path:
    if not path.is_file():
        raise SystemExit(f"{path}: not found — {how} (see --help)")
    return path


def say(text: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.perf_counter() - STARTED:5.0f} s] {text}", file=sys.stderr, flush=True)


def answer_spread(
    chunks: list[tuple[str, str]], questions: list[Question], own_doc: Callable[[Question], str]
) -> dict[str, tuple[float, float, float]]:
    """Per language: the share of questions whose answer is in no chunk of their own article, the share
    whose answer is in ANSWER_CROWD or more chunks of the index, and the median of those chunk counts."""
    seen: dict[str, list[tuple[bool, int]]] = {}
    for q in questions:
        holders = [doc for doc, text in chunks if any(a in text for a in q[3])]
        seen.setdefault(q[0], []).append((own_doc(q) in holders, len(holders)))
    return {
        lang: (
            sum(1 for inside, _ in xs if not inside) / len(xs),
            sum(1 for _, n in xs if n >= ANSWER_CROWD) / len(xs),
            statistics.median(n for _, n in xs),
        )
        for lang, xs in seen.items()
    }


def load_samples(args: argparse.Namespace) -> list[Sample]:
    """The three languages' samples, from the files named on the command line."""
    articles = parse_articles(args.articles)
    extra = (
        need(args.tydi_extra, "TyDi GoldP English train") if str(args.tydi_extra) not in ("", ".") else None
    )
    return [
        load_tydi(need(args.tydi, "TyDi GoldP English dev"), articles["en"], extra, args.extra_articles),
        load_drcd(need(args.drcd, "DRCD_dev.json of DRCKnowledgeTeam/DRCD"), articles["zh-Hant"]),
        load_iapp([need(p, "iApp Wiki QA jsonl") for p in args.iapp], articles["th"]),
    ]


def embed_all(index: Index, embedder: CachingEmbedder, *, batch: int) -> None:
    """Embed every chunk, saving the cache and reporting progress every few batches."""
    t0 = time.perf_counter()
    todo = index.chunk_count() - index.vector_count(embedder.name)
    done = 0
    while n := embed_missing(index, embedder, batch=batch, limit=8 * batch):
        done += n
        embedder.save()  # a long first run keeps what it embedded
        rate = f"{embedder.computed / embedder.seconds:.1f} chunks/s" if embedder.computed else "cached"
        say(f"  embedded {done}/{todo} chunks ({time.perf_counter() - t0:.0f} s, {rate})")
    rate = f"{embedder.computed / embedder.seconds:.1f} chunks/s" if embedder.computed else "all cached"
    print(
        f"embedded {index.chunk_count()} chunks in {time.perf_counter() - t0:.1f} s ({embedder.computed} computed: {rate})"
    )


def print_recall(
    lexical: dict[str, list[int | None]],
    hybrid: dict[str, list[int | None]],
    chunks: dict[str, int],
    asked: dict[str, int],
) -> None:
    """Recall@1/3/5 per language, lexical and hybrid, beside XQuAD's targets."""
    print(
        "\nrecall@k, hit = a chunk of the question's own article containing an answer text;"
        f" XQuAD targets (hybrid): r@1 en {TARGETS['r1']['en']:.2f}, zh {TARGETS['r1']['zh']:.2f},"
        f" th {TARGETS['r1']['th']:.2f}; r@5 {TARGETS['r5']:.2f}"
    )
    print(
        f"{'lang':<9}{'chunks':>9}{'asked':>7}{'n':>6}  {'lexical r@1 r@3 r@5':>20}"
        f"  {'hybrid r@1 r@3 r@5':>20}  {'XQuAD target r@1/r@5':>22}"
    )
    for lang in LANGS:
        lx = lexical.get(lang, [])
        hy = hybrid.get(lang, lx)
        count = f"{chunks[lang]}" + (f"+{chunks[DISTRACTOR]}" if lang == "en" and chunks[DISTRACTOR] else "")
        target = TARGETS["r1"][XQUAD_LANG[lang]]
        met = recall(hy, 1) >= target and recall(hy, 5) >= TARGETS["r5"]
        print(
            f"{lang:<9}{count:>9}{asked[lang]:>7}{len(lx):>6}"
            f"  {recall(lx, 1):>8.3f}{recall(lx, 3):>6.3f}{recall(lx, 5):>6.3f}"
            f"  {recall(hy, 1):>8.3f}{recall(hy, 3):>6.3f}{recall(hy, 5):>6.3f}"
            f"  {target:>15.2f}/{TARGETS['r5']:.2f} {'met' if met else 'not met'}"
        )
    print(
        "(chunks: en's own articles + distractor articles nobody asks about; asked: questions with an"
        " answer text in the sampled articles; n: those measured, evenly spread)"
    )


def show_misses(
    index: Index,
    questions: list[Question],
    own_doc: Callable[[Question], str],
    meaning: Meaning | None,
    *,
    k: int,
    most: int,
) -> None:
    """The first ``most`` questions per language that hybrid search misses at r@k, with its top result."""
    print(f"\nmisses at r@{k} (first {most} per language):")
    for lang in LANGS:
        shown = 0
        for q in (q for q in questions if q[0] == lang):
            if shown >= most:
                break
            results = search(index, q[2], k=k, meaning=meaning)
            if hit_rank(results, own_doc(q), q[3]) is not None:
                continue
            shown += 1
            own = [r.rank for r in results if r.document_id == own_doc(q)]
            top = " ".join(results[0].text.split())[:100] if results else "(nothing)"
            print(f"  [{lang}] {q[2]}  answer {q[3][0]!r}; own article at ranks {own or '-'}")
            print(f"      top: {results[0].title if results else ''} | {top}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drcd", type=Path, default=DATA / "DRCD_dev.json", help="DRCD file (zh-Hant)")
    parser.add_argument(
        "--iapp",
        type=Path,
        nargs="+",
        default=[DATA / "iapp_test.jsonl", DATA / "iapp_valid.jsonl"],
        help="iApp Wiki QA jsonl files (th), read in this order",
    )
    parser.add_argument(
        "--tydi", type=Path, default=DATA / "tydiqa_english_dev.json", help="TyDi GoldP English dev"
    )
    parser.add_argument(
        "--tydi-extra",
        type=Path,
        default=DATA / "tydiqa_english_train.json",
        help="TyDi GoldP English train: distractor passages only ('' for none)",
    )
    parser.add_argument(
        "--articles", default="", help="articles per language, e.g. en=440,zh-Hant=120,th=290"
    )
    parser.add_argument(
        "--extra-articles", type=int, default=DEFAULT_EXTRA, help="English distractor articles"
    )
    parser.add_argument(
        "--questions", type=int, default=1000, help="at most this many questions per language"
    )
    index_options(parser, cache=DEFAULT_CACHE)
    parser.add_argument("--misses", type=int, default=0, help="list this many hybrid misses per language")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())

    samples = load_samples(args)
    for s in samples:
        say(f"{s.lang}: {s.source}: {len(s.docs)} documents, {len(s.questions)} questions")
        for note in s.notes:
            say(f"  {note}")
    docs = {
        (DISTRACTOR if key.startswith(DISTRACTOR) else s.lang, key): text
        for s in samples
        for key, text in s.docs.items()
    }
    asked = {s.lang: len(s.questions) for s in samples}
    questions = [q for s in samples for q in thin(s.questions, args.questions)]

    max_tokens, overlap = args.chunk.split("/")
    env, counter, why, _, embedder, template = setup(args.tokenizer, args.embed, args.chunk, args.cache)

    with tempfile.TemporaryDirectory(prefix="kb-heldout-") as tmp:
        home = Path(tmp) / "all"
        settings = load_settings(env, home=home)
        doc_ids, build_s = build_said(home, docs, settings, counter, say=say, every=200)
        lang_of = {doc_id: lang for (lang, _), doc_id in doc_ids.items()}

        def own_doc(q: Question) -> str:
            return doc_ids[(q[0], q[1])]

        with Index(settings.index_path) as index:
            rows = index.conn.execute("SELECT document_id, text FROM chunks").fetchall()
            chunks = dict.fromkeys((*LANGS, DISTRACTOR), 0)
            for doc_id, _ in rows:
                chunks[lang_of[doc_id]] += 1
            print(
                f"index: {index.document_count()} documents, {len(rows)} chunks (tokenizer {counter.name}, "
                f"max {max_tokens} / overlap {overlap} tokens), lexical build {build_s:.1f} s"
            )
            if why:
                print(f"  ({why}; chunk sizes are approximate)")
            meaning = None
            if embedder is not None:
                embed_all(index, embedder, batch=settings.embed_batch)
                meaning = Meaning.of(embedder)
            print("\nsources:")
            for s in samples:
                print(f"  {s.lang:<8}{s.source}; {len(s.docs)} documents")

            say("lexical search")
            lexical = run_questions(index, questions, own_doc, None, args.k)
            say("hybrid search")
            hybrid = run_questions(index, questions, own_doc, meaning, args.k) if meaning else {}
            print_recall(lexical, hybrid, chunks, asked)

            say("evidence packs")
            inside, sizes = evidence_inside(
                index, questions, own_doc, meaning, settings, counter, template, EVIDENCE_VARIANTS
            )
            print(
                f"\nevidence pack (KB_EVIDENCE_TOKENS={settings.evidence_tokens}):"
                " answer inside the passages the model sees"
            )
            for label in EVIDENCE_VARIANTS:
                shares = "  ".join(
                    f"{lang} {inside[label].get(lang, 0) / max(len(lexical.get(lang, [])), 1):.3f}"
                    for lang in LANGS
                )
                print(f"  {label:<26}{shares}; {statistics.mean(sizes[label]):.2f} passages")

            say("answer spread")
            spread = answer_spread(rows, questions, own_doc)
            print(
                f"\nanswer texts: in no chunk of the own article / in {ANSWER_CROWD}+ chunks of the index / median chunks"
            )
            for lang in LANGS:
                none, crowded, median = spread.get(lang, (0.0, 0.0, 0.0))
                print(f"  {lang:<9}{none:>7.3f}{crowded:>9.3f}{median:>8.1f}")

            if args.misses:
                show_misses(index, questions, own_doc, meaning, k=args.k, most=args.misses)
        if embedder is not None:
            embedder.save()  # the questions' vectors too
    print(f"\nrun time {time.perf_counter() - STARTED:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
