"""An Obsidian vault as the owner keeps it, indexed in place and dropped in the inbox: front matter is
metadata (the note is found by its aliases and description, never by its YAML), links read as their
text, tags are kept, hostile front matter costs nothing but itself. Real folders, real SQLite, the CLI."""

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import structlog

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import UrlEmbedder
from knowledge.sources.registry import Source
from knowledge.sources.sync import SourceSync
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.test_scope import kb_with, search, write

LEASE = """---
title: Apartment lease
aliases: [租屋契約, Xinyi flat contract]
description: The rental agreement for the flat on Songren Road
tags: [home, "#rent"]
created: 2024-03-01
cssclasses: [widepage]
---

# Apartment lease

The landlord is [[Landlord|Mr Chen]]; two months are held until we move out. #押金
Payments go to [[Bank#Account]] on the fifth. ![[lease-scan.png]]
"""
VAULT = {
    "Home/Apartment lease.md": LEASE,
    "Garden.md": "# Garden\n\nThe roses want pruning in March. #garden #บ้าน\n",
    "Bike.md": "# Bike\n\nThe bicycle lock code is kept in the blue notebook.\n",
    "Broken.md": "---\n- a list, not a mapping\n---\n\n# Broken\n\nThe boiler is serviced every October.\n",
}


@pytest.fixture
def home(tmp_path: Path, run_kb) -> Path:
    """A knowledge base with the vault added as the source ``vault``."""
    return kb_with(tmp_path, run_kb, {}, {"vault": VAULT})


@pytest.mark.parametrize("query", ["租屋契約", "Xinyi flat contract", "rental agreement Songren Road"])
def test_a_note_is_found_first_by_its_aliases_and_description(run_kb, home, query):
    found = search(run_kb, home, query)
    assert found and found[0]["path"] == "Home/Apartment lease.md"
    assert found[0]["start_line"] == 10  # its text's first line in the file: the front matter is not text
    assert "租屋契約" not in found[0]["text"] and "aliases" not in found[0]["text"]


def test_front_matter_is_never_text(run_kb, home):
    for query in ("cssclasses widepage", "created 2024-03-01"):
        assert all(
            "widepage" not in r["text"] and "created" not in r["text"] for r in search(run_kb, home, query)
        )
    assert search(run_kb, home, "widepage") == []


def test_links_read_as_their_text_and_tags_come_with_each_passage(run_kb, home):
    lease = search(run_kb, home, "who is the landlord, where do payments go")[0]
    assert lease["path"] == "Home/Apartment lease.md"
    assert "The landlord is Mr Chen;" in lease["text"] and "Payments go to Bank > Account" in lease["text"]
    assert "lease-scan.png" in lease["text"] and "[[" not in lease["text"]
    assert lease["tags"] == ["home", "rent", "押金"]
    garden = search(run_kb, home, "pruning roses")[0]
    assert garden["tags"] == ["garden", "บ้าน"]
    assert search(run_kb, home, "bicycle lock code")[0]["tags"] == []


def test_a_notes_dates_come_with_its_passages(tmp_path, run_kb):
    dated = {
        "Trip.md": "---\ndate: 2025-07-14\ncreated: 2025-06-30 21:05\nmodified: 2025-07-20T08:00:00+02:00\n---\n\n"
        "# Trip\n\nThe ferry to the island leaves at seven.\n",
        "Typo.md": "---\ntitle: Typo\nupdated: 2025-02-30\ntags: [trip]\n---\n\nThe ferry back is at nine.\n",
    }
    home = kb_with(tmp_path, run_kb, {}, {"vault": {**VAULT, **dated}})
    trip = search(run_kb, home, "ferry to the island")[0]
    assert trip["path"] == "Trip.md"
    assert trip["dates"] == {
        "date": "2025-07-14",
        "created": "2025-06-30T21:05",
        "updated": "2025-07-20T08:00+02:00",
    }
    typo = search(run_kb, home, "ferry back nine")[0]
    assert (
        typo["title"] == "Typo" and typo["tags"] == ["trip"] and "dates" not in typo
    )  # one bad date costs itself
    assert "dates" not in search(run_kb, home, "bicycle lock code")[0]
    assert all("2025" not in r["text"] for r in search(run_kb, home, "2025-07-14"))  # never text


def test_hostile_front_matter_is_ignored_and_said_and_the_body_indexed(tmp_path):
    settings = make_settings(tmp_path / "kb")
    vault = write(tmp_path / "Vault", VAULT)
    with Index(settings.index_path) as index, structlog.testing.capture_logs() as logs:
        SourceSync(Ingestor(settings, index, ApproxCounter())).sync_source(Source("vault", vault))
        broken = next(d for d in index.documents() if d.raw_path == "vault:Broken.md")
        assert broken.title == "Broken"
        assert "boiler is serviced" in index.chunks_of(broken.id, [1])[0].text
    ignored = [e for e in logs if e["event"] == "ingest.front_matter_ignored"]
    assert [(e["file"], e["problems"]) for e in ignored] == [("vault:Broken.md", ["not-a-mapping"])]


def test_a_note_from_the_inbox_keeps_its_aliases_and_tags_through_a_rebuild(tmp_path, run_kb):
    settings = make_settings(tmp_path / "kb")
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "lease.md").write_text(LEASE, encoding="utf-8")
    with Index(settings.index_path) as index:
        outcome = Ingestor(settings, index, ApproxCounter()).ingest(settings.inbox / "lease.md")
    raw = (settings.home / "knowledge" / outcome.raw_path).read_text(encoding="utf-8")
    assert 'aliases: ["租屋契約", "Xinyi flat contract"]' in raw and 'tags: ["home", "rent"]' in raw
    assert "cssclasses" not in raw and 'created: "2024-03-01"' in raw  # its dates are kept, its CSS is not
    for when in ("ingested", "rebuilt"):
        found = search(run_kb, settings.home, "Xinyi flat contract")
        assert found[0]["title"] == "Apartment lease", when
        assert found[0]["tags"] == ["home", "rent", "押金"], when
        assert "Mr Chen" in found[0]["text"] and "[[" not in found[0]["text"], when
        assert found[0]["dates"] == {"created": "2024-03-01"}, when
        rebuilt = run_kb("--home", str(settings.home), "reindex")
        assert rebuilt.returncode == 0, rebuilt.stderr


def test_the_first_passage_is_embedded_with_the_names_and_again_when_they_change(tmp_path, fake_embeddings):
    settings = make_settings(tmp_path / "kb")
    vault = write(tmp_path / "Vault", {"lease.md": LEASE})
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        sync = SourceSync(Ingestor(settings, index, ApproxCounter()))
        sync.sync_source(Source("vault", vault))
        assert embed_missing(index, embedder) == 1

        def passages() -> list[str]:
            return [t for r in fake_embeddings.requests for t in r["input"] if "Mr Chen" in t]

        assert passages() == ["Apartment lease\n租屋契約 · Xinyi flat contract\n"
                              "The rental agreement for the flat on Songren Road\n# Apartment lease\n\n"
                              "The landlord is Mr Chen; two months are held until we move out. #押金\n"
                              "Payments go to Bank > Account on the fifth. lease-scan.png"]  # fmt: skip
        write(vault, {"lease.md": LEASE.replace("Xinyi flat contract", "Songren flat")})
        sync.sync_source(Source("vault", vault))
        assert embed_missing(index, embedder) == 1  # its text is the same: only the names changed
        assert "租屋契約 · Songren flat" in passages()[-1] and len(passages()) == 2
        write(
            vault,
            {"lease.md": LEASE.replace("fifth", "sixth").replace("Xinyi flat contract", "Songren flat")},
        )
        sync.sync_source(Source("vault", vault))
        assert embed_missing(index, embedder) == 1  # the text changed, the names did not
        assert "on the sixth" in passages()[-1] and len(passages()) == 3


def test_an_index_from_before_notes_reads_its_vault_notes_again(tmp_path, run_kb, monkeypatch):
    home = tmp_path / "kb"
    with monkeypatch.context() as before:  # a kb before notes: no names, tags nor links read
        before.setattr("knowledge.sources.sync.note_lines", lambda lines, converter, **_: (lines, None))
        kb_with(tmp_path, run_kb, {}, {"vault": VAULT})
    with closing(sqlite3.connect(home / "knowledge" / "index" / "kb.sqlite3")) as conn:  # and its schema
        conn.executescript(
            "DROP TABLE document_notes; DROP TABLE document_tags; DELETE FROM migrations WHERE n >= 5"
        )
    old = search(run_kb, home, "pruning roses")  # a reader opens it as it is
    assert old[0]["path"] == "Garden.md" and old[0]["tags"] == []
    assert search(run_kb, home, "租屋契約") == [] and search(run_kb, home, "Xinyi flat contract") == []
    assert "[[Landlord|Mr Chen]]" in search(run_kb, home, "landlord")[0]["text"]
    synced = run_kb("--home", str(home), "sources", "rescan", "vault")  # a writer: migrated, then the scan
    assert synced.returncode == 0, synced.stderr
    assert "vault: 4 indexed" in synced.stdout  # the notes were read again (a note without tags too)
    assert search(run_kb, home, "pruning roses")[0]["tags"] == ["garden", "บ้าน"]
    assert search(run_kb, home, "租屋契約")[0]["path"] == "Home/Apartment lease.md"
    assert search(run_kb, home, "租屋契約")[0]["dates"] == {"created": "2024-03-01"}
    assert "The landlord is Mr Chen;" in search(run_kb, home, "landlord")[0]["text"]
