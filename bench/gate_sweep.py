"""The relevance gate's trade-off read from a dump of bench/sufficiency.py (``--dump FILE``), for any weights.

Every candidate's evidence is in the dump, so the gate's rates under other weights need no new run:
per set and language, the answerable questions kept local and the unanswerable ones sent to the web
at each threshold, and the cross set's answerable questions whose article is in another language only.
Weights default to kb's (knowledge.retrieval.sufficiency: SECOND_WEIGHTS where the second embedder
agreed, HYBRID_WEIGHTS elsewhere); ``--weights`` gives others
(standout, coverage, lexical, same script, agreement, intercept), e.g. the ones in force before.

    python bench/gate_sweep.py DUMP [--weights 2.393,2.393,2.393,-4.787,0,0.632] [--thresholds 0.3,0.5,0.7]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
                Evidence(s, c, lx, bool(same), agree if agreement else None), weights=weights
            )
            for s, c, lx, same, agree, _ in candidates
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
    args = parser.parse_args()
    weights = tuple(float(x) for x in args.weights.split(",")) if args.weights else None
    rows = [json.loads(line) for line in args.dump.open()]
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


if __name__ == "__main__":
    sys.exit(main())
