"""Web search pipeline overhead, outside the model and the network, and model calls per question.

1. For a DuckDuckGo Lite page of 30 results: parsing, the rule filters, parsing the model's
   check, one-per-site, summary lines and storing the candidates, timed together (median of
   200 runs; target under 50 ms).
2. A full web question against local stand-ins (search engine and model on 127.0.0.1): the
   number of model calls (target at most 3: plan, check, summary).

    python bench/websearch.py
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge.logs import configure_logging  # noqa: E402
from knowledge.model.client import ModelClient  # noqa: E402
from knowledge.websearch import filters  # noqa: E402
from knowledge.websearch.providers import DuckDuckGoLite, parse_ddg_lite  # noqa: E402
from knowledge.websearch.search import summary_lines, web_search  # noqa: E402
from knowledge.websearch.store import CandidateStore  # noqa: E402
from tests.fake_llm import FakeLLM, answer, start  # noqa: E402
from tests.fake_search import FakeSearch, Result, ddg_page, ddg_results, start_fake_search  # noqa: E402

QUESTION = "What's new in Python 3.13 this year?"
QUERY = "python 3.13 release notes"


def thirty_results() -> list[Result]:
    sites = ["docs.python.org", "realpython.com", "lwn.net", "news.example", "blog.example", "dev.to"]
    return [
        Result(
            f"Python 3.13 release notes part {n}" if n % 4 else f"Sign in to read part {n}",
            f"https://{sites[n % len(sites)]}/{'login' if n % 4 == 0 else 'python-3-13'}/{n}",
            f"What's new in Python 3.13: the new REPL, free-threading and more, item {n}.",
            f"{sites[n % len(sites)]}/python-3-13/{n}",
        )
        for n in range(30)
    ]


def overhead_ms(runs: int = 200) -> list[float]:
    page = ddg_page(QUERY, thirty_results())
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        store = CandidateStore(Path(tmp) / "web-search.json", clock=lambda: datetime.now(UTC))
        for _ in range(runs):
            t0 = time.perf_counter()
            hits = parse_ddg_lite(page, query=QUERY)
            kept, _ = filters.rule_filter(QUESTION, QUERY, hits)
            verdicts = filters.parse_check("\n".join(f"{n}: YES" for n in range(1, len(kept) + 1)), len(kept))
            chosen, _ = filters.one_per_site([h for h, ok in zip(kept, verdicts, strict=True) if ok])
            record = store.save("bench", QUESTION, [QUERY], [(h.title, h.url, h.snippet) for h in chosen])
            summary_lines(
                "\n".join(f"[{n}] line {n}" for n in range(1, 6)), [(c.id, c.url) for c in record.candidates]
            )
            times.append((time.perf_counter() - t0) * 1000)
        assert len(hits) == 30, len(hits)
    return times


async def model_calls() -> tuple[int, int]:
    search, llm = FakeSearch(), FakeLLM()
    search.script["ddg"] = [ddg_results(QUERY, thirty_results())]
    plan = {"needsSearch": True, "queries": [{"query": QUERY, "freshness": "year", "language": "en"}]}

    def reply(body: dict) -> object:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if "plan web searches" in system:
            return answer(json.dumps(plan))
        if "'n: YES'" in system:  # the check: one YES per numbered result it was shown
            items = sum(1 for line in user.splitlines() if line[:1].isdigit())
            return answer("\n".join(f"{n}: YES" for n in range(1, items + 1)))
        return answer("[1] The new REPL.\n[2] Free-threading.")

    llm.responder = reply
    search_runner, _ = await start_fake_search(search)
    llm_runner = await start(llm)
    try:
        async with aiohttp.ClientSession() as session:
            with tempfile.TemporaryDirectory() as tmp:
                found = await web_search(
                    QUESTION,
                    chat_id="bench",
                    today=date(2026, 11, 29),
                    providers=[DuckDuckGoLite(session, base_url=search.ddg_url)],
                    store=CandidateStore(Path(tmp) / "w.json", clock=lambda: datetime.now(UTC)),
                    llm=ModelClient(session, llm.base_url),
                )
    finally:
        await llm_runner.cleanup()
        await search_runner.cleanup()
    return len(llm.requests), len(found.record.candidates if found.record else [])


def main() -> int:
    configure_logging(None, console=io.StringIO())
    times = overhead_ms()
    print(
        f"pipeline overhead for 30 results (parse, filters, check parsing, one per site, summary, store): "
        f"median {statistics.median(times):.2f} ms, p95 {sorted(times)[int(0.95 * len(times))]:.2f} ms (target < 50 ms)"
    )
    calls, candidates = asyncio.run(model_calls())
    print(f"model calls for one web question: {calls} (target <= 3); candidates offered: {candidates}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
