"""Web search providers: DuckDuckGo Lite and Brave answers parsed, their requests made, results merged.

The same providers asked over HTTP: tests/test_providers_http.py.
"""


# ruff: noqa: E501 (result rows are kept verbatim from the real pages, long lines and all)

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from knowledge.errors import SearchError
from knowledge.websearch.providers import (
    SearchHit,
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
    unwrap_ddg_href,
)
from tests.fake_search import (
    CHALLENGE_PAGE,
    DIRECT_AD_ROWS,
    REAL_ROWS,
    SPONSORED_ROWS,
    WEATHER,
    WEATHER_URLS,
    Result,
    brave_body,
    ddg_no_results_page,
    ddg_page,
    wrapped_href,
)


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
