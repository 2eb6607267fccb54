"""The import story: a search record → import web-2 from a local web server → searchable and cited with its URL."""

import json
from datetime import UTC, datetime

import pytest

from daemon.main import background
from knowledge.errors import FetchRefused
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from knowledge.websearch.importer import import_web_source
from knowledge.wiring import candidate_store, make_fetcher
from tests.conftest import make_settings


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
