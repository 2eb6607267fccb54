"""Web search providers asked over HTTP: DuckDuckGo Lite and Brave, one after the other and together.

They talk to tests/fake_search.py on 127.0.0.1 only.
"""


# ruff: noqa: E501 (result rows are kept verbatim from the real pages, long lines and all)

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from knowledge.errors import SearchError
from knowledge.websearch.providers import (
    BraveSearch,
    DuckDuckGoLite,
    SearchRateLimited,
    search_all,
)
from tests.fake_llm import free_port
from tests.fake_search import (
    WEATHER,
    WEATHER_URLS,
    FakeSearch,
    Reply,
    Result,
    brave_error,
    brave_results,
    challenge,
    ddg_no_results_page,
    ddg_results,
    start_fake_search,
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSearch]:
    stand_in = FakeSearch()
    runner, _ = await start_fake_search(stand_in)
    yield stand_in
    await runner.cleanup()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(trust_env=False) as s:
        yield s


# --- DuckDuckGo Lite over HTTP -----------------------------------------------------------------


async def test_duckduckgo_is_asked_like_its_own_search_box(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.by_query["ddg", "weather san francisco"] = ddg_results("weather san francisco", WEATHER)
    ddg = DuckDuckGoLite(session, base_url=fake.ddg_url)
    hits = await ddg.search("weather san francisco", language="en", freshness="week")
    assert [h.url for h in hits] == WEATHER_URLS
    [seen] = fake.seen
    assert seen.method == "POST"
    assert seen.headers["Content-Type"].startswith("application/x-www-form-urlencoded")
    assert seen.form == {"q": "weather san francisco", "kl": "us-en", "df": "w"}
    assert seen.headers["Referer"] == f"{fake.base_url}/"
    assert seen.headers["User-Agent"].startswith("Mozilla/5.0")


async def test_a_long_query_reaches_duckduckgo_under_500_characters(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    long_query = "ประกาศ ผล สอบ " * 60
    await DuckDuckGoLite(session, base_url=fake.ddg_url).search(long_query, language="th", freshness=None)
    sent = fake.seen[0].form
    assert len(sent["q"]) <= 499 and (sent["kl"], sent["df"]) == ("th-th", "")


async def test_the_stand_in_serves_single_quoted_markup_over_http(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    async with session.post(fake.ddg_url, data={"q": "weather"}) as resp:
        page = await resp.text()
    assert "class='result-link'" in page and "class='result-snippet'" in page and '"result-sponsored"' in page


@pytest.mark.parametrize("reply", [challenge(202), challenge(200), Reply("Too Many Requests", status=429)])
async def test_the_bot_check_is_a_rate_limit_not_an_empty_answer(
    fake: FakeSearch, session: aiohttp.ClientSession, reply: Reply
) -> None:
    fake.script["ddg"] = [reply]
    with pytest.raises(SearchRateLimited, match="DuckDuckGo is rate-limiting this machine") as caught:
        await DuckDuckGoLite(session, base_url=fake.ddg_url).search("weather", language="en", freshness=None)
    assert caught.value.provider == "duckduckgo"
    assert caught.value.retry_after_s is None
    assert "try again in a few minutes" in str(caught.value)


async def test_a_duckduckgo_server_error_is_a_search_error(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [Reply("oops", status=500)]
    with pytest.raises(SearchError, match="DuckDuckGo answered HTTP 500") as caught:
        await DuckDuckGoLite(session, base_url=fake.ddg_url).search("weather", language=None, freshness=None)
    assert not isinstance(caught.value, SearchRateLimited)


async def test_a_no_results_answer_is_an_empty_list(fake: FakeSearch, session: aiohttp.ClientSession) -> None:
    fake.script["ddg"] = [Reply(ddg_no_results_page("qzxv7kplmwq9"))]
    ddg = DuckDuckGoLite(session, base_url=fake.ddg_url)
    assert await ddg.search("qzxv7kplmwq9", language=None, freshness=None) == []


async def test_a_dead_port_is_a_search_error_within_the_timeout(session: aiohttp.ClientSession) -> None:
    url = f"http://127.0.0.1:{free_port()}/lite/"
    with pytest.raises(SearchError, match="DuckDuckGo did not answer: .*check the network") as caught:
        await DuckDuckGoLite(session, base_url=url, timeout_s=2).search("x", language=None, freshness=None)
    assert "no answer within" not in str(caught.value)  # refused at once, not waited out
    with pytest.raises(SearchError, match="Brave Search did not answer"):
        await BraveSearch(session, "k", base_url=url, timeout_s=2).search("x", language=None, freshness=None)


async def test_a_server_that_never_answers_is_a_search_error_after_the_timeout(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [ddg_results("slow", WEATHER, delay_s=1.5)]
    with pytest.raises(SearchError, match=r"DuckDuckGo did not answer: no answer within 0.3 s"):
        await DuckDuckGoLite(session, base_url=fake.ddg_url, timeout_s=0.3).search(
            "slow", language=None, freshness=None
        )
    assert len(fake.seen) == 1  # given up, not asked again


# --- Brave over HTTP ---------------------------------------------------------------------------


async def test_brave_is_asked_with_the_key_and_parameters(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.by_query["brave", "曼谷 下雨"] = brave_results("曼谷 下雨", WEATHER[:2])
    brave = BraveSearch(session, fake.brave_key, base_url=fake.brave_url)
    hits = await brave.search("曼谷 下雨", language="zh-TW", freshness="day")
    assert [h.url for h in hits] == WEATHER_URLS[:2]
    assert hits[0].snippet.startswith(
        "Be prepared with the most accurate 10-day forecast for Downtown, San Francisco"
    )
    [seen] = fake.seen
    assert seen.method == "GET"
    assert seen.headers["X-Subscription-Token"] == fake.brave_key
    assert seen.headers["Accept"] == "application/json"
    assert seen.params == {"q": "曼谷 下雨", "count": "20", "freshness": "pd", "search_lang": "zh-hant"}


@pytest.mark.parametrize("status", [401, 403])
async def test_a_rejected_brave_key_says_which_setting_to_fix(
    fake: FakeSearch, session: aiohttp.ClientSession, status: int
) -> None:
    if status == 403:
        fake.script["brave"] = [brave_error(403, "SUBSCRIPTION_NOT_FOUND", "No plan includes this endpoint.")]
        key = fake.brave_key
    else:
        key = "wrong-key"  # the stand-in answers 401 like Brave does
    with pytest.raises(SearchError, match="KB_BRAVE_API_KEY") as caught:
        await BraveSearch(session, key, base_url=fake.brave_url).search("x", language=None, freshness=None)
    assert f"HTTP {status}" in str(caught.value) and not isinstance(caught.value, SearchRateLimited)


async def test_brave_429_is_a_rate_limit_with_its_retry_after(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["brave"] = [
        brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", **{"Retry-After": "30"})
    ]
    with pytest.raises(SearchRateLimited, match="try again in 30 seconds") as caught:
        await BraveSearch(session, fake.brave_key, base_url=fake.brave_url).search(
            "x", language=None, freshness=None
        )
    assert (caught.value.provider, caught.value.retry_after_s) == ("brave", 30.0)


async def test_a_brave_answer_that_is_not_json_is_a_search_error(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["brave"] = [Reply("<html>maintenance</html>")]
    with pytest.raises(SearchError, match="not JSON"):
        await BraveSearch(session, fake.brave_key, base_url=fake.brave_url).search(
            "x", language=None, freshness=None
        )


# --- several queries, several providers --------------------------------------------------------


def both(fake: FakeSearch, session: aiohttp.ClientSession) -> list:
    return [
        DuckDuckGoLite(session, base_url=fake.ddg_url),
        BraveSearch(session, fake.brave_key, base_url=fake.brave_url),
    ]


async def test_when_duckduckgo_is_rate_limited_brave_answers_and_a_note_says_so(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [challenge(202)]
    hits, notes = await search_all(both(fake, session), [("python 3.13 release notes", "en", "month")])
    assert [h.provider for h in hits] == ["brave"] * 3
    assert notes == ["duckduckgo is rate-limited; used brave"]
    assert [s.endpoint for s in fake.seen] == ["ddg", "brave"]
    assert fake.seen[1].params["freshness"] == "pm"


async def test_when_duckduckgo_fails_brave_answers_and_the_note_says_why(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [Reply("bad gateway", status=502)]
    hits, notes = await search_all(both(fake, session), [("bangkok rain", "th", None)])
    assert hits and {h.provider for h in hits} == {"brave"}
    assert len(notes) == 1 and notes[0].startswith("duckduckgo failed (DuckDuckGo answered HTTP 502")
    assert notes[0].endswith("; used brave")


async def test_when_every_provider_is_rate_limited_the_user_hears_when_to_retry(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [challenge(202)]
    fake.script["brave"] = [brave_error(429, "RATE_LIMITED", "Too many requests.", **{"Retry-After": "30"})]
    with pytest.raises(SearchRateLimited) as caught:
        await search_all(both(fake, session), [("a", "en", None), ("b", "th", None)])
    message = str(caught.value)
    assert "DuckDuckGo" in message and "Brave Search" in message
    assert message.endswith("rate-limiting this machine; try again in 30 seconds")
    assert caught.value.retry_after_s == 30.0


async def test_with_duckduckgo_alone_rate_limited_the_message_says_a_few_minutes(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [challenge(200)]
    with pytest.raises(SearchRateLimited) as caught:
        await search_all(
            [DuckDuckGoLite(session, base_url=fake.ddg_url)], [("a", None, None), ("b", None, None)]
        )
    assert str(caught.value) == "DuckDuckGo is rate-limiting this machine; try again in a few minutes"


async def test_two_queries_run_at_once_and_their_results_take_turns(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    q1 = [Result(f"one {n}", f"https://one.example/{n}", "s") for n in (1, 2, 3)]
    q2 = [Result("two 1", "https://two.example/1", "s"), Result("same page", "https://one.example/2", "s")]
    fake.by_query["ddg", "first query"] = ddg_results("first query", q1, delay_s=0.4)
    fake.by_query["ddg", "second query"] = ddg_results("second query", q2, delay_s=0.4)
    hits, notes = await search_all(
        [DuckDuckGoLite(session, base_url=fake.ddg_url)],
        [("first query", "en", None), ("second query", "zh-TW", "week")],
    )
    assert [kind for kind, _ in fake.events[:2]] == ["arrived", "arrived"]  # both in before either answered
    assert [h.url for h in hits] == [
        "https://one.example/1",
        "https://two.example/1",
        "https://one.example/2",
        "https://one.example/3",
    ]
    assert [h.query for h in hits] == ["first query", "second query", "first query", "first query"]
    assert notes == []
    assert {s.form["kl"] for s in fake.seen} == {"us-en", "tw-tzh"}


async def test_one_query_rate_limited_everywhere_still_gives_the_other_ones_results(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.by_query["ddg", "blocked"] = challenge(202)
    hits, notes = await search_all(
        [DuckDuckGoLite(session, base_url=fake.ddg_url)], [("blocked", None, None), ("fine", None, None)]
    )
    assert hits and {h.query for h in hits} == {"fine"}
    assert notes == [
        "the search for 'blocked' failed: DuckDuckGo is rate-limiting this machine; try again in a few minutes"
    ]


async def test_a_rejected_brave_key_alone_is_a_search_error_not_a_rate_limit(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(SearchError, match="KB_BRAVE_API_KEY") as caught:
        await search_all([BraveSearch(session, "wrong", base_url=fake.brave_url)], [("x", None, None)])
    assert not isinstance(caught.value, SearchRateLimited)


async def test_search_all_without_providers_says_what_to_configure() -> None:
    with pytest.raises(SearchError, match="KB_BRAVE_API_KEY"):
        await search_all([], [("x", None, None)])


async def test_a_cancelled_search_cancels_its_requests(
    fake: FakeSearch, session: aiohttp.ClientSession
) -> None:
    fake.script["ddg"] = [ddg_results("slow", WEATHER, delay_s=5)]
    task = asyncio.create_task(
        search_all([DuckDuckGoLite(session, base_url=fake.ddg_url)], [("slow", None, None)])
    )
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
