"""A stand-in for DuckDuckGo Lite and the Brave Search API on 127.0.0.1.

Pages are built from the real DuckDuckGo Lite markup (see ../shared/reference/external-services.md
§1): ``class='result-link'``, ``class='result-snippet'``, ``class='link-text'`` and
``class='timestamp'`` in single quotes, ad rows as ``<tr class="result-sponsored">`` in double quotes,
result links wrapped as ``//duckduckgo.com/l/?uddg=…&amp;rut=…`` or direct. Brave answers are
``web.results[]`` JSON with ``<strong>`` highlights.

What each request gets: a reply registered for its query text, else the next step of the
endpoint's script (the last step repeats), else a page of results made from the query. Every
request is recorded (method, form fields, URL parameters, headers), and arrivals and answers are
logged in order so a test can see two requests in flight at once.
"""

# ruff: noqa: E501 (result rows are kept verbatim from the real pages, long lines and all)

from __future__ import annotations

import asyncio
import hashlib
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from aiohttp import web
from multidict import CIMultiDict

from tests.local_server import serve_app


@dataclass(frozen=True)
class Result:
    """One result as the stand-in shows it; ``snippet`` may hold ``<b>`` highlights."""

    title: str
    url: str
    snippet: str
    display_url: str = ""
    timestamp: str | None = None
    is_wrapped: bool = True  # //duckduckgo.com/l/?uddg=… rather than the direct URL


@dataclass(frozen=True)
class Reply:
    """What the stand-in answers to one request."""

    body: str
    status: int = 200
    content_type: str = "text/html"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Seen:
    """One request the stand-in received."""

    endpoint: str  # "ddg" or "brave"
    method: str
    form: dict[str, str]
    params: dict[str, str]
    headers: CIMultiDict[str]

    @property
    def query(self) -> str:
        return self.form.get("q") or self.params.get("q", "")


def wrapped_href(url: str) -> str:
    """The protocol-relative redirect link DuckDuckGo Lite writes for a result (HTML-escaped)."""
    rut = hashlib.sha256(url.encode()).hexdigest()
    return f"//duckduckgo.com/l/?uddg={quote(url, safe='')}&amp;rut={rut}"


def _head(query: str, q: str) -> str:
    value = html.escape(query, quote=True)
    return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
  <meta http-equiv="content-type" content="text/html; charset=UTF-8">
  <meta name="referrer" content="origin">
  <meta name="robots" content="noindex, nofollow" />
  <title>{html.escape(query)} at DuckDuckGo</title>
  <link rel="stylesheet" media="handheld, all" href="//duckduckgo.com/dist/lr.ee29b42e9c3cc71a19de.css" type="text/css"/>
</head>
<body>
  <p class={q}extra{q}>&nbsp;</p>
  <div class="header">
    DuckDuckGo
  </div>
  <p class={q}extra{q}>&nbsp;</p>

  <form action="/lite/" method="post">
      <input class={q}query{q} type="text" size="40" name="q" value="{value}">
      <input class={q}submit{q} type="submit" value="Search">
      <div class="filters">
        <select class="submit" name="kl">
            <option value="" >All Regions</option>
            <option value="us-en" >US (English)</option>
            <option value="tw-tzh" >Taiwan</option>
            <option value="th-th" >Thailand</option>
        </select>
        <select class="submit" name="df">
            <option value="" selected>Any Time</option>
            <option value="d" >Past Day</option>
            <option value="w" >Past Week</option>
            <option value="m" >Past Month</option>
            <option value="y" >Past Year</option>
        </select>
      </div>
  </form>
"""


def _next_form(query: str, q: str) -> str:
    value = html.escape(query, quote=True)
    return f"""<form class="next_form" action="/lite/" method="post">
    <input type="submit" class={q}navbutton{q} value="Next Page &gt;">
    <input type="hidden" name="q" value="{value}">
    <input type="hidden" name="s" value="10">
    <input type="hidden" name="nextParams" value="">
    <input type="hidden" name="v" value="l">
    <input type="hidden" name="o" value="json">
    <input type="hidden" name="dc" value="11">
    <input type="hidden" name="api" value="d.js">
    <input type="hidden" name="vqd" value="4-191870771335507362608829693484983654615">
    &nbsp;&nbsp;&nbsp;&nbsp;
      <input name="kl" value="wt-wt" type="hidden">
</form>"""


def _tail(query: str, q: str) -> str:
    value = html.escape(query, quote=True)
    return f"""
  <p class={q}extra{q}>&nbsp;</p>
  <form action="/lite/" method="post">
      <input class={q}query{q} type="text" size="40" name="q" value="{value}" >
      <input class={q}submit{q} type="submit" value="Search">
        <input name="kl" value="wt-wt" type="hidden">
  </form>
  <p class={q}extra{q}>&nbsp;</p>
    <img src="//duckduckgo.com/t/sl_l"/>
  <div id={q}end-spacer{q}>&nbsp;</div>
</body>
</html>
"""


# The two ad rows of the public fixtures: a wrapped y.js ad link and a "more info" link, both result-link.
SPONSORED_ROWS = """<tr class="result-sponsored">
<td valign="top">1.&nbsp;</td>
<td>
<a rel="nofollow" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fduckduckgo.com%2Fy.js%3Fad_domain%3Damazon.com&amp;rut=abc" class='result-link'>Sponsored Laptop Stands - Big Savings</a>
(Sponsored link - <a href="https://duckduckgo.com/duckduckgo-help-pages/company/ads-by-microsoft-on-duckduckgo-private-search/" rel="nofollow" class="result-link">more info</a>)
</td>
</tr>
<tr class="result-sponsored">
<td>&nbsp;</td>
<td class='result-snippet'>Ad copy that should never end up in the real summary.</td>
</tr>
"""
# An ad the way it also appears: a direct y.js link, then its snippet and display URL.
DIRECT_AD_ROWS = """<tr class="result-sponsored">
<td valign="top">2.&nbsp;</td>
<td><a rel="nofollow" href="https://duckduckgo.com/y.js?ad_domain=shop.example&amp;ad_provider=bingv7aa&amp;ad_type=txad" class='result-link'>Buy Now</a></td>
</tr>
<tr class="result-sponsored">
<td>&nbsp;</td>
<td class='result-snippet'>Another advertisement.</td>
</tr>
"""


def _result_rows(number: int, result: Result, q: str) -> str:
    href = wrapped_href(result.url) if result.is_wrapped else html.escape(result.url, quote=True)
    stamp = (
        f"\n                    &nbsp;&nbsp;&nbsp;\n                    <span class={q}timestamp{q}>{result.timestamp}</span>"
        if result.timestamp
        else ""
    )
    return f"""
            <tr>
                <td valign="top">
                    {number}.&nbsp;
                </td>
                <td>
                  <a rel="nofollow" href="{href}" class={q}result-link{q}>{html.escape(result.title)}</a>
                </td>
            </tr>
                <!-- Only show abstract separately if there's a click URL (not EOF) -->
                <tr>
                  <td>&nbsp;&nbsp;&nbsp;</td>
                  <td class={q}result-snippet{q}>
                    {result.snippet}
                  </td>
                </tr>
              <tr>
                <td>&nbsp;&nbsp;&nbsp;</td>
                <td>
                  <span class={q}link-text{q}>{html.escape(result.display_url)}</span>{stamp}
                </td>
              </tr>
            <tr>
              <td>&nbsp;</td>
              <td>&nbsp;</td>
            </tr>
"""


def ddg_page(query: str, results: list[Result], *, ads: str = SPONSORED_ROWS, quote_char: str = "'") -> str:
    """A DuckDuckGo Lite results page (``quote_char='"'`` gives the double-quoted markup of naive fakes)."""
    q = quote_char
    ads = ads.replace("'", q)  # the ad rows hold no other single quotes
    first = 2 if ads else 1
    rows = "".join(_result_rows(first + i, r, q) for i, r in enumerate(results))
    return (
        _head(query, q)
        + f"""
    <p class="extra">&nbsp;</p>
    <table border="0">
      <tr>
        <td>
        </td>
        <td>
            <!-- Next Page Button Sub-template -->
{_next_form(query, q)}
        </td>
      </tr>
    </table>

  <p class={q}extra{q}>&nbsp;</p>

  <table border="0">
  </table>

  <table border="0">
      <!-- Web results are present -->
{ads}{rows}
      <tr>
        <td colspan=2>
            <!-- Next Page Button Sub-template -->
{_next_form(query, q)}
        </td>
      </tr>
  </table>
"""
        + _tail(query, q)
    )


def ddg_no_results_page(query: str) -> str:
    """A results page with nothing on it: the page chrome, an empty results table and "No more results."."""
    return (
        _head(query, "'")
        + """
    <p class="extra">&nbsp;</p>
  <table border="0">
  </table>
  <table border="0">
      <tr>
        <td colspan=2>No more results.</td>
      </tr>
  </table>
"""
        + _tail(query, "'")
    )


CHALLENGE_PAGE = """<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body>
<div class="anomaly-modal__mask"><div class="anomaly-modal__modal">
  <div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>
  <div class="anomaly-modal__description">Please complete the following challenge to confirm this search
    was made by a human.</div>
  <form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=lite&amp;cc=sre" method="POST">
    <div class="anomaly-modal__instructions">Select all squares containing a duck:</div>
    <div class="anomaly-modal__puzzle"></div>
    <button type="submit" class="anomaly-modal__submit" id="challenge-submit">Submit</button>
  </form>
  <form id="img-form"><p>Please email the following code to: error-lite+4a8a@duckduckgo.com</p></form>
</div></div></body></html>
"""


def challenge(status: int = 202) -> Reply:
    """DuckDuckGo's bot check: HTTP 202 (what it usually sends) or 200, and no Retry-After."""
    return Reply(CHALLENGE_PAGE, status=status)


def ddg_results(query: str, results: list[Result], *, delay_s: float = 0.0, **kw: object) -> Reply:
    """A DuckDuckGo Lite results page as a reply."""
    return Reply(ddg_page(query, results, **kw), delay_s=delay_s)  # type: ignore[arg-type]


def brave_body(query: str, results: list[Result]) -> dict:
    """A Brave Search API web search response; ``<b>`` highlights become Brave's ``<strong>``."""

    def item(r: Result) -> dict:
        host = r.url.split("/")[2]
        return {
            "type": "search_result",
            "subtype": "generic",
            "title": r.title,
            "url": r.url,
            "is_source_local": False,
            "is_source_both": False,
            "description": r.snippet.replace("<b>", "<strong>").replace("</b>", "</strong>"),
            "page_age": r.timestamp,
            "age": "2 days ago" if r.timestamp else None,
            "profile": {"name": host, "url": r.url, "long_name": host},
            "language": "en",
            "family_friendly": True,
            "meta_url": {"scheme": "https", "netloc": host, "hostname": host, "path": "› page"},
        }

    return {
        "type": "search",
        "query": {"original": query, "show_strict_warning": False, "is_navigational": False},
        "mixed": {
            "type": "mixed",
            "main": [{"type": "web", "index": i, "all": False} for i in range(len(results))],
        },
        "web": {"type": "search", "family_friendly": True, "results": [item(r) for r in results]},
    }


def brave_results(query: str, results: list[Result], *, delay_s: float = 0.0) -> Reply:
    """A Brave Search API answer as a reply."""
    return Reply(json.dumps(brave_body(query, results)), content_type="application/json", delay_s=delay_s)


def brave_error(status: int, code: str, detail: str, **headers: str) -> Reply:
    """A Brave Search API error answer (its ErrorResponse shape)."""
    body = {"type": "ErrorResponse", "error": {"id": "x", "status": status, "code": code, "detail": detail}}
    return Reply(json.dumps(body), status=status, content_type="application/json", headers=headers)


def default_results(query: str) -> list[Result]:
    """Three results made from the query text."""
    slug = quote(query.replace(" ", "-"), safe="-")
    return [
        Result(
            f"{query} ({n})",
            f"https://site{n}.example/{slug}",
            f"About <b>{query}</b>, part {n}.",
            f"site{n}.example/{slug}",
        )
        for n in (1, 2, 3)
    ]


@dataclass
class FakeSearch:
    """The stand-in's configuration and what it saw."""

    brave_key: str = "test-brave-key"
    by_query: dict[tuple[str, str], Reply] = field(default_factory=dict)  # (endpoint, q) → reply
    script: dict[str, list[Reply]] = field(default_factory=dict)  # endpoint → steps
    seen: list[Seen] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)  # ("arrived"|"answered", q) in order
    base_url: str = ""

    @property
    def ddg_url(self) -> str:
        return f"{self.base_url}/lite/"

    @property
    def brave_url(self) -> str:
        return f"{self.base_url}/res/v1/web/search"

    def _reply(self, endpoint: str, q: str) -> Reply:
        if (endpoint, q) in self.by_query:
            return self.by_query[endpoint, q]
        steps = self.script.get(endpoint)
        if steps:
            return steps.pop(0) if len(steps) > 1 else steps[0]
        if endpoint == "ddg":
            return ddg_results(q, default_results(q))
        return brave_results(q, default_results(q))

    async def _serve(self, seen: Seen, reply: Reply) -> web.Response:
        self.seen.append(seen)
        self.events.append(("arrived", seen.query))
        try:
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            return web.Response(
                text=reply.body, status=reply.status, content_type=reply.content_type, headers=reply.headers
            )
        finally:
            self.events.append(("answered", seen.query))

    async def lite(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        seen = Seen("ddg", request.method, form, dict(request.query), CIMultiDict(request.headers))
        return await self._serve(seen, self._reply("ddg", seen.query))

    async def brave(self, request: web.Request) -> web.Response:
        seen = Seen("brave", request.method, {}, dict(request.query), CIMultiDict(request.headers))
        if request.headers.get("X-Subscription-Token") != self.brave_key:
            reply = brave_error(
                401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."
            )
        else:
            reply = self._reply("brave", seen.query)
        return await self._serve(seen, reply)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/lite/", self.lite)
        app.router.add_get("/res/v1/web/search", self.brave)
        return app


async def start_fake_search(fake: FakeSearch) -> tuple[web.AppRunner, str]:
    """Serve ``fake`` on a free port of 127.0.0.1; returns the runner and the base URL (also ``fake.base_url``)."""
    # handler_cancellation: a slow reply stops when the client hangs up, so cleanup does not wait for it.
    runner, port = await serve_app(fake.app(), handler_cancellation=True)
    fake.base_url = f"http://127.0.0.1:{port}"
    return runner, fake.base_url


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
