"""Web search providers: DuckDuckGo Lite (HTML, no key) and the Brave Search API (key).

Request builders and parsers are pure, so a test reads exactly what is sent and understood.
DuckDuckGo Lite writes ``class='result-link'`` in single quotes and blocks with HTTP 202 (sometimes
200) and an "anomaly" challenge page: a rate limit, never "no results". Providers use the caller's
aiohttp session; every failure is a ``SearchError`` that says what to do. ``search_all`` runs the
planned queries at once, falls back to the next provider, and interleaves the results.
"""

from __future__ import annotations

import asyncio
import html as html_lib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

import structlog
from selectolax.lexbor import LexborHTMLParser, LexborNode

from knowledge.errors import SearchError

if TYPE_CHECKING:  # imported by the request itself: a command that searches no web never loads it
    import aiohttp

log = structlog.get_logger()

DDG_URL = "https://lite.duckduckgo.com/lite/"
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
BROWSER_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
DDG_MAX_QUERY_CHARS = 499  # DDG refuses queries of 500 characters or more
BRAVE_MAX_QUERY_CHARS = 400  # Brave: at most 400 characters and 50 words
BRAVE_MAX_QUERY_WORDS = 50
BRAVE_COUNT = 20  # the most Brave returns per request

# Query language (BCP 47, any case, "_" or "-") → DuckDuckGo region `kl`. The most specific tag wins:
# "zh-Hant-HK" tries zh-hant-hk, zh-hk, zh-hant, zh. A language not listed (or None) searches all regions.
_DDG_REGIONS = {
    "en": "us-en", "en-us": "us-en", "en-gb": "uk-en", "en-au": "au-en", "en-ca": "ca-en", "en-in": "in-en",
    "zh": "cn-zh", "zh-cn": "cn-zh", "zh-hans": "cn-zh", "zh-tw": "tw-tzh", "zh-hant": "tw-tzh",
    "zh-hk": "hk-tzh", "th": "th-th", "ja": "jp-jp", "ko": "kr-kr", "vi": "vn-vi", "id": "id-id",
    "ms": "my-ms", "de": "de-de", "fr": "fr-fr", "es": "es-es", "it": "it-it", "nl": "nl-nl", "pt": "pt-pt",
    "pt-br": "br-pt", "ru": "ru-ru", "pl": "pl-pl", "tr": "tr-tr", "uk": "ua-uk", "sv": "se-sv",
    "da": "dk-da", "fi": "fi-fi", "nb": "no-no", "no": "no-no", "cs": "cz-cs", "el": "gr-el", "he": "il-he",
    "ar": "xa-ar", "hu": "hu-hu", "ro": "ro-ro",
}  # fmt: skip
DDG_ANY_REGION = "wt-wt"
# Brave `search_lang` accepts only its own codes: bare "zh" and "ja" are refused (422), so map them.
_BRAVE_LANGS = {
    "zh": "zh-hans", "zh-cn": "zh-hans", "zh-sg": "zh-hans", "zh-hans": "zh-hans", "zh-tw": "zh-hant",
    "zh-hk": "zh-hant", "zh-hant": "zh-hant", "ja": "jp", "en-gb": "en-gb", "pt": "pt-pt", "pt-br": "pt-br",
    "no": "nb",
} | {code: code for code in (
    "ar bg bn ca cs da de en es et eu fi fr gl gu he hi hr hu is it kn ko lt lv ml mr ms nb nl pa pl ro ru "
    "sk sl sr sv ta te th tr uk vi"
).split()}  # fmt: skip
_DDG_FRESHNESS = {"day": "d", "week": "w", "month": "m", "year": "y"}
_BRAVE_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
# Each provider by its name: how errors call it, and the setting that points kb at it.
_LABELS = {"duckduckgo": "DuckDuckGo", "brave": "Brave Search"}
_URL_SETTINGS = {"duckduckgo": "KB_DDG_URL", "brave": "KB_BRAVE_URL"}
_CHALLENGE = "form#challenge-form, form[action*='anomaly.js'], [class*='anomaly-modal']"
_STRONG = re.compile(r"</?strong>", re.IGNORECASE)


@dataclass(frozen=True)
class SearchHit:
    """One web result as a provider gave it (untrusted text)."""

    title: str
    url: str
    snippet: str
    display_url: str
    published: str | None
    provider: str
    query: str


class SearchRateLimited(SearchError):
    """A provider refuses to search for now; ``retry_after_s`` when it said how long."""

    def __init__(self, provider: str, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.retry_after_s = retry_after_s


class Provider(Protocol):
    """Anything that searches the web for one query."""

    name: str

    async def search(self, query: str, *, language: str | None, freshness: str | None) -> list[SearchHit]: ...


def cut_query(text: str, max_chars: int) -> str:
    """``text`` with whitespace collapsed, cut to ``max_chars`` at a word boundary when there is one."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    space = text.rfind(" ", 0, max_chars + 1)
    return text[:space] if space > 0 else text[:max_chars]


def _lookup_language(table: dict[str, str], language: str | None) -> str | None:
    """The table entry for the most specific form of a BCP 47 tag."""
    parts = (language or "").strip().lower().replace("_", "-").split("-")
    candidates = ["-".join(parts)] + [f"{parts[0]}-{p}" for p in reversed(parts[1:])] + [parts[0]]
    return next((table[c] for c in candidates if c in table), None)


def ddg_region(language: str | None) -> str:
    """DuckDuckGo's `kl` region for a query language (``wt-wt``, all regions, when unknown)."""
    return _lookup_language(_DDG_REGIONS, language) or DDG_ANY_REGION


def ddg_form(query: str, *, language: str | None, freshness: str | None) -> dict[str, str]:
    """The form DuckDuckGo Lite's own search box posts; ``df`` is empty for any time."""
    return {
        "q": cut_query(query, DDG_MAX_QUERY_CHARS),
        "kl": ddg_region(language),
        "df": _DDG_FRESHNESS.get(freshness or "", ""),
    }


def ddg_headers(base_url: str, *, user_agent: str = BROWSER_UA) -> dict[str, str]:
    """A plain browser's headers, with the Referer of the page the form lives on."""
    parts = urlsplit(base_url)
    return {"User-Agent": user_agent, "Referer": f"{parts.scheme}://{parts.netloc}/", "Accept": "text/html"}


def brave_params(query: str, *, language: str | None, freshness: str | None) -> dict[str, str]:
    """Query parameters of a Brave web search (``search_lang`` only for a language Brave knows)."""
    words = cut_query(query, BRAVE_MAX_QUERY_CHARS).split(" ")
    params = {"q": " ".join(words[:BRAVE_MAX_QUERY_WORDS]), "count": str(BRAVE_COUNT)}
    if freshness in _BRAVE_FRESHNESS:
        params["freshness"] = _BRAVE_FRESHNESS[freshness]
    if lang := _lookup_language(_BRAVE_LANGS, language):
        params["search_lang"] = lang
    return params


def brave_headers(api_key: str) -> dict[str, str]:
    """Headers of a Brave Search API request."""
    return {"X-Subscription-Token": api_key, "Accept": "application/json"}


def _is_ddg_host(host: str | None) -> bool:
    host = (host or "").lower().rstrip(".")
    return host == "duckduckgo.com" or host.endswith(".duckduckgo.com")


def unwrap_ddg_href(href: str) -> str | None:
    """The page a DuckDuckGo result href leads to, or None for ads, DDG's own pages and non-web links."""
    href = href.strip()
    if href.startswith("//"):
        href = "https:" + href
    try:
        parts = urlsplit(href)
        if _is_ddg_host(parts.hostname) and parts.path.rstrip("/") == "/l":
            href = (parse_qs(parts.query).get("uddg") or [""])[0].strip()  # percent-decoded once
            parts = urlsplit(href)
        is_web = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. a malformed IPv6 host
        return None
    return href if is_web and not _is_ddg_host(parts.hostname) else None


def _text(node: LexborNode | None) -> str:
    return " ".join(node.text().split()) if node is not None else ""


def parse_ddg_lite(html: str, *, query: str) -> list[SearchHit]:
    """Results of a DuckDuckGo Lite page in page order, without ads, DDG links or repeated URLs."""
    found: list[dict[str, str | None]] = []
    current: dict[str, str | None] | None = None
    seen: set[str] = set()
    # A result is a run of rows: the title link, the snippet, the display URL (+ timestamp), a spacer.
    for row in LexborHTMLParser(html).css("tr"):
        if "result-sponsored" in (row.attributes.get("class") or "").split():
            current = None
            continue
        if (link := row.css_first("a.result-link")) is not None:
            url = unwrap_ddg_href(link.attributes.get("href") or "")
            current = None
            if url is not None and url not in seen:
                seen.add(url)
                current = dict(title=_text(link), url=url, snippet="", display_url="", published=None)
                found.append(current)
            continue
        if current is None:
            continue
        if (snippet := row.css_first("td.result-snippet")) is not None:
            current["snippet"] = _text(snippet)
        if (shown := row.css_first("span.link-text")) is not None:
            current["display_url"] = _text(shown)
        if (stamp := row.css_first("span.timestamp")) is not None:
            current["published"] = _text(stamp) or None
    return [SearchHit(**item, provider="duckduckgo", query=query) for item in found]  # type: ignore[arg-type]


def is_ddg_challenge(status: int, html: str) -> bool:
    """True for DuckDuckGo's bot check: HTTP 202, or the challenge form / anomaly modal on any page."""
    if status == 202:
        return True
    if "anomaly" not in html and "challenge-form" not in html:
        return False
    # Markup, not text: a results page for the query "anomaly-modal" must not count as a challenge.
    return LexborHTMLParser(html).css_first(_CHALLENGE) is not None


def _plain(value: object) -> str:
    """Brave text without its <strong> highlights and entities, whitespace collapsed."""
    return " ".join(html_lib.unescape(_STRONG.sub("", value)).split()) if isinstance(value, str) else ""


def parse_brave(json_body: object, *, query: str) -> list[SearchHit]:
    """Web results of a Brave Search API response; SearchError when it is not one."""
    if not isinstance(json_body, dict):
        raise SearchError(
            f"Brave Search sent a {type(json_body).__name__}, not search results; try again later"
        )
    web = json_body.get("web")
    results = web.get("results") if isinstance(web, dict) else None
    hits: list[SearchHit] = []
    for item in results if isinstance(results, list) else []:
        url = item.get("url") if isinstance(item, dict) else None
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            continue
        if any(hit.url == url for hit in hits):
            continue
        shown = re.sub(r"^https?://", "", url)
        published = item.get("page_age") or item.get("age")  # page_age is ISO 8601; age may be "2 days ago"
        hits.append(
            SearchHit(
                title=_plain(item.get("title")) or shown,
                url=url,
                snippet=_plain(item.get("description")),
                display_url=shown,
                published=published if isinstance(published, str) else None,
                provider="brave",
                query=query,
            )
        )
    return hits


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds()) if when.tzinfo else None


def retry_hint(retry_after_s: float | None) -> str:
    """'try again in …' for a wait in seconds (in a few minutes when unknown)."""
    if retry_after_s is None:
        return "try again in a few minutes"
    wait_s = max(1, math.ceil(retry_after_s))
    size, unit = (3600, "hour") if wait_s >= 3600 else (60, "minute") if wait_s >= 60 else (1, "second")
    n = math.ceil(wait_s / size)
    return f"try again in {n} {unit}{'s' * (n != 1)}"


_Answer = tuple[int, str, str | None]  # status, body, Retry-After


async def _fetch(provider: DuckDuckGoLite | BraveSearch, method: str, **kw: Any) -> _Answer:
    """Status, body and Retry-After of one request to a provider; SearchError when nothing answers in time."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=provider.timeout_s)
    try:
        async with provider.session.request(method, provider.base_url, timeout=timeout, **kw) as resp:
            return resp.status, await resp.text(errors="replace"), resp.headers.get("Retry-After")
    except (aiohttp.ClientError, TimeoutError) as exc:
        why = str(exc) or repr(exc)
        if isinstance(exc, TimeoutError):
            why = f"no answer within {provider.timeout_s:g} s"
        fix = f"check the network (or {_URL_SETTINGS[provider.name]}, now {provider.base_url})"
        raise SearchError(f"{_LABELS[provider.name]} did not answer: {why} — {fix}") from exc


@dataclass
class DuckDuckGoLite:
    """DuckDuckGo's HTML-only search page, posted to like its own search box."""

    session: aiohttp.ClientSession
    _: KW_ONLY
    base_url: str = DDG_URL
    timeout_s: float = 15.0
    name = "duckduckgo"

    async def search(self, query: str, *, language: str | None, freshness: str | None) -> list[SearchHit]:
        """Results of one query; SearchRateLimited on the bot check."""
        form = ddg_form(query, language=language, freshness=freshness)
        status, body, _ = await _fetch(self, "POST", data=form, headers=ddg_headers(self.base_url))
        if status == 429 or is_ddg_challenge(status, body):
            message = (
                f"DuckDuckGo is rate-limiting this machine (HTTP {status} challenge); {retry_hint(None)}"
            )
            raise SearchRateLimited(self.name, message)
        if status != 200:
            raise SearchError(f"DuckDuckGo answered HTTP {status} at {self.base_url}; try again later")
        return parse_ddg_lite(body, query=query)


def _brave_detail(text: str) -> str:
    """The ``error.detail`` of a Brave error body, or its start."""
    try:
        return str(json.loads(text)["error"]["detail"])
    except (ValueError, KeyError, TypeError):
        return " ".join(text.split())[:200] or "no details"


@dataclass
class BraveSearch:
    """The Brave Search API (web results), with the owner's subscription key."""

    session: aiohttp.ClientSession
    api_key: str
    _: KW_ONLY
    base_url: str = BRAVE_URL
    timeout_s: float = 15.0
    name = "brave"

    async def search(self, query: str, *, language: str | None, freshness: str | None) -> list[SearchHit]:
        """Results of one query; SearchRateLimited on HTTP 429."""
        if not self.api_key:
            raise SearchError("Brave Search needs an API key — set KB_BRAVE_API_KEY")
        params = brave_params(query, language=language, freshness=freshness)
        headers = brave_headers(self.api_key)
        status, text, retry_after = await _fetch(self, "GET", params=params, headers=headers)
        if status == 429:
            wait_s = parse_retry_after(retry_after, now=datetime.now(UTC))
            message = f"Brave Search is rate-limiting this key ({_brave_detail(text)}); {retry_hint(wait_s)}"
            raise SearchRateLimited(self.name, message, retry_after_s=wait_s)
        if status in (401, 403):
            why = f"HTTP {status}: {_brave_detail(text)}"
            raise SearchError(f"Brave Search rejected the API key ({why}) — check KB_BRAVE_API_KEY")
        if status != 200:
            raise SearchError(f"Brave Search answered HTTP {status}: {_brave_detail(text)}; try again later")
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise SearchError("Brave Search sent something that is not JSON; try again later") from exc
        return parse_brave(body, query=query)


Query = tuple[str, str | None, str | None]  # (query, language, freshness)


def _worst(errors: Sequence[SearchError]) -> SearchError:
    """The first error that is not a rate limit, else one rate limit for all (soonest known retry)."""
    limited = [e for e in errors if isinstance(e, SearchRateLimited)]
    if len(limited) < len(errors):
        return next(e for e in errors if not isinstance(e, SearchRateLimited))
    labels = [_LABELS.get(n, n) for n in dict.fromkeys(e.provider for e in limited)]
    waits = [e.retry_after_s for e in limited if e.retry_after_s is not None]
    wait_s = min(waits) if waits else None
    who = f"{labels[0]} is" if len(labels) == 1 else f"every search provider ({', '.join(labels)}) is"
    message = f"{who} rate-limiting this machine; {retry_hint(wait_s)}"
    return SearchRateLimited(limited[0].provider, message, retry_after_s=wait_s)


Failure = tuple[str, SearchError]  # (provider name, what went wrong)


async def _search_one(
    providers: Sequence[Provider], query: Query
) -> tuple[str | None, list[SearchHit], list[Failure]]:
    """The first provider that answers one query (None if none did), its hits, and the failures before it."""
    text, language, freshness = query
    failures: list[Failure] = []
    for provider in providers:
        try:
            hits = await provider.search(text, language=language, freshness=freshness)
        except SearchError as exc:
            event = "web.rate_limited" if isinstance(exc, SearchRateLimited) else "web.search_failed"
            log.warning(event, provider=provider.name, query=text, error=str(exc))
            failures.append((provider.name, exc))
            continue
        log.info("web.search", provider=provider.name, query=text, n=len(hits))
        return provider.name, hits, failures
    return None, [], failures


def _fallback_note(failures: Sequence[Failure], used: str) -> str:
    """'duckduckgo is rate-limited; used brave'."""
    why = [
        f"{n} is rate-limited" if isinstance(e, SearchRateLimited) else f"{n} failed ({e})"
        for n, e in failures
    ]
    return f"{'; '.join(why)}; used {used}"


def interleave(lists: Sequence[Sequence[SearchHit]]) -> list[SearchHit]:
    """q1[0], q2[0], q1[1], q2[1], … keeping only the first hit for each URL."""
    merged: list[SearchHit] = []
    seen: set[str] = set()
    for rank in range(max((len(hits) for hits in lists), default=0)):
        for hits in lists:
            if rank < len(hits) and hits[rank].url not in seen:
                seen.add(hits[rank].url)
                merged.append(hits[rank])
    return merged


async def search_all(
    providers: Sequence[Provider], queries: Sequence[Query]
) -> tuple[list[SearchHit], list[str]]:
    """Search every (query, language, freshness) at once; interleaved hits and notes on fallbacks."""
    if not providers:
        raise SearchError("no web search provider is configured — set KB_DDG_URL or KB_BRAVE_API_KEY")
    outcomes = await asyncio.gather(*(_search_one(providers, q) for q in queries))
    found: list[list[SearchHit]] = []
    notes: list[str] = []
    errors: list[SearchError] = []
    for (text, _, _), (used, hits, failures) in zip(queries, outcomes, strict=True):
        if used is None:
            errors += [e for _, e in failures]
            notes.append(f"the search for {text!r} failed: {_worst([e for _, e in failures])}")
            continue
        found.append(hits)
        if failures:
            notes.append(_fallback_note(failures, used))
    if errors and not found:
        raise _worst(errors)
    return interleave(found), list(dict.fromkeys(notes))
