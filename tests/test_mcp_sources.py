"""The MCP tools on the owner's folder sources, through the real server (the SDK's client over loopback
HTTP): a passage carries what kb search --json carries (source, path, lines, front-matter dates, what opens
it), ``get`` reads the cited lines of the owner's file itself, ``ask`` cites by source and path. Real
folders added with kb sources add, a real index."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.fake_llm import free_port
from tests.test_mcp import client, serving
from tests.test_scope import kb_with

QUESTION = "when does the grey heron nest by the mill pond"
HERON = (
    "---\ncreated: 2024-03-01\nupdated: 2024-03-05T18:20\ntags: [birds]\n---\n\n# Heron notes\n\n"
    "Spring came late.\n\nThe grey heron nests by the mill pond in March.\n"
)
INBOX = {"geese.md": "# Geese\n\nThe geese rest by the mill in autumn.\n"}
VAULT = {"Birds/heron notes.md": HERON, "garden.md": "# Garden\n\nThe roses want pruning.\n"}
DOCS = {"pond.md": "# Pond\n\nThe mill pond is cleaned when the heron has gone.\n"}
KEYS = ("source", "path", "open", "dates", "start_line", "end_line")


@pytest.fixture
def home(tmp_path: Path, run_kb) -> Path:
    """An inbox note; an Obsidian vault (a folder holding .obsidian/) and a plain folder as sources."""
    home = kb_with(tmp_path, run_kb, INBOX, {"vault": VAULT, "docs": DOCS})
    (tmp_path / "vault" / ".obsidian").mkdir()
    return home


def down(home: Path):
    return make_settings(home, KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off")


async def test_search_gives_a_source_passage_what_kb_search_json_gives(tmp_path, home, run_kb):
    args = ("--home", str(home), "search", "--json", "-k", "5", QUESTION)
    cli = json.loads((await asyncio.to_thread(run_kb, *args)).stdout)  # kb runs its own event loop
    async with serving(down(home)) as url, client(url) as c:
        found = await c.call_tool("search", {"query": QUESTION, "limit": 5})
        tools = {t.name: t for t in (await c.list_tools()).tools}
    passages = {p["title"]: p for p in found.structured_content["passages"]}
    heron = passages["Heron notes"]
    assert heron["source"] == "vault" and heron["path"] == "Birds/heron notes.md"
    assert heron["open"] == "obsidian://open?vault=vault&file=Birds%2Fheron%20notes.md"
    assert heron["dates"] == {"created": "2024-03-01", "updated": "2024-03-05T18:20"}
    lines = (tmp_path / "vault" / "Birds" / "heron notes.md").read_text().splitlines()
    assert "nests by the mill pond" in "\n".join(lines[heron["start_line"] - 1 : heron["end_line"]])
    pond = passages["Pond"]
    assert (pond["source"], pond["path"], pond["open"]) == (
        "docs",
        "pond.md",
        str(tmp_path / "docs" / "pond.md"),
    )
    geese = passages["Geese"]  # the inbox's: its text in the knowledge base, nothing to open
    assert geese["source"] is None and geese["path"].startswith("raw/geese") and geese["open"] is None
    assert geese["dates"] is None
    # The same values as kb search --json, passage by passage (a key it leaves out is null here).
    assert [p["chunk_id"] for p in found.structured_content["passages"]] == [r["chunk_id"] for r in cli]
    for r in cli:
        mine = next(p for p in found.structured_content["passages"] if p["chunk_id"] == r["chunk_id"])
        assert {k: mine[k] for k in KEYS if k in r} == {k: r[k] for k in KEYS if k in r}
        assert all(mine[k] is None for k in KEYS if k not in r and k != "path")
    assert "open: obsidian://open?vault=vault&file=Birds%2Fheron%20notes.md" in found.content[0].text
    assert "vault:Birds/heron notes.md:" in found.content[0].text
    schema = tools["search"].output_schema["$defs"]["Passage"]["properties"]
    assert {"source", "path", "open", "dates", "start_line", "end_line"} <= set(schema)
    assert "obsidian://" in schema["open"]["description"]


async def test_get_reads_the_cited_lines_of_the_owners_file_and_ask_cites_by_source(tmp_path, home):
    async with serving(down(home)) as url, client(url) as c:
        found = await c.call_tool("search", {"query": QUESTION, "limit": 5, "source": "vault"})
        heron = found.structured_content["passages"][0]
        got = await c.call_tool(
            "get",
            {
                "document_id": heron["document_id"],
                "start_line": heron["start_line"],
                "end_line": heron["end_line"],
            },
        )
        whole = await c.call_tool("get", {"document_id": heron["document_id"]})
        asked = await c.call_tool("ask", {"question": f"in:vault {QUESTION}"})
    lines = (tmp_path / "vault" / "Birds" / "heron notes.md").read_text().splitlines()
    assert got.structured_content["text"] == "\n".join(lines[heron["start_line"] - 1 : heron["end_line"]])
    assert "The grey heron nests by the mill pond in March." in got.structured_content["text"]
    assert whole.structured_content["total_lines"] == len(lines)  # the file's lines, front matter and all
    assert (got.structured_content["source"], got.structured_content["path"]) == (
        "vault",
        "Birds/heron notes.md",
    )
    assert got.structured_content["open"] == heron["open"]
    cited = asked.structured_content["citations"]
    assert cited and cited[0]["source"] == "vault" and cited[0]["path"] == "Birds/heron notes.md"
    assert cited[0]["open"] == heron["open"]
    assert "vault:Birds/heron notes.md:" in asked.content[0].text
