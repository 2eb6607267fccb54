"""Web search providers: DuckDuckGo Lite and Brave, parsed from real-shaped answers and asked over HTTP.

The HTTP tests talk to tests/fake_search.py on 127.0.0.1 only.
"""

# ruff: noqa: E501 (result rows are kept verbatim from the real pages, long lines and all)

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from knowledge.errors import SearchError
from knowledge.websearch.providers import (
    BraveSearch,
    DuckDuckGoLite,
    SearchHit,
    SearchRateLimited,
    brave_headers,
    brave_params,
    ddg_form,
    ddg_headers,
    interleave,
    is_ddg_challenge,
    parse_brave,
    parse_ddg_lite,
    parse_retry_after,
    retry_hint,
    search_all,
    unwrap_ddg_href,
)
from tests.fake_llm import free_port
from tests.fake_search import (
    CHALLENGE_PAGE,
    DIRECT_AD_ROWS,
    SPONSORED_ROWS,
    FakeSearch,
    Reply,
    Result,
    brave_body,
    brave_error,
    brave_results,
    challenge,
    ddg_no_results_page,
    ddg_page,
    ddg_results,
    start_fake_search,
    wrapped_href,
)

# Two result blocks exactly as DuckDuckGo Lite served them (reference §1.2), in the results table.
REAL_ROWS = (Path(__file__).resolve().parent / "data" / "ddg_lite_rows.html").read_text(encoding="utf-8")

WEATHER = [
    Result(
        "10 Day Weather - Downtown, San Francisco, California",
        "https://weather.com/weather/tenday/l/San%20Francisco%20CA%20USCA0987:1:US",
        "Be prepared with the most accurate 10-day forecast for Downtown, <b>San</b> <b>Francisco</b>, California",
        "weather.com/weather/tenday/l/San Francisco CA USCA0987:1:US",
    ),
    Result(
        "San Francisco - Wikipedia",
        "https://en.wikipedia.org/wiki/San_Francisco",
        "<b>San Francisco</b> is a commercial, financial, and cultural center.",
        "en.wikipedia.org/wiki/San_Francisco",
        is_wrapped=False,
    ),
    Result(
        "DuckDuckGo weather",
        "https://duckduckgo.com/?q=weather&ia=weather",
        "Our own page.",
        "duckduckgo.com",
    ),
    Result(
        "7-Day Forecast 37.77N 122.41W - National Weather Service",
        "https://forecast.weather.gov/zipcity.php?inputstring=San+Francisco,CA",
        "Your local forecast office is <b>San</b> <b>Francisco</b> Bay Area/Monterey, CA ...",
        "forecast.weather.gov/zipcity.php?inputstring=San+Francisco,CA",
        timestamp="2026-01-20T09:43:00.0000000",
    ),
    Result("Wikipedia again", "https://en.wikipedia.org/wiki/San_Francisco", "A repeat.", "en.wikipedia.org"),
]
WEATHER_URLS = [
    "https://weather.com/weather/tenday/l/San%20Francisco%20CA%20USCA0987:1:US",
    "https://en.wikipedia.org/wiki/San_Francisco",
    "https://forecast.weather.gov/zipcity.php?inputstring=San+Francisco,CA",
]


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


def hit(url: str, query: str = "q") -> SearchHit:
    return SearchHit("t", url, "", "", None, "duckduckgo", query)


# --- DuckDuckGo Lite: parsing ------------------------------------------------------------------


def test_the_real_markup_parses_to_titles_urls_snippets_and_dates() -> None:
    hits = parse_ddg_lite(REAL_ROWS, query="weather san francisco")
    assert [(h.title, h.url) for h in hits] == [
        (
            "10 Day Weather - Downtown, San Francisco, California",
            "https://weather.com/weather/tenday/l/San%20Francisco%20CA%20USCA0987:1:US",
        ),
        (
            "7-Day Forecast 37.77N 122.41W - National Weather Service",
            "https://forecast.weather.gov/zipcity.php?inputstring=San+Francisco,CA",
        ),
    ]
    assert hits[0].snippet.startswith(
        "Be prepared with the most accurate 10-day forecast for Downtown, San Francisco,"
    )
    assert hits[0].display_url == "weather.com/weather/tenday/l/San Francisco CA USCA0987:1:US"
    assert hits[0].published is None
    assert hits[1].snippet == "Your local forecast office is San Francisco Bay Area/Monterey, CA ..."
    assert hits[1].published == "2026-01-20T09:43:00.0000000"
    assert {(h.provider, h.query) for h in hits} == {("duckduckgo", "weather san francisco")}


def test_the_stand_in_wraps_links_exactly_as_duckduckgo_does() -> None:
    assert (
        "uddg=https%3A%2F%2Fweather.com%2Fweather%2Ftenday%2Fl%2FSan%2520Francisco%2520CA%2520USCA0987%3A1%3AUS&amp;rut="
        in (wrapped_href(WEATHER_URLS[0]))
    )


def test_a_results_page_gives_results_in_order_without_ads_duckduckgo_links_or_repeats() -> None:
    page = ddg_page("weather san francisco", WEATHER, ads=SPONSORED_ROWS + DIRECT_AD_ROWS)
    hits = parse_ddg_lite(page, query="weather san francisco")
    assert [h.url for h in hits] == WEATHER_URLS
    assert [h.title for h in hits] == [WEATHER[0].title, WEATHER[1].title, WEATHER[3].title]
    assert hits[1].snippet == "San Francisco is a commercial, financial, and cultural center."
    assert hits[2].published == "2026-01-20T09:43:00.0000000"
    text = " ".join(f"{h.title} {h.snippet}" for h in hits)
    assert (
        "Sponsored" not in text
        and "Ad copy" not in text
        and "more info" not in text
        and "Our own" not in text
    )


def test_the_stand_in_writes_single_quotes_that_a_naive_regex_misses() -> None:
    page = ddg_page("weather san francisco", WEATHER)
    assert "class='result-link'" in page and "class='result-snippet'" in page and "class='link-text'" in page
    assert '<tr class="result-sponsored">' in page
    assert (
        re.findall(r'href="([^"]+)"\s+class="result-link"', page) == []
    )  # what a regex for the fake would do
    assert len(parse_ddg_lite(page, query="q")) == 3


def test_a_double_quoted_page_parses_the_same() -> None:
    single = parse_ddg_lite(ddg_page("weather", WEATHER), query="weather")
    double_page = ddg_page("weather", WEATHER, quote_char='"')
    assert "class='" not in double_page
    assert parse_ddg_lite(double_page, query="weather") == single


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        (
            wrapped_href("https://example.com/a?b=1&c=2").replace("&amp;", "&"),
            "https://example.com/a?b=1&c=2",
        ),
        (
            "//duckduckgo.com/l/?uddg=https%3A%2F%2Fx.example%2FSan%2520Jose&rut=ab",
            "https://x.example/San%20Jose",
        ),
        ("https://duckduckgo.com/l/?uddg=http%3A%2F%2Fold.example%2F&rut=ab", "http://old.example/"),
        ("https://en.wikipedia.org/wiki/Bangkok", "https://en.wikipedia.org/wiki/Bangkok"),
        ("  http://example.org/  ", "http://example.org/"),
        (
            "//duckduckgo.com/l/?uddg=https%3A%2F%2Fduckduckgo.com%2Fy.js%3Fad_domain%3Damazon.com&rut=abc",
            None,
        ),
        ("https://duckduckgo.com/y.js?ad_domain=shop.example&ad_provider=bingv7aa", None),
        ("https://help.duckduckgo.com/privacy", None),
        ("https://DuckDuckGo.com/about", None),
        ("//duckduckgo.com/l/?rut=abc", None),
        ("/lite/?q=next", None),
        ("javascript:alert(1)", None),
        ("ftp://files.example/x", None),
        ("//duckduckgo.com/l/?uddg=mailto%3Aa%40b.example", None),
        ("http://[::1/", None),
        ("https://notduckduckgo.com/page", "https://notduckduckgo.com/page"),
    ],
)
def test_result_links_are_unwrapped_and_ads_dropped(href: str, expected: str | None) -> None:
    assert unwrap_ddg_href(href) == expected


def test_a_no_results_page_gives_no_results() -> None:
    page = ddg_no_results_page("qzxv7kplmwq9fjtz3rr8bnn")
    assert "No more results." in page
    assert parse_ddg_lite(page, query="qzxv7kplmwq9fjtz3rr8bnn") == []
    assert not is_ddg_challenge(200, page)


@pytest.mark.parametrize(
    ("status", "page", "expected"),
    [
        (202, CHALLENGE_PAGE, True),
        (202, "", True),
        (200, CHALLENGE_PAGE, True),
        (200, '<html><body><form id="challenge-form" action="/x"></form></body></html>', True),
        (200, "<html><body><div class='anomaly-modal__title'>hi</div></body></html>", True),
        (403, '<form action="//duckduckgo.com/anomaly.js?sv=lite&amp;cc=sre" method="POST"></form>', True),
        (200, ddg_page("weather", WEATHER), False),
        (200, ddg_no_results_page("weather"), False),
        # A search about the challenge itself: the words are in the text and the query box, not the markup.
        (
            200,
            ddg_page(
                "anomaly-modal challenge-form",
                [
                    Result(
                        "Why DDG shows anomaly-modal",
                        "https://blog.example/ddg",
                        'The &lt;form id="challenge-form"&gt;',
                    )
                ],
            ),
            False,
        ),
    ],
)
def test_the_bot_check_is_recognised(status: int, page: str, expected: bool) -> None:
    assert is_ddg_challenge(status, page) is expected


# --- Brave: parsing ----------------------------------------------------------------------------


def test_brave_results_lose_their_highlight_tags() -> None:
    body = brave_body(
        "python release",
        [Result("What&#x27;s New In <strong>Python</strong> 3.13", "https://docs.python.org/3/whatsnew/3.13.html",
                "<b>Python</b> 3.13 is the latest stable release &amp; more.", timestamp="2026-10-07T00:00:00")],
    )  # fmt: skip
    [only] = parse_brave(body, query="python release")
    assert only.title == "What's New In Python 3.13"
    assert only.snippet == "Python 3.13 is the latest stable release & more."
    assert only.url == "https://docs.python.org/3/whatsnew/3.13.html"
    assert only.display_url == "docs.python.org/3/whatsnew/3.13.html"
    assert only.published == "2026-10-07T00:00:00"
    assert (only.provider, only.query) == ("brave", "python release")


def test_brave_results_with_missing_fields_are_tolerated() -> None:
    body = {
        "web": {
            "results": [
                {"url": "https://a.example/x"},
                {"title": "no url"},
                "not a result",
                {"url": "ftp://files.example/x", "title": "ftp"},
                {
                    "url": "https://b.example/",
                    "title": "<strong>B</strong>",
                    "description": None,
                    "age": "3 days ago",
                },
                {"url": "https://a.example/x", "title": "repeat"},
            ]
        }
    }
    hits = parse_brave(body, query="q")
    assert [(h.url, h.title, h.snippet, h.published) for h in hits] == [
        ("https://a.example/x", "a.example/x", "", None),
        ("https://b.example/", "B", "", "3 days ago"),
    ]


@pytest.mark.parametrize("body", [{"type": "search"}, {"web": {"results": "x"}}, {"web": None}, {}])
def test_a_brave_answer_without_web_results_is_empty(body: object) -> None:
    assert parse_brave(body, query="q") == []


@pytest.mark.parametrize("body", [[], "text", None, 3])
def test_a_brave_answer_that_is_not_an_object_is_an_error(body: object) -> None:
    with pytest.raises(SearchError, match="Brave Search sent"):
        parse_brave(body, query="q")


# --- requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "freshness", "kl", "df"),
    [
        (None, None, "wt-wt", ""),
        ("", None, "wt-wt", ""),
        ("en", "day", "us-en", "d"),
        ("en-GB", None, "uk-en", ""),
        ("zh-TW", "week", "tw-tzh", "w"),
        ("zh-Hant", "month", "tw-tzh", "m"),
        ("zh", "year", "cn-zh", "y"),
        ("zh-CN", None, "cn-zh", ""),
        ("zh-Hans", None, "cn-zh", ""),
        ("zh_HK", None, "hk-tzh", ""),
        ("zh-Hant-HK", None, "hk-tzh", ""),
        ("zh-Hant-TW", None, "tw-tzh", ""),
        ("th", "day", "th-th", "d"),
        ("th-TH", None, "th-th", ""),
        ("ja", None, "jp-jp", ""),
        ("pt-BR", None, "br-pt", ""),
        ("de-AT", None, "de-de", ""),
        ("tlh", None, "wt-wt", ""),
    ],
)
def test_the_duckduckgo_form_has_region_and_freshness(
    language: str | None, freshness: str | None, kl: str, df: str
) -> None:
    assert ddg_form("bangkok rain", language=language, freshness=freshness) == {
        "q": "bangkok rain",
        "kl": kl,
        "df": df,
    }


def test_a_long_query_is_cut_at_a_word_under_500_characters() -> None:
    words = " ".join(f"word{n}" for n in range(200))  # ~1,300 characters
    q = ddg_form(words, language=None, freshness=None)["q"]
    assert len(q) <= 499 and words.startswith(q + " ")
    assert ddg_form("x" * 499, language=None, freshness=None)["q"] == "x" * 499
    thai = "ฝนตกที่กรุงเทพ" * 50  # no spaces to cut at
    assert ddg_form(thai, language="th", freshness=None)["q"] == thai[:499]
    assert ddg_form("  two\n lines  ", language=None, freshness=None)["q"] == "two lines"


@pytest.mark.parametrize(
    ("language", "freshness", "extra"),
    [
        (None, None, {}),
        ("en", "day", {"search_lang": "en", "freshness": "pd"}),
        ("en-GB", "week", {"search_lang": "en-gb", "freshness": "pw"}),
        ("zh-TW", "month", {"search_lang": "zh-hant", "freshness": "pm"}),
        ("zh", "year", {"search_lang": "zh-hans", "freshness": "py"}),
        ("ja", None, {"search_lang": "jp"}),
        ("th", None, {"search_lang": "th"}),
        ("tlh", "decade", {}),
    ],
)
def test_brave_parameters(language: str | None, freshness: str | None, extra: dict[str, str]) -> None:
    expected = {"q": "bangkok rain", "count": "20"} | extra
    assert brave_params("bangkok rain", language=language, freshness=freshness) == expected


def test_a_long_brave_query_keeps_to_400_characters_and_50_words() -> None:
    q = brave_params(" ".join(["w"] * 80), language=None, freshness=None)["q"]
    assert q == " ".join(["w"] * 50)
    assert len(brave_params("abcdefghi " * 60, language=None, freshness=None)["q"]) <= 400


def test_request_headers() -> None:
    assert ddg_headers("https://lite.duckduckgo.com/lite/")["Referer"] == "https://lite.duckduckgo.com/"
    assert ddg_headers("https://lite.duckduckgo.com/lite/")["User-Agent"].startswith("Mozilla/5.0")
    assert brave_headers("k") == {"X-Subscription-Token": "k", "Accept": "application/json"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("30", 30.0),
        (" 7 ", 7.0),
        ("Sun, 29 Nov 2026 12:01:00 GMT", 60.0),
        ("Sun, 29 Nov 2026 11:00:00 GMT", 0.0),
        ("soon", None),
    ],
)
def test_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=datetime(2026, 11, 29, 12, 0, tzinfo=UTC)) == expected


@pytest.mark.parametrize(
    ("wait_s", "sentence"),
    [
        (None, "try again in a few minutes"),
        (0.2, "try again in 1 second"),
        (30, "try again in 30 seconds"),
        (90, "try again in 2 minutes"),
        (7200, "try again in 2 hours"),
    ],
)
def test_retry_sentence(wait_s: float | None, sentence: str) -> None:
    assert retry_hint(wait_s) == sentence


def test_interleaving_takes_turns_and_drops_repeats() -> None:
    q1 = [hit("https://a/1"), hit("https://shared/"), hit("https://a/3")]
    q2 = [hit("https://b/1"), hit("https://shared/")]
    assert [h.url for h in interleave([q1, q2])] == [
        "https://a/1",
        "https://b/1",
        "https://shared/",
        "https://a/3",
    ]
    assert interleave([]) == []


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
