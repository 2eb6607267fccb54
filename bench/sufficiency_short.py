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

    python bench/sufficiency_short.py [--threshold P] [--articles N]
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

from bench import sufficiency  # noqa: E402
from bench.retrieval import DEFAULT_CACHE, DEFAULT_DATA, LANGS, Question, build, setup  # noqa: E402
from bench.sufficiency import Asked, ask_all, embed, table  # noqa: E402
from bench.use_cache import USE_CACHE, CachedUse  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
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


def short_documents(tmp: Path, env: dict[str, str], counter, embedder, articles: int) -> list[Asked]:
    """One knowledge base per article (every second one, up to ``articles``), as the module says."""
    docs, questions = short_articles(DEFAULT_DATA)
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threshold", type=float, default=None, help="KB_MIN_RELEVANCE (default: kb's)")
    parser.add_argument(
        "--articles", type=int, default=24, help="knowledge bases (one article each), up to 24"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    sufficiency.SECOND.encoder = CachedUse(USE_CACHE)
    env, counter, _, _, embedder, _ = setup("", "local", "160/24", DEFAULT_CACHE)
    threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLD
    with tempfile.TemporaryDirectory(prefix="kb-short-") as tmp:
        asked = short_documents(Path(tmp), env, counter, embedder, args.articles)
        table("short documents (two XQuAD paragraphs)", asked, threshold, LANGS)
        embedder.save()
        sufficiency.SECOND.encoder.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
