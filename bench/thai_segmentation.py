"""Thai terms for the lexical index: character trigrams (kb's analyzer) against word segmentation.

kb indexes a Thai run as overlapping character trigrams. This benchmark swaps the Thai part of
the analyzer for other ways of cutting Thai, one at a time, and measures each on XQuAD exactly
as bench/retrieval.py does (same documents, tokenizer, 160/48 chunks, vector cache):

* ``trigrams``     — kb today;
* ``newmm``        — dictionary words (PyThaiNLP's maximal matching on character clusters);
* ``newmm+tri``    — those words and the trigrams, in the index and in the question;
* ``newmm+tri/newmm`` — words and trigrams in the index, words alone in the question;
* ``icu``          — ICU's dictionary word breaker (icu4py, ICU 78);
* ``icu+tri``      — ICU words and the trigrams;
* ``syllables``    — PyThaiNLP's dictionary syllables;
* ``tcc2``         — overlapping pairs of Thai character clusters (rules, no dictionary).

For each: how fast the analyzer cuts Thai text (characters per second, XQuAD's Thai
paragraphs), the lexical build time, recall@1/3/5 per language lexical and hybrid, the
questions won and lost against trigrams at r@1 and r@5 with an exact McNemar p-value, and
lexical search latency. Lao, Khmer and Myanmar runs stay trigrams in every variant.

The variant is installed by replacing ``analysis.terms`` for the duration of a run (and put
back after): the index and the search read the analyzer from that module.

Needs the libraries it compares: ``pip install pythainlp icu4py`` (neither is a kb dependency).

    python bench/thai_segmentation.py [--variants trigrams,icu,...] [--cache FILE] [--speed-only]
"""

from __future__ import annotations

import argparse
import io
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval import (  # noqa: E402
    DEFAULT_CACHE,
    DEFAULT_DATA,
    LANGS,
    CachingEmbedder,
    Question,
    build,
    load_xquad,
    recall,
    run_questions,
)
from knowledge.config import load_settings  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import hf_cache_dir, load_counter, reference_tokenizer  # noqa: E402
from knowledge.retrieval.backfill import embed_missing  # noqa: E402
from knowledge.retrieval.embed import make_embedder  # noqa: E402
from knowledge.retrieval.search import Meaning, search  # noqa: E402
from knowledge.store import analysis  # noqa: E402
from knowledge.store.index import Index  # noqa: E402
from knowledge.store.stemmer import porter_stem  # noqa: E402

_THAI = re.compile(r"[\u0e00-\u0e7f]+")
Cutter = Callable[[str], list[str]]


def _trigrams(run: str) -> list[str]:
    return list(analysis._ngrams(run, 3))


def _newmm(run: str) -> list[str]:
    from pythainlp.tokenize import newmm

    return [w for w in newmm.segment(run) if w.strip()]


def _icu(run: str) -> list[str]:
    from icu4py.breakers import WordBreaker

    return [w for w in WordBreaker(run, "th") if w.strip()]


def _syllables(run: str) -> list[str]:
    from pythainlp.tokenize import syllable_tokenize

    return [w for w in syllable_tokenize(run, engine="dict") if w.strip()]


def _tcc2(run: str) -> list[str]:
    from pythainlp.tokenize import tcc

    clusters = tcc.segment(run)
    if len(clusters) <= 2:
        return ["".join(clusters)]
    return [a + b for a, b in zip(clusters, clusters[1:], strict=False)]


def _both(first: Cutter, second: Cutter) -> Cutter:
    return lambda run: first(run) + second(run)


# name → (cutter for the indexed text, cutter for the question)
VARIANTS: dict[str, tuple[Cutter, Cutter]] = {
    "trigrams": (_trigrams, _trigrams),
    "newmm": (_newmm, _newmm),
    "newmm+tri": (_both(_newmm, _trigrams), _both(_newmm, _trigrams)),
    "newmm+tri/newmm": (_both(_newmm, _trigrams), _newmm),
    "icu": (_icu, _icu),
    "icu+tri": (_both(_icu, _trigrams), _both(_icu, _trigrams)),
    "syllables": (_syllables, _syllables),
    "tcc2": (_tcc2, _tcc2),
}


def _sea_terms(run: str, cut: Cutter) -> list[str]:
    """Thai stretches of a Southeast Asian run cut by ``cut``; Lao, Khmer, Myanmar as trigrams."""
    out: list[str] = []
    pos = 0
    for m in _THAI.finditer(run):
        if m.start() > pos:
            out.extend(_trigrams(run[pos : m.start()]))
        out.extend(cut(m.group()))
        pos = m.end()
    if pos < len(run):
        out.extend(_trigrams(run[pos:]))
    return out


def _terms_with(index_cut: Cutter, query_cut: Cutter) -> Callable[..., list[str]]:
    """analysis.terms with its Thai part replaced (the question side is the one dropping stopwords)."""

    def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
        cut = query_cut if drop_stopwords else index_cut
        out: list[str] = []
        for m in analysis._RUNS.finditer(analysis.normalize(text)):
            kind, run = m.lastgroup, m.group()
            if kind == "word":
                if drop_stopwords and run in analysis.STOPWORDS:
                    continue
                out.append(porter_stem(analysis._strip_diacritics(run)))
            elif kind == "cjk":
                out.extend(analysis._ngrams(run, 2))
            else:
                out.extend(_sea_terms(run, cut))
        return out

    return terms


@contextmanager
def variant(name: str) -> Iterator[None]:
    """The analyzer with the named Thai variant, for the duration of the block."""
    original = analysis.terms
    analysis.terms = _terms_with(*VARIANTS[name])
    try:
        yield
    finally:
        analysis.terms = original


def chars_per_s(paragraphs: list[str], *, repeats: int = 5) -> float:
    """Characters per second of analysis.index_body over the paragraphs (median of repeats)."""
    analysis.index_body(paragraphs[0])  # loads a dictionary, if any, outside the timing
    chars = sum(map(len, paragraphs))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for p in paragraphs:
            analysis.index_body(p)
        times.append(time.perf_counter() - t)
    return chars / statistics.median(times)


def mcnemar(base: list[int | None], other: list[int | None], k: int) -> tuple[int, int, float]:
    """(questions won, questions lost, exact two-sided p) of ``other`` against ``base`` at rank k."""
    hit = [(a is not None and a <= k, b is not None and b <= k) for a, b in zip(base, other, strict=True)]
    won = sum(1 for a, b in hit if b and not a)
    lost = sum(1 for a, b in hit if a and not b)
    n = won + lost
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(min(won, lost) + 1)) / 2**n) if n else 1.0
    return won, lost, p


def _own_doc(doc_ids: dict[tuple[str, str], str], q: Question) -> str | None:
    return doc_ids[(q[0], q[1])]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with xquad.{en,zh,th}.json")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS)
    )
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="vector cache file (bench/retrieval.py's)"
    )
    parser.add_argument(
        "--embed", default="local", help="KB_EMBED for the hybrid figures (local, url or off)"
    )
    parser.add_argument("--speed-only", action="store_true", help="only the analyzer's characters per second")
    args = parser.parse_args()
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if "trigrams" not in names:
        names.insert(0, "trigrams")  # the baseline every variant is compared with
    configure_logging(None, console=io.StringIO())
    docs, questions = load_xquad(args.data)
    thai = [text for (lang, _), text in docs.items() if lang == "th"]
    paragraphs = [p for text in thai for p in text.split("\n\n") if p.strip()]

    print(f"analyzer speed on {len(paragraphs)} Thai paragraphs, {sum(map(len, paragraphs)):,} characters:")
    for name in names:
        with variant(name):
            rate = chars_per_s(paragraphs)
            n_terms = statistics.mean(len(analysis.index_body(p).split()) for p in paragraphs)
        print(f"  {name:<18}{rate / 1000:>8.0f} k chars/s   {n_terms:>6.0f} terms per paragraph")
    if args.speed_only:
        return 0

    spec = str(reference_tokenizer())
    env = {"KB_TOKENIZER": spec, "KB_MODEL": "", "KB_EMBED": args.embed}
    counter, _ = load_counter(spec, cache_dir=hf_cache_dir())
    inner = make_embedder(load_settings(env, home=ROOT))
    embedder = CachingEmbedder(inner, args.cache) if inner is not None else None
    ranks: dict[str, dict[str, dict[str, list[int | None]]]] = {}
    print(f"\n{len(questions)} XQuAD questions, one index of every article in {', '.join(LANGS)}")
    print(f"{'variant':<18}{'lang':<6}{'lexical r@1 r@3 r@5':>20}{'hybrid r@1 r@3 r@5':>22}"
          f"{'build s':>9}{'lexical ms median/p95':>24}")  # fmt: skip
    for name in names:
        with variant(name), tempfile.TemporaryDirectory(prefix="kb-thai-") as tmp:
            home = Path(tmp)
            settings = load_settings(env, home=home)
            t0 = time.perf_counter()
            doc_ids = build(home, docs, settings, counter)
            build_s = time.perf_counter() - t0
            with Index(settings.index_path) as index:
                meaning = None
                if embedder is not None:
                    embed_missing(index, embedder, batch=settings.embed_batch)
                    embedder.save()
                    meaning = Meaning.of(embedder)

                own = partial(_own_doc, doc_ids)
                lexical = run_questions(index, questions, own, None, 5)
                hybrid = run_questions(index, questions, own, meaning, 5) if meaning else lexical
                ranks[name] = {"lexical": lexical, "hybrid": hybrid}
                latency = {}
                for lang in LANGS:
                    ms = []
                    for q in [q for q in questions if q[0] == lang][::4]:
                        t = time.perf_counter()
                        search(index, q[2], k=5)
                        ms.append((time.perf_counter() - t) * 1000)
                    ms.sort()
                    latency[lang] = (statistics.median(ms), ms[int(0.95 * (len(ms) - 1))])
        for lang in LANGS:
            lx, hy = lexical[lang], hybrid[lang]
            print(
                f"{name:<18}{lang:<6}{recall(lx, 1):>8.3f}{recall(lx, 3):>6.3f}{recall(lx, 5):>6.3f}"
                f"{recall(hy, 1):>10.3f}{recall(hy, 3):>6.3f}{recall(hy, 5):>6.3f}"
                f"{build_s:>9.1f}{latency[lang][0]:>14.1f} /{latency[lang][1]:>6.1f}"
            )

    print("\nagainst trigrams: questions won / lost, exact McNemar p")
    for name in names[1:]:
        for kind in ("lexical", "hybrid"):
            cells = []
            for lang in LANGS:
                for k in (1, 5):
                    won, lost, p = mcnemar(ranks["trigrams"][kind][lang], ranks[name][kind][lang], k)
                    cells.append(f"{lang} r@{k} +{won}/-{lost} p={p:.2f}")
            print(f"  {name:<18}{kind:<9}" + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
