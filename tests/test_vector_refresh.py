"""The vector cache brought up to date by what changed: a refresh reads only the changed rows and ranks as
a full load does; a reindex, a model change, another dimension or another index file load it in full."""

from __future__ import annotations

import sqlite3
from collections import Counter
from contextlib import closing

import numpy as np
import pytest
import structlog

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import UrlEmbedder
from knowledge.retrieval.search import Meaning, search
from knowledge.retrieval.vectors import VectorCache
from knowledge.store.index import Index
from knowledge.store.records import ChunkRecord, DocumentRecord
from knowledge.store.vectors import encode
from tests.conftest import ingest_texts, make_settings
from tests.test_vectors import SMALL_CHUNKS, vector_rows

# Many chunks each, so that English and Chinese have language means of their own (MIN_GROUP)
# and Thai (6 chunks) has not, until a second Thai document arrives.
CORPUS = {
    "herons.md": "# Herons\n\n"
    + "\n".join(f"Line {n}: the heron count at pond {n} was {n * 7} birds." for n in range(1, 13))
    + "\n",
    "tea.md": "# 烏龍茶\n\n"
    + "\n".join(f"第{n}段：烏龍茶是一種半發酵的茶，主要產於台灣和福建的第{n}座茶園。" for n in range(1, 13))
    + "\n",
    "rice.md": "# ข้าวหอมมะลิ\n\n"
    + "\n".join(f"ข้อ {n}: ข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือ แปลงที่ {n}" for n in range(1, 6))
    + "\n",
}
FLOOD = "# น้ำท่วม\n\n" + "\n".join(
    f"ข้อ {n}: น้ำท่วมใหญ่ที่กรุงเทพมหานครเกิดขึ้นในปี พ.ศ. 2554 เขตที่ {n}" for n in range(1, 5)
)
QUESTIONS = [
    "How many herons at pond 6?",
    "烏龍茶產於哪裡？",
    "ข้าวหอมมะลิปลูกที่ไหน",
    "น้ำท่วม 2554",
    "Varn valley",
]


@pytest.fixture
def corpus(tmp_path, fake_embeddings) -> tuple:
    """CORPUS ingested in small chunks, every chunk embedded: (settings, embedder)."""
    settings = make_settings(tmp_path / "kb", **SMALL_CHUNKS)
    ingest_texts(settings, CORPUS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
    return settings, embedder


def assert_as_a_full_load(cache: VectorCache, index: Index, queries: list[tuple[np.ndarray, str]]) -> None:
    """Everything the cache answers is what a cache loaded from scratch answers, bit for bit."""
    fresh = VectorCache(cache.model, exact_max=cache.exact_max, prefilter=cache.prefilter)
    assert fresh.refresh(index) == "full"
    rows = index.conn.execute(
        "SELECT rowid, length(vec) FROM chunk_vectors WHERE model = ? ORDER BY rowid", (cache.model,)
    ).fetchall()
    stored = {r for r, size in rows if size == rows[-1][1]}  # of the newest dimension
    assert cache.size == fresh.size == len(stored)
    lang = dict(index.conn.execute("SELECT rowid, lang FROM chunk_vectors WHERE model = ?", (cache.model,)))
    assert cache.group_counts() == fresh.group_counts() == dict(Counter(lang[r] for r in stored))
    for raw, text in queries:
        query = cache.query_vector(raw, text)
        assert np.array_equal(query, fresh.query_vector(raw, text))
        everything = cache.nearest(query, cache.size + 1)
        assert everything == fresh.nearest(query, fresh.size + 1) and {r for r, _ in everything} == stored
        assert cache.nearest(query, 5) == fresh.nearest(query, 5)
        rowids = sorted(stored) + [max(stored, default=0) + 1]  # and one with no vector
        assert cache.cosines(query, rowids) == fresh.cosines(query, rowids)
        assert cache.groups_of(rowids) == fresh.groups_of(rowids)
        assert cache.reference(query) == fresh.reference(query)


def question_vectors(embedder: UrlEmbedder) -> list[tuple[np.ndarray, str]]:
    return list(zip(embedder.embed(QUESTIONS, "query"), QUESTIONS, strict=True))


def raw_file(settings, prefix: str):
    return next(p for p in settings.raw.iterdir() if p.name.startswith(prefix))


def add_flood(settings, ingestor: Ingestor) -> None:
    path = settings.inbox / "flood.md"
    path.write_text(FLOOD, encoding="utf-8")
    assert ingestor.ingest(path).status == "indexed"


def delete_herons(settings, ingestor: Ingestor) -> None:
    raw = raw_file(settings, "herons")
    raw.unlink()
    assert ingestor.sync_raw(raw.name) == "deleted"


def rewrite_tea(settings, ingestor: Ingestor) -> None:
    raw = raw_file(settings, "tea")
    raw.write_text(raw.read_text(encoding="utf-8").replace("第7座茶園", "第7座高山茶園"), encoding="utf-8")
    assert ingestor.sync_raw(raw.name) == "indexed"


def reuse_the_last_rowids(settings, ingestor: Ingestor) -> None:
    def rowids(title: str) -> set[int]:
        sql = "SELECT c.rowid FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.title = ?"
        return {r for (r,) in ingestor.index.conn.execute(sql, (title,))}

    rice = rowids("ข้าวหอมมะลิ")  # ingested last: it holds the highest rowids
    raw = raw_file(settings, "rice")
    raw.unlink()
    ingestor.sync_raw(raw.name)
    add_flood(settings, ingestor)
    assert rice <= rowids("น้ำท่วม")  # SQLite gave the new chunks the rowids just freed


def reindex(settings, ingestor: Ingestor) -> None:
    ingestor.reindex()  # every chunk deleted and inserted again: rowids from 1, in another order


@pytest.mark.parametrize(
    "change",
    [add_flood, delete_herons, rewrite_tea, reuse_the_last_rowids, reindex],
    ids=lambda f: f.__name__,
)
def test_a_refresh_reads_only_what_changed_and_equals_a_full_load(corpus, change):
    settings, embedder = corpus
    with Index(settings.index_path) as index:
        queries = question_vectors(embedder)
        cache = VectorCache(embedder.name, full_share=1.0)  # even a reindex is read as changes
        assert cache.refresh(index) == "full" and cache.size == 42
        assert cache.refresh(index) == "unchanged"
        before = vector_rows(index)
        change(settings, Ingestor(settings, index, ApproxCounter()))
        assert cache.refresh(index) == "incremental"  # chunks changed; some vectors may be missing
        assert_as_a_full_load(cache, index, queries)
        if embed_missing(index, embedder):
            assert cache.refresh(index) == "incremental"
            assert_as_a_full_load(cache, index, queries)
        assert vector_rows(index) != before  # the change reached the vectors


def test_a_reindex_reloads_in_full_by_default_and_a_refresh_with_no_change_does_nothing(corpus):
    settings, embedder = corpus
    with Index(settings.index_path) as index:
        cache = VectorCache(embedder.name)
        cache.refresh(index)
        ingestor = Ingestor(settings, index, ApproxCounter())
        add_flood(settings, ingestor)
        embed_missing(index, embedder)
        with structlog.testing.capture_logs() as logs:
            assert cache.refresh(index) == "incremental"
            assert cache.refresh(index) == "unchanged"
            ingestor.reindex()  # every vector row written again: more than half changed
            assert cache.refresh(index) == "full"
        assert_as_a_full_load(cache, index, question_vectors(embedder))
    reloads = [e for e in logs if e["event"] == "vectors.reload"]
    assert [e["mode"] for e in reloads] == ["incremental", "full"]
    assert (reloads[0]["added"], reloads[0]["replaced"], reloads[0]["removed"]) == (8, 0, 0)
    assert reloads[1]["vectors"] == 50


def test_a_model_change_is_followed_by_the_caches_of_both_models(corpus, fake_embeddings):
    settings, old = corpus
    new = UrlEmbedder(fake_embeddings.base_url, "model-b")
    with Index(settings.index_path) as index:
        queries = question_vectors(old)
        old_cache, new_cache = VectorCache(old.name), VectorCache(new.name)
        assert (old_cache.refresh(index), new_cache.refresh(index)) == ("full", "full")
        embed_missing(index, new, batch=4, limit=16)  # the first vectors of the new model
        assert new_cache.refresh(index) == "full"  # it had none: nothing to build on
        for _ in range(2):  # the backfill goes on, batch after batch
            embed_missing(index, new, batch=4, limit=8)
            assert (old_cache.refresh(index), new_cache.refresh(index)) == ("incremental", "incremental")
            assert_as_a_full_load(old_cache, index, queries)
            assert_as_a_full_load(new_cache, index, queries)
        assert (old_cache.size, new_cache.size) == (42 - 32, 32)


def test_a_vector_of_another_dimension_means_a_full_load(corpus):
    settings, embedder = corpus
    cache = VectorCache(embedder.name)
    with Index(settings.index_path) as index:
        cache.refresh(index)
        add_flood(settings, Ingestor(settings, index, ApproxCounter()))
        rowid, sha, _, _ = index.chunks_without_vectors(embedder.name, limit=1)[0]
        index.store_vectors(embedder.name, [(rowid, sha, "thai", encode(np.ones(32) / np.sqrt(32)))])
        assert cache.refresh(index) == "full"  # the server changed its dimension: the newest size wins
        assert cache.size == 1
        assert_as_a_full_load(cache, index, [(np.ones(32, dtype=np.float32) / np.sqrt(32), "น้ำท่วม")])


def test_another_index_file_in_the_same_place_means_a_full_load(corpus):
    settings, embedder = corpus
    cache = VectorCache(embedder.name)
    with Index(settings.index_path) as index:
        cache.refresh(index)
        first, epoch = vector_rows(index), index.vector_epoch()
    for path in settings.index_path.parent.glob(settings.index_path.name + "*"):
        path.unlink()  # the index deleted, and another built in its place: same rowids, other texts
    ingest_texts(settings, {**CORPUS, "herons.md": CORPUS["herons.md"].replace("heron", "egret")})
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        index.set_meta("vector_epoch", str(epoch + 1))  # and further along than the first
        second = vector_rows(index)
        assert [r for r, _, _ in second] == [r for r, _, _ in first] and second != first
        assert cache.refresh(index) == "full"
        assert_as_a_full_load(cache, index, question_vectors(embedder))


def test_a_big_cache_refreshed_after_changes_ranks_through_sign_codes_as_a_fresh_one(tmp_path):
    rng = np.random.default_rng(5)
    dim = 64
    topics = rng.standard_normal((30, dim))
    thai_bias = 2.0 * rng.standard_normal(dim)

    def vectors(n: int, thai: bool) -> np.ndarray:
        v = 2.0 * np.ones(dim) + topics[rng.integers(0, 30, n)] + 0.6 * rng.standard_normal((n, dim))
        v += thai_bias if thai else 0.0
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def add(index: Index, name: str, n: int, *, thai: bool = False) -> None:
        doc = DocumentRecord(
            name,
            f"raw/{name}.md",
            name,
            f"{name}.md",
            None,
            None,
            name,
            "text",
            "r",
            n,
            "2026-12-01T00:00:00+00:00",
        )
        index.upsert_document(
            doc, [ChunkRecord(f"{name}-{i}", name, i, i, i, 1, f"{name} {i}", f"{name}{i}") for i in range(n)]
        )
        rows = index.conn.execute(
            "SELECT rowid, text_sha256 FROM chunks WHERE document_id = ? ORDER BY seq", (name,)
        )
        group = "thai" if thai else "other"
        index.store_vectors(
            "m", [(r, h, group, encode(v)) for (r, h), v in zip(rows, vectors(n, thai), strict=True)]
        )

    with Index(tmp_path / "kb.sqlite3") as index:
        add(index, "a", 1500)
        add(index, "b", 1000, thai=True)
        add(index, "c", 500)
        cache = VectorCache("m", exact_max=1000, prefilter=300)
        assert cache.refresh(index) == "full"
        index.delete_document("a")  # the lowest rowids gone
        add(index, "d", 40, thai=True)
        add(index, "c", 300)  # a document replaced by a shorter one
        assert cache.refresh(index) == "incremental"
        queries = [(v.astype(np.float32), "a question") for v in vectors(10, False)]
        queries += [(v.astype(np.float32), "คำถาม") for v in vectors(10, True)]
        assert_as_a_full_load(cache, index, queries)
        assert cache.reference(cache.query_vector(*queries[0]))[1] != 0.0  # enough rows for the sample


def test_an_index_made_before_vector_stamps_is_read_then_upgraded_in_place(corpus):
    settings, embedder = corpus
    with closing(sqlite3.connect(settings.index_path)) as conn:  # as kb wrote it before stamps
        conn.executescript(
            "DROP TRIGGER chunk_vectors_stamp_insert; DROP TRIGGER chunk_vectors_stamp_update;"
            " DROP INDEX chunk_vectors_stamp; ALTER TABLE chunk_vectors DROP COLUMN stamp;"
            " DELETE FROM meta WHERE key = 'index_id'; DROP TABLE migrations;"  # nor did kb record migrations
        )
        assert [c[1] for c in conn.execute("PRAGMA table_info(chunk_vectors)")] == [
            "rowid",
            "model",
            "lang",
            "vec",
        ]
    cache = VectorCache(embedder.name)
    with Index(settings.index_path, readonly=True) as index:  # a reader does not change the file
        assert index.vector_changes(embedder.name, since=0) is None
        assert cache.refresh(index) == "full" and cache.size == 42
        hybrid = search(index, "heron count pond 6", k=1, meaning=Meaning(embedder, cache))
        assert hybrid[0].title == "Herons"
    with Index(settings.index_path) as index:  # the first writer adds the column: old rows stamp 0
        assert {s for (s,) in index.conn.execute("SELECT stamp FROM chunk_vectors")} == {0}
        ingestor = Ingestor(settings, index, ApproxCounter())
        add_flood(settings, ingestor)
        embed_missing(index, embedder)
    with Index(settings.index_path, readonly=True) as index:
        assert cache.refresh(index) == "full"  # the file has an id now, which the cache has not seen
        assert_as_a_full_load(cache, index, question_vectors(embedder))
    with Index(settings.index_path) as index:
        delete_herons(settings, Ingestor(settings, index, ApproxCounter()))
    with Index(settings.index_path, readonly=True) as index:
        assert cache.refresh(index) == "incremental"
        assert_as_a_full_load(cache, index, question_vectors(embedder))
    with Index(settings.index_path) as index:
        assert index.integrity_errors() == []
