"""Short Chinese and Thai questions about English household documents, without the model: found, and kept?

The owner keeps English papers (a lease, a manual, a school letter) and asks about them from a phone, in
Traditional Chinese or Thai, in a few words: 「押金什麼時候退？」. XQuAD's questions are long and its paragraphs
hold one topic each; these are short and their documents hold many. The data is
bench/data/households_cross.json: two sets with different documents (``tune`` and ``check``; the gate's
gloss weight was chosen on XQuAD, so both are read as sets it was not chosen on), each six English
documents of four to seven sections, two notes in Chinese and Thai nobody asks about, 54 answerable
questions (30 in Chinese, 24 in Thai) and 28 that no document answers (16 and 12: half on the documents'
topics, half everyday).

Each set is one knowledge base built through kb's pipeline (the real Qwen3 tokenizer, 160/48-token
chunks, e5 and the Universal Sentence Encoder, vectors cached by text as bench/sufficiency.py does).
Every question is ranked by kb (knowledge.retrieval.search.rank, no model, no translation) and printed
per set and language:

* r@1 / r@3: a passage of the right document holding the answer's text at rank 1 / within 3;
* kept: answerable questions the relevance gate keeps local (best passage's relevance >= threshold);
* sent: unanswerable questions it sends to the web;
* asks: questions for which kb would ask the model to translate (knowledge.retrieval.translate.is_strong
  says the evidence is not strong enough), the model's calls; missed: answerable questions it would not
  translate although the passage it found first does not answer them.

Then the gate's gloss evidence (knowledge.retrieval.sufficiency.GLOSS_EVIDENCE and GLOSS_CENTRE) is
swept over the evidence already computed (the ranking does not depend on it): kept and sent of Chinese
questions for each pair, on both sets.

    python bench/households_cross.py [--sets tune,check] [--threshold P] [--misses]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import sufficiency as bench_sufficiency  # noqa: E402
from bench.retrieval import CHUNKING, DEFAULT_CACHE, build, setup  # noqa: E402
from bench.use_cache import USE_CACHE, CachedUse  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.retrieval import sufficiency  # noqa: E402
from knowledge.retrieval.search import lead, rank  # noqa: E402
from knowledge.retrieval.sufficiency import Evidence  # noqa: E402
from knowledge.retrieval.translate import is_strong  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

DATA = ROOT / "bench" / "data" / "households_cross.json"
LANGS = ("zh-Hant", "th")
WEIGHTS = (0.0, 2.0, 4.0, 6.0, 8.0, 12.0)
CENTRES = (0.2, 0.3, 0.4, 0.5)


@dataclass
class Asked:
    """One question and what kb saw: the rank of its answer, and each candidate's evidence."""

    lang: str
    text: str
    answerable: bool
    hit: int | None  # rank of the first passage of its document holding its answer
    evidence: list[Evidence]
    strong: bool  # the best passage's evidence is strong enough to skip the model's translation
    top: str  # the best passage's first words


def ask(index: Index, meaning, questions: list[dict], doc_ids: dict[str, str]) -> list[Asked]:
    out = []
    for q in questions:
        ranked = rank(index, q["q"], k=8, meaning=meaning)
        chunks = index.chunks_by_rowid(r.rowid for r in ranked) if ranked else {}
        hit = None
        for n, r in enumerate(ranked, 1):
            chunk, doc = chunks[r.rowid]
            if q["doc"] is not None and doc.id == doc_ids[q["doc"]] and q["answer"] in chunk.text:
                hit = n
                break
        top = " ".join(chunks[ranked[0].rowid][0].text.split())[:70] if ranked else ""
        best = ranked[0].evidence if ranked else None  # as knowledge.retrieval.search.find gives it
        out.append(
            Asked(
                q["lang"],
                q["q"],
                q["doc"] is not None,
                hit,
                [r.evidence for r in ranked],
                is_strong(best, lead(ranked)),
                top,
            )
        )
    return out


def best_relevance(asked: Asked) -> float:
    return max((sufficiency.relevance(e) for e in asked.evidence), default=0.0)


def rates(asked: list[Asked], lang: str, threshold: float) -> dict[str, float]:
    mine = [a for a in asked if a.lang == lang]
    yes = [a for a in mine if a.answerable]
    no = [a for a in mine if not a.answerable]
    return {
        "r@1": sum(a.hit == 1 for a in yes) / max(len(yes), 1),
        "r@3": sum(a.hit is not None and a.hit <= 3 for a in yes) / max(len(yes), 1),
        "kept": sum(best_relevance(a) >= threshold for a in yes) / max(len(yes), 1),
        "sent": sum(best_relevance(a) < threshold for a in no) / max(len(no), 1),
        "asks": sum(not a.strong for a in mine) / max(len(mine), 1),
        # answerable questions not translated although their best passage is not the answer
        "missed": sum(a.strong and a.hit != 1 for a in yes),
        "n": len(mine),
    }


def without_gloss(asked: Asked) -> Asked:
    return replace(asked, evidence=[replace(e, gloss=None) for e in asked.evidence])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", default="tune,check")
    parser.add_argument("--threshold", type=float, default=sufficiency.DEFAULT_THRESHOLD)
    parser.add_argument("--misses", action="store_true", help="list the questions the gate decides wrong")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    data = json.loads(DATA.read_text(encoding="utf-8"))["sets"]
    bench_sufficiency.SECOND.encoder = CachedUse(USE_CACHE)
    env, counter, _, _, embedder, _ = setup("", "local", CHUNKING, DEFAULT_CACHE)
    results: dict[str, list[Asked]] = {}
    with tempfile.TemporaryDirectory(prefix="kb-households-") as tmp:
        for name in args.sets.split(","):
            documents = data[name]["documents"]
            home = Path(tmp) / name
            settings = load_settings(env, home=home)
            ids = build(
                home, {(d["language"], key): d["text"] for key, d in documents.items()}, settings, counter
            )
            doc_ids = {key: ids[(d["language"], key)] for key, d in documents.items()}
            with Index(settings.index_path) as index:
                meaning = bench_sufficiency.embed(index, embedder, settings)
                results[name] = ask(index, meaning, data[name]["questions"], doc_ids)
    threshold = args.threshold
    print(f"households across languages, no model; gate threshold {threshold}")
    print(
        f"{'set':6} {'lang':8} {'n':>3}  {'r@1':>5} {'r@3':>5}  {'kept':>5} {'sent':>5}  {'asks':>5} {'missed':>6}"
        "   (kept/sent without the gloss)"
    )
    for name, asked in results.items():
        plain = [without_gloss(a) for a in asked]
        for lang in LANGS:
            r, p = rates(asked, lang, threshold), rates(plain, lang, threshold)
            print(
                f"{name:6} {lang:8} {r['n']:>3}  {r['r@1']:5.3f} {r['r@3']:5.3f}  {r['kept']:5.3f} {r['sent']:5.3f}"
                f"  {r['asks']:5.3f} {r['missed']:>6}   ({p['kept']:.3f} / {p['sent']:.3f})"
            )
    print("\nChinese questions, kept / sent, by the gate's gloss weight and centre")
    print(f"{'weight':>6} {'centre':>6}  " + "  ".join(f"{name:>13}" for name in results))
    kept = sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE
    for weight in WEIGHTS:
        for centre in CENTRES if weight else CENTRES[:1]:
            sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE = weight, centre
            cells = []
            for asked in results.values():
                r = rates(asked, "zh-Hant", threshold)
                cells.append(f"{r['kept']:.3f} / {r['sent']:.3f}")
            mark = "  <- kb" if (weight, centre) == kept else ""
            print(f"{weight:6.1f} {centre:6.2f}  " + "  ".join(f"{c:>13}" for c in cells) + mark)
    sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE = kept
    if args.misses:
        for name, asked in results.items():
            print(f"\n{name}: decided wrong")
            for a in asked:
                relevance = best_relevance(a)
                if (relevance >= threshold) != a.answerable:
                    print(
                        f"  [{a.lang}] {a.text}  answerable={a.answerable} relevance={relevance:.2f} hit={a.hit} top: {a.top}"
                    )
    embedder.save()
    bench_sufficiency.SECOND.encoder.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
