import sqlite3
import threading

import pytest

from knowledge.errors import IndexError_
from knowledge.store import analysis
from knowledge.store.index import Index
from knowledge.store.records import ChunkRecord, DocumentRecord, IngestRecord


def doc(n: int, chunks: int, *, word: str = "alpha") -> tuple[DocumentRecord, list[ChunkRecord]]:
    doc_id = f"doc-{n:016x}"
    rows = [
        ChunkRecord(
            f"{doc_id}-chunk-{i:04d}", doc_id, i, i, i, 3, f"{word} chunk {i} of document {n}", f"h{i}"
        )
        for i in range(1, chunks + 1)
    ]
    record = DocumentRecord(doc_id, f"raw/d{n}.md", f"Document {n}", f"d{n}.md", None, None, f"sha{n}", "text",
                            f"raw{n}", chunks, "2026-11-29T00:00:00+00:00")  # fmt: skip
    return record, rows


def fts_document_frequencies(index: Index) -> dict[str, int]:
    """df computed the slow way, from FTS5's own vocabulary."""
    index.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, chunks_fts, 'row')")
    return dict(index.conn.execute("SELECT term, doc FROM temp.v"))


def test_connection_settings(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        assert index.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert index.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        assert index.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_upsert_replaces_a_document_and_keeps_the_term_table_exact(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        for n in range(5):
            index.upsert_document(*doc(n, 3))
        index.upsert_document(*doc(2, 7, word="beta"))
        assert index.delete_document("doc-0000000000000004")
        assert not index.delete_document("doc-00000000000000ff")
        assert index.document_count() == 4
        assert index.chunk_count() == 3 * 3 + 7 == index.chunk_total()
        assert index.document("doc-0000000000000002").chunk_count == 7
        assert fts_document_frequencies(index) == dict(index.conn.execute("SELECT term, df FROM term_df"))
        assert index.integrity_errors() == []


def test_readers_never_see_half_a_document(tmp_path):
    path = tmp_path / "kb.sqlite3"
    Index(path).close()
    stop = threading.Event()
    seen: list[str] = []

    def read() -> None:
        with Index(path, readonly=True) as reader:
            while not stop.is_set():
                row = reader.conn.execute(
                    "SELECT d.chunk_count, (SELECT count(*) FROM chunks c WHERE c.document_id = d.id),"
                    ' (SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH \'"beta" OR "alpha"\')'
                    " FROM documents d"
                ).fetchone()
                if row and not (row[0] == row[1] == row[2]):
                    seen.append(str(row))

    thread = threading.Thread(target=read)
    thread.start()
    with Index(path) as writer:
        for i in range(150):
            writer.upsert_document(*doc(1, 1 + i % 9, word="alpha" if i % 2 else "beta"))
    stop.set()
    thread.join()
    assert seen == []


def test_deferred_write_upgrade_fails_but_immediate_transactions_wait(tmp_path):
    path = tmp_path / "kb.sqlite3"
    with Index(path) as a, Index(path) as b:
        a.conn.execute("BEGIN")
        a.conn.execute("SELECT count(*) FROM documents").fetchone()
        b.upsert_document(*doc(1, 1))
        with pytest.raises(sqlite3.OperationalError):  # the trap: a read upgraded to a write
            a.conn.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")
        a.conn.execute("ROLLBACK")
        a.upsert_document(*doc(2, 1))  # BEGIN IMMEDIATE: takes the lock up front
        assert b.document_count() == 2


def test_candidates_sum_idf_weights_inside_sqlite(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        index.upsert_document(*doc(1, 2, word="alpha"))
        index.upsert_document(*doc(2, 2, word="beta"))
        found = index.candidates([("alpha", 1.0), ("chunk", 0.25)], limit=10)
        assert [c.coverage for c in found] == [1.25, 1.25, 0.25, 0.25]
        assert "alpha" in found[0].body
        span = index.document_rowid_range("doc-0000000000000002")
        inside = index.candidates([("chunk", 1.0)], limit=10, rowid_range=span)
        assert {c.rowid for c in inside} == set(range(span[0], span[1] + 1))


def test_ingest_records(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        index.record_ingest(IngestRecord("a.md", "s1", "indexed", "t0", "t1", doc_id="d", chunks=2))
        index.record_ingest(
            IngestRecord("b.pdf", None, "failed", "t2", "t3", stage="convert", error="pdf-no-text")
        )
        last = index.last_ingests()
        assert [r.path for r in last] == ["b.pdf", "a.md"] and last[0].error == "pdf-no-text"


def test_readonly_index_refuses_writes_and_missing_index_says_how(tmp_path):
    with pytest.raises(IndexError_, match="kb ingest"):
        Index(tmp_path / "none.sqlite3", readonly=True)
    Index(tmp_path / "kb.sqlite3").close()
    with Index(tmp_path / "kb.sqlite3", readonly=True) as ro, pytest.raises(sqlite3.OperationalError):
        ro.upsert_document(*doc(1, 1))


def test_a_file_that_is_not_a_database_is_reported(tmp_path):
    path = tmp_path / "kb.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(IndexError_, match="kb reindex"):
        Index(path)


def test_analysed_text_is_what_fts_indexes(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        record, chunks = doc(1, 1)
        chunks = [ChunkRecord(chunks[0].id, record.id, 1, 1, 1, 5, "黑豹队的防守 ภาษาไทย Engines", "h")]
        index.upsert_document(record, chunks)
        body = index.conn.execute("SELECT body FROM chunks_fts").fetchone()[0]
        assert body == analysis.index_body("黑豹队的防守 ภาษาไทย Engines")
        assert index.document_frequencies(["防守", "engin", "absent"]) == {"防守": 1, "engin": 1}
