"""Search kept to the notes carrying a tag: kb search --tag TAG, kb ask --tag TAG, with --in NAME, the MCP
search's ``tag``. Real SQLite, real folders added with kb sources add, notes in the inbox beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import free_port
from tests.test_mcp import client, serving
from tests.test_scope import kb_with

QUESTION = "how much is the deposit"
INBOX = {
    "gym.md": "# Gym\n\nThe gym deposit is 500 baht; the deposit comes back with the card. #sport\n",
    "storage.md": "# Storage\n\n#rent The storage unit needs a deposit of 1,000 baht.\n",
}
VAULT = {
    "lease.md": "---\ntags: [rent]\n---\n\n# Lease\n\nThe flat's deposit is two months of rent.\n",
    "garage.md": "# Garage\n\nThe garage deposit is one month. #Rent/garage\n",
    "garden.md": "# Garden\n\nThe roses want pruning in March. #garden\n",
}
DOCS = {"office.md": "---\ntags: '#rent'\n---\n# Office\n\nThe office deposit is three months.\n"}


@pytest.fixture
def home(tmp_path: Path, run_kb) -> Path:
    return kb_with(tmp_path, run_kb, INBOX, {"vault": VAULT, "docs": DOCS})


def titles(run_kb, home: Path, *args: str, question: str = QUESTION) -> list[str]:
    done = run_kb("--home", str(home), "search", "--json", "-k", "10", *args, question)
    assert done.returncode == 0, done.stderr
    return [r["title"] for r in json.loads(done.stdout)]


def test_a_tag_keeps_the_search_to_the_notes_carrying_it(run_kb, home):
    everywhere = titles(run_kb, home)
    assert everywhere[0] == "Gym" and "Garden" not in everywhere
    rent = titles(run_kb, home, "--tag", "rent")
    assert set(rent) == {"Lease", "Garage", "Office", "Storage"}  # #Rent/garage is nested in #rent
    for spelling in ("#rent", "RENT", "#Rent"):
        assert titles(run_kb, home, "--tag", spelling) == rent
    assert titles(run_kb, home, "--tag", "rent/garage") == ["Garage"]
    assert titles(run_kb, home, "--tag", "sport") == ["Gym"]


def test_a_tag_and_a_source_together_keep_both(run_kb, home):
    assert set(titles(run_kb, home, "--in", "vault", "--tag", "rent")) == {"Lease", "Garage"}
    assert titles(run_kb, home, "--in", "docs", "--tag", "rent") == ["Office"]
    assert titles(run_kb, home, "--in", "docs", "--tag", "garden") == []  # a tag of another source's notes


def test_an_unknown_tag_is_refused_naming_the_tags_used_most(run_kb, home):
    for command in ("search", "ask"):
        refused = run_kb("--home", str(home), command, "--tag", "rnet", QUESTION)
        assert refused.returncode == 2 and refused.stdout == ""
        assert (
            "no document carries the tag #rnet; the tags used most are: "
            "#rent (3), #garden (1), #Rent/garage (1), #sport (1)" in refused.stderr
        )
    helped = run_kb("--home", str(home), "search", "--help").stdout
    assert "--tag TAG" in helped and "search only the notes tagged TAG" in helped
    assert "--tag TAG" in run_kb("--home", str(home), "ask", "--help").stdout


def test_a_tag_in_a_knowledge_base_without_tags_is_refused(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"plain.md": "# Plain\n\nNo tags here.\n"})
    refused = run_kb("--home", str(home), "search", "--tag", "rent", "tags")
    assert refused.returncode == 2
    assert "no document carries the tag #rent; the tags used most are: -" in refused.stderr
    empty = run_kb("--home", str(tmp_path / "empty"), "ask", "--tag", "rent", "tags")
    assert empty.returncode == 2 and "the tags used most are: -" in empty.stderr


def test_ask_with_a_tag_is_answered_from_those_notes_only(run_kb, home):
    env = {"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"}  # the model is down: the passages are shown
    done = run_kb("--home", str(home), "ask", "--json", "--tag", "rent", QUESTION, env=env)
    assert done.returncode == 0, done.stderr
    passages = json.loads(done.stdout)["passages"]
    assert passages and {p["title"] for p in passages} <= {"Lease", "Garage", "Office", "Storage"}


async def test_the_mcp_search_takes_a_tag(home):
    settings = make_settings(home, KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")
    async with serving(settings) as url, client(url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        schema = tools["search"].input_schema["properties"]
        assert set(schema) == {"query", "limit", "source", "tag"} and "tag" in schema["tag"]["description"]
        assert "tags" in tools["search"].output_schema["$defs"]["Passage"]["required"]
        found = await c.call_tool(
            "search", {"query": QUESTION, "limit": 10, "tag": "#rent", "source": "vault"}
        )
        passages = found.structured_content["passages"]
        assert {p["title"] for p in passages} == {"Lease", "Garage"}
        assert {tuple(p["tags"]) for p in passages} == {("rent",), ("Rent/garage",)}
        assert "#Rent/garage" in found.content[0].text
        refused = await c.call_tool("search", {"query": QUESTION, "tag": "rnet"})
        assert refused.is_error and "no document carries the tag #rnet" in refused.content[0].text
        assert "#rent (3)" in refused.content[0].text
