"""An index made before a new web import replaced the old holds a document per import of the same page;
the first writer to open it keeps the newest import and puts the older ones in the trash, as kb rm does
(migration 8 notes the repair, done once). Real SQLite, real raw files and trash, kb's own commands."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from knowledge.config import Settings
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.store.index import Index
from knowledge.store.schema import WEB_DUPLICATES
from tests.conftest import ingest_texts, make_settings

URL = "https://varn.example/lake"
OLD = "Lake Quillan was thought to be 290 metres deep, said the ferryman Orlo."
NEW = "Lake Quillan is 317 metres deep, the survey of the Varn valley found."
OTHER = {"geese.md": "# Geese\n\nThe geese rest by the mill in autumn.\n"}


def page(text: str) -> bytes:
    return f"<html><head><title>Lake Quillan</title></head><body><article><p>{text}</p></article></body></html>".encode()


def import_page(ingestor: Ingestor, settings: Settings, name: str, text: str, url: str) -> str:
    """A page handed to the inbox with its sidecar, as a web import does; its document id."""
    (settings.inbox / name).write_bytes(page(text))
    (settings.inbox / f"{name}.source.json").write_text(json.dumps({"source_url": url, "charset": "utf-8"}))
    outcome = ingestor.ingest(settings.inbox / name)
    assert outcome.status == "indexed", outcome
    return outcome.doc_id


def old_index(tmp_path: Path) -> tuple[Settings, str, str]:
    """A knowledge base as kb left it before an import replaced the earlier version of its page: the page
    imported twice (a day apart), each import its own document, and an unrelated note; its index recorded
    migrations 1 to 7. The older document's id, the newer one's."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, OTHER)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter(), clock=lambda: datetime(2025, 3, 1, tzinfo=UTC))
        older = import_page(ingestor, settings, "lake.html", OLD, URL)
        ingestor.clock = lambda: datetime(2025, 3, 2, tzinfo=UTC)
        # The second import under another address (today's kb would replace the first), then given the
        # page's own: its raw file says so and is indexed again from it, as kb made such a document.
        newer = import_page(ingestor, settings, "lake-1.html", NEW, URL + "?again")
        raw_name = index.document(newer).raw_path.removeprefix("raw/")
        raw = settings.raw / raw_name
        raw.write_text(raw.read_text().replace(URL + "?again", URL))
        assert ingestor.sync_raw(raw_name) == "indexed"
        assert [d.id for d in index.documents_by_url(URL)] == [newer, older]
        chunks = index.conn.execute("SELECT rowid, text_sha256 FROM chunks").fetchall()
        vectors = [(rowid, sha, "latin", bytes([rowid % 256]) * 16) for rowid, sha in chunks]
        assert index.store_vectors("stand-in", vectors) == len(chunks)  # each passage's vector, as embedded
        index.conn.execute("DELETE FROM migrations WHERE n = 8")  # made before migration 8
        assert index.meta(WEB_DUPLICATES) is None
    return settings, older, newer


def rows(settings: Settings) -> dict[str, list]:
    """Every table that says what the index holds, row by row."""
    with Index(settings.index_path, readonly=True) as index:
        conn = index.conn
        return {
            "documents": conn.execute("SELECT * FROM documents ORDER BY id").fetchall(),
            "chunks": conn.execute("SELECT rowid, * FROM chunks ORDER BY rowid").fetchall(),
            "fts": conn.execute("SELECT rowid, title, body FROM chunks_fts ORDER BY rowid").fetchall(),
            "vectors": conn.execute("SELECT rowid, model, vec FROM chunk_vectors ORDER BY rowid").fetchall(),
            "notes": conn.execute("SELECT * FROM document_notes ORDER BY document_id").fetchall(),
        }


def without(held: dict[str, list], doc_id: str) -> dict[str, list]:
    """What the index held, less one document's rows (its chunks' rowids found in ``held``)."""
    gone = {r[0] for r in held["chunks"] if r[3] == doc_id}
    return {
        "documents": [r for r in held["documents"] if r[0] != doc_id],
        "chunks": [r for r in held["chunks"] if r[0] not in gone],
        "fts": [r for r in held["fts"] if r[0] not in gone],
        "vectors": [r for r in held["vectors"] if r[0] not in gone],
        "notes": [r for r in held["notes"] if r[0] != doc_id],
    }


def found(run_kb, settings: Settings, query: str) -> list[dict]:
    done = run_kb("--home", str(settings.home), "search", "--json", "-k", "10", query)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_first_writer_keeps_the_newest_import_of_a_page_and_trashes_the_older(tmp_path, run_kb):
    settings, older, newer = old_index(tmp_path)
    assert {r["document_id"] for r in found(run_kb, settings, "ferryman Orlo 290 metres")} >= {older}
    before = rows(settings)
    older_raw = settings.raw / next(r for r in before["documents"] if r[0] == older)[1].removeprefix("raw/")
    newer_raw = settings.raw / next(r for r in before["documents"] if r[0] == newer)[1].removeprefix("raw/")
    kept_bytes = newer_raw.read_bytes()

    (tmp_path / "heron.md").write_text("# Heron\n\nThe heron fishes at dawn.\n")
    done = run_kb("--home", str(settings.home), "ingest", str(tmp_path / "heron.md"))  # a writer opens it
    assert done.returncode == 0, done.stderr

    after = rows(settings)
    assert len(after["vectors"]) == len(before["vectors"]) - 1  # the older import's passage's went with it
    heron = [r[0] for r in after["documents"] if r[0] not in {d[0] for d in before["documents"]}]
    assert len(heron) == 1  # the file just ingested; nothing else is new
    assert without(after, heron[0]) == without(before, older)  # the older import gone, nothing else changed
    with Index(settings.index_path, readonly=True) as index:
        assert [d.id for d in index.documents_by_url(URL)] == [newer]
        assert index.meta(WEB_DUPLICATES) is None
    hits = found(run_kb, settings, "ferryman Orlo 290 metres")
    assert older not in {r["document_id"] for r in hits} and not any("Orlo" in r["text"] for r in hits)
    assert [r["document_id"] for r in found(run_kb, settings, "survey Varn valley 317")][0] == newer
    assert not older_raw.exists() and newer_raw.read_bytes() == kept_bytes
    trashed = run_kb("--home", str(settings.home), "restore").stdout  # in the trash, as kb rm leaves it
    assert older in trashed and "Lake Quillan" in trashed
    [entry] = [p for p in settings.trash.iterdir() if p.is_dir()]
    assert OLD in (entry / "raw" / older_raw.name).read_text()
    events = [json.loads(line) for line in settings.log_path.read_text(encoding="utf-8").splitlines()]
    merged = [e for e in events if e["event"] == "ingest.web_duplicates_merged"]
    assert [(e["urls"], e["forgotten"], e["failed"]) for e in merged] == [(1, 1, 0)]
    assert [e["doc_id"] for e in events if e["event"] == "ingest.web_duplicate_forgotten"] == [older]

    # Done once: the older version brought back from the trash by the owner stays.
    trash_id = entry.name
    assert run_kb("--home", str(settings.home), "restore", trash_id).returncode == 0
    (tmp_path / "crane.md").write_text("# Crane\n\nThe crane dances in spring.\n")
    assert run_kb("--home", str(settings.home), "ingest", str(tmp_path / "crane.md")).returncode == 0
    with Index(settings.index_path, readonly=True) as index:
        assert {d.id for d in index.documents_by_url(URL)} == {newer, older}


def test_a_new_index_owes_no_merge_and_an_old_one_without_duplicates_neither(tmp_path, run_kb):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, OTHER)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        import_page(ingestor, settings, "lake.html", NEW, URL)
        import_page(ingestor, settings, "lake-2.html", OLD, URL + "/other")
        index.conn.execute("DELETE FROM migrations WHERE n = 8")
    before = rows(settings)
    with Index(settings.index_path) as index:  # migration 8 runs: two URLs, one document each
        assert index.meta(WEB_DUPLICATES) is None
    assert rows(settings) == before
    assert not settings.trash.exists() or not any(settings.trash.iterdir())
