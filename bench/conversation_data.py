"""The conversational sets bench/conversation.py measures, read from their public files into one shape.

Each set becomes a closed pool of passages (the reference passages its conversations hold: their
corpora are far larger than what their repositories carry) and the turns asked against it. A turn
is the user's message, the conversation before it (user messages, agent answers and, where the set
gives them, the passages each answer relied on), its reference passages, whether it is a follow-up
and, for MTRAG, the human rewrite of the message into a standalone question.

* MTRAG (IBM/mt-rag-benchmark, Apache-2.0). The conversations file and the corpora are not in the
  repository (they are LFS objects); what is:
  - ``mtrag-human/evaluations/reference_subset_with_human_evaluations.json``: every turn of 20
    conversations (159 turns), each with its history, reference passage ids, the reference
    answer and the "Multi-Turn" label (Follow-up, Clarification, or none on a first turn), and
    the text of the 350 passages they cite. Each earlier turn is a task of its own, so the
    passages the earlier answers relied on are known.
  - ``mtrag-human/retrieval_tasks/*/*_rewrite.jsonl``: the human rewrite of each answerable turn.
* MTRAG-UN (same repository, ``mtragun-human/generation_tasks/reference.jsonl``): 507 conversations,
  one turn of each (mostly a late one) with the whole history, its reference passages with text and
  its label (Follow-up, Clarification, N/A = standalone). No rewrites, and the earlier answers'
  passages are not given (nothing is carried). Its passages join MTRAG's pool (the same four
  corpora); conversations are sampled evenly when ``conversations`` is less than all.
* INSCIT (ellenmellon/INSCIT, ``data/dev.json``): 86 Wikipedia dialogues, 502 agent turns; each has
  the dialogue so far, the evidence of the previous agent turns and one or two annotations (a
  response and its evidence). No follow-up labels and no rewrites: the first turn of a dialogue is
  standalone, every later one a follow-up. A turn's reference passages are the evidence of all its
  annotations; the answer an earlier turn gave is the one the dialogue continued with.

Identical passage texts under two ids become one passage (one document in the index).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FOLLOW_UP_LABELS = {"Follow-up", "Clarification"}
SUBSET = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
REWRITES = "mtrag-human/retrieval_tasks"
UN = "mtragun-human/generation_tasks/reference.jsonl"


@dataclass(frozen=True)
class Passage:
    """One reference passage: it becomes one document of the pool."""

    key: str
    title: str
    text: str


@dataclass(frozen=True)
class Step:
    """An earlier exchange of a conversation: the user's message, the agent's answer and the keys of
    the passages the answer relied on (empty when the set does not say)."""

    message: str
    answer: str
    refs: tuple[str, ...] = ()
    rewrite: str | None = None


@dataclass(frozen=True)
class Case:
    """A turn to search for: its message after ``history``, and the passages that answer it."""

    part: str  # the table it is reported in (MTRAG, MTRAG-UN, INSCIT)
    id: str
    message: str
    history: tuple[Step, ...]
    refs: tuple[str, ...]
    is_follow_up: bool
    rewrite: str | None = None  # the set's human rewrite, when it has one


@dataclass
class Pool:
    """One set: its passages, its turns, its agent answers (for their lengths) and how it was read."""

    name: str
    passages: dict[str, Passage] = field(default_factory=dict)
    cases: list[Case] = field(default_factory=list)
    answers: dict[str, list[str]] = field(default_factory=dict)  # part → distinct answer texts
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _same: dict[str, str] = field(default_factory=dict, repr=False)  # passage key → kept key
    _by_text: dict[str, str] = field(default_factory=dict, repr=False)

    def add_passage(self, key: str, title: str, text: str) -> str:
        """Add a passage once; the key it is kept under (an identical text keeps the first key)."""
        if key in self._same:
            return self._same[key]
        body = _body(title, text)
        kept = self._by_text.setdefault(body, key)
        self._same[key] = kept
        if kept == key:
            self.passages[key] = Passage(key, title.strip(), body)
        return kept

    def kept(self, keys: Iterable[str]) -> tuple[str, ...]:
        """The keys passages are kept under, once each, in order (unknown keys are left out)."""
        return tuple(dict.fromkeys(self._same[k] for k in keys if k in self._same))

    def add_answers(self, part: str, texts: Iterable[str]) -> None:
        seen = self.answers.setdefault(part, [])
        for text in texts:
            if text.strip() and text not in seen:
                seen.append(text)


def markdown(passage: Passage) -> str:
    """A passage as kb would receive it: its title as a heading, then its text."""
    head = f"# {passage.title}\n\n" if passage.title else ""
    return f"{head}{passage.text}\n"


def _body(title: str, text: str) -> str:
    """The passage text without a first line that repeats the title (MTRAG's texts start with it)."""
    lines = text.strip().splitlines()
    if lines and title.strip() and lines[0].strip() == title.strip():
        lines = lines[1:]
    return "\n".join(lines).strip()


def spread(items: Sequence, most: int) -> list:
    """At most ``most`` items, evenly spread over the list (deterministic)."""
    if most <= 0 or len(items) <= most:
        return list(items)
    return [items[i * len(items) // most] for i in range(most)]


def one_line(text: str) -> str:
    """A message on one line, spaces collapsed (as kb reads a message)."""
    return " ".join(text.split())


def _user_text(text: str) -> str:
    return one_line(text.strip().removeprefix("|user|:"))


def load_rewrites(folder: Path) -> dict[str, str]:
    """MTRAG's human rewrites by task id (``conversation<::>turn``)."""
    out: dict[str, str] = {}
    for path in sorted(folder.glob("*/*_rewrite.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["_id"]] = _user_text(row["text"])
    return out


def _exchanges(messages: Sequence[dict]) -> tuple[list[tuple[str, str]], str]:
    """MTRAG's input (user and agent messages in order, the user's last) as (message, answer) pairs
    and the last message."""
    pairs: list[tuple[str, str]] = []
    for m in messages[:-1]:
        if m["speaker"] == "user":
            pairs.append((one_line(m["text"]), ""))
        elif pairs:
            pairs[-1] = (pairs[-1][0], m["text"].strip())
    return pairs, one_line(messages[-1]["text"])


def load_mtrag(root: Path, *, un_conversations: int) -> Pool:
    """MTRAG's human-evaluated subset (every turn, with rewrites) and a sample of MTRAG-UN, one pool."""
    pool = Pool("MTRAG")
    rewrites = load_rewrites(root / REWRITES)
    subset = json.loads((root / SUBSET).read_text(encoding="utf-8"))
    pool.sources += [SUBSET, f"{REWRITES}/*/*_rewrite.jsonl ({len(rewrites)} rewrites)", UN]
    for doc in subset["documents"]:
        pool.add_passage(doc["document_id"], doc.get("title", ""), doc["text"])
    tasks = {t["task_id"]: t for t in subset["tasks"]}
    for task_id, task in tasks.items():
        conversation, _, turn = task_id.partition("<::>")
        pairs, message = _exchanges(task["input"])
        history = []
        for n, (said, answer) in enumerate(pairs, 1):
            earlier = tasks.get(f"{conversation}<::>{n}")
            refs = pool.kept(c["document_id"] for c in earlier["contexts"]) if earlier else ()
            history.append(Step(said, answer, refs, rewrites.get(f"{conversation}<::>{n}")))
        labels = set(task.get("Multi-Turn") or ())
        pool.cases.append(
            Case(
                "MTRAG",
                task_id,
                message,
                tuple(history),
                pool.kept(c["document_id"] for c in task["contexts"]),
                bool(history) and bool(labels & FOLLOW_UP_LABELS),
                rewrites.get(task_id),
            )
        )
        pool.add_answers("MTRAG", [t["text"] for t in task["targets"]])
        pool.add_answers("MTRAG", [a for _, a in pairs])

    rows = [json.loads(line) for line in (root / UN).read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:  # every conversation's answers count for their lengths, sampled or not
        pool.add_answers("MTRAG-UN", [t["text"] for t in row["targets"]])
        pool.add_answers("MTRAG-UN", [m["text"].strip() for m in row["input"] if m["speaker"] == "agent"])
    answerable = [r for r in rows if r["contexts"]]
    taken = spread(answerable, un_conversations)
    pool.notes.append(
        f"MTRAG-UN: {len(taken)} of the {len(answerable)} conversations whose turn has reference passages"
        f" (of {len(rows)}), evenly spread"
    )
    for row in taken:
        refs = pool.kept(
            pool.add_passage(c["document_id"], c.get("title", ""), c["text"]) for c in row["contexts"]
        )
        pairs, message = _exchanges(row["input"])
        labels = set(row.get("Multi-Turn") or ())
        pool.cases.append(
            Case(
                "MTRAG-UN",
                row["task_id"],
                message,
                tuple(Step(said, answer) for said, answer in pairs),
                refs,
                bool(pairs) and bool(labels & FOLLOW_UP_LABELS),
            )
        )
    return pool


def _inscit_passage(pool: Pool, evidence: dict) -> str:
    """An INSCIT passage into the pool: the article title as heading, its section path as a line."""
    titles = [t.strip() for t in evidence.get("passage_titles") or () if t.strip()]
    title = titles[0] if titles else evidence["passage_id"].rpartition(":")[0]
    sections = " > ".join(titles[1:])
    text = f"{sections}\n\n{evidence['passage_text']}" if sections else evidence["passage_text"]
    return pool.add_passage(evidence["passage_id"], title, text)


def load_inscit(path: Path) -> Pool:
    """INSCIT's dialogues: every agent turn, the first of a dialogue standalone, later ones follow-ups."""
    pool = Pool("INSCIT")
    pool.sources.append(path.name)
    dialogues = json.loads(path.read_text(encoding="utf-8"))
    for name, dialogue in dialogues.items():
        for n, turn in enumerate(dialogue["turns"]):
            context = [" ".join(c.split()) for c in turn["context"]]
            prev = [tuple(_inscit_passage(pool, e) for e in ev) for ev in turn["prevEvidence"]]
            refs = [_inscit_passage(pool, e) for label in turn["labels"] for e in label["evidence"]]
            history = tuple(
                Step(context[2 * i], context[2 * i + 1], prev[i] if i < len(prev) else ())
                for i in range(len(context) // 2)
            )
            pool.cases.append(
                Case("INSCIT", f"{name}:{n + 1}", context[-1], history, tuple(dict.fromkeys(refs)), n > 0)
            )
            pool.add_answers("INSCIT", [label["response"] for label in turn["labels"]])
    return pool
