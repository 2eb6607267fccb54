"""Search kept to one folder source: kb search --in NAME, kb ask --in NAME, the MCP search's ``source``.
Real SQLite, a real folder added with kb sources add (synced in process), the inbox's notes beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from knowledge.errors import SourceRefused
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.scope import Scope, scope_sql
from knowledge.retrieval.search import Meaning, find, rank
from knowledge.retrieval.vectors import VectorCache
from knowledge.sources.registry import Source, scope_of
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings
from tests.fake_embeddings import bag_vector
from tests.fake_llm import free_port
from tests.test_mcp import client, serving

QUESTION = "when does the grey heron fish at the pond"
INBOX = {  # the better match for the question, in the inbox
    "heron.md": "# Herons\n\nThe grey heron fishes at the pond at dawn; at the pond the grey heron fishes.\n",
}
VAULT = {  # the owner's folder: a weaker match
    "birds.md": "# Birds of the river\n\nIn winter the grey heron fishes at the weir below the mill.\n",
    "garden.md": "# Garden\n\nThe roses want pruning in March.\n",
}
FOOD = ("leek", "carrot", "tomato", "lentil", "onion", "pumpkin", "pea")
DOCS = {"manual.md": "# Pond pump\n\nThe pond pump is cleaned every spring.\n"}


class Bag:
    """An embedder in this process: hashed bags of words (texts sharing words are near)."""

    name = "bag-of-words"

    def embed(self, texts, side):
        return np.array([bag_vector(t) for t in texts], dtype=np.float32)


def write(folder: Path, files: dict[str, str]) -> Path:
    """The files (paths relative to ``folder``) written under it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def kb_with(tmp_path: Path, run_kb, inbox: dict[str, str], sources: dict[str, dict[str, str]]) -> Path:
    """A knowledge base in ``tmp_path/kb``: the ``inbox`` notes ingested, each source's files written under
    ``tmp_path/NAME`` and added with kb sources add."""
    home = tmp_path / "kb"
    if inbox:
        ingest_texts(make_settings(home), inbox)
    for name, files in sources.items():
        added = run_kb(
            "--home", str(home), "sources", "add", str(write(tmp_path / name, files)), "--name", name
        )
        assert added.returncode == 0, added.stderr
    return home


@pytest.fixture
def home(tmp_path: Path, run_kb) -> Path:
    """An inbox note, and two sources: vault (two notes) and docs (one)."""
    return kb_with(tmp_path, run_kb, INBOX, {"vault": VAULT, "docs": DOCS})


def search(run_kb, home: Path, *args: str) -> list[dict]:
    done = run_kb("--home", str(home), "search", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_in_a_source_its_fact_is_found_and_the_better_inbox_note_left_out(run_kb, home):
    everywhere = search(run_kb, home, QUESTION)
    assert everywhere[0]["title"] == "Herons" and "source" not in everywhere[0]  # the inbox's note leads
    assert "Birds of the river" in [r["title"] for r in everywhere]
    inside = search(run_kb, home, "--in", "vault", QUESTION)
    assert inside and inside[0]["title"] == "Birds of the river"
    assert inside[0]["source"] == "vault" and inside[0]["path"] == "birds.md"
    assert {r["source"] for r in inside} == {"vault"} and "Herons" not in [r["title"] for r in inside]
    birds = next(r for r in everywhere if r["title"] == "Birds of the river")
    assert set(inside[0]) == set(birds) and inside[0]["chunk_id"] == birds["chunk_id"]  # the same shape
    assert search(run_kb, home, "--in", "docs", "grey heron fishes") == []  # nothing of it in docs


def test_an_unknown_source_is_refused_naming_the_sources(run_kb, home):
    for command in ("search", "ask"):
        refused = run_kb("--home", str(home), command, "--in", "vualt", QUESTION)
        assert refused.returncode == 2 and refused.stdout == ""
        assert "there is no source named vualt; the sources are: vault, docs" in refused.stderr
    helped = run_kb("--home", str(home), "search", "--help").stdout
    assert "--in NAME" in helped and "search only the documents of the folder source NAME" in helped
    assert "--in NAME" in run_kb("--home", str(home), "ask", "--help").stdout


def test_ask_in_a_source_is_answered_from_its_documents_only(run_kb, home):
    env = {"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"}  # the model is down: the passages are shown
    done = run_kb("--home", str(home), "ask", "--json", "--in", "vault", QUESTION, env=env)
    assert done.returncode == 0, done.stderr
    passages = json.loads(done.stdout)["passages"]
    assert passages and passages[0]["title"] == "Birds of the river"
    assert all(p["title"] in ("Birds of the river", "Garden") for p in passages)
    everywhere = json.loads(run_kb("--home", str(home), "ask", "--json", QUESTION, env=env).stdout)
    assert everywhere["passages"][0]["title"] == "Herons"


def crowded(tmp_path: Path, run_kb, notes: int) -> Path:
    """``notes`` inbox notes that each match the question better than anything in the small source."""
    home = tmp_path / "kb"
    owls = {
        f"owl-{n}.md": f"# Owl note {n}\n\nThe barn owl hunts mice at dusk, note {n}.\n" for n in range(notes)
    }
    soups = {  # as many about something else: vectors are centred, so what every note shares says nothing
        f"soup-{n}.md": f"# Soup {n}\n\nStir the {FOOD[n % 7]} soup with {FOOD[(n * 3 + 1) % 7]} for {n} minutes.\n"
        for n in range(notes)
    }
    ingest_texts(make_settings(home), owls | soups)
    vault = write(tmp_path / "vault", {
        "tower.md": "# Tower\n\nA barn owl sleeps in the church tower.\n",
        "voles.md": "# Voles\n\nOwls eat voles in the long grass.\n",
        "dusk.md": "# Evenings\n\nAt dusk the bats come out over the barn.\n",
    })  # fmt: skip
    assert run_kb("--home", str(home), "sources", "add", str(vault), "--name", "vault").returncode == 0
    return home


def test_a_small_source_among_many_notes_still_gets_its_own_k_by_words(tmp_path, run_kb):
    home = crowded(tmp_path, run_kb, 45)
    question = "barn owl hunts mice at dusk"
    assert all("source" not in r for r in search(run_kb, home, "-k", "40", question))  # the top 40: inbox
    inside = search(run_kb, home, "-k", "3", "--in", "vault", question)
    assert sorted(r["path"] for r in inside) == ["dusk.md", "tower.md", "voles.md"]


def test_a_small_source_among_many_notes_still_gets_its_own_k_by_meaning(tmp_path, run_kb):
    home = crowded(tmp_path, run_kb, 50)
    question = "barn owl hunts mice at dusk"
    with Index(make_settings(home).index_path) as index:
        embed_missing(index, Bag())
        meaning = Meaning.of(Bag(), second=False)
        vault = set(Scope("vault").rowids(index.conn).tolist())
        assert len(vault) == 3
        pooled = {r.rowid for r in rank(index, question, k=3, meaning=meaning)}
        assert pooled and not pooled & vault  # a filter after the whole index's pools would keep nothing
        found = find(index, question, k=3, meaning=meaning, scope=Scope("vault"))
        assert sorted(r.raw_path for r in found.results) == [
            "vault:dusk.md",
            "vault:tower.md",
            "vault:voles.md",
        ]
        alone = find(index, question, k=3, meaning=meaning, scope=None)
        assert found.results[0].relevance <= alone.results[0].relevance  # judged as without the scope
        # past the exact search (sign codes pick the candidates): still chosen among the scope's only
        cache = VectorCache("bag-of-words", exact_max=10, prefilter=1)
        cache.refresh(index, background=meaning.background)
        inside = np.array(sorted(vault | set(range(1, 71))), dtype=np.int64)  # 73 > 64: the codes are read
        query = cache.query_vector(Bag().embed([question], "query")[0], question)
        assert cache.nearest(query, 1)[0][0] not in vault
        assert [r for r, _ in cache.nearest(query, 1, within=inside)][0] in set(inside.tolist())
        assert cache.nearest(query, 1, within=np.array(sorted(vault)))[0][0] in vault
        assert cache.nearest(query, 1, within=np.zeros(0, dtype=np.int64)) == []
        # by meaning alone: a question sharing no word with the source still gets the source's nearest
        nearest = find(index, "zzz qqq", k=2, meaning=meaning, scope=Scope("vault"))
        assert len(nearest.results) == 2 and all(r.raw_path.startswith("vault:") for r in nearest.results)


def test_the_scope_is_read_from_the_index_and_names_are_checked_against_the_registry(tmp_path):
    sources = [Source("vault", tmp_path), Source("docs", tmp_path / "d")]
    assert scope_of(sources, None) is None and scope_of(sources, "docs") == Scope("docs")
    with pytest.raises(SourceRefused) as refused:
        scope_of(sources, "vualt")
    assert refused.value.reason == "unknown" and "the sources are: vault, docs" in str(refused.value)
    assert "source_files" in scope_sql() and "ORDER BY c.rowid" in scope_sql()
    with Index(make_settings(tmp_path / "kb").index_path) as index:
        assert Scope("vault").rowids(index.conn).tolist() == []  # registered, not synced yet: nothing


@pytest.fixture
def mcp_home(home: Path):
    return make_settings(home, KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")


async def test_mcp_search_takes_a_source_and_refuses_an_unknown_one(mcp_home):
    async with serving(mcp_home) as url, client(url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        described = tools["search"].input_schema["properties"]["source"]
        assert "folder sources" in described["description"]
        inside = await c.call_tool("search", {"query": QUESTION, "source": "vault", "limit": 3})
        everywhere = await c.call_tool("search", {"query": QUESTION, "limit": 3})
        refused = await c.call_tool("search", {"query": QUESTION, "source": "vualt"})
    assert not inside.is_error
    titles = [p["title"] for p in inside.structured_content["passages"]]
    assert titles[0] == "Birds of the river" and "Herons" not in titles
    assert all(p["source"] == "vault" for p in inside.structured_content["passages"])
    assert {p["path"] for p in inside.structured_content["passages"]} <= set(VAULT)  # relative to the source
    assert everywhere.structured_content["passages"][0]["title"] == "Herons"
    assert refused.is_error and "there is no source named vualt; the sources are: vault, docs" in (
        refused.content[0].text
    )
