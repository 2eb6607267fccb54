"""Chinese and Thai follow-ups without a subject over household notes: what kb finds for them, and how
often the cheap decision (knowledge.conversation.followup.stands_alone) gets them right.

The notes and conversations are bench/followup_households_data.py (two sets: ``tune``, on which the
per-language cues were chosen, and ``check``, read after). Every note of both sets and languages
goes into one index through kb's pipeline (the real Qwen3 tokenizer, words only: no vectors), as
bench/conversation.py does it. Each later message of a conversation is searched (k=3) as:

  written                     the message as written
  kb, no model                followup.plan(message, turns, None), then search.find(standalone, also)
  kb, human rewrite           the same with the human rewrite, used only when stands_alone() says no
                              (as knowledge.conversation.session asks the model)
  human rewrite alone         the human rewrite searched as written

and reports hit@1 and hit@3 on follow-ups; how many follow-ups stands_alone() lets through (their
own words are judged: the relevance verdict sees them alone and the web step may follow); how
many questions of their own and greetings it sends to the model (calls spent for nothing).
Targets (issue 38): no model hit@3 >= .80 and hit@1 >= written's; with rewrites hit@1 and
hit@3 >= .95 x the human rewrites alone; at most 1 in 20 follow-ups judged on their own words.

    python bench/followup_households.py [--sets tune,check]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.followup_households_data import CONVERSATIONS, CONVERSATIONS_TH, NOTES, NOTES_TH  # noqa: E402
from bench.retrieval import CHUNKING, build, setup  # noqa: E402
from knowledge.config import load_settings  # noqa: E402
from knowledge.conversation import followup  # noqa: E402
from knowledge.conversation.store import Turn  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.retrieval.search import find  # noqa: E402
from knowledge.store.index import Index  # noqa: E402

K = 3
METHODS = ("written", "kb, no model", "kb, human rewrite", "human rewrite alone")


def open_index(home: Path, env: dict[str, str], counter) -> tuple[Index, dict[str, str], dict[str, tuple]]:
    """Every note in one index: the index, the document id and the chunk ids of each note."""
    settings = load_settings(env, home=home)
    notes = {}
    for language, sets in (("zh", NOTES), ("th", NOTES_TH)):
        for name, rows in sets.items():
            for key, title, body in rows:
                notes[(language, f"{name}-{key}")] = f"# {title}\n\n{body}\n"
    doc_ids = build(home, notes, settings, counter)
    index = Index(settings.index_path)
    chunks = {}
    for (language, key), doc_id in doc_ids.items():
        first, last = index.document_rowid_range(doc_id) or (0, -1)
        rows = index.chunks_by_rowid(range(first, last + 1))
        chunks[f"{language}:{key}"] = tuple(chunk.id for chunk, _ in rows.values())
    return index, {f"{lang}:{key}": d for (lang, key), d in doc_ids.items()}, chunks


def run(index: Index, docs: dict[str, str], chunks: dict[str, tuple], language: str, name: str) -> None:
    """Search every later message of one set's conversations and print the table."""
    conversations = (CONVERSATIONS if language == "zh" else CONVERSATIONS_TH)[name]
    bodies = {k: (t, b) for k, t, b in (NOTES if language == "zh" else NOTES_TH)[name]}
    hits = {m: [0, 0] for m in METHODS}
    follows = judged_alone = 0
    asked_for_nothing: list[str] = []
    others = 0
    missed: list[str] = []

    def top(query: str, also=None) -> list[str]:
        return [r.document_id for r in find(index, query, k=K, also=also).results]

    for first, note, later in conversations:
        title, body = bodies[note]
        turns = [Turn(1, first, first, body, chunks[f"{language}:{name}-{note}"], 1.0, (title,))]
        for text, answer_note, rewrite, kind in later:
            alone = followup.stands_alone(text, turns)
            if kind == "follow":
                follows += 1
                judged_alone += alone
                if alone:
                    missed.append(text)
                want = docs[f"{language}:{name}-{answer_note}"]
                no_model = followup.plan(text, turns, None)
                gated = followup.plan(text, turns, None if alone else rewrite)
                found = {
                    "written": top(text),
                    "kb, no model": top(no_model.standalone, no_model.also),
                    "kb, human rewrite": top(gated.standalone, gated.also),
                    "human rewrite alone": top(rewrite),
                }
                for method, ids in found.items():
                    hits[method][0] += ids[:1] == [want]
                    hits[method][1] += want in ids
            else:
                others += 1
                if not alone:
                    asked_for_nothing.append(text)
            if answer_note is not None:
                t, b = bodies[answer_note]
                cited = chunks[f"{language}:{name}-{answer_note}"]
                turns.append(
                    Turn(len(turns) + 1, text, rewrite or text, b, cited, float(len(turns) + 1), (t,))
                )
            else:
                turns.append(Turn(len(turns) + 1, text, text, "", (), float(len(turns) + 1)))
    print(f"\n{language} {name}: {follows} follow-ups, {others} questions of their own and greetings")
    print(f"  {'method':24} hit@1  hit@3")
    for method in METHODS:
        h1, h3 = hits[method]
        print(f"  {method:24} {h1 / follows:.3f}  {h3 / follows:.3f}")
    print(f"  follow-ups judged on their own words (model skipped): {judged_alone}/{follows}"
          + (f"  {missed}" if missed else ""))  # fmt: skip
    print(f"  questions of their own and greetings sent to the model: {len(asked_for_nothing)}/{others}"
          + (f"  {asked_for_nothing}" if asked_for_nothing else ""))  # fmt: skip
    no_model, gated, alone = hits["kb, no model"], hits["kb, human rewrite"], hits["human rewrite alone"]
    print("  targets:"
          f" no model hit@3 {no_model[1] / follows:.3f} >= .80: {'met' if no_model[1] >= .8 * follows else 'NOT met'};"
          f" hit@1 {no_model[0]} >= written {hits['written'][0]}: {'met' if no_model[0] >= hits['written'][0] else 'NOT met'};"
          f" rewrite hit@1/@3 >= .95 x alone: {'met' if _ratio(gated, alone) else 'NOT met'};"
          f" judged alone <= 1/20: {'met' if judged_alone * 20 <= follows else 'NOT met'}")  # fmt: skip


def _ratio(got: Sequence[int], reference: Sequence[int]) -> bool:
    return all(g >= 0.95 * r for g, r in zip(got, reference, strict=True))


def main() -> None:
    """Build the index of every note and print each set's table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="tune,check", help="tune, check or both (default)")
    parser.add_argument("--tokenizer", default="", help="a tokenizer spec (default: the Qwen3 reference)")
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    env, counter, why, *_ = setup(args.tokenizer, "off", CHUNKING, ROOT / "runs" / "bench" / "unused.npz")
    if why:
        print(f"tokenizer: {why}")
    with tempfile.TemporaryDirectory(prefix="kb-followup-bench-") as tmp:
        index, docs, chunks = open_index(Path(tmp), env, counter)
        for name in args.sets.split(","):
            for language in ("zh", "th"):
                run(index, docs, chunks, language, name)
        index.close()


if __name__ == "__main__":
    main()
