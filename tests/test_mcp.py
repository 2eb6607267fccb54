"""kb mcp as the owner's other tools reach it: the SDK's own client over real loopback HTTP (in this process)
and over the stdio pipes of a real ``kb mcp`` process."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from knowledge.config import Settings
from knowledge.wiring import candidate_store, make_fetcher
from mcpserver.app import build_server
from mcpserver.http import http_app, loopback_sockets, uvicorn_server
from mcpserver.service import CHAT, open_kb
from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer, free_port

LAKE = (
    "# The Varn valley\n\nThe valley is quiet in winter.\n\n"
    "Lake Quillan is 317 metres deep and never freezes.\n\nAnglers come in spring.\n"
)
PLANTED = {
    "lake.md": LAKE,
    "taipei.md": "# 臺北\n\n臺北的象山步道在信義區，步道入口旁有一座紅色郵筒。\n",
    "chiangmai.md": "# เชียงใหม่\n\nวัดพระธาตุดอยสุเทพตั้งอยู่บนดอยสุเทพ สูงจากระดับน้ำทะเล 1,073 เมตร\n",
}


@asynccontextmanager
async def serving(settings: Settings, *, token: str = "", fetch: object = None) -> AsyncIterator[str]:
    """kb mcp --http on a free loopback port of this process; yields its URL."""
    async with open_kb(settings, fetch=fetch) as kb:
        server = uvicorn_server(http_app(build_server(kb), token=token))
        sockets = loopback_sockets(0)
        port = sockets[0].getsockname()[1]
        task = asyncio.create_task(server.serve(sockets=sockets))
        async with asyncio.timeout(30):  # a safety net: started is set once it listens
            while not server.started:
                await asyncio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True
            await task


@asynccontextmanager
async def client(url: str, *, headers: dict[str, str] | None = None, **kw: object) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP, sending these headers; its HTTP connections are closed at
    the end (the SDK leaves an HTTP client it was given open)."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), **kw) as c,
    ):
        yield c


@pytest.fixture
def kb_home(tmp_path: Path) -> Settings:
    """A knowledge base with a planted fact in English, Chinese and Thai; the model server is down."""
    settings = make_settings(tmp_path / "kb", KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")
    ingest_texts(settings, PLANTED)
    return settings


async def test_the_tools_their_schemas_and_annotations(kb_home):
    async with serving(kb_home) as url, client(url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {"search", "get", "ask", "web_search", "import_web_source", "status"}
    imp = tools["import_web_source"].input_schema
    assert imp["required"] == ["source_id"] and list(imp["properties"]) == ["source_id"]
    assert imp["properties"]["source_id"]["pattern"] == "^web-[1-5]$"
    assert set(tools["search"].input_schema["properties"]) == {"query", "limit", "source", "tag"}
    assert set(tools["get"].input_schema["properties"]) == {"document_id", "start_line", "end_line"}
    assert set(tools["ask"].input_schema["properties"]) == {"question", "conversation"}
    for name in ("search", "get", "status", "web_search", "ask"):
        assert tools[name].annotations.read_only_hint is True, name
    assert tools["import_web_source"].annotations.read_only_hint is False
    passage = tools["search"].output_schema["$defs"]["Passage"]["properties"]
    assert {
        "document_id",
        "chunk_id",
        "title",
        "path",
        "url",
        "start_line",
        "end_line",
        "text",
        "score",
    } <= set(passage)
    assert "answerable" in tools["search"].output_schema["properties"]


@pytest.mark.parametrize(
    ("query", "fact"),
    [
        ("How deep is Lake Quillan?", "317 metres deep"),
        ("象山步道入口旁有什麼？", "紅色郵筒"),
        ("วัดพระธาตุดอยสุเทพสูงเท่าไร", "1,073 เมตร"),
    ],
)
async def test_a_planted_fact_is_found_with_its_lines_and_get_returns_exactly_them(kb_home, query, fact):
    async with serving(kb_home) as url, client(url) as c:
        found = await c.call_tool("search", {"query": query, "limit": 3})
        assert not found.is_error
        best = found.structured_content["passages"][0]
        assert fact in best["text"] and found.structured_content["answerable"] is True
        got = await c.call_tool(
            "get",
            {
                "document_id": best["document_id"],
                "start_line": best["start_line"],
                "end_line": best["end_line"],
            },
        )
    raw = (kb_home.raw / best["path"].removeprefix("raw/")).read_text(encoding="utf-8").splitlines()
    cited = "\n".join(raw[best["start_line"] - 1 : best["end_line"]])
    assert got.structured_content["text"] == cited and fact in cited
    assert got.structured_content["truncated"] is None
    assert fact in found.content[0].text or best["title"] in found.content[0].text  # the short rendering


async def test_search_gives_what_kb_search_json_gives(kb_home, run_kb):
    args = ("--home", str(kb_home.home), "search", "--json", "-k", "3", "Lake Quillan depth")
    cli = json.loads((await asyncio.to_thread(run_kb, *args)).stdout)  # kb runs its own event loop
    async with serving(kb_home) as url, client(url) as c:
        found = (await c.call_tool("search", {"query": "Lake Quillan depth", "limit": 3})).structured_content
    assert [(p["chunk_id"], p["start_line"], p["end_line"]) for p in found["passages"]] == [
        (r["chunk_id"], r["start_line"], r["end_line"]) for r in cli
    ]
    assert found["answerable"] == cli[0]["answerable"]


async def test_results_are_bounded_and_say_what_to_ask_next(tmp_path):
    settings = make_settings(tmp_path / "kb")
    long_doc = "# Ledger\n\n" + "\n".join(
        f"Line {n}: the ledger entry for day {n} of the Quillan survey." for n in range(1, 2001)
    )
    ingest_texts(settings, {"ledger.md": long_doc})
    async with serving(settings) as url, client(url) as c:
        found = await c.call_tool("search", {"query": "Quillan survey ledger", "limit": 20})
        doc = found.structured_content["passages"][0]["document_id"]
        whole = await c.call_tool("get", {"document_id": doc})
        rest = whole.structured_content["truncated"]
        asked = re.search(r"ask `get` for lines (\d+)–(\d+)", rest)
        more = await c.call_tool("get", {"document_id": doc, "start_line": int(asked[1])})
    got = whole.structured_content
    for result in (found, whole, more):  # the whole answer: structured and rendered
        assert (
            len(json.dumps(result.structured_content, ensure_ascii=False)) + len(result.content[0].text)
            <= 20_000
        )
    assert found.structured_content["truncated"].startswith("passage texts cut to fit")
    raw = (settings.raw / got["path"].removeprefix("raw/")).read_text(encoding="utf-8").splitlines()
    assert got["start_line"] == 1 and got["end_line"] < got["total_lines"] == len(raw) > 2000
    assert rest.startswith("capped at") and (int(asked[1]), int(asked[2])) == (got["end_line"] + 1, len(raw))
    assert more.structured_content["start_line"] == got["end_line"] + 1
    assert (
        more.structured_content["text"].splitlines()
        == raw[got["end_line"] : more.structured_content["end_line"]]
    )


async def test_bad_input_gets_errors_and_the_server_keeps_serving(kb_home):
    async with serving(kb_home) as url, client(url) as c:
        unknown = await c.call_tool("get", {"document_id": "doc-nope"})
        assert unknown.is_error and "doc-nope" in unknown.content[0].text
        too_long = await c.call_tool("search", {"query": "x" * 4001})
        assert too_long.is_error and "at most 4,000" in too_long.content[0].text
        wrong_type = await c.call_tool("search", {"query": "lake", "limit": "many"})
        assert wrong_type.is_error
        with pytest.raises(MCPError) as unknown_tool:
            await c.call_tool("no_such_tool", {})
        assert "unknown tool 'no_such_tool'" in str(unknown_tool.value)
        with pytest.raises(MCPError) as extra:
            await c.call_tool("search", {"query": "lake", "scope": "everything"})
        assert "scope" in str(extra.value)
        async with httpx2.AsyncClient() as raw:
            garbage = await raw.post(url, content=b"{not json", headers={"content-type": "application/json",
                                     "accept": "application/json, text/event-stream"})  # fmt: skip
        assert (
            garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
        )  # a JSON-RPC parse error
        still = await c.call_tool("search", {"query": "How deep is Lake Quillan?"})
    assert not still.is_error and "317 metres" in still.structured_content["passages"][0]["text"]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example:8765"}, 421),
        ({"host": "127.0.0.1.evil.example"}, 421),
        ({"origin": "http://evil.example"}, 403),
        ({"origin": "null"}, 403),
        ({}, 401),  # no token
        ({"authorization": "Bearer wrong"}, 401),
        ({"authorization": "bearer s3cret-token"}, 401),  # the scheme's case is not the token's
    ],
)
async def test_a_foreign_host_origin_or_missing_token_is_refused(kb_home, headers, status):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with serving(kb_home, token="s3cret-token") as url, httpx2.AsyncClient() as raw:
        refused = await raw.post(url, json=initialize, headers={**base, **headers})
        allowed = await raw.post(
            url, json=initialize, headers={**base, "authorization": "Bearer s3cret-token"}
        )
    assert refused.status_code == status and "refused" in refused.json()["error"]
    assert allowed.status_code == 200


async def test_with_the_token_a_client_is_served(kb_home):
    async with (
        serving(kb_home, token="s3cret-token") as url,
        client(url, headers={"Authorization": "Bearer s3cret-token"}) as c,
    ):
        status = await c.call_tool("status", {})
    got = status.structured_content
    assert got["documents"] == 3 and got["model_server_reachable"] is False


async def test_several_clients_search_at_once_while_an_ingest_writes(kb_home):
    extra = {
        f"note-{n}.md": f"# Note {n}\n\nThe Quillan survey counted {n} herons on the lake.\n"
        for n in range(40)
    }
    done = threading.Event()

    def write() -> None:
        try:
            ingest_texts(kb_home, extra)
        finally:
            done.set()

    async with serving(kb_home) as url:

        async def one_client(n: int) -> list[bool]:
            errors = []
            async with client(url) as c:
                while not done.is_set() or len(errors) < 3:
                    r = await c.call_tool("search", {"query": "How deep is Lake Quillan?"})
                    errors.append(r.is_error)
                    assert "317 metres" in r.structured_content["passages"][0]["text"], r.content
            return errors

        writer = asyncio.create_task(asyncio.to_thread(write))
        results = await asyncio.gather(*(one_client(n) for n in range(4)))
        await writer
        async with client(url) as c:
            herons = await c.call_tool("search", {"query": "39 herons", "limit": 1})
    assert not any(any(r) for r in results) and all(len(r) >= 3 for r in results)
    assert "39 herons" in herons.structured_content["passages"][0]["text"]  # the writer's last note is seen


def _seed_candidates(settings: Settings, base: str) -> None:
    """A web search the MCP client ran earlier: web-1 is the Varn page on the local web server."""
    candidate_store(settings).save(
        CHAT,
        "How deep is Lake Quillan?",
        ["lake quillan depth"],
        [("The Varn valley", f"{base}/varn", "Quillan")],
    )


async def test_an_import_is_refused_when_the_client_cannot_ask_the_owner(tmp_path, varn_site):
    base, port, seen = varn_site
    settings = make_settings(tmp_path / "kb", KB_FETCH_PORTS=str(port))
    _seed_candidates(settings, base)
    fetch = make_fetcher(settings, allow_hosts=[("127.0.0.1", port)]).fetch
    async with serving(settings, fetch=fetch) as url, client(url) as c:
        refused = await c.call_tool("import_web_source", {"source_id": "web-1"})
        with pytest.raises(MCPError):
            await c.call_tool("import_web_source", {"source_id": "web-1", "url": f"{base}/varn"})
        bad = await c.call_tool("import_web_source", {"source_id": "web-9"})
        missing = await c.call_tool("import_web_source", {"source_id": "web-4"})
    assert refused.structured_content["status"] == "refused"
    assert refused.structured_content["message"].startswith("nothing was imported: this client cannot ask")
    assert bad.is_error and missing.is_error and "web-4 is not in" in missing.content[0].text
    assert seen == [] and not settings.inbox.exists()  # nothing fetched, nothing put in the inbox


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (types.ElicitResult(action="decline"), "the owner declined or did not answer"),
        (types.ElicitResult(action="cancel"), "the owner declined or did not answer"),
        (types.ElicitResult(action="accept", content={"import_page": False}), "the owner did not choose it"),
    ],
)
async def test_an_import_is_refused_when_the_owner_declines(tmp_path, varn_site, reply, said):
    base, port, seen = varn_site
    settings = make_settings(tmp_path / "kb", KB_FETCH_PORTS=str(port))
    _seed_candidates(settings, base)
    asked: list[str] = []

    async def owner(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return reply

    fetch = make_fetcher(settings, allow_hosts=[("127.0.0.1", port)]).fetch
    async with serving(settings, fetch=fetch) as url, client(url, elicitation_callback=owner) as c:
        declined = await c.call_tool("import_web_source", {"source_id": "web-1"})
    assert declined.structured_content["status"] == "refused"
    assert declined.structured_content["message"] == f"nothing was imported: {said}"
    assert asked and "The Varn valley" in asked[0] and "127.0.0.1" in asked[0] and f"{base}/varn" in asked[0]
    assert seen == [] and not settings.inbox.exists()


async def test_an_import_the_owner_accepts_is_fetched_indexed_and_found(tmp_path, varn_site):
    from daemon.main import background
    from knowledge.model.tokenizer import ApproxCounter

    base, port, seen = varn_site
    settings = make_settings(tmp_path / "kb", KB_FETCH_PORTS=str(port), KB_SETTLE_S="0.1")
    _seed_candidates(settings, base)

    async def accept(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"import_page": True})

    fetch = make_fetcher(settings, allow_hosts=[("127.0.0.1", port)]).fetch
    with background(settings, ApproxCounter()):
        async with serving(settings, fetch=fetch) as url, client(url, elicitation_callback=accept) as c:
            done = await c.call_tool("import_web_source", {"source_id": "web-1"})
            found = await c.call_tool("search", {"query": "How deep is Lake Quillan?", "limit": 1})
    assert done.structured_content["status"] == "indexed", done.content
    assert seen == ["/varn"]
    best = found.structured_content["passages"][0]
    assert best["url"] == f"{base}/varn" and "317 metres deep" in best["text"]


async def test_web_search_lists_candidates_and_imports_nothing(tmp_path):
    from tests.fake_llm import ThreadedServer
    from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search

    search = FakeSearch()
    search.script["ddg"] = [
        ddg_results(
            "q", [Result("Lake Quillan depth", "https://lakes.example/quillan", "Lake Quillan is deep")]
        )
    ]
    plan = '{"needsSearch": true, "queries": [{"query": "lake quillan depth", "freshness": null, "language": "en"}]}'
    llm = FakeLLM(script=[answer(plan), answer("1: YES"), answer("[1] Lake Quillan is deep.")])
    with ThreadedServer(search, start_fake_search) as s, ThreadedFakeLLM(llm) as fake:
        settings = make_settings(tmp_path / "kb", KB_LLM_URL=fake.base_url, KB_DDG_URL=s.ddg_url)
        async with serving(settings) as url, client(url) as c:
            found = await c.call_tool("web_search", {"query": "How deep is Lake Quillan?"})
    got = found.structured_content
    assert [(c["id"], c["host"], c["url"]) for c in got["candidates"]] == [
        ("web-1", "lakes.example", "https://lakes.example/quillan")
    ]
    assert got["imported"] is False and "Nothing was imported" in got["note"]
    assert not settings.inbox.exists()  # nothing was fetched into the inbox
    assert candidate_store(settings).latest(CHAT).candidates[0].url == "https://lakes.example/quillan"


async def test_ask_answers_with_citations_and_says_why_when_the_model_is_down(kb_home, tmp_path):
    async with serving(kb_home) as url, client(url) as c:
        down = await c.call_tool("ask", {"question": "How deep is Lake Quillan?"})
    assert not down.is_error and down.structured_content["mode"] != "local"
    assert "model" in (down.structured_content["note"] or down.structured_content["text"]).lower()
    llm = FakeLLM(script=[answer("Lake Quillan is 317 metres deep [1].")])
    with ThreadedFakeLLM(llm) as fake:
        settings = make_settings(kb_home.home, KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off")
        async with serving(settings) as url, client(url) as c:
            cited = await c.call_tool(
                "ask", {"question": "How deep is Lake Quillan?", "conversation": "lakes"}
            )
    got = cited.structured_content
    assert "317 metres deep" in got["text"] and got["conversation"] == "lakes"
    assert got["citations"] and got["citations"][0]["path"].startswith("raw/lake")


async def test_kb_mcp_over_stdio_serves_its_client_and_writes_nothing_else_to_stdout(kb_home):
    env = subprocess_env(KB_HOME=str(kb_home.home), KB_LLM_URL=kb_home.llm_url, KB_LOG_LEVEL="debug")
    params = StdioServerParameters(command=sys.executable, args=["-m", "cli", "mcp"], env=env,
                                   cwd=str(Path(__file__).resolve().parents[1]))  # fmt: skip
    unreadable: list[Exception] = []

    async def on_message(message: object) -> None:  # a line on stdout that is not protocol arrives here
        if isinstance(message, Exception):
            unreadable.append(message)

    info = types.Implementation(name="stdio-test", version="1")
    async with Client(params, client_info=info, message_handler=on_message) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        found = await c.call_tool("search", {"query": "How deep is Lake Quillan?"})
    assert unreadable == []
    assert "search" in tools and "317 metres deep" in found.structured_content["passages"][0]["text"]
    logged = [json.loads(line) for line in kb_home.log_path.read_text(encoding="utf-8").splitlines()]
    calls = [e for e in logged if e.get("event") == "mcp.call"]
    assert calls and calls[-1]["tool"] == "search" and calls[-1]["client"] == "stdio-test"


async def test_without_elicitation_the_owner_is_asked_in_telegram_and_the_tap_imports(tmp_path, varn_site):
    from tests.bot_env import OWNER, ScriptedTranscriber, running_bot

    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, base):
        _seed_candidates(env.settings, base)
        await env.say("/help")  # the owner has talked to the bot before (a bot cannot open a chat)
        await env.bot_said(lambda c: "answers from your own documents" in c.params["text"])
        info = types.Implementation(name="Claude Desktop", version="1")
        async with serving(env.settings) as url, client(url, client_info=info) as c:
            waiting = await c.call_tool("import_web_source", {"source_id": "web-1"})
            offer = await env.bot_said(
                lambda c: c.method == "sendMessage" and "Claude Desktop" in c.params["text"]
            )
            assert not settings_inbox_has_files(env.settings)  # nothing imported before the tap
            button = offer.params["reply_markup"]["inline_keyboard"][0][0]
            env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], button["callback_data"])
            await env.bot_said(lambda c: c.method == "editMessageText" and "indexed" in c.params["text"], 30)
            found = await c.call_tool("search", {"query": "How deep is Lake Quillan?", "limit": 1})
    assert (
        waiting.structured_content["status"] == "waiting"
        and "owner's Telegram chat" in waiting.content[0].text
    )
    assert offer.params["chat_id"] == OWNER and "Claude Desktop" in offer.params["text"]
    assert f"{base}/varn" in offer.params["text"] and button["text"].startswith(
        "web-1 · 127.0.0.1 — The Varn valley"
    )
    best = found.structured_content["passages"][0]
    assert best["url"] == f"{base}/varn" and "317 metres deep" in best["text"]


def settings_inbox_has_files(settings: Settings) -> bool:
    """Whether anything (but folders) is in the inbox."""
    return settings.inbox.exists() and any(p.is_file() for p in settings.inbox.iterdir())


async def test_a_damaged_index_does_not_stop_the_server_and_search_says_the_fix(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")
    settings.index_path.parent.mkdir(parents=True)
    settings.index_path.write_bytes(b"not an index at all, " * 200)
    async with serving(settings) as url, client(url) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        found = await c.call_tool("search", {"query": "How deep is Lake Quillan?"})
    assert "search" in tools
    assert found.is_error and "damaged" in found.content[0].text and "kb reindex" in found.content[0].text


async def test_each_http_answer_is_sent_at_once_not_held_for_an_acknowledgement():
    """Nagle's algorithm is off on every connection kb mcp --http accepts (uvicorn serves its sockets through
    asyncio's server, as here): a response's body never waits for the client to acknowledge its headers."""
    sockets = loopback_sockets(0)
    accepted: list[int] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    servers = [await asyncio.start_server(on_connection, sock=s) for s in sockets]
    try:
        for s in sockets:
            host, port = s.getsockname()[:2]
            async with asyncio.timeout(10):
                reader, writer = await asyncio.open_connection(host, port)
                await reader.read()  # the server has closed it
                writer.close()
                await writer.wait_closed()
    finally:
        for server in servers:
            server.close()
    assert accepted and all(accepted)


def test_kb_mcp_starts_without_the_converters_libraries_and_warms_before_the_sdk():
    """What kb mcp imports before it serves: the converters' libraries are left to a conversion, and the SDK
    is imported once the knowledge base has begun warming (mcpserver.main does not import it)."""
    probe = (
        "import sys, cli.main, mcpserver.main, mcpserver.service\n"
        "before = sorted(m for m in ('mcp', 'trafilatura', 'pypdf', 'PIL', 'yaml') if m in sys.modules)\n"
        "import mcpserver.app\n"
        "print(before, sorted(m for m in ('trafilatura', 'pypdf', 'PIL', 'yaml') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(), cwd=str(Path(__file__).resolve().parents[1]))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
