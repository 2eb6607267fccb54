"""The start-up summary, kb status and /status: the same facts from one report."""

from knowledge.report.status import activity_facts, status_report, summary_facts, summary_lines
from tests.conftest import ingest_texts, make_settings


def test_the_summary_says_where_what_and_how_to_fix_it(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_WEB_SEARCH="off")
    ingest_texts(settings, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    model = {"url": "http://127.0.0.1:9/v1", "reachable": False, "start": "mlx_lm.server --model M --port 9"}
    report = status_report(settings, model=model)
    assert dict(summary_facts(report)) == {
        "knowledge base": f"{settings.home}: 2 documents, 2 chunks (search by words only: KB_EMBED=off)",
        "model server": "not reachable at http://127.0.0.1:9/v1 — start it with: mlx_lm.server --model M --port 9",
        "tokenizer": "approximate (approx-v1): set KB_TOKENIZER to the model's tokenizer.json",
        "web search": "off (KB_WEB_SEARCH)",
        "inbox": f"{settings.inbox} (drop files here to add them)",
    }
    assert (
        len(summary_lines(report)) == 5 and summary_lines(report)[3] == "web search      off (KB_WEB_SEARCH)"
    )
    assert dict(activity_facts(report)) == {
        "files": "0 waiting, 2 processed, 0 failed",
        "daemon": "not running",
    }


def test_an_exact_tokenizer_a_stale_index_and_both_search_providers(tmp_path, tokenizer_json):
    settings = make_settings(
        tmp_path / "kb", KB_TOKENIZER=str(tokenizer_json), KB_BRAVE_API_KEY="k", KB_EMBED="local"
    )
    ingest_texts(settings, {"a.md": "# A\n\nalpha\n"})  # indexed with the approximation, not embedded
    facts = dict(summary_facts(status_report(settings, model={"url": "u", "reachable": True, "start": "s"})))
    assert facts["model server"] == "reachable at u"
    assert facts["tokenizer"].startswith("exact (tokenizers:")
    assert facts["tokenizer"].endswith("; the index was built with approx-v1: run kb reindex")
    assert facts["web search"] == "on (DuckDuckGo Lite, Brave)"
    assert facts["knowledge base"].endswith(
        ": 1 document, 1 chunk (0 with vectors, local:multilingual-e5-small-q4)"
    )


def test_no_index_yet_files_waiting_and_no_model_check(tmp_path):
    settings = make_settings(tmp_path / "kb")
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "a.md").write_text("# A\n\nalpha\n")
    facts = dict(summary_facts(status_report(settings)))
    assert facts["knowledge base"].endswith(": 0 documents, 0 chunks (search by words only: KB_EMBED=off)")
    assert facts["model server"] == "not checked"
    assert facts["inbox"] == f"{settings.inbox} (1 waiting to be indexed; drop files here to add them)"


async def test_probing_the_model_server(settings):
    import aiohttp
    from aiohttp import web

    from knowledge.model.client import ModelClient
    from knowledge.report.status import probe_model
    from tests.fake_llm import FakeLLM, free_port, start
    from tests.local_server import serve_app

    fake = FakeLLM()
    runner = await start(fake)
    other, port = await serve_app(web.Application())  # answers 404 to everything
    try:
        async with aiohttp.ClientSession() as session:
            up = await probe_model(ModelClient(session, fake.base_url, model_hint="M"))
            odd = await probe_model(ModelClient(session, f"http://127.0.0.1:{port}/v1"))
            down = await probe_model(
                ModelClient(session, f"http://127.0.0.1:{free_port()}/v1", model_hint="M")
            )
    finally:
        await runner.cleanup()
        await other.cleanup()
    import sys
    from pathlib import Path

    server = Path(sys.executable).parent / "mlx_lm.server"  # kb's own, not one on PATH
    assert up == {
        "url": fake.base_url,
        "reachable": True,
        "start": f"{server} --model M --port {fake.base_url.split(':')[2][:-3]} "
        """--chat-template-args '{"enable_thinking": false}'""",
        "models": ["fake-model"],
    }
    assert odd["reachable"] is True and "404" in odd["error"]
    assert (
        down["reachable"] is False
        and "not reachable" in down["error"]
        and down["start"].startswith(f"{server} --model M")
    )


def test_web_search_only_when_asked_says_how_to_ask(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_WEB_SEARCH="ask")
    report = status_report(settings, model={"url": "u", "reachable": True, "start": "s"})
    assert report["web_search"]["on"] is False and report["web_search"]["mode"] == "ask"
    assert dict(summary_facts(report))["web search"] == (
        "when asked: /search, kb websearch (DuckDuckGo Lite; KB_WEB_SEARCH=ask)"
    )


def test_while_vectors_are_made_status_shows_the_pace_and_the_time_left(tmp_path):
    from datetime import UTC, datetime, timedelta

    from knowledge.ingest import working
    from knowledge.report.status import duration

    settings = make_settings(tmp_path / "kb", KB_EMBED="local")
    ingest_texts(settings, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    folder = working.folder(settings)
    working.publish_pace(folder, model="local:multilingual-e5-small-q4", rate=0.001)
    facts = dict(summary_facts(status_report(settings, model={"url": "u", "reachable": True, "start": "s"})))
    assert facts["knowledge base"].endswith(
        "(0 with vectors, local:multilingual-e5-small-q4; 0.001 chunks/s, about 33 min to go)"
    )
    stale = datetime.now(UTC) - timedelta(minutes=5)
    working.publish_pace(folder, model="local:multilingual-e5-small-q4", rate=7.5, clock=lambda: stale)
    assert working.read_pace(folder) is None  # a daemon that stopped telling: no pace shown
    assert [duration(s) for s in (0.2, 42, 719, 4500)] == ["1 s", "42 s", "12 min", "1 h 15 min"]


def test_a_chinese_terminal_says_a_failed_health_check_in_words(tmp_path):
    from knowledge.words.catalog import Words

    error = "neither /v1/models nor /health answered as an OpenAI-compatible server does (/v1/models answered 404: not found)"
    model = {"url": "http://127.0.0.1:8081/v1", "reachable": True, "start": "mlx_lm.server", "error": error}
    report = status_report(make_settings(tmp_path / "kb"), model=model)
    chinese = dict(summary_facts(report, Words("zh-Hant")))["模型伺服器"]
    assert chinese == "可連上 http://127.0.0.1:8081/v1，但健康檢查失敗（kb doctor 會說明原因）"
    assert dict(summary_facts(report))["model server"].endswith(f", but its health check failed: {error}")
