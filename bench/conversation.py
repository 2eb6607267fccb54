"""Conversational retrieval benchmark: follow-up questions searched with and without a rewrite, no model.

Each set is a closed pool of passages (the reference passages of its own conversations, see
bench/conversation_data.py): one passage = one Markdown document, ingested through kb's pipeline
as bench/retrieval.py does it (the real Qwen3 tokenizer, kb's own 160/48-token chunks by default), embedded
by the local embedder (vectors cached by text in ``--cache``, default
runs/bench/conversation-vectors.npz). Every turn with reference passages is searched (k=5) as:

  written                     the message as written
  written+previous            the previous user message and the message, joined
  history                     every earlier user message and agent answer, then the message
  kb, no model                knowledge.conversation.followup.plan(message, turns, rewrite=None), then
                              knowledge.retrieval.search.find(standalone, also=Also(written, carried))
  kb, reference rewrite       the same with the set's human rewrite as the model's answer, after
                              followup.check(); asked only when followup.stands_alone() says no, as
                              knowledge.conversation.session does it
  kb, ref. rewrite, always    the same, the rewrite used on every later turn (whatever stands_alone says)
  reference rewrite alone     the human rewrite searched as written (the upper bound)

A turn's earlier turns are knowledge.conversation.store.Turn values: the user's message, the agent's
answer from the set, and as ``cited`` the chunk ids of the passages that answer relied on (where the
set gives them: MTRAG's subset and INSCIT; MTRAG-UN carries nothing).

recall@5: the share of a turn's reference passages with a chunk among the 5 results, averaged over
turns; hit@5: at least one. Reported on follow-up and standalone turns apart, by the set's labels
(MTRAG: "Multi-Turn" Follow-up or Clarification = follow-up, N/A or a first turn = standalone;
INSCIT has none: its first turns are standalone, later turns follow-ups). Also: how often
followup.stands_alone() would skip the model on a follow-up or ask it on a standalone turn, the time
stands_alone + plan take per message, the targets (on follow-ups: kb without a model >= written +
.05, kb with reference rewrites >= .95 x the rewrites alone; on standalone turns every kb method
within .01 of written), a sweep of knowledge.retrieval.search.WRITTEN_WEIGHT and JOINED_WEIGHT, and
what carrying the previous answer's passages changes. Tune on MTRAG, check on INSCIT: both are
printed, with nothing changed between them.

``--llm-url URL`` asks an OpenAI-compatible model for the rewrites (followup.Rewriter through
knowledge.model.client.ModelClient, as knowledge/wiring.py builds the translator) and reports their
recall, prompt/output tokens and time. ``--answer-lengths`` prints only the agent answers' lengths
in Qwen3 tokens per set (no index; the full run prints them too).

The data is not part of kb (never commit it). Bring the repositories here and export the files,
keeping their paths, under the folders the options point to (defaults under runs/bench-data/):

    --mtrag DIR   github.com/IBM/mt-rag-benchmark (Apache-2.0):
                    mtrag-human/evaluations/reference_subset_with_human_evaluations.json
                    mtrag-human/retrieval_tasks/{clapnq,cloud,fiqa,govt}/*_rewrite.jsonl
                    mtragun-human/generation_tasks/reference.jsonl
    --inscit FILE github.com/ellenmellon/INSCIT: data/dev.json

    e.g. git --git-dir=MIRROR show HEAD:data/dev.json > runs/bench-data/INSCIT/data/dev.json

    python bench/conversation.py [--sets mtrag,inscit] [--un-conversations N] [--weights 0.5,0.7,0.85]
                                 [--joined-weights 0.3,0.5,0.7] [--embed local|off] [--llm-url URL]
                                 [--answer-lengths]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.conversation_data import Case, Pool, load_inscit, load_mtrag  # noqa: E402
from bench.conversation_pool import (  # noqa: E402
    KB,
    KB_LLM,
    KB_METHODS,
    KB_REF,
    KB_REF_ALWAYS,
    LLM_ALONE,
    METHODS,
    PARTS,
    REF,
    STARTED,
    WRITTEN,
    Built,
    kb_plan,
    method_tops,
    open_pool,
    say,
    score,
    searched,
)
from bench.retrieval import CHUNKING, setup  # noqa: E402
from knowledge.conversation import followup  # noqa: E402
from knowledge.conversation.grounding import grounded  # noqa: E402
from knowledge.conversation.store import Turn  # noqa: E402
from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.tokenizer import HfCounter, reference_tokenizer  # noqa: E402
from knowledge.retrieval import search  # noqa: E402

DATA = ROOT / "runs" / "bench-data"  # git-ignored: the sets are not part of kb
DEFAULT_MTRAG = DATA / "mt-rag-benchmark"
DEFAULT_INSCIT = DATA / "INSCIT" / "data" / "dev.json"
DEFAULT_CACHE = ROOT / "runs" / "bench" / "conversation-vectors.npz"
# MTRAG-UN conversations sampled: with MTRAG's subset, about 2,500 chunks to embed on a first run
# (4.7 chunks/s on a busy 2-core machine: 9 minutes; INSCIT's 1,400 chunks 4); later runs read the
# vector cache.
DEFAULT_UN = 180
TIMING_REPEATS = 20
# --- tables -------------------------------------------------------------------------------------

Scores = dict[str, dict[bool, list[tuple[float, float]]]]  # method → is_follow_up → (recall, hit)


def measure(built: Built, cases: Sequence[Case], *, carry: bool = True, plain: bool = True) -> Scores:
    """Every method's scores over the cases, by turn kind."""
    out: Scores = {}
    for n, case in enumerate(cases, 1):
        for method, top in method_tops(built, case, carry=carry, plain=plain).items():
            out.setdefault(method, {True: [], False: []})[case.is_follow_up].append(score(built, case, top))
        if n % 100 == 0:
            say(f"    {n}/{len(cases)} turns")
    return out


def mean(xs: Sequence[tuple[float, float]], n: int) -> float | None:
    return sum(x[n] for x in xs) / len(xs) if xs else None


def fmt(x: float | None, width: int = 7) -> str:
    return f"{x:>{width}.3f}" if x is not None else f"{'-':>{width}}"


def print_table(part: str, scores: Scores, cases: Sequence[Case]) -> None:
    """recall@5 and hit@5 of each method on follow-up and standalone turns."""
    follow = sum(c.is_follow_up for c in cases)
    print(
        f"\n{PARTS[part]}: {len(cases)} turns measured ({follow} follow-up, {len(cases) - follow} standalone)"
    )
    print(
        f"  {'method':<28}{'follow-up r@5':>14}{'hit@5':>7}{'n':>5}"
        f"   {'standalone r@5':>14}{'hit@5':>7}{'n':>5}"
    )
    for method in (*METHODS, KB_LLM, LLM_ALONE):
        if method not in scores:
            continue
        f, s = scores[method][True], scores[method][False]
        print(
            f"  {method:<28}{fmt(mean(f, 0), 14)}{fmt(mean(f, 1))}{len(f):>5}"
            f"   {fmt(mean(s, 0), 14)}{fmt(mean(s, 1))}{len(s):>5}"
        )


def print_targets(part: str, scores: Scores) -> None:
    """The targets, on this part's turns."""

    def r(method: str, follow: bool) -> float | None:
        return mean(scores[method][follow], 0) if method in scores else None

    print("  targets:")
    kb, written = r(KB, True), r(WRITTEN, True)
    if kb is not None and written is not None:
        ok = "met" if kb >= written + 0.05 else "NOT met"
        print(
            f"    follow-up: kb, no model {kb:.3f} >= written {written:.3f} + .05"
            f" = {written + 0.05:.3f}: {ok}"
        )
    ref, alone = r(KB_REF, True), r(REF, True)
    if ref is not None and alone is not None:
        ok = "met" if ref >= 0.95 * alone else "NOT met"
        print(
            f"    follow-up: kb, reference rewrite {ref:.3f} >= .95 x rewrite alone {alone:.3f}"
            f" = {0.95 * alone:.3f}: {ok}"
        )
    else:
        print("    follow-up: kb, reference rewrite: n/a (no rewrites in this set)")
    written_s = r(WRITTEN, False)
    for method in KB_METHODS:
        value = r(method, False)
        if value is not None and written_s is not None:
            ok = "met" if value >= written_s - 0.01 else "NOT met"
            print(f"    standalone: {method} {value:.3f} >= written {written_s:.3f} - .01: {ok}")


def sweep(
    built: Built, cases: Sequence[Case], weights: Sequence[float], joined: Sequence[float]
) -> list[tuple[float, float, Scores]]:
    """kb's methods for each WRITTEN_WEIGHT and JOINED_WEIGHT (the module constants set for each)."""
    kept = search.WRITTEN_WEIGHT, search.JOINED_WEIGHT
    out = []
    try:
        for weight in weights:
            for share in joined:
                search.WRITTEN_WEIGHT, search.JOINED_WEIGHT = weight, share
                out.append((weight, share, measure(built, cases, plain=False)))
    finally:
        search.WRITTEN_WEIGHT, search.JOINED_WEIGHT = kept
    return out


def print_sweep(part: str, rows: list[tuple[float, float, Scores]], has_rewrites: bool) -> None:
    print(f"  sweep of search.WRITTEN_WEIGHT and JOINED_WEIGHT ({part}; recall@5 follow-up / standalone):")
    head = f"    {'written':>7} {'joined':>7}  {KB + ' fu/st':>22}"
    if has_rewrites:
        head += f"  {KB_REF + ' fu/st':>30}  {KB_REF_ALWAYS + ' fu/st':>34}"
    print(head)
    for weight, share, scores in rows:
        line = f"    {weight:>7.2f} {share:>7.2f}  "
        methods = KB_METHODS if has_rewrites else (KB,)
        widths = {KB: 22, KB_REF: 30, KB_REF_ALWAYS: 34}
        cells = []
        for m in methods:
            pair = f"{fmt(mean(scores[m][True], 0), 0)} / {fmt(mean(scores[m][False], 0), 0)}"
            cells.append(f"{pair:>{widths[m]}}")
        print(line + "  ".join(cells))


def print_carry(built: Built, cases: Sequence[Case]) -> None:
    """What carrying can bring and what it changes: follow-ups whose previous answer relied on passages,
    how many of them have one of those among their own references, and how often carrying them
    changes kb's top 5 (no model, the module's WRITTEN_WEIGHT)."""
    carrying = [c for c in cases if c.is_follow_up and c.history and c.history[-1].refs]
    if not carrying:
        print("  carrying: no follow-up here knows the passages its previous answer relied on")
        return
    shared = sum(bool(set(c.refs) & set(c.history[-1].refs)) for c in carrying)
    changed = 0
    for case in carrying:
        plan = kb_plan(case, built.turns(case), "none")
        changed += searched(built, plan, carry=True) != searched(built, plan, carry=False)
    print(
        f"  carrying: {len(carrying)} follow-ups carry the previous answer's passages; {shared} of them have"
        f" one among their references; carrying changes kb's top 5 (no model) on {changed}"
    )


def _ungrounded(case: Case, turns: Sequence[Turn]) -> bool:
    """A human rewrite that grounded() would drop: it names what the conversation does not."""
    return grounded(case.rewrite, case.message, turns, turns[-1].titles) is None


def print_gate(part: str, cases: Sequence[Case], built: Built) -> list[float]:
    """How often stands_alone() would skip or ask the model, per turn kind; the µs stands_alone + plan
    take per message (rewrite skipped) for each case."""
    follow = [c for c in cases if c.is_follow_up]
    later = [c for c in cases if not c.is_follow_up and c.history]
    first = [c for c in cases if not c.history]
    micros = []
    skipped = asked = 0
    for case in cases:
        turns = built.turns(case)
        alone = followup.stands_alone(case.message, turns)
        if case.is_follow_up:
            skipped += alone
        elif case.history:
            asked += not alone
        t0 = time.perf_counter_ns()
        for _ in range(TIMING_REPEATS):
            followup.stands_alone(case.message, turns)
            followup.plan(case.message, turns, None)
        micros.append((time.perf_counter_ns() - t0) / TIMING_REPEATS / 1000)
    print(f"  stands_alone() over all {len(cases)} turns (the model is asked when it says no):")
    if follow:
        print(
            f"    follow-ups said to stand alone (model skipped): {skipped}/{len(follow)}"
            f" = {skipped / len(follow):.3f}; model asked on {1 - skipped / len(follow):.3f} of follow-ups"
        )
    if later:
        print(
            f"    later standalone turns said not to (model asked): {asked}/{len(later)}"
            f" = {asked / len(later):.3f}"
        )
    print(f"    first turns: {len(first)} (always stand alone: no model)")
    drops = [
        c
        for c in cases
        if c.rewrite is not None and c.history and followup.check(c.rewrite, c.message) is None
    ]
    rewritten = [c for c in cases if c.rewrite is not None and c.history]
    ungrounded = [c for c in rewritten if c not in drops and _ungrounded(c, built.turns(c))]
    if rewritten:
        print(
            f"    reference rewrites of later turns dropped by grounded(): {len(ungrounded)}/{len(rewritten)}"
        )
        same = sum(c.rewrite == c.message for c in rewritten)
        print(
            f"    reference rewrites of later turns dropped by check(): {len(drops)}/{len(rewritten)};"
            f" identical to the message: {same}"
        )
        for c in drops[:3]:
            print(f"      dropped: {c.message!r} -> {c.rewrite!r}")
    return micros


def pct(xs: Sequence[float], p: float) -> float:
    """The p-quantile of xs by nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))]


def print_answer_lengths(pools: Sequence[Pool]) -> None:
    """The agent answers' lengths in Qwen3 tokens, per set."""
    counter = HfCounter(reference_tokenizer())
    print(f"\nagent answers in Qwen3 tokens ({counter.name}); distinct answer texts of each set:")
    print(
        f"  {'set':<10}{'answers':>8}{'median':>8}{'p90':>6}{'p95':>6}{'p99':>6}{'max':>6}"
        f"{'> 512':>14}{'> 768':>14}"
    )
    for pool in pools:
        for part, texts in pool.answers.items():
            n = counter.count_many(texts)
            over = [
                f"{sum(x > cap for x in n)} ({sum(x > cap for x in n) / len(n):.4f})" for cap in (512, 768)
            ]
            print(
                f"  {part:<10}{len(n):>8}{statistics.median(n):>8.0f}{pct(n, 0.9):>6}{pct(n, 0.95):>6}"
                f"{pct(n, 0.99):>6}{max(n):>6}{over[0]:>14}{over[1]:>14}"
            )


# --- a real model's rewrites --------------------------------------------------------------------

Calls = list[tuple[int | None, int | None, float]]  # prompt tokens, output tokens, ms


@dataclass
class Model:
    """A model server's rewriter, the event loop its session lives in, and its calls."""

    url: str
    loop: asyncio.AbstractEventLoop
    session: Any
    rewriter: followup.Rewriter
    calls: Calls

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.close()


def open_model(url: str, timeout_s: float) -> Model:
    """A Rewriter on the model at ``url``; exits at once, saying why, when the server does not answer."""
    import aiohttp

    from knowledge.model.client import ModelClient, ModelError

    loop = asyncio.new_event_loop()

    async def open_session() -> aiohttp.ClientSession:  # made inside the loop that uses it
        return aiohttp.ClientSession()

    session = loop.run_until_complete(open_session())
    llm = ModelClient(session, url, timeout_s=max(timeout_s, 30.0))
    calls: Calls = []

    async def chat(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int | None, int | None]:
        t0 = time.perf_counter()
        completion = await llm.chat(messages, max_tokens=max_tokens, temperature=0.0)
        calls.append(
            (completion.prompt_tokens, completion.completion_tokens, (time.perf_counter() - t0) * 1000)
        )
        return completion.text, completion.prompt_tokens, completion.completion_tokens

    probe = [{"role": "user", "content": "Reply with the word OK."}]
    try:  # the very call the rewriter makes, once: a server that does not answer stops the run now
        loop.run_until_complete(asyncio.wait_for(llm.chat(probe, max_tokens=4, temperature=0.0), 60.0))
    except (ModelError, TimeoutError, aiohttp.ClientError, OSError) as exc:
        loop.run_until_complete(session.close())
        loop.close()
        raise SystemExit(
            f"--llm-url {url}: the model server does not answer a chat completion"
            f" ({type(exc).__name__}: {exc}). Give the OpenAI-compatible base URL (ending in /v1)"
            " of a running server, or leave --llm-url out."
        ) from exc
    say(f"model server at {url} answers")
    return Model(url, loop, session, followup.Rewriter(chat, timeout_s=timeout_s), calls)


def model_scores(built: Built, cases: Sequence[Case], model: Model) -> tuple[Scores, dict[str, int]]:
    """kb with the model's rewrites (asked when stands_alone says no, as the session does), and the
    rewrites searched alone (the message as written where there is none)."""
    scores: Scores = {KB_LLM: {True: [], False: []}, LLM_ALONE: {True: [], False: []}}
    counts = {"asked": 0, "calls": 0, "rewrites": 0}
    calls_before = model.rewriter.calls
    for n, case in enumerate(cases, 1):
        turns = built.turns(case)
        rewrite = None
        if turns and not followup.stands_alone(case.message, turns):
            counts["asked"] += 1
            titles = list(dict.fromkeys(turns[-1].titles))
            rewrite = model.loop.run_until_complete(model.rewriter(case.message, turns, titles))
            counts["rewrites"] += rewrite is not None
        plan = followup.plan(case.message, turns, rewrite)
        scores[KB_LLM][case.is_follow_up].append(score(built, case, searched(built, plan, carry=True)))
        alone = built.top(rewrite or case.message)
        scores[LLM_ALONE][case.is_follow_up].append(score(built, case, alone))
        if n % 50 == 0:
            say(f"    model rewrites: {n}/{len(cases)} turns")
    counts["calls"] = model.rewriter.calls - calls_before
    return scores, counts


def print_model(counts: dict[str, int], calls: Calls) -> None:
    answered = len(calls)
    print(
        f"  the model ({counts['asked']} turns asked): {counts['calls']} calls, {answered} answered,"
        f" {counts['calls'] - answered} failed or timed out, {counts['asked'] - counts['calls']} skipped"
        f" while the rewriter paused, {answered - counts['rewrites']} replies dropped by check(),"
        f" {counts['rewrites']} rewrites used"
    )
    if calls:
        for label, n in (("prompt tokens", 0), ("output tokens", 1), ("ms", 2)):
            xs = [float(c[n] or 0) for c in calls]
            print(f"    {label:<14} median {statistics.median(xs):>7.0f}   p95 {pct(xs, 0.95):>7.0f}")


# --- the run ------------------------------------------------------------------------------------


def run_pool(pool: Pool, args: argparse.Namespace, model: Model | None, micros: list[float]) -> None:
    """Build the pool's index, measure every part of it and print its tables."""
    env, counter, why, _, embedder, _ = setup(args.tokenizer, args.embed, args.chunk, args.cache)
    weights = [float(w) for w in args.weights.split(",") if w.strip()]
    joined = [float(w) for w in args.joined_weights.split(",") if w.strip()]
    with tempfile.TemporaryDirectory(prefix="kb-conversation-") as tmp:
        built = open_pool(pool, Path(tmp) / pool.name, env, counter, embedder)
        if why:
            print(f"  ({why}; chunk sizes are approximate)")
        try:
            for part in dict.fromkeys(c.part for c in pool.cases):
                cases = [c for c in pool.cases if c.part == part]
                measured = [c for c in cases if c.refs]
                say(f"{part}: {len(measured)} turns with reference passages (of {len(cases)})")
                scores = measure(built, measured)
                calls_before = len(model.calls) if model else 0
                if model is not None:
                    say(f"{part}: asking the model for rewrites")
                    got, counts = model_scores(built, measured, model)
                    scores.update(got)
                print_table(part, scores, measured)
                print_targets(part, scores)
                if model is not None:
                    print_model(counts, model.calls[calls_before:])
                say(f"{part}: sweep of WRITTEN_WEIGHT {weights} × JOINED_WEIGHT {joined}")
                rows = sweep(built, measured, weights, joined)
                print_sweep(part, rows, any(c.rewrite is not None for c in measured))
                print_carry(built, measured)
                micros += print_gate(part, cases, built)
        finally:
            built.index.close()
            if embedder is not None:
                embedder.save()  # the queries' vectors too


def with_default(
    parser: argparse.ArgumentParser, flag: str, metavar: str, default: object, what: str, **options: Any
) -> None:
    """Add the option ``flag``, its help ending with its default (said once, here)."""
    parser.add_argument(flag, metavar=metavar, default=default, help=f"{what} (default {default})", **options)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    with_default(parser, "--mtrag", "DIR", DEFAULT_MTRAG, "IBM/mt-rag-benchmark files", type=Path)
    with_default(parser, "--inscit", "FILE", DEFAULT_INSCIT, "INSCIT's data/dev.json", type=Path)
    parser.add_argument(
        "--sets", metavar="LIST", default="mtrag,inscit", help="the sets to run: mtrag, inscit or both"
    )
    parser.add_argument(
        "--un-conversations",
        metavar="N",
        type=int,
        default=DEFAULT_UN,
        help=f"MTRAG-UN conversations sampled into MTRAG's pool (default {DEFAULT_UN}; 0 = all 377)",
    )
    with_default(parser, "--weights", "LIST", "0.5,0.7,0.85", "search.WRITTEN_WEIGHT values swept")
    with_default(parser, "--joined-weights", "LIST", "0.3,0.5,0.7", "search.JOINED_WEIGHT values swept")
    parser.add_argument(
        "--tokenizer", metavar="SPEC", default="", help="KB_TOKENIZER (default: the bundled Qwen3 tokenizer)"
    )
    parser.add_argument(
        "--embed", metavar="KIND", default="local", help="KB_EMBED (local, url or off: lexical only)"
    )
    with_default(parser, "--cache", "FILE", DEFAULT_CACHE, "vector cache file", type=Path)
    with_default(parser, "--chunk", "MAX/OVERLAP", CHUNKING, "chunk max/overlap tokens")
    parser.add_argument(
        "--llm-url",
        metavar="URL",
        default="",
        help="an OpenAI-compatible model server (e.g. http://127.0.0.1:8081/v1) to rewrite with",
    )
    parser.add_argument(
        "--llm-timeout",
        metavar="S",
        type=float,
        default=followup.DEFAULT_TIMEOUT_S,
        help=f"seconds the rewriter waits for the model (default kb's {followup.DEFAULT_TIMEOUT_S})",
    )
    parser.add_argument(
        "--answer-lengths", action="store_true", help="only print the agent answers' lengths in Qwen3 tokens"
    )
    args = parser.parse_args()
    configure_logging(None, console=io.StringIO())
    sets = [s.strip().lower() for s in args.sets.split(",") if s.strip()]
    if not sets or set(sets) - {"mtrag", "inscit"}:
        raise SystemExit(f"--sets: expected mtrag, inscit or both, got {args.sets!r}")
    need = {"mtrag": args.mtrag / "mtrag-human", "inscit": args.inscit}
    for name in sets:
        if not need[name].exists():
            raise SystemExit(f"{need[name]}: not found — fetch the data and export it there (see --help)")
    model = open_model(args.llm_url, args.llm_timeout) if args.llm_url and not args.answer_lengths else None

    pools = []
    if "mtrag" in sets:
        pools.append(load_mtrag(args.mtrag, un_conversations=args.un_conversations))
    if "inscit" in sets:
        pools.append(load_inscit(args.inscit))
    for pool in pools:
        print(
            f"{pool.name}: {len(pool.passages)} passages, {len(pool.cases)} turns;"
            f" from {', '.join(pool.sources)}"
        )
        for note in pool.notes:
            print(f"  {note}")
    if args.answer_lengths:
        print_answer_lengths(pools)
        return 0

    micros: list[float] = []
    try:
        for pool in pools:
            say(f"{pool.name}: building the index")
            run_pool(pool, args, model, micros)
    finally:
        if model is not None:
            model.close()
    print(
        f"\nstands_alone + plan per message, rewrite skipped, over all {len(micros)} turns:"
        f" median {statistics.median(micros):.0f} µs, p95 {pct(micros, 0.95):.0f} µs,"
        f" max {max(micros):.0f} µs"
        f" (target < 1000 µs: {'met' if statistics.median(micros) < 1000 else 'NOT met'})"
    )
    print_answer_lengths(pools)
    print(f"\nrun time {time.perf_counter() - STARTED:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
