"""The relevance gate's trade-off read from a dump of bench/sufficiency.py (``--dump FILE``), for any weights.

Every candidate's evidence is in the dump, so the gate's rates under other weights need no new run:
per set and language, the answerable questions kept local and the unanswerable ones sent to the web
at each threshold, and the cross set's answerable questions whose article is in another language only.
Weights default to kb's (knowledge.retrieval.sufficiency: SECOND_WEIGHTS where the second embedder
agreed, HYBRID_WEIGHTS elsewhere); ``--weights`` gives others
(standout, coverage, lexical, same script, agreement, intercept), e.g. the ones in force before.

``--gloss`` reads the gate's gloss evidence instead (knowledge.retrieval.sufficiency.GLOSS_EVIDENCE and
GLOSS_CENTRE: only Chinese questions' passages in English carry it): for each weight and centre,
Chinese questions' answerable kept and unanswerable sent in both sets and the cross set's answerable
ones across languages kept, on each half of the articles (bench/sufficiency.halves), the first to
choose on, the second to read after.

    python bench/gate_sweep.py DUMP [--weights 2.393,2.393,2.393,-4.787,0,0.632] [--thresholds 0.3,0.5,0.7]
    python bench/gate_sweep.py DUMP --gloss [--gloss-weights 0,2,4,6,8] [--gloss-centres 0.2,0.3,0.4,0.5]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sufficiency import halves  # noqa: E402
from knowledge.retrieval import sufficiency  # noqa: E402
from knowledge.retrieval.sufficiency import Evidence  # noqa: E402

LANGS = ("en", "zh", "th")


def best_relevance(
    candidates: list[list], weights: tuple[float, ...] | None, *, agreement: bool = True
) -> float:
    """The best candidate's relevance under these weights (0 without candidates; ``agreement`` False:
    as if the second embedder were missing)."""
    return max(
        (
            sufficiency.relevance(
                Evidence(s, c, lx, bool(same), agree if agreement else None, gloss), weights=weights
            )
            for s, c, lx, same, agree, gloss, _ in candidates
        ),
        default=0.0,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dump", type=Path)
    parser.add_argument("--weights", default="", help="six comma-separated weights (default: kb's)")
    parser.add_argument(
        "--without-agreement", action="store_true", help="judge as if the second embedder were missing"
    )
    parser.add_argument("--thresholds", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--gloss", action="store_true", help="sweep the gate's gloss evidence instead")
    parser.add_argument("--gloss-weights", default="0,2,4,6,8")
    parser.add_argument("--gloss-centres", default="0.2,0.3,0.4,0.5")
    args = parser.parse_args()
    weights = tuple(float(x) for x in args.weights.split(",")) if args.weights else None
    rows = [json.loads(line) for line in args.dump.open()]
    if args.gloss:
        grid = [
            (float(w), float(c)) for w in args.gloss_weights.split(",") for c in args.gloss_centres.split(",")
        ]
        gloss_sweep([r for r in rows if r["lang"] == "zh"], grid)
        return 0
    best = [best_relevance(r["candidates"], weights, agreement=not args.without_agreement) for r in rows]
    print(f"weights {weights or 'kb: SECOND_WEIGHTS for passages with an agreement, else HYBRID_WEIGHTS'}")
    for name in ("same", "cross"):
        mine = [(r, b) for r, b in zip(rows, best, strict=True) if r["set"] == name]
        if not mine:
            continue
        print(
            f"\nXQuAD {name}: threshold, answerable kept / unanswerable sent (en, zh, th), across languages kept"
        )
        for threshold in (float(x) for x in args.thresholds.split(",")):
            parts = []
            for lang in LANGS:
                yes = [b for r, b in mine if r["lang"] == lang and r["answerable"]]
                no = [b for r, b in mine if r["lang"] == lang and not r["answerable"]]
                kept = sum(b >= threshold for b in yes) / max(len(yes), 1)
                sent = sum(b < threshold for b in no) / max(len(no), 1)
                parts.append(f"{lang} {kept:.3f}/{sent:.3f}")
            crossing = [b for r, b in mine if r["answerable"] and r["crosses"]]
            if crossing:
                parts.append(f"across {sum(b >= threshold for b in crossing) / len(crossing):.3f}")
            print(f"  {threshold:<5}" + "  ".join(parts))
    return 0


def gloss_sweep(rows: list[dict], grid: list[tuple[float, float]]) -> None:
    """Chinese questions' rates at kb's threshold for each (gloss weight, centre), on each half."""
    first = halves({r["key"] for r in rows})[0]
    kept = sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE
    columns = ("same kept", "same sent", "cross kept", "cross sent", "across kept")
    print(f"Chinese questions at {sufficiency.DEFAULT_THRESHOLD}: " + ", ".join(columns))
    for half in ("first half", "second half"):
        print(f"\n{half}: weight, centre")
        for w, c in grid:
            sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE = w, c
            mine = [r for r in rows if (r["key"] in first) == (half == "first half")]
            best = [(r, best_relevance(r["candidates"], None) >= sufficiency.DEFAULT_THRESHOLD) for r in mine]
            cells = []
            for name in ("same", "cross"):
                yes = [b for r, b in best if r["set"] == name and r["answerable"]]
                no = [not b for r, b in best if r["set"] == name and not r["answerable"]]
                cells += [sum(yes) / max(len(yes), 1), sum(no) / max(len(no), 1)]
            across = [b for r, b in best if r["set"] == "cross" and r["answerable"] and r["crosses"]]
            cells.append(sum(across) / max(len(across), 1))
            mark = "  <- kb" if (w, c) == kept else ""
            print(f"  {w:<5}{c:<5}" + "".join(f"{x:>12.3f}" for x in cells) + mark)
    sufficiency.GLOSS_EVIDENCE, sufficiency.GLOSS_CENTRE = kept


if __name__ == "__main__":
    sys.exit(main())
