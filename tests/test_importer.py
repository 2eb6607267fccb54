"""Selecting and importing a web candidate: by id only, from the chat's latest search, through the daemon."""

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from daemon.main import background
from knowledge.ingest.handoff import deliver
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.websearch.fetch import Fetched
from knowledge.websearch.importer import (
    ImportRefused,
    file_name,
    import_web_source,
    pasted_url,
    select,
)
from knowledge.websearch.store import CandidateStore
from tests.conftest import make_settings

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
RESULTS = [
    ("Lake Quillan facts", "https://lakes.example/quillan", "depth and more"),
    ("Zorblat manual", "https://zorblat.example/manual.pdf", "cups"),
    ("Varn valley", "https://varn.example/", "valley"),
]


def page(url: str, body: bytes, kind: str = "html", content_type: str = "text/html") -> Fetched:
    return Fetched(url, url, 200, content_type, "utf-8", body, hashlib.sha256(body).hexdigest(), kind)


def store_at(settings, now=NOW) -> CandidateStore:
    return CandidateStore(settings.runs / "web-search.json", clock=lambda: now)


@pytest.mark.parametrize(
    "source_id",
    ["web-0", "web-6", "web-3:extra", "../../etc/passwd", "https://evil.example/", "", "x" * 64, "WEB-1"],
)
def test_anything_but_a_source_id_is_refused(settings, source_id):
    store_at(settings).save("chat", "q", ["q"], RESULTS)
    with pytest.raises(ImportRefused) as err:
        select(store_at(settings), "chat", source_id)
    assert err.value.reason == "bad-id"


def test_selection_refusals_say_which(settings):
    store = store_at(settings)
    with pytest.raises(ImportRefused, match="no web search in this chat"):
        select(store, "chat", "web-1")
    record = store.save("chat", "q", ["q"], RESULTS)
    other = store.save("other", "q", ["q"], RESULTS)
    with pytest.raises(ImportRefused) as err:
        select(store, "chat", "web-1", "https://evil.example/")
    assert err.value.reason == "extra-arguments"
    with pytest.raises(
        ImportRefused, match=r"web-5 is not in this chat's latest search \(it has: web-1, web-2, web-3\)"
    ):
        select(store, "chat", "web-5")
    with pytest.raises(ImportRefused, match="belongs to another chat"):
        select(store, "chat", "web-1", search_id=other.search_id)
    newer = store.save("chat", "q2", ["q2"], RESULTS)
    with pytest.raises(ImportRefused, match="replaced by a newer search"):
        select(store, "chat", "web-1", search_id=record.search_id)
    assert (
        select(store, "chat", "web-2", search_id=newer.search_id)[1].url
        == "https://zorblat.example/manual.pdf"
    )
    with pytest.raises(ImportRefused, match="expired"):
        select(store_at(settings, NOW + timedelta(hours=25)), "chat", "web-1")
    store.save("empty", "q", ["q"], [])  # a search that found nothing: nothing to import, not expired
    with pytest.raises(ImportRefused, match="found nothing to import") as err:
        select(store, "empty", "web-1")
    assert err.value.reason == "nothing-found"


def test_pasted_urls_and_file_names():
    assert pasted_url(" https://a.example/x?y=1 ") == "https://a.example/x?y=1"
    assert pasted_url("see https://a.example/") is None and pasted_url("ftp://a.example/") is None
    assert file_name("Lake Quillan — facts", "https://x/", "html") == "lake-quillan-facts.html"
    assert file_name("", "https://x.example/docs/Manual%20v2.pdf", "pdf") == "manual-v2-pdf.pdf"


def test_delivery_writes_the_sidecar_then_the_whole_file(tmp_path):
    settings = make_settings(tmp_path / "kb")
    path = deliver(
        settings.inbox, "a.html", b"<p>x</p>", {"source_url": "https://a.example/"}, staging=settings.staging
    )
    assert path.read_bytes() == b"<p>x</p>"
    assert (
        json.loads((settings.inbox / "a.html.source.json").read_text())["source_url"] == "https://a.example/"
    )
    assert not list(settings.inbox.glob("*.part"))
    second = deliver(settings.inbox, "a.html", b"<p>y</p>", {}, staging=settings.staging)
    assert second.name == "a-2.html"


QUILLAN = b"<html><head><title>Lake Quillan</title></head><body><p>Lake Quillan is 317 metres deep.</p></body></html>"


async def test_import_through_the_daemon_then_again_is_already_imported(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.1")
    store = store_at(settings)
    store.save("chat", "How deep is Lake Quillan?", ["lake quillan depth"], RESULTS)
    fetched: list[str] = []

    async def fetch(url):
        fetched.append(url)
        return page(url, QUILLAN)

    with background(settings, ApproxCounter()):
        result = await import_web_source(
            "web-1", chat_id="chat", settings=settings, store=store, fetch=fetch, wait_s=20, clock=lambda: NOW
        )
        again = await import_web_source(
            "web-1", chat_id="chat", settings=settings, store=store, fetch=fetch, wait_s=20, clock=lambda: NOW
        )
    assert result.status == "indexed" and result.title == "Lake Quillan" and result.chunks == 1
    assert result.question == "How deep is Lake Quillan?"
    assert again.status == "already" and again.doc_id == result.doc_id and not again.is_replacement
    # the page is fetched again to see whether it changed: the same bytes are the document already there
    assert fetched == ["https://lakes.example/quillan"] * 2
    with Index(settings.index_path, readonly=True) as index:
        assert index.document_count() == 1
        hit = search(index, "how deep is lake quillan", k=1)[0]
    assert hit.source_url == "https://lakes.example/quillan" and "317 metres" in hit.text


async def test_without_a_daemon_the_page_is_queued_in_the_inbox(tmp_path):
    settings = make_settings(tmp_path / "kb")
    store = store_at(settings)
    store.save("chat", "q", ["q"], RESULTS)

    async def fetch(url):
        return page(url, QUILLAN)

    result = await import_web_source(
        "web-1", chat_id="chat", settings=settings, store=store, fetch=fetch, clock=lambda: NOW
    )
    assert result.status == "queued" and "daemon is not running" in result.message
    assert (settings.inbox / "lake-quillan-facts.html").read_bytes() == QUILLAN
    assert (settings.inbox / "lake-quillan-facts.html.source.json").is_file()


async def test_a_page_that_cannot_be_converted_reports_why_and_stays_in_failed(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.1")
    store = store_at(settings)
    store.save("chat", "q", ["q"], RESULTS)
    spa = b"<html><body><div id=root></div><noscript>You need to enable JavaScript to run this app.</noscript></body></html>"

    async def fetch(url):
        return page(url, spa)

    with background(settings, ApproxCounter()):
        result = await import_web_source(
            "web-3", chat_id="chat", settings=settings, store=store, fetch=fetch, wait_s=20, clock=lambda: NOW
        )
    assert result.status == "failed" and result.reason == "requires-javascript"  # a wait run out says queued
    assert "JavaScript" in result.message and (settings.failed / "varn-valley.html").is_file()
