"""The web search pipeline against the search stand-in and the scripted model server."""

import json
from datetime import UTC, date, datetime

import aiohttp
import pytest

from knowledge.model.client import ModelClient
from knowledge.websearch.providers import DuckDuckGoLite
from knowledge.websearch.search import summary_lines, web_search
from knowledge.websearch.store import CandidateStore
from tests.fake_llm import FakeLLM, Step, answer, start
from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search

TODAY = date(2026, 11, 29)
PLAN = json.dumps(
    {
        "needsSearch": True,
        "queries": [{"query": "python 3.13 release notes", "freshness": "month", "language": "en"}],
    }
)
RESULTS = [
    Result(
        "What's New In Python 3.13",
        "https://docs.python.org/3/whatsnew/3.13.html",
        "Python 3.13 release notes",
    ),
    Result(
        "Python 3.13 release notes explained", "https://realpython.com/python313/", "A tour of Python 3.13"
    ),
    Result("Sign in to your account", "https://accounts.example.com/login", "python 3.13 login"),
    Result("Python 3.9 release notes", "https://blog.example/py39", "what's new in Python 3.9"),
    Result("More Python 3.13 release notes", "https://docs.python.org/3/library/", "python 3.13 library"),
]


@pytest.fixture
async def services():
    search, llm = FakeSearch(), FakeLLM()
    search_runner, _ = await start_fake_search(search)
    llm_runner = await start(llm)
    async with aiohttp.ClientSession() as session:
        yield search, llm, session
    await llm_runner.cleanup()
    await search_runner.cleanup()


def run(search, llm, session, tmp_path, question="What's new in Python 3.13?", **kw):
    store = CandidateStore(tmp_path / "web-search.json", clock=lambda: datetime(2026, 11, 29, tzinfo=UTC))
    return web_search(
        question,
        chat_id="cli",
        today=TODAY,
        providers=[DuckDuckGoLite(session, base_url=search.ddg_url)],
        store=store,
        llm=ModelClient(session, llm.base_url, timeout_s=5),
        **kw,
    )


async def test_plan_search_filter_check_store_and_summarise(services, tmp_path):
    search, llm, session = services
    search.script["ddg"] = [ddg_results("python 3.13 release notes", RESULTS)]
    llm.script = [
        answer(PLAN),
        answer("1: YES\n2: YES\n3: YES"),
        answer(
            "[1] Python 3.13 adds a new REPL.\nNo number here, dropped.\n[2] Free-threading http://evil.example/"
        ),
    ]
    result = await run(search, llm, session, tmp_path)
    assert result.plan.planner == "model" and search.seen[0].form["df"] == "m"
    assert [c.id for c in result.record.candidates] == ["web-1", "web-2"]
    assert [c.url for c in result.record.candidates] == [
        "https://docs.python.org/3/whatsnew/3.13.html", "https://realpython.com/python313/"
    ]  # fmt: skip
    reasons = {d.hit.url: d.reason for d in result.dropped}
    assert reasons["https://accounts.example.com/login"] == "login or account page"
    assert reasons["https://blog.example/py39"].startswith("names another version")
    assert reasons["https://docs.python.org/3/library/"].startswith("another result from the same site")
    assert result.summary == [
        "Python 3.13 adds a new REPL. [web-1] [source: https://docs.python.org/3/whatsnew/3.13.html]",
        "Free-threading [web-2] [source: https://realpython.com/python313/]",
    ]
    check_prompt = llm.requests[1]["messages"][1]["content"]
    assert "https://" not in check_prompt  # the check sees titles and snippets, never URLs
    assert len(llm.requests) == 3  # plan, check, summary: at most three model calls


async def test_a_bad_plan_falls_back_to_the_heuristic_planner(services, tmp_path):
    search, llm, session = services
    llm.script = [answer("Sure! I'd search for python."), answer("1: YES\n2: YES\n3: YES"), answer("")]
    result = await run(search, llm, session, tmp_path, question="Please search what's new in Python 3.13")
    assert result.plan.planner == "heuristic" and "PlanError" in result.plan.fallback_reason
    assert search.seen[0].form["q"] == "what's new in Python 3.13"


async def test_a_check_reply_in_the_wrong_format_rejects_everything(services, tmp_path):
    search, llm, session = services
    search.script["ddg"] = [ddg_results("python 3.13 release notes", RESULTS)]
    llm.script = [answer(PLAN), answer("Both look relevant to me!")]
    result = await run(search, llm, session, tmp_path)
    assert result.record.candidates == []
    assert any("No result passed the relevance check" in n for n in result.notes)


async def test_a_dead_model_still_searches_but_fails_closed(services, tmp_path):
    search, llm, session = services
    llm.script = [Step(status=500)]
    result = await run(search, llm, session, tmp_path, question="latest python release")
    assert result.plan.planner == "heuristic" and result.record.candidates == []


async def test_no_search_for_greetings_unless_forced(services, tmp_path):
    search, llm, session = services
    llm.script = [answer('{"needsSearch": false, "queries": []}')]
    assert (await run(search, llm, session, tmp_path, question="hello!")).record is None
    assert search.seen == []


def test_summary_lines_need_a_valid_candidate_number():
    cands = [("web-1", "https://a.example/"), ("web-2", "https://b.example/")]
    text = "[1] one\n[3] invented\nplain line\n- [web-2] two https://x.example/\n[2]"
    assert summary_lines(text, cands) == [
        "one [web-1] [source: https://a.example/]", "two [web-2] [source: https://b.example/]"
    ]  # fmt: skip
