"""The index's schema: numbered migrations, recorded once; an index made before they were recorded
opens as it is, keeps everything in it, and is brought up to date."""

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import UrlEmbedder
from knowledge.retrieval.search import Meaning, search
from knowledge.store.index import Index
from knowledge.store.schema import MIGRATIONS
from tests.conftest import at_once, ingest_texts, make_settings

RECORDED = [
    (1, "m001_tables"), (2, "m002_vector_stamps"), (3, "m003_use_vectors"), (4, "m004_source_files"), (5, "m005_notes"),
    (6, "m006_source_url"), (7, "m007_note_dates"), (8, "m008_web_duplicates"),
]  # fmt: skip

DOCS = {
    "lake.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n",
    "tea.md": "# 烏龍茶\n\n烏龍茶是一種半發酵的茶，主要產於台灣和福建。\n",
    "heron.md": "# Herons\n\nSix grey herons nest by the pond behind the mill every spring.\n",
}

# The schema as kb made it before migrations were recorded (SCHEMA_VERSION "1"), word for word.
OLD_SCHEMA = (Path(__file__).resolve().parent / "data" / "old_schema.sql").read_text(encoding="utf-8")
_STAMP = "(SELECT COALESCE(max(CAST(value AS INTEGER)), 0) + 1 FROM meta WHERE key = 'vector_epoch')"
OLD_VECTOR_STAMPS = (
    "CREATE INDEX IF NOT EXISTS chunk_vectors_stamp ON chunk_vectors (model, stamp)",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_insert AFTER INSERT ON chunk_vectors BEGIN"
    f" UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_update AFTER UPDATE OF rowid, model, lang, vec"
    f" ON chunk_vectors BEGIN UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
)
# What an earlier kb did not make yet: the vectors' stamps, summaries and background vectors.
STAMP_COLUMN = (
    ",\n    stamp INTEGER NOT NULL DEFAULT 0  -- set by the triggers below (see Index.vector_changes)"
)
LATER_TABLES = ("summaries", "background_vectors")


def old_schema(*, stamps: bool) -> str:
    """The old script; without ``stamps``, as kb wrote it before vector stamps, summaries and background."""
    if stamps:
        return OLD_SCHEMA
    assert STAMP_COLUMN in OLD_SCHEMA
    statements = OLD_SCHEMA.replace(STAMP_COLUMN, "").split(";")
    kept = [s for s in statements if not any(f"EXISTS {table} (" in s for table in LATER_TABLES)]
    assert len(kept) == len(statements) - len(LATER_TABLES)
    return ";".join(kept)


@pytest.fixture
def made_now(tmp_path, fake_embeddings) -> tuple[Path, UrlEmbedder]:
    """An index of DOCS with every chunk embedded and a summary, made by this kb: (its path, embedder)."""
    settings = make_settings(tmp_path / "now")
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        lake = next(d for d in index.documents() if d.title == "Lake Quillan")
        index.put_summary(lake, "model", "en", "A deep lake that never freezes.", "2026-12-03T00:00:00+00:00")
    return settings.index_path, embedder


def made_by_old_kb(path: Path, rows_from: Path, *, stamps: bool) -> None:
    """An index file as a kb from before recorded migrations made it, holding the rows of ``rows_from``."""
    path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(old_schema(stamps=stamps))
        for statement in OLD_VECTOR_STAMPS if stamps else ():
            conn.execute(statement)
        conn.execute("ATTACH ? AS now", (str(rows_from),))
        conn.execute("BEGIN")
        conn.execute("INSERT INTO meta SELECT key, value FROM now.meta")
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
        for table in ("documents", "chunks", "term_df", "ingests") + (("summaries",) if stamps else ()):
            conn.execute(f"INSERT INTO main.{table} SELECT * FROM now.{table}")
        conn.execute(
            "INSERT INTO main.chunks_fts (rowid, title, body) SELECT rowid, title, body FROM now.chunks_fts"
        )
        conn.execute(
            "INSERT INTO main.chunk_vectors (rowid, model, lang, vec) SELECT rowid, model, lang, vec FROM now.chunk_vectors"
        )
        conn.execute("COMMIT")
        conn.execute("DETACH now")


def contents(path: Path) -> dict[str, list[tuple]]:
    """What an index holds, table by table (vectors without their stamps)."""
    with closing(sqlite3.connect(path)) as conn:
        return {
            "documents": conn.execute("SELECT * FROM documents ORDER BY id").fetchall(),
            "chunks": conn.execute("SELECT rowid, * FROM chunks ORDER BY rowid").fetchall(),
            "fts": conn.execute("SELECT rowid, title, body FROM chunks_fts ORDER BY rowid").fetchall(),
            "term_df": conn.execute("SELECT * FROM term_df ORDER BY term").fetchall(),
            "ingests": conn.execute("SELECT * FROM ingests ORDER BY id").fetchall(),
            "vectors": conn.execute(
                "SELECT rowid, model, lang, vec FROM chunk_vectors ORDER BY rowid"
            ).fetchall(),
            "meta": conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('index_id', 'analyzer', 'chunk_total', 'vector_epoch')"
                " ORDER BY key"
            ).fetchall(),
        }


def recorded(path: Path) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT n, name FROM migrations ORDER BY n").fetchall()


def test_a_new_index_records_its_migrations_once(tmp_path):
    path = tmp_path / "kb.sqlite3"
    for _ in range(2):
        with Index(path) as index:
            assert index.meta("schema_version") is None  # the migrations table says which schema it has
    assert recorded(path) == RECORDED
    with closing(sqlite3.connect(path)) as conn:
        columns = [c[1] for c in conn.execute("PRAGMA table_info(chunk_vectors)")]
    assert columns == ["rowid", "model", "lang", "vec", "stamp"]


def shape(path: Path) -> dict[tuple[str, str], list[tuple]]:
    """Every table, index and trigger of a file (but the migrations table), with a table's columns."""
    with closing(sqlite3.connect(path)) as conn:
        names = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name != 'migrations'"
        ).fetchall()
        return {
            (t, n): conn.execute(f"PRAGMA table_info({n})").fetchall() if t == "table" else []
            for t, n in names
        }


def test_the_migrations_make_the_schema_the_old_script_made(tmp_path):
    with closing(sqlite3.connect(tmp_path / "old.sqlite3")) as conn:
        conn.executescript(OLD_SCHEMA)
        for statement in OLD_VECTOR_STAMPS:
            conn.execute(statement)
        for later in MIGRATIONS[2:]:  # what was added after the old script: USE vectors, the sources' records
            later(conn)
        conn.commit()  # as the runner's transaction does: a later migration's DDL may follow an UPDATE
    Index(tmp_path / "new.sqlite3").close()
    new = shape(tmp_path / "new.sqlite3")
    assert new == shape(tmp_path / "old.sqlite3")
    assert [c[1] for c in new[("table", "use_vectors")]] == ["text_sha256", "model", "script", "vec"]


def test_a_new_index_opened_by_several_writers_at_once_is_migrated_once(tmp_path):
    path = tmp_path / "kb.sqlite3"
    assert at_once(lambda: Index(path).close(), threads=6) == []
    assert recorded(path) == RECORDED
    with Index(path) as index:
        assert index.integrity_errors() == [] and len(index.meta("index_id") or "") == 32


@pytest.mark.parametrize("stamps", [True, False], ids=["as-made-last", "before-stamps"])
def test_an_index_made_before_recorded_migrations_keeps_everything_and_is_brought_up_to_date(
    tmp_path, made_now, stamps
):
    now, embedder = made_now
    old = tmp_path / "old" / "kb.sqlite3"
    made_by_old_kb(old, now, stamps=stamps)
    before = contents(old)
    assert before["documents"] and before["vectors"] and before == contents(now)

    with Index(old, readonly=True) as index:  # a reader opens it as it is, and changes nothing
        assert (index.vector_changes(embedder.name, since=0) is None) is not stamps
        assert search(index, "How deep is Lake Quillan?", k=1)[0].title == "Lake Quillan"
    with closing(sqlite3.connect(old)) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'migrations'").fetchone() is None

    for _ in range(2):  # the first writer adopts it, the next finds nothing to do
        with Index(old) as index:
            assert index.meta("schema_version") is None
            assert index.integrity_errors() == []
    assert recorded(old) == RECORDED
    assert contents(old) == before  # nothing lost, nothing rebuilt: same ids, rowids, terms, vectors

    with Index(old) as index:
        if not stamps:  # the column was added: the rows an older kb wrote are stamped 0
            assert {s for (s,) in index.conn.execute("SELECT stamp FROM chunk_vectors")} == {0}
        assert embed_missing(index, embedder) == 0  # every vector is still there: nothing to embed again
        assert [r.title for r in search(index, "Lake Quillan depth metres", k=1)] == ["Lake Quillan"]
        meaning = search(index, "Six grey herons nest by the pond", k=1, meaning=Meaning.of(embedder))
        assert meaning[0].title == "Herons"
        lake = next(d for d in index.documents() if d.title == "Lake Quillan")
        if stamps:
            assert index.summary(lake.id).text == "A deep lake that never freezes."
        else:  # the summaries table an older kb did not have is there now
            assert index.summary(lake.id) is None
            index.put_summary(
                lake, "excerpt", "en", "Lake Quillan is 317 metres deep.", "2026-12-04T00:00:00+00:00"
            )
            assert index.summary(lake.id).kind == "excerpt"
        assert len(index.vector_changes(embedder.name, since=0).rowids) == len(before["vectors"])
        epoch = index.vector_epoch()
        rowid, model, lang, vec = before["vectors"][0]
        sha = index.conn.execute("SELECT text_sha256 FROM chunks WHERE rowid = ?", (rowid,)).fetchone()[0]
        assert index.store_vectors(model, [(rowid, sha, lang, vec)]) == 1
        changes = index.vector_changes(model, since=epoch)  # the triggers stamp what is written now
        assert changes is not None and [r for r, _, _ in changes.rows] == [rowid]
