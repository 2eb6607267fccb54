"""Sufficiency on a newcomer's knowledge base: one short document (a lease, a note), asked about in
every language.

bench/sufficiency.py's one-document set indexes whole XQuAD articles (5 to 12 chunks each); here each
knowledge base holds the first two paragraphs of one article in one language (en, zh, th in turn:
about two chunks), and is asked every question about those paragraphs in all three languages
(answerable: two thirds of them cross languages) and every question about the first two paragraphs
of the next article (unanswerable). That is where the second embedder has too few passages across
scripts for its statistics (knowledge.retrieval.second.MIN_CROSSING) and speaks to the gate by its
cosine alone. kb's own code decides, over indexes built through kb's pipeline (bench/sufficiency.py's
set-up: the real Qwen3 tokenizer, vectors cached by text).

Also the ranking in knowledge bases of three short documents, one in each language (about six chunks):
r@1 and r@3 of the passage holding the answer, by question language and document language.

    python bench/sufficiency_short.py [--data DIR] [--threshold P] [--articles N]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import retrieval, sufficiency  # noqa: E402
from bench.retrieval import DEFAULT_CACHE, DEFAULT_DATA, LANGS, Question, build, hit_rank, recall, setup  # noqa: E402
from bench.sufficiency import Asked, ask_all, embed, table  # noqa: E402
from bench.use_cache import USE_CACHE, CachedUse  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.retrieval.search import search  # noqa: E402
from knowledge.retrieval.sufficiency import DEFAULT_THRESHOLD  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

PARAGRAPHS = 2


def short_articles(data: Path) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], list[Question]]]:
    """The first PARAGRAPHS paragraphs of each article, by (language, title), and their questions."""
    docs, questions = {}, {}
    for lang in LANGS:
        for article in json.loads((data / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]:
            key, paragraphs = article["title"], article["paragraphs"][:PARAGRAPHS]
            docs[(lang, key)] = "\n\n".join(p["context"].strip() for p in paragraphs) + "\n"
            questions[(lang, key)] = [
                (lang, key, qa["question"], [a["text"] for a in qa["answers"]])
                for p in paragraphs
                for qa in p["qas"]
            ]
    return docs, questions


def short_documents(
    tmp: Path, data: Path, env: dict[str, str], counter, embedder, articles: int
) -> list[Asked]:
    """One knowledge base per article (every second one, up to ``articles``), as the module says."""
    docs, questions = short_articles(data)
    keys = sorted({key for _, key in docs})
    out: list[Asked] = []
    for n, key in enumerate(keys[::2][:articles]):
        lang, other = LANGS[n % 3], keys[(keys.index(key) + 1) % len(keys)]
        home = tmp / f"short{n}"
        settings = load_settings(env, home=home)
        doc_id = build(home, {(lang, key): docs[(lang, key)]}, settings, counter)[(lang, key)]
        own = questions[(lang, key)]  # XQuAD is parallel: the n-th question is the same in every language
        asked = [q for lg in LANGS for q in questions[(lg, key)] + questions[(lg, other)]]
        with Index(settings.index_path) as index:
            meaning = embed(index, embedder, settings)

            def indexed(
                q: Question, key=key, lang=lang, own=own, doc_id=doc_id
            ) -> tuple[str, list[str], bool] | None:
                if q[1] != key:
                    return None
                return doc_id, own[questions[(q[0], key)].index(q)][3], lang != q[0]

            out += ask_all(index, meaning, asked, indexed)
    return out


def small_rankings(
    tmp: Path, data: Path, env: dict[str, str], counter, embedder
) -> dict[tuple[str, str], list[int | None]]:
    """Knowledge bases of three short documents (three articles' first paragraphs, one in each language:
    about six chunks, so fewer than MIN_CROSSING in any other script): for every question about them, in
    every language, the rank of the first passage of its document holding the answer (None: none of the
    first 8), by (question's language, document's language)."""
    docs, questions = short_articles(data)
    keys = sorted({key for _, key in docs})
    out: dict[tuple[str, str], list[int | None]] = {}
    for n in range(len(keys) // 3):
        chosen = {(LANGS[(n + i) % 3], keys[3 * n + i]) for i in range(3)}
        home = tmp / f"small{n}"
        settings = load_settings(env, home=home)
        doc_ids = build(home, {k: docs[k] for k in chosen}, settings, counter)
        with Index(settings.index_path) as index:
            meaning = embed(index, embedder, settings)
            for lang, key in sorted(chosen):
                own = questions[(lang, key)]
                for asked_in in LANGS:
                    for number, q in enumerate(questions[(asked_in, key)]):
                        results = search(index, q[2], k=8, meaning=meaning)
                        found = hit_rank(results, doc_ids[(lang, key)], own[number][3])
                        out.setdefault((asked_in, lang), []).append(found)
    return out


def ranking_table(found: dict[tuple[str, str], list[int | None]]) -> None:
    print("\nsmall knowledge bases (three short documents, one a language): r@1 / r@3 by question → document")
    across = [r for (a, k), ranks in found.items() if a != k for r in ranks]
    for label, ranks in [
        *((f"{a} → {k}", r) for (a, k), r in sorted(found.items())),
        ("across languages", across),
    ]:
        print(f"  {label:<18} {recall(ranks, 1):.3f} / {recall(ranks, 3):.3f}   n {len(ranks)}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XQuAD's folder (xquad.en.json ...)")
    parser.add_argument("--threshold", type=float, default=None, help="KB_MIN_RELEVANCE (default: kb's)")
    parser.add_argument(
        "--articles", type=int, default=24, help="knowledge bases (one article each), up to 24"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    sufficiency.SECOND.encoder = CachedUse(USE_CACHE)
    env, counter, _, _, embedder, _ = setup("", "local", retrieval.CHUNKING, DEFAULT_CACHE)
    threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLD
    with tempfile.TemporaryDirectory(prefix="kb-short-") as tmp:
        asked = short_documents(Path(tmp), args.data, env, counter, embedder, args.articles)
        table("short documents (two XQuAD paragraphs)", asked, threshold, LANGS)
        ranking_table(small_rankings(Path(tmp), args.data, env, counter, embedder))
        embedder.save()
        sufficiency.SECOND.encoder.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
