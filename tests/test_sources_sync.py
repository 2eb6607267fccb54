"""A folder source kept in sync, on a real folder and a real index: edits, moves, deletes, what is left
out and why, a restart that reads nothing, and the owner's folder never written."""

import os
from pathlib import Path

import pytest

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import UrlEmbedder
from knowledge.retrieval.search import search
from knowledge.sources import state
from knowledge.sources.registry import Source
from knowledge.sources.sync import SourceSync
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.sources_vault import make_vault, snapshot


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return make_vault(tmp_path / "Vault")


@pytest.fixture
def kb(tmp_path: Path, fake_embeddings):
    settings = make_settings(tmp_path / "kb")
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        yield SourceSync(ingestor), index, UrlEmbedder(fake_embeddings.base_url, "bag-of-words")


def top(index: Index, query: str) -> str:
    hits = search(index, query, k=1)
    return f"{hits[0].raw_path}:{hits[0].start_line}-{hits[0].end_line}" if hits else ""


def test_a_vault_is_indexed_in_place_and_cited_by_its_own_path_and_lines(kb, vault):
    sync, index, embedder = kb
    before = snapshot(vault)
    tally = sync.sync_source(Source("vault", vault))
    assert tally.indexed == 4 and tally.failed == 0
    # the NAS note's sentence is on line 8 of the file itself (front matter and heading before it)
    assert top(index, "how many drives does the NAS take") == "vault:Projects/NAS upgrade.md:6-10"
    doc = next(d for d in index.documents() if d.raw_path == "vault:Projects/NAS upgrade.md")
    assert doc.title == "NAS upgrade"
    chunk = index.chunks_of(doc.id, [1])[0]
    assert "title:" not in chunk.text and "tags:" not in chunk.text  # front matter is not text
    assert snapshot(vault) == before  # nothing written, moved or touched in the owner's folder
    assert not any(p.name.startswith(".kb") for p in vault.rglob("*"))


def test_a_second_sync_of_unchanged_files_reads_and_embeds_nothing(kb, vault):
    sync, index, embedder = kb
    sync.sync_source(Source("vault", vault))
    assert embed_missing(index, embedder) > 0
    again = sync.sync_source(Source("vault", vault))
    assert (again.unchanged, again.indexed, again.touched, again.moved, again.forgotten) == (4, 0, 0, 0, 0)
    assert embed_missing(index, embedder) == 0


def test_an_edit_replaces_the_text_and_only_changed_chunks_are_embedded(kb, vault):
    sync, index, embedder = kb
    vault_source = Source("vault", vault)
    long_note = "# Garden\n\n" + "\n\n".join(
        f"Bed {n} holds {n * 3} tulip bulbs planted in row {n}." for n in range(60)
    )
    (vault / "garden.md").write_text(long_note + "\n", encoding="utf-8")
    sync.sync_source(vault_source)
    doc_id = state.document_for(index.conn, "vault:garden.md")
    chunks = index.document(doc_id).chunk_count
    assert chunks > 3
    embed_missing(index, embedder)
    (vault / "garden.md").write_text(
        long_note.replace("Bed 59 holds", "Bed 59 now holds") + "\n", encoding="utf-8"
    )
    (vault / "notes.txt").write_text("The bicycle lock code changed; ask the landlord.\n", encoding="utf-8")
    tally = sync.sync_source(vault_source)
    assert tally.indexed == 2 and tally.unchanged == 3
    assert state.document_for(index.conn, "vault:garden.md") == doc_id  # the same document
    assert 0 < embed_missing(index, embedder) <= 3  # the changed chunks and the new note only
    assert "blue notebook" not in " ".join(h.text for h in search(index, "bicycle lock code", k=5))


def test_a_rename_across_folders_keeps_the_document_and_embeds_nothing(kb, vault):
    sync, index, embedder = kb
    sync.sync_source(Source("vault", vault))
    embed_missing(index, embedder)
    doc_id = state.document_for(index.conn, "vault:Recipes/bread.md")
    (vault / "Archive").mkdir()
    os.rename(vault / "Recipes" / "bread.md", vault / "Archive" / "sourdough.md")
    tally = sync.sync_source(Source("vault", vault))
    assert (tally.moved, tally.indexed, tally.forgotten) == (1, 0, 0)
    assert state.document_for(index.conn, "vault:Archive/sourdough.md") == doc_id
    assert top(index, "what flour feeds the starter").startswith("vault:Archive/sourdough.md:")
    assert embed_missing(index, embedder) == 0


def test_a_deleted_file_is_forgotten_not_trashed(kb, vault):
    sync, index, _ = kb
    sync.sync_source(Source("vault", vault))
    (vault / "Daily" / "2026-12-01.md").unlink()
    tally = sync.sync_source(Source("vault", vault))
    assert tally.forgotten == 1
    assert "plumber" not in " ".join(h.text for h in search(index, "when does the plumber come", k=5))
    assert index.document_count() == 3
    assert not sync.ingestor.settings.trash.exists() or not any(sync.ingestor.settings.trash.iterdir())


def test_what_is_left_out_is_said_with_its_reason(kb, vault, tmp_path):
    sync, index, _ = kb
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "workspace.json").write_text('{"main": 1}')
    (vault / "Templates").mkdir()
    (vault / "Templates" / "daily.md").write_text("# {{date}}\n")
    (vault / "logo.bin").write_bytes(b"PK\x03\x04" + bytes(200))
    outside = tmp_path / "secret.md"
    outside.write_text("The safe combination is 4-8-15.\n")
    (vault / "linked secret.md").symlink_to(outside)
    (vault / "bread.sync-conflict-20261201-120000-ABC.md").write_text("# Sourdough (conflict)\n")
    from knowledge.sources.rules import Rules
    from knowledge.sources.scan import scan

    source = Source("vault", vault, exclude=("Templates/",))
    found = scan(vault, Rules(source.include, source.exclude))
    reasons = {x.path: (x.reason, x.rule) for x in found.left_out}
    assert reasons[".obsidian/"] == ("hidden", "")
    assert reasons["Templates/"] == ("excluded", "Templates/")
    assert reasons["linked secret.md"] == ("link-out", "")
    assert reasons["bread.sync-conflict-20261201-120000-ABC.md"] == ("conflict", "")
    tally = sync.sync_source(source)
    assert tally.indexed == 4 and tally.skipped == 1  # logo.bin: kb cannot read it
    problems = {k.path: k.reason for k in state.problems(index.conn, "vault")}
    assert problems == {"logo.bin": "binary"}
    assert "4-8-15" not in " ".join(h.text for h in search(index, "safe combination", k=5))


def test_forgetting_a_source_removes_its_documents_and_leaves_its_files(kb, vault):
    sync, index, _ = kb
    before = snapshot(vault)
    sync.sync_source(Source("vault", vault))
    assert sync.forget_source("vault") == 4
    assert index.document_count() == 0 and state.known(index.conn, "vault") == {}
    assert snapshot(vault) == before


def test_a_rebuild_from_raw_keeps_the_sources_documents(kb, vault):
    sync, index, embedder = kb
    sync.sync_source(Source("vault", vault))
    embed_missing(index, embedder)
    sync.ingestor.reconcile_raw()
    sync.ingestor.reindex()
    assert index.document_count() == 4
    assert top(index, "how many drives does the NAS take") == "vault:Projects/NAS upgrade.md:6-10"
    assert embed_missing(index, embedder) == 0


def test_a_source_folder_that_cannot_be_listed_keeps_every_document(kb, vault, monkeypatch):
    """A folder kb may no longer list (macOS's Full Disk Access withdrawn, a network share's permissions)
    is not a folder emptied: its notes stay, the walk says it did not see the whole folder."""
    import knowledge.sources.scan as scan_module

    sync, index, _ = kb
    assert sync.sync_source(Source("vault", vault)).indexed == 4
    listed = os.scandir

    def refused(path):
        if Path(path) == vault.resolve():
            raise PermissionError(13, "Operation not permitted", str(path))
        return listed(path)

    monkeypatch.setattr(scan_module.os, "scandir", refused)
    tally = sync.sync_source(Source("vault", vault))
    assert (tally.forgotten, tally.whole) == (0, False)
    assert len(index.documents()) == 4
