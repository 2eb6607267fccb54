"""Does the knowledge base answer this question? One calibrated decision, made here only.

A cosine above a floor is not evidence: a multilingual embedder puts unrelated texts close
together, and the best of many unrelated passages always scores well. So each passage that
search found is judged by what discriminates, as an :class:`Evidence`:

* ``standout`` — how far its (language-centred) cosine with the question rises above the
  question's typical cosine with text of the passage's language (index passages and kb's
  background passages), in units of how far such cosines spread for this embedder, *less* the
  height the best of N unrelated passages stays under 19 times in 20 (N normal draws; N: the
  index's passages, and the background passages a small index is read against, which the
  question must stand out from too). So the bar rises slowly with the size of the knowledge
  base: 3.2 spreads for one document (with the background), 3.6 for 300 passages, 4.9 for
  100,000.
* ``coverage`` — the share of the question's idf mass (words missing from the index included)
  that the passage's words hold;
* ``lexical`` — its lexical score (bm25 of the passage plus half that of its best sentence,
  the best candidate at 1), 0 when its words did not make it a candidate;
* ``same_script`` — whether it is written in the question's script. A passage in the question's
  own language is expected to share its words when it answers it; one in another language is
  not, so it is judged by meaning alone.
* ``agreement`` — for a passage in another script, the second embedder's cosine with the question
  (knowledge.retrieval.second: calibrated, unrelated text near 0), counted from AGREEMENT_CENTRE,
  also in a knowledge base too small for the second embedder's z-scores (one short document);
  absent (Vietnamese, the package missing) it counts as that centre: neither for nor against.
* ``gloss`` — for a Chinese question and a passage in English, the share of the question's
  words (knowledge.retrieval.glossary.held_words: question words aside, its words of two or more
  characters where it has some) whose English, from CC-CEDICT, the passage holds: the words a short
  question names are mostly in its answer, even where e5 and the second embedder hear little of a
  four-character question. Absent (another language, no glossary) it counts for nothing.

A logistic function of these gives ``relevance`` (0-1); the question is answerable when its
best passage reaches the threshold (KB_MIN_RELEVANCE, 0.5). Without vectors (KB_EMBED=off, or a
passage not embedded yet) a second model reads the words alone.

Refitted with ``agreement`` by the same method and grid (its weight tried at 0, 2, 4, 8, 12, 16,
24 spreads of standout per unit of cosine; 8 chosen), on the same XQuAD sets with the second
opinion on (bench/sufficiency.py --choose; bench/gate_sweep.py prints the sweep from its dump).
Used for cross-script passages with an agreement only (SECOND_WEIGHTS), the rest keeping
HYBRID_WEIGHTS: at 0.5, answerable kept .987 / .967 / .971 (en / zh / th; before .988 / .974 /
.978), unanswerable sent .791 / .808 / .793 (before .657 / .618 / .704); on the cross set,
cross-language answerable kept .803 (before .813) and unanswerable sent .864 / .887 / .873 (before
.761 / .746 / .787). The refit for every passage would send a little more (.787-.817 / .877-.897)
but keep only .679 across languages whenever the second embedder is missing.

The weights are the same for every language. They were chosen on XQuAD en/zh/th (bench/
sufficiency.py: half of the articles indexed, the other half asked about; once with each article
in all three languages, once with each in one language only): among the combinations that keep
97 % of the answerable questions local in every language, the one that sends the most
unanswerable questions to the web while still keeping 80 % of the questions that must cross
languages (a Chinese question about an English page). Multilingual-e5's cosines do not separate
those from unrelated text well (AUC 0.86), so a stricter choice would send a fifth more of the
owner's cross-language questions to the web; the model's own "I don't know" (the second door,
knowledge.answer.assistant) catches what this lets through. The slope makes 0.5 the decision
and spreads relevance like the share of answerable questions around it. bench/sufficiency.py
--dump writes every candidate's evidence for refitting.

The gloss adds GLOSS_EVIDENCE · (gloss − GLOSS_CENTRE) to whatever weights are used, chosen on
XQuAD's two sets with the rest of the gate fixed (bench/gate_sweep.py --gloss: weights 0-8, centres
0.2-0.5, chosen on half of the articles for the most Chinese questions decided right, read on the
other half) and checked on short questions about English household papers it was not chosen on
(bench/households_cross.py). Held out on XQuAD, Chinese questions about a page in another language
kept .762 → .789, unanswerable ones sent .815 → .822 (same set) and .917 → .922 (cross set); a
newcomer's 「可以養寵物嗎？」 about a two-passage English lease stays local (0.84; 0.13 without).

Cost: the evidence comes from numbers search computes anyway; the only extra work is the
question's cosine with a fixed sample of at most 2,000 passages and 72 background passages, so
the decision costs the same at 100 or 100,000 chunks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

# Logistic weights (standout, coverage, lexical, same script, agreement, intercept), the same for
# every language; see the module docstring for how they were chosen.
HYBRID_WEIGHTS = (2.393, 2.393, 2.393, -4.787, 0.0, 0.632)
# For a passage in another script with the second embedder's agreement (see the module docstring):
# refitted with it; every other passage keeps HYBRID_WEIGHTS, so without the second embedder (its
# package missing, Vietnamese, KB_EMBED=url) the gate is exactly what it was.
SECOND_WEIGHTS = (1.853, 7.41, 0.463, -2.779, 14.821, -0.377)
LEXICAL_WEIGHTS = (0.0, 11.099, 2.22, 0.0, 0.0, -6.247)
# The second embedder's cosine that says nothing either way: unrelated text stays under it 19 times
# in 20 (its 95th percentile across languages, 0.16 on XQuAD), text that answers is mostly above.
AGREEMENT_CENTRE = 0.2
# A passage gains GLOSS_EVIDENCE logits for every unit of a Chinese question's gloss it holds above
# GLOSS_CENTRE, whatever the weights (see the module docstring).
GLOSS_EVIDENCE = 6.0
GLOSS_CENTRE = 0.4
DEFAULT_THRESHOLD = 0.5
CHANCE = 0.05  # see chance_best
_NORMAL = NormalDist()


@dataclass(frozen=True)
class Evidence:
    """What one passage offers as evidence for a question (see the module docstring)."""

    standout: float | None  # None: no vector for it (search by meaning off, or not embedded yet)
    coverage: float
    lexical: float
    same_script: bool
    # the second embedder's cosine (knowledge.retrieval.second), for a passage in another script only
    agreement: float | None = None
    # the share of a Chinese question's words whose English the passage holds (its gloss,
    # knowledge.retrieval.glossary.held), for a passage in English only (knowledge.retrieval.search)
    gloss: float | None = None


def standout(cosine: float, typical: float, passages: int, noise: float) -> float:
    """How many spreads a cosine stands above the typical one, less the chance best of ``passages``."""
    return (cosine - typical) / max(noise, 1e-6) - chance_best(passages)


def chance_best(passages: int) -> float:
    """The height, in spreads, that the best of this many unrelated passages stays under 19 times in
    20 (normal cosines): 1.6 for one passage, 3.3 for 100, 4.9 for 100,000."""
    return _NORMAL.inv_cdf((1.0 - CHANCE) ** (1.0 / max(passages, 1)))


def relevance(evidence: Evidence, *, weights: tuple[float, ...] | None = None) -> float:
    """The probability that the passage answers the question (0-1); ``weights``: others than kb's
    (with meaning; a benchmark's, to compare)."""
    by_meaning = evidence.standout is not None
    kb = SECOND_WEIGHTS if evidence.agreement is not None else HYBRID_WEIGHTS
    chosen = (weights or kb) if by_meaning else LEXICAL_WEIGHTS
    w_standout, w_coverage, w_lexical, w_same, w_agree, bias = chosen
    z = (
        (w_standout * evidence.standout if by_meaning else 0.0)
        + w_coverage * evidence.coverage
        + w_lexical * evidence.lexical
        + (w_same if evidence.same_script else 0.0)
        + (w_agree * (evidence.agreement - AGREEMENT_CENTRE) if evidence.agreement is not None else 0.0)
        + (GLOSS_EVIDENCE * (evidence.gloss - GLOSS_CENTRE) if evidence.gloss is not None else 0.0)
        + bias
    )
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass(frozen=True)
class Verdict:
    """Retrieval's answer to "do the documents answer it?", with what it was decided from."""

    answerable: bool
    relevance: float  # the best passage's
    threshold: float
    basis: str  # "words and meaning", "words" (no vectors), or "nothing" (no passage matched)
    why: str

    def to_json(self) -> dict[str, object]:
        return {
            "answerable": self.answerable,
            "relevance": round(self.relevance, 4),
            "threshold": self.threshold,
            "basis": self.basis,
            "why": self.why,
        }


def judge(relevances: Sequence[float], *, threshold: float = DEFAULT_THRESHOLD, vectors: bool) -> Verdict:
    """The verdict from the relevance of every passage search found (``vectors``: meaning was used)."""
    if not relevances:
        return Verdict(False, 0.0, threshold, "nothing", "no passage matches the question")
    best = max(relevances)
    basis = "words and meaning" if vectors else "words"
    if best >= threshold:
        return Verdict(
            True, best, threshold, basis, f"the best passage is relevant ({best:.2f} ≥ {threshold})"
        )
    return Verdict(False, best, threshold, basis, f"no passage is relevant enough ({best:.2f} < {threshold})")
