"""How far the relevance gate could go by judging the question from its whole candidate list, not only its
best passage: fitted and read from a dump of bench/sufficiency.py (``--dump FILE``); analysis, not kb's gate.

kb's gate decides by the best passage's relevance (knowledge.retrieval.sufficiency). Here each question is
described by its candidates (``vector``): the best passage's relevance (as a logit) and its lead over the
second, the highest standout, the best coverage and lexical score of a passage in the question's script,
the second embedder's highest agreement, the share of candidates in the question's script less the index's
share (so that an index in one language, or a one-document one, reads 0), the mean standout, the best gloss
share, and whether the question is written in Chinese-Japanese-Korean or Thai script. A logistic model of
these (all of them, or ``--without`` some) is fitted on XQuAD's ``same`` and ``cross`` sets, the answerable
questions across languages weighed ``w`` times (w in CROSS_WEIGHTS). Each w is read out of fold (fitted on
the questions of half of the articles, bench/sufficiency.halves, read on the other half, both ways); its
threshold is the one that sends the most unanswerable Chinese and Thai questions to the web while keeping
KEPT of every language's answerable ones local and, in every language, at least as many of the answerable
questions across languages as the best passage keeps at 0.5. The w that sends the most is chosen, refitted
on every XQuAD question, its intercept moved so that 0.5 is the decision, and read at 0.5 beside the best
passage on every other set the dump holds (held out: TyDi en, DRCD zh-Hant, iApp th; TyDi in other
languages; one-document knowledge bases; XQuAD among the held-out articles), none fitted on.

    python bench/sufficiency.py --dump /tmp/gate.dump --only same,cross,heldout,other,one,big
    python bench/gate_questions.py /tmp/gate.dump [--without 1,7]
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
from knowledge.retrieval import sufficiency  # noqa: E402
from knowledge.retrieval.sufficiency import Evidence  # noqa: E402

GROUP = {"en": "other", "zh": "cjk", "th": "thai"}  # XQuAD's languages
FEATURES = (
    "best relevance (logit)", "its lead over the second", "highest standout", "best same-script coverage",
    "best same-script lexical score", "highest agreement", "share in the question's script less the index's",
    "mean standout", "best gloss", "question in CJK script", "question in Thai script",
)  # fmt: skip
CROSS_WEIGHTS = (1.0, 1.5, 2.0, 3.0)
THRESHOLDS = [round(t, 3) for t in np.arange(0.1, 0.801, 0.025)]
KEPT = 0.97


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def vector(row: dict) -> list[float]:
    """A dumped question's features (FEATURES, see the module docstring)."""
    ev = [Evidence(*c[:6]) for c in row["candidates"]]
    script = [float(row["group"] == "cjk"), float(row["group"] == "thai")]
    if not ev:
        return [-20.0] + [0.0] * (len(FEATURES) - 3) + script
    judged = sorted((logit(sufficiency.relevance(e)) for e in ev), reverse=True)
    same = [e for e in ev if e.same_script]
    standouts = [e.standout or 0.0 for e in ev]
    return [
        judged[0],
        judged[0] - (judged[1] if len(judged) > 1 else -10.0),
        max(standouts),
        max((e.coverage for e in same), default=0.0),
        max((e.lexical for e in same), default=0.0),
        max((e.agreement for e in ev if e.agreement is not None), default=0.0),
        len(same) / len(ev) - row["share"],
        sum(standouts) / len(standouts),
        max((e.gloss for e in ev if e.gloss is not None), default=0.0),
        *script,
    ]


def best_relevance(row: dict) -> float:
    """What kb's gate reads: the best passage's relevance (0 without any)."""
    return max((sufficiency.relevance(Evidence(*c[:6])) for c in row["candidates"]), default=0.0)


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1e-2, rounds: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method on standardised features (each question counted ``weight``
    times): the weights on the raw features, the intercept last."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z, w = np.hstack([(x - mu) / sd, np.ones((len(x), 1))]), np.zeros(x.shape[1] + 1)
    for _ in range(rounds):
        p = 1 / (1 + np.exp(-z @ w))
        grad = z.T @ (weight * (p - y)) / weight.sum() + l2 * w
        hess = (z * (weight * p * (1 - p))[:, None]).T @ z / weight.sum() + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    raw = w[:-1] / sd
    return np.append(raw, w[-1] - raw @ mu)


def probability(weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(x @ weights[:-1] + weights[-1])))


class Dump:
    """The XQuAD questions of a dump: their vectors, answers, sets, languages and articles."""

    def __init__(self, rows: list[dict], columns: list[int]) -> None:
        self.x = np.array([vector(r) for r in rows])[:, columns]
        self.best = np.array([best_relevance(r) for r in rows])
        self.y = np.array([r["answerable"] for r in rows], dtype=float)
        self.set = np.array([r["set"] for r in rows])
        self.lang = np.array([r["lang"] for r in rows])
        self.crosses = np.array([bool(r["crosses"]) for r in rows]) & (self.y == 1)
        self.key = np.array([r["key"] for r in rows])

    def figures(self, score: np.ndarray, t: float) -> dict[str, tuple[float, float, float]]:
        """Per language: the same set's answerable kept and unanswerable sent, the cross set's answerable
        kept across languages."""
        out = {}
        for lang in GROUP:
            same = (self.set == "same") & (self.lang == lang)
            across = (self.set == "cross") & (self.lang == lang) & self.crosses
            out[lang] = (
                float(((score >= t) & same & (self.y == 1)).sum() / (same & (self.y == 1)).sum()),
                float(((score < t) & same & (self.y == 0)).sum() / (same & (self.y == 0)).sum()),
                float(((score >= t) & across).sum() / across.sum()),
            )
        return out


def out_of_fold(dump: Dump, weight: np.ndarray) -> np.ndarray:
    """Each question's probability from the model fitted on the other half of the articles."""
    score = np.zeros(len(dump.y))
    for half in halves(set(dump.key)):
        fitted = np.isin(dump.key, list(half))
        score[~fitted] = probability(fit(dump.x[fitted], dump.y[fitted], weight[fitted]), dump.x[~fitted])
    return score


def best_threshold(dump: Dump, score: np.ndarray, floor: dict[str, float]) -> tuple[float, dict] | None:
    """The threshold sending the most unanswerable Chinese and Thai questions within the constraints."""
    best: tuple[float, float, dict] | None = None
    for t in THRESHOLDS:
        f = dump.figures(score, t)
        if all(f[lang][0] >= KEPT and f[lang][2] >= floor[lang] for lang in GROUP):
            sent = f["zh"][1] + f["th"][1]
            if best is None or sent > best[0]:
                best = (sent, t, f)
    return None if best is None else (best[1], best[2])


def line(f: dict[str, tuple[float, float, float]]) -> str:
    return "   ".join(f"{lang} {k:.3f} / {s:.3f}, across {a:.3f}" for lang, (k, s, a) in f.items())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dump", type=Path)
    parser.add_argument(
        "--without", default="", help="features left out, by their place in FEATURES from 0 (e.g. 1,7)"
    )
    args = parser.parse_args()
    left_out = {int(n) for n in args.without.split(",") if n.strip()}
    columns = [n for n in range(len(FEATURES)) if n not in left_out]
    everything = [json.loads(line) for line in args.dump.open()]
    dump = Dump([r for r in everything if r["set"] in ("same", "cross")], columns)
    before = dump.figures(dump.best, sufficiency.DEFAULT_THRESHOLD)
    floor = {lang: f[2] for lang, f in before.items()}
    print(f"{len(dump.y)} XQuAD questions; answerable kept / unanswerable sent, kept across languages")
    print(f"  the best passage at 0.5:  {line(before)}")
    print(f"out of fold, kept >= {KEPT} and across at least the best passage's:")
    chosen: tuple[float, float, float] | None = None
    for w in CROSS_WEIGHTS:
        weight = np.where(dump.crosses, w, 1.0)
        found = best_threshold(dump, out_of_fold(dump, weight), floor)
        if found is None:
            print(f"  w {w}: no threshold meets them")
            continue
        t, f = found
        print(f"  w {w}, threshold {t:.3f}:  {line(f)}")
        if chosen is None or f["zh"][1] + f["th"][1] > chosen[2]:
            chosen = (w, t, f["zh"][1] + f["th"][1])
    if chosen is None:
        return 1
    w, t, _ = chosen
    weights = fit(dump.x, dump.y, np.where(dump.crosses, w, 1.0))
    weights[-1] -= math.log(t / (1 - t))  # 0.5 is the decision
    print(f"chosen: w {w}, threshold {t:.3f}; its weights, refitted on every XQuAD question:")
    for n, v in zip(columns, weights, strict=False):
        print(f"  {v:8.3f}  {FEATURES[n]}")
    print(f"  {weights[-1]:8.3f}  intercept (0.5 the decision)")
    unfitted = [r for r in everything if r["set"] not in ("same", "cross")]
    if unfitted:
        read_unfitted(unfitted, {"the best passage": None, "the question model": weights}, columns)
    return 0


def read_unfitted(rows: list[dict], models: dict[str, np.ndarray | None], columns: list[int]) -> None:
    """The sets the dump holds besides XQuAD's two (held out: TyDi en, DRCD zh-Hant, iApp th; TyDi in other
    languages; one-document knowledge bases; XQuAD with the held-out articles as distractors), never fitted
    on, at 0.5: answerable kept / unanswerable sent per language."""
    print("never fitted on, at 0.5: answerable kept / unanswerable sent")
    for name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == name]
        x = np.array([vector(r) for r in mine])[:, columns]
        y = np.array([r["answerable"] for r in mine], dtype=float)
        langs = np.array([r["lang"] for r in mine])
        best = np.array([best_relevance(r) for r in mine])
        print(f"  {name} ({len(mine)} questions)")
        for model, weights in models.items():
            score: np.ndarray = best if weights is None else probability(weights, x)
            cells = []
            for lang in dict.fromkeys(langs):
                m = langs == lang
                kept = ((score >= 0.5) & m & (y == 1)).sum() / max((m & (y == 1)).sum(), 1)
                sent = ((score < 0.5) & m & (y == 0)).sum() / max((m & (y == 0)).sum(), 1)
                cells.append(f"{lang[:2]} {kept:.3f} / {sent:.3f}")
            print(f"    {model + ':':20s}" + "   ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
