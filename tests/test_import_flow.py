"""The import story: a search record → import web-2 from a local web server → searchable and cited with its URL."""

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from aiohttp import web

from cli.commands.web import describe_import
from daemon.main import background
from knowledge.errors import FetchRefused
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.websearch.importer import import_web_source
from knowledge.wiring import candidate_store, make_fetcher
from tests.conftest import make_settings
from tests.local_server import serve_app


async def test_import_web_2_makes_it_searchable_and_cited_with_its_url(tmp_path, varn_site):
    base, port, seen = varn_site
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.1", KB_FETCH_PORTS=str(port))
    store = candidate_store(settings)
    store.save("chat", "How deep is Lake Quillan?", ["lake quillan depth"],
               [("Other", "https://other.example/", "x"), ("The Varn valley", f"{base}/old-varn", "Lake Quillan")])  # fmt: skip
    fetcher = make_fetcher(settings, allow_hosts=[("127.0.0.1", port)])  # the test server only
    with background(settings, ApproxCounter()):
        result = await import_web_source(
            "web-2", chat_id="chat", settings=settings, store=store, fetch=fetcher.fetch, wait_s=20,
            clock=lambda: datetime.now(UTC),
        )  # fmt: skip
    assert result.status == "indexed" and result.title == "The Varn valley"
    assert seen == ["/old-varn", "/varn"]  # the redirect was followed by hand, and only web-2 was fetched
    with Index(settings.index_path, readonly=True) as index:
        hit = search(index, "how deep is lake quillan", k=1)[0]
    assert hit.source_url == f"{base}/varn" and "317 metres deep" in hit.text
    sidecar = json.loads((settings.processed / "the-varn-valley.html.source.json").read_text())
    assert sidecar["requested_url"] == f"{base}/old-varn" and sidecar["source_url"] == f"{base}/varn"
    assert sidecar["sha256"] and sidecar["content_type"].startswith("text/html")


async def test_without_the_test_allowlist_the_guard_refuses_the_local_server(tmp_path, varn_site):
    base, port, seen = varn_site
    settings = make_settings(tmp_path / "kb", KB_FETCH_PORTS=str(port))
    store = candidate_store(settings)
    store.save("chat", "q", ["q"], [("Local", f"{base}/varn", "x")])
    with pytest.raises(FetchRefused) as err:
        await import_web_source("web-1", chat_id="chat", settings=settings, store=store,
                                fetch=make_fetcher(settings).fetch, clock=lambda: datetime.now(UTC))  # fmt: skip
    assert err.value.reason == "private-address" and seen == []
    assert not settings.inbox.exists() or not any(settings.inbox.iterdir())  # nothing written for a refusal


def test_cli_import_refusals_exit_2(tmp_path, run_kb):
    out = run_kb("--home", str(tmp_path), "import", "web-9")
    assert out.returncode == 2 and "refused (bad-id)" in out.stderr
    out = run_kb("--home", str(tmp_path), "import", "web-1")
    assert out.returncode == 2 and "refused (no-search)" in out.stderr
    out = run_kb("--home", str(tmp_path), "import", "web-1", "http://127.0.0.1/")
    assert out.returncode == 2 and "refused (extra-arguments)" in out.stderr
    check = run_kb("--home", str(tmp_path), "import-url", "--check", "http://127.0.0.1:8081/v1")
    assert check.returncode == 2 and "refused (" in check.stdout
    check = run_kb("--home", str(tmp_path), "import-url", "--check", "http://0x7f.1/")
    assert check.returncode == 2 and "private-address" in check.stdout
    out = run_kb("--home", str(tmp_path), "import-url", "file:///etc/passwd")
    assert out.returncode == 2 and "refused (scheme)" in out.stderr


FERRY = (
    "<html><head><title>Harbour ferry</title></head><body><main><h1>Harbour ferry</h1>{}</main></body></html>"
)
TIMETABLE = "<p>The harbour ferry to Varn leaves at seven every morning.</p>"
PRICES = "<p>A return ticket for the harbour ferry costs twelve crowns; bicycles ride free.</p>"


class Hashed:
    """An embedder in this process that counts the passages it embeds (hashed words, no model)."""

    name = "hashed-words"

    def __init__(self) -> None:
        self.passages: list[str] = []

    def embed(self, texts, side):
        if side == "passage":
            self.passages += list(texts)
        out = np.zeros((len(texts), 32), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, hash(word) % 32] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


async def test_a_page_imported_again_replaces_its_earlier_version(tmp_path):
    """The same URL imported after the page changed: one document, the same id, the new text found and
    the old text never again; the passage that did not change keeps its vector; the same page a third
    time is "already" there. Fetched for real from a local server, through the daemon."""
    from knowledge.retrieval.backfill import embed_missing

    page = {"body": TIMETABLE + PRICES.replace("twelve", "nine")}

    async def ferry(request: web.Request) -> web.Response:
        return web.Response(text=FERRY.format(page["body"]), content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/ferry", ferry)
    runner, port = await serve_app(app)
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.1", KB_FETCH_PORTS=str(port),
                             KB_CHUNK_MAX_TOKENS="24", KB_CHUNK_OVERLAP_TOKENS="0")  # fmt: skip
    store = candidate_store(settings)
    fetcher = make_fetcher(settings, allow_hosts=[("127.0.0.1", port)])
    url = f"http://127.0.0.1:{port}/ferry"
    embedder = Hashed()

    async def import_it():
        store.save(
            "chat", "What does the ferry cost?", ["harbour ferry price"], [("Harbour ferry", url, "x")]
        )
        return await import_web_source("web-1", chat_id="chat", settings=settings, store=store,
                                       fetch=fetcher.fetch, wait_s=20, clock=lambda: datetime.now(UTC))  # fmt: skip

    try:
        with background(settings, ApproxCounter()):
            first = await import_it()
            with Index(settings.index_path) as index:
                embed_missing(index, embedder)
            page["body"] = TIMETABLE + PRICES  # the price changed on the page
            second = await import_it()
            third = await import_it()
    finally:
        await runner.cleanup()
    assert first.status == "indexed" and not first.is_replacement
    assert second.status == "indexed" and second.is_replacement and second.doc_id == first.doc_id
    assert third.status == "already" and third.doc_id == first.doc_id
    assert describe_import(second).startswith(
        f"updated    web-1 {url} → 'Harbour ferry' (2 chunks, {first.doc_id})"
    )
    with Index(settings.index_path) as index:
        assert index.document_count() == 1
        texts = " ".join(c.text for c in index.chunks_of(first.doc_id, range(1, 10)))
        assert "twelve crowns" in texts and "nine crowns" not in texts
        assert search(index, "harbour ferry return ticket crowns", k=5)[0].text.count("twelve crowns") == 1
        assert not [r for r in search(index, "nine crowns", k=5) if "nine" in r.text]
        embedder.passages = []
        embed_missing(index, embedder)
    assert embedder.passages and not any("leaves at seven" in p for p in embedder.passages)  # kept its vector
    assert len(list(settings.raw.glob("*.md"))) == 1  # one raw file: the earlier version's, rewritten
    assert (
        len(list(settings.processed.glob("*.html"))) == 3
    )  # every original is kept (the third as a duplicate)
