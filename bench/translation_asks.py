"""Which questions need the model's translation? The calls kb makes, and what asking otherwise would give.

kb asks the model to translate a question when the passage it found best without a translation is
not strong evidence (knowledge.retrieval.translate.is_strong): in the question's own script, found by
its words and holding STRONG_COVERAGE of the question's idf mass; in another script, with the second
embedder's agreement of at least STRONG_AGREEMENT, or found by meaning with a lead of STRONG_LEAD
over the next passage's score. This benchmark asks every question twice, without a translation and
with XQuAD's own translations (the best the model could give), keeps what the first search knew, and
replays rules over it: for each, the share of questions translated (the model's calls) and r@1/r@5
of what the owner would get. ``always`` and ``never`` bound them; ``kb`` is kb's rule and ``no lead``
the same without the lead; ``x:`` variants are other leads (and a lead for a Chinese question whose
English best passage holds a share of its gloss); ``s:`` variants change the rule for a best passage
in the question's own script (a higher coverage; a relevance the gate gives it as well). STRONG_LEAD
was chosen on the first half of the articles (``tuning``: the fewest calls that find no question
less well at rank 1 or 5) and is read on the second (``held out``).

XQuAD en/zh/th, each article in one language only (bench/crossing.py's three rotations: kb's
pipeline, the real Qwen3 tokenizer, 160/48-token chunks, e5 and the Universal Sentence Encoder,
vectors cached): a question in one language whose page is in another finds other pages in its own
language, as in a knowledge base of mixed documents. Where the same page is indexed in several
languages, translating more often puts the question's page in another language first:
bench/retrieval.py's ``+ reference translations`` columns (hit = the page in the question's own
language, and in any of its languages) measure that case.

    python bench/translation_asks.py [--every 2] [--dump FILE] [--load FILE]
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.crossing import arranged, cross_parser, cross_setup, embed_both, pair_label  # noqa: E402
from bench.retrieval import LANGS, hit_rank, recall, rotations  # noqa: E402
from bench.retrieval_cross import GROUP_OF  # noqa: E402
from knowledge.retrieval.glossary import OnDemand  # noqa: E402
from knowledge.retrieval.search import Meaning, find  # noqa: E402
from knowledge.retrieval.second import Second  # noqa: E402
from knowledge.retrieval.translate import STRONG_AGREEMENT, STRONG_COVERAGE, STRONG_LEAD, is_strong  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

DEFAULT_DUMP = ROOT / "runs" / "bench" / "translation-asks.json"

Row = dict  # one question in one rotation: half, ql, dl, the ranks, the best passage's evidence


def collect(args) -> list[Row]:
    """Every question asked without and with its translations, in each rotation."""
    docs, questions, env, counter, embedder, use = cross_setup(args)
    second = Second(use)
    xquad = arranged(docs, questions)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        for rotation, lang_of, settings, doc_ids in rotations(
            Path(tmp), docs, xquad.keys, env, counter, name="asks"
        ):
            with Index(settings.index_path) as index:
                embed_both(index, embedder, second, use, batch=settings.embed_batch)
                meaning = Meaning.of(embedder, second=second, glossary=OnDemand())
                for q in questions[:: args.every]:
                    dlang, answers, gold, half = xquad.about(q, lang_of, doc_ids)
                    n = xquad.position[id(q)]
                    others = [xquad.by_lang[lang][n][2] for lang in LANGS if GROUP_OF[lang] != GROUP_OF[q[0]]]
                    first = find(index, q[2], k=args.k, meaning=meaning)
                    translated = find(index, q[2], k=args.k, meaning=meaning, translations=others)
                    best = first.best
                    rows.append(
                        {
                            "half": half,
                            "ql": q[0],
                            "dl": dlang,
                            "plain": hit_rank(first.results, gold, answers),
                            "translated": hit_rank(translated.results, gold, answers),
                            "asks": not is_strong(best, first.lead),
                            "same_script": best.same_script if best else None,
                            "coverage": best.coverage if best else None,
                            "lexical": best.lexical if best else None,
                            "by_meaning": best is not None and best.standout is not None,
                            "agreement": best.agreement if best else None,
                            "gloss": best.gloss if best else None,
                            "relevance": first.verdict.relevance,
                            "lead": first.lead,
                        }
                    )
            print(f"[rotation {rotation} done]", file=sys.stderr, flush=True)
    return rows


Rule = Callable[[Row], bool]  # True: the question is not translated


def skip_same(row: Row, coverage: float, relevance: float = 0.0) -> bool:
    """A best passage in the question's script: found by its words, holding ``coverage`` of the
    question's idf mass, with the gate's relevance at least ``relevance``."""
    return bool(row["lexical"]) and row["coverage"] >= coverage and row["relevance"] >= relevance


def skip_across(row: Row, agreement: float, lead: float | None, gloss: float = 0.0) -> bool:
    """A best passage in another script: the second embedder's agreement, or, found by meaning, a
    ``lead`` over the next passage (None: never) while holding a share of a Chinese question's gloss
    (0: any question)."""
    if (row["agreement"] or 0.0) >= agreement:
        return True
    if lead is None or not row["by_meaning"] or row["lead"] is None:
        return False
    return row["lead"] >= lead and (row["gloss"] or 0.0) >= gloss


def rule(same: Callable[[Row], bool], across: Callable[[Row], bool]) -> Rule:
    return lambda r: r["same_script"] is not None and (same(r) if r["same_script"] else across(r))


def rules() -> dict[str, Rule]:
    """kb's rule (knowledge.retrieval.translate.is_strong), always asking, and variants of each half."""
    kb_across = lambda r: skip_across(r, STRONG_AGREEMENT, STRONG_LEAD)  # noqa: E731
    kb_same = lambda r: skip_same(r, STRONG_COVERAGE)  # noqa: E731
    out: dict[str, Rule] = {
        "always": lambda r: False,
        "never": lambda r: True,
        "kb": rule(kb_same, kb_across),
        "no lead": rule(kb_same, lambda r: skip_across(r, STRONG_AGREEMENT, None)),
    }
    for lead in (0.2, 0.3):
        out[f"x:lead≥{lead}"] = rule(kb_same, lambda r, x=lead: skip_across(r, STRONG_AGREEMENT, x))
    out["x:g≥0.3&lead≥0.2"] = rule(kb_same, lambda r: skip_across(r, STRONG_AGREEMENT, 0.2, 0.3))
    for cov in (0.6,):
        out[f"s:cov≥{cov}"] = rule(lambda r, c=cov: skip_same(r, c), kb_across)
    for rel in (0.98,):
        out[f"s:rel≥{rel}"] = rule(lambda r, v=rel: skip_same(r, STRONG_COVERAGE, v), kb_across)
    return out


def report(rows: list[Row]) -> None:
    """Per half and pair: the share of questions asked, r@1/r@5, for each rule."""
    chosen = rules()
    mismatched = sum(chosen["kb"](r) == r["asks"] for r in rows)
    assert not mismatched, f"the rule replayed as kb's differs from kb's on {mismatched} questions"
    for half in ("tuning", "held out"):
        print(f"\n{half}: share of questions translated, r@1/r@5 (question language → document language)")
        print(f"{'pair':<10}{'n':>6}" + "".join(f"{m:>20}" for m in chosen))
        mine = [r for r in rows if r["half"] == half]
        pairs = sorted({(r["ql"], r["dl"]) for r in mine}, key=lambda k: (k[0] == k[1], k))
        across = lambda r: GROUP_OF[r["ql"]] != GROUP_OF[r["dl"]]  # noqa: E731
        groups = [*(((p,), pair_label(*p)) for p in pairs), (None, "across"), (False, "same"), (True, "all")]
        for key, label in groups:
            if key is None:
                sel = [r for r in mine if across(r)]
            elif key is False:
                sel = [r for r in mine if not across(r)]
            elif key is True:
                sel = mine
            else:
                sel = [r for r in mine if (r["ql"], r["dl"]) == key[0]]
            cells = []
            for skip in chosen.values():
                ranks = [r["plain"] if skip(r) else r["translated"] for r in sel]
                asked = sum(not skip(r) for r in sel) / max(len(sel), 1)
                cells.append(f"{asked:.2f} {recall(ranks, 1):.3f}/{recall(ranks, 5):.3f}")
            print(f"{label:<10}{len(sel):>6}" + "".join(f"{c:>20}" for c in cells))


def main() -> int:
    parser = cross_parser(__doc__, every=2)
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP, help="write the rows here (JSON)")
    parser.add_argument("--load", type=Path, help="replay rows written by --dump instead of searching")
    args = parser.parse_args()
    if args.load:
        rows = json.loads(args.load.read_text(encoding="utf-8"))
    else:
        rows = collect(args)
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        args.dump.write_text(json.dumps(rows), encoding="utf-8")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
