"""How far the relevance gate could go by judging the question, not only its best passage: read from a dump
of bench/sufficiency.py (``--dump FILE``), not kb's gate.

kb's gate decides by the best passage's relevance (knowledge.retrieval.sufficiency). This fits, on the
questions of half of XQuAD's articles (bench/sufficiency.halves), a logistic model over features of the
whole candidate list of each question, and prints, on the other half, the trade-off of kb's gate and of
the fitted ones at a range of thresholds: Chinese and Thai questions' answerable kept and unanswerable
sent (the same set) and answerable kept across languages (the cross set: the article in another language
only). The features: the best relevance (logit) and its lead over the second, the highest standout, the
best same-script coverage and lexical score, the highest agreement of the second embedder, the share of
candidates in the question's script, the mean standout (the question's own level), the best gloss share;
"quadratic" adds their products two by two.

    python bench/sufficiency.py --dump /tmp/gate.dump --only same,cross,heldout  # the held-out set too
    python bench/gate_questions.py /tmp/gate.dump [--thresholds 0.2,0.3,...] [--cross-weight 3]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sufficiency import halves  # noqa: E402
from knowledge.retrieval.sufficiency import Evidence, relevance  # noqa: E402

FEATURES = 9
NONE = [-20.0] + [0.0] * (FEATURES - 1)  # a question with no candidate at all


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def features(candidates: list[list]) -> list[float]:
    """One question's features from its candidates' evidence (see the module docstring)."""
    if not candidates:
        return NONE
    ev = [Evidence(c[0], c[1], c[2], c[3], c[4], c[5]) for c in candidates]
    rel = sorted((logit(relevance(e)) for e in ev), reverse=True)
    same = [e for e in ev if e.same_script]
    return [
        rel[0],
        rel[0] - (rel[1] if len(rel) > 1 else -10.0),
        max(e.standout or 0.0 for e in ev),
        max((e.coverage for e in same), default=0.0),
        max((e.lexical for e in same), default=0.0),
        max((e.agreement for e in ev if e.agreement is not None), default=0.0),
        len(same) / len(ev),
        float(np.mean([e.standout or 0.0 for e in ev])),
        max((e.gloss for e in ev if e.gloss is not None), default=0.0),
    ]


def quadratic(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    return np.hstack([x, *((x[:, i] * x[:, j])[:, None] for i in range(n) for j in range(i, n))])


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None, l2: float = 1e-2, rounds: int = 50):
    """Logistic regression by Newton's method on standardised features (``weight``: each question's, 1 by
    default); the fitted probability function."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    sw = np.ones(len(y)) if weight is None else weight

    def design(xs: np.ndarray) -> np.ndarray:
        return np.hstack([(xs - mu) / sd, np.ones((len(xs), 1))])

    z, w = design(x), np.zeros(x.shape[1] + 1)
    for _ in range(rounds):
        p = 1 / (1 + np.exp(-z @ w))
        grad = z.T @ (sw * (p - y)) / sw.sum() + l2 * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z / sw.sum() + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return lambda xs: 1 / (1 + np.exp(-design(xs) @ w))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dump", type=Path)
    parser.add_argument("--thresholds", default="0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6")
    parser.add_argument(
        "--cross-weight",
        type=float,
        default=1.0,
        help="the weight in the fit of an answerable question across languages",
    )
    args = parser.parse_args()
    everything = [json.loads(line) for line in args.dump.open()]
    rows = [r for r in everything if r["set"] in ("same", "cross")]
    x = np.array([features(r["candidates"]) for r in rows])
    y = np.array([r["answerable"] for r in rows], dtype=float)
    sets, langs = np.array([r["set"] for r in rows]), np.array([r["lang"] for r in rows])
    crosses = np.array([bool(r["crosses"]) for r in rows])
    first, _ = halves({r["key"] for r in rows})
    tune = np.array([r["key"] in first for r in rows])
    held = ~tune
    weight = np.where(crosses & (y == 1), args.cross_weight, 1.0)
    scores = {
        "kb's gate": 1 / (1 + np.exp(-x[:, 0])),
        "question, linear": fit(x[tune], y[tune], weight[tune])(x),
        "question, quadratic": fit(quadratic(x)[tune], y[tune], weight[tune])(quadratic(x)),
    }
    print(f"{len(rows)} questions; fitted on {int(tune.sum())}, read on the other {int(held.sum())}")
    print("held-out half: same set answerable kept / unanswerable sent, cross set kept across languages")
    for name, score in scores.items():
        print(name)
        for t in (float(v) for v in args.thresholds.split(",")):
            cells = []
            for lang in ("zh", "th"):
                same = held & (sets == "same") & (langs == lang)
                kept = ((score >= t) & same & (y == 1)).sum() / (same & (y == 1)).sum()
                sent = ((score < t) & same & (y == 0)).sum() / (same & (y == 0)).sum()
                across = held & (sets == "cross") & (langs == lang) & crosses & (y == 1)
                cells.append(
                    f"{lang} {kept:.3f} / {sent:.3f}, across {((score >= t) & across).sum() / across.sum():.3f}"
                )
            print(f"  {t:.2f}  " + "   ".join(cells))
    held_out = [r for r in everything if r["set"] == "heldout"]
    if held_out:
        read_held_out(held_out, x, y, weight, [float(v) for v in args.thresholds.split(",")])
    return 0


def read_held_out(
    rows: list[dict], x: np.ndarray, y: np.ndarray, weight: np.ndarray, thresholds: list[float]
) -> None:
    """The models fitted on all of XQuAD's questions, read on the held-out set (TyDi en, DRCD zh-Hant,
    iApp th: never fitted on), answerable kept / unanswerable sent per language."""
    hx = np.array([features(r["candidates"]) for r in rows])
    hy = np.array([r["answerable"] for r in rows], dtype=float)
    langs = np.array([r["lang"] for r in rows])
    scores = {
        "kb's gate": 1 / (1 + np.exp(-hx[:, 0])),
        "question, linear": fit(x, y, weight)(hx),
        "question, quadratic": fit(quadratic(x), y, weight)(quadratic(hx)),
    }
    print(f"\nheld out ({len(rows)} questions: TyDi en, DRCD zh-Hant, iApp th), fitted on all of XQuAD:")
    for name, score in scores.items():
        print(name)
        for t in thresholds:
            cells = []
            for lang in ("en", "zh", "th"):
                mine = langs == lang
                kept = ((score >= t) & mine & (hy == 1)).sum() / (mine & (hy == 1)).sum()
                sent = ((score < t) & mine & (hy == 0)).sum() / (mine & (hy == 0)).sum()
                cells.append(f"{lang} {kept:.3f} / {sent:.3f}")
            print(f"  {t:.2f}  " + "   ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
