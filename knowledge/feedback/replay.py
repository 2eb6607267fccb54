"""A regression set replayed: how the index ranks, today, the passages the owner voted on.

For each 👍 item, whether one of its expected passages comes first (hit@1) or among the first three
(hit@3); for each 👎 item, whether a rejected passage still comes first (or among the first three).
Pure: the ranking is a function handed in (bench/feedback_replay.py gives kb's search)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class Replayed:
    """The figures of one replay (counts; the rates are computed from them)."""

    good: int = 0  # 👍 items with expected passages
    hit1: int = 0
    hit3: int = 0
    bad: int = 0  # 👎 items with rejected passages
    bad_first: int = 0
    bad_top3: int = 0
    skipped: int = 0  # items with no passage to check (a web or no-answer door)
    not_first: list[str] = field(default_factory=list)  # the questions whose 👍 passages do not come first
    misses: list[str] = field(default_factory=list)  # the questions whose 👍 passages are not in the top 3
    still_first: list[str] = field(default_factory=list)  # the questions whose 👎 passage still comes first

    @staticmethod
    def rate(n: int, of: int) -> float | None:
        """``n / of``, or None when there is nothing to count."""
        return n / of if of else None


def chunks_of(item: Mapping[str, object], field_name: str) -> set[str]:
    """The chunk ids of an item's ``expected`` or ``rejected`` passages."""
    passages = item.get(field_name) or []
    return {str(p["chunk_id"]) for p in passages if isinstance(p, Mapping) and p.get("chunk_id")}  # type: ignore[union-attr]


def question_of(item: Mapping[str, object]) -> str:
    """What was searched for an item: its standalone question, else the question as written."""
    return str(item.get("standalone") or item.get("question") or "")


def replay(items: Sequence[Mapping[str, object]], ranked: Callable[[str], Sequence[str]]) -> Replayed:
    """Replay a regression set (``kb feedback --json``): ``ranked`` gives the chunk ids the index ranks
    for a question, best first (at least three)."""
    out = Replayed()
    for item in items:
        expected, rejected = chunks_of(item, "expected"), chunks_of(item, "rejected")
        question = question_of(item)
        if not question or not (expected or rejected):
            out.skipped += 1
            continue
        top = list(ranked(question))[:3]
        if expected:
            out.good += 1
            first, in_top3 = bool(top[:1]) and top[0] in expected, any(c in expected for c in top)
            out.hit1 += first
            out.hit3 += in_top3
            if not first:
                out.not_first.append(question)
            if not in_top3:
                out.misses.append(question)
        if rejected:
            out.bad += 1
            first = bool(top[:1]) and top[0] in rejected
            out.bad_first += first
            out.bad_top3 += any(c in rejected for c in top)
            if first:
                out.still_first.append(question)
    return out
